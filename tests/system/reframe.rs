//! The ReFrame checks of `reframe/` (himeno.py with config.py) run by a
//! real ReFrame 4.10, installed into a virtual environment of its own by
//! scripts/install-reframe.sh: they pass on this machine (local scheduler,
//! mpirun), a deliberately wrong reference fails the performance stage, a
//! wrong answer (HIMENO_FAULT) fails the sanity stage, and references
//! recorded from a run by reframe/record_references.py are applied. The
//! virtual Slurm cluster's run is in `cluster.rs`, beside that cluster.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

/// The repository root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The reframe executable of the virtual environment, installed on first
/// use; `None` (said on stderr) where it cannot be installed outside CI.
pub fn reframe() -> Option<&'static Path> {
    static RF: OnceLock<Option<PathBuf>> = OnceLock::new();
    RF.get_or_init(|| {
        let o = run_with_limit(
            Command::new(root().join("scripts/install-reframe.sh")),
            Duration::from_secs(600),
        );
        if o.status.success() {
            return Some(PathBuf::from(stdout(&o).trim()));
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "scripts/install-reframe.sh failed in CI:\n{}",
            stderr(&o)
        );
        eprintln!(
            "skipping the ReFrame tests: no ReFrame 4.10:\n{}",
            stderr(&o)
        );
        None
    })
    .as_deref()
}

/// A ReFrame run of the himeno checks on `system` with `args` (e.g. `-n
/// NAME`), its files under a fresh folder named `tag`; returns its output
/// and its run report.
pub fn run_checks(
    rf: &Path,
    system: &str,
    tag: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Output, Value) {
    let (o, report, _) = run_checks_at(rf, system, tag, args, env);
    (o, report)
}

/// [`run_checks`], with the run report's path.
pub fn run_checks_at(
    rf: &Path,
    system: &str,
    tag: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Output, Value, PathBuf) {
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("reframe-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&prefix);
    let report = prefix.join("report.json");
    let mut c = Command::new(rf);
    c.current_dir(root())
        .args(["-C", "reframe/config.py", "-c", "reframe/himeno.py"])
        .args(["--system", system, "--prefix"])
        .arg(&prefix)
        .arg("--report-file")
        .arg(&report)
        .args(["--exec-policy", "serial", "-r"])
        .args(args)
        .env("HIMENO_BIN", BIN)
        .env_remove("HIMENO_REFERENCES")
        .env_remove("HIMENO_FAULT");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = run_with_limit(c, Duration::from_secs(600));
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("no run report ({e}):\n{}{}", stdout(&o), stderr(&o)));
    let parsed = serde_json::from_str(&text).expect("the run report is JSON");
    (o, parsed, report)
}

/// The test cases of a run report.
pub fn cases(report: &Value) -> Vec<&Value> {
    report["runs"][0]["testcases"]
        .as_array()
        .expect("testcases")
        .iter()
        .collect()
}

/// Asserts that every check of the run passed, `n` of them, with the
/// three performance values each.
pub fn assert_all_passed(o: &Output, report: &Value, n: usize) {
    let cs = cases(report);
    assert_eq!(cs.len(), n, "{}", stdout(o));
    for c in &cs {
        assert_eq!(
            c["result"],
            "pass",
            "{}: {}\n{}",
            c["display_name"],
            c["fail_reason"],
            job_output(c)
        );
        let perf = c["perfvalues"].as_object().unwrap();
        for m in ["mflops", "gbytes_per_s", "comm_fraction"] {
            assert!(perf.keys().any(|k| k.ends_with(m)), "{m} missing: {perf:?}");
        }
    }
    assert!(o.status.success(), "{}{}", stdout(o), stderr(o));
}

/// What a check's job wrote to stdout and stderr, read from its stage
/// folder (ReFrame keeps a failed check's), so that a failure shows why.
fn job_output(case: &Value) -> String {
    let stage = Path::new(case["stagedir"].as_str().unwrap_or(""));
    ["job_stdout", "job_stderr"]
        .iter()
        .map(|k| {
            let file = stage.join(case[k].as_str().unwrap_or(""));
            let text =
                std::fs::read_to_string(&file).unwrap_or_else(|e| format!("(unreadable: {e})"));
            format!("--- {}:\n{text}", file.display())
        })
        .collect()
}

