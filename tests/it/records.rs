//! The run record's JSON over time: `tests/records/` holds records that the
//! himeno of commit 1c833e9 wrote (before the record became one typed,
//! shared type), unedited, one case per file (see each file's name): every
//! one must read into `himeno::report::Record` and write back to the very
//! same bytes, be read by `himeno report` as a usable record (or set aside
//! for the reason it always was), and a run made now must write the same
//! fields with the same JSON types.

use crate::common::*;
use himeno::report::Record;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The fixture files, with their lines.
fn fixtures() -> Vec<(PathBuf, Vec<String>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/records");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/records")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(files.len() >= 11, "{files:?}");
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let lines = text.lines().map(String::from).collect();
            (p, lines)
        })
        .collect()
}

#[test]
fn records_written_before_the_record_type_read_and_write_back_byte_for_byte() {
    for (path, lines) in fixtures() {
        for (i, line) in lines.iter().enumerate() {
            let rec: Record = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1));
            assert_eq!(
                &serde_json::to_string(&rec).unwrap(),
                line,
                "{}:{}",
                path.display(),
                i + 1
            );
        }
    }
    // What `--format json` printed: the same type, pretty, with a newline.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/records/valid.pretty.json");
    let text = std::fs::read_to_string(path).unwrap();
    let rec: Record = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_string_pretty(&rec).unwrap() + "\n", text);
}

#[test]
fn the_typed_record_holds_what_the_old_json_said() {
    let read = |name: &str| -> Vec<Record> {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/records")
                .join(name),
        )
        .unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let interrupted = &read("interrupted.jsonl")[0];
    assert!(interrupted.verification.interrupted());
    assert_eq!(interrupted.verified(), None);
    assert!(!read("valid.jsonl")[0].verification.interrupted());
    assert_eq!(read("invalid.jsonl")[0].verified(), Some(false));
    assert_eq!(read("custom.jsonl")[0].size.to_string(), "custom");
    let gpu = &read("gpu-emu.jsonl")[0];
    assert_eq!(gpu.backend.name(), "gpu");
    let placement = &gpu.per_rank[0].placement;
    assert_eq!(placement.device.as_ref(), gpu.provenance.devices.first());
    assert_eq!(placement.cpus, None);
    for r in read("local4.jsonl")[0].per_rank.iter() {
        let cpus = r.placement.cpus.as_ref().expect("a CPU rank's threads");
        assert_eq!(cpus.cpus.len(), r.placement.threads);
        assert!(!cpus.allowed.is_empty());
    }
}

#[test]
fn every_old_record_is_read_by_the_reports() {
    let files: Vec<String> = fixtures()
        .into_iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    let mut args = vec!["report", "--format", "json"];
    args.extend(files.iter().map(String::as_str));
    let r = json_ok(&run(himeno(&args)));
    assert_eq!(r["malformed"], serde_json::json!([]), "{r}");
    // Set aside as they always were: the stopped runs and the wrong answer.
    let mut flagged: Vec<String> = r["flagged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let src = f["source"].as_str().unwrap();
            let file = Path::new(src.rsplit_once(':').unwrap().0);
            let name = file.file_name().unwrap().to_string_lossy();
            format!("{name} {}", f["reason"])
        })
        .collect();
    flagged.sort();
    assert_eq!(
        flagged,
        [
            "ckpt.jsonl \"incomplete (stopped early)\"",
            "invalid.jsonl \"verification failed\"",
            "term.jsonl \"incomplete (stopped early)\"",
        ]
    );
    // The sweep's weak studies: one declared by its label, one found from
    // its grids alone.
    let groups = r["groups"].as_array().unwrap();
    let kind = |label: &str| {
        groups
            .iter()
            .find(|g| g["label"] == label)
            .map(|g| g["kind"].as_str().unwrap().to_string())
    };
    assert_eq!(kind("fx-weak").as_deref(), Some("weak"));
    assert_eq!(kind("fx-scaled").as_deref(), Some("weak"));
    assert_eq!(kind("fx-strong").as_deref(), Some("strong"));
}

/// The record's fields that are left out when there is nothing to say (a
/// calibration that timed nothing): a run may write one that the old
/// record of the same options lacks, where it now times something (the
/// wavefront's tile heights), and readers of old records already meet
/// them absent. `energy` is written by every run with `--energy auto`
/// (the default) since it existed, a note alone where the node has no
/// counter.
const OPTIONAL: [&str; 3] = ["kernel_choice", "temporal_choice", "energy"];

/// Where `now` and `old` differ in shape: an object's keys (recursively;
/// `now` may add an [`OPTIONAL`] field), a value's JSON type, an array by
/// its first element. A `null` on either side matches any type: an
/// optional value present in one run and not the other (huge pages where
/// Linux tells, the MPI library of an MPI build).
fn shape_differences(path: &str, now: &Value, old: &Value, out: &mut Vec<String>) {
    match (now, old) {
        (Value::Null, _) | (_, Value::Null) => {}
        (Value::Object(a), Value::Object(b)) => {
            // Keys now, less the optional fields the old record lacks.
            let now_keys = a
                .keys()
                .filter(|k| {
                    !(path.is_empty() && OPTIONAL.contains(&k.as_str()) && !b.contains_key(*k))
                })
                .cloned()
                .collect::<std::collections::BTreeSet<_>>();
            let old_keys = b.keys().cloned().collect::<std::collections::BTreeSet<_>>();
            if now_keys != old_keys {
                out.push(format!(
                    "{path}: keys {now_keys:?} now, {old_keys:?} before"
                ));
            }
            for (k, v) in a {
                if let Some(w) = b.get(k) {
                    shape_differences(&format!("{path}.{k}"), v, w, out);
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if let (Some(x), Some(y)) = (a.first(), b.first()) {
                shape_differences(&format!("{path}[0]"), x, y, out);
            }
        }
        (Value::Bool(_), Value::Bool(_))
        | (Value::Number(_), Value::Number(_))
        | (Value::String(_), Value::String(_)) => {}
        _ => out.push(format!("{path}: {now} now, {old} before")),
    }
}

#[test]
fn a_run_now_writes_the_fields_and_types_of_the_old_records() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/records");
    let old = |name: &str| -> Value {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        serde_json::from_str(text.lines().next().unwrap()).unwrap()
    };
    let cases: [(&str, &[&str]); 3] = [
        ("valid.jsonl", &["--size", "XS", "--iterations", "5"]),
        (
            "local4.jsonl",
            &[
                "--size",
                "XS",
                "--iterations",
                "5",
                "--local-ranks",
                "4",
                "--threads",
                "1",
            ],
        ),
        (
            "temporal4.jsonl",
            &[
                "--size",
                "XS",
                "--iterations",
                "8",
                "--temporal",
                "4",
                "--threads",
                "1",
            ],
        ),
    ];
    for (fixture, args) in cases {
        let mut all = vec!["run", "--format", "json"];
        all.extend_from_slice(args);
        let mut now = json_ok(&run(himeno(&all)));
        // The one field records gained since: the run's kind of study,
        // `single` outside a study (absent from the old records, which
        // still read).
        let scaling = now.as_object_mut().unwrap().remove("scaling");
        assert_eq!(scaling, Some(Value::from("single")), "{fixture}");
        let mut diff = Vec::new();
        shape_differences("", &now, &old(fixture), &mut diff);
        assert!(diff.is_empty(), "{fixture}: {diff:#?}");
    }
}
