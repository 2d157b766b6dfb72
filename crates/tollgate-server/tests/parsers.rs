//! Property tests of every parser of what operators give the service: the
//! TOML config, the ERL YAML, an xDS resource, CSV traces and access logs
//! (combined and JSON lines). Each is fed arbitrary bytes and mutations of
//! the repository's examples (lines cut, doubled and swapped, tokens that
//! YAML, TOML and the traces give meaning to), and must answer without a
//! panic, with errors that point into the input and are short whatever it
//! holds. The coverage-guided fuzz targets in `fuzz/` run the same entry
//! points for as long as one likes (`docs/fuzzing.md`); these run in CI in
//! a few seconds.

use std::sync::LazyLock;

use proptest::prelude::*;
use tollgate_server::fuzzing::{self, Outcome};

/// The longest error message any parser may give, in bytes.
const MAX_MESSAGE: usize = 1_000;

/// Checks what a parser said of `input`: errors name a line within it (or
/// none) and are short.
fn check(input: &[u8], outcome: Outcome) -> Result<(), TestCaseError> {
    let Err(errors) = outcome else {
        return Ok(());
    };
    prop_assert!(!errors.is_empty(), "an error without a message");
    let lines = input.iter().filter(|&&b| b == b'\n').count() + 1;
    for (line, message) in errors {
        prop_assert!(line <= lines, "line {line} of {lines}: {message}");
        prop_assert!(
            message.len() <= MAX_MESSAGE,
            "{} bytes: {}",
            message.len(),
            &message[..200]
        );
    }
    Ok(())
}

/// Tokens the formats give meaning to, spliced into the examples.
const TOKENS: &[&str] = &[
    "&a ",
    "*a",
    "<<: *a\n",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "'",
    "=",
    ":",
    ",",
    "- ",
    "\n",
    "  ",
    "#",
    "!!int ",
    "\u{feff}",
    "\r\n",
    "---\n",
    "[[policy]]\n",
    "[store]\n",
    "0",
    "-1",
    "+3",
    "18446744073709551616",
    "9223372036854775807",
    "1e308",
    "0x10",
    "null",
    "~",
    "yes",
    "descriptors:\n",
    "key: k\n",
    "rate_limit: {unit: second, requests_per_unit: 1}\n",
    "\\u0000",
    "\u{0}",
    "é",
];

/// One change to a text.
#[derive(Debug, Clone)]
enum Mutation {
    Delete { at: usize, len: usize },
    Insert { at: usize, token: usize },
    Bytes { at: usize, bytes: Vec<u8> },
    DoubleLine { line: usize },
    SwapLines { a: usize, b: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..64usize).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, token)| Mutation::Insert { at, token }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Bytes { at, bytes }),
        any::<usize>().prop_map(|line| Mutation::DoubleLine { line }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
    ]
}

fn apply(seed: &str, mutations: &[Mutation]) -> Vec<u8> {
    let mut bytes = seed.as_bytes().to_vec();
    for m in mutations {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match m {
            Mutation::Delete { at: i, len } => {
                let start = at(*i, bytes.len());
                let end = (start + len).min(bytes.len());
                bytes.drain(start..end);
            }
            Mutation::Insert { at: i, token } => {
                let start = at(*i, bytes.len());
                bytes.splice(start..start, TOKENS[*token].bytes());
            }
            Mutation::Bytes { at: i, bytes: new } => {
                let start = at(*i, bytes.len());
                bytes.splice(start..start, new.iter().copied());
            }
            Mutation::DoubleLine { line } | Mutation::SwapLines { a: line, .. } => {
                let mut lines: Vec<Vec<u8>> =
                    bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
                let n = lines.len();
                let i = line % n;
                match m {
                    Mutation::SwapLines { b, .. } => lines.swap(i, b % n),
                    _ => lines.insert(i, lines[i].clone()),
                }
                bytes = lines.join(&b'\n');
            }
        }
    }
    bytes
}

/// An example of the repository's `examples/`, read when the tests run
/// (not compiled in: a packaged crate includes nothing from outside it).
fn example(name: &str) -> String {
    let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

static TOML_SEEDS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ["tollgate.toml", "books.toml", "envoy-tollgate.toml"]
        .map(example)
        .to_vec()
});

static YAML_SEEDS: LazyLock<Vec<String>> = LazyLock::new(|| {
    vec![
    "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: minute\n      requests_per_unit: 10\n  - key: path\n    value: /api\n    descriptors:\n      - key: user\n        rate_limit: {unit: second, requests_per_unit: 5, name: r}\n        shadow_mode: true\n".to_string(),
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: &b {unit: hour, requests_per_unit: 7}\n  - key: j\n    rate_limit: {<<: *b, requests_per_unit: 8}\n".to_string(),
    example("envoy.yaml"),
    ]
});

const CSV_SEEDS: &[&str] = &[
    "t_ms,policy,key,cost\n0,p,alice,1\n5,b,bob,2\n5,c,alice,1\n1000,p,alice,3\n",
    "t_ms,policy,key,cost\r\n0,p,k,1\r\n",
];

static COMBINED_SEED: LazyLock<String> = LazyLock::new(|| example("access.log"));
static JSON_SEED: LazyLock<String> = LazyLock::new(|| example("envoy-access.jsonl"));

