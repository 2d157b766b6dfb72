//! The middleware against `tower-test` mocks: readiness and wake-ups, the
//! decision in `call`, the answers and their headers, several policies,
//! leases and delays.
//!
//! The mock service panics when a clone that was not made ready is called,
//! so every test here also checks that the middleware never does that.
//!
//! Kept whole on purpose: one concern, the middleware's contract with `tower-test`, on one set of mocks.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use http::{HeaderName, Request, Response, StatusCode};
use http_body_util::BodyExt;
use tokio_test::{assert_pending, assert_ready_ok, task};
use tollgate::store::{BoxFuture, Valid};
use tollgate::{
    Decision, Error, Lease, LeaseId, ManualClock, MemoryStore, Policy, Store, StoreErrorKind,
};
use tollgate_tower::extract::{Global, Header, PeerIp};
use tollgate_tower::{
    CheckMode, QUOTA_EXCEEDED, RateLimit, RateLimitLayer, ResponseBody, ResponseFormat,
};
use tower_test::mock;

type Mock = mock::Mock<Request<String>, Response<String>>;
type Handle = mock::Handle<Request<String>, Response<String>>;
type Service = mock::Spawn<RateLimit<Mock>>;

/// The start of a minute, in µs since the epoch (fixed windows align to it).
const MINUTE: u64 = 1_000_000_020 * 1_000_000;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn header(name: &'static str) -> Header {
    Header::new(HeaderName::from_static(name))
}

fn request_as(user: &str) -> Request<String> {
    Request::builder()
        .header("x-user", user)
        .body(String::new())
        .unwrap()
}

/// Sends one request; when the inner service is called, answers "ok".
async fn send(
    service: &mut Service,
    handle: &mut Handle,
    request: Request<String>,
) -> Response<ResponseBody<String>> {
    handle.allow(1);
    assert_ready_ok!(service.poll_ready());
    let mut response = task::spawn(service.call(request));
    if let Poll::Ready(result) = response.poll() {
        // Answered by the middleware: the inner service saw nothing.
        assert_pending!(handle.poll_request());
        return result.unwrap();
    }
    let (_, reply) = handle
        .next_request()
        .await
        .expect("the inner service is called");
    reply.send_response(Response::new("ok".to_owned()));
    assert!(response.is_woken());
    assert_ready_ok!(response.poll())
}

fn get<'a>(response: &'a Response<ResponseBody<String>>, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

async fn json(response: Response<ResponseBody<String>>) -> serde_json::Value {
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

/// Lets spawned tasks (lease releases) run.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn readiness_is_the_inner_services_and_wakes_the_caller() {
    let policy = Policy::fixed_window("api", 5, secs(60)).unwrap();
    let (mut service, mut handle): (Service, Handle) =
        mock::spawn_layer(RateLimitLayer::new(MemoryStore::new(), policy, Global));
    handle.allow(0);
    assert_pending!(service.poll_ready());
    assert!(!service.is_woken());
    handle.allow(1);
    assert!(service.is_woken());
    assert_ready_ok!(service.poll_ready());
}

#[tokio::test]
async fn decides_in_call_and_calls_the_service_that_was_made_ready() {
    let policy = Policy::fixed_window("api", 5, secs(60)).unwrap();
    let (mut service, mut handle): (Service, Handle) =
        mock::spawn_layer(RateLimitLayer::new(MemoryStore::new(), policy, Global));
    handle.allow(2);
    // Two requests in flight at once: each takes the service made ready
    // for it; the clone left behind is made ready by the next poll_ready.
    assert_ready_ok!(service.poll_ready());
    let mut first = task::spawn(service.call(Request::new("1".to_owned())));
    assert_ready_ok!(service.poll_ready());
    let mut second = task::spawn(service.call(Request::new("2".to_owned())));
    // Nothing reaches the inner service before the decision is polled.
    assert_pending!(handle.poll_request());
    assert_pending!(second.poll());
    assert_pending!(first.poll());
    let (r2, reply2) = handle.next_request().await.unwrap();
    let (r1, reply1) = handle.next_request().await.unwrap();
    assert_eq!((r1.body().as_str(), r2.body().as_str()), ("1", "2"));
    reply1.send_response(Response::new("one".to_owned()));
    reply2.send_response(Response::new("two".to_owned()));
    assert!(first.is_woken() && second.is_woken());
    let one = assert_ready_ok!(first.poll());
    let two = assert_ready_ok!(second.poll());
    assert_eq!(one.into_body().collect().await.unwrap().to_bytes(), "one");
    assert_eq!(two.into_body().collect().await.unwrap().to_bytes(), "two");
}

