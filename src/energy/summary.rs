//! What rank 0 makes of every rank's readings: per node, the sum of its
//! counters (the whole-node counter when read, else its parts, never a
//! counter inside another), and over the job the sum of the nodes, with
//! average power, GFLOPS per watt and joules per iteration; or, where a
//! figure cannot be given, why. This is the record's `energy` field.

use super::counters::Role;
use super::view::{NodeView, RankView, SourceView};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The shortest timed loop whose energy is reported, in seconds: the
/// counters update every millisecond (RAPL) to every 100 ms (Cray) and
/// NVML's about every 10 ms, so a shorter loop's delta is mostly the
/// update step.
pub const MIN_WINDOW_S: f64 = 1.0;

/// The record's energy of a run (absent with `--energy off` and in
/// records written before it).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EnergyRecord {
    /// Joules, watts, GFLOPS per watt and joules per iteration of the
    /// timed loop, all nodes together.
    #[serde(flatten)]
    pub figures: Figures,
    /// Seconds between the first and last readings (the longest node's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_s: Option<f64>,
    /// The counters summed, by name, over all nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// Why a figure is missing, or what was counted specially (a wrap).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The test tree read instead of `/sys` (`HIMENO_ENERGY_ROOT`): these
    /// joules are a test's, not the machine's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_tree: Option<String>,
    /// The emulator whose GPU counter was summed: not a GPU's energy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
    /// Per node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeEnergy>,
}

/// The figures of an energy over a timed loop, each where it can be given.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Figures {
    /// Joules of the timed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// `energy_j` over the loop's window, in watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_power_w: Option<f64>,
    /// The loop's GFLOP over `energy_j` (GFLOPS per watt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gflops_per_w: Option<f64>,
    /// `energy_j` over the timed iterations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub j_per_iteration: Option<f64>,
}

impl Figures {
    /// The figures of `uj` microjoules over `window_s` seconds, for
    /// `flops` and `iterations`.
    fn of(uj: u64, window_s: f64, flops: f64, iterations: u64) -> Figures {
        let j = uj as f64 / 1e6;
        Figures {
            energy_j: Some(j),
            avg_power_w: (window_s > 0.0).then(|| j / window_s),
            gflops_per_w: (j > 0.0).then(|| flops / 1e9 / j),
            j_per_iteration: (iterations > 0).then(|| j / iterations as f64),
        }
    }

    /// Only the figures that are finite and not negative (a reader's guard
    /// against a record edited by hand or written by a broken counter).
    pub fn finite(self) -> Figures {
        let keep = |v: Option<f64>| v.filter(|x| x.is_finite() && *x >= 0.0);
        Figures {
            energy_j: keep(self.energy_j),
            avg_power_w: keep(self.avg_power_w),
            gflops_per_w: keep(self.gflops_per_w),
            j_per_iteration: keep(self.j_per_iteration),
        }
    }
}

/// One node's energy.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeEnergy {
    /// The node's host name.
    pub host: String,
    /// The node's figures (its ranks' flops over its joules).
    #[serde(flatten)]
    pub figures: Figures,
    /// Seconds between the node's first and last readings.
    #[serde(default)]
    pub window_s: f64,
    /// Each counter read on the node.
    #[serde(default)]
    pub sources: Vec<SourceEnergy>,
}

/// One counter of a node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SourceEnergy {
    /// Its name (`RAPL package-0`, `Cray energy`, `NVML GPU-...`).
    pub name: String,
    /// How it enters the node's sum (`whole`, `part`, `inside`).
    pub role: Role,
    /// Its joules between the readings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules: Option<f64>,
    /// Whether the node's `energy_j` counts it.
    #[serde(default)]
    pub summed: bool,
    /// Whether it wrapped around once (counted).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wrapped: bool,
    /// Why it has no joules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The emulator's description, for an emulated GPU's counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
}

/// The work the energy paid for: the timed iterations, and the flops of
/// each host's ranks in them.
#[derive(Debug, Clone, Default)]
pub struct Work {
    /// Timed iterations (those of this job, after a restart's).
    pub iterations: u64,
    /// Flops of the timed iterations per host.
    pub flops: BTreeMap<String, f64>,
}

