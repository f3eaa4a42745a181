//! The cells of a group's table, formatted once: the text table and the
//! HTML page lay out the same headings and the same numbers, each with its
//! own widths or tags.

use super::group::{Group, Row};
use crate::timing::Phase;

/// "2x2x1".
pub fn triple(v: [usize; 3]) -> String {
    format!("{}x{}x{}", v[0], v[1], v[2])
}

/// A group's table in parts, so that a rendering can put its own marks
/// between them (the text table's `|` before the phases and the model).
pub struct Cells {
    /// Ranks, hosts, procs and, in a weak study, the grid.
    pub placement: Vec<String>,
    /// Runs, MFLOPS, ms/it, speed-up, efficiency, compute and comm shares.
    pub figures: Vec<String>,
    /// The slowest rank's ms per iteration per phase, in `Phase::ALL` order.
    pub phases: Vec<String>,
    /// The model's ms per iteration and comm share, where the row has one.
    pub model: Option<[String; 2]>,
}

/// Whether the group's table has a grid column and model columns.
pub struct Shape {
    /// A weak study: each row has its own grid.
    pub weak: bool,
    /// Some row has a model prediction.
    pub model: bool,
}

impl Shape {
    /// The shape of `g`'s table.
    pub fn of(g: &Group) -> Shape {
        Shape {
            weak: g.kind == super::records::Scaling::Weak,
            model: g.rows.iter().any(|r| r.model.is_some()),
        }
    }

    /// The headings, in the parts of [`Cells`] (a phase is named alone: the
    /// renderings say its unit).
    pub fn headings(&self) -> Cells {
        let mut placement = vec!["ranks".to_string(), "hosts".into(), "procs".into()];
        if self.weak {
            placement.push("grid".into());
        }
        let figures = [
            "runs", "MFLOPS", "ms/it", "speed-up", "eff%", "comp%", "comm%",
        ];
        Cells {
            placement,
            figures: figures.map(String::from).to_vec(),
            phases: Phase::ALL.iter().map(|p| p.name().to_string()).collect(),
            model: self
                .model
                .then(|| ["model ms/it".to_string(), "model comm%".to_string()]),
        }
    }

    /// The cells of one row.
    pub fn row(&self, r: &Row) -> Cells {
        let mut placement = vec![r.ranks.to_string(), r.hosts.to_string(), triple(r.procs)];
        if self.weak {
            placement.push(triple(r.grid));
        }
        Cells {
            placement,
            figures: vec![
                r.runs.to_string(),
                format!("{:.1}", r.mflops),
                format!("{:.3}", r.seconds_per_iteration * 1e3),
                format!("{:.2}", r.speedup),
                format!("{:.1}", 100.0 * r.efficiency),
                format!("{:.1}", 100.0 * r.compute_share),
                format!("{:.1}", 100.0 * r.comm_share),
            ],
            phases: r
                .slowest_phases
                .values()
                .iter()
                .map(|v| format!("{:.4}", v * 1e3))
                .collect(),
            model: r.model.as_ref().map(|m| {
                [
                    format!("{:.3}", m.total_s * 1e3),
                    format!("{:.1}", 100.0 * m.comm_share),
                ]
            }),
        }
    }
}
