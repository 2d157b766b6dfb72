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
//! twice keeps its last value, as yaml.v2 does. Only the first document of
//! the stream counts.
//!
//! Kept whole on purpose: one concept, the document as yaml.v2 sees it; the event walk and the YAML 1.1 resolution it applies to each scalar are read together.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Tag};

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

/// Parses the first document of `text`; `None` when the stream has none
/// (an empty file, or only comments).
pub(crate) fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut builder = Builder {
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
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
        Some((event, line)) => builder.node(event, line).map(Some),
    }
}

struct Builder<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    anchors: HashMap<usize, Node>,
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<Option<(Event<'a>, usize)>, SyntaxError> {
        match self.parser.next_event() {
            None => Ok(None),
            Some(Ok((event, span))) => Ok(Some((event, span.start.line()))),
            Some(Err(e)) => Err(SyntaxError {
                line: e.marker().line(),
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

    fn node(&mut self, event: Event<'a>, line: usize) -> Result<Node, SyntaxError> {
        let (node, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let value = resolve(&text, style, tag.as_deref())
                    .map_err(|message| SyntaxError { line, message })?;
                let kind = Kind::Scalar {
                    text: text.into_owned(),
                    value,
                };
                (Node { line, kind }, anchor)
            }
            Event::SequenceStart(anchor, _) => {
                let mut items = Vec::new();
                loop {
                    match self.expect()? {
                        (Event::SequenceEnd, _) => break,
                        (event, line) => items.push(self.node(event, line)?),
                    }
                }
                let kind = Kind::Seq(items);
                (Node { line, kind }, anchor)
            }
            Event::MappingStart(anchor, _) => {
                let mut entries = Vec::new();
                loop {
                    match self.expect()? {
                        (Event::MappingEnd, _) => break,
                        (event, line) => {
                            let key = self.node(event, line)?;
                            let (event, line) = self.expect()?;
                            let value = self.node(event, line)?;
                            entries.push((key, value));
                        }
                    }
                }
                let kind = Kind::Map(merge_and_dedup(entries)?);
                (Node { line, kind }, anchor)
            }
            Event::Alias(id) => {
                let node = self.anchors.get(&id).cloned().ok_or_else(|| SyntaxError {
                    line,
                    message: "unknown anchor".to_string(),
                })?;
                return Ok(node);
            }
            other => {
                return Err(SyntaxError {
                    line,
                    message: format!("unexpected {other:?}"),
                });
            }
        };
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        Ok(node)
    }
}

/// Expands `<<` merges where they stand (a list of maps merges its first
/// map last, so the first wins) and keeps each key's last value.
fn merge_and_dedup(entries: Vec<(Node, Node)>) -> Result<Vec<(Node, Node)>, SyntaxError> {
    let mut flat: Vec<(Node, Node)> = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        let is_merge = matches!(
            &key.kind,
            Kind::Scalar {
                value: Value::Merge,
                ..
            }
        );
        if !is_merge {
            flat.push((key, value));
            continue;
        }
        let bad = || SyntaxError {
            line: value.line,
            message: "map merge requires map or sequence of maps as the value".to_string(),
        };
        match &value.kind {
            Kind::Map(merged) => flat.extend(merged.iter().cloned()),
            Kind::Seq(maps) => {
                for map in maps.iter().rev() {
                    match &map.kind {
                        Kind::Map(merged) => flat.extend(merged.iter().cloned()),
                        _ => return Err(bad()),
                    }
                }
            }
            _ => return Err(bad()),
        }
    }
    let mut out: Vec<(Node, Node)> = Vec::with_capacity(flat.len());
    for (key, value) in flat {
        match out.iter_mut().find(|(k, _)| same_key(k, &key)) {
            Some(slot) => slot.1 = value,
            None => out.push((key, value)),
        }
    }
    Ok(out)
}

/// Two keys are one map key when they decode to the same Go value.
fn same_key(a: &Node, b: &Node) -> bool {
    match (&a.kind, &b.kind) {
        (
            Kind::Scalar {
                text: ta,
                value: va,
            },
            Kind::Scalar {
                text: tb,
                value: vb,
            },
        ) => match (va, vb) {
            (Value::Str, Value::Str) | (Value::Float, Value::Float) => ta == tb,
            (va, vb) => va == vb,
        },
        _ => false,
    }
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
    fn aliases_merges_and_repeated_keys() {
        let doc = parse(
            "base: &b {unit: minute, requests_per_unit: 5}\n\
             rl:\n  <<: *b\n  requests_per_unit: 7\n\
             x: 1\nx: 2\n",
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
        assert_eq!(scalar(&entries[2].1).0, "2");
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
