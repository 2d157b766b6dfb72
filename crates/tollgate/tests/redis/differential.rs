//! The same decisions as the memory store on random traces (client time),
//! standalone and on a cluster.
use super::*;
use tollgate::store::Stamp;

/// One operation of a random trace.
#[derive(Debug, Clone)]
enum Op {
    Check {
        key: usize,
        cost: u64,
    },
    Reserve {
        key: usize,
        cost: u64,
        max_wait: u64,
    },
    Acquire {
        key: usize,
    },
    Release {
        key: usize,
        lease: usize,
    },
    Batch {
        keys: Vec<usize>,
        cost: u64,
        atomic: bool,
    },
    Reset {
        key: usize,
    },
    /// A charge, a refund or a `check_at_most`, held or not.
    Usage {
        key: usize,
        op: Usage,
        cost: u64,
    },
    /// A held `check_at_most` that keeps its stamp.
    TakeHeld {
        key: usize,
        cost: u64,
        hold: u64,
    },
    /// The exact refund of `units` of the `stamp`th latest held take.
    RefundHeld {
        key: usize,
        stamp: usize,
        units: u64,
    },
}

/// What each store gave out that a later operation names: leases, and
/// held takes' stamps, in the order taken, so that both stores name "the
/// same" one.
#[derive(Default)]
struct Taken {
    leases: Vec<LeaseId>,
    stamps: Vec<Stamp>,
}

/// User keys that a careless layout would mangle: braces, spaces,
/// newlines, bytes that are not UTF-8, the longest allowed, and one too
/// long (an error on both sides).
fn user_keys() -> Vec<Vec<u8>> {
    vec![
        b"user-42".to_vec(),
        b"{user-42}".to_vec(),
        b"}{".to_vec(),
        b"a b\nc\\".to_vec(),
        vec![0xff, 0xfe, 0x00, b'{'],
        vec![b'k'; tollgate::MAX_KEY_LEN],
        vec![b'k'; tollgate::MAX_KEY_LEN + 1],
    ]
}

fn any_policy() -> impl Strategy<Value = Policy> {
    let ms = |lo: u64, hi: u64| (lo..=hi).prop_map(Duration::from_millis);
    prop_oneof![
        (1..=10u64, ms(1, 5_000)).prop_map(|(l, w)| Policy::fixed_window("fw", l, w).unwrap()),
        (1..=10u64, ms(1, 5_000)).prop_map(|(l, w)| Policy::sliding_window("sw", l, w).unwrap()),
        (1..=10u64, ms(1, 5_000)).prop_map(|(l, w)| Policy::sliding_log("sl", l, w).unwrap()),
        (1..=7u64, ms(1, 3_000), 1..=10u64)
            .prop_map(|(r, p, b)| Policy::token_bucket("tb", r, p, b).unwrap()),
        (1..=7u64, ms(1, 3_000), 1..=10u64)
            .prop_map(|(r, p, b)| Policy::gcra("gcra", r, p, b).unwrap()),
        (1..=7u64, ms(1, 3_000), 1..=10u64)
            .prop_map(|(r, p, c)| Policy::leaky_bucket("lb", r, p, c).unwrap()),
        (1..=4u64, ms(1, 3_000)).prop_map(|(l, d)| Policy::concurrency("cc", l, d).unwrap()),
    ]
}

