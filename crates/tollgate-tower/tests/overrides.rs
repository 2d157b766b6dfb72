//! The layer with overrides and tiers (`with_overrides`, `with_tier`): a
//! key's override decides in place of its policy (its numbers in the
//! headers, the count carried over), `block` refuses and `allow` lifts the
//! limit, a request's tier picks its parameters, an unknown tier is a
//! `400`, and overrides kept in a real Redis by `RedisOverrides` reach a
//! layer that holds the same set.

use std::convert::Infallible;
use std::time::Duration;

use http::{HeaderName, Request, Response, StatusCode};
use tollgate::overrides::{Limits, Override, Overrides, Selector};
use tollgate::store::redis::{RedisOverrides, RedisStore};
use tollgate::{MemoryStore, Policy};
use tollgate_testkit::RedisServer;
use tollgate_tower::RateLimitLayer;
use tollgate_tower::extract::Header;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

fn header(name: &'static str) -> Header {
    Header::new(HeaderName::from_static(name))
}

fn api() -> Policy {
    Policy::fixed_window("api", 2, Duration::from_secs(3600))
        .unwrap()
        .with_tier(
            "pro",
            &Limits {
                limit: Some(10),
                ..Limits::default()
            },
        )
        .unwrap()
}

fn limits(n: u64) -> Override {
    Override::limits(Limits {
        limit: Some(n),
        ..Limits::default()
    })
}

type Answer = (StatusCode, String);

/// A service behind `layer`; each call sends `user` (and `plan`, if any).
fn app(
    layer: RateLimitLayer,
) -> impl Service<
    Request<String>,
    Response = Response<tollgate_tower::ResponseBody<String>>,
    Error = Infallible,
> + Clone {
    ServiceBuilder::new()
        .layer(layer)
        .service(service_fn(|_: Request<String>| async {
            Ok::<_, Infallible>(Response::new("ok".to_string()))
        }))
}

async fn call<S>(app: &S, user: &str, plan: Option<&str>) -> Answer
where
    S: Service<
            Request<String>,
            Response = Response<tollgate_tower::ResponseBody<String>>,
            Error = Infallible,
        > + Clone,
{
    let mut request = Request::builder().header("x-user", user);
    if let Some(plan) = plan {
        request = request.header("x-plan", plan);
    }
    let response = app
        .clone()
        .oneshot(request.body(String::new()).unwrap())
        .await
        .unwrap();
    let policy = response
        .headers()
        .get("ratelimit-policy")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (response.status(), policy)
}