#[tokio::test]
async fn allowed_and_denied_answers_carry_the_ratelimit_headers() {
    let clock = ManualClock::new(MINUTE + 10_500_000);
    let store = MemoryStore::with_clock(clock.clone());
    let policy = Policy::fixed_window("api", 3, secs(60)).unwrap();
    let (mut service, mut handle) = mock::spawn_layer(RateLimitLayer::new(store, policy, Global));

    let allowed = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(allowed.status(), StatusCode::OK);
    assert_eq!(get(&allowed, "ratelimit-policy"), "\"api\";q=3;w=60");
    // 49.5 s left in the window: rounded up.
    assert_eq!(get(&allowed, "ratelimit"), "\"api\";r=2;t=50");
    assert!(allowed.headers().get("retry-after").is_none());
    assert_eq!(
        allowed.into_body().collect().await.unwrap().to_bytes(),
        "ok"
    );

    send(&mut service, &mut handle, Request::default()).await;
    let last = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(get(&last, "ratelimit"), "\"api\";r=0;t=50");

    let denied = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(get(&denied, "retry-after"), "50");
    assert_eq!(get(&denied, "content-type"), "application/problem+json");
    assert_eq!(get(&denied, "ratelimit-policy"), "\"api\";q=3;w=60");
    assert_eq!(get(&denied, "ratelimit"), "\"api\";r=0;t=50");
    let problem = json(denied).await;
    assert_eq!(problem["type"], QUOTA_EXCEEDED);
    assert_eq!(problem["status"], 429);
    assert_eq!(problem["violated-policies"], serde_json::json!(["api"]));
    assert!(problem["title"].as_str().unwrap().contains("quota"));

    // The next window admits again.
    clock.advance(secs(50));
    let again = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(get(&again, "ratelimit"), "\"api\";r=2;t=60");
}

#[tokio::test]
async fn retry_after_is_rounded_up_to_whole_seconds() {
    // (offset into the window in µs, Retry-After): the wait left is
    // 60 s minus the offset.
    for (offset, expected) in [
        (57_000_000, "3"),
        (10_500_000, "50"),
        (59_999_999, "1"),
        (0, "60"),
        (59_000_001, "1"),
    ] {
        let store = MemoryStore::with_clock(ManualClock::new(MINUTE + offset));
        let policy = Policy::fixed_window("api", 1, secs(60)).unwrap();
        let (mut service, mut handle) =
            mock::spawn_layer(RateLimitLayer::new(store, policy, Global));
        send(&mut service, &mut handle, Request::default()).await;
        let denied = send(&mut service, &mut handle, Request::default()).await;
        assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(get(&denied, "retry-after"), expected, "offset {offset} µs");
    }
}

/// Per-user 2 a minute, everyone together 100 a minute.
fn two_policies(store: MemoryStore<ManualClock>, mode: CheckMode) -> RateLimitLayer {
    RateLimitLayer::builder(store)
        .limit(
            Policy::fixed_window("everyone", 100, secs(60)).unwrap(),
            Global,
        )
        .limit(
            Policy::fixed_window("per-user", 2, secs(60)).unwrap(),
            header("x-user"),
        )
        .check_mode(mode)
        .build()
        .unwrap()
}

fn remaining(store: &MemoryStore<ManualClock>, policy: &Policy, key: &[u8]) -> u64 {
    store.check_sync(policy, key, 0).unwrap().remaining
}

