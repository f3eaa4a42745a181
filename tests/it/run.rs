//! Single-rank runs of the benchmark: report contents, formats, exit codes.

use crate::common::*;

#[test]
fn json_report_has_the_documented_fields() {
    let o = run(himeno(&[
        "--size",
        "XS",
        "--iterations",
        "5",
        "--format",
        "json",
    ]));
    let r = json_ok(&o);
    for key in [
        "grid",
        "procs",
        "ranks",
        "threads_per_rank",
        "backend",
        "iterations",
        "gosa",
        "mflops",
        "wall_s",
        "gbytes_per_s",
        "phases",
        "p_fingerprint",
        "verified",
        "provenance",
        "complete",
        "schema",
    ] {
        assert!(r.get(key).is_some(), "missing {key} in {r}");
    }
    assert_eq!(r["grid"], serde_json::json!([32, 32, 64]));
    assert_eq!(r["iterations"], 5);
    assert!(r["mflops"].as_f64().unwrap() > 0.0);
    for phase in ["compute", "pack", "comm", "unpack", "allreduce"] {
        let p = &r["phases"][phase];
        assert!(p["min_s"].as_f64().unwrap() <= p["max_s"].as_f64().unwrap());
    }
    assert!(
        r["phases"]["compute"]["max_s"].as_f64().unwrap() > 0.0,
        "compute timer is zero"
    );
}

#[test]
fn text_report_keeps_the_original_lines() {
    let o = run(himeno(&["--size", "XS", "--iterations", "3"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    for line in [
        "Gosa :",
        "MFLOPS measured :",
        "Score based on Pentium III 600MHz",
        "mimax = 32",
    ] {
        assert!(s.contains(line), "missing '{line}' in:\n{s}");
    }
}

#[test]
fn csv_report_has_header_and_one_row() {
    let o = run(himeno(&[
        "--size",
        "XS",
        "--iterations",
        "2",
        "--format",
        "csv",
    ]));
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 2, "{s}");
    assert_eq!(
        lines[0].split(',').count(),
        lines[1].split(',').count(),
        "{s}"
    );
    assert!(lines[0].contains("mflops") && lines[0].contains("wall_s"));
}

/// A run on odd extents (rows of 33 points: 4 whole chunks and a tail of
/// one) with `extra` options, verified against the reference kernel
/// (fingerprint of p exact); returns its report.
fn verified_odd_run(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--grid", "13x11x35", "--iterations", "5"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--verify", "--format", "json"]);
    let r = json_ok(&run(himeno(&args)));
    assert_eq!(r["verified"], true, "{extra:?}: {r}");
    assert_eq!(r["verification"]["against"], "reference");
    r
}

#[test]
fn thread_count_does_not_change_the_answer() {
    // Thread counts 1..5 that split rows unevenly, pinned and not.
    let mut seen = Vec::new();
    for t in 1..=5 {
        for bind in ["none", "cores"] {
            let threads = t.to_string();
            let r = verified_odd_run(&["--threads", &threads, "--bind", bind]);
            seen.push(r["p_fingerprint"].clone());
        }
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
}

#[test]
fn store_policy_does_not_change_the_answer() {
    // Streaming stores write whole rows, ends included, through a line
    // buffer: rows of 35 values start at every offset of a cache line.
    let mut seen = Vec::new();
    for stores in ["streaming", "cached", "auto"] {
        for threads in ["1", "3"] {
            let r = verified_odd_run(&["--threads", threads, "--stores", stores]);
            assert_eq!(r["stores"], stores);
            let placement = r["per_rank"][0]["placement"].as_str().unwrap();
            let used = if stores == "auto" { "cached" } else { stores };
            assert!(placement.contains(&format!("{used} stores")), "{placement}");
            seen.push(r["p_fingerprint"].clone());
        }
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
}

#[test]
fn verify_against_the_reference_passes() {
    let o = run(himeno(&[
        "--grid",
        "17x19x23",
        "--iterations",
        "4",
        "--verify",
        "--format",
        "json",
    ]));
    let r = json_ok(&o);
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["verification"]["against"], "reference");
}

#[test]
fn seconds_mode_sizes_the_run_from_the_rehearsal() {
    let o = run(himeno(&[
        "--size",
        "XS",
        "--seconds",
        "0.5",
        "--warmup",
        "3",
        "--format",
        "json",
    ]));
    let r = json_ok(&o);
    // As the original: the count is the target over the time of one
    // rehearsal iteration (the record's rehearsal time over its 3), at least
    // one, and the run does all of them.
    let warmup_s = r["warmup_s"].as_f64().unwrap();
    let sized = ((0.5 / (warmup_s / 3.0)).floor()).clamp(1.0, 1e9) as u64;
    assert_eq!(r["planned_iterations"].as_u64(), Some(sized), "{r}");
    assert_eq!(r["iterations"].as_u64(), Some(sized), "{r}");
    let wall = r["wall_s"].as_f64().unwrap();
    assert!(wall < 30.0, "a 0.5 s target ran {wall} s");
}

#[test]
fn results_file_gets_one_json_line_per_run() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("himeno-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("results.jsonl");
    let _ = std::fs::remove_file(&file);
    for _ in 0..2 {
        let o = run(himeno(&[
            "--size",
            "XS",
            "--iterations",
            "2",
            "--output",
            file.to_str().unwrap(),
        ]));
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 2);
    for l in text.lines() {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(r["schema"], 1);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    for args in [
        &["--size", "XXL"][..],
        &["--grid", "2x5x5"],
        &["--iterations", "0"],
        &["--procs", "2x2x1"],
        &["--no-such-option"],
    ] {
        let o = run(himeno(args));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("error"), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?} printed a report");
    }
}
