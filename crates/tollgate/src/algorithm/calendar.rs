//! Calendar periods for fixed windows: a day, an ISO week (from Monday),
//! a month or a year, from local midnight in an IANA time zone.
//!
//! The bounds come from jiff and its bundled time zone database (nothing
//! is read from the system): a day is 23 or 25 hours across a DST change,
//! a month has its real length. A window is named by its first instant, in
//! µs since the Unix epoch, which the fixed window keeps as its state's
//! window; the Redis store computes the bounds here and hands them to the
//! script.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use parking_lot::Mutex;

use crate::{Error, Result};

/// A calendar period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Period {
    /// From local midnight to the next (23 or 25 hours across DST).
    Day,
    /// From Monday's local midnight to the next Monday's (ISO 8601).
    Week,
    /// From the first of the month's local midnight to the next month's.
    Month,
    /// From January 1st's local midnight to the next year's.
    Year,
}

impl Period {
    /// `1d`, `1w`, `1mo` or `1y`, as policy files write them; `None` for
    /// anything else.
    pub fn parse(text: &str) -> Option<Period> {
        match text {
            "1d" => Some(Period::Day),
            "1w" => Some(Period::Week),
            "1mo" => Some(Period::Month),
            "1y" => Some(Period::Year),
            _ => None,
        }
    }

    /// `1d`, `1w`, `1mo` or `1y`.
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Day => "1d",
            Period::Week => "1w",
            Period::Month => "1mo",
            Period::Year => "1y",
        }
    }

    /// A nominal length in µs (24 hours, 7 days, 30 days, 365 days), for
    /// what wants one length: a `RateLimit-Policy` header's `w`. Windows
    /// themselves have their real lengths.
    pub fn nominal_micros(self) -> u64 {
        const DAY: u64 = 86_400_000_000;
        match self {
            Period::Day => DAY,
            Period::Week => 7 * DAY,
            Period::Month => 30 * DAY,
            Period::Year => 365 * DAY,
        }
    }

    /// The first day of the period that holds `date`.
    fn first_day(self, date: Date) -> Result<Date> {
        let first = match self {
            Period::Day => Ok(date),
            Period::Week => {
                let back = i64::from(date.weekday().to_monday_zero_offset());
                date.checked_sub(back.days())
            }
            Period::Month => Ok(date.first_of_month()),
            Period::Year => Ok(date.first_of_year()),
        };
        first.map_err(out_of_range)
    }

    /// The first day of the next period, from the first day of one.
    fn next(self, first: Date) -> Result<Date> {
        let next = match self {
            Period::Day => first.checked_add(1.day()),
            Period::Week => first.checked_add(1.week()),
            Period::Month => first.checked_add(1.month()),
            Period::Year => first.checked_add(1.year()),
        };
        next.map_err(out_of_range)
    }
}

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn out_of_range(e: jiff::Error) -> Error {
    Error::argument("now", format!("outside the calendar's range: {e}"))
}

/// A period in a time zone. Made once per (period, zone) and kept for the
/// life of the process ([`Calendar::new`] hands out a `&'static`), so that
/// a [`FixedWindow`](super::FixedWindow) holding one stays `Copy`.
pub struct Calendar {
    period: Period,
    zone_name: String,
    zone: TimeZone,
    /// The last window computed, `[start, end)` in µs: most calls fall in
    /// it and need no calendar arithmetic.
    last: Mutex<(u64, u64)>,
}

impl Calendar {
    /// The calendar of `period` in `zone`: an IANA name (`Europe/Paris`)
    /// or `UTC`, looked up in jiff's bundled database. An unknown zone is
    /// an error naming the `calendar` field.
    pub fn new(period: Period, zone: &str) -> Result<&'static Calendar> {
        static ALL: OnceLock<Mutex<Vec<&'static Calendar>>> = OnceLock::new();
        let mut all = ALL.get_or_init(Default::default).lock();
        if let Some(c) = all
            .iter()
            .find(|c| c.period == period && c.zone_name == zone)
        {
            return Ok(c);
        }
        let tz = TimeZone::get(zone).map_err(|e| {
            Error::policy(
                "calendar",
                format!("unknown time zone {zone:?} (an IANA name such as \"Europe/Paris\", or \"UTC\"): {e}"),
            )
        })?;
        let calendar: &'static Calendar = Box::leak(Box::new(Calendar {
            period,
            zone_name: zone.to_string(),
            zone: tz,
            last: Mutex::new((0, 0)),
        }));
        all.push(calendar);
        Ok(calendar)
    }

    /// The period.
    pub fn period(&self) -> Period {
        self.period
    }

    /// The time zone's name, as given.
    pub fn zone(&self) -> &str {
        &self.zone_name
    }

    /// The window holding `now` (µs since the Unix epoch): `[start, end)`
    /// in µs, from local midnight on the period's first day to the next
    /// period's (the first instant of the day when a DST gap skips
    /// midnight). Past jiff's range (the year 9999, far beyond the 2^53 µs
    /// the stores take) an error.
    pub fn window(&self, now: u64) -> Result<(u64, u64)> {
        if let Some(last) = self.last.try_lock() {
            let (start, end) = *last;
            if start <= now && now < end {
                return Ok((start, end));
            }
        }
        let micros = i64::try_from(now).map_err(|_| out_of_range_micros(now))?;
        let at = Timestamp::from_microsecond(micros).map_err(out_of_range)?;
        let date = at.to_zoned_datetime(self.zone.clone()).date();
        let first = self.period.first_day(date)?;
        let start = self.midnight(first)?;
        let end = self.midnight(self.period.next(first)?)?;
        if let Some(mut last) = self.last.try_lock() {
            *last = (start, end);
        }
        Ok((start, end))
    }

    /// The first instant of `date` here, in µs.
    fn midnight(&self, date: Date) -> Result<u64> {
        let zoned = date
            .to_zoned_datetime(self.zone.clone())
            .map_err(out_of_range)?;
        u64::try_from(zoned.timestamp().as_microsecond()).map_err(|_| out_of_range_micros(0))
    }
}

