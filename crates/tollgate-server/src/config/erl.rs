//! The `[erl]` table: ERL mode's opt-in additions to ERL, read only in ERL
//! mode (`tollgate serve --envoy-config PATH --config FILE`; the command
//! line's `--erl-extensions` and `--erl-headers` win over it).

use serde::Deserialize;
use toml::Spanned;

use super::span::SpannedError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawErl {
    extensions: Option<bool>,
    headers: Option<Spanned<String>>,
}

/// Which rate-limit headers ERL mode adds to its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum HeaderStyle {
    /// ERL's: `RateLimit-Limit`, `-Remaining` and `-Reset`, when
    /// `LIMIT_RESPONSE_HEADERS_ENABLED=true`.
    Erl,
    /// The IETF draft's `RateLimit-Policy` and `RateLimit`, on every
    /// answer with a limit.
    Ietf,
}

/// What the `[erl]` table asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ErlSettings {
    /// `extensions = true`: ERL files may name policies of this file
    /// (`rate_limit: {tollgate_policy: NAME}`).
    pub(crate) extensions: bool,
    /// `headers = "erl"` or `"ietf"`; absent is ERL's.
    pub(crate) headers: Option<HeaderStyle>,
}

pub(super) fn erl_settings(raw: RawErl) -> Result<ErlSettings, SpannedError> {
    let headers = match raw.headers {
        None => None,
        Some(h) => Some(match h.get_ref().as_str() {
            "erl" => HeaderStyle::Erl,
            "ietf" => HeaderStyle::Ietf,
            other => {
                return Err((
                    h.span(),
                    format!("[erl] `headers`: {other:?} is neither \"erl\" nor \"ietf\""),
                ));
            }
        }),
    };
    Ok(ErlSettings {
        extensions: raw.extensions.unwrap_or(false),
        headers,
    })
}
