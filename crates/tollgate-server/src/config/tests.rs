//! The config parser on whole files: every algorithm, every error with
//! its line and field, the `[store]` switches. Over 400 lines: one case
//! per field and error, each a few lines of TOML, sharing this file's
//! helpers.

use super::*;

fn parse(file: &str, text: &str) -> Result<Config, Vec<ConfigError>> {
    Config::parse(file, text)
}

#[test]
fn parses_every_algorithm() {
    let set = Config::parse(
        "t.toml",
        r#"
[[policy]]
name = "a"
algorithm = "fixed_window"
limit = 120
window = "60s"

[[policy]]
name = "b"
algorithm = "gcra"
rate = 10
per = "1s"
burst = 20

[[policy]]
name = "c"
algorithm = "leaky_bucket"
rate = 10
per = "1s"
capacity = 5

[[policy]]
name = "d"
algorithm = "concurrency"
limit = 3
lease = "30s"
"#,
    )
    .unwrap()
    .policies;
    assert_eq!(set.policies.len(), 4);
    assert_eq!(set.get("b").unwrap().limit(), 20);
}

#[test]
fn windows_and_buckets_opt_in_to_batches_and_other_values_are_named() {
    let window = |algorithm: &str, field: &str, value: &str| {
        format!(
            "[[policy]]\nname = \"a\"\nalgorithm = \"{algorithm}\"\nlimit = 10\nwindow = \"1s\"\n{field} = \"{value}\"\n"
        )
    };
    let bucket = |algorithm: &str, field: &str, value: &str| {
        format!(
            "[[policy]]\nname = \"a\"\nalgorithm = \"{algorithm}\"\nrate = 10\nper = \"1s\"\nburst = 5\n{field} = \"{value}\"\n"
        )
    };
    // (algorithm, its table with one more field, that field's line)
    let table = |algorithm: &str, field: &str, value: &str| match algorithm {
        "fixed_window" | "sliding_window" => (window(algorithm, field, value), 6),
        _ => (bucket(algorithm, field, value), 7),
    };
    for algorithm in ["fixed_window", "sliding_window", "token_bucket", "gcra"] {
        let line = table(algorithm, "batch", "auto").1;
        let config = parse("l.toml", &table(algorithm, "batch", "auto").0).unwrap();
        assert!(config.policies.get("a").unwrap().leased(), "{algorithm}");
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
        let config = parse("l.toml", &table(algorithm, "batch", "off").0).unwrap();
        assert!(!config.policies.get("a").unwrap().leased(), "{algorithm}");
        let e = parse("l.toml", &table(algorithm, "batch", "always").0).unwrap_err();
        assert_eq!(e[0].line, line, "{}", e[0]);
        assert!(e[0].to_string().contains("`batch`"), "{}", e[0]);
        assert!(e[0].to_string().contains("\"always\""), "{}", e[0]);
    }
    // Where batches do not apply, `batch` is named as a field that does
    // not, with the fields that do.
    let e = parse("l.toml", &window("sliding_log", "batch", "auto")).unwrap_err();
    assert_eq!(e[0].line, 6, "{}", e[0]);
    assert!(
        e[0].to_string()
            .contains("field `batch` does not apply to sliding_log"),
        "{}",
        e[0]
    );
    let leaky = "[[policy]]\nname = \"a\"\nalgorithm = \"leaky_bucket\"\nrate = 10\nper = \"1s\"\ncapacity = 5\nbatch = \"auto\"\n";
    let e = parse("l.toml", leaky).unwrap_err();
    assert!(e[0].to_string().contains("`batch`"), "{}", e[0]);
    let concurrency = "[[policy]]\nname = \"a\"\nalgorithm = \"concurrency\"\nlimit = 3\nlease = \"30s\"\nbatch = \"auto\"\n";
    let e = parse("l.toml", concurrency).unwrap_err();
    assert_eq!(e[0].line, 6, "{}", e[0]);
    assert!(
        e[0].to_string().contains("it takes limit, lease"),
        "{}",
        e[0]
    );
}

