//! In-process ranks (`--local-ranks`) on their own: verification against
//! the reference run, and rank counts that are usage errors. The runs of
//! every process grid, on in-process ranks here and under `mpirun` in the
//! system tier, are `tests/both/ranks.rs`.

use crate::both::ranks::report;
use crate::common::*;

#[test]
fn local_ranks_verify_against_the_reference_run() {
    let r = report(
        Launcher::Local,
        3,
        "1x3x1",
        &["--grid", "13x17x11", "--iterations", "4", "--verify"],
    );
    assert_eq!(r["verification"]["against"], "reference");
    assert_eq!(r["verified"], true, "{}", r["verification"]["detail"]);
    assert_eq!(r["launch"], "threads");
    assert_eq!(r["provenance"]["mpi_library"], serde_json::Value::Null);
}

#[test]
fn bad_local_rank_counts_are_usage_errors() {
    for n in ["0", "1025", "-2", "many"] {
        let o = run(himeno(&[
            "--local-ranks",
            n,
            "--size",
            "XS",
            "--iterations",
            "1",
        ]));
        assert_eq!(o.status.code(), Some(2), "{n}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{n}: {}", stderr(&o));
        assert!(stdout(&o).is_empty());
    }
}
