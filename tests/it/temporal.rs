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
    assert!([1, 2, 4, 8].contains(&taken), "{choice}");
    let reason = choice["reason"].as_str().unwrap();
    assert!(reason.starts_with(&format!("T={taken} ")), "{reason}");
    // 2 x 14 fields of 4.4 M points are 235 MiB: more than a last-level
    // cache, so unless the tiles cannot fit, the candidates were timed.
    if reason.contains("calibrated") {
        let trials = choice["trials"].as_array().unwrap();
        let swept: Vec<u64> = trials
            .iter()
            .map(|t| t["sweeps"].as_u64().unwrap())
            .collect();
        assert_eq!(swept[0], 1, "{choice}");
        assert!(swept.contains(&taken), "{choice}");
        assert!(trials.iter().all(|t| t["sweep_s"].as_f64().unwrap() > 0.0));
    }
    // A fixed T is not a choice: no such entry.
    assert!(classic.get("temporal_choice").is_none(), "{classic}");
}

/// Fields that fit in half the last-level cache, swept by one thread of one
/// rank, gain nothing from blocking: the model says T=1 without timing
/// anything, in the record and in one line of the text report. With two
/// threads, or two ranks, the candidates are timed (blocking saves their
/// per-sweep hand-off or exchange), and the answer is the classic one. An
/// explicit T whose tiles cannot fit the cache share of a thread says so in
/// one line.
#[test]
fn auto_keeps_in_cache_fields_classic_and_a_t_too_deep_is_named() {
    let small = [&IN_CACHE[..], &["--temporal", "auto"]].concat();
    let classic = json_ok(&run(himeno(
        &[&IN_CACHE[..], &["--format", "json"]].concat(),
    )));
    for shared in [
        &["--threads", "2"][..],
        &["--threads", "1", "--local-ranks", "2"],
    ] {
        let r = json_ok(&run(himeno(
            &[&small[..], shared, &["--format", "json"]].concat(),
        )));
        let choice = &r["temporal_choice"];
        let trials = choice["trials"].as_array().unwrap();
        assert!(trials.len() > 1, "{shared:?}: {choice}");
        assert_eq!(trials[0]["sweeps"], 1, "{choice}");
        assert_eq!(r["p_fingerprint"], classic["p_fingerprint"], "{shared:?}");
        assert_eq!(r["gosa"], classic["gosa"], "{shared:?}");
    }
    let small = [&small[..], &["--threads", "1"]].concat();
    let r = json_ok(&run(himeno(&[&small[..], &["--format", "json"]].concat())));
    assert_eq!(r["temporal"], 1, "{r}");
    let reason = r["temporal_choice"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("at most half its last-level cache"),
        "{reason}"
    );
    assert_eq!(r["temporal_choice"]["trials"], serde_json::json!([]));
    let text = stdout_ok(&run(himeno(&small)));
    let lines = lines_starting(&text, "Temporal auto:");
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].contains("1 sweep(s) per halo exchange; T=1 from the model"),
        "{text}"
    );
    // Tiles of 4096 rows of 34 values, 8 sweeps: 58 MiB per thread.
    let fitting = ["--grid", "18x18x34", "--iterations", "8", "--temporal", "8"];
    let text = stdout_ok(&run(himeno(
        &[&fitting[..], &["--tile-rows", "4096"]].concat(),
    )));
    let warnings = lines_starting(&text, "Warning: --temporal 8");
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains("give fewer --tile-rows"), "{text}");
    let fits = stdout_ok(&run(himeno(&fitting)));
    assert!(!fits.contains("Warning"), "{fits}");
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

