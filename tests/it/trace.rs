//! `--trace FILE`: the merged multi-rank Chrome trace (under `mpirun` and
//! with in-process ranks) as ui.perfetto.dev reads it, its sums against the
//! report's phase table, its clock alignment, its bound on long runs, and
//! the timeline plot `himeno report --timeline` draws from it.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The first GPU stream's track (`himeno::timeline::GPU_COMPUTE_TRACK`).
pub const GPU_TRACKS: u64 = himeno::timeline::GPU_COMPUTE_TRACK as u64;

/// Reads and parses a trace file.
pub fn load(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("the trace was written");
    serde_json::from_str(&text).expect("the trace is one JSON document")
}

/// The complete events of a trace.
pub fn complete(t: &Value) -> Vec<&Value> {
    t["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect()
}

/// Runs `np` ranks of size S for `iterations` with a trace; returns the
/// JSON report and the trace.
fn traced(launcher: Launcher, np: usize, iterations: &str, extra: &[&str]) -> (Value, Value) {
    let (report, t, _) = traced_at(launcher, np, iterations, extra);
    (report, t)
}

/// [`traced`], with the trace's path.
fn traced_at(
    launcher: Launcher,
    np: usize,
    iterations: &str,
    extra: &[&str],
) -> (Value, Value, std::path::PathBuf) {
    let path = temp_file("trace", &format!("{launcher:?}-{np}-{iterations}.json"));
    let p = path.to_str().unwrap();
    let mut args = vec![
        "--size",
        "S",
        "--iterations",
        iterations,
        "--format",
        "json",
        "--trace",
        p,
    ];
    args.extend_from_slice(extra);
    let report = json_ok(&run(ranks(launcher, np, &args)));
    let t = load(&path);
    (report, t, path)
}

/// Asserts what Perfetto needs: one named, sorted process per rank, no
/// tid 0, no two complete events overlapping on one track.
pub fn assert_perfetto_shape(t: &Value, np: usize) {
    let events = t["traceEvents"].as_array().unwrap();
    for e in events {
        assert!(e["tid"].as_u64().unwrap() > 0, "tid 0: {e}");
        assert!(e["pid"].as_u64().unwrap() < np as u64, "{e}");
    }
    let meta = |name: &str, key: &str| -> BTreeMap<u64, Value> {
        events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == name)
            .map(|e| (e["pid"].as_u64().unwrap(), e["args"][key].clone()))
            .collect()
    };
    let names = meta("process_name", "name");
    let sort = meta("process_sort_index", "sort_index");
    assert_eq!(names.len(), np);
    for r in 0..np as u64 {
        assert_eq!(names[&r], format!("rank {r}"));
        assert_eq!(sort[&r], r);
    }
    let mut tracks: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    for e in complete(t) {
        let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        assert!(ts >= 0.0 && dur >= 0.0, "{e}");
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        tracks.entry(key).or_default().push((ts, ts + dur));
    }
    for r in 0..np as u64 {
        assert!(tracks.contains_key(&(r, 1)), "rank {r} has no phase track");
    }
    // Beside the phases (tid 1) only the sweep threads' shares (tid 2..)
    // and a GPU rank's streams' work (from GPU_TRACKS on, named "gpu ..."),
    // each track named in the metadata.
    for e in complete(t) {
        let tid = e["tid"].as_u64().unwrap();
        let name = e["name"].as_str().unwrap();
        if tid >= GPU_TRACKS {
            assert!(name.starts_with("gpu "), "{e}");
        } else {
            assert_eq!(tid > 1, name == "sweep", "{e}");
        }
    }
    let named: std::collections::BTreeSet<(u64, u64)> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
        .collect();
    for track in tracks.keys() {
        assert!(named.contains(track), "track {track:?} has no thread_name");
    }
    for (track, spans) in &mut tracks {
        spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for w in spans.windows(2) {
            // A thousandth of a microsecond: the rounding of ts + dur.
            assert!(w[1].0 >= w[0].1 - 1e-3, "overlap on {track:?}: {w:?}");
        }
    }
}

