//! Hostile conditions, class by class: a standard output that fails, a
//! memory limit, numbers and files that would make work unbounded, blocked
//! writers, ranks that disagree, a broken MPI start. Every case must end
//! within its time limit with exit 2 (or 1 for a wrong answer), one
//! `himeno:` line per error on stderr, no panic, and exactly the records
//! it should have appended.

use crate::common::*;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// A fresh, empty scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("himeno-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What a run with a chosen standard output left behind.
struct Ended {
    status: ExitStatus,
    stderr: String,
}

/// Where the run's standard output goes.
enum Out {
    /// A file opened for writing (e.g. `/dev/full`).
    File(&'static str),
    /// A pipe whose reading end is closed before the run writes (`| true`).
    ClosedPipe,
}

/// The writing end of a pipe whose reading end is already closed: every
/// write to it fails with EPIPE, as in `himeno | true` once `true` exits.
fn closed_pipe() -> Stdio {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe() fills both descriptors on success; each is owned once.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// Runs `cmd` with its standard output at `out` and stderr captured, with
/// a time limit; a run that has to be killed fails the test.
fn run_out(mut cmd: Command, out: Out, limit: Duration) -> Ended {
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    match out {
        Out::File(path) => {
            let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            cmd.stdout(f);
        }
        Out::ClosedPipe => {
            cmd.stdout(closed_pipe());
        }
    }
    let mut child = cmd.spawn().expect("the command starts");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = wait_or_kill(&mut child, limit, &cmd, String::new);
    Ended {
        status,
        stderr: reader.join().unwrap(),
    }
}

/// Asserts exit code `code`, exactly `lines` `himeno:` lines on stderr
/// (each containing its word), and no panic.
fn assert_told(e: &Ended, code: i32, words: &[&str]) {
    let ours: Vec<&str> = e
        .stderr
        .lines()
        .filter(|l| l.starts_with("himeno:"))
        .collect();
    assert_eq!(e.status.code(), Some(code), "stderr:\n{}", e.stderr);
    assert_eq!(ours.len(), words.len(), "stderr:\n{}", e.stderr);
    for (line, word) in ours.iter().zip(words) {
        assert!(line.contains(word), "'{line}' lacks '{word}'");
    }
    assert!(!e.stderr.contains("panicked"), "{}", e.stderr);
    assert!(!e.stderr.contains("RUST_BACKTRACE"), "{}", e.stderr);
}

/// The records of a results file.
fn records(file: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a whole record"))
        .collect()
}

const LIMIT: Duration = Duration::from_secs(60);

// ---- Class 4: a standard output that fails --------------------------------

#[test]
fn a_closed_stdout_still_appends_the_record() {
    let dir = scratch("closed-stdout");
    let file = dir.join("r.jsonl");
    let f = file.to_str().unwrap();
    for format in ["text", "json", "csv"] {
        let cmd = himeno(&[
            "--grid",
            "9x9x9",
            "--iterations",
            "5",
            "--format",
            format,
            "--output",
            f,
        ]);
        let e = run_out(cmd, Out::ClosedPipe, LIMIT);
        assert_told(&e, 2, &["cannot write the report to standard output"]);
    }
    let recs = records(&file);
    assert_eq!(recs.len(), 3, "one record per run");
    assert!(recs.iter().all(|r| r["complete"] == true));
}

#[test]
fn a_full_stdout_with_a_wrong_answer_is_still_exit_1_and_recorded() {
    let dir = scratch("full-invalid");
    let file = dir.join("r.jsonl");
    let mut cmd = himeno(&[
        "--grid",
        "9x10x11",
        "--iterations",
        "50",
        "--output",
        file.to_str().unwrap(),
    ]);
    cmd.env("HIMENO_FAULT", "0:50:perturb");
    let e = run_out(cmd, Out::File("/dev/full"), LIMIT);
    assert_told(&e, 1, &["verification FAILED", "standard output"]);
    let recs = records(&file);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["verified"], false);
}

#[test]
fn every_command_turns_a_failed_stdout_into_exit_2() {
    let dir = scratch("stdout-commands");
    let results = dir.join("r.jsonl");
    std::fs::write(&results, real_record(&dir, "s", "1x1x1", 1) + "\n").unwrap();
    let study = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/inputs/studies/local-strong.env"
    );
    let trace = dir.join("t.json");
    let trace = trace.to_str().unwrap();
    stdout_ok(&run(himeno(&[
        "--grid",
        "9x9x9",
        "--iterations",
        "2",
        "--trace",
        trace,
    ])));
    let plots = dir.join("plots");
    let plots = plots.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["report", results.to_str().unwrap()],
        vec!["report", results.to_str().unwrap(), "--format", "json"],
        vec!["--grid", "5x5x5", "--iterations", "1"],
        vec!["selftest", "--grid", "5x5x5"],
        vec![
            "model",
            "--grid",
            "12x12x12",
            "--rate-mflops",
            "100",
            "--ranks",
            "1",
        ],
        vec!["bench", "stream", "--elements", "1000", "--repeats", "2"],
        vec!["--help"],
        vec!["--version"],
        vec!["report", "--help"],
        vec!["bench", "trace", "--laps", "1000", "--repeats", "1"],
        vec![
            "bench",
            "pingpong",
            "--local-ranks",
            "2",
            "--max-bytes",
            "8",
        ],
        vec!["plan", study],
        vec!["report", "--timeline", trace, "--plot", plots],
    ];
    for args in &commands {
        for out in [Out::File("/dev/full"), Out::ClosedPipe] {
            let e = run_out(himeno(args), out, LIMIT);
            assert_told(&e, 2, &["standard output"]);
        }
    }
}

