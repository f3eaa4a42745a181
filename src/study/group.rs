//! Grouping run records into scaling studies, and the speed-up and
//! efficiency arithmetic.
//!
//! The rule, in order:
//! 1. Records stopped early or with a failed verification are set aside
//!    (listed, never tabulated).
//! 2. The rest are keyed by (label, backend, threads per rank, sweeps per
//!    halo exchange); runs without a label share the empty label. (A
//!    `--temporal` run is never the base of a classic run's speed-up.)
//!    A run on an emulated GPU (a stand-in CUDA driver running the kernels
//!    on the host CPU) counts as backend `gpu-emulated`: it forms its own
//!    groups, titled as emulated, and never joins or scales against real
//!    GPU runs.
//! 3. Within a key, the runs form one **weak-scaling** group when they
//!    declare it (`RunRecord::scaling`: the record's `scaling`, or in a
//!    record without one the word `weak` in its label, any case), or,
//!    when none declares a kind, when they span several grids and
//!    several rank counts while the interior points per rank agree within
//!    5%. Otherwise they are split by grid into **strong-scaling** groups.
//! 4. Within a group, runs with the same rank count, host count, process
//!    grid and grid form one row showing the best (highest MFLOPS) run and
//!    the run count: 4 ranks on one host and 4 ranks over two hosts are
//!    different rows, since only the second sends halos over the network.
//!
//! Speed-up is a ratio of rates, `S = MFLOPS / MFLOPS_base`, where the base
//! is the best row at the group's smallest rank count `n0`; efficiency is
//! `S / (n / n0)`. Using rates rather than times makes runs with different
//! iteration counts comparable, and for weak scaling gives the scaled
//! speed-up (work grows with n), whose ideal is also `n / n0`.

use super::model::Prediction;
use super::records::{RunRecord, Scaling, Source};
use crate::grid::Size;
use crate::timing::PhaseTimes;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Tolerance on points per rank for recognising an unlabelled weak study.
const WEAK_TOLERANCE: f64 = 1.05;

/// One row of a scaling table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Number of ranks.
    pub ranks: usize,
    /// Number of hosts the ranks ran on (0: not recorded).
    pub hosts: usize,
    /// Process grid.
    pub procs: [usize; 3],
    /// Global grid.
    pub grid: [usize; 3],
    /// Runs merged into this row.
    pub runs: usize,
    /// MFLOPS of the best run.
    pub mflops: f64,
    /// Seconds per iteration of the best run.
    pub seconds_per_iteration: f64,
    /// Speed-up over the group's base.
    pub speedup: f64,
    /// Parallel efficiency.
    pub efficiency: f64,
    /// Compute share of the slowest rank's loop.
    pub compute_share: f64,
    /// Communication share of the slowest rank's loop.
    pub comm_share: f64,
    /// Slowest rank's seconds per iteration per phase (in JSON an array
    /// in `Phase::ALL` order).
    #[serde(serialize_with = "crate::timing::in_phase_order")]
    pub slowest_phases: PhaseTimes,
    /// NUMA binding of the best run, if recorded.
    pub binding: Option<String>,
    /// The best run's location.
    pub source: Source,
    /// The model's prediction for this row, when asked for.
    pub model: Option<Prediction>,
}

/// One scaling study.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// Strong or weak.
    pub kind: Scaling,
    /// Label shared by the runs (empty when unlabelled).
    pub label: String,
    /// The grid (strong scaling) or `None` (weak scaling: see the rows).
    pub grid: Option<[usize; 3]>,
    /// Size of the first run (preset or `custom`).
    pub size: Size,
    /// Backend (`gpu-emulated` for runs on an emulated GPU).
    pub backend: String,
    /// Whether the runs were made on an emulated GPU (absent otherwise).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub emulated: bool,
    /// Threads per rank.
    pub threads_per_rank: usize,
    /// Sweeps per halo exchange (`--temporal`).
    pub temporal: usize,
    /// Smallest rank count, the base of speed-up.
    pub base_ranks: usize,
    /// Rows by rank count, then process grid.
    pub rows: Vec<Row>,
}