/// The job's energy from every rank's view (rank 0, after the gather);
/// `None` when energy was off.
pub fn summarise(views: Vec<RankView>, work: &Work) -> Option<EnergyRecord> {
    let leaders: Vec<(String, NodeView)> = views
        .iter()
        .filter_map(|v| v.node.clone().map(|n| (v.host.clone(), n)))
        .collect();
    if leaders.is_empty() {
        return None;
    }
    let several = leaders.len() > 1;
    let mut rec = EnergyRecord {
        test_tree: leaders.iter().find_map(|(_, n)| n.test_tree.clone()),
        ..EnergyRecord::default()
    };
    let window = leaders.iter().map(|(_, n)| n.window_s).fold(0.0, f64::max);
    let short = window < MIN_WINDOW_S;
    let mut absent: Vec<String> = Vec::new();
    let mut total_uj: Option<u64> = Some(0);
    for (host, node) in &leaders {
        let mut sources = node.sources.clone();
        // Each GPU once, whichever of its ranks read it.
        for gpu in views
            .iter()
            .filter(|v| &v.host == host)
            .filter_map(|v| v.gpu.as_ref())
        {
            if !sources.iter().any(|s| s.name == gpu.name) {
                sources.push(gpu.clone());
            }
        }
        for a in &node.absent {
            if !absent.contains(a) {
                absent.push(a.clone());
            }
        }
        let whole = sources
            .iter()
            .any(|s| s.role == Role::Whole && s.delta_uj.is_some());
        let summed_role = if whole { Role::Whole } else { Role::Part };
        let at = if several {
            format!("{host}: ")
        } else {
            String::new()
        };
        let mut uj: Option<u64> = None;
        let mut out = Vec::new();
        for s in &sources {
            let summed = !short && s.role == summed_role && s.delta_uj.is_some();
            if summed {
                uj = Some(uj.unwrap_or(0).saturating_add(s.delta_uj.unwrap_or(0)));
                if !rec.sources.contains(&s.name) {
                    rec.sources.push(s.name.clone());
                }
                if s.emulated.is_some() {
                    rec.emulated = s.emulated.clone();
                }
            }
            if let Some(p) = &s.problem {
                rec.notes.push(format!("{at}{}: {p}", s.name));
            } else if s.wrapped && !short {
                rec.notes
                    .push(format!("{at}{} wrapped around once (counted)", s.name));
            }
            out.push(view_to_record(s, summed, short));
        }
        let flops = work.flops.get(host).copied().unwrap_or(0.0);
        let figures = uj
            .map(|uj| Figures::of(uj, node.window_s, flops, work.iterations))
            .unwrap_or_default();
        if uj.is_none() && !short && !sources.is_empty() {
            rec.notes.push(format!("{at}no counter could be read"));
        }
        total_uj = total_uj.zip(uj).map(|(a, b)| a.saturating_add(b));
        rec.nodes.push(NodeEnergy {
            host: host.clone(),
            figures,
            window_s: node.window_s,
            sources: out,
        });
    }
    if rec.nodes.iter().all(|n| n.sources.is_empty()) {
        let mut tried = absent;
        if !views.iter().any(|v| v.gpu.is_some()) {
            tried.push("NVML: no rank ran on a GPU".into());
        }
        rec.notes
            .push(format!("no energy counter: {}", tried.join("; ")));
        total_uj = None;
    } else if short {
        rec.notes.push(format!(
            "the timed loop lasted {window:.3} s, shorter than the {MIN_WINDOW_S} s the \
             counters need between readings: run longer (--seconds) for a figure"
        ));
        total_uj = None;
    }
    rec.window_s = Some(window);
    if let Some(uj) = total_uj {
        let flops = work.flops.values().sum();
        rec.figures = Figures::of(uj, window, flops, work.iterations);
    }
    Some(rec)
}