/// Asserts that every rank's timed events add up to its row of the
/// report's phase table, within 1 %.
pub fn assert_sums_match(report: &Value, t: &Value) {
    let mut sums: BTreeMap<(u64, String), f64> = BTreeMap::new();
    for e in complete(t).into_iter().filter(|e| e["cat"] == "timed") {
        let key = (
            e["pid"].as_u64().unwrap(),
            e["name"].as_str().unwrap().to_string(),
        );
        *sums.entry(key).or_default() += e["dur"].as_f64().unwrap() * 1e-6;
    }
    let per_rank = report["per_rank"].as_array().unwrap();
    for row in per_rank {
        let rank = row["rank"].as_u64().unwrap();
        for (phase, want) in row["phases_s"].as_object().unwrap() {
            let want = want.as_f64().unwrap();
            let got = sums.get(&(rank, phase.clone())).copied().unwrap_or(0.0);
            // 1 %, and a microsecond for phases that took none.
            assert!(
                (got - want).abs() <= 0.01 * want + 1e-6,
                "rank {rank} {phase}: trace {got} s, report {want} s"
            );
        }
    }
    assert!(sums.keys().any(|(_, p)| p == "compute"));
    // A sweep thread works within its rank's compute time: no thread's
    // shares add up to more.
    let mut threads: BTreeMap<(u64, u64), f64> = BTreeMap::new();
    for e in complete(t)
        .into_iter()
        .filter(|e| e["name"] == "sweep" && e["cat"] == "timed")
    {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        *threads.entry(key).or_default() += e["dur"].as_f64().unwrap() * 1e-6;
    }
    for ((rank, tid), s) in threads {
        let compute = sums[&(rank, "compute".to_string())];
        assert!(
            s <= compute * 1.01 + 1e-6,
            "rank {rank} thread {tid}: {s} s in {compute} s"
        );
    }
}

/// Asserts the clock alignment of ranks of one host: every estimated
/// offset is within half its round trip of zero (the shared kernel clock
/// is the truth there), none is applied, and the recorded barriers keep
/// their order across ranks: no rank leaves one before every rank has
/// entered it.
fn assert_one_host_clock(t: &Value, np: usize) {
    let clock = t["otherData"]["clock"].as_array().unwrap();
    assert_eq!(clock.len(), np);
    for c in clock {
        let est = c["offset_estimate_ns"].as_i64().unwrap();
        let rtt = c["rtt_ns"].as_i64().unwrap();
        assert!(
            est.abs() <= rtt / 2 + 1,
            "offset outside its round trip: {c}"
        );
        assert_eq!(c["applied_offset_ns"], 0, "{c}");
    }
    assert_barriers_in_order(t, np);
}

/// Asserts that on the trace's common clock every rank leaves each
/// recorded barrier after the last rank entered it. On one clock this
/// holds however the ranks are scheduled: a rank descheduled around the
/// barrier reads its clock earlier before it and later after it, never
/// the other way. A rank whose times were shifted (its own start as
/// zero, a wrong offset) breaks it by more than the barrier's wait. (The
/// ends' spread, 1-40 us on a quiet machine, is not checked: with four
/// ranks on two cores a rank that has left may wait a time slice, 4 ms
/// in one CI run, before it reads the clock.)
fn assert_barriers_in_order(t: &Value, np: usize) {
    let mut spans: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for e in complete(t).into_iter().filter(|e| e["name"] == "barrier") {
        let start = e["ts"].as_f64().unwrap();
        let end = start + e["dur"].as_f64().unwrap();
        spans
            .entry(e["pid"].as_u64().unwrap())
            .or_default()
            .push((start, end));
    }
    assert_eq!(spans.len(), np);
    let count = spans.values().map(Vec::len).min().unwrap();
    assert!(count >= 2, "fewer than 2 barriers recorded: {spans:?}");
    for which in 0..count {
        let last_in = spans.values().map(|v| v[which].0).fold(f64::MIN, f64::max);
        let first_out = spans.values().map(|v| v[which].1).fold(f64::MAX, f64::min);
        // The times are written in microseconds to the nanosecond.
        assert!(
            first_out >= last_in - 0.002,
            "barrier {which}: a rank left at {first_out} us before the last entered at \
             {last_in} us: {:?}",
            spans.values().map(|v| v[which]).collect::<Vec<_>>()
        );
    }
}

/// Asserts that the barrier order check sees a rank whose times are all
/// 250 ms early or late (a rank on its own clock is off by its start-up,
/// which is of that order; a descheduled rank reads its clock a few ms
/// late at most on the test machine).
fn assert_shifted_rank_breaks_the_order(t: &Value) {
    for shift in [-250_000.0, 250_000.0] {
        let mut moved = t.clone();
        for e in moved["traceEvents"].as_array_mut().unwrap() {
            if e["pid"] == 1 && e["ph"] == "X" {
                e["ts"] = (e["ts"].as_f64().unwrap() + shift).into();
            }
        }
        let broken = std::panic::catch_unwind(|| assert_barriers_in_order(&moved, 4));
        assert!(broken.is_err(), "rank 1 moved by {shift} us went unseen");
    }
}

#[test]
fn four_ranks_write_one_merged_trace() {
    for launcher in launchers() {
        let (report, t) = traced(launcher, 4, "50", &[]);
        assert_perfetto_shape(&t, 4);
        assert_sums_match(&report, &t);
        assert_one_host_clock(&t, 4);
        assert_shifted_rank_breaks_the_order(&t);
        assert_eq!(t["otherData"]["kept"], "every iteration", "{launcher:?}");
        let timed: std::collections::BTreeSet<u64> = complete(&t)
            .into_iter()
            .filter(|e| e["cat"] == "timed")
            .map(|e| e["args"]["iteration"].as_u64().unwrap())
            .collect();
        assert_eq!(timed, (1..=50).collect(), "{launcher:?}");
        assert!(
            complete(&t).iter().any(|e| e["cat"] == "rehearsal"),
            "the rehearsal is on the timeline apart from the timed loop"
        );
        assert!(
            complete(&t).iter().any(|e| e["name"] == "sweep"),
            "the CPU ranks' sweep threads are on the timeline"
        );
    }
}

