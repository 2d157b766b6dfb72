//! The parsers of what operators give the service, each fed raw bytes: the
//! entry points of the coverage-guided fuzz targets (`fuzz/`, see
//! `docs/fuzzing.md`) and of the property tests (`tests/parsers.rs`).
//! Not an API: hidden from the docs, and free to change.
//!
//! Each returns the errors the parser reported, as `(line, message)`
//! (line 0: about no one line), so that a test can check that they are
//! bounded and point into the input.

use envoy_types::pb::google::protobuf::Any;

use crate::config::Config;
use crate::simulate::{self, Format};
use crate::{config, erl};

/// What a parser said of an input: accepted, or its errors.
pub type Outcome = Result<(), Vec<(usize, String)>>;

/// The policies traces are replayed against: one of each family.
const POLICIES: &str = "
[[policy]]
name = \"p\"
algorithm = \"fixed_window\"
limit = 5
window = \"1s\"

[[policy]]
name = \"b\"
algorithm = \"token_bucket\"
rate = 2
per = \"1s\"
burst = 3

[[policy]]
name = \"c\"
algorithm = \"concurrency\"
limit = 2
lease = \"5s\"
";

fn text(data: &[u8]) -> Result<String, Vec<(usize, String)>> {
    config::text(data.to_vec()).map_err(|e| vec![(e.line, e.message)])
}

/// A TOML config file (`tollgate serve --config`, `validate`, `simulate`).
pub fn config_toml(data: &[u8]) -> Outcome {
    let text = text(data)?;
    Config::parse("fuzz.toml", &text)
        .map(drop)
        .map_err(|errors| errors.into_iter().map(|e| (e.line, e.message)).collect())
}

/// An ERL YAML config file, as ERL mode and `validate --envoy-config`
/// read it.
pub fn erl_yaml(data: &[u8]) -> Outcome {
    let text = text(data)?;
    erl::parse_files(&[("fuzz.yaml".to_string(), text)], None)
        .map(drop)
        .map_err(|errors| {
            errors
                .into_iter()
                .map(|e| (e.line.unwrap_or(0), e.message))
                .collect()
        })
}

/// One `RateLimitConfig` resource of an xDS push (protobuf bytes).
pub fn xds_resource(data: &[u8]) -> Outcome {
    let any = Any {
        type_url: erl::XDS_TYPE_URL.to_string(),
        value: data.to_vec(),
    };
    erl::from_xds_resources(&[any])
        .map(drop)
        .map_err(|errors| errors.into_iter().map(|e| (0, e.message)).collect())
}

/// A trace in `format` (`--key key` for a log), read and replayed on the
/// memory store as `simulate` replays it.
fn trace(data: &[u8], format: Format, key: &str) -> Outcome {
    let text = text(data)?;
    let policies = Config::parse("policies.toml", POLICIES)
        .map_err(|_| vec![(0, "the built-in policies do not parse".to_string())])?
        .policies;
    simulate::replay_text(&text, format, key, &policies)
        .map(drop)
        .map_err(|message| vec![(line_in(&message), message)])
}

/// A CSV trace (`t_ms,policy,key,cost`).
pub fn trace_csv(data: &[u8]) -> Outcome {
    trace(data, Format::Csv, "client")
}

/// An nginx or Apache combined access log, keyed by client and path.
pub fn combined_log(data: &[u8]) -> Outcome {
    trace(data, Format::Combined, "client,path:2,header:user-agent")
}

/// A JSON-lines access log, keyed by client and path.
pub fn json_log(data: &[u8]) -> Outcome {
    trace(data, Format::Json, "client,path:1")
}

/// The line a `trace:N: …` message names (0 when none).
fn line_in(message: &str) -> usize {
    message
        .strip_prefix("trace:")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