#[test]
fn lease_auto_is_still_read_with_a_warning_naming_batch() {
    for (value, leased) in [("auto", true), ("off", false)] {
        let text = format!(
            "[[policy]]\nname = \"a\"\nalgorithm = \"gcra\"\nrate = 10\nper = \"1s\"\nburst = 5\nlease = \"{value}\"\n"
        );
        let config = parse("l.toml", &text).unwrap();
        assert_eq!(config.policies.get("a").unwrap().leased(), leased);
        let [warning] = &config.warnings[..] else {
            panic!("one warning expected: {:?}", config.warnings);
        };
        assert_eq!(warning.line, 7, "{warning}");
        assert!(
            warning
                .to_string()
                .contains(&format!("`batch = \"{value}\"`")),
            "{warning}"
        );
    }
    // An old value that was wrong is still wrong, named by its field.
    let text = "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"1s\"\nlease = \"30s\"\n";
    let e = parse("l.toml", text).unwrap_err();
    assert_eq!(e[0].line, 6, "{}", e[0]);
    assert!(
        e[0].to_string().contains("`lease` is \"auto\" or \"off\""),
        "{}",
        e[0]
    );
    // A concurrency lease is a duration, and no warning.
    let text =
        "[[policy]]\nname = \"a\"\nalgorithm = \"concurrency\"\nlimit = 3\nlease = \"30s\"\n";
    assert!(parse("l.toml", text).unwrap().warnings.is_empty());
}

#[test]
fn lease_and_batch_together_is_an_error_naming_both() {
    let text = "[[policy]]\nname = \"a\"\nalgorithm = \"sliding_window\"\nlimit = 10\nwindow = \"1s\"\nbatch = \"auto\"\nlease = \"auto\"\n";
    let e = parse("l.toml", text).unwrap_err();
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].line, 7, "{}", e[0]);
    let message = e[0].to_string();
    assert!(
        message.contains("`lease`") && message.contains("`batch`"),
        "{message}"
    );
}

#[test]
fn every_error_has_its_line_and_field() {
    let errors = parse(
        "bad.toml",
        r#"[[policy]]
name = "a"
algorithm = "fixed_window"
limit = 0
window = "60s"

[[policy]]
name = "b"
algorithm = "sliding_log"
limit = 5
window = "forever"

[[policy]]
name = "c"
algorithm = "token_bucket"
rate = 1
per = "1s"

[[policy]]
name = "d"
algorithm = "bogus"
"#,
    )
    .unwrap_err();
    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(text.len(), 4, "{text:#?}");
    assert!(
        text[0].starts_with("bad.toml:4: policy `a`:") && text[0].contains("`limit`"),
        "{}",
        text[0]
    );
    assert!(
        text[1].starts_with("bad.toml:11: policy `b`: `window`"),
        "{}",
        text[1]
    );
    assert!(text[2].contains("missing field `burst`"), "{}", text[2]);
    assert!(
        text[3].starts_with("bad.toml:21:") && text[3].contains("unknown algorithm `bogus`"),
        "{}",
        text[3]
    );
}

#[test]
fn type_errors_and_unknown_fields_name_the_line() {
    let e = parse(
        "x.toml",
        "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1.5\nwindow = \"1s\"\n",
    )
    .unwrap_err();
    assert_eq!(e[0].line, 4, "{}", e[0]);
    let e = parse("x.toml", "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\nwindo = \"2s\"\n").unwrap_err();
    assert!(e[0].message.contains("windo"), "{}", e[0]);
    let e = parse(
        "x.toml",
        "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = -3\nwindow = \"1s\"\n",
    )
    .unwrap_err();
    assert_eq!(e[0].line, 4);
    assert!(e[0].message.contains("-3"), "{}", e[0]);
    let e = parse("x.toml", "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\nburst = 4\n").unwrap_err();
    assert!(e[0].message.contains("does not apply"), "{}", e[0]);
}

#[test]
fn the_bucket_expiry_form_can_be_switched_off() {
    let policy =
        "[[policy]]\nname = \"a\"\nalgorithm = \"gcra\"\nrate = 1\nper = \"1s\"\nburst = 1\n";
    let on = Config::parse("x.toml", policy).unwrap();
    assert!(on.store.bucket_expiry_form, "on by default");
    let off = Config::parse(
        "x.toml",
        &format!("[store]\nbucket_expiry_form = false\n{policy}"),
    )
    .unwrap();
    assert!(!off.store.bucket_expiry_form);
    let e = parse(
        "x.toml",
        &format!("[store]\nbucket_expiry_form = \"no\"\n{policy}"),
    )
    .unwrap_err();
    assert_eq!(e[0].line, 2, "{}", e[0]);
}

