//! `himeno report`'s dashboard exports (`--format bencher`, `--format
//! gbench`), the roofline (`--roofline`, `--ceiling`) and the HTML page
//! (`--html`), from stored records.
//!
//! The exports are checked against the published formats: `tests/formats`
//! holds the documented example of each (the Bencher Metric Format
//! reference, bencher.dev/docs/reference/bencher-metric-format, with its
//! JSON Schema; the JSON example of Google Benchmark's user guide, "Output
//! Formats") and ours must have the same shape: the BMF schema accepts
//! both the example and ours, and every key of the Google Benchmark
//! example is in ours with a value of the same JSON type.

use crate::common::{assert_clean_error, himeno, json_ok, run, scratch, stdout_ok};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The JSON type of `v`, as JSON Schema names them (integers are numbers).
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks `v` against `schema`, the draft-07 keywords the BMF schema uses
/// (`type`, `properties`, `patternProperties` with `.+`, `required`);
/// returns the first violation.
fn validate(schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    if let Some(t) = schema.get("type").and_then(Value::as_str)
        && kind(v) != t
    {
        return Err(format!("{at}: {} where the schema wants {t}", kind(v)));
    }
    let Some(object) = v.as_object() else {
        return Ok(());
    };
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = name.as_str().expect("required names");
        if !object.contains_key(name) {
            return Err(format!("{at}: required {name} missing"));
        }
    }
    for (key, value) in object {
        let here = format!("{at}/{key}");
        if let Some(s) = schema.get("properties").and_then(|p| p.get(key)) {
            validate(s, value, &here)?;
        }
        for (pattern, s) in schema
            .get("patternProperties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            assert_eq!(pattern, ".+", "only the pattern the BMF schema uses");
            if key.is_empty() {
                return Err(format!("{at}: an empty name"));
            }
            validate(s, value, &here)?;
        }
    }
    Ok(())
}

