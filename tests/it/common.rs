//! The test harness: run the built `himeno` binary, alone or under
//! `mpirun`, with a time limit, and read its JSON report.

#![allow(dead_code)]

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Path of the binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_himeno");

/// Whether this test binary was built with MPI support.
pub const MPI: bool = cfg!(feature = "mpi");

/// The smallest real run: one iteration of a 3x3x3 grid, no rehearsal,
/// a JSON report.
pub const TINY_RUN: [&str; 8] = [
    "--grid",
    "3x3x3",
    "--iterations",
    "1",
    "--warmup",
    "0",
    "--format",
    "json",
];

/// A command running the binary with `args`.
pub fn himeno(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args);
    c
}

/// A command running the binary on `np` ranks under mpirun (oversubscribed,
/// allowed as root, as the test machines need).
pub fn mpirun(np: usize, args: &[&str]) -> Command {
    let mut c = Command::new("mpirun");
    c.args([
        "--oversubscribe",
        "--allow-run-as-root",
        "-np",
        &np.to_string(),
    ])
    .arg(BIN)
    .args(args)
    // Keep OpenMPI quiet and local on the single test machine.
    .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    c
}

/// Runs `cmd` to completion, killing it after `limit`; a run that has to be
/// killed fails the test (a hang is a bug).
pub fn run_with_limit(mut cmd: Command, limit: Duration) -> Output {
    let mut child: Child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    let mut out_pipe = child.stdout.take().expect("stdout");
    let mut err_pipe = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out_pipe.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_pipe.read_to_end(&mut v);
        v
    });
    let status = match child.wait_timeout(limit).expect("wait works") {
        Some(s) => s,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            let err = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
            panic!("{cmd:?} did not finish within {limit:?} (hang?); stderr:\n{err}");
        }
    };
    Output {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// Runs `cmd` with a two-minute limit.
pub fn run(cmd: Command) -> Output {
    run_with_limit(cmd, Duration::from_secs(120))
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns standard output.
pub fn stdout_ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// Asserts success and parses the JSON report on standard output.
pub fn json_ok(o: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout_ok(o))
        .unwrap_or_else(|e| panic!("stdout is not one JSON report ({e}):\n{}", stdout(o)))
}
