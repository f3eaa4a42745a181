//! Runs under hostile conditions, shared by the fast and system tiers'
//! tests of them (outputs, inputs, resources, stopping, launch): a standard
//! output that fails, a rank that hangs, paths that are not UTF-8, and the
//! one check of how such a run must end: within its time limit, with its
//! exit code and one `himeno:` line per error on stderr, no panic.

use super::signals::stop_after;
use super::{BIN, himeno, json_ok, mpirun, records, run, wait_or_kill};
use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// What a run with a chosen standard output left behind.
pub struct Ended {
    pub status: ExitStatus,
    pub stderr: String,
}

/// Where the run's standard output goes.
pub enum Out {
    /// A file opened for writing (e.g. `/dev/full`).
    File(&'static str),
    /// A pipe whose reading end is closed before the run writes (`| true`).
    ClosedPipe,
}

/// The writing end of a pipe whose reading end is already closed: every
/// write to it fails with EPIPE, as in `himeno | true` once `true` exits.
pub fn closed_pipe() -> Stdio {
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
pub fn run_out(mut cmd: Command, out: Out, limit: Duration) -> Ended {
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
pub fn assert_told(e: &Ended, code: i32, words: &[&str]) {
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

pub const LIMIT: Duration = Duration::from_secs(60);

/// A run that would take many minutes unless stopped, with the fault
/// injection logged (`-v`).
pub const HUNG_RUN: [&str; 7] = [
    "--size",
    "XS",
    "--iterations",
    "1000000",
    "--threads",
    "1",
    "-v",
];

/// `cmd` with rank `rank` hanging at iteration 3 and a stop grace of a
/// second: the watchdog ends it a second after the stop signal.
pub fn hung(mut cmd: Command, rank: usize) -> Command {
    cmd.env("HIMENO_FAULT", format!("{rank}:3:hang"))
        .env("HIMENO_STOP_GRACE", "1");
    cmd
}

/// A short run of two ranks whose rank 1 hangs before the ranks agree on
/// the run (see [`stuck`]).
pub const STUCK_RUN: [&str; 5] = ["--grid", "9x9x9", "--iterations", "2", "-v"];

/// `cmd` with rank 1 hanging at the start, before the agreement, and a
/// stop grace of a second.
pub fn stuck(mut cmd: Command) -> Command {
    cmd.env("HIMENO_FAULT", "1:start:hang")
        .env("HIMENO_STOP_GRACE", "1");
    cmd
}

/// Stops the job `cmd` of a [`stuck`] rank with `sig` once the fault is
/// injected, and asserts that it ended with exit 2 a second after the
/// signal, well within 30 s: the stop grace applies from the start.
pub fn assert_stuck_rank_ends(cmd: Command, sig: &str) {
    let started = std::time::Instant::now();
    let e = stop_after(cmd, "injecting a fault at the start", sig);
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    assert!(e.stderr.contains("1 s after a stop signal"), "{}", e.stderr);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

/// Runs one rank with a label and a results file in `dir` whose names are
/// not UTF-8, asserts the report and the one record, and returns the
/// results file and the arguments.
pub fn a_run_with_a_label_and_results_file_not_utf8(dir: &Path) -> (OsString, Vec<OsString>) {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
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
    (file, args)
}

/// One real record line, from a short labelled run.
pub fn real_record(dir: &Path, label: &str, procs: &str, np: usize) -> String {
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

/// Mebibytes, for the tolerances below.
pub const MIB: f64 = (1u64 << 20) as f64;
