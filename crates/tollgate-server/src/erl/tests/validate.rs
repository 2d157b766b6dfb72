//! Validation as ERL validates: each case ERL's own config tests cover,
//! written anew, plus the directory rules.

use std::path::Path;

use crate::erl::files::{load, parse};

fn errors(text: &str) -> Vec<String> {
    match parse(&[("f.yaml".to_string(), text.to_string())], None) {
        Ok(_) => Vec::new(),
        Err(e) => e.iter().map(ToString::to_string).collect(),
    }
}

fn one_error(text: &str) -> String {
    let e = errors(text);
    assert_eq!(e.len(), 1, "{e:?}");
    e.into_iter().next().unwrap()
}

const HEAD: &str = "domain: d\ndescriptors:\n";

#[test]
fn empty_domain_and_empty_file() {
    assert_eq!(
        one_error(""),
        "f.yaml: config file cannot have empty domain"
    );
    assert_eq!(
        one_error("descriptors: []\n"),
        "f.yaml: config file cannot have empty domain"
    );
    assert_eq!(
        one_error("domain: ''\n"),
        "f.yaml: config file cannot have empty domain"
    );
    assert_eq!(
        one_error("domain: ~\n"),
        "f.yaml: config file cannot have empty domain"
    );
    assert!(errors("---\n# a comment\ndomain: d\n").is_empty());
}

#[test]
fn empty_key() {
    assert_eq!(
        one_error(&format!("{HEAD}  - value: v\n")),
        "f.yaml:3: descriptor has empty key (under 'd')"
    );
    assert_eq!(
        one_error(&format!(
            "{HEAD}  - key: a\n    descriptors:\n      - key: ''\n"
        )),
        "f.yaml:5: descriptor has empty key (under 'd.a')"
    );
}

#[test]
fn duplicate_composite_keys() {
    assert_eq!(
        one_error(&format!(
            "{HEAD}  - key: k\n    value: v\n  - key: k\n    value: v\n"
        )),
        "f.yaml:5: duplicate descriptor composite key 'd.k_v'"
    );
    // the composite key is key + "_" + value
    assert_eq!(
        one_error(&format!(
            "{HEAD}  - key: a_b\n    value: c\n  - key: a\n    value: b_c\n"
        )),
        "f.yaml:5: duplicate descriptor composite key 'd.a_b_c'"
    );
    // an empty value is no value
    assert_eq!(
        one_error(&format!("{HEAD}  - key: k\n  - key: k\n    value: ''\n")),
        "f.yaml:4: duplicate descriptor composite key 'd.k'"
    );
    // the same key under two parents is fine
    assert!(errors(&format!("{HEAD}  - key: a\n    descriptors: [{{key: k}}]\n  - key: b\n    descriptors: [{{key: k}}]\n")).is_empty());
}

#[test]
fn units() {
    assert_eq!(
        one_error(&format!(
            "{HEAD}  - key: k\n    rate_limit:\n      unit: foo\n      requests_per_unit: 1\n"
        )),
        "f.yaml:5: invalid rate limit unit 'foo' (in 'd.k')"
    );
    assert_eq!(
        one_error(&format!(
            "{HEAD}  - key: k\n    rate_limit: {{requests_per_unit: 1}}\n"
        )),
        "f.yaml:4: invalid rate limit unit '' (in 'd.k')"
    );
    assert!(
        one_error(&format!(
            "{HEAD}  - key: k\n    rate_limit: {{unit: unknown}}\n"
        ))
        .contains("invalid rate limit unit 'unknown'")
    );
    assert!(
        errors(&format!(
            "{HEAD}  - key: k\n    rate_limit: {{unit: HoUr}}\n"
        ))
        .is_empty()
    );
}

#[test]
fn unlimited() {
    assert_eq!(
        one_error(&format!(
            "{HEAD}  - key: k\n    rate_limit: {{unlimited: true, unit: second}}\n"
        )),
        "f.yaml:4: should not specify rate limit unit when unlimited ('d.k' has unit 'second')"
    );
    // an invalid unit with unlimited is not looked at, nor requests_per_unit
    assert!(errors(&format!("{HEAD}  - key: k\n    rate_limit: {{unlimited: true, unit: foo, requests_per_unit: 5}}\n")).is_empty());
}

