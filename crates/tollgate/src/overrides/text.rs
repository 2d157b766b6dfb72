//! An override as one line of text, the form a shared store keeps it in:
//! `<kind>;<expiry in Unix ms, or ->;<arguments>`, e.g.
//! `limits;-;limit=5000,window=60000000` (durations in µs), `block;1700000000000;`,
//! `tier;-;pro`.

use std::time::Duration;

use super::{Action, Limits, Override};
use crate::{Error, Result};

impl Override {
    /// The override as one line (see the module).
    pub fn to_text(&self) -> String {
        let expiry = self
            .expires_at()
            .map_or_else(|| "-".to_string(), |at| at.to_string());
        let args = match self.action() {
            Action::Block | Action::Allow => String::new(),
            Action::Tier(t) => t.to_string(),
            Action::Limits(l) => {
                let micros = |d: Option<Duration>| d.map(|d| d.as_micros() as u64);
                [
                    ("limit", l.limit),
                    ("window", micros(l.window)),
                    ("rate", l.rate),
                    ("per", micros(l.per)),
                    ("burst", l.burst),
                    ("capacity", l.capacity),
                    ("lease", micros(l.lease)),
                ]
                .iter()
                .filter_map(|(n, v)| v.map(|v| format!("{n}={v}")))
                .collect::<Vec<_>>()
                .join(",")
            }
        };
        format!("{};{expiry};{args}", self.action().kind())
    }

    /// Reads a line [`to_text`](Self::to_text) wrote.
    pub fn from_text(text: &str) -> Result<Override> {
        let bad = || Error::argument("override", format!("unreadable stored override {text:?}"));
        let mut parts = text.splitn(3, ';');
        let (kind, expiry, args) = (
            parts.next().ok_or_else(bad)?,
            parts.next().ok_or_else(bad)?,
            parts.next().ok_or_else(bad)?,
        );
        let action = match kind {
            "block" => Action::Block,
            "allow" => Action::Allow,
            "tier" if !args.is_empty() => Action::Tier(args.into()),
            "limits" => {
                let mut l = Limits::default();
                for pair in args.split(',') {
                    let (name, value) = pair.split_once('=').ok_or_else(bad)?;
                    let v: u64 = value.parse().map_err(|_| bad())?;
                    let d = Some(Duration::from_micros(v));
                    match name {
                        "limit" => l.limit = Some(v),
                        "window" => l.window = d,
                        "rate" => l.rate = Some(v),
                        "per" => l.per = d,
                        "burst" => l.burst = Some(v),
                        "capacity" => l.capacity = Some(v),
                        "lease" => l.lease = d,
                        _ => return Err(bad()),
                    }
                }
                Action::Limits(l)
            }
            _ => return Err(bad()),
        };
        let over = Override::new(action);
        Ok(match expiry {
            "-" => over,
            at => over.expiring_at(at.parse().map_err(|_| bad())?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_as_written() {
        let limits = Limits {
            limit: Some(5000),
            window: Some(Duration::from_secs(60)),
            ..Limits::default()
        };
        for over in [
            Override::limits(limits),
            Override::block().expiring_at(1_700_000_000_000),
            Override::allow(),
            Override::tier("pro"),
        ] {
            assert_eq!(Override::from_text(&over.to_text()).unwrap(), over);
        }
        assert_eq!(
            Override::limits(limits).to_text(),
            "limits;-;limit=5000,window=60000000"
        );
        for bad in [
            "",
            "block",
            "limits;-;limit=x",
            "wat;-;",
            "tier;-;",
            "block;soon;",
        ] {
            assert!(Override::from_text(bad).is_err(), "{bad}");
        }
    }
}
