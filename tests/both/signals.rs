//! Scheduler signals to four ranks, on this tier's launcher (in-process
//! ranks in the fast tier, `mpirun` in the system tier), and the helpers
//! the signal tests of both tiers share: the long run, and the check of an
//! incomplete JSON report and its results-file line.

use crate::common::signals::*;
use crate::common::*;
use std::path::PathBuf;

/// A run that would take many minutes unless stopped.
pub(crate) const LONG: [&str; 8] = [
    "--size",
    "S",
    "--iterations",
    "1000000",
    "--threads",
    "1",
    "-v",
    "--warmup",
];

/// Checks an incomplete JSON report and the matching results-file line.
pub(crate) fn assert_incomplete_json(e: &Ended, file: &PathBuf) {
    assert_eq!(e.status.code(), Some(2), "stderr:\n{}", e.stderr);
    let r: serde_json::Value =
        serde_json::from_str(&e.stdout).unwrap_or_else(|err| panic!("{err}:\n{}", e.stdout));
    assert_eq!(r["complete"], false, "{r}");
    let done = r["iterations"].as_u64().unwrap();
    assert!(
        done >= 1 && done < r["planned_iterations"].as_u64().unwrap(),
        "{r}"
    );
    assert_eq!(
        r["verified"],
        serde_json::Value::Null,
        "an incomplete run is not verified"
    );
    assert!(
        e.stderr.contains("stopped by a signal after"),
        "{}",
        e.stderr
    );
    let text = std::fs::read_to_string(file).expect("the results file is written");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let rec: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(rec["complete"], false);
    assert_eq!(rec["iterations"], done);
}

/// Starts a long run on 4 ranks of `launcher` appending to a results file,
/// sends `sig` to the launching process once the rehearsal is done, and
/// checks that every rank stopped and the record says so.
pub(crate) fn four_ranks_stop_on(launcher: Launcher, sig: &str) {
    let file = temp_file("sig", &format!("{launcher:?}-{sig}.jsonl"));
    let mut args = LONG.to_vec();
    args.extend(["3", "--format", "json", "--output", file.to_str().unwrap()]);
    let e = stop_after(ranks(launcher, 4, &args), "rehearsal done", sig);
    assert_incomplete_json(&e, &file);
    assert_eq!(
        e.stderr
            .matches("stop signal: ending the run early")
            .count(),
        4
    );
}
