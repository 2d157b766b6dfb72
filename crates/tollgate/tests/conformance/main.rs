//! One conformance suite, written once in `suite.rs`, run against every
//! store: memory, Redis standalone and Redis Cluster (both in client-time
//! mode, so the suite drives time with a manual clock), a leasing store
//! and a connected deferred store over memory and over Redis (every case
//! as the store they wrap: the cases' policies take no leases), and a resilient
//! store whose primary is down and breaker open, under each failure policy
//! (`local` passes every case as a memory store would; `allow` and `deny`
//! pass those that hold for a store that admits or refuses everything
//! valid). Usage (charge, refund, check_at_most, settle, a held take and
//! its exact refund) is the one thing no fallback answers: the stores of
//! record run the settle and held cases, the fallbacks the case that says
//! so.

mod suite;

/// Instantiates every case of the suite for a store made by `$make`, an
/// `async fn(ManualClock) -> suite::Harness`.
macro_rules! conformance {
    ($make:path, only: $($case:ident),+ $(,)?) => {
        conformance!(@cases $make; $($case),+);
    };
    ($make:path) => {
        conformance!(@cases $make;
            decisions_match_the_algorithms,
            reservations_match_the_algorithms,
            a_late_request_keeps_the_bucket_until_it_is_full,
            peeks_and_denials_consume_nothing,
            shadow_policies_count_but_never_deny,
            keys_are_isolated,
            bad_input_is_rejected_before_the_store,
            leases_are_limited_released_and_expire,
            reset_forgets_a_key,
            atomic_batches_are_all_or_nothing,
            non_atomic_batches_decide_each,
        );
    };
    (@cases $make:path; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let clock = tollgate::ManualClock::new(1_700_000_000_000_000);
                let harness = $make(clock.clone()).await;
                crate::suite::$case(&harness, &clock).await;
                harness.finish().await;
            }
        )+
    };
}

mod memory {
    use super::suite::Harness;

    async fn make(clock: tollgate::ManualClock) -> Harness {
        Harness::memory(clock)
    }

    conformance!(make);
    conformance!(make, only: settled_usage_adds_up_to_the_actual_costs, held_batches_refund_exactly);
}

#[cfg(feature = "redis")]
mod redis_standalone {
    use super::suite::Harness;
    use std::sync::OnceLock;
    use tollgate_testkit::RedisServer;

    pub(super) fn server() -> &'static RedisServer {
        static SERVER: OnceLock<RedisServer> = OnceLock::new();
        SERVER.get_or_init(RedisServer::start)
    }

    async fn make(clock: tollgate::ManualClock) -> Harness {
        Harness::redis(vec![server().url()], clock).await
    }

    conformance!(make);
    conformance!(make, only: settled_usage_adds_up_to_the_actual_costs, held_batches_refund_exactly);
}

/// A leasing store over memory: the cases' policies pass through it
/// (see `Harness::leasing`).
mod leasing_memory {
    use super::suite::Harness;

    async fn make(clock: tollgate::ManualClock) -> Harness {
        Harness::memory(clock).leasing()
    }

    conformance!(make);
    conformance!(make, only: settled_usage_adds_up_to_the_actual_costs, held_batches_refund_exactly);
}

/// A deferred store, connected, over memory.
mod deferred_memory {
    use super::suite::Harness;

    async fn make(clock: tollgate::ManualClock) -> Harness {
        Harness::memory(clock).deferred().await
    }

    conformance!(make);
    conformance!(make, only: settled_usage_adds_up_to_the_actual_costs, held_batches_refund_exactly);
}

/// A leasing store over Redis (the standalone server above).
#[cfg(feature = "redis")]
mod leasing_redis {
    use super::suite::Harness;

    async fn make(clock: tollgate::ManualClock) -> Harness {
        Harness::redis(vec![super::redis_standalone::server().url()], clock)
            .await
            .leasing()
    }

    conformance!(make);
    conformance!(make, only: settled_usage_adds_up_to_the_actual_costs, held_batches_refund_exactly);
}

/// A deferred store, connected, over Redis (the standalone server above):
/// the service's stack when it starts before Redis answers.
#[cfg(feature = "redis")]
mod deferred_redis {
    use super::suite::Harness;

    async fn make(clock: tollgate::ManualClock) -> Harness {
        Harness::redis(vec![super::redis_standalone::server().url()], clock)
            .await
            .deferred()
            .await
    }

    conformance!(make);
    conformance!(make, only: settled_usage_adds_up_to_the_actual_costs, held_batches_refund_exactly);
}

#[cfg(feature = "redis")]
mod redis_cluster {
    use super::suite::Harness;
    use std::sync::OnceLock;
    use tollgate_testkit::RedisCluster;

    fn cluster() -> &'static RedisCluster {
        static CLUSTER: OnceLock<RedisCluster> = OnceLock::new();
        CLUSTER.get_or_init(|| RedisCluster::start(3, 1))
    }

    async fn make(clock: tollgate::ManualClock) -> Harness {
        Harness::redis(cluster().seed_urls(), clock).await
    }

    conformance!(make);
    conformance!(make, only: settled_usage_adds_up_to_the_actual_costs, held_batches_refund_exactly);
}

#[cfg(feature = "redis")]
mod fallback_local {
    use super::suite::Harness;
    use tollgate::store::resilient::OnFailure;

    async fn make(clock: tollgate::ManualClock) -> Harness {
        Harness::fallback(OnFailure::Local, clock).await
    }

    conformance!(make);
    conformance!(make, only: the_failure_policy_answers_every_operation, usage_is_never_answered_by_the_fallback);
}

#[cfg(feature = "redis")]
mod fallback_allow {
    use super::suite::Harness;
    use tollgate::store::resilient::OnFailure;

    async fn make(clock: tollgate::ManualClock) -> Harness {
        Harness::fallback(OnFailure::Allow, clock).await
    }

    conformance!(make, only: bad_input_is_rejected_before_the_store, the_failure_policy_answers_every_operation, usage_is_never_answered_by_the_fallback);
}

#[cfg(feature = "redis")]
mod fallback_deny {
    use super::suite::Harness;
    use tollgate::store::resilient::OnFailure;

    async fn make(clock: tollgate::ManualClock) -> Harness {
        Harness::fallback(OnFailure::Deny, clock).await
    }

    conformance!(make, only: bad_input_is_rejected_before_the_store, the_failure_policy_answers_every_operation, usage_is_never_answered_by_the_fallback);
}
