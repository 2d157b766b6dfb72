//! A YAML document as ERL's parser (`gopkg.in/yaml.v2`) sees it: a tree
//! whose scalars keep their raw text beside the YAML 1.1 type that text
//! resolves to.
//!
//! ERL decodes twice: into a generic map (where the resolved type decides
//! what is accepted: a float is not) and then into typed structs (where a
//! string field takes any scalar's raw text, so `value: 8080` is `"8080"`
//! and `value: yes` is `"yes"`). Both passes read this tree. Resolution
//! follows yaml.v2's rules for plain scalars: `y`/`yes`/`on`/`true`
//! (and their capitalisations, and the `n`/`no`/`off`/`false` family) are
//! booleans, `~`/`null`/empty are null, integers are read as Go's
//! `ParseInt(s, 0, 64)` reads them after dropping `_` (so `0x10`, `0o17`,
//! `017`, `0b101`), and a number in float syntax (`1.5`, `1e3`, `.5`, and
//! `080`, which is no octal) is a float. Quoted and block scalars are
//! strings. Anchors, aliases and `<<` merges are expanded; a map key given
//! twice is an error (yaml.v2 keeps the last value, which turned a typo
//! into a different limit), though a key may still override one a `<<`
//! merge brought. Only the first document of the stream counts.
//!
//! The tree is bounded against hostile files: collections nest at most
//! [`MAX_DEPTH`] deep in any style, and aliases may repeat at most
//! [`ALIAS_NODES`] nodes and [`ALIAS_BYTES`] bytes of text in all (a
//! "billion laughs" of nested aliases stops there instead of filling the
//! memory).
//!
//! Kept whole on purpose: one concept, the document as yaml.v2 sees it; the event walk and the YAML 1.1 resolution it applies to each scalar are read together.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Tag};

use crate::config::excerpt;

/// What a scalar's text resolves to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    /// Fits Go's `int` (64 bits).
    Int(i64),
    /// An integer only an `uint64` holds (above `i64::MAX`): Go's decoder
    /// gives it another type, which ERL's key check refuses.
    BigInt(u64),
    Float,
    Str,
    /// The plain `<<` key.
    Merge,
}

impl Value {
    /// The YAML tag name yaml.v2 puts in its errors.
    pub(crate) fn tag(&self) -> &'static str {
        match self {
            Value::Null => "!!null",
            Value::Bool(_) => "!!bool",
            Value::Int(_) | Value::BigInt(_) => "!!int",
            Value::Float => "!!float",
            Value::Str | Value::Merge => "!!str",
        }
    }
}

/// One node of the tree, with the line (1-based) where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) line: usize,
    pub(crate) kind: Kind,
}

/// A node's shape.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Scalar { text: String, value: Value },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The scalar's raw text, if it is one.
    pub(crate) fn text(&self) -> Option<&str> {
        match &self.kind {
            Kind::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// The tag yaml.v2 names this node by in its errors.
    pub(crate) fn tag(&self) -> &'static str {
        match &self.kind {
            Kind::Scalar { value, .. } => value.tag(),
            Kind::Seq(_) => "!!seq",
            Kind::Map(_) => "!!map",
        }
    }

    /// The node as Go's `%v` prints the decoded value (for error messages).
    pub(crate) fn display(&self) -> String {
        match &self.kind {
            Kind::Scalar {
                value: Value::Null, ..
            } => "<nil>".to_string(),
            Kind::Scalar { text, .. } => text.clone(),
            Kind::Seq(items) => {
                let inner: Vec<String> = items.iter().map(Node::display).collect();
                format!("[{}]", inner.join(" "))
            }
            Kind::Map(entries) => {
                let inner: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("{}:{}", k.display(), v.display()))
                    .collect();
                format!("map[{}]", inner.join(" "))
            }
        }
    }
}

/// A syntax error, with its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) line: usize,
    pub(crate) message: String,
}

/// How deep collections may nest (a map in a list in a map is 3): ERL's
/// descriptors take two levels each, so this allows 60 of them, far more
/// than any config holds, and keeps every recursive pass over the tree off
/// the end of the stack.
pub(crate) const MAX_DEPTH: usize = 128;

/// How many nodes aliases may repeat in one document, in all.
pub(crate) const ALIAS_NODES: usize = 100_000;

