//! The GPU backend across ranks under `mpirun`: a GPU failure fails every
//! rank together, and `--overlap` on two ranks is bitwise the CPU's (these
//! skip, saying why, where there is no GPU).

use crate::both::gpu::no_gpu;
use crate::common::*;

#[test]
fn gpu_backend_fails_together_on_every_rank() {
    if !mpi_or_skip("gpu_backend_fails_together_on_every_rank") {
        eprintln!("SKIPPED: this build has no MPI");
        return;
    }
    if no_gpu().is_none() {
        eprintln!("SKIPPED the no-GPU error check on 2 ranks: a GPU is present");
        return;
    }
    let o = run(mpirun(
        2,
        &["--backend", "gpu", "--size", "XS", "--iterations", "1"],
    ));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let said = stderr(&o).matches("himeno: error").count();
    assert_eq!(said, 1, "the error must be printed once:\n{}", stderr(&o));
}

#[test]
fn overlap_is_bitwise_equal_on_two_ranks() {
    if !mpi_or_skip("overlap_is_bitwise_equal_on_two_ranks") {
        eprintln!("SKIPPED: this build has no MPI");
        return;
    }
    if let Some(why) = no_gpu() {
        eprintln!("SKIPPED overlap check: {why}");
        return;
    }
    let mut seen = Vec::new();
    for (procs, overlap) in [("2x1x1", false), ("2x1x1", true), ("1x1x2", true)] {
        let mut args = vec![
            "--backend",
            "gpu",
            "--grid",
            "33x35x37",
            "--iterations",
            "5",
            "--procs",
            procs,
            "--verify",
            "--format",
            "json",
        ];
        if overlap {
            args.push("--overlap");
        }
        let r = json_ok(&run(mpirun(2, &args)));
        assert_eq!(r["verified"], true, "{procs} overlap {overlap}: {r}");
        seen.push(r["p_fingerprint"].clone());
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
}
