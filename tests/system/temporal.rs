//! Temporal blocking's long and limited cases: auto on two ranks of size
//! M records its choice and keeps the classic answer, never allocates a
//! wavefront heavier than the classic sweep, tries only the candidates
//! that fit a memory limit, and a stop signal ends the run after a whole
//! block.

use crate::common::signals::{Running, kill};
use crate::common::*;
use std::time::Duration;

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

/// `--temporal auto` on long thin grids, whose many thin planes once made
/// the wavefront's edge buffers far larger than the fields (a 20000x3x3
/// grid on two threads held 2.3 GB to time T=8, each thread its own edge
/// rows of every plane): the preflight's estimate stays within twice the
/// classic run's and the process's peak within a small multiple of it,
/// along each of the three dimensions and with in-process ranks. The
/// threads of a rank now share one edge buffer, so a fixed T = 8 there
/// holds a few MiB more than the classic sweep.
#[test]
fn auto_never_allocates_a_wavefront_heavier_than_the_classic_sweep() {
    const MIB: u64 = 1 << 20;
    let estimate = |r: &serde_json::Value| {
        r["per_rank"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["memory"]["estimated_bytes"].as_u64().unwrap())
            .sum::<u64>()
    };
    for (grid, extra) in [
        ("20000x3x3", &["--threads", "2"][..]),
        ("3x20000x3", &["--threads", "2"]),
        ("3x3x20000", &["--threads", "2"]),
        ("20000x3x3", &["--threads", "1", "--local-ranks", "4"]),
    ] {
        let base = [
            &["--grid", grid, "--iterations", "20", "--format", "json"][..],
            extra,
        ]
        .concat();
        let (classic, _) = record_and_peak(&[&base[..], &["--temporal", "1"]].concat());
        let (auto, peak) = record_and_peak(&[&base[..], &["--temporal", "auto"]].concat());
        let (e1, e) = (estimate(&classic), estimate(&auto));
        let ranks = auto["ranks"].as_u64().unwrap();
        assert!(
            e <= 2 * e1 + 64 * MIB * ranks,
            "{grid} {extra:?}: auto estimated {e} bytes, the classic run {e1}: {auto}"
        );
        // The process also holds its code, libraries and allocator arenas.
        assert!(
            peak <= 2 * e + 64 * MIB,
            "{grid} {extra:?}: peak {peak} bytes against an estimate of {e}"
        );
        assert_eq!(auto["p_fingerprint"], classic["p_fingerprint"], "{grid}");
    }
    // Seven levels' edge rows of 20000 planes, once for both threads:
    // 3.4 MB.
    let thin = [
        "--grid",
        "20000x3x3",
        "--threads",
        "2",
        "--iterations",
        "16",
    ];
    let (classic, _) =
        record_and_peak(&[&thin[..], &["--temporal", "1", "--format", "json"]].concat());
    let (eight, peak) =
        record_and_peak(&[&thin[..], &["--temporal", "8", "--format", "json"]].concat());
    let (e1, e8) = (estimate(&classic), estimate(&eight));
    assert!(e8 <= e1 + 16 * MIB, "T=8 estimated {e8} bytes, T=1 {e1}");
    assert!(
        peak <= e8 + 64 * MIB,
        "peak {peak} bytes against an estimate of {e8}"
    );
    assert_eq!(eight["p_fingerprint"], classic["p_fingerprint"]);
}

