//! Multi-rank runs, as in-process ranks (`--local-ranks`, every build) and
//! under a real `mpirun` (with the mpi feature): decomposition invariance
//! of the answer, the halo self-test, process-grid errors and placement.
//! Without the `mpi` feature, a binary started as several ranks must
//! refuse to run.

use crate::common::*;
use himeno::machine::threads::Bind;
use himeno::report::Record;

/// The JSON report of `np` ranks started by `launcher` on `procs`, one
/// sweep thread each unless `extra` says otherwise.
pub(crate) fn report(
    launcher: Launcher,
    np: usize,
    procs: &str,
    extra: &[&str],
) -> serde_json::Value {
    let mut args = vec!["--procs", procs, "--format", "json"];
    args.extend_from_slice(extra);
    if !extra.contains(&"--threads") {
        args.extend(["--threads", "1"]);
    }
    json_ok(&run(ranks(launcher, np, &args)))
}

#[test]
fn every_process_grid_gives_the_single_rank_answer() {
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
    for launcher in launchers() {
        for (n, (np, procs)) in PROCESS_GRIDS.into_iter().enumerate() {
            // Half the grids with streaming stores, whose rows carry their
            // ghost ends: the exchange must still find them replaced; in
            // turn one and two sweep threads per rank.
            let stores = ["--stores", ["streaming", "cached"][n % 2]];
            let threads = ["--threads", ["1", "2"][n / 2 % 2]];
            let r = report(
                launcher,
                np,
                procs,
                &[&base[..], &stores[..], &threads[..]].concat(),
            );
            assert_eq!(r["ranks"], np);
            assert_eq!(
                r["p_fingerprint"], reference["p_fingerprint"],
                "{launcher:?} {procs}"
            );
            let gosa = r["gosa"].as_f64().unwrap();
            assert!(
                gosa_agrees(gosa, gosa0),
                "{launcher:?} {procs}: {gosa} vs {gosa0}"
            );
            assert_eq!(r["per_rank"].as_array().unwrap().len(), np);
            let launch = match launcher {
                Launcher::Local => "threads",
                Launcher::Mpirun => "mpi",
            };
            assert_eq!(r["launch"], launch, "{launcher:?} {procs}");
        }
    }
}

#[test]
fn halo_self_test_passes_on_every_process_grid() {
    for launcher in launchers() {
        for (n, (np, procs)) in PROCESS_GRIDS.into_iter().enumerate() {
            let o = run(ranks(
                launcher,
                np,
                &["selftest", "--grid", "9x8x7", "--procs", procs],
            ));
            assert!(
                o.status.success(),
                "{launcher:?} {procs}: {}{}",
                stdout(&o),
                stderr(&o)
            );
            assert!(stdout(&o).contains("halo self-test passed"), "{procs}");
            // Deep halos (temporal blocking): the same schedule fills every
            // ghost layer, edges and corners included. Blocks of 12x11x10
            // interior points over 3 ranks are at least 3 thick.
            let depth = ["2", "3"][n % 2];
            let o = run(ranks(
                launcher,
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
                "{launcher:?} {procs} depth {depth}: {}{}",
                stdout(&o),
                stderr(&o)
            );
            assert!(stdout(&o).contains("halo self-test passed"), "{procs}");
        }
    }
}

#[test]
fn wrong_process_grid_is_a_usage_error_on_every_rank() {
    for launcher in launchers() {
        for procs in ["2x2x1", "4x1x1"] {
            let o = run(ranks(
                launcher,
                2,
                &["--size", "XS", "--iterations", "1", "--procs", procs],
            ));
            assert_eq!(o.status.code(), Some(2), "{procs}: {}", stderr(&o));
            assert!(stderr(&o).contains("process grid"), "{}", stderr(&o));
            assert_eq!(himeno_lines(&o).len(), 1, "{}", stderr(&o));
            assert!(stdout(&o).is_empty());
        }
    }
    if !mpi_or_skip("wrong_process_grid_is_a_usage_error_on_every_rank (mpirun part)") {
        return;
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
fn unbound_ranks_share_the_node_by_default() {
    // Oversubscribed, Open MPI binds nothing, and in-process ranks share
    // the process's CPUs: every rank may use every CPU, so the default
    // thread count must split them instead of multiplying.
    for launcher in launchers() {
        let r = json_ok(&run(ranks(
            launcher,
            4,
            &["--size", "XS", "--iterations", "2", "--format", "json"],
        )));
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = r["threads_per_rank"].as_u64().unwrap() as usize;
        assert!(threads >= 1);
        assert!(
            threads * 4 <= cpus.max(4),
            "{launcher:?}: {threads} threads x 4 ranks on {cpus} CPUs"
        );
    }
}

#[test]
fn pinned_ranks_take_different_cpus() {
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    for launcher in launchers() {
        // In-process ranks share the process's CPUs; under mpirun the
        // launcher binds nothing here, so every rank may use every CPU:
        // --bind cores must place the ranks' threads apart (by node-local
        // rank), not all on the first CPU.
        let mut cmd = ranks(
            launcher,
            2,
            &[
                "--size",
                "XS",
                "--iterations",
                "1",
                "--threads",
                "1",
                "--bind",
                "cores",
                "--format",
                "json",
            ],
        );
        cmd.env("OMPI_MCA_hwloc_base_binding_policy", "none");
        let r = json_ok(&run(cmd));
        let rec: Record = serde_json::from_value(r.clone()).expect("a run record");
        let cpus: Vec<Vec<Option<usize>>> = rec
            .per_rank
            .iter()
            .map(|p| {
                let c = p.placement.cpus.clone().expect("a CPU rank's threads");
                assert_eq!(c.bind, Bind::Cores, "{launcher:?}: {r}");
                c.cpus
            })
            .collect();
        if online >= 2 {
            assert_ne!(cpus[0], cpus[1], "{launcher:?}: {r}");
        }
    }
}