#[tokio::test]
async fn several_policies_pass_only_when_all_allow() {
    let everyone = Policy::fixed_window("everyone", 100, secs(60)).unwrap();
    let per_user = Policy::fixed_window("per-user", 2, secs(60)).unwrap();
    for mode in [CheckMode::Atomic, CheckMode::Sequential] {
        let store = MemoryStore::with_clock(ManualClock::new(MINUTE + 30_000_000));
        let (mut service, mut handle) = mock::spawn_layer(two_policies(store.clone(), mode));
        for _ in 0..2 {
            let ok = send(&mut service, &mut handle, request_as("alice")).await;
            assert_eq!(ok.status(), StatusCode::OK);
        }
        let denied = send(&mut service, &mut handle, request_as("alice")).await;
        assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS, "{mode:?}");
        assert_eq!(get(&denied, "retry-after"), "30");
        assert_eq!(
            get(&denied, "ratelimit-policy"),
            "\"everyone\";q=100;w=60, \"per-user\";q=2;w=60"
        );
        assert_eq!(
            json(denied).await["violated-policies"],
            serde_json::json!(["per-user"])
        );
        // Atomic: the denied request took nothing from `everyone`.
        // Sequential: `everyone` was checked first and consumed.
        let expected = match mode {
            CheckMode::Atomic => 98,
            _ => 97,
        };
        assert_eq!(
            remaining(&store, &everyone, b"global"),
            expected,
            "{mode:?}"
        );
        assert_eq!(remaining(&store, &per_user, b"alice"), 0);

        // Another user passes; a request without the header is only
        // counted by `everyone`.
        let bob = send(&mut service, &mut handle, request_as("bob")).await;
        assert_eq!(bob.status(), StatusCode::OK);
        let anonymous = send(&mut service, &mut handle, Request::default()).await;
        assert_eq!(anonymous.status(), StatusCode::OK);
        assert_eq!(
            get(&anonymous, "ratelimit-policy"),
            "\"everyone\";q=100;w=60"
        );
        assert_eq!(
            get(&anonymous, "ratelimit"),
            format!("\"everyone\";r={};t=30", expected - 2)
        );
    }
}

