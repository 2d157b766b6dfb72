//! Usage limits: a request checked with its estimate, then settled with
//! the usage its response reports, when the response body ends or is
//! dropped; on the memory store and on a real `redis-server`.
//!
//! Every scenario reads the store's own count afterwards (a peek), so a
//! settle that is missing, wrong or made twice fails it.
//!
//! Kept whole on purpose: one concern, the settle's contract, as one set of
//! scenarios run on every store.

use std::cell::Cell;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderName, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::sync::mpsc;
use tollgate::algorithm::Period;
use tollgate::store::redis::RedisStore;
use tollgate::{ManualClock, MemoryStore, Policy, Store};
use tollgate_testkit::RedisServer;
use tollgate_tower::extract::{Global, Header};
use tollgate_tower::{RateLimitLayer, Usage};
use tower::{Layer, ServiceExt, service_fn};

const X_USAGE: HeaderName = HeaderName::from_static("x-usage");

/// A response body sent frame by frame through a channel; it ends when
/// the sender is dropped.
struct Chunks(mpsc::UnboundedReceiver<Frame<Bytes>>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|frame| frame.map(Ok))
    }
}

fn data(text: &'static str) -> Frame<Bytes> {
    Frame::data(Bytes::from_static(text.as_bytes()))
}

fn trailers(usage: &'static str) -> Frame<Bytes> {
    let mut trailers = http::HeaderMap::new();
    trailers.insert(X_USAGE, usage.parse().unwrap());
    Frame::trailers(trailers)
}

/// A body of one chunk, already ended.
fn whole(text: &'static str) -> Chunks {
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(data(text)).unwrap();
    Chunks(rx)
}

/// 1,000 units, refilled one an hour: within a test, what remains is
/// exactly 1,000 minus what the key holds.
fn tokens() -> Policy {
    Policy::token_bucket("tokens", 1, Duration::from_secs(3600), 1000).unwrap()
}

/// The estimate a request carries in `x-estimate` (1 without one).
fn estimate_header(request: &Parts) -> u64 {
    request
        .headers
        .get("x-estimate")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(1)
}

fn usage_layer(store: Arc<dyn Store>, policy: Policy) -> RateLimitLayer {
    RateLimitLayer::builder_shared(store)
        .usage_limit(policy, Global)
        .estimate_with(estimate_header)
        .usage_header(X_USAGE)
        .build()
        .unwrap()
}

fn request(estimate: u64) -> Request<()> {
    Request::builder()
        .header("x-estimate", estimate)
        .body(())
        .unwrap()
}

/// What remains of `key` under `policy` (a peek).
async fn remaining(store: &dyn Store, policy: &Policy, key: &[u8]) -> u64 {
    store.check(policy, key, 0).await.unwrap().remaining
}

/// What remains once the spawned settle has run: polls until it is
/// `expected` (or 10 s pass, and the test fails on the last value).
async fn settled(store: &dyn Store, policy: &Policy, key: &[u8], expected: u64) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = remaining(store, policy, key).await;
        if now == expected || tokio::time::Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

