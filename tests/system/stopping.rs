//! Stop signals during long phases and under `mpirun`: the reference run,
//! a temporal block longer than the stop grace, a hung rank and a rank
//! stuck before the agreement under `mpirun`.

use crate::common::hostile::*;
use crate::common::signals::stop_after;
use crate::common::*;

#[test]
fn a_signal_ends_the_reference_run_and_the_record_says_so() {
    let dir = scratch("reference");
    let file = dir.join("r.jsonl");
    // The fast solver does 400 iterations of 96^3 in about a second; the
    // plain reference kernel takes several times longer for them (7 s on a
    // 2-core VM), so the signal comes while it runs.
    let e = stop_after(
        himeno(&[
            "--grid",
            "96x96x96",
            "--iterations",
            "400",
            "--verify",
            "-v",
            "--format",
            "json",
            "--output",
            file.to_str().unwrap(),
        ]),
        "verifying against the reference kernel",
        "TERM",
    );
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    let r: serde_json::Value = serde_json::from_str(&e.stdout).expect("the report");
    assert_eq!(r["complete"], true);
    assert_eq!(r["verified"], serde_json::Value::Null);
    assert_eq!(r["verification"]["against"], "interrupted");
    assert!(
        e.stderr.contains("during the reference run"),
        "{}",
        e.stderr
    );
    let recs = records(&file);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["verification"]["against"], "interrupted");
}

#[test]
fn a_temporal_block_longer_than_the_stop_grace_still_ends_with_its_record() {
    let dir = scratch("long-block");
    let results = dir.join("r.jsonl");
    // Blocks of 32 sweeps of size M take a good part of a second on one
    // thread; the grace is 10 ms. The signal comes once the first timed
    // block has logged its sweeps, as the second starts: the run must
    // finish that block and report.
    let mut cmd = himeno(&[
        "--size",
        "M",
        "--iterations",
        "100000",
        "--temporal",
        "32",
        "--threads",
        "1",
        "-vv",
        "--output",
        results.to_str().unwrap(),
    ]);
    cmd.env("HIMENO_STOP_GRACE", "0.01");
    let e = stop_after(cmd, "iteration=32 ", "USR1");
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    assert!(!e.stderr.contains("still running"), "{}", e.stderr);
    assert!(e.stderr.contains("stopped by a signal"), "{}", e.stderr);
    let recs = records(&results);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["complete"], false);
}

#[test]
fn a_hung_rank_under_mpirun_cannot_outlive_a_stop_signal() {
    if !mpi_or_skip("a_hung_rank_under_mpirun_cannot_outlive_a_stop_signal") {
        return;
    }
    // Rank 1 hangs; the others wait for it in the allreduce. SIGUSR1
    // to mpirun reaches every rank, and the watchdogs end the job
    // through MPI_Abort. They once left with _exit(2), and MPICH's
    // mpiexec then exited 0 about one time in ten (it records 0 for a
    // rank it sees leave only after it began killing the job): a few
    // tries show such a race.
    for _ in 0..3 {
        let e = stop_after(hung(mpirun(3, &HUNG_RUN), 1), "injecting a fault", "USR1");
        assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
        assert!(e.stderr.contains("after a stop signal"), "{}", e.stderr);
    }
}

#[test]
fn a_rank_stuck_before_the_agreement_under_mpirun_cannot_outlive_a_stop_signal() {
    // As with in-process ranks (tests/it/stopping.rs): rank 1 hangs before
    // the ranks agree on the run; SIGUSR1 to mpirun reaches every rank.
    if mpi_or_skip("a_rank_stuck_before_the_agreement_under_mpirun_cannot_outlive_a_stop_signal") {
        assert_stuck_rank_ends(stuck(mpirun(2, &STUCK_RUN)), "USR1");
    }
}