#[tokio::test]
async fn a_lease_is_held_until_the_body_ends_and_given_back_on_drop() {
    let store = MemoryStore::new();
    let policy = Policy::concurrency("in-flight", 1, secs(30)).unwrap();
    let (mut service, mut handle): (Service, Handle) =
        mock::spawn_layer(RateLimitLayer::new(store, policy, Global));

    // A request in flight holds the lease: the next one is denied.
    handle.allow(1);
    assert_ready_ok!(service.poll_ready());
    let mut in_flight = task::spawn(service.call(Request::default()));
    assert_pending!(in_flight.poll());
    let (_, unanswered) = handle.next_request().await.unwrap();
    let denied = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // A lease frees when any request ends, not when it expires.
    assert_eq!(get(&denied, "retry-after"), "1");
    assert_eq!(
        get(&denied, "ratelimit-policy"),
        "\"in-flight\";q=1;qu=\"concurrent-requests\""
    );
    assert_eq!(get(&denied, "ratelimit"), "\"in-flight\";r=0");

    // Dropping the future (a client that went away) gives it back.
    drop(in_flight);
    drop(unanswered);
    settle().await;
    let response = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(get(&response, "ratelimit"), "\"in-flight\";r=0");

    // The response's headers are out but its body is not: still in flight.
    settle().await;
    let denied = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // Reading the body to its end gives the lease back, even while the
    // body value lives on.
    let mut body = response.into_body();
    let data = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(data, "ok");
    assert!(body.frame().await.is_none());
    settle().await;
    let response = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(response.status(), StatusCode::OK);
    drop(body);

    // So does dropping the body unread.
    drop(response);
    settle().await;
    let response = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn a_leaky_bucket_delays_requests_instead_of_denying_them() {
    let clock = ManualClock::new(MINUTE);
    let store = MemoryStore::with_clock(clock);
    // One request a second leaves; up to 3 wait in the queue.
    let policy = Policy::leaky_bucket("shaped", 1, secs(1), 3).unwrap();
    let (mut service, mut handle): (Service, Handle) =
        mock::spawn_layer(RateLimitLayer::new(store, policy, Global));

    let first = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(first.status(), StatusCode::OK);

    // The second waits one second behind the first.
    handle.allow(1);
    assert_ready_ok!(service.poll_ready());
    let mut second = task::spawn(service.call(Request::default()));
    assert_pending!(second.poll());
    assert_pending!(handle.poll_request());
    tokio::time::advance(Duration::from_millis(999)).await;
    assert!(!second.is_woken());
    assert_pending!(second.poll());
    assert_pending!(handle.poll_request());
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(second.is_woken());
    assert_pending!(second.poll());
    let (_, reply) = handle.next_request().await.unwrap();
    reply.send_response(Response::new("late".to_owned()));
    let second = assert_ready_ok!(second.poll());
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(get(&second, "ratelimit"), "\"shaped\";r=1;t=2");

    // The queue holds 3: the third waits 2 s, the fourth does not fit.
    handle.allow(1);
    assert_ready_ok!(service.poll_ready());
    let mut third = task::spawn(service.call(Request::default()));
    assert_pending!(third.poll());
    let denied = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(get(&denied, "retry-after"), "1");
    tokio::time::advance(Duration::from_millis(2000)).await;
    assert_pending!(third.poll());
    assert!(handle.next_request().await.is_some());
}

/// A store whose every call fails with one error: a stand-in for a store
/// whose failure policy answers `StoreUnavailable`, and for a bare store
/// whose server is gone.
#[derive(Debug)]
struct Failing(Error);

impl Failing {
    fn fail<'a, T: Send + 'a>(&'a self) -> BoxFuture<'a, tollgate::Result<T>> {
        Box::pin(async move { Err(self.0.clone()) })
    }
}

impl Store for Failing {
    fn check_unchecked<'a>(
        &'a self,
        _: &'a Policy,
        _: &'a [u8],
        _: u64,
        _: Valid,
    ) -> BoxFuture<'a, tollgate::Result<Decision>> {
        self.fail()
    }
    fn reserve_unchecked<'a>(
        &'a self,
        _: &'a Policy,
        _: &'a [u8],
        _: u64,
        _: Duration,
        _: Valid,
    ) -> BoxFuture<'a, tollgate::Result<Decision>> {
        self.fail()
    }
    fn check_many_unchecked<'a>(
        &'a self,
        _: &'a [tollgate::Request<'a>],
        _: bool,
        _: Valid,
    ) -> BoxFuture<'a, tollgate::Result<Vec<Decision>>> {
        self.fail()
    }
    fn acquire_lease_unchecked<'a>(
        &'a self,
        _: &'a Policy,
        _: &'a [u8],
        _: Valid,
    ) -> BoxFuture<'a, tollgate::Result<Lease>> {
        self.fail()
    }
    fn release_lease_unchecked<'a>(
        &'a self,
        _: &'a Policy,
        _: &'a [u8],
        _: LeaseId,
        _: Valid,
    ) -> BoxFuture<'a, tollgate::Result<bool>> {
        self.fail()
    }
    fn reset_unchecked<'a>(
        &'a self,
        _: &'a Policy,
        _: &'a [u8],
        _: Valid,
    ) -> BoxFuture<'a, tollgate::Result<()>> {
        self.fail()
    }
    fn usage_unchecked<'a>(
        &'a self,
        _: &'a Policy,
        _: &'a [u8],
        _: tollgate::Usage,
        _: u64,
        _: Valid,
    ) -> BoxFuture<'a, tollgate::Result<Decision>> {
        self.fail()
    }
}

/// A store that runs no batch atomically (a `Store` of the user's own, say):
/// it refuses an atomic `check_many` with `NotAtomic`, consuming nothing,
/// and answers everything else as the memory store it wraps.
#[derive(Debug)]
struct NoAtomicBatches(MemoryStore<ManualClock>);

