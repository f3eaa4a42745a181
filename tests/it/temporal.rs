//! Temporal blocking (`--temporal T`): T sweeps between two halo exchanges
//! must give bitwise the classic sweep's field and the gosa of every
//! iteration bit for bit, for every T, grid, thread count, tile height and
//! process grid, also when the iteration count is not a multiple of T and
//! when a stop signal arrives in the middle of a block. The gosa of each
//! iteration is read from the `-vv` log (`iteration=N gosa=X`).

use crate::common::*;
use crate::signals::{Running, kill};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

/// The gosa of every iteration in a `-vv` log: every rank logs the same
/// reduced values, which must agree.
fn gosa_trace(stderr: &str) -> BTreeMap<u64, u64> {
    let mut trace = BTreeMap::new();
    for line in stderr.lines().filter(|l| l.contains(" gosa iteration=")) {
        let field = |name: &str| {
            let at = line.find(&format!(" {name}=")).expect("field") + name.len() + 2;
            line[at..].split_whitespace().next().unwrap().to_string()
        };
        let it: u64 = field("iteration").parse().unwrap();
        let gosa: f64 = field("gosa").parse().unwrap();
        let old = trace.insert(it, gosa.to_bits());
        assert!(
            old.is_none_or(|o| o == gosa.to_bits()),
            "ranks disagree on the gosa of iteration {it}"
        );
    }
    trace
}

/// Runs `cmd` (a benchmark run with `-vv` and a JSON report) and returns
/// the report and the gosa trace.
fn traced(mut cmd: Command) -> (serde_json::Value, BTreeMap<u64, u64>) {
    cmd.env("NO_COLOR", "1").env_remove("RUST_LOG");
    let o = run(cmd);
    let r = json_ok(&o);
    (r, gosa_trace(&stderr(&o)))
}

fn args<'a>(grid: &'a str, iterations: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--grid",
        grid,
        "--iterations",
        iterations,
        "--warmup",
        "2",
        "--format",
        "json",
        "-vv",
    ];
    v.extend_from_slice(extra);
    v
}

#[test]
fn one_rank_matches_the_classic_sweep_for_every_depth_and_thread_count() {
    for (grid, iterations) in [("23x19x29", "7"), ("9x10x11", "11"), ("5x4x70", "6")] {
        let (want, want_trace) = traced(himeno(&args(grid, iterations, &["--threads", "1"])));
        assert_eq!(want_trace.len(), iterations.parse::<usize>().unwrap());
        for temporal in ["1", "2", "3", "4", "5"] {
            for threads in ["1", "2", "3"] {
                // Tiles of one row for some runs: the most overlap of the
                // redundant rows between neighbouring tiles.
                let tile = if threads == "2" { "1" } else { "64" };
                let mut extra = vec!["--temporal", temporal, "--threads", threads];
                // T = 1 has no wavefront, whose tiles --tile-rows sets.
                if temporal != "1" {
                    extra.extend(["--tile-rows", tile]);
                }
                let (r, trace) = traced(himeno(&args(grid, iterations, &extra)));
                let case = format!("{grid} T={temporal} threads={threads}");
                assert_eq!(r["p_fingerprint"], want["p_fingerprint"], "{case}");
                assert_eq!(r["gosa"], want["gosa"], "{case}");
                assert_eq!(trace, want_trace, "{case}: per-iteration gosa");
                assert_eq!(r["temporal"], temporal.parse::<u64>().unwrap());
            }
        }
    }
}

#[test]
fn every_process_grid_matches_one_rank_with_fewer_messages() {
    // 21x17x27 interior points: blocks of 5 to 14 points, at least 5 thick,
    // so T up to 5 fits every grid; 12 iterations are no multiple of 5.
    let (want, want_trace) = traced(himeno(&args("23x19x29", "12", &["--threads", "1"])));
    for (n, (launcher, (np, procs))) in launchers()
        .into_iter()
        .flat_map(|l| PROCESS_GRIDS.map(|g| (l, g)))
        .enumerate()
    {
        let temporal = ["2", "3", "4", "5"][n % 4];
        let stores = ["streaming", "cached"][n % 2];
        let extra = [
            "--procs",
            procs,
            "--threads",
            "1",
            "--temporal",
            temporal,
            "--stores",
            stores,
            "--tile-rows",
            "3",
        ];
        let (classic, _) = traced(ranks(
            launcher,
            np,
            &args("23x19x29", "12", &["--procs", procs, "--threads", "1"]),
        ));
        let (r, trace) = traced(ranks(launcher, np, &args("23x19x29", "12", &extra)));
        let case = format!("{launcher:?} {procs} T={temporal}");
        assert_eq!(r["p_fingerprint"], want["p_fingerprint"], "{case}");
        assert_eq!(trace, want_trace, "{case}: per-iteration gosa");
        let t: f64 = temporal.parse().unwrap();
        let per = |r: &serde_json::Value, key: &str| r[key].as_f64().unwrap();
        assert_eq!(
            per(&r, "halo_messages_per_iteration"),
            per(&classic, "halo_messages_per_iteration") / t,
            "{case}"
        );
        if np > 1 {
            assert!(per(&classic, "halo_messages_per_iteration") > 0.0);
        }
    }
}

