//! The quick stream after the timed loop, the stream's cache bound in a
//! memory cgroup, the `bench-cpu.sh` script, and the one timed comparison
//! of bench stream's triad against a plain C/OpenMP STREAM triad (ignored:
//! `scripts/test.sh` runs it alone, as it cannot run beside other tests).

use crate::common::*;

/// `bench stream`'s triad agrees with a plain C/OpenMP STREAM triad timed
/// as STREAM times it (a wall clock around one parallel loop per
/// repetition), both on the same threads and arrays, on the pages
/// McCalpin's STREAM gets (none advised; huge pages read 1.12x on a Xeon
/// guest), run
/// interleaved: the median of the per-round ratios within the tolerance
/// (`HIMENO_STREAM_TOLERANCE`, default 0.5: a loaded 2-vCPU Xeon guest
/// read 1.30x in one run of five rounds, and 1.03x when quiet,
/// notes/cpu-perf.md; the 5 % is this test with 0.05 on a quiet
/// machine). A rate that adds
/// threads' own rates or counts bytes per thread reads 2x the probe on two
/// threads, and the Zen 4 guest's reading was 1.73-1.87x: outside it. Slow (tens of seconds): arrays of 4x a
/// 32 MiB cache, STREAM's rule for the guests this runs on.
///
/// It times, so it runs alone: `scripts/test.sh` runs it after every other
/// test (`--ignored`, one test thread), since beside the suite's other
/// runs on two cores the two readings move unevenly and the ratio is noise.
#[test]
#[ignore = "timed: scripts/test.sh runs it alone after the other tests"]
fn stream_triad_agrees_with_a_plain_c_openmp_triad() {
    const ELEMENTS: &str = "16777216";
    const REPEATS: &str = "8";
    const ROUNDS: usize = 5;
    let tolerance: f64 = std::env::var("HIMENO_STREAM_TOLERANCE").map_or(0.5, |t| {
        t.parse().expect("HIMENO_STREAM_TOLERANCE is a number")
    });
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(2)
        .to_string();
    let probe = triad_probe();
    let mut ratios = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..ROUNDS {
        let r = json_ok(&run(himeno(&[
            "bench",
            "stream",
            "--threads",
            &threads,
            "--elements",
            ELEMENTS,
            "--repeats",
            REPEATS,
            "--format",
            "json",
        ])));
        let ours = r["triad_gbytes_per_s"].as_f64().expect("a triad rate");
        let mut cmd = std::process::Command::new(&probe);
        cmd.args([ELEMENTS, REPEATS])
            .env("OMP_NUM_THREADS", &threads);
        let out = stdout_ok(&run(cmd));
        let theirs: f64 = out
            .lines()
            .find_map(|l| l.strip_prefix("triad best "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no triad line in:\n{out}"));
        ratios.push(ours / theirs);
        seen.push(format!("{ours:.2}/{theirs:.2}"));
    }
    let m = median(ratios);
    assert!(
        (m - 1.0).abs() <= tolerance,
        "bench stream / C triad: median {m:.3}, beyond {tolerance} (himeno/C GB/s per round: {})",
        seen.join(" ")
    );
}

/// The quick stream runs after the timed loop (so that nothing it
/// allocates or frees can disturb the loop), on every in-process rank
/// together.
#[test]
fn quick_stream_runs_after_the_timed_loop_on_every_rank() {
    let o = run(himeno(&[
        "--size",
        "XS",
        "--iterations",
        "3",
        "--local-ranks",
        "2",
        "--stream",
        "quick",
        "-v",
        "--format",
        "json",
    ]));
    let r = json_ok(&o);
    assert!(
        r["stream_fraction"].as_f64().is_some_and(|f| f > 0.0),
        "{r}"
    );
    let err = stderr(&o);
    let found =
        |at: Option<usize>, what: &str| at.unwrap_or_else(|| panic!("no {what:?} in\n{err}"));
    // Every rank's rehearsal (hence its loop) comes before the measurement.
    let last_rehearsal = found(err.rfind("rehearsal done"), "rehearsal done");
    let first_stream = found(err.find("quick stream"), "quick stream");
    assert!(last_rehearsal < first_stream, "{err}");
}

/// A machine that reports a huge last-level cache (a virtual machine told
/// of its host's whole L3) does not make the quick stream, a side
/// measurement, refuse the run: its arrays are capped to a quarter of the
/// memory left, here a 1 GiB cgroup where STREAM's rule alone (4x a 64 GiB
/// cache per array) asked for terabytes.
#[test]
fn a_huge_reported_cache_does_not_make_the_quick_stream_refuse_the_run() {
    let cg = match crate::common::limits::MemoryCgroup::new("quick-stream", 1 << 30) {
        Ok(cg) => cg,
        Err(why) => {
            eprintln!("skipping: {why}");
            return;
        }
    };
    let mut cmd = cg.himeno(&[
        "--size",
        "XS",
        "--iterations",
        "3",
        "--local-ranks",
        "2",
        "--stream",
        "quick",
        "--format",
        "json",
    ]);
    cmd.env("HIMENO_LLC_BYTES", "64G");
    let r = json_ok(&run(cmd));
    assert!(
        r["stream_fraction"].as_f64().is_some_and(|f| f > 0.0),
        "{r}"
    );
}

/// The tables `himeno report --compare` printed under the line starting
/// `title` in `out`: the label rows and the ratio rows, split into cells.
fn compare_tables<'a>(out: &'a str, title: &str) -> (Vec<Vec<&'a str>>, Vec<Vec<&'a str>>) {
    let mut lines = out
        .lines()
        .skip_while(|l| !l.starts_with(title))
        .skip(1)
        .take_while(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_else(|| panic!("no table under {title} in:\n{out}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "label", "rounds", "best", "median", "worst", "spread", "better", "answers", "chosen"
        ],
        "{out}"
    );
    let (mut labels, mut ratios) = (Vec::new(), Vec::new());
    let mut in_ratios = false;
    for l in lines {
        let cells: Vec<&str> = l.split_whitespace().collect();
        if cells.first() == Some(&"ratio") {
            assert_eq!(
                cells,
                ["ratio", "paired", "best/best", "median", "missing"],
                "{out}"
            );
            in_ratios = true;
        } else if in_ratios {
            ratios.push(cells);
        } else {
            labels.push(cells);
        }
    }
    (labels, ratios)
}

/// `scripts/bench-cpu.sh` end to end on tiny runs: per thread count a
/// table of MFLOPS with one row per size and T, whose answers passed;
/// `auto` rows list the T each repeat chose, classic-sweep rows the
/// prefetch kernel kept and wavefront rows the tile height; then a table
/// of GB/s whose ratios to the stream figures printed beside them are the
/// best over the best and, paired, the repeats' median; the triad's spread
/// over the repeats.
#[test]
fn bench_cpu_script_prints_the_table() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut cmd = std::process::Command::new("bash");
    model_cache(&mut cmd);
    cmd.current_dir(root).args([
        "scripts/bench-cpu.sh",
        "--sizes",
        "XS S",
        "--threads",
        "1",
        "--repeats",
        "1",
        "--temporal",
        "1 2 auto",
        "--seconds",
        "0.05",
        "--bin",
        BIN,
    ]);
    let o = run(cmd);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let (rows, ratios) = compare_tables(&out, "# threads 1: MFLOPS");
    assert!(ratios.is_empty(), "{out}");
    assert_eq!(rows.len(), 6, "{out}");
    let cases = ["XS/1", "XS/2", "XS/auto", "S/1", "S/2", "S/auto"];
    for (row, label) in rows.iter().zip(cases) {
        assert_eq!(row.len(), 9, "{out}");
        assert_eq!((row[0], row[1]), (label, "1"), "{out}");
        let temporal = label.split_once('/').unwrap().1;
        assert!(row[2].parse::<f64>().unwrap() > 0.0, "{out}");
        // Every preset run is verified: by its rehearsal's known answer.
        assert_eq!(row[7], "passed", "{out}");
        // One repeat: auto's one T, from its candidates, and the variant
        // --prefetch auto and --stores auto kept where they timed several
        // (fields beyond half the cache or the whole of it, classic
        // sweep), or the wavefront's tile height.
        let (t, kernel) = match row[8].split_once('/') {
            Some((t, k)) => (t, Some(k)),
            None if temporal == "auto" => (row[8], None),
            None => ("-", Some(row[8]).filter(|c| *c != "-")),
        };
        if temporal == "auto" {
            assert!(auto_offers(t.parse().unwrap()), "{out}");
        } else {
            assert_eq!(t, "-", "{out}");
        }
        if let Some(k) = kernel {
            let variants = ["pf", "nopf", "nt", "ca"];
            let named = ["pf+nt", "pf+ca", "nopf+nt", "nopf+ca"];
            let classic = temporal == "1" || t == "1";
            if let Some(rows) = k.strip_prefix('r') {
                // The wavefront's tile height, within the 4 to 32 rows
                // it offers.
                let rows: usize = rows.parse().expect(&out);
                assert!((4..=32).contains(&rows) && !classic, "{out}");
            } else {
                assert!(variants.contains(&k) || named.contains(&k), "{out}");
                assert!(classic, "{out}");
            }
        }
    }
    let (rows, ratios) = compare_tables(&out, "# threads 1: GB/s");
    let best = |label: &str| -> f64 {
        let row = rows
            .iter()
            .find(|r| r[0] == label)
            .unwrap_or_else(|| panic!("no {label} in:\n{out}"));
        row[2].parse().unwrap()
    };
    // One repeat: the triad's range is one value, its spread none.
    let triad_row = rows.iter().find(|r| r[0] == "stream/triad").expect(&out);
    assert_eq!(
        (triad_row[2], triad_row[4]),
        (triad_row[3], triad_row[3]),
        "{out}"
    );
    assert_eq!(triad_row[5], "0.0%", "{out}");
    assert_eq!(ratios.len(), 12, "{out}");
    for (i, label) in cases.iter().enumerate() {
        for (j, stream) in ["stream/triad", "stream/sum13"].into_iter().enumerate() {
            let r = &ratios[2 * i + j];
            assert_eq!(r[..4], [*label, "/", stream, "1"], "{out}");
            let (ratio, paired): (f64, f64) = (r[4].parse().unwrap(), r[5].parse().unwrap());
            // The numbers are printed with 3 or 4 significant places:
            // recomputing from them is off by their rounding.
            let want = best(label) / best(stream);
            assert!((ratio - want).abs() <= 2e-3 * want + 1e-4, "{out}");
            // One repeat: its pair is the best over the best.
            assert_eq!(ratio, paired, "{out}");
            assert_eq!(r[6], "-", "{out}");
        }
    }
}

/// `scripts/bench-cpu.sh --base`: a second build run after each run gets
/// its own rows and the speed-up (the ratio over it), and a T that the
/// base refuses (here a stand-in that refuses `auto`, as builds before it
/// did) has neither.
#[test]
fn bench_cpu_script_compares_a_base_build() {
    let dir = temp_file("bench-cpu", "base");
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("himeno-base");
    write_executable(
        &base,
        &format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = auto ] && \
             {{ echo 'himeno: invalid value auto' >&2; exit 2; }}; done\nexec '{BIN}' \"$@\"\n"
        ),
    );
    let mut cmd = std::process::Command::new("bash");
    model_cache(&mut cmd);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["scripts/bench-cpu.sh", "--sizes", "XS", "--threads", "1"])
        .args([
            "--repeats",
            "1",
            "--temporal",
            "1 auto",
            "--seconds",
            "0.05",
        ])
        .args(["--bin", BIN, "--base"])
        .arg(&base);
    let o = run(cmd);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let (rows, ratios) = compare_tables(&out, "# threads 1: MFLOPS");
    let labels: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    // In the order the rounds first gave them: each run, then its base's.
    assert_eq!(labels, ["XS/1", "base/XS/1", "XS/auto"], "{out}");
    let mflops: f64 = rows[0][2].parse().unwrap();
    let base_mflops: f64 = rows[1][2].parse().unwrap();
    assert!(base_mflops > 0.0, "{out}");
    assert_eq!(ratios.len(), 1, "{out}");
    assert_eq!(ratios[0][..4], ["XS/1", "/", "base/XS/1", "1"], "{out}");
    let speedup: f64 = ratios[0][4].parse().unwrap();
    // Printed with one decimal (MFLOPS) and four.
    assert!(
        (speedup - mflops / base_mflops).abs() <= 1e-3 * speedup,
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Compiles the plain C/OpenMP STREAM probe (`notes/peer/triad.c`) as
/// the issue builds McCalpin's: `-O3 -march=native -fopenmp`.
fn triad_probe() -> std::path::PathBuf {
    compile_c(
        "notes/peer/triad.c",
        "triad-probe",
        &["-O3", "-march=native", "-fopenmp"],
    )
}

/// The median of `v` (not empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    (v[(n - 1) / 2] + v[n / 2]) / 2.0
}
