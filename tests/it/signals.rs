//! Scheduler signals. A run is started long enough to be interrupted; once
//! its timed loop has begun (the `rehearsal done` log line of `-v`), it is
//! sent a stop signal. Every rank must stop after the current iteration,
//! rank 0 must print the report of the iterations done marked incomplete
//! (and append it to the results file), and the exit status must be
//! nonzero. Under Open MPI's `mpirun`, SIGUSR1 to `mpirun` is forwarded to
//! the ranks, and SIGTERM to every rank is what Slurm does at a time limit;
//! both are tested. (SIGTERM to `mpirun` itself makes Open MPI 4 kill the
//! ranks about a second later, so a slow iteration loses its report.)

use crate::both::signals::*;
use crate::common::signals::*;
use crate::common::*;

#[test]
fn sigterm_twice_stops_a_single_rank_with_an_incomplete_report() {
    let file = temp_file("sig", "term.jsonl");
    let mut args = LONG.to_vec();
    args.extend(["3", "--format", "json", "--output", file.to_str().unwrap()]);
    let run = Running::start(himeno(&args));
    run.wait_for("rehearsal done");
    // Batch systems may deliver the signal twice (scheduler and launcher):
    // the second must not cost the report.
    kill("TERM", run.child.id());
    kill("TERM", run.child.id());
    assert_incomplete_json(&run.finish(), &file);
}

#[test]
fn a_signal_during_the_rehearsal_ends_cleanly_without_a_report() {
    let file = temp_file("sig", "rehearsal.jsonl");
    let mut args = LONG.to_vec();
    // A thousand rehearsal iterations take long enough to be interrupted.
    args.extend([
        "1000",
        "--format",
        "json",
        "--output",
        file.to_str().unwrap(),
    ]);
    let e = stop_after(himeno(&args), "memory preflight passed", "TERM");
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    assert!(e.stdout.is_empty(), "{}", e.stdout);
    assert!(e.stderr.contains("during the rehearsal"), "{}", e.stderr);
    assert!(!file.exists(), "nothing was measured, nothing is recorded");
}

#[test]
fn a_run_stopped_early_skips_the_quick_stream() {
    let mut args = LONG.to_vec();
    args.extend(["3", "--stream", "quick", "--format", "json"]);
    let e = stop_after(himeno(&args), "rehearsal done", "TERM");
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    let r: serde_json::Value =
        serde_json::from_str(&e.stdout).unwrap_or_else(|err| panic!("{err}:\n{}", e.stdout));
    assert_eq!(r["complete"], false, "{r}");
    // The measurement would come after the loop: a stopped run leaves it
    // out rather than spend its grace on it.
    assert!(r["stream_triad_gbytes_per_s"].is_null(), "{r}");
    assert!(!e.stderr.contains("quick stream"), "{}", e.stderr);
}

#[test]
fn sigterm_stops_every_in_process_rank() {
    four_ranks_stop_on(Launcher::Local, "TERM");
}