#[test]
fn a_full_stderr_is_no_panic() {
    // Both streams full: nothing can be told, but the exit code still says
    // what happened, and nothing panics (eprintln! would).
    let mut cmd = himeno(&["--grid", "5x5x5", "--iterations", "1"]);
    cmd.stderr(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    )
    .stdout(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    );
    let mut child = cmd.spawn().unwrap();
    let status = wait_or_kill(&mut child, LIMIT, &cmd, String::new);
    assert_eq!(status.code(), Some(2));
    let mut cmd = himeno(&["--grid", "2x5x5"]);
    cmd.stderr(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    );
    let mut child = cmd.spawn().unwrap();
    let status = wait_or_kill(&mut child, LIMIT, &cmd, String::new);
    assert_eq!(status.code(), Some(2));
}

// ---- Class 1: memory limits refused before allocating ---------------------

/// A command whose process (and so every child: mpirun's ranks) gets an
/// address-space limit of `bytes`, as `ulimit -v` sets it.
pub fn with_address_limit(mut cmd: Command, bytes: u64) -> Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the
    // child between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    cmd
}

#[test]
fn an_address_space_limit_is_refused_before_allocating() {
    let dir = scratch("ulimit");
    let file = dir.join("r.jsonl");
    let f = file.to_str().unwrap();
    const TWO_GB: u64 = 2_000_000 * 1024;
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--size", "L", "--iterations", "1", "--output", f],
            "grid 256x256x512",
        ),
        (
            vec!["selftest", "--grid", "1000x1000x1000"],
            "grid 1000x1000x1000",
        ),
        (
            vec!["bench", "stream", "--elements", "100000000"],
            "bench stream",
        ),
        (
            vec!["--grid", "300x300x300", "--iterations", "1", "--verify"],
            "grid 300x300x300",
        ),
    ];
    for (args, what) in cases {
        let o = run_with_limit(with_address_limit(himeno(&args), TWO_GB), LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &[what]);
        assert!(e.stderr.contains("ulimit -v"), "{}", e.stderr);
        assert!(o.stdout.is_empty());
    }
    assert!(!file.exists(), "nothing ran, nothing is recorded");
    if MPI {
        let mut cmd = mpirun(2, &["--size", "L", "--procs", "1x1x2", "--iterations", "1"]);
        cmd.env_remove("HIMENO_FAULT");
        let o = run_with_limit(with_address_limit(cmd, TWO_GB / 2), LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &["ulimit -v"]);
    }
}

#[test]
fn stream_and_pingpong_sizes_beyond_memory_are_refused() {
    for args in [
        &["bench", "stream", "--elements", "100000000000"][..],
        &["bench", "stream", "--elements", "18446744073709551615"],
    ] {
        let o = run_with_limit(himeno(args), LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &["elements"]);
    }
}

// ---- Class 2: work bounded whatever the numbers and files -----------------

/// One real record line, from a short labelled run.
fn real_record(dir: &Path, label: &str, procs: &str, np: usize) -> String {
    let file = dir.join(format!("rec-{np}.jsonl"));
    let _ = std::fs::remove_file(&file);
    let args = [
        "--grid",
        "12x12x12",
        "--procs",
        procs,
        "--iterations",
        "2",
        "--threads",
        "1",
        "--label",
        label,
        "--format",
        "json",
        "--output",
        file.to_str().unwrap(),
    ];
    let cmd = if np > 1 {
        mpirun(np, &args)
    } else {
        himeno(&args)
    };
    json_ok(&run(cmd));
    std::fs::read_to_string(&file).unwrap().trim().to_string()
}

#[test]
fn a_record_with_huge_numbers_is_skipped_and_the_plots_still_drawn() {
    let dir = scratch("plot-huge");
    let good = real_record(&dir, "huge", "1x1x1", 1);
    let mut huge: serde_json::Value = serde_json::from_str(&good).unwrap();
    huge["per_rank"][0]["phases_s"]["compute"] = 1e308.into();
    let mut overflow: serde_json::Value = serde_json::from_str(&good).unwrap();
    overflow["procs"] = serde_json::json!([4294967296u64, 4294967296u64, 2]);
    overflow["ranks"] = 0.into();
    let file = dir.join("r.jsonl");
    std::fs::write(&file, format!("{good}\n{huge}\n{overflow}\n[1,2,3]\n")).unwrap();
    let plots = dir.join("plots");
    let o = run_with_limit(
        himeno(&[
            "report",
            file.to_str().unwrap(),
            "--plot",
            plots.to_str().unwrap(),
        ]),
        LIMIT,
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let f = file.to_str().unwrap();
    for line in [2, 3, 4] {
        assert!(err.contains(&format!("skipped {f}:{line}")), "{err}");
    }
    assert!(err.contains("compute 1e308"), "{err}");
    assert!(stdout(&o).contains("3 line(s) skipped"), "{}", stdout(&o));
    let pictures = std::fs::read_dir(&plots).unwrap().count();
    assert_eq!(pictures, 6, "three pictures, SVG and PNG");
}

#[test]
fn the_model_of_sixteen_million_ranks_is_immediate() {
    let o = run_with_limit(
        himeno(&[
            "model",
            "--grid",
            "1000000x1000000x1000",
            "--ranks",
            "16777216",
            "--rate-mflops",
            "100",
            "--latency-us",
            "1",
            "--bandwidth-gbs",
            "1",
            "--format",
            "json",
        ]),
        Duration::from_secs(20),
    );
    let v = json_ok(&o);
    assert_eq!(v["ranks"], 16777216);
    assert!(v["prediction"]["total_s"].as_f64().unwrap() > 0.0);
}

// ---- Class 3: every wait listens to stop signals and is bounded -----------

use crate::signals::stop_after;

#[test]
fn a_signal_ends_the_wait_for_a_held_results_file_lock() {
    let dir = scratch("lock");
    let file = dir.join("l.jsonl");
    std::fs::write(&file, "").unwrap();
    // This test holds the lock, as `flock l sleep 20` would.
    let holder = std::fs::File::open(&file).unwrap();
    holder.lock().unwrap();
    let e = stop_after(
        himeno(&[
            "--grid",
            "9x9x9",
            "--iterations",
            "5",
            "-v",
            "--output",
            file.to_str().unwrap(),
        ]),
        "waiting for the results-file lock",
        "TERM",
    );
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    assert!(
        e.stdout.contains("Loop executed for 5 times"),
        "the report is printed: {}",
        e.stdout
    );
    let ours: Vec<&str> = e
        .stderr
        .lines()
        .filter(|l| l.starts_with("himeno:"))
        .collect();
    assert_eq!(ours.len(), 1, "{}", e.stderr);
    assert!(ours[0].contains("stopped by a signal while waiting for the lock"));
    // The record is in the message, whole, for the log.
    let json = ours[0].split("here it is: ").nth(1).expect("the record");
    let rec: serde_json::Value = serde_json::from_str(json).expect("one whole record");
    assert_eq!(rec["iterations"], 5);
    holder.unlock().unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "",
        "nothing appended"
    );
}

