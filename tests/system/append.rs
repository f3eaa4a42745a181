//! A full disk under `mpirun` ends the job with exit 2.

use crate::common::*;

#[test]
fn a_full_disk_under_mpirun_ends_the_job_with_exit_2() {
    if !mpi_or_skip("a_full_disk_under_mpirun_ends_the_job_with_exit_2") {
        return;
    }
    let o = run(mpirun(
        2,
        &[
            "--grid",
            "9x9x9",
            "--iterations",
            "2",
            "--format",
            "json",
            "--output",
            "/dev/full",
        ],
    ));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("the report");
    assert_eq!(r["ranks"], 2);
    assert!(stderr(&o).contains("No space left"), "{}", stderr(&o));
}
