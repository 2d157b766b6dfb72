//! `tollgate simulate --plot`: the README's picture is what the command
//! draws today, and both image formats come out whole.

mod common;

use common::{repo, simulate, stdout};

use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    common::temp_dir().join(name)
}

/// The command the README's picture comes from, with `--plot` last.
const README_PICTURE: [&str; 6] = [
    "--config",
    "examples/books.toml",
    "--trace",
    "examples/boundary-burst.csv",
    "--compare",
    "--plot",
];

#[test]
fn the_readme_picture_is_what_the_command_draws() {
    let fresh = scratch("boundary-burst.svg");
    let mut args = README_PICTURE.to_vec();
    args.push(fresh.to_str().unwrap());
    stdout(&simulate(&args));
    let drawn = std::fs::read_to_string(&fresh).unwrap();
    let committed = std::fs::read_to_string(repo().join("examples/boundary-burst.svg"))
        .expect("examples/boundary-burst.svg is committed");
    assert!(
        drawn == committed,
        "examples/boundary-burst.svg is out of date; redraw it with\n  cargo run -- simulate {} examples/boundary-burst.svg",
        README_PICTURE.join(" ")
    );
    // What the picture must show: the three policies and how many each
    // admitted in its busiest minute.
    for needle in [
        "books: 200 admitted in its busiest 1m",
        "books-log: 120 admitted in its busiest 1m",
        "books-sliding: 159 admitted in its busiest 1m",
        "limit per key: 4 per 2s",
    ] {
        assert!(drawn.contains(needle), "{needle:?} not drawn");
    }
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(
        readme.contains("(examples/boundary-burst.svg)"),
        "the README shows the picture"
    );
}

#[test]
fn one_panel_per_policy_in_svg_and_png() {
    let draw = |file: &PathBuf| {
        stdout(&simulate(&[
            "--config",
            "examples/books.toml",
            "--trace",
            "examples/boundary-burst.csv",
            "--plot",
            file.to_str().unwrap(),
        ]))
    };
    let svg = scratch("panels.svg");
    draw(&svg);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<svg width=\"960\" height=\"1050\""),
        "three panels of 350"
    );
    for needle in [
        "books: fixed_window, 120 per 1m",
        "books-log: sliding_log, 120 per 1m",
        "busiest 1m: 200 admitted",
        "busiest 1m: 159 admitted",
        // The admitted and denied colours of the shared palette.
        "fill=\"#0072B2\"",
        "fill=\"#D55E00\"",
    ] {
        assert!(text.contains(needle), "{needle:?} not in the SVG");
    }

    let png = scratch("panels.png");
    draw(&png);
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // The IHDR chunk: width and height, big-endian.
    let dim = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!((dim(16), dim(20)), (960, 1050));
}

#[test]
fn a_plot_of_a_log_draws_times_of_day() {
    let svg = scratch("log.svg");
    stdout(&simulate(&[
        "--config",
        "examples/books.toml",
        "--trace",
        "examples/access.log",
        "--policy",
        "books-log",
        "--plot",
        svg.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("time (UTC) from 2026-03-02 09:00:05"),
        "{text}"
    );
    assert!(text.contains("09:02"));
}

#[test]
fn a_plot_needs_a_known_extension() {
    let out = simulate(&[
        "--config",
        "examples/books.toml",
        "--trace",
        "examples/boundary-burst.csv",
        "--plot",
        "out.jpg",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("out.jpg") && err.contains(".svg or .png"),
        "{err}"
    );
    assert!(!repo().join("out.jpg").exists());
}