/// How many bytes of scalar text aliases may repeat in one document.
pub(crate) const ALIAS_BYTES: usize = 4 << 20;

/// Parses the first document of `text`; `None` when the stream has none
/// (an empty file, or only comments).
pub(crate) fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut builder = Builder {
        parser: Parser::new_from_str(text),
        lines: text.bytes().filter(|&b| b == b'\n').count() + 1,
        anchors: HashMap::new(),
        depth: 0,
        repeated: Size::default(),
    };
    loop {
        match builder.next()? {
            None | Some((Event::StreamEnd, _)) => return Ok(None),
            Some((Event::DocumentStart(_), _)) => break,
            Some(_) => {}
        }
    }
    match builder.next()? {
        Some((Event::DocumentEnd, _)) | None => Ok(None),
        Some((event, line)) => builder.node(event, line).map(|(node, _)| Some(node)),
    }
}

/// The nodes and scalar bytes of a subtree: what repeating it costs.
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    nodes: usize,
    bytes: usize,
}

impl Size {
    fn add(&mut self, other: Size) {
        self.nodes = self.nodes.saturating_add(other.nodes);
        self.bytes = self.bytes.saturating_add(other.bytes);
    }
}

struct Builder<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    /// The text's lines: the parser may place an error at the end of the
    /// input a line past them.
    lines: usize,
    anchors: HashMap<usize, (Node, Size)>,
    /// Collections open around the node being read.
    depth: usize,
    /// What aliases have repeated so far.
    repeated: Size,
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<Option<(Event<'a>, usize)>, SyntaxError> {
        match self.parser.next_event() {
            None => Ok(None),
            Some(Ok((event, span))) => Ok(Some((event, span.start.line()))),
            Some(Err(e)) => Err(SyntaxError {
                line: e.marker().line().min(self.lines),
                message: e.info().to_string(),
            }),
        }
    }

    fn expect(&mut self) -> Result<(Event<'a>, usize), SyntaxError> {
        self.next()?.ok_or_else(|| SyntaxError {
            line: 0,
            message: "unexpected end of the document".to_string(),
        })
    }

    /// One more level of nesting at `line`, or the error that it is one
    /// too many.
    fn enter(&mut self, line: usize) -> Result<(), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(SyntaxError {
                line,
                message: format!("collections nested more than {MAX_DEPTH} deep"),
            });
        }
        Ok(())
    }

    fn node(&mut self, event: Event<'a>, line: usize) -> Result<(Node, Size), SyntaxError> {
        let (node, size, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let value = resolve(&text, style, tag.as_deref())
                    .map_err(|message| SyntaxError { line, message })?;
                let size = Size {
                    nodes: 1,
                    bytes: text.len(),
                };
                let kind = Kind::Scalar {
                    text: text.into_owned(),
                    value,
                };
                (Node { line, kind }, size, anchor)
            }
            Event::SequenceStart(anchor, _) => {
                self.enter(line)?;
                let mut items = Vec::new();
                let mut size = Size { nodes: 1, bytes: 0 };
                loop {
                    match self.expect()? {
                        (Event::SequenceEnd, _) => break,
                        (event, line) => {
                            let (item, item_size) = self.node(event, line)?;
                            size.add(item_size);
                            items.push(item);
                        }
                    }
                }
                self.depth -= 1;
                let kind = Kind::Seq(items);
                (Node { line, kind }, size, anchor)
            }
            Event::MappingStart(anchor, _) => {
                self.enter(line)?;
                let mut entries = Vec::new();
                let mut size = Size { nodes: 1, bytes: 0 };
                loop {
                    match self.expect()? {
                        (Event::MappingEnd, _) => break,
                        (event, line) => {
                            let (key, key_size) = self.node(event, line)?;
                            let (event, line) = self.expect()?;
                            let (value, value_size) = self.node(event, line)?;
                            size.add(key_size);
                            size.add(value_size);
                            entries.push((key, value));
                        }
                    }
                }
                self.depth -= 1;
                let kind = Kind::Map(merge_and_dedup(entries)?);
                (Node { line, kind }, size, anchor)
            }
            Event::Alias(id) => {
                let (node, size) = self.anchors.get(&id).ok_or_else(|| SyntaxError {
                    line,
                    message: "unknown anchor".to_string(),
                })?;
                let size = *size;
                self.repeated.add(size);
                if self.repeated.nodes > ALIAS_NODES || self.repeated.bytes > ALIAS_BYTES {
                    return Err(SyntaxError {
                        line,
                        message: format!(
                            "aliases repeat more than {ALIAS_NODES} nodes or {ALIAS_BYTES} bytes of text in all (nested aliases?)"
                        ),
                    });
                }
                return Ok((node.clone(), size));
            }
            other => {
                return Err(SyntaxError {
                    line,
                    message: format!("unexpected {other:?}"),
                });
            }
        };
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        Ok((node, size))
    }
}