#[test]
fn a_fifo_without_a_reader_is_refused_before_the_run() {
    let dir = scratch("fifo");
    let fifo = dir.join("r.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let o = run_with_limit(
        himeno(&[
            "--grid",
            "9x9x9",
            "--iterations",
            "5",
            "--output",
            fifo.to_str().unwrap(),
        ]),
        LIMIT,
    );
    let e = Ended {
        status: o.status,
        stderr: stderr(&o),
    };
    assert_told(&e, 2, &["no process is reading"]);
    assert!(o.stdout.is_empty());
}

#[test]
fn a_signal_ends_the_reference_run_and_the_record_says_so() {
    let dir = scratch("reference");
    let file = dir.join("r.jsonl");
    // The fast solver does 400 iterations of 96^3 in about a second; the
    // plain reference kernel takes several times longer for them (7 s on a
    // 2-core VM), so the signal comes while it runs.
    let e = stop_after(
        himeno(&[
            "--grid",
            "96x96x96",
            "--iterations",
            "400",
            "--verify",
            "-v",
            "--format",
            "json",
            "--output",
            file.to_str().unwrap(),
        ]),
        "verifying against the reference kernel",
        "TERM",
    );
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    let r: serde_json::Value = serde_json::from_str(&e.stdout).expect("the report");
    assert_eq!(r["complete"], true);
    assert_eq!(r["verified"], serde_json::Value::Null);
    assert_eq!(r["verification"]["against"], "interrupted");
    assert!(
        e.stderr.contains("during the reference run"),
        "{}",
        e.stderr
    );
    let recs = records(&file);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["verification"]["against"], "interrupted");
}

#[test]
fn a_hung_rank_cannot_outlive_a_stop_signal() {
    const LONG: [&str; 7] = [
        "--size",
        "XS",
        "--iterations",
        "1000000",
        "--threads",
        "1",
        "-v",
    ];
    // Rank `rank` hangs at iteration 3; a second after the stop signal the
    // watchdog ends it.
    let hung = |mut cmd: Command, rank: usize| {
        cmd.env("HIMENO_FAULT", format!("{rank}:3:hang"))
            .env("HIMENO_STOP_GRACE", "1");
        cmd
    };
    let e = stop_after(hung(himeno(&LONG), 0), "injecting a fault", "TERM");
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    assert!(
        e.stderr.contains("still running 1 s after a stop signal"),
        "{}",
        e.stderr
    );
    if MPI {
        // Rank 1 hangs; the others wait for it in the allreduce. SIGUSR1
        // to mpirun reaches every rank, and the watchdogs end the job
        // through MPI_Abort. They once left with _exit(2), and MPICH's
        // mpiexec then exited 0 about one time in ten (it records 0 for a
        // rank it sees leave only after it began killing the job): a few
        // tries show such a race.
        for _ in 0..3 {
            let e = stop_after(hung(mpirun(3, &LONG), 1), "injecting a fault", "USR1");
            assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
            assert!(e.stderr.contains("after a stop signal"), "{}", e.stderr);
        }
    }
}

#[test]
fn a_rank_stuck_before_the_agreement_cannot_outlive_a_stop_signal() {
    // Rank 1 hangs before the ranks agree on the run, and the others wait
    // for it there. The stop grace applies from the start: once it did only
    // after the agreement, and the default 60 s ended such a job.
    let args = ["--grid", "9x9x9", "--iterations", "2", "-v"];
    let stuck = |mut cmd: Command| {
        cmd.env("HIMENO_FAULT", "1:start:hang")
            .env("HIMENO_STOP_GRACE", "1");
        cmd
    };
    let mut launches = vec![(
        {
            let mut all = vec!["--local-ranks", "2"];
            all.extend(args);
            himeno(&all)
        },
        "TERM",
    )];
    if MPI {
        launches.push((mpirun(2, &args), "USR1"));
    }
    for (cmd, sig) in launches {
        let started = std::time::Instant::now();
        let e = stop_after(stuck(cmd), "injecting a fault at the start", sig);
        assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
        assert!(e.stderr.contains("1 s after a stop signal"), "{}", e.stderr);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(30), "took {took:?}");
    }
}

#[test]
fn a_malformed_stop_grace_is_a_usage_error() {
    for bad in ["0", "-1", "soon", "1e9", "1e-300", "0.0001"] {
        let mut cmd = himeno(&["--grid", "5x5x5", "--iterations", "1"]);
        cmd.env("HIMENO_STOP_GRACE", bad);
        let o = run_with_limit(cmd, LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &["HIMENO_STOP_GRACE"]);
    }
}

