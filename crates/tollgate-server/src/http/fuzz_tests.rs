//! Property tests: arbitrary bytes, and valid bodies mutated (a field
//! added, renamed, doubled, retyped; the text cut or spliced), sent to
//! every endpoint that reads a JSON body. Whatever comes in, the answer is
//! a decision (200 or 429) or a 4xx in the JSON error form: never a
//! panic, never a 5xx, never an empty or text error.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::tests::{Answer, memory, post};
use crate::state::AppState;

const ENDPOINTS: [&str; 8] = [
    "/v1/check",
    "/v1/charge",
    "/v1/refund",
    "/v1/settle",
    "/v1/reserve",
    "/v1/acquire",
    "/v1/release",
    "/v1/check",
];

/// A valid body for each endpoint of `ENDPOINTS`, in its order.
fn valid_bodies() -> Vec<Value> {
    vec![
        json!({"policy": "books", "key": "k", "cost": 1}),
        json!({"policy": "api", "key": "k", "cost": 1}),
        json!({"policy": "api", "key": "k", "cost": 1}),
        json!({"policy": "api", "key": "k", "estimate": 2, "actual": 1}),
        json!({"policy": "api", "key": "k", "cost": 1, "max_wait_ms": 10}),
        json!({"policy": "reports", "key": "k"}),
        json!({"policy": "reports", "key": "k", "lease": "1"}),
        json!({"atomic": true, "checks": [{"policy": "books", "key": "a"}, {"policy": "api", "key": "b", "cost": 2}]}),
    ]
}

/// Values a field may be given instead of its own.
fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-z]{0,8}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
        Just(json!([{"policy": "books", "key": "k", "at_most": 1}])),
    ]
}

/// One change to a valid body's text.
#[derive(Debug, Clone)]
enum Mutation {
    /// A field set to a value (a new field, or one retyped).
    Set(String, Value),
    /// A field removed.
    Remove(usize),
    /// A field written twice.
    Twice(usize),
    /// The text cut at a fraction of its length.
    Cut(u8),
    /// Bytes put in at a fraction of its length.
    Splice(u8, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let name = prop_oneof![
        Just("policy".to_string()),
        Just("key".to_string()),
        Just("cost".to_string()),
        Just("at_most".to_string()),
        Just("checks".to_string()),
        Just("atomic".to_string()),
        Just("lease".to_string()),
        "[a-z_]{1,8}",
    ];
    prop_oneof![
        (name, any_value()).prop_map(|(n, v)| Mutation::Set(n, v)),
        any::<usize>().prop_map(Mutation::Remove),
        any::<usize>().prop_map(Mutation::Twice),
        any::<u8>().prop_map(Mutation::Cut),
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Splice(at, bytes)),
    ]
}

/// `body` with `mutations` applied, as the bytes sent.
fn mutated(body: &Value, mutations: &[Mutation]) -> Vec<u8> {
    let mut object = body.as_object().cloned().unwrap_or_default();
    let mut text: Option<Vec<u8>> = None;
    for m in mutations {
        match m {
            Mutation::Set(name, value) => {
                object.insert(name.clone(), value.clone());
            }
            Mutation::Remove(i) if !object.is_empty() => {
                let name = object.keys().nth(i % object.len()).cloned().unwrap();
                object.remove(&name);
            }
            Mutation::Twice(i) if !object.is_empty() => {
                let (name, value) = object.iter().nth(i % object.len()).unwrap();
                let whole = Value::Object(object.clone()).to_string();
                let extra = format!(",{}:{}}}", Value::from(name.as_str()), value);
                text = Some(format!("{}{extra}", &whole[..whole.len() - 1]).into_bytes());
            }
            Mutation::Cut(at) => {
                let bytes = text
                    .take()
                    .unwrap_or_else(|| Value::Object(object.clone()).to_string().into_bytes());
                let end = bytes.len() * usize::from(*at) / 256;
                text = Some(bytes[..end].to_vec());
            }
            Mutation::Splice(at, extra) => {
                let mut bytes = text
                    .take()
                    .unwrap_or_else(|| Value::Object(object.clone()).to_string().into_bytes());
                let i = bytes.len() * usize::from(*at) / 256;
                bytes.splice(i..i, extra.iter().copied());
                text = Some(bytes);
            }
            _ => {}
        }
    }
    text.unwrap_or_else(|| Value::Object(object).to_string().into_bytes())
}

/// The answer is a decision, or a 4xx in the JSON error form.
fn well_formed(path: &str, sent: &[u8], r: &Answer) -> Result<(), TestCaseError> {
    let status = r.status.as_u16();
    let sent = String::from_utf8_lossy(sent);
    prop_assert!(
        status == 200 || status == 429 || (400..500).contains(&status),
        "{path} {sent:?}: {r:?}"
    );
    if !matches!(status, 200 | 429) {
        let body: Value = serde_json::from_str(&r.text)
            .map_err(|e| TestCaseError::fail(format!("{path} {sent:?}: {e}: {r:?}")))?;
        prop_assert!(body["error"]["code"].is_string(), "{path} {sent:?}: {r:?}");
        prop_assert!(
            body["error"]["message"].is_string(),
            "{path} {sent:?}: {r:?}"
        );
    }
    Ok(())
}

fn runtime_and_state() -> (tokio::runtime::Runtime, Arc<AppState>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let state = runtime.block_on(memory());
    (runtime, state)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_get_a_json_answer(
        endpoint in 0..ENDPOINTS.len(),
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let (runtime, state) = runtime_and_state();
        let path = ENDPOINTS[endpoint];
        let r = runtime.block_on(post(&state, path, bytes.clone()));
        well_formed(path, &bytes, &r)?;
    }

    #[test]
    fn mutated_bodies_get_a_json_answer(
        endpoint in 0..ENDPOINTS.len(),
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let (runtime, state) = runtime_and_state();
        let path = ENDPOINTS[endpoint];
        let bytes = mutated(&valid_bodies()[endpoint], &mutations);
        let r = runtime.block_on(post(&state, path, bytes.clone()));
        well_formed(path, &bytes, &r)?;
    }
}
