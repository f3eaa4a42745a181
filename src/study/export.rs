//! `himeno report --format bencher` and `--format gbench`: the runs of
//! results files as input for regression dashboards.
//!
//! One benchmark per (label, size, ranks, process grid, backend, threads
//! per rank, sweeps per exchange T); its runs are merged, the best (highest
//! MFLOPS) run giving the values. Runs stopped early or failing their
//! verification are left out, as from the tables; runs on an emulated GPU
//! are the backend `gpu-emulated`, never mixed with real GPU runs.
//!
//! - **Bencher Metric Format** (`bencher`): one JSON object, benchmark name
//!   -> measure slug -> `{value, lower_value, upper_value}`, the lower and
//!   upper values the least and greatest over the benchmark's runs.
//! - **Google Benchmark JSON** (`gbench`, as `--benchmark_format=json`
//!   writes it): `context` and a `benchmarks` array, one entry per
//!   benchmark with `real_time` (ms per iteration), `iterations`, and the
//!   other measures as user counters (numbers beside them). himeno times
//!   wall-clock only, so `cpu_time` repeats `real_time`; `mhz_per_cpu` is
//!   0 (not recorded).
//!
//! Measures: MFLOPS, effective GB/s, seconds per iteration and of the
//! timed loop, the slowest rank's compute and communication shares and its
//! share of each phase, and, where the record has them (`--energy`: the
//! record's `energy` object, [`JobEnergy`]), the job's joules, average
//! watts, GFLOPS per watt and joules per iteration.

use super::group::EMULATED_BACKEND;
use super::records::{JobEnergy, RunRecord};
use crate::timing::Phase;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// What the runs of one benchmark share.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    label: String,
    size: String,
    ranks: usize,
    procs: [usize; 3],
    backend: String,
    threads: usize,
    temporal: usize,
}

impl Key {
    fn of(r: &RunRecord) -> Key {
        let size = match r.size {
            crate::grid::Size::Custom => {
                format!("{}x{}x{}", r.grid[0], r.grid[1], r.grid[2])
            }
            s => s.to_string(),
        };
        Key {
            label: r.label.clone().unwrap_or_default(),
            size,
            ranks: r.ranks,
            procs: r.procs,
            backend: if r.emulated {
                EMULATED_BACKEND.to_string()
            } else {
                r.backend.name().to_string()
            },
            threads: r.threads_per_rank,
            temporal: r.temporal,
        }
    }

    /// The benchmark's name: `himeno[/LABEL]/size:S/ranks:4/procs:2x2x1/
    /// backend:cpu/threads:1/T:1`, Google Benchmark's `name/arg:value` style.
    fn name(&self) -> String {
        let label = if self.label.is_empty() {
            String::new()
        } else {
            format!("/{}", self.label)
        };
        format!(
            "himeno{label}/size:{}/ranks:{}/procs:{}x{}x{}/backend:{}/threads:{}/T:{}",
            self.size,
            self.ranks,
            self.procs[0],
            self.procs[1],
            self.procs[2],
            self.backend,
            self.threads,
            self.temporal
        )
    }
}

/// One run's measures, by slug, in output order.
fn measures(r: &RunRecord) -> Vec<(String, f64)> {
    let mut m = vec![
        ("mflops".to_string(), r.mflops),
        ("gbytes-per-s".to_string(), r.gbytes_per_s),
        (
            "seconds-per-iteration".to_string(),
            r.seconds_per_iteration(),
        ),
        ("wall-time-s".to_string(), r.wall_s),
        ("compute-share".to_string(), r.compute_share),
        ("comm-share".to_string(), r.comm_share),
    ];
    let slowest = r.per_rank.iter().find(|x| x.rank == r.slowest_rank);
    if let Some(rank) = slowest.filter(|x| x.loop_s > 0.0) {
        for p in Phase::ALL {
            m.push((
                format!("share-{}", p.name()),
                rank.phases_s[p] / rank.loop_s,
            ));
        }
    }
    if let Some(e) = r.energy {
        m.extend(energy_measures(&e));
    }
    m
}

/// The energy measures a record has (none without `--energy` figures).
fn energy_measures(e: &JobEnergy) -> Vec<(String, f64)> {
    [
        ("energy-j", e.energy_j),
        ("avg-power-w", e.avg_power_w),
        ("gflops-per-w", e.gflops_per_w),
        ("j-per-iteration", e.j_per_iteration),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
    .collect()
}

/// The runs fit for a dashboard, by benchmark, in name order.
fn benchmarks(records: &[RunRecord]) -> BTreeMap<String, (Key, Vec<&RunRecord>)> {
    let mut by: BTreeMap<String, (Key, Vec<&RunRecord>)> = BTreeMap::new();
    for r in records.iter().filter(|r| r.flag().is_none()) {
        let key = Key::of(r);
        by.entry(key.name())
            .or_insert_with(|| (key, Vec::new()))
            .1
            .push(r);
    }
    by
}

/// The run of `runs` with the highest MFLOPS.
fn best<'a>(runs: &[&'a RunRecord]) -> &'a RunRecord {
    runs.iter()
        .copied()
        .max_by(|a, b| a.mflops.total_cmp(&b.mflops))
        .expect("a benchmark has at least one run")
}

/// JSON number of `v` (a non-finite value, which a checked record cannot
/// give, as 0).
fn number(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::from(0), Value::Number)
}

