//! The metrics a test binary records: one `metrics` recorder installed
//! for the whole binary, and counter totals read from it.
//!
//! A snapshot drains the recorder's counters (swaps them to 0) and tests
//! run in parallel, so every snapshot is added to totals kept here, and
//! counts are read from those.

use std::sync::{Mutex, OnceLock};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// Installs the recorder (once per binary; later calls do nothing). Call
/// it before the code under test first records, so that nothing it
/// counts is lost (a `metrics` handle made before any recorder is
/// installed records nowhere).
pub fn record_metrics() {
    snapshotter();
}

fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this test binary");
        snapshotter
    })
}

/// A metric's name, its labels, and its total.
type Total = (String, Vec<(String, String)>, u64);

/// The total since the recorder was installed of the counter `name` over
/// its label sets that hold `label` (a name and a value); installs the
/// recorder if no one did.
pub fn counter_total(name: &str, label: (&str, &str)) -> u64 {
    static TOTALS: OnceLock<Mutex<Vec<Total>>> = OnceLock::new();
    let mut totals = TOTALS.get_or_init(Default::default).lock().unwrap();
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        let DebugValue::Counter(n) = value else {
            continue;
        };
        let (metric, labels) = (
            key.key().name().to_string(),
            key.key()
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect::<Vec<_>>(),
        );
        match totals
            .iter_mut()
            .find(|(m, l, _)| *m == metric && *l == labels)
        {
            Some((.., total)) => *total += n,
            None => totals.push((metric, labels, n)),
        }
    }
    totals
        .iter()
        .filter(|(m, l, _)| m == name && l.iter().any(|(k, v)| k == label.0 && v == label.1))
        .map(|(.., n)| n)
        .sum()
}
