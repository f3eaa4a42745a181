//! Results-file integrity: many jobs appending to one file at once lose no
//! record and tear no line; a torn line left by a killed writer never glues
//! onto the next record; a write error (full disk) is reported with exit 2
//! while the report still reaches standard output.

use crate::common::*;
use std::collections::BTreeSet;

/// The smallest possible run, appending to `file` with `label`.
fn tiny_run(file: &str, label: &str) -> std::process::Output {
    let mut args = TINY_RUN.to_vec();
    args.extend_from_slice(&["--threads", "1", "--output", file, "--label", label]);
    run(himeno(&args))
}

#[test]
fn concurrent_jobs_append_every_record_whole() {
    const WRITERS: usize = 8;
    const RECORDS: usize = 25;
    let file = temp_file("append-it", "concurrent.jsonl");
    let path = file.to_str().unwrap();
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            s.spawn(move || {
                for i in 0..RECORDS {
                    let o = tiny_run(path, &format!("w{w}-r{i}"));
                    assert!(o.status.success(), "{}", stderr(&o));
                }
            });
        }
    });
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.ends_with('\n'));
    let mut labels = BTreeSet::new();
    for line in text.lines() {
        let rec: himeno::report::Record = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a torn or glued line ({e}): {line}"));
        assert!(rec.complete);
        labels.insert(rec.label.expect("labelled"));
    }
    let want: BTreeSet<String> = (0..WRITERS)
        .flat_map(|w| (0..RECORDS).map(move |i| format!("w{w}-r{i}")))
        .collect();
    assert_eq!(text.lines().count(), WRITERS * RECORDS);
    assert_eq!(labels, want);
}

#[test]
fn a_torn_line_from_a_killed_writer_stays_apart() {
    let file = temp_file("append-it", "torn.jsonl");
    let path = file.to_str().unwrap();
    let o = tiny_run(path, "first");
    assert!(o.status.success(), "{}", stderr(&o));
    let good = std::fs::read_to_string(&file).unwrap();
    // A writer killed mid-line: half a record, no newline.
    let torn = &good[..good.len() / 2];
    std::fs::write(&file, format!("{good}{torn}")).unwrap();
    let o = tiny_run(path, "after");
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[1], torn);
    for (line, label) in [(lines[0], "first"), (lines[2], "after")] {
        let rec: himeno::report::Record = serde_json::from_str(line).unwrap();
        assert_eq!(rec.label.as_deref(), Some(label));
    }
    assert!(serde_json::from_str::<himeno::report::Record>(lines[1]).is_err());
}

#[test]
fn a_full_disk_is_exit_2_with_the_report_still_printed() {
    let o = tiny_run("/dev/full", "full");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("the report");
    assert_eq!(r["label"], "full");
    let err = stderr(&o);
    assert!(
        err.contains("cannot write to results file /dev/full") && err.contains("No space left"),
        "{err}"
    );
}