impl Store for NoAtomicBatches {
    fn check_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, tollgate::Result<Decision>> {
        self.0.check_unchecked(policy, key, cost, valid)
    }
    fn reserve_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
        valid: Valid,
    ) -> BoxFuture<'a, tollgate::Result<Decision>> {
        self.0.reserve_unchecked(policy, key, cost, max_wait, valid)
    }
    fn check_many_unchecked<'a>(
        &'a self,
        requests: &'a [tollgate::Request<'a>],
        atomic: bool,
        valid: Valid,
    ) -> BoxFuture<'a, tollgate::Result<Vec<Decision>>> {
        if atomic {
            let reason = "this store decides one key at a time".to_string();
            return Box::pin(async move { Err(Error::NotAtomic { reason }) });
        }
        self.0.check_many_unchecked(requests, false, valid)
    }
    fn acquire_lease_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, tollgate::Result<Lease>> {
        self.0.acquire_lease_unchecked(policy, key, valid)
    }
    fn release_lease_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
        valid: Valid,
    ) -> BoxFuture<'a, tollgate::Result<bool>> {
        self.0.release_lease_unchecked(policy, key, lease, valid)
    }
    fn reset_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, tollgate::Result<()>> {
        self.0.reset_unchecked(policy, key, valid)
    }
    fn usage_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        op: tollgate::Usage,
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, tollgate::Result<Decision>> {
        self.0.usage_unchecked(policy, key, op, cost, valid)
    }
}

/// A store that refuses atomic batches: the layer checks in sequence
/// instead, from the first request on, and nothing is lost.
#[tokio::test]
async fn a_store_without_atomic_batches_is_checked_in_sequence() {
    let everyone = Policy::fixed_window("everyone", 100, secs(60)).unwrap();
    let store = MemoryStore::with_clock(ManualClock::new(MINUTE + 30_000_000));
    let layer = RateLimitLayer::builder(NoAtomicBatches(store.clone()))
        .limit(everyone.clone(), Global)
        .limit(
            Policy::fixed_window("per-user", 2, secs(60)).unwrap(),
            header("x-user"),
        )
        .check_mode(CheckMode::Atomic)
        .build()
        .unwrap();
    let (mut service, mut handle) = mock::spawn_layer(layer);
    for _ in 0..2 {
        let ok = send(&mut service, &mut handle, request_as("alice")).await;
        assert_eq!(ok.status(), StatusCode::OK);
    }
    let denied = send(&mut service, &mut handle, request_as("alice")).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // In sequence, `everyone` was checked first and consumed.
    assert_eq!(remaining(&store, &everyone, b"global"), 97);
}