/// The Bencher Metric Format document of `records`.
pub fn bencher(records: &[RunRecord]) -> Value {
    let mut out = Map::new();
    for (name, (_, runs)) in benchmarks(records) {
        let top = best(&runs);
        let all: Vec<Vec<(String, f64)>> = runs.iter().map(|r| measures(r)).collect();
        let mut slugs = Map::new();
        for (slug, value) in measures(top) {
            let of_runs = all
                .iter()
                .filter_map(|m| m.iter().find(|(s, _)| *s == slug).map(|x| x.1));
            let (lo, hi) = of_runs.fold((value, value), |(lo, hi), v| (lo.min(v), hi.max(v)));
            slugs.insert(
                slug,
                json!({"value": number(value), "lower_value": number(lo), "upper_value": number(hi)}),
            );
        }
        out.insert(name, Value::Object(slugs));
    }
    Value::Object(out)
}

/// The Google Benchmark JSON document of `records`.
pub fn gbench(records: &[RunRecord]) -> Value {
    let benches = benchmarks(records);
    let newest = records
        .iter()
        .map(|r| r.timestamp.as_str())
        .max()
        .unwrap_or_default();
    let first = records.first();
    let host = first
        .and_then(|r| r.provenance.hosts.first().cloned())
        .unwrap_or_default();
    let executable = first
        .and_then(|r| r.provenance.command.first().cloned())
        .unwrap_or_else(|| "himeno".to_string());
    let version = first.map_or(String::new(), |r| {
        format!(
            "himeno {} ({})",
            r.provenance.version,
            r.provenance.features.join(",")
        )
    });
    let cpus = records
        .iter()
        .map(|r| r.ranks * r.threads_per_rank)
        .max()
        .unwrap_or(0);
    let mut list = Vec::new();
    for (index, (name, (key, runs))) in benches.into_iter().enumerate() {
        let top = best(&runs);
        let ms = top.seconds_per_iteration() * 1e3;
        let points = top.interior_points() as f64 / top.seconds_per_iteration();
        let mut b = Map::new();
        b.insert("name".into(), name.clone().into());
        b.insert("family_index".into(), index.into());
        b.insert("per_family_instance_index".into(), 0.into());
        b.insert("run_name".into(), name.into());
        b.insert("run_type".into(), "iteration".into());
        b.insert("repetitions".into(), 1.into());
        b.insert("repetition_index".into(), 0.into());
        b.insert("threads".into(), (key.ranks * key.threads).into());
        b.insert("iterations".into(), top.timed_iterations().into());
        b.insert("real_time".into(), number(ms));
        b.insert("cpu_time".into(), number(ms));
        b.insert("time_unit".into(), "ms".into());
        b.insert("bytes_per_second".into(), number(top.gbytes_per_s * 1e9));
        b.insert("items_per_second".into(), number(points));
        if top.emulated {
            b.insert(
                "label".into(),
                "EMULATED GPU: the host CPU running an emulator, not GPU performance".into(),
            );
        }
        b.insert("runs".into(), runs.len().into());
        for (slug, v) in measures(top) {
            b.insert(slug.replace('-', "_"), number(v));
        }
        list.push(Value::Object(b));
    }
    json!({
        "context": {
            "date": newest,
            "host_name": host,
            "executable": executable,
            "num_cpus": cpus,
            "mhz_per_cpu": 0,
            "cpu_scaling_enabled": false,
            "build_type": "release",
            "library_build_type": "release",
            "himeno_version": version,
            "caches": [],
            "load_avg": [],
        },
        "benchmarks": list,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::records::tests::{line, records_of};

    fn records(lines: &[String]) -> Vec<RunRecord> {
        records_of("r.jsonl", lines)
    }

    #[test]
    fn runs_of_one_configuration_are_one_benchmark_with_their_range() {
        let r = records(&[
            line("a", [10, 10, 10], [2, 1, 1], 100.0),
            line("a", [10, 10, 10], [2, 1, 1], 140.0),
            line("a", [10, 10, 10], [1, 2, 1], 120.0),
        ]);
        let b = bencher(&r);
        let o = b.as_object().unwrap();
        assert_eq!(o.len(), 2, "{b:#}");
        let m =
            &b["himeno/a/size:10x10x10/ranks:2/procs:2x1x1/backend:cpu/threads:1/T:1"]["mflops"];
        assert_eq!(m["value"], 140.0);
        assert_eq!(m["lower_value"], 100.0);
        assert_eq!(m["upper_value"], 140.0);
        let g = gbench(&r);
        assert_eq!(g["benchmarks"].as_array().unwrap().len(), 2);
        assert_eq!(g["benchmarks"][0]["time_unit"], "ms");
        assert!(g["benchmarks"][0].get("energy_j").is_none());
    }

    #[test]
    fn energy_is_a_measure_only_where_the_record_has_it() {
        let mut v: serde_json::Value =
            serde_json::from_str(&line("e", [10, 10, 10], [1, 1, 1], 100.0)).unwrap();
        v["energy"] = serde_json::json!({"energy_j": 12.5, "avg_power_w": 250.0,
            "gflops_per_w": 0.4, "j_per_iteration": 1.25});
        let r = records(&[v.to_string(), line("n", [10, 10, 10], [1, 1, 1], 100.0)]);
        let b = bencher(&r);
        let e = &b["himeno/e/size:10x10x10/ranks:1/procs:1x1x1/backend:cpu/threads:1/T:1"];
        assert_eq!(e["energy-j"]["value"], 12.5);
        assert_eq!(e["gflops-per-w"]["value"], 0.4);
        let n = &b["himeno/n/size:10x10x10/ranks:1/procs:1x1x1/backend:cpu/threads:1/T:1"];
        assert!(n.get("energy-j").is_none() && n.get("mflops").is_some());
        let g = gbench(&r);
        assert_eq!(g["benchmarks"][0]["avg_power_w"], 250.0);
    }
}