/// What a passed check's job wrote to stdout, from its output folder
/// (where ReFrame copies it).
pub fn passed_job_stdout(case: &Value) -> String {
    let out = Path::new(case["outputdir"].as_str().expect("an output folder"));
    let file = out.join(case["job_stdout"].as_str().expect("a job stdout"));
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The one check the failure tests run.
const TWO_RANKS: &str = "himeno_check%ranks=2%variant=classic";

#[test]
fn the_checks_pass_on_this_machine_and_record_references() {
    if !mpi_or_skip("the_checks_pass_on_this_machine_and_record_references") {
        return;
    }
    let Some(rf) = reframe() else { return };
    let (o, report, report_file) = run_checks_at(rf, "local", "local", &[], &[]);
    // Classic and temporal on 1, 2 and 4 ranks; the GPU check needs a
    // partition with the gpu feature.
    assert_all_passed(&o, &report, 6);
    // The values of this run as references, generous enough for a shared
    // machine: a second run is judged against them and passes.
    let refs = temp_file("reframe", "recorded.json");
    let mut record = Command::new(root().join("reframe/record_references.py"));
    record.arg(&report_file).arg("--out").arg(&refs);
    record.args(["--slower", "0.95", "--comm-above", "20"]);
    let rec = run(record);
    stdout_ok(&rec);
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(&refs).unwrap()).unwrap();
    assert_eq!(
        recorded["local:cpu"].as_object().unwrap().len(),
        6,
        "{recorded}"
    );
    let (o, again) = run_checks(
        rf,
        "local",
        "recorded",
        &["-n", TWO_RANKS],
        &[("HIMENO_REFERENCES", refs.to_str().unwrap())],
    );
    assert_all_passed(&o, &again, 1);
    let perf = &cases(&again)[0]["perfvalues"]["local:cpu:mflops"];
    let target = recorded["local:cpu"]["classic-2"]["mflops"][0]
        .as_f64()
        .unwrap();
    assert_eq!(
        perf[1].as_f64(),
        Some(target),
        "the recorded reference applies: {perf}"
    );
}

#[test]
fn a_wrong_reference_fails_the_performance_check() {
    if !mpi_or_skip("a_wrong_reference_fails_the_performance_check") {
        return;
    }
    let Some(rf) = reframe() else { return };
    // A petaflop from two ranks of a small box.
    let refs = temp_file("reframe", "wrong.json");
    std::fs::write(
        &refs,
        r#"{"local:cpu": {"classic-2": {"mflops": [1e9, -0.1, null, "MFLOPS"]}}}"#,
    )
    .unwrap();
    let (o, report) = run_checks(
        rf,
        "local",
        "wrong-ref",
        &["-n", TWO_RANKS],
        &[("HIMENO_REFERENCES", refs.to_str().unwrap())],
    );
    assert!(!o.status.success(), "{}", stdout(&o));
    let c = cases(&report)[0];
    assert_eq!(c["result"], "fail");
    assert_eq!(c["fail_phase"], "performance", "{}", c["fail_reason"]);
}

#[test]
fn a_wrong_answer_fails_the_sanity_check() {
    if !mpi_or_skip("a_wrong_answer_fails_the_sanity_check") {
        return;
    }
    let Some(rf) = reframe() else { return };
    let (o, report) = run_checks(
        rf,
        "local",
        "fault",
        &["-n", TWO_RANKS],
        &[("HIMENO_FAULT", "1:5:perturb")],
    );
    assert!(!o.status.success(), "{}", stdout(&o));
    let c = cases(&report)[0];
    assert_eq!(c["result"], "fail");
    assert_eq!(c["fail_phase"], "sanity", "{}", c["fail_reason"]);
    // The wrong answer's exit status, named.
    let reason = c["fail_reason"].as_str().unwrap();
    assert!(reason.contains("exited with status 1, not 0"), "{reason}");
}

/// Asserts that `o` ended with status 2 and exactly one line on stderr,
/// from record_references.py, containing `word`.
fn assert_one_reference_line(o: &Output, word: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("record_references: ") && lines[0].contains(word),
        "{err}"
    );
}