/// Expands `<<` merges where they stand (a list of maps merges its first
/// map last, so the first wins), and keeps each key's last value; a key
/// written twice in the map itself is an error.
fn merge_and_dedup(entries: Vec<(Node, Node)>) -> Result<Vec<(Node, Node)>, SyntaxError> {
    // (key, value, written in this map rather than merged)
    let mut flat: Vec<(Node, Node, bool)> = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        let is_merge = matches!(
            &key.kind,
            Kind::Scalar {
                value: Value::Merge,
                ..
            }
        );
        if !is_merge {
            flat.push((key, value, true));
            continue;
        }
        let bad = SyntaxError {
            line: value.line,
            message: "map merge requires map or sequence of maps as the value".to_string(),
        };
        match value.kind {
            Kind::Map(merged) => flat.extend(merged.into_iter().map(|(k, v)| (k, v, false))),
            Kind::Seq(maps) => {
                for map in maps.into_iter().rev() {
                    match map.kind {
                        Kind::Map(merged) => {
                            flat.extend(merged.into_iter().map(|(k, v)| (k, v, false)));
                        }
                        _ => return Err(bad),
                    }
                }
            }
            _ => return Err(bad),
        }
    }
    let mut out: Vec<(Node, Node)> = Vec::with_capacity(flat.len());
    // Each key's slot in `out`, and whether it was written in this map.
    let mut slots: HashMap<KeyId, (usize, bool)> = HashMap::with_capacity(flat.len());
    for (key, value, written) in flat {
        let Some(id) = key_id(&key) else {
            out.push((key, value));
            continue;
        };
        match slots.get_mut(&id) {
            Some((slot, was_written)) => {
                if written && *was_written {
                    return Err(SyntaxError {
                        line: key.line,
                        message: format!(
                            "key {} is given twice in one map (first at line {})",
                            excerpt(&key.display()),
                            out[*slot].0.line
                        ),
                    });
                }
                out[*slot].1 = value;
                *was_written |= written;
            }
            None => {
                slots.insert(id, (out.len(), written));
                out.push((key, value));
            }
        }
    }
    Ok(out)
}

/// What makes two scalar keys one map key: they decode to the same Go
/// value (strings and floats by their text). Collections as keys are
/// never equal (`None`).
#[derive(Debug, PartialEq, Eq, Hash)]
enum KeyId {
    Str(String),
    Float(String),
    Null,
    Bool(bool),
    Int(i64),
    BigInt(u64),
    Merge,
}

fn key_id(key: &Node) -> Option<KeyId> {
    let Kind::Scalar { text, value } = &key.kind else {
        return None;
    };
    Some(match value {
        Value::Str => KeyId::Str(text.clone()),
        Value::Float => KeyId::Float(text.clone()),
        Value::Null => KeyId::Null,
        Value::Bool(b) => KeyId::Bool(*b),
        Value::Int(i) => KeyId::Int(*i),
        Value::BigInt(u) => KeyId::BigInt(*u),
        Value::Merge => KeyId::Merge,
    })
}

const CORE: &str = "tag:yaml.org,2002:";

/// The type of a scalar: quoted and block scalars are strings, an explicit
/// core tag decides, a plain scalar resolves by yaml.v2's rules.
fn resolve(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    if let Some(tag) = tag.filter(|t| t.handle == CORE) {
        let resolved = resolve_plain(text);
        let wanted = match tag.suffix.as_str() {
            "str" | "binary" | "timestamp" => return Ok(Value::Str),
            "null" => matches!(resolved, Value::Null),
            "bool" => matches!(resolved, Value::Bool(_)),
            "int" => matches!(resolved, Value::Int(_) | Value::BigInt(_)),
            "float" => matches!(resolved, Value::Float | Value::Int(_) | Value::BigInt(_)),
            "merge" => matches!(resolved, Value::Merge),
            _ => return Ok(resolved),
        };
        return if wanted {
            Ok(if tag.suffix == "float" {
                Value::Float
            } else {
                resolved
            })
        } else {
            Err(format!(
                "cannot decode !!str `{text}` as a !!{}",
                tag.suffix
            ))
        };
    }
    if style != ScalarStyle::Plain || tag.is_some() {
        return Ok(Value::Str);
    }
    Ok(resolve_plain(text))
}