fn ops() -> impl Strategy<Value = Vec<(u64, Op)>> {
    let key = 0..user_keys().len();
    let cost = prop_oneof![4 => 0..=2u64, 1 => 0..=12u64];
    let op = prop_oneof![
        6 => (key.clone(), cost.clone()).prop_map(|(key, cost)| Op::Check { key, cost }),
        2 => (key.clone(), cost.clone(), 0..=2_000_000u64)
            .prop_map(|(key, cost, max_wait)| Op::Reserve { key, cost, max_wait }),
        3 => key.clone().prop_map(|key| Op::Acquire { key }),
        2 => (key.clone(), 0..8usize).prop_map(|(key, lease)| Op::Release { key, lease }),
        1 => (prop::collection::vec(key.clone(), 1..4), cost, any::<bool>())
            .prop_map(|(keys, cost, atomic)| Op::Batch { keys, cost, atomic }),
        1 => key.clone().prop_map(|key| Op::Reset { key }),
        // Costs past the limit: charges go into debt, check_at_most asks
        // for more than is left. A held check_at_most holds up to 3 s:
        // a bucket's refill from empty or more (an error), and an error
        // on any other policy.
        6 => (key.clone(), prop_oneof![Just(Usage::Charge), Just(Usage::Refund), Just(Usage::AtMost), (0..=3_000_000u64).prop_map(|h| Usage::AtMostHeld(Duration::from_micros(h)))], prop_oneof![3 => 0..=4u64, 1 => 0..=40u64])
            .prop_map(|(key, op, cost)| Op::Usage { key, op, cost }),
        // Held takes that keep their stamp, and their exact refunds (of
        // up to more than was granted: an error on both sides).
        3 => (key.clone(), 0..=12u64, 0..=3_000_000u64)
            .prop_map(|(key, cost, hold)| Op::TakeHeld { key, cost, hold }),
        3 => (key, 0..4usize, 0..=6u64)
            .prop_map(|(key, stamp, units)| Op::RefundHeld { key, stamp, units }),
    ];
    // Time steps in ms: many small, some across whole windows.
    let dt = prop_oneof![3 => Just(0u64), 4 => 0..=50u64, 2 => 0..=3_000u64];
    prop::collection::vec((dt, op), 1..40)
}

/// Traces on buckets only, where held takes and their exact refunds are
/// many: on one of two keys, checks, charges and refunds between them
/// (which move the key, so a refund after them writes nothing), time
/// passing within and past the holds.
fn held_ops() -> impl Strategy<Value = Vec<(u64, Op)>> {
    let key = 0..2usize;
    let op = prop_oneof![
        4 => (key.clone(), 0..=12u64, 0..=500_000u64)
            .prop_map(|(key, cost, hold)| Op::TakeHeld { key, cost, hold }),
        4 => (key.clone(), 0..3usize, 0..=8u64)
            .prop_map(|(key, stamp, units)| Op::RefundHeld { key, stamp, units }),
        2 => (key.clone(), 0..=3u64).prop_map(|(key, cost)| Op::Check { key, cost }),
        1 => (key, prop_oneof![Just(Usage::Charge), Just(Usage::Refund)], 0..=4u64)
            .prop_map(|(key, op, cost)| Op::Usage { key, op, cost }),
    ];
    let dt = prop_oneof![3 => Just(0u64), 3 => 0..=50u64, 1 => 0..=1_000u64];
    prop::collection::vec((dt, op), 1..40)
}

fn any_bucket() -> impl Strategy<Value = Policy> {
    let ms = |lo: u64, hi: u64| (lo..=hi).prop_map(Duration::from_millis);
    prop_oneof![
        (1..=7u64, ms(1, 3_000), 1..=40u64)
            .prop_map(|(r, p, b)| Policy::token_bucket("tb", r, p, b).unwrap()),
        (1..=7u64, ms(1, 3_000), 1..=40u64)
            .prop_map(|(r, p, b)| Policy::gcra("gcra", r, p, b).unwrap()),
    ]
}

/// What one store answered to one operation, comparable across stores.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Decision(Decision),
    Decisions(Vec<Decision>),
    Lease(Decision, bool),
    Released(bool),
    Held(Decision, bool),
    Refunded(Option<Decision>),
    Done,
    Error(&'static str),
}