// ---- Class 5: arguments that are not UTF-8 are legal ----------------------

#[test]
fn paths_and_labels_need_not_be_utf8() {
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let dir = scratch("not-utf8");
    let mut name = dir.as_os_str().as_bytes().to_vec();
    name.extend_from_slice(b"/r\xff\xfe.jsonl");
    let file = OsString::from_vec(name);
    let label = OsString::from_vec(b"study-\xff".to_vec());
    let args: Vec<OsString> = [
        "--grid",
        "9x9x9",
        "--iterations",
        "2",
        "--format",
        "json",
        "--label",
    ]
    .iter()
    .map(OsString::from)
    .chain([label, "--output".into(), file.clone()])
    .collect();
    let mut cmd = Command::new(BIN);
    cmd.args(&args);
    let r = json_ok(&run(cmd));
    assert_eq!(r["label"], "study-\u{fffd}");
    let command: Vec<String> = serde_json::from_value(r["provenance"]["command"].clone()).unwrap();
    assert!(
        command
            .iter()
            .any(|a| a.contains("r\u{fffd}\u{fffd}.jsonl")),
        "{command:?}"
    );
    let recs = records(Path::new(&file));
    assert_eq!(recs.len(), 1);
    if MPI {
        let mut cmd = mpirun(2, &[]);
        cmd.args(&args);
        json_ok(&run(cmd));
        assert_eq!(records(Path::new(&file)).len(), 2);
    }
    // The tools read and write such paths too.
    let mut plots = dir.as_os_str().as_bytes().to_vec();
    plots.extend_from_slice(b"/plots\xff");
    let mut cmd = Command::new(BIN);
    cmd.arg("report")
        .arg(&file)
        .arg("--plot")
        .arg(OsString::from_vec(plots));
    let out = stdout_ok(&run(cmd));
    assert!(out.contains("study-\u{fffd}"), "{out}");
    let mut cmd = Command::new(BIN);
    cmd.args(["--grid".into(), OsString::from_vec(b"9x9x9\xff".to_vec())]);
    let o = run(cmd);
    let e = Ended {
        status: o.status,
        stderr: stderr(&o),
    };
    assert_told(&e, 2, &["not valid UTF-8"]);
}

// ---- Class 6: ranks that disagree stop together ---------------------------

/// `mpirun` with one rank per argument list (an MPMD launch).
fn mpmd(per_rank: &[&[&str]]) -> Command {
    let mut c = mpirun(1, per_rank[0]);
    for args in &per_rank[1..] {
        c.args([":", "-np", "1", BIN]).args(*args);
    }
    c
}

#[test]
fn ranks_that_disagree_or_refuse_stop_together_with_one_line() {
    if !MPI {
        return;
    }
    let dir = scratch("disagree");
    let file = dir.join("r.jsonl");
    let f = file.to_str().unwrap();
    let base = ["--grid", "9x9x9", "--output", f, "--iterations"];
    let with = |n: &'static str| -> Vec<&str> {
        let mut v = base.to_vec();
        v.push(n);
        v
    };
    let (five, zero, seven, abc) = (with("5"), with("0"), with("7"), with("abc"));
    let mut labelled = five.clone();
    labelled.extend(["--label", "x"]);
    let selftest = ["selftest", "--grid", "9x9x9"];
    let lines: [(&[&[&str]], &str); 6] = [
        (
            &[&five, &zero],
            "rank 1 of 2: --iterations must be at least 1",
        ),
        (
            &[&zero, &five],
            "rank 0 of 2: --iterations must be at least 1",
        ),
        (&[&five, &seven], "rank 1 resolved a different run length"),
        (&[&five, &abc], "rank 1 of 2: invalid value 'abc'"),
        (&[&five, &selftest], "rank 1 resolved a different command"),
        (
            &[&five, &five, &labelled],
            "rank 2 resolved a different label",
        ),
    ];
    for (ranks, want) in lines {
        let o = run_with_limit(mpmd(ranks), LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &[want]);
        assert!(o.stdout.is_empty(), "{}", stdout(&o));
    }
    assert!(!file.exists(), "no rank ran, nothing is recorded");
    // Threads may differ from rank to rank (nodes of different sizes).
    let one = [
        "--grid",
        "9x9x9",
        "--iterations",
        "2",
        "--threads",
        "1",
        "--format",
        "json",
    ];
    let two = [
        "--grid",
        "9x9x9",
        "--iterations",
        "2",
        "--threads",
        "2",
        "--format",
        "json",
    ];
    json_ok(&run_with_limit(mpmd(&[&one, &two]), LIMIT));
}

// ---- Class 7: a failed MPI start is exit 2, not 1 -------------------------

#[test]
fn a_failed_mpi_start_is_exit_2_with_a_himeno_line() {
    if !MPI {
        return;
    }
    // A start that fails in either MPI library: Open MPI cannot find the
    // named messaging component, MPICH cannot reach its process manager
    // (each library ignores the other's setting).
    let broken = |args: &[&str]| {
        let mut cmd = himeno(args);
        cmd.env("OMPI_MCA_pml", "doesnotexist")
            .env("PMI_PORT", "127.0.0.1:1");
        cmd
    };
    let alone = broken(&["--grid", "5x5x5", "--iterations", "2"]);
    let stream = broken(&["bench", "stream", "--elements", "1000"]);
    // (Under mpirun, Open MPI's launcher exits 1 for a failed start of its
    // ranks whatever their own exit codes: that one is not ours to set.)
    for cmd in [alone, stream] {
        let o = run_with_limit(cmd, LIMIT);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("himeno:")).collect();
        assert_eq!(ours.len(), 1, "{err}");
        assert!(ours[0].contains("MPI could not start"), "{err}");
        assert!(o.stdout.is_empty());
    }
}

// ---- Class 9: small ones ---------------------------------------------------