#[tokio::test]
async fn overrides_set_in_code_apply_and_can_change_at_any_time() {
    let overrides = Overrides::new();
    let policy = api();
    overrides
        .set(&policy, Selector::parse(b"acme").unwrap(), limits(5))
        .unwrap();
    overrides
        .set(
            &policy,
            Selector::parse(b"bad*").unwrap(),
            Override::block(),
        )
        .unwrap();
    overrides
        .set(
            &policy,
            Selector::parse(b"health").unwrap(),
            Override::allow(),
        )
        .unwrap();
    let layer = RateLimitLayer::builder(MemoryStore::new())
        .limit(policy.clone(), header("x-user"))
        .with_overrides(overrides.clone())
        .build()
        .unwrap();
    let app = app(layer);

    for i in 0..5 {
        let (status, policy) = call(&app, "acme", None).await;
        assert_eq!(status, StatusCode::OK, "request {i}");
        assert_eq!(policy, "\"api\";q=5;w=3600");
    }
    assert_eq!(
        call(&app, "acme", None).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Raised while the layer runs: the count carries over (5 taken of 7).
    overrides
        .set(&api(), Selector::parse(b"acme").unwrap(), limits(7))
        .unwrap();
    assert_eq!(
        call(&app, "acme", None).await,
        (StatusCode::OK, "\"api\";q=7;w=3600".into())
    );
    assert_eq!(call(&app, "acme", None).await.0, StatusCode::OK);
    assert_eq!(
        call(&app, "acme", None).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );

    assert_eq!(
        call(&app, "bad-bot", None).await.0,
        StatusCode::TOO_MANY_REQUESTS,
        "blocked"
    );
    for _ in 0..5 {
        let (status, policy) = call(&app, "health", None).await;
        assert_eq!(
            (status, policy.as_str()),
            (StatusCode::OK, ""),
            "allowed: no limit"
        );
    }
    // No override: the policy's 2.
    assert_eq!(call(&app, "other", None).await.0, StatusCode::OK);
    assert_eq!(call(&app, "other", None).await.0, StatusCode::OK);
    assert_eq!(
        call(&app, "other", None).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Removed: the policy again, with acme's count (7 taken of 2).
    assert!(overrides.remove("api", &Selector::parse(b"acme").unwrap()));
    assert_eq!(
        call(&app, "acme", None).await,
        (StatusCode::TOO_MANY_REQUESTS, "\"api\";q=2;w=3600".into())
    );
}

#[tokio::test]
async fn a_tier_from_an_extractor_picks_the_parameters() {
    let overrides = Overrides::new();
    overrides
        .set(&api(), Selector::parse(b"acme").unwrap(), limits(3))
        .unwrap();
    let layer = RateLimitLayer::builder(MemoryStore::new())
        .limit(api(), header("x-user"))
        .limit(
            Policy::fixed_window("flat", 100, Duration::from_secs(60)).unwrap(),
            header("x-user"),
        )
        .with_overrides(overrides)
        .with_tier(header("x-plan"))
        .build()
        .unwrap();
    let app = app(layer);
    let (status, policy) = call(&app, "bob", Some("pro")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        policy.contains("\"api\";q=10;w=3600") && policy.contains("\"flat\";q=100"),
        "{policy}"
    );
    for _ in 0..9 {
        assert_eq!(call(&app, "bob", Some("pro")).await.0, StatusCode::OK);
    }
    assert_eq!(
        call(&app, "bob", Some("pro")).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    // No tier: the policy's own 2 (bob's 10 already spent).
    assert_eq!(
        call(&app, "carol", None).await.1,
        "\"api\";q=2;w=3600, \"flat\";q=100;w=60"
    );
    // A key's override wins over the tier.
    assert!(
        call(&app, "acme", Some("pro"))
            .await
            .1
            .contains("\"api\";q=3")
    );
    // An unknown tier: 400, and nothing consumed.
    assert_eq!(
        call(&app, "dave", Some("gold")).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(call(&app, "dave", None).await.0, StatusCode::OK);
    assert_eq!(call(&app, "dave", None).await.0, StatusCode::OK);

    // A tier extractor with no tiered policy to read it is a setup error.
    let err = RateLimitLayer::builder(MemoryStore::new())
        .limit(
            Policy::fixed_window("flat", 1, Duration::from_secs(1)).unwrap(),
            header("x-user"),
        )
        .with_tier(header("x-plan"))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("tier"), "{err}");
}

#[tokio::test]
async fn overrides_kept_in_redis_reach_the_layer() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = api();
    let held = Overrides::new();
    // Another instance writes; this one syncs into the set its layer holds.
    let writer = RedisOverrides::new(store.clone(), Overrides::new());
    writer
        .set(&policy, Selector::parse(b"acme").unwrap(), limits(4))
        .await
        .unwrap();
    let reader = RedisOverrides::new(store.clone(), held.clone());
    let layer = RateLimitLayer::builder(store)
        .limit(policy.clone(), header("x-user"))
        .with_overrides(held)
        .build()
        .unwrap();
    let app = app(layer);
    assert_eq!(
        call(&app, "acme", None).await.1,
        "\"api\";q=2;w=3600",
        "not synced yet"
    );
    reader.sync(std::slice::from_ref(&policy)).await.unwrap();
    assert_eq!(call(&app, "acme", None).await.1, "\"api\";q=4;w=3600");
}
