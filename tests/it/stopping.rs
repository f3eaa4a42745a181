//! Stop signals end every wait within its grace: a held results-file lock,
//! a hung rank, a rank stuck before the ranks agree (in-process ranks here,
//! under `mpirun` in the system tier), and a malformed stop grace is a
//! usage error.

use crate::common::hostile::*;
use crate::common::signals::stop_after;
use crate::common::*;

#[test]
fn a_signal_ends_the_wait_for_a_held_results_file_lock() {
    let dir = scratch("lock");
    let file = dir.join("l.jsonl");
    std::fs::write(&file, "").unwrap();
    // This test holds the lock, as `flock l sleep 20` would.
    let holder = std::fs::File::open(&file).unwrap();
    holder.lock().unwrap();
    let e = stop_after(
        himeno(&[
            "--grid",
            "9x9x9",
            "--iterations",
            "5",
            "-v",
            "--output",
            file.to_str().unwrap(),
        ]),
        "waiting for the results-file lock",
        "TERM",
    );
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    assert!(
        e.stdout.contains("Loop executed for 5 times"),
        "the report is printed: {}",
        e.stdout
    );
    let ours: Vec<&str> = e
        .stderr
        .lines()
        .filter(|l| l.starts_with("himeno:"))
        .collect();
    assert_eq!(ours.len(), 1, "{}", e.stderr);
    assert!(ours[0].contains("stopped by a signal while waiting for the lock"));
    // The record is in the message, whole, for the log.
    let json = ours[0].split("here it is: ").nth(1).expect("the record");
    let rec: serde_json::Value = serde_json::from_str(json).expect("one whole record");
    assert_eq!(rec["iterations"], 5);
    holder.unlock().unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "",
        "nothing appended"
    );
}

#[test]
fn a_hung_rank_cannot_outlive_a_stop_signal() {
    // Rank 0 hangs at iteration 3; a second after the stop signal the
    // watchdog ends it.
    let e = stop_after(hung(himeno(&HUNG_RUN), 0), "injecting a fault", "TERM");
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    assert!(
        e.stderr.contains("still running 1 s after a stop signal"),
        "{}",
        e.stderr
    );
}

#[test]
fn a_rank_stuck_before_the_agreement_cannot_outlive_a_stop_signal() {
    // Rank 1 hangs before the ranks agree on the run, and the others wait
    // for it there. The stop grace applies from the start: once it did only
    // after the agreement, and the default 60 s ended such a job.
    let mut all = vec!["--local-ranks", "2"];
    all.extend(STUCK_RUN);
    assert_stuck_rank_ends(stuck(himeno(&all)), "TERM");
}

#[test]
fn a_malformed_stop_grace_is_a_usage_error() {
    for bad in ["0", "-1", "soon", "1e9", "1e-300", "0.0001"] {
        let mut cmd = himeno(&["--grid", "5x5x5", "--iterations", "1"]);
        cmd.env("HIMENO_STOP_GRACE", bad);
        let o = run_with_limit(cmd, LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &["HIMENO_STOP_GRACE"]);
    }
}
