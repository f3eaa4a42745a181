//! Every run of a preset is verified by default: the rehearsal runs exactly
//! `--warmup` iterations from the initial state, and for the default 3 of
//! every preset a known answer is stored. A `--seconds` run (whose count
//! is not known in advance) and a count without a stored answer are VALID
//! by the rehearsal; a fixed count with its own answer keeps the full
//! check; a wrong rehearsal is exit 1 before anything is timed or printed.

use crate::common::*;
use himeno::verify::known_answers;
use std::path::PathBuf;

fn file(name: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("himeno-rehearsal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join(name);
    let _ = std::fs::remove_file(&f);
    f
}

#[test]
fn seconds_runs_and_unstored_counts_of_presets_are_valid_by_the_rehearsal() {
    for args in [
        &["--size", "XS", "--seconds", "0.3"][..],
        &["--size", "S", "--iterations", "7"],
        &["--grid", "32x32x64", "--seconds", "0.3", "--threads", "1"],
    ] {
        let mut a = args.to_vec();
        a.extend(["--format", "json"]);
        let r = json_ok(&run(himeno(&a)));
        assert_eq!(r["verified"], true, "{args:?}: {r}");
        // A `--seconds` run may land on a count with a stored answer of
        // its own, which then gets the full check.
        let grid: [usize; 3] = serde_json::from_value(r["grid"].clone()).unwrap();
        let done = r["iterations"].as_u64().unwrap();
        let want = if stored(grid, done) {
            "known-answer"
        } else {
            "rehearsal"
        };
        assert_eq!(r["verification"]["against"], want, "{args:?}");
        let detail = r["verification"]["detail"].as_str().unwrap();
        assert!(
            detail.contains("p fingerprint") && detail.contains("(equal)"),
            "{detail}"
        );
    }
    let text = stdout_ok(&run(himeno(&["--size", "XS", "--seconds", "0.3"])));
    let done: u64 = text
        .split(" Loop executed for ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .expect("the iteration count");
    let want = if stored([32, 32, 64], done) {
        " Verification : VALID (known-answer: "
    } else {
        " Verification : VALID (rehearsal: "
    };
    assert!(text.contains(want), "{text}");
}

/// Whether an answer is stored for `iterations` of `grid`.
fn stored(grid: [usize; 3], iterations: u64) -> bool {
    known_answers()
        .iter()
        .any(|k| k.grid == grid && k.iterations == iterations)
}

#[test]
fn a_wrong_rehearsal_is_exit_1_before_anything_is_timed() {
    let out = file("wrong.jsonl");
    for fault in ["0:r2:perturb", "0:r3:perturb"] {
        let mut cmd = himeno(&[
            "--size",
            "XS",
            "--seconds",
            "30",
            "--output",
            out.to_str().unwrap(),
        ]);
        cmd.env("HIMENO_FAULT", fault);
        let o = run(cmd);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{fault}: {err}");
        assert!(
            o.stdout.is_empty(),
            "{fault}: nothing is printed: {}",
            stdout(&o)
        );
        let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("himeno:")).collect();
        assert_eq!(ours.len(), 1, "{err}");
        assert!(ours[0].contains("the rehearsal's answer is wrong"), "{err}");
        assert!(ours[0].contains("DIFFERENT"), "{err}");
    }
    assert!(!out.exists(), "nothing was timed, nothing is recorded");
}
