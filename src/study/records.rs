//! Reading results files leniently: every JSON line that holds a usable
//! run record (schema 1) becomes a [`RunRecord`]; every other non-empty line
//! becomes a [`Malformed`] entry naming the file, the line and the reason.
//! Nothing a results file contains is fatal: batch jobs killed mid-write,
//! hand edits and foreign lines must not hide the rest of a study.

use crate::error::{Error, Result};
use crate::report::SCHEMA_VERSION;
use crate::timing::Phase;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Where a record came from: file and 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Source {
    /// File name as given on the command line.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// The per-rank part of a record that the report uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankPart {
    /// Rank number.
    pub rank: usize,
    /// Host name.
    #[serde(default)]
    pub host: String,
    /// Seconds of the rank's timed loop.
    #[serde(default)]
    pub loop_s: f64,
    /// Seconds per phase.
    #[serde(default)]
    pub phases_s: BTreeMap<String, f64>,
}

/// The fields of a run record (`crate::report::Record`) that studies need.
/// Unknown fields are ignored and optional ones default, so records from
/// newer or older builds with the same schema number still read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Layout version; only [`SCHEMA_VERSION`] is accepted.
    pub schema: u32,
    /// UTC time the run ended.
    #[serde(default)]
    pub timestamp: String,
    /// User label, e.g. the study name.
    #[serde(default)]
    pub label: Option<String>,
    /// Size preset or `custom`.
    #[serde(default)]
    pub size: String,
    /// Global grid `[NI, NJ, NK]`.
    pub grid: [usize; 3],
    /// Process grid `[PI, PJ, PK]`.
    pub procs: [usize; 3],
    /// Number of ranks.
    pub ranks: usize,
    /// Sweep threads per rank.
    #[serde(default = "one")]
    pub threads_per_rank: usize,
    /// `cpu` or `gpu`.
    #[serde(default)]
    pub backend: String,
    /// Timed iterations completed.
    pub iterations: u64,
    /// False when the run was stopped early.
    #[serde(default = "yes")]
    pub complete: bool,
    /// MFLOPS of the whole job.
    pub mflops: f64,
    /// Seconds of the timed loop (slowest rank).
    pub wall_s: f64,
    /// Fraction of the slowest rank's loop spent computing.
    #[serde(default)]
    pub compute_share: f64,
    /// Fraction of the slowest rank's loop spent communicating.
    #[serde(default)]
    pub comm_share: f64,
    /// Rank with the longest loop.
    #[serde(default)]
    pub slowest_rank: usize,
    /// Verification verdict: passed, failed or not checked.
    #[serde(default)]
    pub verified: Option<bool>,
    /// NUMA binding chosen by `scripts/bind.sh`, when used.
    #[serde(default)]
    pub binding: Option<String>,
    /// Per-rank phase times.
    #[serde(default)]
    pub per_rank: Vec<RankPart>,
    /// Where the record was read from (not part of the file's JSON).
    #[serde(skip_deserializing, default = "no_source")]
    pub source: Source,
}

fn one() -> usize {
    1
}
fn yes() -> bool {
    true
}
fn no_source() -> Source {
    Source {
        file: String::new(),
        line: 0,
    }
}

impl RunRecord {
    /// Interior points of the global grid.
    pub fn interior_points(&self) -> u64 {
        self.grid
            .iter()
            .map(|&n| n.saturating_sub(2) as u64)
            .product()
    }

    /// Number of distinct hosts the ranks ran on (0 when the record has no
    /// per-rank data).
    pub fn hosts(&self) -> usize {
        let mut h: Vec<&str> = self.per_rank.iter().map(|r| r.host.as_str()).collect();
        h.sort_unstable();
        h.dedup();
        h.len()
    }

    /// Seconds per iteration of the timed loop.
    pub fn seconds_per_iteration(&self) -> f64 {
        self.wall_s / self.iterations as f64
    }

    /// Seconds per iteration the slowest rank spent in each phase, in
    /// [`Phase::ALL`] order (zeros when the record has no per-rank data).
    pub fn slowest_phases(&self) -> [f64; 6] {
        let mut out = [0.0; 6];
        if let Some(r) = self.per_rank.iter().find(|r| r.rank == self.slowest_rank) {
            for (o, p) in out.iter_mut().zip(Phase::ALL) {
                *o = r.phases_s.get(p.name()).copied().unwrap_or(0.0) / self.iterations as f64;
            }
        }
        out
    }

