//! Failures of a single rank, through the `HIMENO_FAULT` test hook: a
//! panic or an error is exit 2 with its message, a NaN exit 1 with the
//! iteration, a perturbed answer INVALID (exit 1), never VALID, and a
//! malformed fault a usage error. One rank of several failing is
//! `tests/both/failures.rs`.

use crate::both::failures::{KNOWN, LONG, assert_aborted, with_fault};
use crate::common::*;

#[test]
fn a_panic_on_a_single_rank_is_exit_2() {
    let o = with_fault(himeno(&LONG), "0:2:panic");
    assert_aborted(&o, "injected panic on rank 0 at iteration 2");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn an_error_on_a_single_rank_is_exit_2() {
    let o = with_fault(himeno(&LONG), "0:2:error");
    assert_aborted(&o, "injected error on rank 0 at iteration 2");
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn nan_on_a_single_rank_is_exit_1_with_the_iteration() {
    let o = with_fault(himeno(&LONG), "0:1:nan");
    assert_aborted(&o, "gosa is NaN at iteration 1");
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn a_perturbed_answer_is_invalid_never_valid() {
    let file = temp_file("fail", "perturbed.jsonl");
    let mut args = KNOWN.to_vec();
    args.extend(["--output", file.to_str().unwrap()]);
    // Unperturbed, the same run is VALID: the fault is what fails it.
    let good = run(himeno(&args));
    assert!(good.status.success(), "{}", stderr(&good));
    assert!(stdout(&good).contains("Verification : VALID"));

    let o = with_fault(himeno(&args), "0:50:perturb");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("Verification : INVALID (known-answer"),
        "{text}"
    );
    assert!(!text.contains("Verification : VALID"), "{text}");
    assert!(stderr(&o).contains("verification FAILED"));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["verified"], true);
    assert_eq!(lines[1]["verified"], false);
    assert_eq!(lines[1]["complete"], true);
}

#[test]
fn a_malformed_fault_is_a_usage_error() {
    let o = with_fault(himeno(&LONG), "rank2:boom");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("HIMENO_FAULT='rank2:boom'"),
        "{}",
        stderr(&o)
    );
}