#[test]
fn plots_of_lookalike_and_long_labels_never_collide_or_fail() {
    let dir = scratch("plot-names");
    let long = "x".repeat(300);
    let mut lines = Vec::new();
    for label in ["study 1", "study_1", "study/1", long.as_str()] {
        lines.push(real_record(&dir, label, "1x1x1", 1));
    }
    let file = dir.join("r.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let plots = dir.join("plots");
    let o = run_with_limit(
        himeno(&[
            "report",
            file.to_str().unwrap(),
            "--plot",
            plots.to_str().unwrap(),
        ]),
        LIMIT,
    );
    stdout_ok(&o);
    let names: Vec<String> = std::fs::read_dir(&plots)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 4 * 6, "{names:?}");
    assert!(names.iter().all(|n| n.len() < 200), "{names:?}");
    assert!(
        names
            .iter()
            .any(|n| n == "strong-study_1-12x12x12-cpu-t1-speedup.svg"),
        "a plain label keeps its plain name: {names:?}"
    );
}

#[test]
fn a_bad_plot_folder_is_refused_before_the_tables() {
    let dir = scratch("plot-dir");
    let file = dir.join("r.jsonl");
    std::fs::write(&file, real_record(&dir, "p", "1x1x1", 1) + "\n").unwrap();
    let not_a_dir = dir.join("plain-file");
    std::fs::write(&not_a_dir, "").unwrap();
    for bad in [
        not_a_dir.join("sub"),
        not_a_dir.clone(),
        "/proc/himeno-plots".into(),
    ] {
        let o = run_with_limit(
            himeno(&[
                "report",
                file.to_str().unwrap(),
                "--plot",
                bad.to_str().unwrap(),
            ]),
            LIMIT,
        );
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &["--plot DIR"]);
        assert!(o.stdout.is_empty(), "tables printed before: {}", stdout(&o));
    }
}

#[test]
fn a_results_file_name_of_250_bytes_is_accepted() {
    let dir = scratch("long-name");
    let file = dir.join("r".repeat(244) + ".jsonl");
    let o = run(himeno(&[
        "--grid",
        "9x9x9",
        "--iterations",
        "1",
        "--output",
        file.to_str().unwrap(),
    ]));
    stdout_ok(&o);
    assert_eq!(records(&file).len(), 1);
}

#[test]
fn tools_under_mpirun_print_once() {
    if !MPI {
        return;
    }
    let dir = scratch("tools-mpirun");
    let file = dir.join("r.jsonl");
    std::fs::write(&file, real_record(&dir, "m", "1x1x1", 1) + "\n").unwrap();
    let report = stdout_ok(&run(mpirun(3, &["report", file.to_str().unwrap()])));
    assert_eq!(report.matches("== strong scaling").count(), 1, "{report}");
    let model = stdout_ok(&run(mpirun(
        3,
        &["model", "--grid", "12x12x12", "--rate-mflops", "100"],
    )));
    assert_eq!(model.matches("model: grid").count(), 1, "{model}");
}

// ---- Found by comparison with the original codes --------------------------

#[test]
fn run_job_keeps_its_default_size_unless_the_size_is_named() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/run-job.sh");
    let cases: [(&[&str], &str); 5] = [
        (&[], "himeno --size L"),
        (&["--seconds", "20"], "himeno --size L --seconds 20"),
        (
            &["--size", "M", "--seconds", "10"],
            "himeno --size M --seconds 10",
        ),
        (&["--grid=9x9x9"], "himeno --grid=9x9x9"),
        (
            &["run", "--seconds", "5"],
            "himeno run --size L --seconds 5",
        ),
    ];
    for (args, want) in cases {
        let mut cmd = Command::new("bash");
        cmd.arg(&script).args(args).env("DRY_RUN", "1");
        let out = stdout_ok(&run(cmd));
        assert!(out.trim_end().ends_with(want), "{args:?}: {out}");
    }
}

#[test]
fn the_original_lines_have_the_original_number_formats() {
    let out = stdout_ok(&run(himeno(&["--size", "XS", "--iterations", "3"])));
    let line = |head: &str| {
        out.lines()
            .find(|l| l.starts_with(head))
            .unwrap_or_else(|| panic!("no '{head}' in {out}"))
            .to_string()
    };
    // printf(" Gosa : %e \n"), (" MFLOPS measured : %f\tcpu : %f\n"),
    // (" Score based on Pentium III 600MHz : %f\n").
    let gosa = line(" Gosa : ");
    let value = gosa.strip_prefix(" Gosa : ").unwrap();
    let (mantissa, exp) = value.trim_end().split_once('e').unwrap();
    assert!(gosa.ends_with(' '), "{gosa:?}");
    assert_eq!(mantissa.split_once('.').unwrap().1.len(), 6, "{gosa}");
    assert!(
        exp.len() == 3 && (exp.starts_with('-') || exp.starts_with('+')),
        "{gosa}"
    );
    let mflops = line(" MFLOPS measured : ");
    let (m, cpu) = mflops.split_once("\tcpu : ").unwrap();
    for v in [m.rsplit(' ').next().unwrap(), cpu] {
        assert_eq!(v.split_once('.').unwrap().1.len(), 6, "{mflops}");
    }
    let score = line(" Score based on Pentium III 600MHz : ");
    assert_eq!(score.rsplit_once('.').unwrap().1.len(), 6, "{score}");
}

// ---- Round III, class 1: a rank that cannot start --------------------------

/// `himeno ARGS` under `ulimit -u n` (processes and threads of its user).
/// Root is not bound by that limit, so as root the run is user nobody's.
fn with_thread_limit(n: usize, args: &[&str]) -> Command {
    let script = format!("ulimit -u {n} && exec \"$0\" \"$@\"");
    // SAFETY: geteuid only reads the process's credentials.
    let mut cmd = if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash"]);
        c
    } else {
        Command::new("bash")
    };
    cmd.args(["-c", &script, BIN]).args(args);
    cmd
}

