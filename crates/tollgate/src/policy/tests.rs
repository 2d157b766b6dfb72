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
