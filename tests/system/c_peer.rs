//! Cross-check against an independent C implementation written the way the
//! original benchmark is (`tests/c_peer/himeno_peer.c`: separate arrays,
//! copy-back, float arithmetic, double gosa), compiled without FP
//! contraction. Its field must be bitwise equal to the solver's (same
//! fingerprint) and its gosa equal within the summation-order tolerance.

use crate::common::*;
use std::path::PathBuf;
use std::process::Command;

/// Compiles the C peer once per test run into the target directory.
fn peer() -> PathBuf {
    compile_c(
        "tests/c_peer/himeno_peer.c",
        "peer",
        &["-O2", "-ffp-contract=off", "-std=c99"],
    )
}

#[test]
fn the_solver_matches_an_independent_c_implementation() {
    let exe = peer();
    for (grid, iterations, procs) in [
        ([32, 32, 64], 60, "2x1x2"),
        ([17, 23, 41], 25, "1x2x2"),
        ([5, 4, 70], 40, "1x1x4"),
    ] {
        let o = Command::new(&exe)
            .args(grid.iter().map(|n| n.to_string()))
            .arg(iterations.to_string())
            .output()
            .expect("the peer runs");
        assert!(o.status.success());
        let line = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let (gosa, fingerprint) = line.split_once(' ').expect("gosa and fingerprint");
        let gosa: f64 = gosa.parse().unwrap();

        let g = format!("{}x{}x{}", grid[0], grid[1], grid[2]);
        let it = iterations.to_string();
        let args = [
            "--grid",
            &g,
            "--iterations",
            &it,
            "--threads",
            "1",
            "--format",
            "json",
        ];
        let mut runs = vec![json_ok(&run(himeno(&args)))];
        if MPI {
            let mut with_procs = args.to_vec();
            with_procs.extend(["--procs", procs]);
            runs.push(json_ok(&run(mpirun(4, &with_procs))));
        }
        for r in runs {
            assert_eq!(r["p_fingerprint"], fingerprint, "{g} procs {}", r["procs"]);
            let ours = r["gosa"].as_f64().unwrap();
            assert!(gosa_agrees(ours, gosa), "{g}: {ours} vs C {gosa}");
        }
    }
    let _ = std::fs::remove_file(exe);
}
