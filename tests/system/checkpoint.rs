//! Restarts from a checkpoint are bitwise the uninterrupted run on every
//! process grid, with in-process ranks and under `mpirun` (long: every grid
//! is stopped and restarted).
//!
//! In-process ranks take every grid with every depth and thread count;
//! under `mpirun` every grid runs once, the depths and thread counts taking
//! turns over the grids, so each pairing still meets several rank counts
//! while each start of the launcher (the slow part) is paid a quarter as
//! often.

use crate::both::checkpoint::*;
use crate::common::*;
use serde_json::Value;

#[test]
fn restarts_are_bitwise_the_uninterrupted_run_with_in_process_ranks() {
    let want = reference();
    for (np, procs) in PROCESS_GRIDS {
        for (t, threads) in SETTINGS {
            stop_and_restart(Launcher::Local, np, procs, t, threads, &want);
        }
    }
}

#[test]
fn restarts_are_bitwise_the_uninterrupted_run_under_mpirun() {
    if !mpi_or_skip("restarts_are_bitwise_the_uninterrupted_run_under_mpirun") {
        return;
    }
    let want = reference();
    for (i, (np, procs)) in PROCESS_GRIDS.into_iter().enumerate() {
        let (t, threads) = SETTINGS[i % SETTINGS.len()];
        stop_and_restart(Launcher::Mpirun, np, procs, t, threads, &want);
    }
}

/// The depths (T) and thread counts the restarts run with: a depth that
/// divides no block boundary at the stop (3) beside the classic sweep, on
/// one and two threads.
const SETTINGS: [(usize, usize); 4] = [(1, 1), (3, 2), (1, 2), (3, 1)];

/// Runs the stopped job and its restart on `np` ranks of `launcher` with
/// process grid `procs`, and checks the restart's answer against `want`.
fn stop_and_restart(
    launcher: Launcher,
    np: usize,
    procs: &str,
    t: usize,
    threads: usize,
    want: &(String, f64),
) {
    let case = format!("{launcher:?} {procs} T={t} threads={threads}");
    let dir = fresh_dir(&format!("{launcher:?}-{procs}-{t}-{threads}"));
    let a = args(procs, t, threads, &dir);
    let mut stopped = command(launcher, np, &a, &[]);
    stopped.env("HIMENO_FAULT", format!("0:{STOP_BEFORE}:term"));
    let o = run(stopped);
    assert_eq!(o.status.code(), Some(2), "{case}: {}", stderr(&o));
    let first: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{case}: {e}"));
    // The signal comes before iteration STOP_BEFORE: the block holding it
    // ends the run.
    let at = STOP_BEFORE.div_ceil(t as u64) * t as u64;
    assert_eq!(first["complete"], false, "{case}");
    assert_eq!(first["iterations"], at, "{case}");
    assert_eq!(first["checkpoints"]["written"], 1, "{case}: {first}");
    let manifest = dir.join(format!("ckpt-{at:010}")).join("manifest.json");
    assert!(manifest.is_file(), "{case}: no {}", manifest.display());

    let o = run(command(launcher, np, &a, &["--restart", "latest"]));
    let r = json_ok(&o);
    assert_eq!(&answer(&r), want, "{case}: the restart's answer");
    assert_eq!(r["complete"], true, "{case}");
    assert_eq!(r["iterations"], PLANNED, "{case}");
    assert_eq!(r["restarted_from"]["iteration"], at, "{case}");
    assert_eq!(
        r["restarted_from"]["manifest"],
        manifest.to_str().unwrap(),
        "{case}"
    );
    let segments: Vec<(u64, u64)> = r["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["from"].as_u64().unwrap(), s["to"].as_u64().unwrap()))
        .collect();
    assert_eq!(segments, [(0, at), (at, PLANNED)], "{case}");
    // The rates are those of the timed segment alone.
    let wall = r["wall_s"].as_f64().unwrap();
    let points = 11.0f64.powi(3);
    let mflops = 34.0 * points * (PLANNED - at) as f64 / wall.max(1e-9) / 1e6;
    let got = r["mflops"].as_f64().unwrap();
    assert!(
        (got - mflops).abs() <= 1e-9 * mflops,
        "{case}: {got} vs {mflops}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