#[test]
fn a_rank_whose_thread_is_refused_ends_the_job_at_once() {
    const RANKS: [&str; 4] = ["--local-ranks", "16", "--threads", "1"];
    let tiny = ["--grid", "22x22x22", "--iterations", "2"];
    let commands: [&[&str]; 4] = [
        &tiny,
        &["selftest", "--grid", "22x22x22"],
        &["bench", "stream", "--elements", "1000"],
        &["bench", "pingpong", "--max-bytes", "8"],
    ];
    for command in commands {
        let mut args = command.to_vec();
        // The rank options belong to the subcommand, after its name.
        args.extend(if command == tiny {
            &RANKS[..]
        } else {
            &RANKS[..2]
        });
        let started = std::time::Instant::now();
        let e = run_out(with_thread_limit(8, &args), Out::File("/dev/null"), LIMIT);
        assert_told(&e, 2, &["start"]);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{args:?} took {:?}",
            started.elapsed()
        );
    }
}

// ---- Round III, class 7: the verdict decides the code, not stderr ----------

#[test]
fn a_full_stderr_does_not_change_the_exit_code() {
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let cases: [(&str, &[&str], i32); 3] = [
        ("0:2:nan", &["--grid", "30x30x30", "--iterations", "10"], 1),
        (
            "0:2:perturb",
            &["--grid", "30x30x30", "--iterations", "10", "--verify"],
            1,
        ),
        (
            "2:2:panic",
            &[
                "--grid",
                "30x30x30",
                "--iterations",
                "10",
                "--local-ranks",
                "4",
            ],
            2,
        ),
    ];
    for (fault, args, code) in cases {
        let mut child = himeno(args)
            .env("HIMENO_FAULT", fault)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(full())
            .spawn()
            .unwrap();
        let status = wait_or_kill(&mut child, LIMIT, &(fault, args), String::new);
        assert_eq!(status.code(), Some(code), "{fault} {args:?}: {status:?}");
    }
}

// ---- Round III, class 5: a standard output closed at start -----------------

#[test]
fn a_standard_output_closed_at_start_is_exit_2_for_every_command() {
    let dir = scratch("closed-at-start");
    let study = dir.join("study.txt");
    std::fs::write(&study, "NAME s\nSIZES XS\nITERATIONS 1\n").unwrap();
    let results = dir.join("r.jsonl");
    let study = study.to_str().unwrap();
    let commands: [&[&str]; 10] = [
        &["--grid", "9x9x9", "--iterations", "2"],
        &["--grid", "9x9x9", "--iterations", "2", "--local-ranks", "3"],
        &["selftest", "--grid", "9x9x9"],
        &["bench", "stream", "--elements", "1000"],
        &[
            "bench",
            "pingpong",
            "--local-ranks",
            "2",
            "--max-bytes",
            "8",
        ],
        &["model", "--size", "S", "--ranks", "4"],
        &["plan", study],
        &["report", "/dev/null"],
        &["--version"],
        &["--help"],
    ];
    for args in commands {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exec \"$0\" \"$@\" >&-", BIN]).args(args);
        let e = run_out(cmd, Out::File("/dev/null"), LIMIT);
        assert_told(&e, 2, &["standard output is closed"]);
    }
    // The run is refused before it starts: no record.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "exec \"$0\" \"$@\" >&-", BIN])
        .args(["--grid", "9x9x9", "--iterations", "2", "--output"])
        .arg(&results);
    assert_told(&run_out(cmd, Out::File("/dev/null"), LIMIT), 2, &["closed"]);
    assert!(records(&results).is_empty());
    // A standard output on /dev/null, chosen, is no error.
    let cmd = himeno(&["--grid", "9x9x9", "--iterations", "2"]);
    assert_told(&run_out(cmd, Out::File("/dev/null"), LIMIT), 0, &[]);
}

// ---- Round III, class 3: files that are not regular, or unbounded ---------