#[test]
fn temporal_blocks_trace_alike() {
    let (report, t) = traced(Launcher::Local, 2, "12", &["--temporal", "4"]);
    assert_perfetto_shape(&t, 2);
    assert_sums_match(&report, &t);
}

#[test]
fn long_runs_keep_the_first_and_last_iterations() {
    let (report, t) = traced(Launcher::Local, 2, "30", &["--trace-keep", "5"]);
    let timed: std::collections::BTreeSet<u64> = complete(&t)
        .into_iter()
        .filter(|e| e["cat"] == "timed")
        .map(|e| e["args"]["iteration"].as_u64().unwrap())
        .collect();
    let want: std::collections::BTreeSet<u64> = (1..=5).chain(26..=30).collect();
    assert_eq!(timed, want);
    let kept = t["otherData"]["kept"].as_str().unwrap();
    assert!(kept.contains("iterations 6 to 25 were dropped"), "{kept}");
    assert_eq!(
        t["otherData"]["dropped"][1]["iterations"],
        serde_json::json!([6, 25])
    );
    assert_eq!(report["iterations"], 30);
}

#[test]
fn bad_trace_options_are_one_line() {
    let o = run(himeno(&[
        "--size",
        "XS",
        "--iterations",
        "2",
        "--trace",
        "/nonexistent-dir/t.json",
    ]));
    assert_clean_error(&o, &["--trace"]);
    let o = run(himeno(&[
        "--size",
        "XS",
        "--iterations",
        "2",
        "--trace-keep",
        "5",
    ]));
    assert_clean_error(&o, &["--trace"]);
    let dir = temp_file("trace", "a-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let o = run(himeno(&[
        "--iterations",
        "2",
        "--trace",
        dir.to_str().unwrap(),
    ]));
    assert_clean_error(&o, &["directory"]);
}

#[test]
fn the_timeline_is_drawn_from_a_trace() {
    let (_, _, trace) = traced_at(Launcher::Local, 4, "6", &[]);
    let dir = temp_file("trace", "timeline-plots");
    let o = run(himeno(&[
        "report",
        "--timeline",
        trace.to_str().unwrap(),
        "--plot",
        dir.to_str().unwrap(),
        "--timeline-from",
        "2",
        "--timeline-count",
        "2",
    ]));
    let out = stdout_ok(&o);
    assert!(out.contains("timed iterations 2-3 of 6 (4 ranks"), "{out}");
    assert_eq!(
        out.lines()
            .filter(|l| l.trim_start().starts_with('3'))
            .count(),
        1,
        "{out}"
    );
    let png = std::fs::read(dir.join("timeline.png")).expect("the PNG");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 5000,
        "{} bytes",
        png.len()
    );
    let svg = std::fs::read_to_string(dir.join("timeline.svg")).expect("the SVG");
    assert!(
        svg.contains("rank 3") && svg.contains("allreduce"),
        "labels and key in the SVG"
    );
    // Without --plot the pictures go beside the trace, named after it.
    stdout_ok(&run(himeno(&[
        "report",
        "--timeline",
        trace.to_str().unwrap(),
    ])));
    let beside = trace.with_file_name("Local-4-6-timeline.png");
    assert!(beside.is_file(), "{} missing", beside.display());
    // Iterations the trace does not hold, and a file that is no trace.
    let o = run(himeno(&[
        "report",
        "--timeline",
        trace.to_str().unwrap(),
        "--timeline-from",
        "7",
    ]));
    assert_clean_error(&o, &["--timeline-from"]);
    let o = run(himeno(&["report", "--timeline", "/etc/hostname"]));
    assert_clean_error(&o, &["cannot read the trace"]);
}

#[test]
fn ranks_that_disagree_on_tracing_stop_together() {
    if !mpi_or_skip("ranks_that_disagree_on_tracing_stop_together") {
        return;
    }
    let path = temp_file("trace", "mpmd.json");
    let run_args = ["--grid", "9x9x9", "--iterations", "2"];
    let mut traced = run_args.to_vec();
    traced.extend(["--trace", path.to_str().unwrap()]);
    // An MPMD launch: rank 0 traces, rank 1 does not.
    let mut c = mpirun(1, &traced);
    c.args([":", "-np", "1", BIN]).args(run_args);
    let o = run(c);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("rank 1 resolved a different trace"),
        "{}",
        stderr(&o)
    );
    assert!(!path.exists(), "no rank ran, no trace is written");
}
