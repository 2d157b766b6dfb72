//! What an operator's files may make the service read and print: files are
//! read up to a cap (so `--config /dev/zero` stops at once), their text must
//! be UTF-8 (an error names the line), and a value quoted back in an error
//! is cut short (a 10 MB bad field is not printed whole).

use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

/// The largest config file read: a TOML config, or one ERL YAML file.
pub(crate) const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The longest value quoted whole in an error message, in bytes.
const EXCERPT_BYTES: usize = 80;

/// Why a file's text could not be read: the message, and the 1-based line
/// it is about (0 when it is about the whole file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadError {
    pub(crate) line: usize,
    pub(crate) message: String,
}

/// The text of the file at `path`, read up to `cap` bytes; `what` names
/// the cap in the error (`config files`, `traces`).
pub(crate) fn read_text(path: &Path, cap: u64, what: &str) -> Result<String, ReadError> {
    let whole = |message: String| ReadError { line: 0, message };
    let file =
        std::fs::File::open(path).map_err(|e| whole(format!("cannot read the file: {e}")))?;
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| whole(format!("cannot read the file: {e}")))?;
    if bytes.len() as u64 > cap {
        return Err(whole(format!(
            "the file is larger than {}, the cap on {what}",
            size(cap)
        )));
    }
    text(bytes)
}

/// `bytes` as text, or an error naming the line and column of the first
/// byte that is not UTF-8.
pub(crate) fn text(bytes: Vec<u8>) -> Result<String, ReadError> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&valid[line_start..])
            .chars()
            .count()
            + 1;
        ReadError {
            line: valid.iter().filter(|&&b| b == b'\n').count() + 1,
            message: format!("the text is not UTF-8 (a bad byte at column {column})"),
        }
    })
}

/// `value` as an error message may quote it: whole when short, else its
/// start and its length.
pub(crate) fn excerpt(value: &str) -> Cow<'_, str> {
    if value.len() <= EXCERPT_BYTES {
        return Cow::Borrowed(value);
    }
    let mut end = EXCERPT_BYTES;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}… ({} bytes in all)", &value[..end], value.len()))
}

/// A message cut to a readable length: its start and end kept (where the
/// parser says what it expected), the middle (a long quoted value) left
/// out.
pub(crate) fn clip_message(message: &str) -> Cow<'_, str> {
    const KEEP: usize = 120;
    if message.len() <= 3 * KEEP {
        return Cow::Borrowed(message);
    }
    let mut head = KEEP;
    while !message.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = message.len() - KEEP;
    while !message.is_char_boundary(tail) {
        tail += 1;
    }
    Cow::Owned(format!(
        "{} … ({} bytes left out) … {}",
        &message[..head],
        tail - head,
        &message[tail..]
    ))
}

/// `bytes` for people: `16 MiB`, `1 GiB`, or bytes.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b.is_multiple_of(1 << 30) => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{} MiB", b >> 20),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_cap_is_refused_without_reading_it_all() {
        // /dev/zero never ends: only a cap stops the read.
        let e = read_text(Path::new("/dev/zero"), 1 << 20, "config files").unwrap_err();
        assert_eq!(
            e.message,
            "the file is larger than 1 MiB, the cap on config files"
        );
    }

    #[test]
    fn bad_utf8_names_its_line_and_column() {
        let e = text(b"a = 1\nb = \"x\xffy\"\n".to_vec()).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("column 7"), "{}", e.message);
        assert_eq!(text(b"ok\n".to_vec()).unwrap(), "ok\n");
    }

    #[test]
    fn long_values_are_cut_short() {
        let long = "é".repeat(5_000_000);
        let cut = excerpt(&long);
        assert!(cut.len() < 200, "{}", cut.len());
        assert!(cut.ends_with("(10000000 bytes in all)"), "{cut}");
        assert_eq!(excerpt("short"), "short");
        let message = format!("invalid type: string \"{long}\", expected a boolean");
        let clipped = clip_message(&message);
        assert!(clipped.len() < 400, "{}", clipped.len());
        assert!(clipped.ends_with("expected a boolean"), "{clipped}");
        assert!(clipped.starts_with("invalid type: string"), "{clipped}");
    }
}
