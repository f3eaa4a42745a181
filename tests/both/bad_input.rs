//! The bad-input table: every option of the run and of each tool, given
//! malformed, out-of-range or impossible values. Every row must end with
//! exit code 2, exactly one `himeno:` line on stderr that names the problem
//! and the fix, nothing on stdout, and nothing written (the row runs in an
//! empty directory that must stay empty, and run rows also ask for a
//! results file there that must not appear).
//!
//! To add rows for a new subcommand, add a block to [`rows`] with
//! [`Row::new`]`(&["bench", "stream", ...], &[expected words])`.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How a row is started.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Launch {
    /// The binary alone.
    Single,
    /// Under `mpirun` with this many ranks (rows skipped without MPI).
    Mpirun(usize),
}

/// One bad input and what its message must say.
#[derive(Debug, Clone)]
struct Row {
    /// Arguments; `{dir}` is replaced by the row's empty directory.
    args: Vec<&'static str>,
    /// Words the one-line message must contain (case-insensitive): the
    /// option or value at fault, and the fix.
    expect: Vec<&'static str>,
    launch: Launch,
    /// Whether the row applies to this build (e.g. only without MPI).
    applies: bool,
}

impl Row {
    fn new(args: &[&'static str], expect: &[&'static str]) -> Row {
        Row {
            args: args.to_vec(),
            expect: expect.to_vec(),
            launch: Launch::Single,
            applies: true,
        }
    }

    /// A benchmark-run row: also asks for a results file in the row's
    /// directory (unless the row is about `--output`), which must not be
    /// created.
    fn run(args: &[&'static str], expect: &[&'static str]) -> Row {
        let mut r = Row::new(args, expect);
        if !args.contains(&"--output") {
            r.args.extend(["--output", "{dir}/results.jsonl"]);
        }
        r
    }

    fn mpirun(mut self, np: usize) -> Row {
        self.launch = Launch::Mpirun(np);
        self.applies &= MPI;
        self
    }

    /// Whether the row runs in this test binary: a row of the binary alone
    /// in the fast tier, a row under `mpirun` in the system tier.
    fn in_this_tier(&self) -> bool {
        match self.launch {
            Launch::Single => !crate::SYSTEM_TIER,
            Launch::Mpirun(_) => crate::SYSTEM_TIER,
        }
    }

    fn only_if(mut self, cond: bool) -> Row {
        self.applies &= cond;
        self
    }
}

/// A path root cannot write either: a read-only sysfs attribute (sysfs
/// refuses writes to it whatever the caller's privileges).
const READ_ONLY_FILE: &str = "/sys/kernel/notes";