/// The first `n` lines of a big example, to keep each case small.
fn head(text: &str, n: usize) -> String {
    text.lines().take(n).collect::<Vec<_>>().join("\n")
}

/// A `RateLimitConfig` resource as protobuf bytes, from a generated tree:
/// (key, value, unit, requests_per_unit, children).
#[derive(Debug, Clone)]
struct Descriptor(String, String, i32, u32, Vec<Descriptor>);

fn descriptor() -> impl Strategy<Value = Descriptor> {
    let leaf = ("[a-z_]{0,4}", "[a-z0-9/]{0,4}", -1..9i32, any::<u32>())
        .prop_map(|(k, v, u, n)| Descriptor(k, v, u, n, Vec::new()));
    leaf.prop_recursive(4, 32, 4, |inner| {
        (
            "[a-z_]{0,4}",
            "[a-z0-9/]{0,4}",
            -1..9i32,
            any::<u32>(),
            prop::collection::vec(inner, 0..4),
        )
            .prop_map(|(k, v, u, n, c)| Descriptor(k, v, u, n, c))
    })
}

fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn field(tag: u64, bytes: &[u8], out: &mut Vec<u8>) {
    varint(tag << 3 | 2, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn encode(d: &Descriptor) -> Vec<u8> {
    let mut out = Vec::new();
    field(1, d.0.as_bytes(), &mut out);
    field(2, d.1.as_bytes(), &mut out);
    let mut limit = Vec::new();
    varint(1 << 3, &mut limit);
    varint(d.2 as i64 as u64, &mut limit);
    varint(2 << 3, &mut limit);
    varint(u64::from(d.3), &mut limit);
    field(3, &limit, &mut out);
    for child in &d.4 {
        field(4, &encode(child), &mut out);
    }
    out
}

fn resource(domain: &str, descriptors: &[Descriptor]) -> Vec<u8> {
    let mut out = Vec::new();
    field(1, b"resource", &mut out);
    field(2, domain.as_bytes(), &mut out);
    for d in descriptors {
        field(3, &encode(d), &mut out);
    }
    out
}

fn config() -> ProptestConfig {
    // Modest: the whole file runs in seconds in CI; `fuzz/` runs longer.
    ProptestConfig {
        cases: 128,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_bytes(data in prop::collection::vec(any::<u8>(), 0..2048)) {
        check(&data, fuzzing::config_toml(&data))?;
        check(&data, fuzzing::erl_yaml(&data))?;
        check(&data, fuzzing::xds_resource(&data))?;
        check(&data, fuzzing::trace_csv(&data))?;
        check(&data, fuzzing::combined_log(&data))?;
        check(&data, fuzzing::json_log(&data))?;
    }

    #[test]
    fn toml_config_mutations(
        seed in 0..TOML_SEEDS.len(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let data = apply(&TOML_SEEDS[seed], &mutations);
        check(&data, fuzzing::config_toml(&data))?;
    }

    #[test]
    fn erl_yaml_mutations(
        seed in 0..YAML_SEEDS.len(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let data = apply(&YAML_SEEDS[seed], &mutations);
        check(&data, fuzzing::erl_yaml(&data))?;
    }

    #[test]
    fn xds_resources(
        domain in "[a-z]{0,3}",
        descriptors in prop::collection::vec(descriptor(), 0..4),
        cut in any::<usize>(),
        flip in any::<(usize, u8)>(),
    ) {
        let mut data = resource(&domain, &descriptors);
        check(&data, fuzzing::xds_resource(&data))?;
        let at = flip.0 % data.len();
        data[at] ^= flip.1;
        check(&data, fuzzing::xds_resource(&data))?;
        data.truncate(cut % (data.len() + 1));
        check(&data, fuzzing::xds_resource(&data))?;
    }

    #[test]
    fn trace_mutations(
        seed in 0..CSV_SEEDS.len(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let data = apply(CSV_SEEDS[seed], &mutations);
        check(&data, fuzzing::trace_csv(&data))?;
    }

    #[test]
    fn access_log_mutations(
        json in any::<bool>(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        if json {
            let data = apply(&head(&JSON_SEED, 4), &mutations);
            check(&data, fuzzing::json_log(&data))?;
        } else {
            let data = apply(&head(&COMBINED_SEED, 4), &mutations);
            check(&data, fuzzing::combined_log(&data))?;
        }
    }
}

/// The seeds themselves parse: the mutations start from valid inputs.
#[test]
fn the_seeds_are_valid() {
    for seed in TOML_SEEDS.iter() {
        assert_eq!(fuzzing::config_toml(seed.as_bytes()), Ok(()));
    }
    for seed in &YAML_SEEDS[..2] {
        assert_eq!(fuzzing::erl_yaml(seed.as_bytes()), Ok(()));
    }
    for seed in CSV_SEEDS {
        assert_eq!(fuzzing::trace_csv(seed.as_bytes()), Ok(()));
    }
    assert_eq!(
        fuzzing::combined_log(head(&COMBINED_SEED, 4).as_bytes()),
        Ok(())
    );
    assert_eq!(fuzzing::json_log(head(&JSON_SEED, 4).as_bytes()), Ok(()));
    let d = Descriptor("k".into(), String::new(), 2, 10, Vec::new());
    assert_eq!(fuzzing::xds_resource(&resource("d", &[d])), Ok(()));
}