/// `--temporal auto` on long thin grids, whose many thin planes make the
/// wavefront's edge buffers far larger than the fields: a candidate whose
/// buffers outweigh the classic sweep's whole memory is not even
/// allocated (a 20000x3x3 grid on two threads held 2.3 GB to time T=8
/// and then took T=1), so the preflight's estimate stays within twice the
/// classic run's and the process's peak within a small multiple of it,
/// along each of the three dimensions and with in-process ranks.
#[test]
fn auto_never_allocates_a_wavefront_heavier_than_the_classic_sweep() {
    const MIB: u64 = 1 << 20;
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
        let estimate = |r: &serde_json::Value| {
            r["per_rank"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["memory"]["estimated_bytes"].as_u64().unwrap())
                .sum::<u64>()
        };
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
    // The wavefront's edge buffers of 20000 planes outweigh the fields:
    // the model says so and times nothing.
    let (r, _) = record_and_peak(&[
        "--grid",
        "20000x3x3",
        "--threads",
        "2",
        "--iterations",
        "20",
        "--temporal",
        "auto",
        "--format",
        "json",
    ]);
    let choice = &r["temporal_choice"];
    assert_eq!(choice["sweeps"], 1, "{choice}");
    assert!(
        choice["reason"].as_str().unwrap().contains("outweigh"),
        "{choice}"
    );
    assert_eq!(choice["trials"], serde_json::json!([]), "{choice}");
}

/// `--prefetch on|off` sets the classic sweep's kernel; with `--temporal
/// auto` the record states it only when the run swept classically (T=1):
/// a wavefront prefetches its first level whatever was asked, so a run
/// that took T above 1 does not claim it. A lone thread on fields in the
/// cache is settled at T=1 by the model; a long thin grid on two threads
/// is timed, whichever T it takes.
#[test]
fn auto_records_a_fixed_prefetch_only_where_the_classic_sweep_ran() {
    for (args, asked) in [
        (&[&IN_CACHE[..], &["--threads", "1"]].concat(), "off"),
        (
            &[
                &["--grid", "3x20000x3", "--iterations", "8"][..],
                &["--threads", "2"],
            ]
            .concat(),
            "on",
        ),
    ] {
        let r = json_ok(&run(himeno(
            &[
                &args[..],
                &[
                    "--temporal",
                    "auto",
                    "--prefetch",
                    asked,
                    "--format",
                    "json",
                ],
            ]
            .concat(),
        )));
        let taken = r["temporal"].as_u64().unwrap();
        if taken == 1 {
            assert_eq!(r["prefetch"], asked, "{r}");
        } else {
            assert!(r.get("prefetch").is_none(), "T={taken} claims it: {r}");
        }
    }
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

/// Under a process limit that holds `--temporal 2`'s buffers but not
/// `--temporal 4`'s, a fixed `--temporal 4` is refused before it
/// allocates (exit 2, one `himeno:` line, nothing on stdout), while
/// `--temporal auto` runs: it times only the candidates that fit and makes
/// its blocks no deeper than those. Before, auto made every block 8 deep
/// for its calibration, and the preflight refused the whole run. The
/// limit is placed between the two needs as this machine's refusals state
/// them; a long thin grid on four in-process ranks (one process, one
/// limit for all) has the widest gap between them.
#[test]
fn auto_tries_only_the_candidates_that_fit_a_memory_limit() {
    use crate::hostile::with_address_limit;
    let base = [
        "--grid",
        "4000x3x3",
        "--threads",
        "1",
        "--local-ranks",
        "4",
        "--iterations",
        "8",
    ];
    const GIB: f64 = (1u64 << 30) as f64;
    let low = 450 << 20;
    let refusal = |t: &str, limit: u64| {
        let o = run(with_address_limit(
            himeno(&[&base[..], &["--temporal", t]].concat()),
            limit,
        ));
        assert_eq!(o.status.code(), Some(2), "T={t}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "T={t}: refused before the run");
        assert_eq!(himeno_lines(&o).len(), 1, "{}", stderr(&o));
        refused_need(&stderr(&o))
    };
    let (two, mapped) = refusal("2", low);
    let (four, _) = refusal("4", low);
    assert!(four > two + 0.03, "T=4 needs {four} GiB, T=2 {two}");
    let limit = ((mapped + (two + four) / 2.0) * GIB) as u64;
    refusal("4", limit);
    let o = run(with_address_limit(
        himeno(
            &[
                &base[..],
                &["--temporal", "auto", "--format", "json", "-vv"],
            ]
            .concat(),
        ),
        limit,
    ));
    let r = json_ok(&o);
    let tried: Vec<u64> = r["temporal_choice"]["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["sweeps"].as_u64().unwrap())
        .collect();
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