fn rows() -> Vec<Row> {
    let cuda = cfg!(feature = "cuda");
    vec![
        // Sizes and grids.
        Row::run(
            &["--size", "XXL"],
            &["unknown size 'XXL'", "XS, S, M, L, XL"],
        ),
        Row::run(&["--size", ""], &["unknown size", "--grid"]),
        Row::run(&["--grid", "abc"], &["invalid grid 'abc'", "NIxNJxNK"]),
        Row::run(&["--grid", "10x10"], &["invalid grid", "NIxNJxNK"]),
        Row::run(&["--grid", "10x10x10x10"], &["invalid grid", "NIxNJxNK"]),
        Row::run(&["--grid", "2x10x10"], &["NI is 2", "at least 3"]),
        Row::run(&["--grid", "10x0x10"], &["at least 1"]),
        Row::run(&["--grid", "10x-4x10"], &["'-4'", "positive whole number"]),
        Row::run(
            &["--grid", "10x10x1.5"],
            &["'1.5'", "positive whole number"],
        ),
        Row::run(&["--grid", "3x3x2000000"], &["NK", "at most"]),
        Row::run(
            &["--grid", "99999999999999999999x3x3"],
            &["not a positive whole number"],
        ),
        Row::run(&["--size", "XS", "--grid", "9x9x9"], &["--size", "--grid"]),
        // Checkpoints: refused before anything is created.
        Row::run(
            &["--checkpoint-every", "0"],
            &["--checkpoint-every", "1..="],
        ),
        Row::run(
            &["--checkpoint-every", "5"],
            &["--checkpoint-every needs --checkpoint-dir"],
        ),
        Row::run(&["--checkpoint-keep", "0"], &["--checkpoint-keep", "1..="]),
        Row::run(
            &["--restart", "latest"],
            &["--restart needs --checkpoint-dir"],
        ),
        Row::run(
            &["--checkpoint-dir", "{dir}/ck", "--seconds", "5"],
            &["--checkpoint-dir needs a fixed --iterations"],
        ),
        Row::run(
            &[
                "--checkpoint-dir",
                "{dir}/ck",
                "--iterations",
                "5",
                "--restart",
                "{dir}/none",
            ],
            &["cannot read the checkpoint manifest"],
        ),
        Row::run(
            &["--checkpoint-dir", READ_ONLY_FILE, "--iterations", "5"],
            &["cannot be written", "--checkpoint-dir"],
        ),
        // Iteration counts, seconds, warm-up.
        Row::run(&["--iterations", "0"], &["--iterations", "at least 1"]),
        Row::run(&["--iterations", "-1"], &["--iterations", "negative"]),
        Row::run(&["--iterations", "1.5"], &["--iterations", "whole number"]),
        Row::run(&["--iterations", "ten"], &["--iterations", "whole number"]),
        Row::run(
            &["--iterations", "2000000000"],
            &["--iterations", "smaller"],
        ),
        Row::run(
            &["--iterations", "99999999999999999999"],
            &["--iterations", "too large"],
        ),
        Row::run(
            &["--iterations", "5", "--seconds", "5"],
            &["--iterations", "--seconds"],
        ),
        Row::run(&["--seconds", "0"], &["--seconds 0", "above 0"]),
        Row::run(&["--seconds", "-5"], &["--seconds -5", "above 0"]),
        Row::run(&["--seconds", "NaN"], &["--seconds nan", "--iterations"]),
        Row::run(&["--seconds", "inf"], &["--seconds inf", "--iterations"]),
        Row::run(&["--seconds", "1e9"], &["--seconds", "one week"]),
        Row::run(&["--seconds", "soon"], &["--seconds", "a number"]),
        Row::run(&["--warmup", "-1"], &["--warmup", "negative"]),
        Row::run(&["--warmup", "5000"], &["--warmup", "at most 1000"]),
        Row::run(&["--warmup", "0"], &["--warmup 0", "--iterations"]),
        // Threads, devices, bandwidth, enums.
        Row::run(&["--threads", "0"], &["--threads", "at least 1"]),
        Row::run(&["--threads", "-2"], &["--threads", "negative"]),
        Row::run(&["--threads", "100000"], &["--threads", "at most 4096"]),
        Row::run(
            &["--threads", "4096"],
            &["--threads 4096", "per CPU", "at most"],
        ),
        Row::run(&["--device", "-1"], &["--device", "negative"]),
        Row::run(&["--stream-gbs", "0"], &["--stream-gbs", "above 0"]),
        Row::run(&["--stream-gbs", "-3"], &["--stream-gbs", "above 0"]),
        Row::run(&["--stream-gbs", "fast"], &["--stream-gbs", "a number"]),
        Row::run(
            &["--stream-gbs", "1e-320"],
            &["--stream-gbs 1e-320", "from"],
        ),
        Row::run(&["--stream-gbs", "1e300"], &["--stream-gbs 1e300", "from"]),
        Row::run(&["--backend", "tpu"], &["'tpu'", "possible values"]),
        Row::run(&["--format", "xml"], &["'xml'", "possible values"]),
        Row::run(&["--bind", "sockets"], &["'sockets'", "possible values"]),
        Row::run(&["--staging", "magic"], &["'magic'", "possible values"]),
        Row::run(&["--no-such-option"], &["--no-such-option", "--help"]),
        // Temporal blocking.
        Row::run(&["--temporal", "0"], &["--temporal 0", "from 1"]),
        Row::run(&["--temporal", "33"], &["--temporal 33", "to 32"]),
        Row::run(&["--temporal", "-2"], &["--temporal", "negative"]),
        Row::run(
            &["--temporal", "often"],
            &["--temporal", "whole number", "or auto"],
        ),
        Row::run(&["--tile-rows", "0"], &["--tile-rows", "at least 1"]),
        Row::run(&["--tile-rows", "8"], &["--tile-rows", "--temporal"]),
        Row::run(&["--device", "0"], &["--device", "--backend gpu"]),
        Row::new(
            &["selftest", "--device", "0"],
            &["--device", "--backend gpu"],
        ),
        Row::new(
            &["selftest", "--staging", "pageable", "--backend", "cpu"],
            &["--staging", "--backend gpu"],
        ),
        Row::run(&["--staging", "pageable"], &["--staging", "--backend gpu"]),
        Row::run(
            &["--gpu-occupancy", "5"],
            &["--gpu-occupancy", "--backend gpu"],
        ),
        Row::run(
            &["--backend", "gpu", "--stores", "cached"],
            &["--stores", "--backend cpu"],
        ),
        Row::run(
            &["--backend", "gpu", "--prefetch", "off"],
            &["--prefetch", "--backend cpu"],
        ),
        Row::run(&["--prefetch", "sometimes"], &["--prefetch", "auto"]),
        Row::run(
            &["--prefetch", "on", "--temporal", "4"],
            &["--prefetch on|off", "--temporal 1"],
        ),
        Row::run(
            &[
                "--backend",
                "auto",
                "--checkpoint-dir",
                "{dir}/ck",
                "--iterations",
                "5",
            ],
            &["--backend auto", "--backend cpu or --backend gpu"],
        ),
        Row::run(
            &[
                "--backend",
                "auto",
                "--temporal",
                "3",
                "--checkpoint-dir",
                "{dir}/ck",
                "--iterations",
                "6",
                "--restart",
                "latest",
            ],
            &["--backend auto", "--checkpoint-dir"],
        ),
        Row::run(
            &["--temporal", "2", "--backend", "gpu"],
            &["--temporal", "cpu backend only", "--backend cpu"],
        ),
        Row::run(
            &["--grid", "12x5x5", "--procs", "3x1x1", "--temporal", "4"],
            &["--temporal 4", "3 point(s) along i", "--temporal 3 or less"],
        )
        .mpirun(3),
        Row::run(
            &[
                "--grid",
                "5x12x5",
                "--procs",
                "1x3x1",
                "--temporal",
                "5",
                "--local-ranks",
                "3",
            ],
            &["--temporal 5", "3 point(s) along j", "--temporal 3 or less"],
        ),
        Row::run(
            &["--overlap", "--backend", "cpu"],
            &["--overlap", "GPU sweeps only", "--backend gpu"],
        ),
        Row::run(
            &["--backend", "gpu", "--size", "XS", "--iterations", "1"],
            &["no GPU support", "--features cuda", "--backend cpu"],
        )
        .only_if(!cuda),
        // Process grids.
        Row::run(&["--procs", "2x2"], &["invalid process grid", "PIxPJxPK"]),
        Row::run(
            &["--procs", "0x1x1"],
            &["invalid process grid", "at least 1"],
        ),
        Row::run(
            &["--procs", "4294967296x4294967296x2", "--grid", "9x9x9"],
            &["4294967296x4294967296x2", "more than the 16777216"],
        ),
        Row::run(
            &["--procs", "18446744073709551615x2x1"],
            &["more than the 16777216"],
        ),
        Row::run(&["--procs", "1x1x1"], &["job has 2", "--procs"]).mpirun(2),
        Row::run(
            &["--procs", "3x1x1", "--size", "XS"],
            &["3 ranks", "job has 2"],
        )
        .mpirun(2),
        Row::run(
            &["--grid", "4x40x40", "--procs", "4x1x1"],
            &["no interior point", "fewer ranks"],
        )
        .mpirun(4),
        Row::run(
            &["--grid", "3x3x5"],
            &["4 ranks cannot share", "fewer ranks"],
        )
        .mpirun(4),
        Row::run(
            &["--procs", "2x1x1", "--size", "XS"],
            &["--local-ranks 2", "--features mpi"],
        )
        .only_if(!MPI),
        // Memory: refused before allocating.
        Row::run(
            &["--grid", "4000x4000x4000", "--iterations", "1"],
            &["needs", "GiB", "available", "smaller"],
        ),
        Row::run(
            &["--grid", "2000x2000x2000", "--iterations", "1"],
            &["needs", "GiB", "4 rank(s)", "available"],
        )
        .mpirun(4),
        // Results file.
        Row::run(
            &["--output", "{dir}"],
            &["results file", "directory", "--output"],
        ),
        Row::run(
            &[
                "--output",
                "{dir}/new/",
                "--grid",
                "5x5x5",
                "--iterations",
                "1",
            ],
            &["results file", "names a directory", "--output"],
        ),
        Row::run(
            &[
                "--output",
                "{dir}/missing/r.jsonl",
                "--size",
                "XS",
                "--iterations",
                "1",
            ],
            &["results file", "no such file", "--output"],
        ),
        Row::run(
            &[
                "--output",
                READ_ONLY_FILE,
                "--size",
                "XS",
                "--iterations",
                "1",
            ],
            &["results file", READ_ONLY_FILE, "--output"],
        ),
        Row::run(
            &[
                "--output",
                "/proc/no-such-file",
                "--size",
                "XS",
                "--iterations",
                "1",
            ],
            &["results file", "--output"],
        ),
        // The halo self-test.
        Row::new(&["selftest", "--size", "XXL"], &["unknown size", "XS, S"]),
        Row::new(
            &["selftest", "--temporal", "40"],
            &["--temporal 40", "to 32"],
        ),
        Row::new(&["selftest", "--grid", "2x3x3"], &["at least 3"]),
        Row::new(
            &["selftest", "--procs", "2x1"],
            &["process grid", "PIxPJxPK"],
        ),
        Row::new(&["selftest", "--procs", "2x1x1"], &["2 ranks", "--procs"]),
        Row::new(&["selftest", "--grid", "5000x5000x5000"], &["needs", "GiB"]),
        Row::new(&["selftest", "--bogus"], &["--bogus", "--help"]),
        Row::new(&["selftest", "--procs", "1x1x3"], &["3 ranks", "job has 2"]).mpirun(2),
        Row::new(&["no-such-command"], &["no-such-command", "--help"]),
        // The tools beside the run.
        Row::new(
            &["report", "{dir}/missing.jsonl"],
            &["cannot read results file", "--output"],
        ),
        Row::new(&["report"], &["required", "--help"]),
        Row::new(
            &["model", "--size", "S"],
            &["compute rate", "--rate-mflops"],
        ),
        Row::new(
            &[
                "model",
                "--grid",
                "12x12x12",
                "--procs",
                "1x1x4",
                "--temporal",
                "4",
                "--rate-mflops",
                "100",
            ],
            &["--temporal 4", "along k", "--temporal 2 or less"],
        ),
        Row::new(
            &[
                "model",
                "--size",
                "S",
                "--ranks",
                "0",
                "--rate-mflops",
                "100",
            ],
            &["--ranks", "at least 1"],
        ),
        Row::new(
            &[
                "model",
                "--grid",
                "5x5x5",
                "--ranks",
                "1000000000000",
                "--rate-mflops",
                "100",
                "--latency-us",
                "1",
                "--bandwidth-gbs",
                "1",
            ],
            &["1000000000000 ranks", "more than"],
        ),
        Row::new(
            &[
                "model",
                "--grid",
                "5x5x5",
                "--ranks",
                "28",
                "--rate-mflops",
                "1",
            ],
            &["28 ranks cannot share", "fewer ranks"],
        ),
        Row::new(
            &[
                "model",
                "--procs",
                "65536x65536x65536",
                "--rate-mflops",
                "1",
            ],
            &["more than the 16777216"],
        ),
        Row::new(
            &["model", "--size", "S", "--rate-mflops", "1e-300"],
            &["--rate-mflops 1e-300", "from"],
        ),
        Row::new(
            &["model", "--size", "S", "--rate-mflops", "inf"],
            &["--rate-mflops inf"],
        ),
        Row::new(
            &["model", "--size", "S", "--seconds-per-iteration", "1e-300"],
            &["--seconds-per-iteration 1e-300", "rate"],
        ),
        Row::new(
            &[
                "model",
                "--size",
                "S",
                "--ranks",
                "2",
                "--rate-mflops",
                "10",
                "--latency-us",
                "1e300",
                "--bandwidth-gbs",
                "1",
            ],
            &["latency 1e300 us"],
        ),
        Row::new(
            &[
                "model",
                "--size",
                "S",
                "--ranks",
                "2",
                "--rate-mflops",
                "10",
                "--pingpong",
                "/dev/zero",
            ],
            &["/dev/zero", "device"],
        ),
        Row::new(&["report", "/dev/zero"], &["/dev/zero", "device"]),
        Row::new(&["report", "/"], &["directory"]),
        Row::new(&["plan", "/dev/zero"], &["/dev/zero", "device"]),
        Row::new(&["plan", "/"], &["directory"]),
        Row::new(
            &[
                "model",
                "--size",
                "S",
                "--ranks",
                "2",
                "--results",
                "/dev/zero",
            ],
            &["/dev/zero", "device"],
        ),
        Row::new(
            &["bench", "stream", "--elements", "100000000000"],
            &["bench stream", "needs", "GiB"],
        ),
        Row::new(
            &["bench", "stream", "--elements", "18446744073709551615"],
            &["--elements", "more than"],
        ),
        Row::new(&["bench", "stream", "--threads", "4096"], &["per CPU"]),
        Row::new(&["bench", "pingpong"], &["at least 2 ranks", "mpirun"]),
        Row::new(
            &["bench", "pingpong", "--max-bytes", "12QB"],
            &["12QB", "unit"],
        ),
        Row::new(
            &["bench", "transfer", "--max-bytes", "0"],
            &["--max-bytes", "min"],
        ),
        Row::new(&["bench", "transfer"], &["cuda"]).only_if(!cuda),
    ]
}

