//! Temporal blocking (`--temporal T`) on every process grid and on four
//! ranks of size S, on this tier's launcher, and the traced runs the
//! temporal tests of both tiers compare.

use crate::common::*;
use std::collections::BTreeMap;
use std::process::Command;

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

/// Fields far beyond the last-level cache (here a stated 1 MiB one) are
/// calibrated on samples of each block, each turn scaled to the whole
/// block: the record gives the scale of each trial that sampled (the
/// classic sweep a quarter of its rows, a wavefront the first three tiles
/// of each band, unless the first is more than twice the others), the
/// report says so, and the answer is the classic one
/// bit for bit, on one rank and on two that split i.
#[test]
fn auto_calibrates_large_blocks_on_samples() {
    for launcher in launchers() {
        for (np, procs) in [(1, "1x1x1"), (2, "2x1x1")] {
            let base = [
                "--grid",
                "134x66x34",
                "--iterations",
                "8",
                "--threads",
                "1",
                "--procs",
                procs,
            ];
            let small_cache = |args: &[&str]| {
                let mut cmd = ranks(launcher, np, args);
                cmd.env("HIMENO_LLC_BYTES", "1M");
                run(cmd)
            };
            let json =
                |args: &[&str]| json_ok(&small_cache(&[args, &["--format", "json"]].concat()));
            let classic = json(&base);
            // Tiles of 4 rows: three tiles of every T up to 16 fit half a
            // band of 64 rows; beyond T = 8 the first tile (T rows) is more
            // than twice the others, and the band is swept whole.
            let auto = [&base[..], &["--temporal", "auto", "--tile-rows", "4"]].concat();
            let r = json(&auto);
            let choice = &r["temporal_choice"];
            let case = format!("{launcher:?} {procs}: {choice}");
            assert_eq!(r["p_fingerprint"], classic["p_fingerprint"], "{case}");
            assert_eq!(r["gosa"], classic["gosa"], "{case}");
            let trials = choice["trials"].as_array().unwrap();
            assert!(trials.len() >= 3 && trial_sweeps(choice)[0] == 1, "{case}");
            let scale = |t: &serde_json::Value| t["sample_scale"].as_f64();
            let classic_scale = scale(&trials[0]).expect("the classic sweep sampled");
            assert!((3.9..=4.0).contains(&classic_scale), "{case}");
            for t in &trials[1..] {
                let deep = t["sweeps"].as_u64().unwrap() > 8;
                assert_eq!(scale(t).is_none(), deep, "{case}");
                assert!(deep || scale(t).unwrap() > 2.0, "{case}");
            }
            let text = stdout_ok(&small_cache(&auto));
            assert!(
                text.contains("(timed on samples of the blocks, scaled to the whole)"),
                "{text}"
            );
        }
    }
}

/// Runs `cmd` (a benchmark run with `-vv` and a JSON report) and returns
/// the report and the gosa trace.
pub(crate) fn traced(mut cmd: Command) -> (serde_json::Value, BTreeMap<u64, u64>) {
    cmd.env("NO_COLOR", "1").env_remove("RUST_LOG");
    let o = run(cmd);
    let r = json_ok(&o);
    (r, gosa_trace(&stderr(&o)))
}

pub(crate) fn args<'a>(grid: &'a str, iterations: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
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

/// The gosa of every iteration in a `-vv` log: every rank logs the same
/// reduced values, which must agree.
pub(crate) fn gosa_trace(stderr: &str) -> BTreeMap<u64, u64> {
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
