//! `himeno report --compare`, the real binary on the records of
//! `tests/records/` laid out as rounds (one file each): the best, median
//! and paired ratios it prints, and the one-line refusals of bad input.

use crate::common::{himeno, scratch, stderr, stdout_ok};
use himeno::report::Record;
use himeno::study::compare::{Answers, Comparison};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The lines of fixture `name`.
fn fixture(name: &str) -> Vec<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/records")
        .join(name);
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// The sweep fixture's records as two rounds (each label's first run in
/// round 1, its second in round 2), and the custom record in round 1
/// only; with each label's MFLOPS per round.
fn sweep_rounds(dir: &Path) -> (Vec<PathBuf>, HashMap<String, Vec<f64>>) {
    let mut rounds = [String::new(), String::new()];
    let mut mflops: HashMap<String, Vec<f64>> = HashMap::new();
    for line in fixture("sweep.jsonl")
        .into_iter()
        .chain(fixture("custom.jsonl"))
    {
        let r: Record = serde_json::from_str(&line).unwrap();
        let seen = mflops.entry(r.label.clone().unwrap()).or_default();
        rounds[seen.len()].push_str(&line);
        rounds[seen.len()].push('\n');
        seen.push(r.mflops);
    }
    let files = rounds
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let p = dir.join(format!("round-{}.jsonl", i + 1));
            std::fs::write(&p, text).unwrap();
            p
        })
        .collect();
    (files, mflops)
}

#[test]
fn compare_gives_the_best_the_median_and_the_paired_ratios_of_labelled_runs() {
    let dir = scratch("sweep");
    let (files, mflops) = sweep_rounds(&dir);
    let mut args = vec![
        "report",
        "--compare",
        "--ratio",
        "fx-strong:fx-weak",
        "--ratio",
        "custom:fx-weak",
        "--format",
        "json",
    ];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let c: Comparison = serde_json::from_str(&stdout_ok(&himeno(&args).output().unwrap())).unwrap();
    assert_eq!((c.metric.as_str(), c.rounds), ("mflops", 2));
    let labels: Vec<&str> = c.labels.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(labels, ["fx-weak", "fx-strong", "fx-scaled", "custom"]);
    for row in &c.labels {
        let v = &mflops[&row.label];
        let best = v.iter().copied().fold(f64::MIN, f64::max);
        let median = if v.len() == 2 {
            (v[0] + v[1]) / 2.0
        } else {
            v[0]
        };
        assert_eq!(row.best, best, "{row:?}");
        assert!((row.median - median).abs() <= 1e-9 * median, "{row:?}");
        assert!(row.answers.is_some(), "{row:?}");
    }
    let (s, w) = (&mflops["fx-strong"], &mflops["fx-weak"]);
    let strong = &c.ratios[0];
    assert_eq!(strong.paired_rounds, 2);
    assert!(strong.missing_rounds.is_empty());
    let want = (s[0] / w[0] + s[1] / w[1]) / 2.0;
    assert!((strong.median_ratio.unwrap() - want).abs() <= 1e-9 * want);
    // The custom run ran in round 1 only: round 2 is missing, not paired.
    let custom = &c.ratios[1];
    assert_eq!(
        (custom.paired_rounds, custom.missing_rounds.clone()),
        (1, vec![2])
    );
    assert_eq!(custom.median_ratio, Some(mflops["custom"][0] / w[0]));

    // The text table, and measurements beside the records: a time is
    // better lower.
    let extra = dir.join("peer.jsonl");
    std::fs::write(
        &extra,
        "{\"label\":\"peer\",\"value\":3.0,\"better\":\"lower\"}\n",
    )
    .unwrap();
    let more = dir.join("peer2.jsonl");
    std::fs::write(
        &more,
        "{\"label\":\"peer\",\"value\":2.0,\"better\":\"lower\"}\n",
    )
    .unwrap();
    let out = stdout_ok(
        &himeno(&[
            "report",
            "--compare",
            "--only",
            "peer",
            extra.to_str().unwrap(),
            more.to_str().unwrap(),
        ])
        .output()
        .unwrap(),
    );
    let row = out.lines().find(|l| l.starts_with("peer ")).expect(&out);
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cells[..5],
        ["peer", "2", "2.000", "2.500", "3.000"],
        "{out}"
    );
    assert!(!out.contains("fx-weak"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_to_compare_is_one_line_and_exit_2() {
    let dir = scratch("bad");
    let (files, _) = sweep_rounds(&dir);
    let round = files[0].to_str().unwrap();
    let garbage = dir.join("garbage.jsonl");
    std::fs::write(&garbage, "{\"label\": \"x\"}\nnot json\n").unwrap();
    let twice = dir.join("twice.jsonl");
    let line = &fixture("custom.jsonl")[0];
    std::fs::write(&twice, format!("{line}\n{line}\n")).unwrap();
    let unlabelled = dir.join("unlabelled.jsonl");
    std::fs::write(&unlabelled, format!("{}\n", fixture("valid.jsonl")[0])).unwrap();
    let missing = dir.join("absent.jsonl");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![garbage.to_str().unwrap()], "garbage.jsonl:1"),
        (vec![twice.to_str().unwrap()], "twice in one round"),
        (vec![unlabelled.to_str().unwrap()], "without a label"),
        (vec![missing.to_str().unwrap()], "cannot read"),
        (vec!["--ratio", "fx-weak:nobody", round], "'nobody'"),
        (vec!["--ratio", "fx-weak", round], "NUMERATOR:DENOMINATOR"),
        (vec!["--format", "csv", round], "text or JSON"),
        (vec!["--metric", "speed", round], "speed"),
    ];
    for (extra, says) in cases {
        let mut args = vec!["report", "--compare"];
        args.extend(extra.iter().copied());
        let out = himeno(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = stderr(&out);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].starts_with("himeno"), "{args:?}: {err}");
        assert!(lines[0].contains(says), "{args:?}: {err}");
    }
    // A label whose values are better higher in one round and lower in
    // another is no one kind of value.
    let mixed = dir.join("mixed.jsonl");
    std::fs::write(
        &mixed,
        "{\"label\":\"custom\",\"value\":1.0,\"better\":\"lower\"}\n",
    )
    .unwrap();
    let out = himeno(&["report", "--compare", round, mixed.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("one kind of value"),
        "{}",
        stderr(&out)
    );
    assert_eq!(Answers::Passed, serde_json::from_str("\"passed\"").unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}
