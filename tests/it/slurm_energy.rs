//! Slurm's energy figure kept beside the records' own: a run records the
//! Slurm job and step it ran in (`slurm`), `scripts/slurm/sacct-energy.sh
//! --append` appends Slurm's figure per step to the results file (here
//! with a stub `sacct` on `PATH`: no cluster), and `himeno report` joins
//! the two, in text and JSON, while a results file without them reports
//! as before.

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// A tiny run appending to `file` inside Slurm job `job`, step `step`.
fn run_in_step(file: &Path, job: &str, step: &str, label: &str) {
    let mut args = TINY_RUN.to_vec();
    let f = file.to_str().unwrap();
    args.extend_from_slice(&["--threads", "1", "--output", f, "--label", label]);
    let mut c = himeno(&args);
    c.env("SLURM_JOB_ID", job).env("SLURM_STEP_ID", step);
    let o = run(c);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `sacct-energy.sh --append FILE JOB` with a stub `sacct` that prints
/// the fixed table of job 4242: steps 0 and 1 measured, the batch and
/// extern steps not, the job's own line left out.
fn append_slurm_energy(dir: &Path, file: &Path) -> std::process::Output {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let sacct = bin.join("sacct");
    std::fs::write(
        &sacct,
        "#!/bin/bash\n\
         case \"$*\" in\n\
         *JobIDRaw*) printf '4242|4100\\n4242.batch|0\\n4242.extern|\\n4242.0|1500\\n4242.1|2600\\n' ;;\n\
         *parsable2*) printf '4242|4.10K\\n4242.0|1.50K\\n4242.1|2.60K\\n' ;;\n\
         *) printf 'JobID ConsumedEnergy\\n4242 4.10K\\n' ;;\n\
         esac\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sacct, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("bash");
    c.arg("scripts/slurm/sacct-energy.sh")
        .args(["--append", file.to_str().unwrap(), "4242"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PATH", path);
    run(c)
}

#[test]
fn a_run_records_its_slurm_job_and_step() {
    let dir = scratch("record");
    let file = dir.join("r.jsonl");
    run_in_step(&file, "4242", "3", "in-slurm");
    let mut plain = himeno(&{
        let mut a = TINY_RUN.to_vec();
        a.extend_from_slice(&["--threads", "1", "--output", file.to_str().unwrap()]);
        a
    });
    plain.env_remove("SLURM_JOB_ID").env_remove("SLURM_STEP_ID");
    assert!(run(plain).status.success());
    let r = records(&file);
    assert_eq!(
        r[0]["slurm"],
        serde_json::json!({"job_id": "4242", "step_id": "3"})
    );
    assert!(r[1].get("slurm").is_none(), "outside Slurm: no field");
}

#[test]
fn the_script_appends_slurm_energy_and_the_report_joins_it() {
    let dir = scratch("join");
    let file = dir.join("study.jsonl");
    run_in_step(&file, "4242", "0", "step-0");
    run_in_step(&file, "4242", "1", "step-1");
    // Before the Slurm lines: the report as it always was.
    let f = file.to_str().unwrap();
    let before = stdout_ok(&run(himeno(&["report", f])));
    assert!(!before.contains("Slurm"), "{before}");
    let before_json = json_ok(&run(himeno(&["report", f, "--format", "json"])));
    assert!(before_json.get("slurm_energy").is_none());

    let o = append_slurm_energy(&dir, &file);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(
        lines[2],
        r#"{"kind":"slurm-energy","job_id":"4242","step_id":"0","consumed_energy_j":1500}"#
    );
    assert_eq!(
        lines[3],
        r#"{"kind":"slurm-energy","job_id":"4242","step_id":"1","consumed_energy_j":2600}"#
    );

    let o = run(himeno(&["report", f]));
    let out = stdout_ok(&o);
    assert!(!stderr(&o).contains("skipped"), "{}", stderr(&o));
    assert!(!out.contains("malformed"), "{out}");
    assert!(out.contains("covers the whole step"), "{out}");
    assert!(
        out.contains(&format!("{f}:1 job 4242 step 0: Slurm 1500 J, record ")),
        "{out}"
    );
    assert!(
        out.contains(&format!("{f}:2 job 4242 step 1: Slurm 2600 J, record ")),
        "{out}"
    );
    // The study's table is the one it was.
    assert!(out.starts_with(before.trim_end_matches("\n")), "{out}");

    let v: Value = json_ok(&run(himeno(&["report", f, "--format", "json"])));
    let s = v["slurm_energy"].as_array().expect("slurm_energy entries");
    assert_eq!(s.len(), 2, "{v}");
    assert_eq!(s[0]["slurm_energy_j"], 1500.0);
    assert_eq!(s[0]["step_id"], "0");
    assert_eq!(s[1]["slurm_energy_j"], 2600.0);
    assert!(s[0]["covers"].as_str().unwrap().contains("whole step"));
    assert_eq!(v["malformed"], serde_json::json!([]));
    assert_eq!(v["groups"], before_json["groups"]);
}

#[test]
fn the_script_starts_a_fresh_line_after_a_torn_one() {
    let dir = scratch("torn");
    let file = dir.join("torn.jsonl");
    std::fs::write(&file, "{\"schema\":1,\"gri").unwrap();
    let o = append_slurm_energy(&dir, &file);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0], "{\"schema\":1,\"gri");
    assert!(lines[1].starts_with(r#"{"kind":"slurm-energy""#), "{text}");
}