    /// Why this record is not fit for a scaling table, if it is not:
    /// stopped early, or verified and found wrong.
    pub fn flag(&self) -> Option<&'static str> {
        if !self.complete {
            Some("incomplete (stopped early)")
        } else if self.verified == Some(false) {
            Some("verification failed")
        } else {
            None
        }
    }

    /// Checks the values a table divides by or groups on.
    fn check(&self) -> std::result::Result<(), String> {
        if self.schema != SCHEMA_VERSION {
            return Err(format!(
                "schema {} is not supported (this build reads schema {SCHEMA_VERSION})",
                self.schema
            ));
        }
        let product: usize = self.procs.iter().product();
        if self.ranks == 0 || product != self.ranks {
            return Err(format!(
                "ranks {} does not match process grid {}x{}x{}",
                self.ranks, self.procs[0], self.procs[1], self.procs[2]
            ));
        }
        if self.grid.iter().any(|&n| n < 3) {
            return Err("grid dimensions must be at least 3".into());
        }
        if self.iterations == 0 && self.complete {
            return Err("a complete run with 0 iterations".into());
        }
        if !(self.mflops.is_finite() && self.mflops >= 0.0) {
            return Err(format!("mflops {} is not a rate", self.mflops));
        }
        if !(self.wall_s.is_finite() && self.wall_s >= 0.0) {
            return Err(format!("wall_s {} is not a duration", self.wall_s));
        }
        Ok(())
    }
}

/// A line that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Malformed {
    /// Where the line is.
    pub source: Source,
    /// Why it was skipped.
    pub why: String,
}

/// What reading results files gave.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Usable records, in file and line order.
    pub records: Vec<RunRecord>,
    /// Skipped lines.
    pub malformed: Vec<Malformed>,
}

/// Parses the text of one results file; `name` labels sources.
pub fn parse(name: &str, text: &str, into: &mut Loaded) {
    for (i, line) in text.lines().enumerate() {
        let source = Source {
            file: name.to_string(),
            line: i + 1,
        };
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let parsed = serde_json::from_str::<RunRecord>(trimmed)
            .map_err(|e| format!("not a run record: {e}"))
            .and_then(|r| r.check().map(|()| r));
        match parsed {
            Ok(mut r) => {
                r.source = source;
                into.records.push(r);
            }
            Err(why) => into.malformed.push(Malformed { source, why }),
        }
    }
}

/// Reads every file in `paths`. A file that cannot be read at all is a usage
/// error (a mistyped name should not produce an empty report); bad lines
/// inside files are collected, not fatal.
pub fn load(paths: &[impl AsRef<Path>]) -> Result<Loaded> {
    let mut loaded = Loaded::default();
    for p in paths {
        let p = p.as_ref();
        let bytes = std::fs::read(p).map_err(|e| {
            Error::usage(format!(
                "cannot read results file {}: {e}; pass files written by --output",
                p.display()
            ))
        })?;
        // Lossy decoding: a torn multi-byte character spoils one line, not the file.
        parse(
            &p.display().to_string(),
            &String::from_utf8_lossy(&bytes),
            &mut loaded,
        );
    }
    Ok(loaded)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal valid record line for tests.
    pub fn line(label: &str, grid: [usize; 3], procs: [usize; 3], mflops: f64) -> String {
        let ranks: usize = procs.iter().product();
        serde_json::json!({
            "schema": 1, "label": label, "size": "custom", "grid": grid, "procs": procs,
            "ranks": ranks, "threads_per_rank": 1, "backend": "cpu", "iterations": 10,
            "complete": true, "mflops": mflops, "wall_s": 1.0, "compute_share": 0.9,
            "comm_share": 0.1, "slowest_rank": 0, "verified": true,
            "per_rank": [{"rank": 0, "host": "h", "loop_s": 1.0,
                          "phases_s": {"compute": 0.9, "comm": 0.1}}],
            "some_future_field": {"ignored": true}
        })
        .to_string()
    }

    #[test]
    fn good_lines_read_and_bad_lines_are_named() {
        let text = format!(
            "{}\n\nnot json\n{{\"schema\": 1}}\n{}\n{}\n{{\"schema\":1,",
            line("a", [10, 10, 10], [1, 1, 1], 100.0),
            line("a", [10, 10, 10], [2, 1, 1], 190.0).replace("\"schema\":1", "\"schema\":7"),
            line("a", [10, 10, 10], [2, 1, 1], 190.0).replace("\"ranks\":2", "\"ranks\":3"),
        );
        let mut l = Loaded::default();
        parse("r.jsonl", &text, &mut l);
        assert_eq!(l.records.len(), 1);
        assert_eq!(l.records[0].source.line, 1);
        let lines: Vec<usize> = l.malformed.iter().map(|m| m.source.line).collect();
        assert_eq!(lines, [3, 4, 5, 6, 7]);
        assert!(
            l.malformed[2].why.contains("schema 7"),
            "{:?}",
            l.malformed[2]
        );
        assert!(l.malformed[3].why.contains("does not match"));
    }

    #[test]
    fn slowest_phases_are_per_iteration() {
        let mut l = Loaded::default();
        parse("f", &line("a", [10, 10, 10], [1, 1, 1], 1.0), &mut l);
        let ph = l.records[0].slowest_phases();
        assert!((ph[0] - 0.09).abs() < 1e-12 && (ph[3] - 0.01).abs() < 1e-12);
        assert_eq!(l.records[0].flag(), None);
    }
}