#[tokio::test]
async fn store_errors_never_become_500s() {
    let policy = Policy::fixed_window("api", 5, secs(60)).unwrap();
    let lease = Policy::concurrency("in-flight", 5, secs(60)).unwrap();
    let layer = |error: Error| {
        RateLimitLayer::builder(Failing(error))
            .limit(policy.clone(), Global)
            .limit(lease.clone(), Global)
            .build()
            .unwrap()
    };

    // The store's failure policy says deny: 503, a problem, a retry.
    let (mut service, mut handle) = mock::spawn_layer(layer(Error::StoreUnavailable));
    let unavailable = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(unavailable.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(get(&unavailable, "retry-after"), "1");
    assert_eq!(
        get(&unavailable, "content-type"),
        "application/problem+json"
    );
    assert_eq!(json(unavailable).await["status"], 503);

    // A bare store that fails: the request passes, without headers.
    let io = Error::Store {
        kind: StoreErrorKind::Io,
        message: "connection refused".into(),
    };
    let (mut service, mut handle) = mock::spawn_layer(layer(io));
    let passed = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(passed.status(), StatusCode::OK);
    assert!(passed.headers().get("ratelimit").is_none());
}

#[tokio::test]
async fn setup_mistakes_and_bad_keys_are_explained() {
    // PeerIp on a server that records no peer address: 500, not a silent
    // pass.
    let policy = Policy::fixed_window("per-ip", 5, secs(60)).unwrap();
    let (mut service, mut handle) = mock::spawn_layer(RateLimitLayer::new(
        MemoryStore::new(),
        policy.clone(),
        PeerIp::new(),
    ));
    let response = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(get(&response, "content-type"), "application/problem+json");
    assert!(
        json(response).await["detail"]
            .as_str()
            .unwrap()
            .contains("misconfigured")
    );

    // A key longer than the store takes is the client's doing: 400.
    let (mut service, mut handle) = mock::spawn_layer(RateLimitLayer::new(
        MemoryStore::new(),
        policy.clone(),
        header("x-user"),
    ));
    let response = send(&mut service, &mut handle, request_as(&"k".repeat(2000))).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let detail = json(response).await["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains("2000 bytes"), "{detail}");

    // Mistakes the builder can see are errors there, naming the policy.
    let err = RateLimitLayer::builder(MemoryStore::new())
        .limit_with_cost(policy.clone(), Global, 6)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid argument: `cost` 6 exceeds the limit of policy `per-ip` (5): no request could ever pass"
    );
    let err = RateLimitLayer::builder(MemoryStore::new())
        .limit(policy.clone(), Global)
        .limit(policy.clone(), PeerIp::new())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("`per-ip` is added twice"), "{err}");
    let err = RateLimitLayer::builder(MemoryStore::new())
        .build()
        .unwrap_err();
    assert_eq!(err.code(), "invalid_argument");
    let concurrency = Policy::concurrency("c", 5, secs(1)).unwrap();
    let err = RateLimitLayer::builder(MemoryStore::new())
        .limit_with_cost(concurrency, Global, 2)
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("the cost must be 1, got 2"),
        "{err}"
    );
}

#[tokio::test]
async fn grpc_requests_get_resource_exhausted_with_the_retry_delay() {
    let store = MemoryStore::with_clock(ManualClock::new(MINUTE + 58_750_000));
    let policy = Policy::fixed_window("rpc", 1, secs(60)).unwrap();
    let layer = RateLimitLayer::new(store, policy, Global);
    let (mut service, mut handle) = mock::spawn_layer(layer);
    let grpc = || {
        Request::builder()
            .header("content-type", "application/grpc+proto")
            .body(String::new())
            .unwrap()
    };
    assert_eq!(
        send(&mut service, &mut handle, grpc()).await.status(),
        StatusCode::OK
    );
    let denied = send(&mut service, &mut handle, grpc()).await;
    // gRPC carries its status in a trailers-only response, over HTTP 200.
    assert_eq!(denied.status(), StatusCode::OK);
    assert_eq!(get(&denied, "content-type"), "application/grpc");
    assert_eq!(get(&denied, "grpc-status"), "8");
    assert_eq!(get(&denied, "grpc-message"), "rate limit exceeded");
    assert_eq!(get(&denied, "retry-after"), "2");
    assert_eq!(get(&denied, "grpc-retry-pushback-ms"), "1250");
    assert_eq!(get(&denied, "ratelimit"), "\"rpc\";r=0;t=2");
    assert!(
        denied
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .is_empty()
    );

    // The same layer answers plain HTTP requests with a 429; forced gRPC
    // answers every request the gRPC way.
    let denied = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    let store = MemoryStore::with_clock(ManualClock::new(MINUTE));
    let forced = RateLimitLayer::builder(store)
        .limit(Policy::fixed_window("rpc", 1, secs(60)).unwrap(), Global)
        .response_format(ResponseFormat::Grpc)
        .build()
        .unwrap();
    let (mut service, mut handle) = mock::spawn_layer(forced);
    send(&mut service, &mut handle, Request::default()).await;
    let denied = send(&mut service, &mut handle, Request::default()).await;
    assert_eq!(get(&denied, "grpc-status"), "8");
}

// Keeps the future type nameable: a service stack's future is the
// middleware's own state machine, not a boxed future.
#[allow(dead_code)]
fn response_future_is_send(
    f: tollgate_tower::ResponseFuture<Mock, String>,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let _ = f.await;
    })
}