/// yaml.v2's resolution of a plain scalar.
pub(crate) fn resolve_plain(text: &str) -> Value {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Value::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Value::Bool(false);
        }
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF"
        | "-.inf" | "-.Inf" | "-.INF" => return Value::Float,
        "<<" => return Value::Merge,
        _ => {}
    }
    let first = text.as_bytes()[0];
    if !(first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) {
        return Value::Str;
    }
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    if first != b'.'
        && let Some(n) = go_parse_int(&plain)
    {
        if let Ok(i) = i64::try_from(n) {
            return Value::Int(i);
        }
        if let Ok(u) = u64::try_from(n) {
            return Value::BigInt(u);
        }
    }
    if is_float_syntax(&plain) && plain.parse::<f64>().is_ok_and(f64::is_finite) {
        return Value::Float;
    }
    Value::Str
}

/// Go's `strconv.ParseInt(s, 0, 64)` (and `ParseUint`), widened: the
/// value if `s` is an integer in Go's base-prefix syntax, whatever its
/// size up to 128 bits.
fn go_parse_int(s: &str) -> Option<i128> {
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let n = i128::from_str_radix(digits, radix).ok()?;
    let n = if negative { -n } else { n };
    let fits = if negative {
        n >= i128::from(i64::MIN)
    } else {
        n <= i128::from(u64::MAX)
    };
    fits.then_some(n)
}