#[test]
fn a_fifo_or_device_named_as_an_input_is_refused_at_once() {
    let dir = scratch("input-fifo");
    let fifo = dir.join("in.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let fifo = fifo.to_str().unwrap();
    let model = ["model", "--size", "S", "--ranks", "4"];
    let cases: Vec<Vec<&str>> = vec![
        vec!["plan", fifo],
        vec!["plan", "/dev/zero"],
        vec!["report", fifo],
        vec!["report", "/dev/zero", "--model-pingpong", fifo],
        [&model[..], &["--rate-mflops", "100", "--pingpong", fifo]].concat(),
        [
            &model[..],
            &[
                "--results",
                fifo,
                "--latency-us",
                "1",
                "--bandwidth-gbs",
                "1",
            ],
        ]
        .concat(),
    ];
    for args in cases {
        let started = std::time::Instant::now();
        let e = run_out(himeno(&args), Out::File("/dev/null"), LIMIT);
        assert_told(&e, 2, &["not a regular file"]);
        assert!(started.elapsed() < Duration::from_secs(10), "{args:?}");
    }
}

#[test]
fn a_study_of_millions_of_runs_is_refused_before_it_is_expanded() {
    let dir = scratch("huge-study");
    let study = dir.join("big.env");
    let sizes: Vec<String> = (0..2000).map(|i| format!("{}x9x9", i + 3)).collect();
    let ranks: Vec<String> = (1..=2000).map(|r| r.to_string()).collect();
    std::fs::write(
        &study,
        format!(
            "NAME=big\nSIZES={}\nRANKS={}\n",
            sizes.join(" "),
            ranks.join(" ")
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let e = run_out(
        himeno(&["plan", study.to_str().unwrap()]),
        Out::File("/dev/null"),
        LIMIT,
    );
    assert_told(&e, 2, &["4000000 runs"]);
    assert!(started.elapsed() < Duration::from_secs(10));
    // Several studies that are each small enough still make one plan of
    // at most that many runs.
    let part = dir.join("part.env");
    std::fs::write(
        &part,
        format!(
            "NAME=part\nSIZES={}\nRANKS=1 2 4 8\n",
            sizes[..1500].join(" ")
        ),
    )
    .unwrap();
    let part = part.to_str().unwrap();
    let e = run_out(himeno(&["plan", part, part]), Out::File("/dev/null"), LIMIT);
    assert_told(&e, 2, &["more than 10000 runs"]);
}

// ---- Round III, class 2: memory counted from what allocates it ------------

/// Mebibytes, for the tolerances below.
const MIB: f64 = (1u64 << 20) as f64;

#[test]
fn the_memory_estimate_holds_what_the_buffers_take() {
    // (arguments, whether its big buffers ask for huge pages). A huge page
    // the kernel cannot find is a base page: the estimate then counts more
    // than is taken, so it is held to the lower bound only where the huge
    // pages were granted or none were asked for.
    let cases: [(&[&str], bool); 5] = [
        (&["--size", "S"], true),
        // The wavefront's per-thread buffers beside the fields.
        (&["--size", "M", "--temporal", "8", "--threads", "2"], true),
        // Mostly those buffers: four threads' worth over small fields.
        (
            &["--grid", "200x4x200", "--temporal", "8", "--threads", "4"],
            false,
        ),
        // In-process ranks share one process, its baseline and peak.
        (
            &["--local-ranks", "4", "--size", "S", "--threads", "2"],
            false,
        ),
        (&["--local-ranks", "64", "--grid", "22x22x22"], false),
    ];
    for (args, huge) in cases {
        let mut all = args.to_vec();
        all.extend(["--iterations", "3", "--format", "json"]);
        let r = json_ok(&run_with_limit(himeno(&all), LIMIT));
        let ranks = r["per_rank"].as_array().unwrap();
        let mem = |r: &serde_json::Value, k: &str| r["memory"][k].as_f64().unwrap();
        let estimate: f64 = ranks.iter().map(|x| mem(x, "estimated_bytes")).sum();
        let taken = mem(&ranks[0], "peak_bytes") - mem(&ranks[0], "baseline_bytes");
        let granted = ranks[0]["huge_pages"].as_f64().unwrap_or(0.0) >= 0.75;
        // Many in-process ranks allocate and free their small buffers from
        // many threads at once, and glibc's per-thread arenas fragment:
        // 64 ranks of 22^3 (16.1 MiB estimated) took 16.5-23 MiB in six
        // concurrent runs on a loaded 2-core machine, once 32 MiB under a
        // full test suite. The allocator's share is not the estimate's to
        // model, so it gets a quarter MiB per rank beyond the first.
        let slack = 3.0 * MIB + 0.25 * MIB * (ranks.len() - 1) as f64;
        assert!(
            taken <= 1.15 * estimate + slack,
            "{args:?}: took {:.1} MiB, estimated {:.1} MiB",
            taken / MIB,
            estimate / MIB
        );
        if !huge || granted {
            assert!(
                taken >= 0.85 * estimate - slack,
                "{args:?}: took {:.1} MiB, estimated {:.1} MiB",
                taken / MIB,
                estimate / MIB
            );
        }
    }
}

#[test]
fn the_memory_estimate_is_within_a_tenth_of_the_peak_at_sizes_s_and_m() {
    // Issue 20.4's matrix: sizes S and M, T = 1 and 8, 1 to 4 threads. The
    // fields ask for huge pages; where the kernel did not grant them the
    // estimate (which counts them whole) may exceed what was taken, so the
    // lower bound holds only where they were granted.
    for size in ["S", "M"] {
        for temporal in ["1", "8"] {
            for threads in ["1", "2", "3", "4"] {
                let args = [
                    "--size",
                    size,
                    "--temporal",
                    temporal,
                    "--threads",
                    threads,
                    "--iterations",
                    "2",
                    "--format",
                    "json",
                ];
                let r = json_ok(&run_with_limit(himeno(&args), LIMIT));
                let rank = &r["per_rank"][0];
                let mem = |k: &str| rank["memory"][k].as_f64().unwrap();
                let (estimate, taken) = (
                    mem("estimated_bytes"),
                    mem("peak_bytes") - mem("baseline_bytes"),
                );
                let granted = rank["huge_pages"].as_f64().unwrap_or(0.0) >= 0.75;
                let ratio = taken / estimate;
                assert!(
                    ratio <= 1.10 && (!granted || ratio >= 0.90),
                    "{args:?}: took {:.1} MiB, estimated {:.1} MiB (ratio {ratio:.3}, huge pages granted: {granted})",
                    taken / MIB,
                    estimate / MIB
                );
            }
        }
    }
}

/// A fresh memory cgroup of `limit` bytes below this process's own (cgroup
/// v1 or v2), removed on drop; `None` (with the reason) where this process
/// may not make one.
pub struct MemoryCgroup {
    dir: PathBuf,
}

impl MemoryCgroup {
    pub fn new(name: &str, limit: u64) -> Result<MemoryCgroup, String> {
        let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let (base, file) = own
            .lines()
            .find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                let path = path.trim_start_matches('/');
                if controllers.split(',').any(|c| c == "memory") {
                    Some((
                        Path::new("/sys/fs/cgroup/memory").join(path),
                        "memory.limit_in_bytes",
                    ))
                } else if controllers.is_empty() {
                    Some((Path::new("/sys/fs/cgroup").join(path), "memory.max"))
                } else {
                    None
                }
            })
            .ok_or("no memory cgroup in /proc/self/cgroup")?;
        let dir = base.join(format!("himeno-test-{}-{name}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let cg = MemoryCgroup { dir };
        std::fs::write(cg.dir.join(file), limit.to_string())
            .map_err(|e| format!("cannot limit {}: {e}", cg.dir.display()))?;
        Ok(cg)
    }

    /// `himeno ARGS` started inside the cgroup.
    pub fn himeno(&self, args: &[&str]) -> Command {
        let procs = self.dir.join("cgroup.procs");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!(
                "echo $$ > '{}' && exec \"$0\" \"$@\"",
                procs.display()
            ))
            .arg(BIN)
            .args(args)
            .env_remove("HIMENO_FAULT");
        cmd
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // The kernel may still be releasing the last process's charge for
        // a moment after it was reaped (EBUSY).
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not remove the test cgroup {}", self.dir.display());
    }
}

#[test]
fn a_cgroup_limit_refuses_what_the_buffers_would_take_before_allocating() {
    const MIB: u64 = 1 << 20;
    let refused: [(&[&str], u64, &str); 3] = [
        // The wavefront's buffers: 12 GiB, once counted as 0.22 GiB.
        (
            &[
                "--temporal",
                "32",
                "--threads",
                "16",
                "--grid",
                "1000x4x1000",
                "--iterations",
                "2",
            ],
            256 * MIB,
            "grid 1000x4x1000 needs",
        ),
        // Tiny ranks whose fields took a 2 MiB huge page each.
        (
            &[
                "--local-ranks",
                "1024",
                "--grid",
                "22x22x22",
                "--iterations",
                "2",
                "--threads",
                "1",
            ],
            64 * MIB,
            "grid 22x22x22 needs",
        ),
        (
            &[
                "bench",
                "stream",
                "--local-ranks",
                "1024",
                "--elements",
                "1000",
            ],
            64 * MIB,
            "bench stream with 1000 elements per array needs",
        ),
    ];
    for (n, (args, limit, what)) in refused.into_iter().enumerate() {
        let cg = match MemoryCgroup::new(&format!("refused-{n}"), limit) {
            Ok(cg) => cg,
            Err(why) => {
                eprintln!("skipping: {why}");
                return;
            }
        };
        let o = run_with_limit(cg.himeno(args), LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &[what]);
        assert!(e.stderr.contains("cgroup"), "{}", e.stderr);
    }
    // What the estimate says fits does fit: counted short, the ranks would
    // outgrow the limit and the kernel would kill the process.
    let cg = MemoryCgroup::new("fits", 128 * MIB).expect("made above");
    let o = run_with_limit(
        cg.himeno(&[
            "--local-ranks",
            "256",
            "--grid",
            "22x22x22",
            "--iterations",
            "2",
            "--threads",
            "1",
        ]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

// ---- Round III, class 8: in-process ranks that wait without spinning -------

#[test]
fn many_in_process_ranks_wake_only_for_what_they_wait_for() {
    // 63 pairs measured one after the other: with one condition variable
    // for all, every message woke all 64 ranks, and this took 30 s.
    let started = std::time::Instant::now();
    let o = run_with_limit(
        himeno(&[
            "bench",
            "pingpong",
            "--local-ranks",
            "64",
            "--max-bytes",
            "8",
        ]),
        LIMIT,
    );
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(took < Duration::from_secs(12), "took {took:?}");
    // The most it takes runs to its end (pairs hand each other the turn
    // instead of a barrier of every rank); one more is refused, naming the
    // limit.
    let o = run_with_limit(
        himeno(&[
            "bench",
            "pingpong",
            "--local-ranks",
            "256",
            "--max-bytes",
            "8",
            "--pairs",
            "adjacent",
        ]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = run_out(
        himeno(&[
            "bench",
            "pingpong",
            "--local-ranks",
            "257",
            "--max-bytes",
            "8",
        ]),
        Out::File("/dev/null"),
        LIMIT,
    );
    assert_told(&e, 2, &["at most 256 in-process ranks"]);
}

#[test]
fn a_thousand_tiny_in_process_ranks_run_in_little_memory() {
    // Each rank's fourteen fields once took a 2 MiB huge page each: 1000
    // ranks of a 12^3 grid took 21 GiB and 96 s.
    let o = run_with_limit(
        himeno(&[
            "--local-ranks",
            "1000",
            "--grid",
            "12x12x12",
            "--iterations",
            "2",
            "--threads",
            "1",
            "--format",
            "json",
        ]),
        LIMIT,
    );
    let r = json_ok(&o);
    let peak = r["per_rank"][0]["memory"]["peak_bytes"].as_f64().unwrap();
    assert!(peak < 1024.0 * MIB, "peak {:.0} MiB", peak / MIB);
}

// ---- Round III, class 6: the stop grace allows for the block in flight -----

#[test]
fn a_temporal_block_longer_than_the_stop_grace_still_ends_with_its_record() {
    let dir = scratch("long-block");
    let results = dir.join("r.jsonl");
    // Blocks of 32 sweeps of size M take a good part of a second on one
    // thread; the grace is 10 ms. The signal comes once the first timed
    // block has logged its sweeps, as the second starts: the run must
    // finish that block and report.
    let mut cmd = himeno(&[
        "--size",
        "M",
        "--iterations",
        "100000",
        "--temporal",
        "32",
        "--threads",
        "1",
        "-vv",
        "--output",
        results.to_str().unwrap(),
    ]);
    cmd.env("HIMENO_STOP_GRACE", "0.01");
    let e = stop_after(cmd, "iteration=32 ", "USR1");
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    assert!(!e.stderr.contains("still running"), "{}", e.stderr);
    assert!(e.stderr.contains("stopped by a signal"), "{}", e.stderr);
    let recs = records(&results);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["complete"], false);
}