#[test]
fn size_s_on_four_ranks_with_depth_four_matches_the_known_answer() {
    for launcher in launchers() {
        let r = json_ok(&run(ranks(
            launcher,
            4,
            &[
                "--size",
                "S",
                "--iterations",
                "100",
                "--threads",
                "1",
                "--temporal",
                "4",
                "--format",
                "json",
            ],
        )));
        assert_eq!(r["verification"]["against"], "known-answer", "{launcher:?}");
        assert_eq!(
            r["verified"], true,
            "{launcher:?}: {}",
            r["verification"]["detail"]
        );
    }
}

#[test]
fn reports_name_the_mode_and_the_halo_traffic() {
    let base = ["--size", "XS", "--iterations", "6", "--temporal", "3"];
    let text = stdout_ok(&run(himeno(&base)));
    assert!(
        text.contains("Temporal blocking: 3 sweeps per halo exchange"),
        "{text}"
    );
    assert!(
        text.contains("not comparable with classic Himeno scores"),
        "{text}"
    );
    let csv = stdout_ok(&run(himeno(&[&base[..], &["--format", "csv"]].concat())));
    let lines: Vec<&str> = csv.lines().collect();
    let col = lines[0]
        .split(',')
        .position(|c| c == "temporal")
        .expect("a temporal column");
    assert_eq!(lines[1].split(',').nth(col), Some("3"));
    let classic = stdout_ok(&run(himeno(&["--size", "XS", "--iterations", "2"])));
    assert!(!classic.contains("Temporal blocking"), "{classic}");
    // Each rank's CPU time share and huge-page coverage, which tell a
    // machine that was busy or short of huge pages from a slower sweep.
    let json = json_ok(&run(himeno(&[&base[..], &["--format", "json"]].concat())));
    let rank = &json["per_rank"][0];
    assert!(rank["cpu_share"].as_f64().unwrap() > 0.0, "{rank}");
    assert!(rank.get("huge_pages").is_some(), "{rank}");
}

#[test]
fn a_nan_is_caught_in_the_block_it_appears_in() {
    // The fault for iteration 5 strikes before the block of iterations
    // 4..6; the NaN in the boundary plane reaches gosa at once.
    let mut cmd = himeno(&[
        "--size",
        "XS",
        "--iterations",
        "9",
        "--temporal",
        "3",
        "--threads",
        "1",
    ]);
    cmd.env("HIMENO_FAULT", "0:5:nan").env_remove("RUST_LOG");
    let o = run(cmd);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("at iteration 4"), "{}", stderr(&o));
}

#[test]
fn a_stop_signal_ends_the_run_after_a_whole_block() {
    let temporal = 4u64;
    let job = Running::start(himeno(&[
        "--size",
        "S",
        "--iterations",
        "1000000",
        "--threads",
        "1",
        "--temporal",
        "4",
        "--format",
        "json",
        "-v",
    ]));
    job.wait_for("rehearsal done");
    // Some timed blocks first, so that the signal lands inside one.
    std::thread::sleep(Duration::from_millis(300));
    kill("TERM", job.child.id());
    let ended = job.finish();
    assert_eq!(ended.status.code(), Some(2), "{}", ended.stderr);
    let r: serde_json::Value = serde_json::from_str(&ended.stdout).expect("a JSON report");
    assert_eq!(r["complete"], false);
    let done = r["iterations"].as_u64().unwrap();
    assert!(
        done > 0 && done.is_multiple_of(temporal),
        "{done} iterations"
    );
    // Bitwise the classic answer after as many iterations.
    let classic = json_ok(&run(himeno(&[
        "--size",
        "S",
        "--iterations",
        &done.to_string(),
        "--threads",
        "1",
        "--format",
        "json",
    ])));
    assert_eq!(r["p_fingerprint"], classic["p_fingerprint"]);
    assert_eq!(r["gosa"], classic["gosa"]);
}