/// yaml.v2's float syntax: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
fn is_float_syntax(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_scalars_resolve_as_yaml_v2_does() {
        for (text, want) in [
            ("yes", Value::Bool(true)),
            ("On", Value::Bool(true)),
            ("n", Value::Bool(false)),
            ("OFF", Value::Bool(false)),
            ("~", Value::Null),
            ("Null", Value::Null),
            ("8080", Value::Int(8080)),
            ("-1", Value::Int(-1)),
            ("+5", Value::Int(5)),
            ("0x10", Value::Int(16)),
            ("017", Value::Int(15)),
            ("0o17", Value::Int(15)),
            ("0b101", Value::Int(5)),
            ("1_000", Value::Int(1000)),
            ("4294967296", Value::Int(4_294_967_296)),
            ("18446744073709551615", Value::BigInt(u64::MAX)),
            ("1.5", Value::Float),
            ("1e3", Value::Float),
            (".5", Value::Float),
            ("080", Value::Float),
            (".inf", Value::Float),
            ("1.2.3", Value::Str),
            ("abc", Value::Str),
            ("files/*", Value::Str),
            ("2001-12-14", Value::Str),
            ("0x", Value::Str),
            ("-", Value::Str),
        ] {
            assert_eq!(resolve_plain(text), want, "{text}");
        }
    }

    fn scalar(node: &Node) -> (&str, &Value) {
        match &node.kind {
            Kind::Scalar { text, value } => (text, value),
            other => panic!("not a scalar: {other:?}"),
        }
    }

    #[test]
    fn quoted_and_tagged_scalars_are_strings() {
        let doc = parse("a: '5'\nb: \"yes\"\nc: !!str 1.5\nd: |\n  x\ne: 5\n")
            .unwrap()
            .unwrap();
        let Kind::Map(entries) = &doc.kind else {
            panic!()
        };
        let values: Vec<_> = entries.iter().map(|(_, v)| scalar(v).1.clone()).collect();
        assert_eq!(
            values,
            [
                Value::Str,
                Value::Str,
                Value::Str,
                Value::Str,
                Value::Int(5)
            ]
        );
        assert_eq!(scalar(&entries[3].1).0, "x\n");
        assert_eq!(entries[4].1.line, 6);
    }

    #[test]
    fn explicit_core_tags_are_checked() {
        let err = parse("a: !!int abc\n").unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.message.contains("!!int"), "{}", err.message);
        let doc = parse("a: !!float 3\n").unwrap().unwrap();
        let Kind::Map(entries) = &doc.kind else {
            panic!()
        };
        assert_eq!(scalar(&entries[0].1).1, &Value::Float);
    }

    #[test]
    fn aliases_and_merges() {
        let doc = parse(
            "base: &b {unit: minute, requests_per_unit: 5}\n\
             rl:\n  <<: *b\n  requests_per_unit: 7\n\
             x: 1\n",
        )
        .unwrap()
        .unwrap();
        let Kind::Map(entries) = &doc.kind else {
            panic!()
        };
        assert_eq!(entries.len(), 3);
        let Kind::Map(rl) = &entries[1].1.kind else {
            panic!()
        };
        let rl: Vec<_> = rl.iter().map(|(k, v)| (scalar(k).0, scalar(v).0)).collect();
        assert_eq!(rl, [("unit", "minute"), ("requests_per_unit", "7")]);
        // two merged maps may share a key: the first listed wins
        let doc = parse("a: &a {k: 1}\nb: &b {k: 2}\nc: {<<: [*a, *b]}\n")
            .unwrap()
            .unwrap();
        assert_eq!(doc.display(), "map[a:map[k:1] b:map[k:2] c:map[k:1]]");
    }

    #[test]
    fn a_key_written_twice_is_an_error() {
        // yaml.v2 keeps the last: 10 a minute became 10 a second
        let err = parse("rate_limit:\n  unit: minute\n  requests_per_unit: 10\n  unit: second\n")
            .unwrap_err();
        assert_eq!(err.line, 4);
        assert_eq!(
            err.message,
            "key unit is given twice in one map (first at line 2)"
        );
        // keys that decode to one value are one key
        let err = parse("{1: a, 0x1: b}").unwrap_err();
        assert!(err.message.contains("given twice"), "{err:?}");
        assert!(parse("{'1': a, 1: b}").is_ok());
    }

    #[test]
    fn nested_aliases_stop_at_the_budget() {
        // the "billion laughs": nine levels of nine aliases, 508 bytes
        let mut text = String::from("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for (prev, name) in "abcdefgh".chars().zip("bcdefghi".chars()) {
            let refs = vec![format!("*{prev}"); 9].join(", ");
            text.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        assert!(text.len() < 600, "{}", text.len());
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("aliases repeat more than"), "{err:?}");
        assert!((6..=9).contains(&err.line), "{err:?}");
        // one long scalar repeated: the text budget
        let long = "x".repeat(1 << 20);
        let err = parse(&format!("a: &a {long}\nb: [*a, *a, *a, *a, *a]\n")).unwrap_err();
        assert!(err.message.contains("bytes of text"), "{err:?}");
        // what configs do with aliases is well within it
        let refs = vec!["*a"; 1_000].join(", ");
        assert!(parse(&format!("a: &a {{k: v, l: w}}\nb: [{refs}]\n")).is_ok());
    }

    #[test]
    fn nesting_is_limited_in_every_style() {
        // ERL descriptors 100 deep: 200 levels of block style
        let mut block = String::from("domain: d\n");
        for depth in 0..100 {
            let pad = "    ".repeat(depth);
            block.push_str(&format!("{pad}descriptors:\n{pad}  - key: k{depth}\n"));
        }
        let err = parse(&block).unwrap_err();
        assert_eq!(err.message, "collections nested more than 128 deep");
        assert_eq!(err.line, 129, "{err:?}");
        // 20,000 block sequences in one line used to overflow the stack
        // (the process aborted)
        let err = parse(&format!("{}x\n", "- ".repeat(20_000))).unwrap_err();
        assert_eq!(err.message, "collections nested more than 128 deep");
        let flow = format!("{}{}", "[".repeat(6_000), "]".repeat(6_000));
        assert!(parse(&flow).is_err());
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(&ok).is_ok());
        let over = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(parse(&over).is_err());
    }

    #[test]
    fn empty_streams_and_syntax_errors() {
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(parse("# only a comment\n").unwrap(), None);
        assert!(
            parse("---\n")
                .unwrap()
                .is_some_and(|n| n.text() == Some(""))
        );
        let err = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.line >= 1, "{err:?}");
        // only the first document counts
        let doc = parse("a: 1\n---\nb: 2\n").unwrap().unwrap();
        assert_eq!(doc.display(), "map[a:1]");
    }
}
