//! `--trace FILE`: the merged multi-rank Chrome trace (under `mpirun` and
//! with in-process ranks) as ui.perfetto.dev reads it, its sums against the
//! report's phase table, its clock alignment, its bound on long runs and
//! on memory, a write that fails or outlasts the stop grace, and the
//! timeline plot `himeno report --timeline` draws from it (from any file,
//! in bounded time and memory).

use crate::common::*;
use crate::hostile::MemoryCgroup;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

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

/// 64 in-process ranks of one small grid for `iterations`, one thread
/// each: many ranks' events at once.
fn many_ranks(iterations: &str) -> Vec<String> {
    [
        "--local-ranks",
        "64",
        "--grid",
        "34x34x34",
        "--threads",
        "1",
        "--iterations",
        iterations,
        "--format",
        "json",
    ]
    .map(String::from)
    .to_vec()
}

/// Runs `cmd` with at most `limit`, as the tests' deadline.
fn bounded(cmd: Command) -> Output {
    run_with_limit(cmd, Duration::from_secs(120))
}

#[test]
fn a_trace_of_many_ranks_fits_in_a_few_times_the_memory_of_the_run() {
    // Without a trace the run takes about 20 MiB; its trace's events were
    // held as JSON values (4 GiB and an abort). Six times the run.
    const MIB: u64 = 1 << 20;
    let cg = match MemoryCgroup::new("trace-fits", 128 * MIB) {
        Ok(cg) => cg,
        Err(why) => {
            eprintln!("skipping: {why}");
            return;
        }
    };
    let path = temp_file("trace", "many-ranks.json");
    let mut args = many_ranks("1000");
    args.extend(["--trace".into(), path.to_str().unwrap().into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = bounded(cg.himeno(&args));
    let report = json_ok(&o);
    assert_eq!(report["iterations"], 1000);
    let t = load(&path);
    assert_eq!(t["otherData"]["ranks"], 64);
    let timed = complete(&t)
        .into_iter()
        .filter(|e| e["cat"] == "timed" && e["args"]["iteration"] == 1000)
        .count();
    assert!(timed >= 64, "{timed} events of the last iteration");
}

#[test]
fn a_trace_that_would_not_fit_is_refused_before_the_run() {
    // Every rank keeps a million iterations at each end: terabytes.
    let mut args = many_ranks("2000000");
    args[1] = "1024".into();
    let path = temp_file("trace", "too-big.json");
    args.extend(["--trace", path.to_str().unwrap(), "--trace-keep", "1000000"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let o = bounded(himeno(&args));
    assert_clean_error(&o, &["with its --trace"]);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "not refused up front"
    );
    assert!(!path.exists());
    // Under a memory limit, a trace that fits without one no longer does.
    const MIB: u64 = 1 << 20;
    let Ok(cg) = MemoryCgroup::new("trace-refused", 128 * MIB) else {
        return;
    };
    let mut args = many_ranks("100000");
    args.extend(["--trace", path.to_str().unwrap(), "--trace-keep", "50000"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = bounded(cg.himeno(&args));
    assert_clean_error(&o, &["with its --trace"]);
}

/// `cmd` with files limited to `bytes` (`ulimit -f`), a write past it
/// failing with EFBIG rather than raising SIGXFSZ.
fn with_file_size_limit(mut cmd: Command, bytes: u64) -> Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal and setrlimit are async-signal-safe; nothing else
    // runs in the child between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    cmd
}

#[test]
fn a_trace_that_cannot_be_written_costs_only_the_trace() {
    let dir = temp_file("trace", "full-disk");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.json");
    let results = dir.join("r.jsonl");
    std::fs::write(&trace, "an earlier good trace").unwrap();
    // The trace outgrows the file size limit; the record does not.
    let cmd = himeno(&[
        "--local-ranks",
        "4",
        "--grid",
        "18x18x18",
        "--iterations",
        "300",
        // One exchange per sweep: --temporal auto's choice would change
        // how many events the trace holds, and so whether it fits.
        "--temporal",
        "1",
        "--format",
        "json",
        "--trace",
        trace.to_str().unwrap(),
        "--output",
        results.to_str().unwrap(),
    ]);
    let o = bounded(with_file_size_limit(cmd, 256 << 10));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let report: Value = serde_json::from_str(&stdout(&o)).expect("the record on stdout");
    let warning = report["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains("t.json was not written"), "{report}");
    assert_eq!(report["complete"], true);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("himeno: warning: the trace"), "{err}");
    let appended = std::fs::read_to_string(&results).unwrap();
    assert_eq!(appended.lines().count(), 1);
    assert!(appended.contains("was not written"), "{appended}");
    assert_eq!(
        std::fs::read_to_string(&trace).unwrap(),
        "an earlier good trace"
    );
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "a half-written trace was left: {names:?}");
}

#[test]
fn a_stopped_run_keeps_its_record_while_its_trace_is_written() {
    // The stop comes at iteration 1500; writing the trace of 64 ranks'
    // 1500 iterations takes far longer than the grace, which then counts
    // from the end of the write.
    let path = temp_file("trace", "stopped.json");
    let mut args = many_ranks("1000000");
    args.extend(["--trace", path.to_str().unwrap(), "--trace-keep", "1000"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = himeno(&args);
    cmd.env("HIMENO_FAULT", "0:1500:term")
        .env("HIMENO_STOP_GRACE", "0.2");
    let o = bounded(cmd);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("still running"), "{err}");
    let report: Value = serde_json::from_str(&stdout(&o)).expect("the record on stdout");
    assert_eq!(report["complete"], false);
    let t = load(&path);
    assert_eq!(t["otherData"]["run"]["iterations"], report["iterations"]);
}

#[test]
fn a_restarted_runs_trace_keeps_its_own_first_iterations() {
    let dir = temp_file("trace", "restart-ckpt");
    let _ = std::fs::remove_dir_all(&dir);
    let path = temp_file("trace", "restarted.json");
    let args = |more: &[&str]| {
        let mut a = vec![
            "--grid",
            "13x13x13",
            "--iterations",
            "20",
            "--format",
            "json",
            "--checkpoint-dir",
            dir.to_str().unwrap(),
        ];
        a.extend_from_slice(more);
        let mut c = himeno(&a);
        c.env_remove("HIMENO_FAULT");
        c
    };
    let mut stopped = args(&[]);
    stopped.env("HIMENO_FAULT", "0:6:term");
    let o = bounded(stopped);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = bounded(args(&[
        "--restart",
        "latest",
        "--trace",
        path.to_str().unwrap(),
        "--trace-keep",
        "2",
    ]));
    let report = json_ok(&o);
    let from = report["restarted_from"]["iteration"].as_u64().unwrap();
    let t = load(&path);
    let timed: std::collections::BTreeSet<u64> = complete(&t)
        .into_iter()
        .filter(|e| e["cat"] == "timed")
        .map(|e| e["args"]["iteration"].as_u64().unwrap())
        .collect();
    let want: std::collections::BTreeSet<u64> = [from + 1, from + 2, 19, 20].into();
    assert_eq!(timed, want);
    assert_eq!(t["otherData"]["run"]["restarted_from"], from);
    let kept = t["otherData"]["kept"].as_str().unwrap();
    assert!(
        kept.contains(&format!("iterations {} to 18 were dropped", from + 3)),
        "{kept}"
    );
}

/// `himeno report --timeline PATH`.
fn timeline_of(path: &Path) -> Output {
    bounded(himeno(&[
        "report",
        "--timeline",
        path.to_str().unwrap(),
        "--plot",
        temp_file("trace", "hostile-plots").to_str().unwrap(),
    ]))
}

#[test]
fn the_timeline_reads_any_file_in_bounded_time_and_memory() {
    let (_, good, _) = traced_at(Launcher::Local, 1, "4", &[]);
    let dir = temp_file("trace", "hostile").with_extension("d");
    std::fs::create_dir_all(&dir).unwrap();
    // One rank: its halo sums are empty, which printed as -0.000.
    let g = dir.join("good.json");
    std::fs::write(&g, good.to_string()).unwrap();
    let out = stdout_ok(&timeline_of(&g));
    assert!(!out.contains("-0"), "{out}");
    let first_x = good["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .position(|e| e["ph"] == "X" && e["cat"] == "timed")
        .unwrap();
    // Every number a timeline uses, at values no trace holds.
    let mut members: Vec<(&str, Value)> = Vec::new();
    for ranks in [
        serde_json::json!(1_000_000),
        serde_json::json!(240_000_000),
        serde_json::json!(u64::MAX),
        serde_json::json!(-1),
        serde_json::json!(1.5),
        serde_json::json!("many"),
    ] {
        let mut t = good.clone();
        t["otherData"]["ranks"] = ranks;
        members.push(("ranks", t));
    }
    for (field, value) in [
        ("ts", serde_json::json!(1e300)),
        ("ts", serde_json::json!(-1e300)),
        ("dur", serde_json::json!(-5.0)),
        ("dur", serde_json::json!(1e300)),
        ("pid", serde_json::json!(-1)),
        ("pid", serde_json::json!(7)),
        ("pid", serde_json::json!(1e19)),
        ("tid", serde_json::json!(-1)),
        ("ts", serde_json::json!("soon")),
    ] {
        let mut t = good.clone();
        t["traceEvents"][first_x][field] = value;
        members.push((field, t));
    }
    let mut t = good.clone();
    t["traceEvents"][first_x]["args"]["iteration"] = serde_json::json!(-3);
    members.push(("iteration", t));
    let mut t = good.clone();
    t["otherData"]["run"]["grid"] = serde_json::json!("x".repeat(100_000));
    members.push(("grid", t));
    for (n, (what, t)) in members.into_iter().enumerate() {
        let p = dir.join(format!("member-{n}.json"));
        std::fs::write(&p, t.to_string()).unwrap();
        let o = timeline_of(&p);
        eprintln!("member {n}: {what}");
        assert_clean_error(&o, &["cannot read the trace"]);
        assert!(stderr(&o).starts_with("himeno:"), "{what}: {}", stderr(&o));
    }
    // Not numbers JSON can hold, nesting past the parser's limit.
    let text = good.to_string();
    let nan = text.replacen("\"dur\":", "\"dur\":NaN,\"x\":", 1);
    let deep = format!("{{\"traceEvents\":[{}", "[".repeat(1_000_000));
    for (n, bad) in [nan, deep].into_iter().enumerate() {
        let p = dir.join(format!("text-{n}.json"));
        std::fs::write(&p, bad).unwrap();
        assert_clean_error(&timeline_of(&p), &["cannot read the trace"]);
    }
    // Files that never end, block, are no file, or are too large to read.
    let fifo = dir.join("fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let huge = dir.join("huge.json");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(5 << 30).unwrap();
    let zeros = dir.join("zeros.json");
    std::fs::File::create(&zeros)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    for p in [
        fifo.as_path(),
        Path::new("/dev/zero"),
        dir.as_path(),
        &huge,
        &zeros,
    ] {
        assert_clean_error(&timeline_of(p), &["cannot read the trace"]);
    }
    std::fs::remove_file(&huge).unwrap();
    std::fs::remove_file(&zeros).unwrap();
}