/// Under a process limit that holds `--temporal 2`'s buffers but not
/// `--temporal 3`'s (the next candidate), a fixed `--temporal 3` is refused before it
/// allocates (exit 2, one `himeno:` line, nothing on stdout), while
/// `--temporal auto` runs: it times only the candidates that fit and makes
/// its blocks no deeper than those. Before, auto made every block 8 deep
/// for its calibration, and the preflight refused the whole run. The
/// limit is placed between the two needs as this machine's refusals state
/// them: four in-process ranks (one process, one limit for all) of 10
/// planes each, where each sweep more in a block adds two wide planes of
/// ghost layers to every rank's fields (0.055 GiB from T = 2 to 3).
#[test]
fn auto_tries_only_the_candidates_that_fit_a_memory_limit() {
    use crate::common::limits::with_address_limit;
    let base = [
        "--grid",
        "40x130x1026",
        "--procs",
        "4x1x1",
        "--threads",
        "1",
        "--local-ranks",
        "4",
        "--iterations",
        "8",
    ];
    const GIB: f64 = (1u64 << 30) as f64;
    // One malloc arena: glibc reserves 64 MiB of address space for each
    // further arena, and how many it makes depends on which rank's thread
    // contends first, so the space mapped before the preflight would vary
    // by 64 MiB from run to run, more than the gap the limit is placed in.
    let limited = |args: &[&str], limit: u64| {
        let mut cmd = himeno(args);
        cmd.env("MALLOC_ARENA_MAX", "1");
        run(with_address_limit(cmd, limit))
    };
    let low = 128 << 20;
    let refusal = |t: &str, limit: u64| {
        let o = limited(&[&base[..], &["--temporal", t]].concat(), limit);
        assert_eq!(o.status.code(), Some(2), "T={t}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "T={t}: refused before the run");
        assert_eq!(himeno_lines(&o).len(), 1, "{}", stderr(&o));
        refused_need(&stderr(&o))
    };
    let (two, mapped) = refusal("2", low);
    let (three, _) = refusal("3", low);
    assert!(three > two + 0.02, "T=3 needs {three} GiB, T=2 {two}");
    let limit = ((mapped + (two + three) / 2.0) * GIB) as u64;
    refusal("3", limit);
    let o = limited(
        &[
            &base[..],
            &["--temporal", "auto", "--format", "json", "-vv"],
        ]
        .concat(),
        limit,
    );
    let r = json_ok(&o);
    let tried = trial_sweeps(&r["temporal_choice"]);
    assert!(tried.iter().all(|&t| t <= 2), "{r}");
    assert!(r["temporal"].as_u64().unwrap() <= 2, "{r}");
    let deepest = stderr(&o)
        .lines()
        .filter_map(|l| l.split("depth: ").nth(1))
        .map(|d| d.trim_end_matches([' ', '}']).parse::<u64>().unwrap())
        .max();
    assert!(
        deepest.is_some_and(|d| d <= 2),
        "blocks made {deepest:?} deep"
    );
}

/// `himeno ARGS`, its record, and its peak resident memory in bytes: the
/// process's own high-water mark (`VmHWM`), which the record carries in
/// each rank's `memory.peak_bytes`. Not the child's `ru_maxrss` from
/// `wait4`: Linux carries the spawning process's peak into a child that
/// shares its memory until `exec` (Rust's spawn is such a `vfork`), so a
/// child of this test binary read 2 GB when another test had made the
/// binary that large.
fn record_and_peak(args: &[&str]) -> (serde_json::Value, u64) {
    let r = json_ok(&run(himeno(args)));
    let peak = r["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["memory"]["peak_bytes"].as_u64().expect("a measured peak"))
        .max()
        .unwrap();
    (r, peak)
}

/// The GiB figures of a refusal `needs A GiB of address space ... of
/// which M GiB is mapped already`: (A, M).
fn refused_need(stderr: &str) -> (f64, f64) {
    let after = |key: &str| -> f64 {
        let at = stderr
            .find(key)
            .unwrap_or_else(|| panic!("no '{key}' in: {stderr}"));
        let rest = &stderr[at + key.len()..];
        let num: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        num.parse().unwrap()
    };
    let need = after("needs ");
    let mapped = stderr
        .split(", of which ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("no mapped figure in: {stderr}"))
        .parse()
        .unwrap();
    (need, mapped)
}

/// `--temporal auto` on two in-process ranks of a grid far beyond any
/// last-level cache: the choice is recorded (asked, taken, why, and the
/// calibration's seconds per sweep of every candidate when it timed them),
/// the record's `temporal` is the T taken, and the answer is the classic
/// one bit for bit, whichever T it took (a shallower one than the block
/// was first made for rebuilds the backend and halo).
#[test]
fn auto_records_its_choice_and_keeps_the_classic_answer() {
    let base = [
        &TWO_RANKS_OF_M[..],
        &["--iterations", "9", "--format", "json"],
    ]
    .concat();
    let classic = json_ok(&run(himeno(&base)));
    let auto = json_ok(&run(himeno(&[&base[..], &["--temporal", "auto"]].concat())));
    assert_eq!(auto["p_fingerprint"], classic["p_fingerprint"]);
    assert_eq!(auto["gosa"], classic["gosa"]);
    assert_eq!(auto["verified"], true, "{auto}");
    let choice = &auto["temporal_choice"];
    assert_eq!(choice["asked"], "auto", "{choice}");
    assert_eq!(choice["sweeps"], auto["temporal"], "{choice}");
    let taken = choice["sweeps"].as_u64().unwrap();
    assert!(auto_offers(taken), "{choice}");
    let reason = choice["reason"].as_str().unwrap();
    assert!(reason.starts_with(&format!("T={taken} ")), "{reason}");
    // 2 x 14 fields of 4.4 M points are 235 MiB: more than a last-level
    // cache, so unless the tiles cannot fit, the candidates were timed.
    if reason.contains("calibrated") {
        let trials = choice["trials"].as_array().unwrap();
        let swept = trial_sweeps(choice);
        assert_eq!(swept[0], 1, "{choice}");
        assert!(swept.contains(&taken), "{choice}");
        assert!(trials.iter().all(|t| t["sweep_s"].as_f64().unwrap() > 0.0));
    }
    // A fixed T is not a choice: no such entry.
    assert!(classic.get("temporal_choice").is_none(), "{classic}");
}

/// A `--seconds` run of a blocked sweep is first sized from the
/// calibration's median seconds per sweep of the T and kernel it chose
/// (the kernel's trial, timed last, else the temporal one's), not from its
/// rehearsal: three iterations on a block of T = 4 or 8 are one round of
/// three sweeps, and a `--seconds 20` run sized from them ended after
/// 16-17 s (issue 42); then, an eighth and half of the way in, from its own loop's
/// pace. The record holds every number the first sizing used, so that
/// estimate is checked exactly (the old sizings fail it); the loop's
/// length only loosely, as this is a timing on a machine that may be
/// loaded.
#[test]
fn a_timed_blocked_run_is_sized_from_its_calibration() {
    let target = 3.0;
    let mut calibrated_blocked = 0;
    for temporal in ["auto", "4"] {
        let r = json_ok(&run(himeno(&[
            "--size",
            "S",
            "--threads",
            "2",
            "--temporal",
            temporal,
            "--seconds",
            "3",
            "--warmup",
            "3",
            "--stream",
            "off",
            "--format",
            "json",
        ])));
        // The trial of what was chosen: `trial[key] == choice[name]`, with
        // the tiles it was timed with where T was timed with several.
        let chosen_trial = |choice: &serde_json::Value, key: &str, name: &str| {
            let trials = choice["trials"].as_array()?;
            let trial = trials
                .iter()
                .find(|t| t[key] == choice[name] && t["tile_rows"] == choice["tile_rows"])?;
            trial["median_s"].as_f64()
        };
        let pace = chosen_trial(&r["kernel_choice"], "kernel", "chosen")
            .or_else(|| chosen_trial(&r["temporal_choice"], "sweeps", "sweeps"));
        let per = match pace {
            Some(s) if r["temporal"].as_u64().unwrap() > 1 => {
                calibrated_blocked += 1;
                s
            }
            _ => r["warmup_s"].as_f64().unwrap() / 3.0,
        };
        let planned = (target / per.max(1e-9)).floor().clamp(1.0, 1e9) as u64;
        // A blocked run's estimate from its calibration's median turn, then
        // the plan its own loop made an eighth and half of the way in; a classic
        // one's plan from the rehearsal, as the original's.
        let (estimate, plan) = if r["temporal"].as_u64().unwrap() > 1 {
            let plan = r["planned_iterations"].as_u64().unwrap();
            assert!(plan * 8 >= planned, "--temporal {temporal}: {r}");
            (&r["estimated_iterations"], plan)
        } else {
            assert!(r.get("estimated_iterations").is_none(), "{r}");
            (&r["planned_iterations"], planned)
        };
        assert_eq!(*estimate, planned, "--temporal {temporal}: {r}");
        assert_eq!(r["iterations"], plan, "--temporal {temporal}: {r}");
        let wall = r["wall_s"].as_f64().unwrap();
        assert!(
            (0.5 * target..3.0 * target).contains(&wall),
            "--temporal {temporal}: a {target} s run took {wall} s: {r}"
        );
    }
    // The fixed T times its tile heights at least.
    assert!(calibrated_blocked > 0, "no blocked run was calibrated");
}