#[test]
fn replaces() {
    assert_eq!(
        one_error(&format!(
            "{HEAD}  - key: k\n    rate_limit:\n      unit: second\n      name: a\n      replaces:\n        - name: ''\n"
        )),
        "f.yaml:8: should not have an empty replaces entry (in 'd.k')"
    );
    assert_eq!(
        one_error(&format!(
            "{HEAD}  - key: k\n    rate_limit:\n      unit: second\n      name: a\n      replaces: [{{name: a}}]\n"
        )),
        "f.yaml:7: replaces should not contain name of same descriptor ('a' in 'd.k')"
    );
    assert!(errors(&format!("{HEAD}  - key: k\n    rate_limit:\n      unit: second\n      name: a\n      replaces: [{{name: b}}]\n")).is_empty());
}

#[test]
fn share_threshold_needs_a_wildcard() {
    assert_eq!(
        one_error(&format!(
            "{HEAD}  - key: k\n    value: v\n    share_threshold: true\n"
        )),
        "f.yaml:3: share_threshold can only be used with wildcard values (containing '*'), but found key 'k_v'"
    );
    assert!(
        errors(&format!(
            "{HEAD}  - key: k\n    value: v*\n    share_threshold: true\n"
        ))
        .is_empty()
    );
    assert!(
        errors(&format!(
            "{HEAD}  - key: k\n    value: v\n    share_threshold: false\n"
        ))
        .is_empty()
    );
}

#[test]
fn every_error_is_reported() {
    let e = errors(&format!(
        "{HEAD}  - key: ''\n  - key: k\n    rate_limit: {{unit: foo}}\n"
    ));
    assert_eq!(e.len(), 2, "{e:?}");
}

#[test]
fn erl_quirks_are_accepted() {
    // a known key in the wrong place is ignored; scalars are raw text
    let c = parse(
        &[(
            "f.yaml".to_string(),
            format!("{HEAD}  - key: 123\n    value: 8080\n    rate_limit: {{unit: second, requests_per_unit: 4}}\n"),
        )],
        None,
    )
    .unwrap();
    let m = c.find("d", &[("123", "8080")]).unwrap();
    assert!(!m.rule.shadow_mode);
    assert_eq!(
        m.rule.limit,
        crate::erl::Limit::Fixed {
            requests_per_unit: 4,
            unit: crate::erl::Unit::Second
        }
    );
}

#[test]
fn a_key_given_twice_is_refused() {
    // ERL (yaml.v2) keeps the last value: `unit: second` after `unit:
    // minute` made 10 a minute into 10 a second
    assert_eq!(
        one_error(&format!(
            "{HEAD}  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: 10\n      unit: second\n"
        )),
        "f.yaml:7: error loading config file: yaml: key unit is given twice in one map (first at line 5)"
    );
    assert_eq!(
        one_error(&format!(
            "{HEAD}  - key: k\n    rate_limit: {{unit: second, requests_per_unit: 3}}\n    rate_limit: {{unit: second, requests_per_unit: 4}}\n"
        )),
        "f.yaml:5: error loading config file: yaml: key rate_limit is given twice in one map (first at line 4)"
    );
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn directories_load_recursively_skipping_dot_names() {
    let dir = std::env::temp_dir().join(format!("tollgate-erl-{}-dirs", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write(&dir, "a.yaml", "domain: a\n");
    write(&dir, "sub/b.yml", "domain: b\n");
    write(&dir, "notes.txt", "not yaml at all: [\n");
    write(&dir, ".hidden.yaml", "domain: a\n");
    write(&dir, "..2026_11_25/a.yaml", "domain: a\n");
    let config = load(&dir, true, None).unwrap();
    assert_eq!(config.domains(), ["a", "b"]);

    write(&dir, "sub/c.yaml", "domain: a\n");
    let e = load(&dir, true, None).unwrap_err();
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0].to_string(),
        format!(
            "{}: duplicate domain 'a' in config file",
            dir.join("sub/c.yaml").display()
        )
    );
    // one file given directly is read whatever its name
    let single = load(&dir.join("notes.txt"), true, None).unwrap_err();
    assert!(
        single[0]
            .message
            .starts_with("error loading config file: yaml:"),
        "{single:?}"
    );
    // RUNTIME_IGNOREDOTFILES=false: dot names are read too
    std::fs::remove_file(dir.join("sub/c.yaml")).unwrap();
    let e = load(&dir, false, None).unwrap_err();
    assert!(e[0].message.contains("duplicate domain 'a'"), "{e:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
