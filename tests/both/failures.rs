//! Failing ranks and wrong answers, through the `HIMENO_FAULT` test hook
//! (`RANK:ITERATION:KIND`, see `src/fault.rs`): a panic or an error on one
//! rank of four must end the whole job quickly with that rank's message; a
//! NaN on one rank must stop every rank with exit 1 and the iteration; a
//! perturbed answer must be reported INVALID with exit 1, never VALID.

use crate::common::*;
use std::process::{Command, Output};
use std::time::Duration;

/// A run that would take minutes without the fault: the test's limit
/// (`LIMIT`) is what proves that the job ended instead of hanging.
pub(crate) const LONG: [&str; 6] = ["--size", "XS", "--iterations", "1000000", "--threads", "1"];

/// Generous next to the seconds these jobs take when they abort.
const LIMIT: Duration = Duration::from_secs(60);

pub(crate) fn with_fault(mut cmd: Command, fault: &str) -> Output {
    cmd.env("HIMENO_FAULT", fault).env_remove("RUST_LOG");
    run_with_limit(cmd, LIMIT)
}

pub(crate) fn assert_aborted(o: &Output, message: &str) {
    let err = stderr(o);
    assert!(
        !o.status.success(),
        "a failing rank ended with success:\n{err}"
    );
    assert!(err.contains(message), "stderr lacks '{message}':\n{err}");
    assert!(
        o.stdout.is_empty(),
        "a failed job printed a report:\n{}",
        stdout(o)
    );
}

#[test]
fn a_panic_on_one_rank_ends_the_whole_job() {
    for launcher in launchers() {
        let o = with_fault(ranks(launcher, 4, &LONG), "2:3:panic");
        assert_aborted(&o, "injected panic on rank 2 at iteration 3");
        assert_aborted(&o, "rank 2 panicked; aborting all ranks");
    }
}

#[test]
fn an_error_on_one_rank_ends_the_whole_job() {
    for launcher in launchers() {
        let o = with_fault(ranks(launcher, 4, &LONG), "1:4:error");
        assert_aborted(
            &o,
            "himeno: rank 1: error: HIMENO_FAULT: injected error on rank 1 at iteration 4",
        );
        assert_eq!(o.status.code(), Some(2), "{launcher:?}: {}", stderr(&o));
    }
}

#[test]
fn nan_on_one_rank_stops_every_rank_with_exit_1() {
    for launcher in launchers() {
        let o = with_fault(ranks(launcher, 4, &LONG), "3:5:nan");
        assert_aborted(&o, "gosa is NaN at iteration 5");
        assert_eq!(o.status.code(), Some(1), "{launcher:?}: {}", stderr(&o));
        let said = stderr(&o).matches("verification FAILED").count();
        assert_eq!(said, 1, "rank 0 alone reports it:\n{}", stderr(&o));
    }
}

/// A grid and iteration count with a stored known answer.
pub(crate) const KNOWN: [&str; 4] = ["--grid", "9x10x11", "--iterations", "50"];

#[test]
fn a_perturbed_rank_fails_verification_on_four_ranks() {
    let mut args = KNOWN.to_vec();
    args.extend(["--format", "json"]);
    for launcher in launchers() {
        let o = with_fault(ranks(launcher, 4, &args), "3:20:perturb");
        assert_eq!(o.status.code(), Some(1), "{launcher:?}: {}", stderr(&o));
        let r: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("one JSON report");
        assert_eq!(r["verified"], false, "{r}");
        assert_eq!(r["verification"]["against"], "known-answer");
    }
}
