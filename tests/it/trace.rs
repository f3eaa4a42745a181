//! `--trace FILE`: the merged multi-rank Chrome trace (under `mpirun` and
//! with in-process ranks) as ui.perfetto.dev reads it, its sums against the
//! report's phase table, its clock alignment, its bound on long runs and
//! on memory, a write that fails or outlasts the stop grace, and the
//! timeline plot `himeno report --timeline` draws from it (from any file,
//! in bounded time and memory).

use crate::both::trace::bounded;
use crate::both::trace::{traced, traced_at};
use crate::common::trace::*;
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

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