/// Runs one operation; `taken` is what this store gave out so far.
async fn apply(store: &dyn Store, policy: &Policy, op: &Op, taken: &mut Taken) -> Answer {
    let keys = user_keys();
    let result = match op {
        Op::Check { key, cost } => store
            .check(policy, &keys[*key], *cost)
            .await
            .map(Answer::Decision),
        Op::Reserve {
            key,
            cost,
            max_wait,
        } => store
            .reserve(policy, &keys[*key], *cost, Duration::from_micros(*max_wait))
            .await
            .map(Answer::Decision),
        Op::Acquire { key } => store.acquire_lease(policy, &keys[*key]).await.map(|l| {
            if let Some(id) = l.id {
                taken.leases.push(id);
            }
            Answer::Lease(l.decision, l.id.is_some())
        }),
        Op::Release { key, lease } => match taken.leases.get(*lease) {
            Some(&id) => store
                .release_lease(policy, &keys[*key], id)
                .await
                .map(Answer::Released),
            None => Ok(Answer::Done),
        },
        Op::Batch {
            keys: which,
            cost,
            atomic,
        } => {
            let requests: Vec<Request<'_>> = which
                .iter()
                .map(|&k| Request {
                    policy,
                    key: &keys[k],
                    cost: *cost,
                })
                .collect();
            store
                .check_many(&requests, *atomic)
                .await
                .map(Answer::Decisions)
        }
        Op::Reset { key } => store
            .reset(policy, &keys[*key])
            .await
            .map(|()| Answer::Done),
        Op::Usage { key, op, cost } => store
            .usage(policy, &keys[*key], *op, *cost)
            .await
            .map(Answer::Decision),
        Op::TakeHeld { key, cost, hold } => {
            let hold = Duration::from_micros(*hold);
            store
                .take_held(policy, &keys[*key], *cost, hold)
                .await
                .map(|held| {
                    if let Some(stamp) = held.stamp {
                        taken.stamps.push(stamp);
                    }
                    Answer::Held(held.decision, held.stamp.is_some())
                })
        }
        Op::RefundHeld { key, stamp, units } => match taken.stamps.iter().rev().nth(*stamp) {
            Some(&stamp) => store
                .refund_held(policy, &keys[*key], stamp, *units)
                .await
                .map(Answer::Refunded),
            None => Ok(Answer::Done),
        },
    };
    result.unwrap_or_else(|e| {
        assert!(
            !e.is_transient(),
            "a store error from a healthy server: {e}"
        );
        Answer::Error(e.code())
    })
}

fn differential(
    deployment: Deployment,
    policies: impl Strategy<Value = Policy>,
    traces: impl Strategy<Value = Vec<(u64, Op)>>,
) {
    let rt = runtime();
    let config = ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    };
    proptest!(config, |(policy in policies, trace in traces, t0 in 1_600_000_000_000u64..1_800_000_000_000)| {
        rt.block_on(async {
            let clock = ManualClock::new(t0 * 1000);
            let memory = MemoryStore::with_clock(clock.clone());
            let redis = connect(
                deployment.urls(),
                TimeSource::Client(Arc::new(clock.clone())),
                "diff",
            )
            .await;
            let (mut mine, mut theirs) = (Taken::default(), Taken::default());
            for (i, (dt, op)) in trace.iter().enumerate() {
                clock.advance(Duration::from_millis(*dt));
                if let Op::Batch { keys, atomic: true, .. } = op {
                    // Keys in several slots cannot be one atomic script on a
                    // cluster: decided slot by slot with refunds, whose
                    // denials report a bound on the retry and whose sliding
                    // logs keep a denied batch's units (a documented
                    // difference, tested in tests/cluster_batch.rs).
                    let distinct: std::collections::HashSet<_> = keys.iter().collect();
                    if matches!(deployment, Deployment::Cluster) && distinct.len() > 1 {
                        continue;
                    }
                }
                let want = apply(&memory, &policy, op, &mut mine).await;
                let got = apply(&redis, &policy, op, &mut theirs).await;
                prop_assert_eq!(got, want, "step {} {:?} on {:?}", i, op, policy);
            }
            Ok(())
        })?;
    });
    deployment.assert_every_key_expires();
}

#[test]
fn redis_decides_like_memory_standalone() {
    differential(Deployment::Standalone, any_policy(), ops());
}

#[test]
fn redis_decides_like_memory_on_a_cluster() {
    differential(Deployment::Cluster, any_policy(), ops());
}

#[test]
fn held_takes_and_their_refunds_decide_like_memory() {
    differential(Deployment::Standalone, any_bucket(), held_ops());
}