fn out_of_range_micros(now: u64) -> Error {
    Error::argument("now", format!("{now}µs is outside the calendar's range"))
}

impl fmt::Debug for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Calendar({} in {})", self.period, self.zone_name)
    }
}

impl PartialEq for Calendar {
    fn eq(&self, other: &Calendar) -> bool {
        self.period == other.period && self.zone_name == other.zone_name
    }
}

impl Eq for Calendar {}

impl Hash for Calendar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.period.hash(state);
        self.zone_name.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// µs of a local civil time in `zone`.
    fn at(zone: &str, y: i16, m: i8, d: i8, h: i8) -> u64 {
        let tz = TimeZone::get(zone).unwrap();
        let zdt = jiff::civil::date(y, m, d)
            .at(h, 0, 0, 0)
            .to_zoned_datetime(tz)
            .unwrap();
        zdt.timestamp().as_microsecond() as u64
    }

    const HOUR: u64 = 3_600_000_000;

    #[test]
    fn days_across_dst_are_23_and_25_hours() {
        let day = Calendar::new(Period::Day, "Europe/Paris").unwrap();
        // 2026-03-29: clocks go from 02:00 to 03:00.
        let (start, end) = day.window(at("Europe/Paris", 2026, 3, 29, 12)).unwrap();
        assert_eq!(start, at("Europe/Paris", 2026, 3, 29, 0));
        assert_eq!(end - start, 23 * HOUR);
        // 2026-10-25: clocks go from 03:00 back to 02:00.
        let (start, end) = day.window(at("Europe/Paris", 2026, 10, 25, 12)).unwrap();
        assert_eq!(end - start, 25 * HOUR);
        // An ordinary day, and its last µs.
        let (start, end) = day.window(at("Europe/Paris", 2026, 6, 1, 0)).unwrap();
        assert_eq!(end - start, 24 * HOUR);
        assert_eq!(day.window(end - 1).unwrap(), (start, end));
        assert_eq!(day.window(end).unwrap().0, end);
    }

    #[test]
    fn months_have_their_real_lengths_and_weeks_start_on_monday() {
        let month = Calendar::new(Period::Month, "UTC").unwrap();
        for (m, days) in [(1, 31), (2, 28), (4, 30), (12, 31)] {
            let (start, end) = month.window(at("UTC", 2026, m, 15, 9)).unwrap();
            assert_eq!(start, at("UTC", 2026, m, 1, 0));
            assert_eq!(end - start, days * 24 * HOUR, "month {m}");
        }
        let leap = month.window(at("UTC", 2028, 2, 29, 23)).unwrap();
        assert_eq!(leap.1 - leap.0, 29 * 24 * HOUR);
        // The last µs of January 31st, and the first of February 1st.
        let feb = at("UTC", 2026, 2, 1, 0);
        assert_eq!(month.window(feb - 1).unwrap().1, feb);
        assert_eq!(month.window(feb).unwrap().0, feb);
        // 2026-11-25 is a Wednesday: its week began on Monday the 23rd.
        let week = Calendar::new(Period::Week, "Asia/Tokyo").unwrap();
        let (start, end) = week.window(at("Asia/Tokyo", 2026, 11, 25, 18)).unwrap();
        assert_eq!(start, at("Asia/Tokyo", 2026, 11, 23, 0));
        assert_eq!(end - start, 7 * 24 * HOUR);
        // A year in New York, DST and all, from local midnight.
        let year = Calendar::new(Period::Year, "America/New_York").unwrap();
        let (start, end) = year.window(at("America/New_York", 2026, 7, 4, 12)).unwrap();
        assert_eq!(start, at("America/New_York", 2026, 1, 1, 0));
        assert_eq!(end, at("America/New_York", 2027, 1, 1, 0));
    }

    #[test]
    fn calendars_are_made_once_and_unknown_zones_are_refused() {
        let a = Calendar::new(Period::Day, "Europe/Paris").unwrap();
        let b = Calendar::new(Period::Day, "Europe/Paris").unwrap();
        assert!(std::ptr::eq(a, b));
        let e = Calendar::new(Period::Day, "Mars/Olympus_Mons").unwrap_err();
        assert_eq!(e.code(), "invalid_policy");
        assert!(e.to_string().contains("calendar"), "{e}");
        assert_eq!(Period::parse("1mo"), Some(Period::Month));
        assert_eq!(Period::parse("30d"), None);
    }
}