#[test]
fn pipelining_can_be_switched_off() {
    let policy =
        "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\n";
    assert!(
        Config::parse("x.toml", policy).unwrap().store.pipelining,
        "on by default"
    );
    let off = Config::parse("x.toml", &format!("[store]\npipelining = false\n{policy}")).unwrap();
    assert!(!off.store.pipelining);
    let e = parse("x.toml", &format!("[store]\npipelining = 1\n{policy}")).unwrap_err();
    assert_eq!(e[0].line, 2, "{}", e[0]);
}

#[test]
fn sentinels_need_a_master_name_and_exclude_urls() {
    let policy =
        "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\n";
    let ok = Config::parse(
        "x.toml",
        &format!("[store]\nsentinels = [\"redis://10.0.0.1:26379\", \"redis://10.0.0.2:26379\"]\nmaster_name = \"mymaster\"\n{policy}"),
    )
    .unwrap();
    assert_eq!(ok.store.urls.len(), 2);
    assert_eq!(ok.store.master_name.as_deref(), Some("mymaster"));
    for (store, line, says) in [
        (
            "sentinels = [\"redis://h:26379\"]\n",
            2,
            "needs `master_name`",
        ),
        ("master_name = \"m\"\n", 2, "needs `sentinels`"),
        (
            "urls = [\"redis://h/\"]\nsentinels = [\"redis://h:26379\"]\nmaster_name = \"m\"\n",
            3,
            "exclude each other",
        ),
        (
            "sentinels = []\nmaster_name = \"m\"\n",
            2,
            "at least one sentinel",
        ),
        (
            "kind = \"memory\"\nsentinels = [\"redis://h\"]\nmaster_name = \"m\"\n",
            2,
            "takes no",
        ),
    ] {
        let e = parse("x.toml", &format!("[store]\n{store}{policy}")).unwrap_err();
        assert_eq!(e[0].line, line, "{}", e[0]);
        assert!(e[0].message.contains(says), "{}", e[0]);
    }
}

#[test]
fn a_policy_takes_a_group() {
    let text = "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\ngroup = \"user\"\n";
    let config = Config::parse("x.toml", text).unwrap();
    assert_eq!(config.policies.get("a").unwrap().group(), Some("user"));
    let e = parse("x.toml", &text.replace("\"user\"", "\"us/er\"")).unwrap_err();
    assert_eq!(e[0].line, 6, "{}", e[0]);
    assert!(e[0].message.contains("group"), "{}", e[0]);
}

/// A calendar window from the file: its period and zone, and each
/// mistake with its line: a window that is no period, a zone no
/// database knows, a calendar on another algorithm.
#[test]
fn calendar_windows_parse_and_their_errors_have_lines() {
    let set = Config::parse(
        "t.toml",
        "[[policy]]\nname = \"tokens\"\nalgorithm = \"fixed_window\"\nlimit = 1000000\nwindow = \"1mo\"\ncalendar = \"Europe/Paris\"\n",
    )
    .unwrap()
    .policies;
    let tollgate::Algorithm::FixedWindow(fw) = set.get("tokens").unwrap().algorithm() else {
        panic!("a fixed window");
    };
    let calendar = fw.calendar().expect("a calendar window");
    assert_eq!(
        (calendar.period(), calendar.zone()),
        (tollgate::algorithm::Period::Month, "Europe/Paris")
    );
    let e = parse("c.toml", "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"30d\"\ncalendar = \"UTC\"\n").unwrap_err();
    assert_eq!(e[0].line, 5, "{}", e[0]);
    assert!(e[0].message.contains("1mo"), "{}", e[0]);
    let e = parse("c.toml", "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1d\"\ncalendar = \"Mars/Base\"\n").unwrap_err();
    assert_eq!(e[0].line, 6, "{}", e[0]);
    assert!(e[0].message.contains("Mars/Base"), "{}", e[0]);
    let e = parse("c.toml", "[[policy]]\nname = \"a\"\nalgorithm = \"sliding_log\"\nlimit = 1\nwindow = \"1d\"\ncalendar = \"UTC\"\n").unwrap_err();
    assert_eq!(e[0].line, 6, "{}", e[0]);
    assert!(
        e[0].message.contains("`calendar` does not apply"),
        "{}",
        e[0]
    );
}

