//! A standard output or error that fails: closed before or while the run
//! writes, or full (`/dev/full`). Every command turns a failed standard
//! output into exit 2 with one line, the verdict (not stderr) decides the
//! exit code, nothing panics, and the record is still appended.

use crate::common::hostile::*;
use crate::common::*;
use std::process::{Command, Stdio};

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
