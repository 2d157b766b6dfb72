//! Kubernetes manifests read as JSON values, for the deploy tests: every
//! document of a YAML stream, with YAML 1.2's core types for plain
//! scalars (`true`/`false`, `null`/`~`/empty, integers; everything else a
//! string, as Kubernetes reads `"8080"` and `8080` apart). Strict as
//! `kubectl apply` is: a key given twice is an error, and so is an alias
//! (the manifests use none), each naming its line.

use saphyr_parser::{Event, Parser, ScalarStyle, StrInput};
use serde_json::{Map, Value};

/// Every document of `text`.
pub(crate) fn documents(text: &str) -> Result<Vec<Value>, String> {
    let mut reader = Reader {
        parser: Parser::new_from_str(text),
    };
    let mut docs = Vec::new();
    loop {
        match reader.next()? {
            None | Some((Event::StreamEnd, _)) => return Ok(docs),
            Some((Event::DocumentStart(_), _)) => match reader.expect()? {
                (Event::DocumentEnd, _) => {}
                (event, line) => {
                    docs.push(reader.value(event, line)?);
                    reader.expect()?;
                }
            },
            Some(_) => {}
        }
    }
}

struct Reader<'a> {
    parser: Parser<'a, StrInput<'a>>,
}

impl<'a> Reader<'a> {
    fn next(&mut self) -> Result<Option<(Event<'a>, usize)>, String> {
        match self.parser.next_event() {
            None => Ok(None),
            Some(Ok((event, span))) => Ok(Some((event, span.start.line()))),
            Some(Err(e)) => Err(format!("line {}: {}", e.marker().line(), e.info())),
        }
    }

    fn expect(&mut self) -> Result<(Event<'a>, usize), String> {
        self.next()?
            .ok_or_else(|| "unexpected end of the stream".to_string())
    }

    fn value(&mut self, event: Event<'a>, line: usize) -> Result<Value, String> {
        match event {
            Event::Scalar(text, ScalarStyle::Plain, _, None) => Ok(plain(&text)),
            Event::Scalar(text, _, _, _) => Ok(Value::String(text.into_owned())),
            Event::SequenceStart(..) => {
                let mut items = Vec::new();
                loop {
                    match self.expect()? {
                        (Event::SequenceEnd, _) => return Ok(Value::Array(items)),
                        (event, line) => items.push(self.value(event, line)?),
                    }
                }
            }
            Event::MappingStart(..) => {
                let mut map = Map::new();
                loop {
                    match self.expect()? {
                        (Event::MappingEnd, _) => return Ok(Value::Object(map)),
                        (event, line) => {
                            let key = match self.value(event, line)? {
                                Value::String(s) => s,
                                other => other.to_string(),
                            };
                            let (event, at) = self.expect()?;
                            let value = self.value(event, at)?;
                            if map.insert(key.clone(), value).is_some() {
                                return Err(format!("line {line}: the key {key:?} is given twice"));
                            }
                        }
                    }
                }
            }
            other => Err(format!("line {line}: unexpected {other:?}")),
        }
    }
}

fn plain(text: &str) -> Value {
    match text {
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        _ => text
            .parse::<i64>()
            .map_or_else(|_| Value::String(text.to_string()), Value::from),
    }
}

#[test]
fn documents_are_read_strictly() {
    let docs = documents("a: 1\nb: \"1\"\nc: [x, true, ~]\n---\nd: {e: f}\n").unwrap();
    assert_eq!(
        docs,
        [
            serde_json::json!({"a": 1, "b": "1", "c": ["x", true, null]}),
            serde_json::json!({"d": {"e": "f"}})
        ]
    );
    let twice = documents("a: 1\nb: 2\na: 3\n").unwrap_err();
    assert!(twice.contains("\"a\" is given twice"), "{twice}");
    assert!(documents("a: [1\n").is_err());
}