#[test]
fn the_erl_table_opts_in_and_names_a_bad_value() {
    let c = parse("t.toml", "[erl]\nextensions = true\nheaders = \"ietf\"\n").unwrap();
    assert_eq!(
        c.erl,
        ErlSettings {
            extensions: true,
            headers: Some(HeaderStyle::Ietf)
        }
    );
    assert_eq!(parse("t.toml", "").unwrap().erl, ErlSettings::default());
    let e = parse("t.toml", "\n[erl]\nheaders = \"x-ratelimit\"\n").unwrap_err();
    assert_eq!(e[0].line, 3);
    assert_eq!(
        e[0].message,
        "[erl] `headers`: \"x-ratelimit\" is neither \"erl\" nor \"ietf\""
    );
    let e = parse("t.toml", "[erl]\nextension = true\n").unwrap_err();
    assert!(e[0].message.contains("unknown field `extension`"), "{e:?}");
}

const TIERED: &str = "[[policy]]\nname = \"api\"\nalgorithm = \"token_bucket\"\nrate = 10\nper = \"1s\"\nburst = 20\n\n[policy.tiers.pro]\nrate = 100\nburst = 200\n\n[policy.tiers.free]\nburst = 5\n";

#[test]
fn tiers_and_overrides_are_read() {
    let text = format!(
        "{TIERED}\n[[override]]\npolicy = \"api\"\nkey = \"acme\"\nburst = 5000\nttl = \"24h\"\n\n[[override]]\npolicy = \"api\"\nkey = \"trial_*\"\ntier = \"free\"\n\n[[override]]\npolicy = \"api\"\nkey = \"bot\"\naction = \"block\"\n"
    );
    let config = parse("t.toml", &text).unwrap();
    let api = config.policies.get("api").unwrap();
    assert_eq!(api.tier_names(), ["free", "pro"]);
    assert_eq!(api.tier("pro").unwrap().limit(), 200);
    assert_eq!(api.tier("free").unwrap().limit(), 5);
    let overrides = &config.policies.overrides;
    let texts: Vec<(String, &str)> = overrides
        .iter()
        .map(|o| (o.selector.to_string(), o.over.action().kind()))
        .collect();
    assert_eq!(
        texts,
        [
            ("acme".to_string(), "limits"),
            ("trial_*".to_string(), "tier"),
            ("bot".to_string(), "block")
        ]
    );
    assert!(overrides[0].over.expires_at().is_some());
}

#[test]
fn a_bad_tier_or_override_names_its_line_and_field() {
    let o = |body: &str| format!("{TIERED}\n[[override]]\npolicy = \"api\"\n{body}\n");
    // The override's own lines start at line 17 (`policy` on 16).
    for (text, line, needle) in [
        (
            TIERED.replace("burst = 200", "limit = 200"),
            10,
            "tier `pro`: invalid policy: `limit` does not apply to token_bucket",
        ),
        (
            TIERED.replace("burst = 5", "burst = 0"),
            13,
            "`burst` must be a positive integer",
        ),
        (
            TIERED.replace("burst = 5", "brust = 5"),
            13,
            "unknown field `brust`",
        ),
        (
            o("key = \"k\"\nlimit = 5"),
            18,
            "`limit` does not apply to token_bucket",
        ),
        (
            o("key = \"k\"\nrate = 0"),
            18,
            "`rate` must be a positive integer",
        ),
        (o("key = \"k\"\ntier = \"gold\""), 18, "`tier`"),
        (
            o("key = \"k\"\naction = \"ban\""),
            18,
            "`action` must be \"block\" or \"allow\"",
        ),
        (
            o("key = \"k\"\naction = \"block\"\nburst = 4"),
            18,
            "`burst` cannot be given with `action`",
        ),
        (o("key = \"k\"\nburst = 4\nttl = \"soon\""), 19, "`ttl`"),
        (o("key = \"a*b\"\nburst = 4"), 17, "`key`"),
        (o("key = \"\"\nburst = 4"), 17, "`key`"),
        (
            o("key = \"k\"\nburst = 4\ncolour = 1"),
            19,
            "unknown field `colour`",
        ),
        (o("key = \"k\"\nburst = 4\nburst = 5"), 19, "duplicate key"),
        (o("key = \"k\""), 15, "needs the policy's parameters"),
        (
            format!(
                "{}\n[[override]]\npolicy = \"api\"\nkey = \"k\"\nburst = 5\n",
                o("key = \"k\"\nburst = 4")
            ),
            22,
            "given twice",
        ),
        (
            format!("{TIERED}\n[[override]]\npolicy = \"nope\"\nkey = \"k\"\nburst = 4\n"),
            16,
            "no policy named \"nope\"",
        ),
    ] {
        let errors = parse("t.toml", &text).unwrap_err();
        let e = errors[0].to_string();
        assert!(
            e.starts_with(&format!("t.toml:{line}:")) && e.contains(needle),
            "{needle}: {e}"
        );
    }
}

