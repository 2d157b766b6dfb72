//! How a layer asks the store ([`CheckMode`]) and how it writes its own
//! answers ([`ResponseFormat`]).

/// How a layer with several quota policies asks the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CheckMode {
    /// One atomic batch ([`Store::check_many`](tollgate::Store::check_many) with `atomic`): the request
    /// consumes from every policy, or, when any denies, from none. A
    /// request denied by its per-user limit then costs nothing from its
    /// per-address limit. One round trip. The default.
    ///
    /// A store that cannot run the batch atomically refuses it without
    /// consuming ([`Error::NotAtomic`](tollgate::Error::NotAtomic)); the
    /// layer then logs a warning once and checks in
    /// [`Sequential`](CheckMode::Sequential) order from then on.
    #[default]
    Atomic,
    /// One check per policy, in the order they were added, stopping at the
    /// first denial: the policies before the one that denied have consumed
    /// (fewer requests pass than the limits allow, never more), those
    /// after it have not. One round trip per policy.
    Sequential,
}

/// How the layer's own answers (denials, errors) are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ResponseFormat {
    /// gRPC statuses for requests whose `content-type` starts with
    /// `application/grpc`, HTTP problem details for the others: one layer
    /// serves an axum app with tonic services routed inside. The default.
    #[default]
    Auto,
    /// HTTP status codes with `application/problem+json` bodies.
    Http,
    /// gRPC statuses (`RESOURCE_EXHAUSTED`, `UNAVAILABLE`, ...) in a
    /// trailers-only response.
    Grpc,
}