/// Checks that every key of `example` is in `ours` with a value of the same
/// JSON type, recursively (arrays: every element of ours against the
/// example's first).
fn same_shape(example: &Value, ours: &Value, at: &str) -> Result<(), String> {
    if kind(example) != kind(ours) {
        return Err(format!(
            "{at}: {} where the example has {}",
            kind(ours),
            kind(example)
        ));
    }
    match (example, ours) {
        (Value::Object(e), Value::Object(o)) => {
            for (k, ev) in e {
                let ov = o.get(k).ok_or_else(|| format!("{at}: no key {k}"))?;
                same_shape(ev, ov, &format!("{at}/{k}"))?;
            }
        }
        (Value::Array(e), Value::Array(o)) => {
            if let Some(first) = e.first() {
                if o.is_empty() {
                    return Err(format!("{at}: empty where the example has elements"));
                }
                for (i, ov) in o.iter().enumerate() {
                    same_shape(first, ov, &format!("{at}/{i}"))?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The stored records of a CPU sweep and of a run on the emulated GPU.
fn stored() -> [String; 2] {
    ["tests/records/sweep.jsonl", "tests/records/gpu-emu.jsonl"]
        .map(|f| fixture(f).display().to_string())
}

fn report(args: &[&str]) -> std::process::Output {
    let files = stored();
    let mut all: Vec<&str> = vec!["report", &files[0], &files[1]];
    all.extend_from_slice(args);
    run(himeno(&all))
}

#[test]
fn bencher_export_has_the_published_shape() {
    let schema = read_json(&fixture("tests/formats/bmf.schema.json"));
    let example = read_json(&fixture("tests/formats/bencher-example.json"));
    validate(&schema, &example, "example").expect("the documented example fits its schema");
    let ours = json_ok(&report(&["--format", "bencher"]));
    validate(&schema, &ours, "ours").unwrap();
    // The validator refuses what the format does not allow.
    let mut broken = ours.clone();
    let first = broken.as_object_mut().unwrap().values_mut().next().unwrap();
    first["mflops"]["value"] = "fast".into();
    assert!(validate(&schema, &broken, "broken").is_err());
    let benchmarks = ours.as_object().unwrap();
    assert!(benchmarks.len() >= 3, "{ours:#}");
    for (name, measures) in benchmarks {
        assert!(name.starts_with("himeno"), "{name}");
        for slug in [
            "mflops",
            "gbytes-per-s",
            "wall-time-s",
            "share-compute",
            "comm-share",
        ] {
            assert!(measures.get(slug).is_some(), "{name}: no {slug}");
        }
        // No energy figure in these records: no energy measure.
        assert!(measures.get("energy-j").is_none(), "{name}");
        let m = &measures["mflops"];
        assert!(m["lower_value"].as_f64() <= m["value"].as_f64());
        assert!(m["value"].as_f64() <= m["upper_value"].as_f64());
    }
    assert!(
        benchmarks
            .keys()
            .any(|k| k.contains("/backend:gpu-emulated/")),
        "{:?}",
        benchmarks.keys()
    );
}

#[test]
fn gbench_export_has_the_shape_of_the_documented_example() {
    let example = read_json(&fixture("tests/formats/gbench-example.json"));
    let ours = json_ok(&report(&["--format", "gbench"]));
    same_shape(&example, &ours, "").unwrap();
    // The check tells a different shape.
    let mut broken = ours.clone();
    broken["benchmarks"][0]["iterations"] = "many".into();
    assert!(same_shape(&example, &broken, "").is_err());
    let list = ours["benchmarks"].as_array().unwrap();
    for b in list {
        assert_eq!(b["time_unit"], "ms");
        assert!(b["real_time"].as_f64().unwrap() > 0.0);
        assert!(b["mflops"].as_f64().unwrap() > 0.0);
    }
    let emulated: Vec<&Value> = list
        .iter()
        .filter(|b| b["name"].as_str().unwrap().contains("gpu-emulated"))
        .collect();
    assert_eq!(emulated.len(), 1);
    assert!(emulated[0]["label"].as_str().unwrap().contains("EMULATED"));
}

#[test]
fn energy_figures_of_a_record_become_measures() {
    let dir = scratch("energy");
    let mut rec: Value = serde_json::from_str(
        std::fs::read_to_string(fixture("tests/records/valid.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    // As `--energy` records them: the job's figures in the `energy` object.
    rec["energy"] = serde_json::json!({"energy_j": 30.0, "avg_power_w": 120.0,
        "gflops_per_w": 0.05, "j_per_iteration": 0.3, "sources": ["test"], "nodes": []});
    let file = dir.join("e.jsonl");
    std::fs::write(&file, format!("{rec}\n")).unwrap();
    let f = file.display().to_string();
    let b = json_ok(&run(himeno(&["report", &f, "--format", "bencher"])));
    let (_, m) = b.as_object().unwrap().iter().next().unwrap();
    assert_eq!(m["energy-j"]["value"], 30.0);
    assert_eq!(m["avg-power-w"]["value"], 120.0);
    assert_eq!(m["gflops-per-w"]["value"], 0.05);
    assert_eq!(m["j-per-iteration"]["value"], 0.3);
    let g = json_ok(&run(himeno(&["report", &f, "--format", "gbench"])));
    assert_eq!(g["benchmarks"][0]["energy_j"], 30.0);
}

#[test]
fn roofline_and_page_from_stored_records() {
    let dir = scratch("roofline");
    let stream = dir.join("stream.json");
    let s = stdout_ok(&run(himeno(&[
        "bench",
        "stream",
        "--elements",
        "200000",
        "--repeats",
        "3",
        "--threads",
        "1",
        "--format",
        "json",
    ])));
    std::fs::write(&stream, s).unwrap();
    let plots = dir.join("plots");
    let page = dir.join("report.html");
    let o = report(&[
        "--roofline",
        "--ceiling",
        stream.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    let text = stdout_ok(&o);
    assert!(text.contains("== roofline: 0.607 flop/byte"), "{text}");
    assert!(
        text.contains("stream triad, bench stream of 1 rank(s) x 1 thread(s)"),
        "{text}"
    );
    // XS fields (3.7 MB) are in the suite's 32 MiB cache and in the
    // emulated GPU's L2: none is read as a fraction of memory bandwidth.
    let rows: Vec<&str> = text.lines().filter(|l| l.contains(".jsonl:")).collect();
    let roof_rows: Vec<&&str> = rows
        .iter()
        .filter(|l| l.contains("cache-resident"))
        .collect();
    assert!(!roof_rows.is_empty(), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("gpu-emulated") && l.contains("EMULATED"))
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let mut svgs = 0;
    for e in std::fs::read_dir(&plots).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "svg") {
            // Every picture file is in the page, byte for byte.
            let svg = std::fs::read_to_string(&path).unwrap();
            assert!(html.contains(&svg), "{} not in the page", path.display());
            svgs += 1;
        }
    }
    assert!(plots.join("roofline.png").is_file());
    assert_eq!(html.matches("<svg ").count(), svgs);
    assert!(html.contains("EMULATED GPU: not GPU performance") && html.contains("cache-resident"));
}

#[test]
fn exports_and_pages_refuse_what_they_cannot_do() {
    let dir = scratch("refuse");
    let files = stored();
    for (args, words) in [
        (
            vec!["report", "--compare", &files[0], "--format", "bencher"],
            &["--compare prints text"][..],
        ),
        (
            vec!["report", &files[0], "--ceiling", "/nonexistent/stream.json"],
            &["cannot read --ceiling"][..],
        ),
        (
            vec!["report", &files[0], "--ceiling", &files[0]],
            &["not a `bench stream` or `bench transfer`"][..],
        ),
        (
            vec!["report", &files[0], "--html-trace", &files[1]],
            &["--html"][..],
        ),
    ] {
        assert_clean_error(&run(himeno(&args)), words);
    }
    // A page that would replace a results file is refused before anything.
    let copy = dir.join("r.jsonl");
    std::fs::copy(&files[0], &copy).unwrap();
    let c = copy.display().to_string();
    let o = run(himeno(&["report", &c, "--html", &c]));
    assert_clean_error(&o, &["--html"]);
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(&files[0]).unwrap()
    );
}
