//! An error in an ERL config: the file, the line when known, and ERL's own
//! message (so that a team can search for it in ERL's documentation),
//! often followed by the key or value it is about.

use std::fmt;

/// One error in one ERL config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    /// The file (as given, or found under the directory given).
    pub(crate) file: String,
    /// The line (1-based), when the error is about one place.
    pub(crate) line: Option<usize>,
    /// What is wrong.
    pub(crate) message: String,
}

impl ConfigError {
    pub(crate) fn at(file: &str, line: usize, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_string(),
            line: (line > 0).then_some(line),
            message: clip(message.into()),
        }
    }

    pub(crate) fn file(file: &str, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_string(),
            line: None,
            message: clip(message.into()),
        }
    }
}

/// A message cut to a readable length (a value it quotes may be huge).
fn clip(message: String) -> String {
    match crate::config::clip_message(&message) {
        std::borrow::Cow::Borrowed(_) => message,
        std::borrow::Cow::Owned(short) => short,
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.file, line, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}
