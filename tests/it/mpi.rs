//! Multi-rank runs under a real `mpirun`: decomposition invariance of the
//! answer, the halo self-test, and process-grid errors. Without the `mpi`
//! feature, a binary started as several ranks must refuse to run.

use crate::common::*;

/// Process grids over 1..8 ranks that split each axis, alone and together.
const GRIDS: [(usize, &str); 12] = [
    (1, "1x1x1"),
    (2, "2x1x1"),
    (2, "1x2x1"),
    (2, "1x1x2"),
    (3, "3x1x1"),
    (3, "1x1x3"),
    (4, "2x2x1"),
    (4, "1x2x2"),
    (4, "2x1x2"),
    (6, "3x2x1"),
    (6, "1x2x3"),
    (8, "2x2x2"),
];

fn report(np: usize, procs: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--procs", procs, "--threads", "1", "--format", "json"];
    args.extend_from_slice(extra);
    json_ok(&run(mpirun(np, &args)))
}

#[test]
fn every_process_grid_gives_the_single_rank_answer() {
    if !MPI {
        return;
    }
    // An uneven grid, so blocks differ in size along every axis.
    let base = ["--grid", "23x19x29", "--iterations", "12"];
    let reference = json_ok(&run(himeno(&[
        "--grid",
        "23x19x29",
        "--iterations",
        "12",
        "--format",
        "json",
        "--verify",
    ])));
    assert_eq!(reference["verified"], true);
    let gosa0 = reference["gosa"].as_f64().unwrap();
    for (n, (np, procs)) in GRIDS.into_iter().enumerate() {
        // Half the grids with streaming stores, whose rows carry their
        // ghost ends: the exchange must still find them replaced.
        let stores = ["--stores", ["streaming", "cached"][n % 2]];
        let r = report(np, procs, &[&base[..], &stores[..]].concat());
        assert_eq!(r["ranks"], np);
        assert_eq!(r["p_fingerprint"], reference["p_fingerprint"], "{procs}");
        let gosa = r["gosa"].as_f64().unwrap();
        assert!(
            ((gosa - gosa0) / gosa0).abs() <= 1e-9,
            "{procs}: {gosa} vs {gosa0}"
        );
        assert_eq!(r["per_rank"].as_array().unwrap().len(), np);
    }
}

#[test]
fn size_s_on_four_ranks_matches_the_known_answer() {
    if !MPI {
        return;
    }
    let o = run(mpirun(
        4,
        &[
            "--size",
            "S",
            "--iterations",
            "100",
            "--threads",
            "1",
            "--format",
            "json",
        ],
    ));
    let r = json_ok(&o);
    assert_eq!(r["verification"]["against"], "known-answer");
    assert_eq!(r["verified"], true, "{}", r["verification"]["detail"]);
}

#[test]
fn halo_self_test_passes_on_every_process_grid() {
    if !MPI {
        return;
    }
    for (n, (np, procs)) in GRIDS.into_iter().enumerate() {
        let o = run(mpirun(
            np,
            &["selftest", "--grid", "9x8x7", "--procs", procs],
        ));
        assert!(o.status.success(), "{procs}: {}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains("halo self-test passed"), "{procs}");
        // Deep halos (temporal blocking): the same schedule fills every
        // ghost layer, edges and corners included. Blocks of 12x11x10
        // interior points over 3 ranks are at least 3 thick.
        let depth = ["2", "3"][n % 2];
        let o = run(mpirun(
            np,
            &[
                "selftest",
                "--grid",
                "14x13x12",
                "--procs",
                procs,
                "--temporal",
                depth,
            ],
        ));
        assert!(
            o.status.success(),
            "{procs} depth {depth}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        assert!(stdout(&o).contains("halo self-test passed"), "{procs}");
    }
}

#[test]
fn wrong_process_grid_is_a_usage_error_on_every_rank() {
    if !MPI {
        return;
    }
    for procs in ["2x2x1", "4x1x1"] {
        let o = run(mpirun(
            2,
            &["--size", "XS", "--iterations", "1", "--procs", procs],
        ));
        assert_eq!(o.status.code(), Some(2), "{procs}: {}", stderr(&o));
        assert!(stderr(&o).contains("process grid"), "{}", stderr(&o));
        assert!(stdout(&o).is_empty());
    }
    // A split leaving ranks without interior points.
    let o = run(mpirun(
        4,
        &["--grid", "4x40x40", "--iterations", "1", "--procs", "4x1x1"],
    ));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no interior point"), "{}", stderr(&o));
}

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
fn unbound_ranks_share_the_node_by_default() {
    if !MPI {
        return;
    }
    // Oversubscribed, Open MPI binds nothing: every rank may use every CPU,
    // so the default thread count must split them instead of multiplying.
    let r = json_ok(&run(mpirun(
        4,
        &["--size", "XS", "--iterations", "2", "--format", "json"],
    )));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = r["threads_per_rank"].as_u64().unwrap() as usize;
    assert!(threads >= 1);
    assert!(
        threads * 4 <= cpus.max(4),
        "{threads} threads x 4 ranks on {cpus} CPUs"
    );
}

#[test]
fn unbound_ranks_pin_their_threads_to_different_cpus() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if !MPI || cpus < 2 {
        return;
    }
    // The launcher binds nothing: every rank may use every CPU, so --bind
    // cores must place the ranks' threads apart (by node-local rank), not
    // all on the first CPU.
    let mut cmd = mpirun(
        2,
        &[
            "--size",
            "XS",
            "--iterations",
            "2",
            "--threads",
            "1",
            "--bind",
            "cores",
            "--format",
            "json",
        ],
    );
    cmd.env("OMPI_MCA_hwloc_base_binding_policy", "none");
    let o = run(cmd);
    let r = json_ok(&o);
    let pinned: Vec<String> = r["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let p = x["placement"].as_str().unwrap();
            p.split("threads on cpus ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(pinned.len(), 2);
    assert_ne!(pinned[0], pinned[1], "{pinned:?}");
}