#[test]
fn record_references_refuses_special_files_and_bad_numbers_on_one_line() {
    let dir = temp_file("reframe-refs", "x").with_file_name("");
    let fifo = dir.join("report.fifo");
    let _ = std::fs::remove_file(&fifo);
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let good = dir.join("good.json");
    std::fs::write(
        &good,
        r#"{"runs": [{"testcases": [{"ref_key": "classic-1", "result": "pass",
            "system": "local", "partition": "cpu",
            "perfvalues": {"local:cpu:mflops": [5.0, 0, null, null, "MFLOPS"]}}]}]}"#,
    )
    .unwrap();
    let out = dir.join("refs.json");
    let script = root().join("reframe/record_references.py");
    let refs = |report: &Path, out: &Path, more: &[&str]| {
        let mut c = Command::new(&script);
        c.arg(report).arg("--out").arg(out).args(more);
        run_with_limit(c, Duration::from_secs(30))
    };
    // Files that never end or block, as the report or as the references
    // it would update: refused, none read.
    for special in [fifo.as_path(), Path::new("/dev/zero"), dir.as_path()] {
        assert_one_reference_line(&refs(special, &out, &[]), "not a regular file");
        assert_one_reference_line(&refs(&good, special, &[]), "not a regular file");
    }
    for (option, value) in [
        ("--slower", "nan"),
        ("--slower", "inf"),
        ("--slower", "1.5"),
        ("--slower", "-0.1"),
        ("--comm-above", "nan"),
        ("--comm-above", "-1"),
        ("--comm-above", "1e309"),
    ] {
        assert_one_reference_line(&refs(&good, &out, &[option, value]), option);
    }
    assert!(!out.exists(), "a refused run wrote the references");
    // A measured value that is no number is no reference.
    let nan = dir.join("nan.json");
    let text = std::fs::read_to_string(&good).unwrap();
    std::fs::write(&nan, text.replace("5.0", "NaN")).unwrap();
    assert_one_reference_line(&refs(&nan, &out, &[]), "not a measured value");
    let ok = refs(&good, &out, &["--slower", "0.5"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        written["local:cpu"]["classic-1"]["mflops"],
        serde_json::json!([5.0, -0.5, null, "MFLOPS"])
    );
}

/// A folder whose `mpirun` runs the real one, then ends with `status`
/// (`start`: false starts nothing at all), for the checks' PATH.
fn fake_launcher(tag: &str, start: bool, status: u8) -> String {
    let mut which = Command::new("sh");
    which.args(["-c", "command -v mpirun"]);
    let real = stdout(&run(which));
    let dir = temp_file("reframe-launcher", tag).with_extension("d");
    std::fs::create_dir_all(&dir).unwrap();
    let run_real = if start {
        format!("'{}' \"$@\"\n", real.trim())
    } else {
        String::new()
    };
    write_executable(
        &dir.join("mpirun"),
        &format!("#!/bin/sh\n{run_real}echo 'launcher trouble' >&2\nexit {status}\n"),
    );
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn the_launchers_status_is_told_apart_from_himenos() {
    if !mpi_or_skip("the_launchers_status_is_told_apart_from_himenos") {
        return;
    }
    let Some(rf) = reframe() else { return };
    // Every rank of himeno ended well, then the launcher failed: its
    // status was reported as himeno's.
    let path = fake_launcher("after", true, 3);
    let (o, report) = run_checks(
        rf,
        "local",
        "launcher-after",
        &["-n", TWO_RANKS],
        &[("PATH", &path)],
    );
    assert!(!o.status.success(), "{}", stdout(&o));
    let c = cases(&report)[0];
    assert_eq!(c["fail_phase"], "sanity", "{}", c["fail_reason"]);
    let reason = c["fail_reason"].as_str().unwrap();
    assert!(
        reason.contains("the launcher exited with status 3 although every himeno rank exited 0"),
        "{reason}"
    );
    // A launcher that started no rank: no himeno status to report.
    let path = fake_launcher("never", false, 1);
    let (_, report) = run_checks(
        rf,
        "local",
        "launcher-never",
        &["-n", TWO_RANKS],
        &[("PATH", &path)],
    );
    let reason = cases(&report)[0]["fail_reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("0 of 2 himeno ranks reported"), "{reason}");
    assert!(!reason.contains("himeno exited with status"), "{reason}");
}

#[test]
fn energy_figures_become_performance_variables() {
    if !mpi_or_skip("energy_figures_become_performance_variables") {
        return;
    }
    let Some(rf) = reframe() else { return };
    // A counter tree whose package counter advances by 4 J between the
    // run's two readings (tests/both/energy.rs says how), and a timed loop
    // of several seconds (`--energy` wants one at least): size L at 60
    // iterations, whose answer is stored, so --verify costs nothing.
    let dir = scratch("reframe-energy");
    let mut tree = crate::both::energy::Tree::new(&dir);
    tree.rapl("intel-rapl:0", "package-0", 1_000_000, 5_000_000, None);
    let root = tree.root.to_str().unwrap().to_string();
    let (o, report) = run_checks(
        rf,
        "local",
        "energy",
        &["-n", TWO_RANKS, "-S", "size=L", "-S", "iterations=60"],
        &[("HIMENO_ENERGY_ROOT", &root)],
    );
    assert_eq!(tree.reads(), [2], "one reading at each end of the loop");
    assert_all_passed(&o, &report, 1);
    let perf = &cases(&report)[0]["perfvalues"];
    assert_eq!(perf["local:cpu:energy"][0].as_f64(), Some(4.0), "{perf}");
    assert_eq!(perf["local:cpu:energy"][4], "J", "{perf}");
    let per_watt = perf["local:cpu:gflops_per_w"][0].as_f64().unwrap_or(0.0);
    assert!(per_watt > 0.0, "{perf}");
}
