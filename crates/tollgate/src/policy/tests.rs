//! Policies' validation: every bound named by its field.

use super::*;

fn field_of(err: Error) -> &'static str {
    match err {
        Error::InvalidPolicy { field, .. } => field,
        other => panic!("expected an invalid policy, got {other:?}"),
    }
}

#[test]
fn every_invalid_parameter_names_its_field() {
    let s = Duration::from_secs(1);
    assert_eq!(
        field_of(Policy::fixed_window("a", 0, s).unwrap_err()),
        "limit"
    );
    assert_eq!(
        field_of(Policy::fixed_window("a", 1, Duration::ZERO).unwrap_err()),
        "window"
    );
    assert_eq!(
        field_of(Policy::sliding_log("a", 10_001, s).unwrap_err()),
        "limit"
    );
    assert_eq!(
        field_of(Policy::sliding_window("a", 1 << 40, s).unwrap_err()),
        "limit"
    );
    assert_eq!(
        field_of(Policy::token_bucket("a", 1, s, 0).unwrap_err()),
        "burst"
    );
    assert_eq!(
        field_of(Policy::gcra("a", 1, Duration::from_micros(500), 1).unwrap_err()),
        "per"
    );
    assert_eq!(
        field_of(
            Policy::leaky_bucket("a", 1, Duration::from_secs(86_400 * 365), 1 << 30).unwrap_err()
        ),
        "capacity"
    );
    assert_eq!(
        field_of(Policy::concurrency("a", 1, Duration::from_secs(86_400 * 366)).unwrap_err()),
        "lease"
    );
    assert_eq!(
        field_of(Policy::fixed_window("", 1, s).unwrap_err()),
        "name"
    );
    assert_eq!(
        field_of(Policy::fixed_window("a b", 1, s).unwrap_err()),
        "name"
    );
}

#[test]
fn costs_and_reservations_are_checked() {
    let p = Policy::gcra("api", 10, Duration::from_secs(1), 5).unwrap();
    assert!(p.validate_cost(5).is_ok());
    assert_eq!(
        p.validate_cost(6).unwrap_err().to_string(),
        "cost 6 exceeds the policy's burst of 5"
    );
    assert_eq!(
        p.validate_reservation(1, Duration::from_secs(2)),
        Ok(2_000_000)
    );
    assert!(matches!(
        p.validate_reservation(1, Duration::from_secs(u64::MAX)),
        Err(Error::InvalidArgument {
            field: "max_wait",
            ..
        })
    ));
    let fw = Policy::fixed_window("fw", 1, Duration::from_secs(1)).unwrap();
    assert_eq!(
        fw.validate_reservation(1, Duration::ZERO)
            .unwrap_err()
            .code(),
        "unsupported"
    );
}

#[test]
fn a_hold_is_for_buckets_within_their_refill_from_empty() {
    let s = Duration::from_secs(1);
    let held = |ms| Usage::AtMostHeld(Duration::from_millis(ms));
    // 10 a second, a burst of 3: empty to full in 300 ms.
    for bucket in [
        Policy::token_bucket("tb", 10, s, 3).unwrap(),
        Policy::gcra("g", 10, s, 3).unwrap(),
    ] {
        assert!(bucket.validate_usage(held(300), 5).is_ok());
        let e = bucket.validate_usage(held(301), 5).unwrap_err();
        assert_eq!(e.code(), "invalid_argument");
        assert!(e.to_string().contains("hold"), "{e}");
        assert!(e.to_string().contains("300000 µs"), "{e}");
    }
    let window = Policy::fixed_window("fw", 10, s).unwrap();
    let e = window.validate_usage(held(0), 1).unwrap_err();
    assert!(e.to_string().contains("hold"), "{e}");
    assert!(e.to_string().contains("fixed_window"), "{e}");
}
