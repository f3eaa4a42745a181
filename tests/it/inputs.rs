//! Inputs that would make work unbounded or that are unusual but legal:
//! numbers and records beyond any machine (skipped, refused or immediate),
//! studies of millions of runs, FIFOs and devices named as inputs or
//! outputs, plot names that look alike, paths and labels that are not
//! UTF-8. Every case ends within its limit with one `himeno:` line.

use crate::common::hostile::*;
use crate::common::*;
use std::process::Command;
use std::time::Duration;

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
fn paths_and_labels_need_not_be_utf8() {
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let dir = scratch("not-utf8");
    let (file, _) = a_run_with_a_label_and_results_file_not_utf8(&dir);
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