#[test]
fn a_type_error_names_its_field() {
    let e = parse("t.toml", "[erl]\nextensions = \"yes\"\n").unwrap_err();
    assert_eq!(e[0].line, 2);
    assert!(
        e[0].message.starts_with("[erl] `extensions`: "),
        "{}",
        e[0].message
    );
    assert!(e[0].message.contains("boolean"), "{}", e[0].message);
    let e = parse(
        "t.toml",
        "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = \"ten\"\nwindow = \"1s\"\n",
    )
    .unwrap_err();
    assert!(
        e[0].message.starts_with("[[policy]] `limit`: "),
        "{}",
        e[0].message
    );
}

#[test]
fn duplicate_keys_are_errors() {
    let e = parse(
        "t.toml",
        "[store]\ndeadline = \"10ms\"\ndeadline = \"20ms\"\n",
    )
    .unwrap_err();
    assert_eq!(e[0].line, 3, "{}", e[0]);
    assert!(e[0].message.contains("duplicate key"), "{}", e[0].message);
    let e = parse("t.toml", "[erl]\n[erl]\n").unwrap_err();
    assert!(e[0].message.contains("duplicate"), "{}", e[0].message);
}

#[test]
fn a_huge_bad_value_is_not_echoed_whole() {
    let ten_mb = "x".repeat(10 << 20);
    let huge = "x".repeat(1 << 20);
    for text in [
        format!("[erl]\nextensions = \"{ten_mb}\"\n"),
        format!("[server]\nlisten = \"{huge}\"\n"),
        format!("[erl]\nheaders = \"{huge}\"\n"),
        format!("[store]\ndeadline = \"{huge}\"\n"),
        format!("[[policy]]\nname = \"{huge}\"\nalgorithm = \"gcra\"\n"),
    ] {
        let e = parse("t.toml", &text).unwrap_err();
        let shown = e[0].to_string();
        assert!(
            shown.len() < 1_000,
            "{} bytes: {}",
            shown.len(),
            &shown[..200]
        );
        assert!((1..=2).contains(&e[0].line), "{shown}");
    }
}

#[test]
fn unreadable_files_name_the_cap_and_the_line() {
    let e = Config::load(Path::new("/dev/zero")).unwrap_err();
    assert_eq!(
        e[0].to_string(),
        "/dev/zero: the file is larger than 16 MiB, the cap on config files"
    );
    let path = std::env::temp_dir().join(format!("tollgate-utf8-{}.toml", std::process::id()));
    std::fs::write(&path, b"[erl]\nextensions = true\n# caf\xe9\n").unwrap();
    let e = Config::load(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(e[0].line, 3, "{}", e[0]);
    assert!(e[0].message.contains("not UTF-8"), "{}", e[0]);
}

#[test]
fn a_descriptor_takes_its_tier_from_an_entry_checked_with_its_line() {
    let policies = "[[policy]]\nname = \"api\"\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"1m\"\n\n[policy.tiers.pro]\nlimit = 100\n\n[[policy]]\nname = \"flat\"\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"1m\"\n";
    let table = |entries: &str, policy: &str, from: &str| {
        format!(
            "{policies}\n[[descriptor]]\ndomain = \"edge\"\nentries = {entries}\npolicy = \"{policy}\"\ntier_from = \"{from}\"\n"
        )
    };
    let ok = parse(
        "ok.toml",
        &table(r#"[{ key = "user" }, { key = "x-plan" }]"#, "api", "x-plan"),
    )
    .unwrap();
    assert_eq!(
        ok.policies.descriptors[0].tier_from.as_deref(),
        Some("x-plan")
    );
    for (entries, policy, from, wanted) in [
        (r#"[{ key = "user" }]"#, "api", "x-plan", "is not the key"),
        (
            r#"[{ key = "user" }, { key = "x-plan", value = "pro" }]"#,
            "api",
            "x-plan",
            "fixed `value`",
        ),
        (
            r#"[{ key = "user" }, { key = "x-plan" }]"#,
            "flat",
            "x-plan",
            "has no tiers",
        ),
    ] {
        let errors = parse("bad.toml", &table(entries, policy, from)).unwrap_err();
        let text = errors[0].to_string();
        assert!(
            text.starts_with("bad.toml:20: descriptor: `tier_from`") && text.contains(wanted),
            "{text}"
        );
    }
}
