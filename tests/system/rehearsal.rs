//! A fixed count with its own stored answer keeps the full check (slow in
//! an unoptimised build), and a wrong rehearsal on one rank
//! of four under `mpirun` stopping every rank with exit 1.

use crate::common::*;

#[test]
fn a_fixed_count_with_its_own_answer_keeps_the_full_check() {
    let r = json_ok(&run(himeno(&[
        "--size",
        "XS",
        "--iterations",
        "100",
        "--format",
        "json",
    ])));
    assert_eq!(r["verification"]["against"], "known-answer");
    // No answer for 2 rehearsal iterations: nothing to check it against.
    let r = json_ok(&run(himeno(&[
        "--size",
        "XS",
        "--seconds",
        "0.3",
        "--warmup",
        "2",
        "--format",
        "json",
    ])));
    assert_eq!(r["verified"], serde_json::Value::Null, "{r}");
}

#[test]
fn a_wrong_rehearsal_on_one_rank_stops_every_rank_with_exit_1() {
    if !MPI {
        return;
    }
    let mut cmd = mpirun(4, &["--size", "S", "--seconds", "30", "--threads", "1"]);
    cmd.env("HIMENO_FAULT", "3:r2:perturb");
    let o = run(cmd);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err.matches("the rehearsal's answer is wrong").count(),
        1,
        "{err}"
    );
    assert!(o.stdout.is_empty());
    // Unperturbed, the same job is VALID by its rehearsal.
    let r = json_ok(&run(mpirun(
        4,
        &[
            "--size",
            "S",
            "--seconds",
            "1",
            "--threads",
            "1",
            "--format",
            "json",
        ],
    )));
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["verification"]["against"], "rehearsal");
}
