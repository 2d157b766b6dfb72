//! Calendar windows (a day, week, month or year from local midnight in a
//! zone) on Redis: as memory decides on DST days and month ends, and on
//! the server's clock.

use super::*;

/// µs of a local civil time in `zone`.
fn local(zone: &str, (y, m, d): (i16, i8, i8), (h, min, s): (i8, i8, i8)) -> u64 {
    let tz = jiff::tz::TimeZone::get(zone).unwrap();
    jiff::civil::date(y, m, d)
        .at(h, min, s, 0)
        .to_zoned_datetime(tz)
        .unwrap()
        .timestamp()
        .as_microsecond() as u64
}

/// Calendar windows on Redis (client time, so a manual clock can stand on
/// DST days and month ends) decide as memory does, call by call, and as
/// the calendar says: a day in Paris of 23 hours (2026-03-29) and one of
/// 25 (2026-10-25) reset at local midnight, February's month ends on the
/// 28th at midnight, a week on Monday; checks, charges, refunds and
/// check_at_most alike, each answer's `reset_after` the time to the
/// window's real end.
#[test]
fn calendar_windows_follow_dst_and_month_ends_as_memory_does() {
    use tollgate::algorithm::Period;
    const HOUR: u64 = 3_600_000_000;
    let paris = "Europe/Paris";
    let cases = [
        // (period, zone, start of a window, its length, a moment inside)
        (
            Period::Day,
            paris,
            local(paris, (2026, 3, 29), (0, 0, 0)),
            23 * HOUR,
        ),
        (
            Period::Day,
            paris,
            local(paris, (2026, 10, 25), (0, 0, 0)),
            25 * HOUR,
        ),
        (
            Period::Month,
            paris,
            local(paris, (2026, 2, 1), (0, 0, 0)),
            28 * 24 * HOUR,
        ),
        (
            Period::Month,
            "UTC",
            local("UTC", (2028, 2, 1), (0, 0, 0)),
            29 * 24 * HOUR,
        ),
        (
            Period::Week,
            "America/New_York",
            local("America/New_York", (2026, 11, 2), (0, 0, 0)),
            7 * 24 * HOUR,
        ),
    ];
    for deployment in [Deployment::Standalone, Deployment::Cluster] {
        runtime().block_on(async {
            for (period, zone, start, length) in cases {
                let end = start + length;
                let clock = ManualClock::new(start - 1);
                let memory = MemoryStore::with_clock(clock.clone());
                let redis = connect(
                    deployment.urls(),
                    TimeSource::Client(Arc::new(clock.clone())),
                    "calendar",
                )
                .await;
                let policy = Policy::fixed_window_calendar("cal", 5, period, zone).unwrap();
                let label = format!("{period} in {zone} on {deployment:?}");
                // The last µs of the window before, the first of this one,
                // its middle, its last µs, the first of the next.
                let steps = [
                    (start - 1, 3, Usage::Charge),
                    (start, 4, Usage::AtMost),
                    (start + length / 2, 2, Usage::Charge),
                    (start + length / 2, 1, Usage::Refund),
                    (end - 1, 1, Usage::AtMost),
                    (end, 9, Usage::AtMost),
                ];
                for (i, (at, cost, op)) in steps.into_iter().enumerate() {
                    clock.set(at);
                    let want = memory.usage(&policy, b"k", op, cost).await.unwrap();
                    let got = redis.usage(&policy, b"k", op, cost).await.unwrap();
                    assert_eq!(got, want, "{label}, step {i}");
                    let check_want = memory.check(&policy, b"k", 0).await.unwrap();
                    let check_got = redis.check(&policy, b"k", 0).await.unwrap();
                    assert_eq!(check_got, check_want, "{label}, step {i}: a peek");
                    let window_end = if at < start {
                        start
                    } else if at < end {
                        end
                    } else {
                        0
                    };
                    if window_end > 0 && want.reset_after > Duration::ZERO {
                        assert_eq!(
                            want.reset_after,
                            Duration::from_micros(window_end - at),
                            "{label}, step {i}: the window ends at local midnight"
                        );
                    }
                }
                // What each window counted: the window before held the
                // first charge alone, this one 4 + 2 - 1 + 0 (nothing left
                // at its end), the next 5 of the 9 asked.
                clock.set(start + 1);
                let d = redis.check(&policy, b"k", 0).await.unwrap();
                assert_eq!(d.remaining, 0, "{label}");
                clock.set(end);
                let d = redis.check(&policy, b"k", 0).await.unwrap();
                assert_eq!(d.remaining, 0, "{label}: the next window granted 5");
            }
        });
        deployment.assert_every_key_expires();
    }
}

/// A calendar window on the server's clock: the bounds are computed from
/// our estimate of the server's time and handed to the script, which
/// counts in the window its own clock names; the answer's reset is the
/// time to the next local midnight.
#[test]
fn a_calendar_window_on_the_servers_clock_ends_at_local_midnight() {
    use tollgate::algorithm::{Calendar, Period};
    let server = standalone();
    runtime().block_on(async {
        let store = connect(vec![server.url()], TimeSource::Server, "calendar-server").await;
        let policy =
            Policy::fixed_window_calendar("cal-server", 3, Period::Day, "Asia/Kolkata").unwrap();
        let before = unix_micros();
        let d = store.check(&policy, b"k", 2).await.unwrap();
        let after = unix_micros();
        assert!(d.allowed);
        assert_eq!(d.remaining, 1);
        let (_, end) = Calendar::new(Period::Day, "Asia/Kolkata")
            .unwrap()
            .window(before)
            .unwrap();
        let reset = d.reset_after.as_micros() as u64;
        assert!(
            end - after <= reset && reset <= end - before,
            "reset {reset} µs, the day ends in {} µs",
            end - before
        );
        assert!(!store.check(&policy, b"k", 2).await.unwrap().allowed);
        let d = store.charge(&policy, b"k", 4).await.unwrap();
        assert_eq!((d.allowed, d.remaining), (false, 0));
        let d = store.refund(&policy, b"k", 5).await.unwrap();
        assert_eq!(d.remaining, 2);
    });
    Deployment::Standalone.assert_every_key_expires();
}
