//! The time axis of every panel.

use super::*;

/// The time axis: seconds from the first bin's start, with ticks at round
/// times (of day, for a log).
#[derive(Debug, Clone)]
pub(super) struct TimeAxis {
    /// µs since the epoch (or the trace's zero) of x = 0.
    pub(super) origin: u64,
    pub(super) absolute: bool,
    pub(super) end: f64,
    pub(super) bin_seconds: f64,
    /// The tick step, µs.
    pub(super) step: u64,
    pub(super) ticks: Vec<f64>,
}

impl TimeAxis {
    pub(super) fn new(bins: &Bins, absolute: bool) -> TimeAxis {
        let span = bins.width * bins.count as u64;
        let step = ROUND_US
            .iter()
            .copied()
            .find(|s| span / s <= 6)
            .unwrap_or_else(|| (span / 6).div_ceil(86_400_000_000) * 86_400_000_000);
        let first = bins.origin.div_ceil(step) * step;
        let ticks = (0..)
            .map(|k| first + k * step)
            .take_while(|&t| t <= bins.origin + span)
            .map(|t| (t - bins.origin) as f64 / 1e6)
            .collect();
        TimeAxis {
            origin: bins.origin,
            absolute,
            end: span as f64 / 1e6,
            bin_seconds: bins.width as f64 / 1e6,
            step,
            ticks,
        }
    }

    pub(super) fn seconds(&self, t_us: u64) -> f64 {
        t_us.saturating_sub(self.origin) as f64 / 1e6
    }

    pub(super) fn label(&self, x: f64) -> String {
        let t = self.origin + (x * 1e6).round() as u64;
        if self.absolute {
            let format = if self.step < 1_000_000 {
                "%H:%M:%S%.3f"
            } else if self.step < 60_000_000 {
                "%H:%M:%S"
            } else if self.step < 86_400_000_000 {
                "%H:%M"
            } else {
                "%Y-%m-%d"
            };
            return jiff::Timestamp::from_microsecond(t as i64)
                .map(|ts| ts.strftime(format).to_string())
                .unwrap_or_default();
        }
        let (s, us) = (t / 1_000_000, t % 1_000_000);
        if self.step < 1_000_000 {
            count_label(t as f64 / 1e6)
        } else if self.step < 60_000_000 && s < 3_600 {
            format!("{}:{:02}", s / 60, s % 60)
        } else if us == 0 && s < 86_400 * 2 {
            format!("{}:{:02}", s / 3_600, s / 60 % 60)
        } else {
            format!("{}d {}h", s / 86_400, s / 3_600 % 24)
        }
    }

    pub(super) fn description(&self) -> String {
        if self.absolute {
            let start = jiff::Timestamp::from_microsecond(self.origin as i64)
                .map(|ts| ts.strftime("%Y-%m-%d %H:%M:%S").to_string())
                .unwrap_or_default();
            return format!("time (UTC) from {start}");
        }
        let unit = if self.step < 1_000_000 {
            "seconds"
        } else if self.step < 60_000_000 && self.end < 3_600.0 {
            "m:ss"
        } else if self.end < 172_800.0 {
            "h:mm"
        } else {
            "days and hours"
        };
        format!("time from the trace's start ({unit})")
    }
}

impl ValueFormatter<f64> for TimeAxis {
    fn format(value: &f64) -> String {
        count_label(*value)
    }

    fn format_ext(&self, value: &f64) -> String {
        self.label(*value)
    }
}

impl Ranged for TimeAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = f64::from(limit.1 - limit.0);
        limit.0 + (value / self.end * span).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() && hint.max_num_points() < self.ticks.len() {
            return Vec::new();
        }
        self.ticks.clone()
    }

    fn range(&self) -> Range<f64> {
        0.0..self.end
    }
}