/// A counter's view as the record keeps it.
fn view_to_record(s: &SourceView, summed: bool, short: bool) -> SourceEnergy {
    SourceEnergy {
        name: s.name.clone(),
        role: s.role,
        joules: s.delta_uj.filter(|_| !short).map(|d| d as f64 / 1e6),
        summed,
        wrapped: s.wrapped,
        problem: s.problem.clone(),
        emulated: s.emulated.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(name: &str, role: Role, delta: Option<u64>) -> SourceView {
        SourceView {
            name: name.into(),
            role,
            delta_uj: delta,
            wrapped: false,
            problem: delta.is_none().then(|| "it is missing".into()),
            emulated: None,
        }
    }

    fn leader(host: &str, window_s: f64, sources: Vec<SourceView>) -> RankView {
        RankView {
            host: host.into(),
            node: Some(NodeView {
                window_s,
                test_tree: None,
                sources,
                absent: Vec::new(),
            }),
            gpu: None,
        }
    }

    fn work(hosts: &[(&str, f64)], iterations: u64) -> Work {
        Work {
            iterations,
            flops: hosts.iter().map(|(h, f)| (h.to_string(), *f)).collect(),
        }
    }

    #[test]
    fn parts_are_summed_per_node_and_nodes_over_the_job() {
        let views = vec![
            leader(
                "a",
                2.0,
                vec![
                    source("RAPL package-0", Role::Part, Some(3_000_000)),
                    source("RAPL dram", Role::Part, Some(1_000_000)),
                    source("RAPL core", Role::Inside, Some(2_500_000)),
                ],
            ),
            RankView {
                host: "a".into(),
                node: None,
                gpu: None,
            },
            leader(
                "b",
                4.0,
                vec![source("RAPL package-0", Role::Part, Some(6_000_000))],
            ),
        ];
        let r = summarise(views, &work(&[("a", 8e9), ("b", 2e9)], 10)).unwrap();
        assert_eq!(r.nodes[0].figures.energy_j, Some(4.0));
        assert_eq!(r.nodes[0].figures.avg_power_w, Some(2.0));
        assert_eq!(r.nodes[0].figures.gflops_per_w, Some(2.0));
        assert_eq!(r.nodes[0].figures.j_per_iteration, Some(0.4));
        assert!(!r.nodes[0].sources[2].summed);
        assert_eq!(r.nodes[1].figures.energy_j, Some(6.0));
        assert_eq!(r.figures.energy_j, Some(10.0));
        assert_eq!(r.window_s, Some(4.0));
        assert_eq!(r.figures.avg_power_w, Some(2.5));
        assert_eq!(r.figures.gflops_per_w, Some(1.0));
        assert_eq!(r.sources, ["RAPL package-0", "RAPL dram"]);
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }

    #[test]
    fn a_whole_node_counter_is_summed_alone() {
        let views = vec![leader(
            "a",
            2.0,
            vec![
                source("Cray cpu_energy", Role::Part, Some(1_000_000)),
                source("Cray energy", Role::Whole, Some(5_000_000)),
            ],
        )];
        let r = summarise(views, &work(&[("a", 1e9)], 1)).unwrap();
        assert_eq!(r.figures.energy_j, Some(5.0));
        assert_eq!(r.sources, ["Cray energy"]);
    }

    #[test]
    fn no_figure_without_a_counter_a_node_or_a_second() {
        let none = vec![leader("a", 2.0, vec![])];
        let r = summarise(none, &work(&[], 1)).unwrap();
        assert_eq!(r.figures.energy_j, None);
        assert!(
            r.notes[0].starts_with("no energy counter: "),
            "{:?}",
            r.notes
        );
        let short = vec![leader(
            "a",
            0.5,
            vec![source("RAPL dram", Role::Part, Some(9))],
        )];
        let r = summarise(short, &work(&[], 1)).unwrap();
        assert_eq!(
            (r.figures.energy_j, r.nodes[0].figures.energy_j),
            (None, None)
        );
        assert!(r.notes[0].contains("shorter than"), "{:?}", r.notes);
        let half = vec![
            leader("a", 2.0, vec![source("RAPL dram", Role::Part, Some(9))]),
            leader("b", 2.0, vec![source("RAPL dram", Role::Part, None)]),
        ];
        let r = summarise(half, &work(&[], 1)).unwrap();
        assert_eq!(r.figures.energy_j, None);
        assert!(r.nodes[0].figures.energy_j.is_some());
        assert_eq!(
            r.notes,
            ["b: RAPL dram: it is missing", "b: no counter could be read"]
        );
        let off = vec![RankView::default()];
        assert_eq!(summarise(off, &work(&[], 1)), None);
    }
}