thread_local! {
    /// The tasks that live as long as the test's store (a Redis
    /// connection's), counted when it is made. Each test runs on its own
    /// thread, on a current-thread runtime.
    static STORE_TASKS: Cell<usize> = const { Cell::new(0) };
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Notes the tasks the store just made keeps running.
fn store_made() {
    STORE_TASKS.set(alive_tasks());
}

/// Waits until every task spawned since the store was made has ended:
/// a settle (spawned when a settlement is dropped, or made there and then
/// on the memory store) that should not happen has then run to its end,
/// and shows in the key. Fails after `PATIENCE`.
async fn quiet() {
    let t = tokio::time::Instant::now();
    while alive_tasks() > STORE_TASKS.get() {
        assert!(
            t.elapsed() < tollgate_testkit::PATIENCE,
            "{} tasks still running beside the store's {}",
            alive_tasks(),
            STORE_TASKS.get()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// One request through the layer to a service answering with `respond`;
/// the body is read to its end.
async fn send<F>(layer: &RateLimitLayer, estimate: u64, respond: F) -> StatusCode
where
    F: Fn() -> Response<Chunks> + Clone + Send + 'static,
{
    let service = layer.layer(service_fn(move |_: Request<()>| {
        let respond = respond.clone();
        async move { Ok::<_, Infallible>(respond()) }
    }));
    let response = service.oneshot(request(estimate)).await.unwrap();
    let status = response.status();
    response.into_body().collect().await.unwrap();
    status
}

fn with_usage(units: u64) -> Response<Chunks> {
    let mut response = Response::new(whole("answer"));
    response.extensions_mut().insert(Usage(units));
    response
}

fn with_header(value: &'static str) -> Response<Chunks> {
    Response::builder()
        .header(X_USAGE, value)
        .body(whole("answer"))
        .unwrap()
}

/// An over-estimate is refunded: the key holds the reported usage.
async fn usage_in_extensions_refunds_an_over_estimate(store: Arc<dyn Store>) {
    let policy = tokens();
    let layer = usage_layer(store.clone(), policy.clone());
    assert_eq!(send(&layer, 100, || with_usage(40)).await, StatusCode::OK);
    assert_eq!(settled(&*store, &policy, b"global", 960).await, 960);
    quiet().await;
    assert_eq!(remaining(&*store, &policy, b"global").await, 960);
}

async fn usage_in_a_header(store: Arc<dyn Store>) {
    let policy = tokens();
    let layer = usage_layer(store.clone(), policy.clone());
    assert_eq!(
        send(&layer, 100, || with_header("250")).await,
        StatusCode::OK
    );
    assert_eq!(settled(&*store, &policy, b"global", 750).await, 750);
}

/// A header that is not a whole number is no report (and is logged).
async fn a_bad_usage_header_leaves_the_estimate(store: Arc<dyn Store>) {
    let policy = tokens();
    let layer = usage_layer(store.clone(), policy.clone());
    for bad in ["-5", "12.5", "many"] {
        assert_eq!(
            send(&layer, 100, move || with_header(bad)).await,
            StatusCode::OK
        );
    }
    quiet().await;
    assert_eq!(remaining(&*store, &policy, b"global").await, 700);
}

async fn no_report_leaves_the_estimate(store: Arc<dyn Store>) {
    let policy = tokens();
    let layer = usage_layer(store.clone(), policy.clone());
    let plain = || Response::new(whole("answer"));
    assert_eq!(send(&layer, 100, plain).await, StatusCode::OK);
    quiet().await;
    assert_eq!(remaining(&*store, &policy, b"global").await, 900);
}

/// An under-estimate is charged past the limit: the key is in debt and the
/// next request is denied (without reaching the service).
async fn an_under_estimate_goes_into_debt(store: Arc<dyn Store>) {
    let policy = tokens();
    let layer = usage_layer(store.clone(), policy.clone());
    assert_eq!(send(&layer, 10, || with_usage(1500)).await, StatusCode::OK);
    assert_eq!(settled(&*store, &policy, b"global", 0).await, 0);
    let unreachable = || -> Response<Chunks> { panic!("a request in debt reaches the service") };
    assert_eq!(
        send(&layer, 1, unreachable).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The debt is exactly 500: giving back 510 leaves 10.
    store.refund(&policy, b"global", 510).await.unwrap();
    assert_eq!(remaining(&*store, &policy, b"global").await, 10);
}

type Streamed = tower::util::BoxService<
    Request<()>,
    Response<tollgate_tower::ResponseBody<Chunks>>,
    Infallible,
>;

/// A service answering one request with a body streamed through the
/// returned sender, reporting `units` in its head, if any.
fn streaming(
    layer: &RateLimitLayer,
    units: Option<u64>,
) -> (Streamed, mpsc::UnboundedSender<Frame<Bytes>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let body = Arc::new(std::sync::Mutex::new(Some(Chunks(rx))));
    let service = layer.layer(service_fn(move |_: Request<()>| {
        let body = body.lock().unwrap().take().expect("one request");
        async move {
            let mut response = Response::new(body);
            if let Some(units) = units {
                response.extensions_mut().insert(Usage(units));
            }
            Ok::<_, Infallible>(response)
        }
    }));
    (Streamed::new(service), tx)
}

/// A streamed body settles when its last frame has been read, not when
/// its head arrives, and once.
async fn a_streamed_body_settles_at_its_end(store: Arc<dyn Store>) {
    let policy = tokens();
    let layer = usage_layer(store.clone(), policy.clone());
    let (service, tx) = streaming(&layer, Some(30));
    let mut body = service.oneshot(request(200)).await.unwrap().into_body();
    tx.send(data("one ")).unwrap();
    assert!(body.frame().await.unwrap().unwrap().is_data());
    quiet().await;
    assert_eq!(remaining(&*store, &policy, b"global").await, 800);
    tx.send(data("two")).unwrap();
    assert!(body.frame().await.unwrap().unwrap().is_data());
    drop(tx);
    assert!(body.frame().await.is_none());
    assert_eq!(settled(&*store, &policy, b"global", 970).await, 970);
    drop(body);
    quiet().await;
    assert_eq!(remaining(&*store, &policy, b"global").await, 970);
}

/// A body dropped before its end (the client went away) settles too.
async fn a_body_dropped_early_settles(store: Arc<dyn Store>) {
    let policy = tokens();
    let layer = usage_layer(store.clone(), policy.clone());
    let (service, tx) = streaming(&layer, Some(650));
    let mut body = service.oneshot(request(200)).await.unwrap().into_body();
    tx.send(data("partial")).unwrap();
    assert!(body.frame().await.unwrap().unwrap().is_data());
    quiet().await;
    assert_eq!(remaining(&*store, &policy, b"global").await, 800);
    drop(body);
    assert_eq!(settled(&*store, &policy, b"global", 350).await, 350);
    drop(tx);
}

/// A streamed answer that knows its usage only at its end reports it in a
/// trailer: a bad one is ignored, the last good one counts.
async fn usage_in_a_trailer(store: Arc<dyn Store>) {
    let policy = tokens();
    let layer = usage_layer(store.clone(), policy.clone());
    let (service, tx) = streaming(&layer, None);
    let mut body = service.oneshot(request(200)).await.unwrap().into_body();
    tx.send(data("streamed")).unwrap();
    tx.send(trailers("lots")).unwrap();
    tx.send(trailers("420")).unwrap();
    drop(tx);
    while body.frame().await.is_some() {}
    assert_eq!(settled(&*store, &policy, b"global", 580).await, 580);
    // With a bad trailer only, the estimate stands.
    let (service, tx) = streaming(&layer, None);
    let body = service.oneshot(request(200)).await.unwrap().into_body();
    tx.send(trailers("4e2")).unwrap();
    drop(tx);
    body.collect().await.unwrap();
    quiet().await;
    assert_eq!(remaining(&*store, &policy, b"global").await, 380);
}

/// Requests in flight together, each over- or under-estimated: once all
/// have settled, the key holds the sum of what they used, exactly.
async fn concurrent_settles_add_up_to_the_usage(store: Arc<dyn Store>) {
    let policy = Policy::token_bucket("many", 1, Duration::from_secs(3600), 100_000).unwrap();
    let layer = usage_layer(store.clone(), policy.clone());
    let requests: Vec<(u64, u64)> = (0..64u64)
        .map(|i| (100 + i * 7 % 300, i * 37 % 900))
        .collect();
    let used: u64 = requests.iter().map(|(_, actual)| actual).sum();
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|(estimate, actual)| {
            let layer = layer.clone();
            tokio::spawn(async move { send(&layer, estimate, move || with_usage(actual)).await })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), StatusCode::OK);
    }
    let expected = 100_000 - used;
    assert_eq!(
        settled(&*store, &policy, b"global", expected).await,
        expected
    );
}

/// Two usage limits, checked as one atomic batch and each settled.
async fn several_limits_settle_together(store: Arc<dyn Store>) {
    let small = Policy::token_bucket("small", 1, Duration::from_secs(3600), 500).unwrap();
    let large = tokens();
    let layer = RateLimitLayer::builder_shared(store.clone())
        .usage_limit(small.clone(), Global)
        .usage_limit(large.clone(), Global)
        .estimate(50)
        .build()
        .unwrap();
    assert_eq!(send(&layer, 0, || with_usage(120)).await, StatusCode::OK);
    assert_eq!(settled(&*store, &small, b"global", 380).await, 380);
    assert_eq!(settled(&*store, &large, b"global", 880).await, 880);
    // 400 more: `small` goes 20 into debt, `large` holds 520.
    assert_eq!(send(&layer, 0, || with_usage(400)).await, StatusCode::OK);
    assert_eq!(settled(&*store, &small, b"global", 0).await, 0);
    assert_eq!(settled(&*store, &large, b"global", 480).await, 480);
    // Denied by `small`, so `large` gives nothing either.
    let unreachable = || -> Response<Chunks> { panic!("a request in debt reaches the service") };
    assert_eq!(
        send(&layer, 0, unreachable).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(remaining(&*store, &large, b"global").await, 480);
}

macro_rules! on_every_store {
    ($($scenario:ident),* $(,)?) => {
        mod memory {
            use super::*;
            $(
                #[tokio::test]
                async fn $scenario() {
                    store_made();
                    super::$scenario(Arc::new(MemoryStore::new())).await;
                }
            )*
        }

        mod redis {
            use super::*;
            $(
                #[tokio::test]
                async fn $scenario() {
                    let server = RedisServer::start();
                    let store = RedisStore::connect(&server.url()).await.unwrap();
                    store_made();
                    super::$scenario(Arc::new(store)).await;
                }
            )*
        }
    };
}

on_every_store!(
    usage_in_extensions_refunds_an_over_estimate,
    usage_in_a_header,
    a_bad_usage_header_leaves_the_estimate,
    no_report_leaves_the_estimate,
    an_under_estimate_goes_into_debt,
    a_streamed_body_settles_at_its_end,
    a_body_dropped_early_settles,
    usage_in_a_trailer,
    concurrent_settles_add_up_to_the_usage,
    several_limits_settle_together,
);

/// Tokens per minute and per calendar month per API key, as the LLM
/// gateway example has them, on a clock held mid-month.
#[tokio::test]
async fn a_minute_and_a_calendar_month_per_key() {
    // 2026-03-14T12:00:30Z.
    let clock = ManualClock::new(1_773_489_630_000_000);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::with_clock(clock.clone()));
    let minute = Policy::fixed_window("per-minute", 10_000, Duration::from_secs(60)).unwrap();
    let month =
        Policy::fixed_window_calendar("per-month", 1_000_000, Period::Month, "UTC").unwrap();
    let key = || Header::new(HeaderName::from_static("x-api-key"));
    let layer = RateLimitLayer::builder_shared(store.clone())
        .usage_limit(minute.clone(), key())
        .usage_limit(month.clone(), key())
        .estimate_with(estimate_header)
        .build()
        .unwrap();
    let call = |units: u64, estimate: u64| {
        let service = layer.layer(service_fn(move |_: Request<()>| async move {
            Ok::<_, Infallible>(with_usage(units))
        }));
        let request = Request::builder()
            .header("x-api-key", "k1")
            .header("x-estimate", estimate)
            .body(())
            .unwrap();
        async move {
            let response = service.oneshot(request).await.unwrap();
            let status = response.status();
            response.into_body().collect().await.unwrap();
            status
        }
    };
    assert_eq!(call(1_200, 500).await, StatusCode::OK);
    assert_eq!(settled(&*store, &minute, b"k1", 8_800).await, 8_800);
    assert_eq!(settled(&*store, &month, b"k1", 998_800).await, 998_800);
    // An estimate above the minute's limit is checked as the whole minute;
    // it passes on a fresh minute only, and settles the rest as debt.
    assert_eq!(call(9_000, 20_000).await, StatusCode::TOO_MANY_REQUESTS);
    clock.advance(Duration::from_secs(60));
    assert_eq!(call(12_000, 20_000).await, StatusCode::OK);
    assert_eq!(settled(&*store, &month, b"k1", 986_800).await, 986_800);
    assert_eq!(remaining(&*store, &minute, b"k1").await, 0);
    assert_eq!(call(1, 1).await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(remaining(&*store, &month, b"k1").await, 986_800);
}

/// What could never work is refused when the layer is built, naming it.
#[test]
fn the_builder_refuses_usage_options_that_could_not_apply() {
    let refused =
        |builder: tollgate_tower::RateLimitLayerBuilder| builder.build().unwrap_err().to_string();
    let builder = || RateLimitLayer::builder(MemoryStore::new());
    let leases = Policy::concurrency("in-flight", 4, Duration::from_secs(30)).unwrap();
    let error = refused(builder().usage_limit(leases, Global));
    assert!(
        error.contains("`in-flight` is a concurrency policy"),
        "{error}"
    );
    let error = refused(builder().limit(tokens(), Global).estimate(10));
    assert!(
        error.contains("an estimate is set, but no limit is a usage limit"),
        "{error}"
    );
    let error = refused(builder().limit(tokens(), Global).usage_header(X_USAGE));
    assert!(error.contains("a usage header is set"), "{error}");
    assert!(builder().usage_limit(tokens(), Global).build().is_ok());
}
