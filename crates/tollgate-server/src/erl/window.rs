//! ERL's units and its epoch-aligned fixed windows (`UnitToDivider` and
//! `CalculateReset` in its `src/utils/utilities.go`).
//!
//! A window of a unit of `d` seconds is `[k·d, (k+1)·d)` in Unix seconds,
//! UTC: weeks start on Thursday 00:00 (1970-01-01 was one), a month is a
//! block of 30 days and a year one of 365, not calendar months or years.
//! A rule's status in its window is `Window::status`.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;

/// A unit of `rate_limit.unit`, numbered as Envoy's
/// `RateLimitResponse.RateLimit.Unit` (and `envoy.type.v3.RateLimitUnit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Unit {
    /// 1 s.
    Second = 1,
    /// 60 s.
    Minute = 2,
    /// 3600 s.
    Hour = 3,
    /// 86 400 s.
    Day = 4,
    /// 30 days.
    Month = 5,
    /// 365 days.
    Year = 6,
    /// 7 days, from Thursday.
    Week = 7,
}

const DAY: u64 = 86_400;

impl Unit {
    const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Month,
        Unit::Year,
        Unit::Week,
    ];

    /// The unit a config names, in any case (ERL upper-cases the text);
    /// `None` for anything else, `UNKNOWN` included.
    pub(crate) fn from_name(name: &str) -> Option<Unit> {
        let upper = name.to_uppercase();
        Unit::ALL.into_iter().find(|u| u.name() == upper)
    }

    /// The unit of a proto enum number; `None` for 0 (`UNKNOWN`) and
    /// numbers no unit has.
    pub(crate) fn from_proto(number: i32) -> Option<Unit> {
        Unit::ALL.into_iter().find(|u| *u as i32 == number)
    }

    /// The enum value's name, as protojson writes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Unit::Second => "SECOND",
            Unit::Minute => "MINUTE",
            Unit::Hour => "HOUR",
            Unit::Day => "DAY",
            Unit::Month => "MONTH",
            Unit::Year => "YEAR",
            Unit::Week => "WEEK",
        }
    }

    /// The window's length in seconds.
    pub(crate) fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3600,
            Unit::Day => DAY,
            Unit::Week => 7 * DAY,
            Unit::Month => 30 * DAY,
            Unit::Year => 365 * DAY,
        }
    }

    /// The start (Unix seconds) of the window holding `now`.
    pub(crate) fn window_start(self, now: u64) -> u64 {
        now - now % self.seconds()
    }

    /// Whole seconds until the window holding `now` ends: from 1 to the
    /// window's length.
    pub(crate) fn until_reset(self, now: u64) -> u64 {
        self.seconds() - now % self.seconds()
    }
}

/// An ERL fixed-window rule, for its status.
pub(crate) struct Window<'c> {
    pub(crate) requests_per_unit: u32,
    pub(crate) unit: Unit,
    pub(crate) name: &'c str,
}

impl Window<'_> {
    /// The status of a window now holding `after` (`None`: known over, from
    /// the local cache); a shadow rule answers `OK` when over.
    pub(crate) fn status(&self, now: u64, after: Option<u64>, shadow: bool) -> DescriptorStatus {
        let limit = u64::from(self.requests_per_unit);
        let remaining = after.map_or(0, |after| limit.saturating_sub(after));
        let over = after.is_none_or(|after| after > limit);
        DescriptorStatus {
            code: if over && !shadow {
                Code::OverLimit
            } else {
                Code::Ok
            } as i32,
            current_limit: Some(RateLimit {
                name: self.name.to_string(),
                requests_per_unit: self.requests_per_unit,
                unit: self.unit as i32,
            }),
            limit_remaining: remaining as u32,
            duration_until_reset: Some(ProtoDuration {
                seconds: self.unit.until_reset(now) as i64,
                nanos: 0,
            }),
            quota: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_any_case() {
        assert_eq!(Unit::from_name("second"), Some(Unit::Second));
        assert_eq!(Unit::from_name("Week"), Some(Unit::Week));
        assert_eq!(Unit::from_name("YEAR"), Some(Unit::Year));
        assert_eq!(Unit::from_name("unknown"), None);
        assert_eq!(Unit::from_name("seconds"), None);
        assert_eq!(Unit::from_name(""), None);
    }

    #[test]
    fn proto_numbers() {
        assert_eq!(Unit::from_proto(0), None);
        assert_eq!(Unit::from_proto(5), Some(Unit::Month));
        assert_eq!(Unit::from_proto(7), Some(Unit::Week));
        assert_eq!(Unit::from_proto(8), None);
        for u in Unit::ALL {
            assert_eq!(Unit::from_proto(u as i32), Some(u));
            assert_eq!(Unit::from_name(u.name()), Some(u));
        }
    }

    #[test]
    fn windows_are_epoch_aligned() {
        // 2026-11-26 is a Thursday: its midnight starts a week.
        let thursday = 1_795_651_200;
        assert_eq!(thursday % DAY, 0);
        assert_eq!(Unit::Week.window_start(thursday + 5 * DAY + 7), thursday);
        assert_eq!(Unit::Week.window_start(thursday - 1), thursday - 7 * DAY);
        assert_eq!(
            Unit::Month.window_start(1_795_651_200),
            1_795_651_200 - 1_795_651_200 % 2_592_000
        );
        assert_eq!(Unit::Year.seconds(), 31_536_000);
        assert_eq!(Unit::Minute.window_start(1234), 1200);
        assert_eq!(Unit::Minute.until_reset(1234), 26);
        assert_eq!(Unit::Minute.until_reset(1200), 60);
        assert_eq!(Unit::Second.until_reset(99), 1);
        assert_eq!(Unit::Hour.until_reset(3599), 1);
    }
}