impl Group {
    /// A short, file-name-safe name for plots.
    pub fn slug(&self) -> String {
        let mut s = match self.kind {
            Scaling::Strong => "strong".to_string(),
            Scaling::Weak => "weak".to_string(),
        };
        if !self.label.is_empty() {
            s.push('-');
            s.push_str(&self.label);
        }
        if let Some(g) = self.grid {
            s.push_str(&format!("-{}x{}x{}", g[0], g[1], g[2]));
        }
        s.push_str(&format!("-{}-t{}", self.backend, self.threads_per_rank));
        if self.temporal > 1 {
            s.push_str(&format!("-T{}", self.temporal));
        }
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// A one-line title.
    pub fn title(&self) -> String {
        let what = match (self.kind, self.grid) {
            (Scaling::Strong, Some(g)) => {
                format!(
                    "strong scaling, grid {}x{}x{} ({})",
                    g[0], g[1], g[2], self.size
                )
            }
            _ => "weak scaling".to_string(),
        };
        let label = if self.label.is_empty() {
            String::new()
        } else {
            format!(" [{}]", self.label)
        };
        let temporal = if self.temporal > 1 {
            format!(", temporal blocking T={}", self.temporal)
        } else {
            String::new()
        };
        // First, so that a caption cut short still says it.
        let emulated = if self.emulated {
            "EMULATED GPU (not GPU performance): "
        } else {
            ""
        };
        format!(
            "{emulated}{what}{label}, {} x{} thread(s)/rank{temporal}",
            self.backend, self.threads_per_rank
        )
    }
}

/// The tables, and the records kept out of them.
#[derive(Debug, Clone, Default)]
pub struct Study {
    /// Scaling groups, in first-appearance order of their key.
    pub groups: Vec<Group>,
    /// Records set aside, with the reason.
    pub flagged: Vec<(RunRecord, &'static str)>,
}

/// What runs of one scaling group share: label, backend, threads per rank
/// and sweeps per halo exchange.
type GroupKey = (String, String, usize, usize);

/// Groups `records` by the rule in the module documentation.
pub fn group(records: &[RunRecord]) -> Study {
    let mut study = Study::default();
    // Keys in first-appearance order, found through a map: a file of a
    // million distinct labels must not cost a million squared steps.
    let mut keys: Vec<GroupKey> = Vec::new();
    let mut index: HashMap<GroupKey, usize> = HashMap::new();
    let mut by_key: BTreeMap<usize, Vec<&RunRecord>> = BTreeMap::new();
    for r in records {
        if let Some(why) = r.flag() {
            study.flagged.push((r.clone(), why));
            continue;
        }
        let key = (
            r.label.clone().unwrap_or_default(),
            backend_of(r),
            r.threads_per_rank,
            r.temporal,
        );
        let idx = *index.entry(key.clone()).or_insert_with(|| {
            keys.push(key);
            keys.len() - 1
        });
        by_key.entry(idx).or_default().push(r);
    }
    for (idx, runs) in by_key {
        let (label, backend, threads, temporal) = keys[idx].clone();
        let make = |kind, grid, runs: &[&RunRecord]| {
            make_group(kind, &label, grid, &backend, [threads, temporal], runs)
        };
        if is_weak(&runs) {
            study.groups.push(make(Scaling::Weak, None, &runs));
        } else {
            // Grids in first-appearance order, each with its runs.
            let mut grids: Vec<[usize; 3]> = Vec::new();
            let mut by_grid: HashMap<[usize; 3], Vec<&RunRecord>> = HashMap::new();
            for r in &runs {
                by_grid
                    .entry(r.grid)
                    .or_insert_with(|| {
                        grids.push(r.grid);
                        Vec::new()
                    })
                    .push(r);
            }
            for g in grids {
                study
                    .groups
                    .push(make(Scaling::Strong, Some(g), &by_grid[&g]));
            }
        }
    }
    study
}

/// The backend a run is grouped under: its own, or `gpu-emulated` for a
/// run on an emulated GPU.
fn backend_of(r: &RunRecord) -> String {
    if r.emulated {
        EMULATED_BACKEND.to_string()
    } else {
        r.backend.name().to_string()
    }
}

/// The backend name of runs on an emulated GPU.
pub const EMULATED_BACKEND: &str = "gpu-emulated";

/// Whether the runs of one key form a weak-scaling study: declared so
/// (by the records' `scaling`, or an older record's label; the runs of a
/// key share their label), or, where none declares a kind, found so from
/// their grids.
fn is_weak(runs: &[&RunRecord]) -> bool {
    if runs.iter().any(|r| r.scaling == Some(Scaling::Weak)) {
        return true;
    }
    if runs.iter().any(|r| r.scaling == Some(Scaling::Strong)) {
        return false;
    }
    let distinct = |f: &dyn Fn(&RunRecord) -> u64| {
        let mut v: Vec<u64> = runs.iter().map(|r| f(r)).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    if distinct(&|r| r.interior_points()) < 2 || distinct(&|r| r.ranks as u64) < 2 {
        return false;
    }
    let per_rank = runs
        .iter()
        .map(|r| r.interior_points() as f64 / r.ranks as f64);
    let (lo, hi) = per_rank.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    hi <= lo * WEAK_TOLERANCE
}

/// Builds one group's rows and its speed-up and efficiency.
fn make_group(
    kind: Scaling,
    label: &str,
    grid: Option<[usize; 3]>,
    backend: &str,
    [threads, temporal]: [usize; 2],
    runs: &[&RunRecord],
) -> Group {
    // Rows keyed by (ranks, hosts, process grid, grid): already in table
    // order.
    type Key = (usize, usize, [usize; 3], [usize; 3]);
    let mut by_row: BTreeMap<Key, Row> = BTreeMap::new();
    for r in runs {
        match by_row.entry((r.ranks, r.hosts(), r.procs, r.grid)) {
            std::collections::btree_map::Entry::Occupied(mut e) => {
                let row = e.get_mut();
                row.runs += 1;
                if r.mflops > row.mflops {
                    *row = Row {
                        runs: row.runs,
                        ..row_of(r)
                    };
                }
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(row_of(r));
            }
        }
    }
    let mut rows: Vec<Row> = by_row.into_values().collect();
    let base_ranks = rows.first().map_or(1, |r| r.ranks);
    let base = rows
        .iter()
        .filter(|r| r.ranks == base_ranks)
        .map(|r| r.mflops)
        .fold(0.0, f64::max);
    for row in &mut rows {
        let (s, e) = speedup_efficiency(row.mflops, row.ranks, base, base_ranks);
        row.speedup = s;
        row.efficiency = e;
    }
    Group {
        kind,
        label: label.to_string(),
        grid,
        size: runs.first().map_or_else(Size::default, |r| r.size),
        backend: backend.to_string(),
        emulated: backend == EMULATED_BACKEND,
        threads_per_rank: threads,
        temporal,
        base_ranks,
        rows,
    }
}

/// Speed-up and efficiency of a run at `ranks` with rate `mflops` over a
/// base run at `base_ranks` with rate `base_mflops` (see the module doc).
/// A zero base rate gives zeros rather than infinities.
pub fn speedup_efficiency(
    mflops: f64,
    ranks: usize,
    base_mflops: f64,
    base_ranks: usize,
) -> (f64, f64) {
    if base_mflops <= 0.0 {
        return (0.0, 0.0);
    }
    let s = mflops / base_mflops;
    (s, s * base_ranks as f64 / ranks as f64)
}

fn row_of(r: &RunRecord) -> Row {
    Row {
        ranks: r.ranks,
        hosts: r.hosts(),
        procs: r.procs,
        grid: r.grid,
        runs: 1,
        mflops: r.mflops,
        seconds_per_iteration: r.seconds_per_iteration(),
        speedup: 0.0,
        efficiency: 0.0,
        compute_share: r.compute_share,
        comm_share: r.comm_share,
        slowest_phases: r.slowest_phases(),
        binding: r.binding.clone(),
        source: r.source.clone(),
        model: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::records::tests::{line, records_of};

    fn records(lines: &[String]) -> Vec<RunRecord> {
        records_of("t", lines)
    }

    #[test]
    fn speedup_and_efficiency_math() {
        assert_eq!(speedup_efficiency(300.0, 4, 100.0, 1), (3.0, 0.75));
        assert_eq!(speedup_efficiency(300.0, 4, 100.0, 2), (3.0, 1.5));
        assert_eq!(speedup_efficiency(50.0, 2, 0.0, 1), (0.0, 0.0));
    }

    #[test]
    fn strong_groups_split_by_grid_and_take_the_best_run() {
        let g = [34, 34, 34];
        let h = [66, 34, 34];
        let study = group(&records(&[
            line("s", g, [1, 1, 1], 100.0),
            line("s", g, [1, 1, 1], 120.0),
            line("s", g, [2, 1, 1], 180.0),
            line("s", g, [4, 1, 1], 240.0),
            line("s", g, [2, 2, 1], 300.0),
            line("s", h, [2, 1, 1], 400.0),
            line("s", h, [4, 1, 1], 600.0),
        ]));
        assert_eq!(study.groups.len(), 2);
        let a = &study.groups[0];
        assert_eq!(
            (a.kind, a.grid, a.base_ranks),
            (Scaling::Strong, Some(g), 1)
        );
        let got: Vec<(usize, usize, f64, f64)> = a
            .rows
            .iter()
            .map(|r| (r.ranks, r.runs, r.speedup, r.efficiency))
            .collect();
        assert_eq!(
            got,
            [
                (1, 2, 1.0, 1.0),
                (2, 1, 1.5, 0.75),
                // Same rank count: ordered by process grid, 2x2x1 first.
                (4, 1, 2.5, 0.625),
                (4, 1, 2.0, 0.5)
            ]
        );
        let b = &study.groups[1];
        assert_eq!(b.base_ranks, 2);
        assert_eq!((b.rows[1].speedup, b.rows[1].efficiency), (1.5, 0.75));
    }

    #[test]
    fn temporal_runs_form_their_own_groups() {
        let g = [34, 34, 34];
        let deep = |procs, mflops| {
            let mut v: serde_json::Value =
                serde_json::from_str(&line("s", g, procs, mflops)).unwrap();
            v["temporal"] = 4.into();
            v.to_string()
        };
        let study = group(&records(&[
            line("s", g, [1, 1, 1], 100.0),
            deep([1, 1, 1], 150.0),
            line("s", g, [2, 1, 1], 180.0),
            deep([2, 1, 1], 240.0),
        ]));
        let got: Vec<(usize, Vec<f64>)> = study
            .groups
            .iter()
            .map(|g| (g.temporal, g.rows.iter().map(|r| r.speedup).collect()))
            .collect();
        assert_eq!(got, [(1, vec![1.0, 1.8]), (4, vec![1.0, 1.6])]);
        assert!(study.groups[1].title().contains("T=4"));
        assert_ne!(study.groups[0].slug(), study.groups[1].slug());
    }

    #[test]
    fn emulated_gpu_runs_form_their_own_groups_titled_as_emulated() {
        let g = [34, 34, 34];
        let gpu = |procs, mflops, emulated: bool| {
            let mut v: serde_json::Value =
                serde_json::from_str(&line("s", g, procs, mflops)).unwrap();
            v["backend"] = "gpu".into();
            // The last rank's device is the emulated one: on two ranks the
            // slowest rank (0) is real, and the run is emulated all the
            // same.
            let ranks: usize = procs.iter().product();
            v["per_rank"] = (0..ranks)
                .map(|r| {
                    let mut e = serde_json::json!({"rank": r, "host": "h", "loop_s": 1.0,
                                                   "phases_s": {"compute": 0.9}});
                    if r + 1 == ranks {
                        e["emulated"] = emulated.into();
                        e["emulator"] = "himeno CUDA emulator (host CPU)".into();
                    }
                    e
                })
                .collect();
            v.to_string()
        };
        let study = group(&records(&[
            gpu([1, 1, 1], 1000.0, false),
            gpu([1, 1, 1], 5.0, true),
            gpu([2, 1, 1], 1800.0, false),
            gpu([2, 1, 1], 9.0, true),
        ]));
        let got: Vec<(&str, bool, Vec<f64>)> = study
            .groups
            .iter()
            .map(|g| {
                (
                    g.backend.as_str(),
                    g.emulated,
                    g.rows.iter().map(|r| r.mflops).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("gpu", false, vec![1000.0, 1800.0]),
                (EMULATED_BACKEND, true, vec![5.0, 9.0])
            ]
        );
        assert!(!study.groups[0].title().contains("EMULATED"));
        assert!(
            study.groups[1]
                .title()
                .starts_with("EMULATED GPU (not GPU performance): strong scaling"),
            "{}",
            study.groups[1].title()
        );
        assert!(study.groups[1].slug().contains("gpu-emulated"));
        assert_ne!(study.groups[0].slug(), study.groups[1].slug());
        let json = serde_json::to_value(&study.groups).unwrap();
        assert_eq!(json[1]["emulated"], true);
        assert!(json[0].get("emulated").is_none(), "{}", json[0]);
    }

    #[test]
    fn weak_groups_by_label_or_by_points_per_rank() {
        // 32^3 interior per rank: 1 rank 34^3, 2 ranks 66x34x34.
        let runs = [
            line("", [34, 34, 34], [1, 1, 1], 100.0),
            line("", [66, 34, 34], [2, 1, 1], 190.0),
        ];
        let study = group(&records(&runs));
        assert_eq!(study.groups.len(), 1);
        assert_eq!(study.groups[0].kind, Scaling::Weak);
        assert_eq!(study.groups[0].rows[1].efficiency, 0.95);
        // The same runs labelled as a strong study of unequal sizes split.
        let study = group(&records(&[
            line("x", [34, 34, 34], [1, 1, 1], 100.0),
            line("x", [130, 34, 34], [2, 1, 1], 190.0),
        ]));
        assert_eq!(study.groups.len(), 2);
        // A "weak" label wins even with uneven points per rank.
        let study = group(&records(&[
            line("weak-M", [34, 34, 34], [1, 1, 1], 100.0),
            line("weak-M", [130, 34, 34], [2, 1, 1], 190.0),
        ]));
        assert_eq!(study.groups.len(), 1);
        assert_eq!(study.groups[0].kind, Scaling::Weak);
    }

    #[test]
    fn rows_split_by_host_count() {
        let g = [34, 34, 34];
        let two_hosts = |mflops: f64| {
            line("s", g, [2, 1, 1], mflops).replace(
                r#""per_rank":[{"#,
                r#""per_rank":[{"rank":1,"host":"other","loop_s":1.0},{"#,
            )
        };
        let study = group(&records(&[
            line("s", g, [1, 1, 1], 100.0),
            two_hosts(150.0),
            line("s", g, [2, 1, 1], 180.0),
            two_hosts(160.0),
        ]));
        let rows: Vec<(usize, usize, usize, f64)> = study.groups[0]
            .rows
            .iter()
            .map(|r| (r.ranks, r.hosts, r.runs, r.mflops))
            .collect();
        assert_eq!(rows, [(1, 1, 1, 100.0), (2, 1, 1, 180.0), (2, 2, 2, 160.0)]);
    }

    #[test]
    fn flagged_records_stay_out_of_tables() {
        let g = [34, 34, 34];
        let bad = line("s", g, [2, 1, 1], 999.0).replace("\"complete\":true", "\"complete\":false");
        let wrong =
            line("s", g, [4, 1, 1], 999.0).replace("\"verified\":true", "\"verified\":false");
        let study = group(&records(&[line("s", g, [1, 1, 1], 100.0), bad, wrong]));
        assert_eq!(study.groups.len(), 1);
        assert_eq!(study.groups[0].rows.len(), 1);
        let why: Vec<&str> = study.flagged.iter().map(|f| f.1).collect();
        assert_eq!(why, ["incomplete (stopped early)", "verification failed"]);
    }
}