/// A fresh empty directory for one row.
fn row_dir(n: usize) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("himeno-bad-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs one row and returns what is wrong with the outcome, if anything.
fn check(n: usize, row: &Row) -> Option<String> {
    let dir = row_dir(n);
    let args: Vec<String> = row
        .args
        .iter()
        .map(|a| a.replace("{dir}", &dir.to_string_lossy()))
        .collect();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd: Command = match row.launch {
        Launch::Single => himeno(&argv),
        Launch::Mpirun(np) => mpirun(np, &argv),
    };
    cmd.current_dir(&dir)
        .env_remove("RUST_LOG")
        .env_remove("HIMENO_FAULT");
    let o = run(cmd);
    let err = stderr(&o);
    let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("himeno:")).collect();
    let mut problems = Vec::new();
    if o.status.code() != Some(2) {
        problems.push(format!("exit {:?}, want 2", o.status.code()));
    }
    if !o.stdout.is_empty() {
        problems.push(format!("stdout not empty: {}", stdout(&o)));
    }
    if ours.len() != 1 {
        problems.push(format!("{} himeno: lines, want 1", ours.len()));
    }
    if row.launch == Launch::Single && err.lines().count() != 1 {
        problems.push("stderr is not one line".into());
    }
    let line = ours.first().copied().unwrap_or("").to_lowercase();
    for word in &row.expect {
        if !line.contains(&word.to_lowercase()) {
            problems.push(format!("message lacks '{word}'"));
        }
    }
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    if !left.is_empty() {
        problems.push(format!("files written: {left:?}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    (!problems.is_empty()).then(|| format!("{args:?}: {}\n  stderr: {err}", problems.join("; ")))
}

#[test]
fn every_bad_input_gets_exit_2_and_one_clear_line() {
    assert!(
        Path::new(READ_ONLY_FILE).exists(),
        "{READ_ONLY_FILE} is this table's unwritable file; pick another on this system"
    );
    let rows: Vec<(usize, Row)> = rows()
        .into_iter()
        .filter(|r| r.applies && r.in_this_tier())
        .enumerate()
        .collect();
    // Two rows at a time: single-rank rows are short, and the mpirun rows
    // must not crowd a two-core machine.
    let failures: Vec<String> = rows
        .chunks(2)
        .flat_map(|pair| {
            std::thread::scope(|s| {
                let handles: Vec<_> = pair
                    .iter()
                    .map(|(n, r)| s.spawn(move || check(*n, r)))
                    .collect();
                handles
                    .into_iter()
                    .filter_map(|h| h.join().expect("row thread"))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}
