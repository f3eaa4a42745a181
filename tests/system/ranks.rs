//! Ranks under a real launcher that a rank count or build refuses: a build
//! without MPI started as several ranks, and in-process ranks asked of a
//! process that is one of several MPI ranks.

use crate::both::ranks::report;
use crate::common::*;

#[test]
fn a_build_without_mpi_refuses_to_run_as_many_ranks() {
    if MPI
        || std::process::Command::new("mpirun")
            .arg("--version")
            .output()
            .is_err()
    {
        return;
    }
    let o = run(mpirun(2, &["--size", "XS", "--iterations", "1"]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no MPI support"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
}

#[test]
fn local_ranks_under_several_mpi_ranks_are_a_usage_error() {
    // One process of several MPI ranks cannot also start threads as ranks.
    if mpi_or_skip("local_ranks_under_several_mpi_ranks_are_a_usage_error") {
        let o = run(mpirun(
            2,
            &["--local-ranks", "2", "--size", "XS", "--iterations", "1"],
        ));
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("--local-ranks"), "{}", stderr(&o));
        assert_eq!(himeno_lines(&o).len(), 1, "{}", stderr(&o));
    }
}

#[test]
fn size_s_on_four_ranks_matches_the_known_answer_and_one_rank() {
    let one = json_ok(&run(himeno(&[
        "--size",
        "S",
        "--iterations",
        "100",
        "--format",
        "json",
    ])));
    for launcher in every_launcher() {
        let r = report(
            launcher,
            4,
            "1x2x2",
            &["--size", "S", "--iterations", "100"],
        );
        assert_eq!(r["verification"]["against"], "known-answer");
        assert_eq!(r["verified"], true, "{}", r["verification"]["detail"]);
        assert_eq!(r["p_fingerprint"], one["p_fingerprint"], "{launcher:?}");
    }
}
