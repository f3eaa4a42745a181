//! Reading results files leniently: every JSON line that holds a usable
//! run record (schema 1) becomes a [`RunRecord`]; every other non-empty line
//! becomes a [`Malformed`] entry naming the file, the line and the reason.
//! A Slurm energy line (`"kind":"slurm-energy"`, [`slurm_energy`]) is read
//! into [`Loaded::slurm_energy`], not skipped.
//! Nothing a results file contains is fatal: batch jobs killed mid-write,
//! hand edits and foreign lines must not hide the rest of a study.

use super::slurm_energy::{self, SlurmEnergy};
use crate::config::Scaling as StatedScaling;
use crate::error::{Error, Result};
use crate::files::{self, Links};
use crate::grid::MAX_POINTS;
use crate::grid::decomp::MAX_RANKS;
use crate::output;
use crate::report::{Record, SCHEMA_VERSION};
use crate::timing::{LONGEST_S, PhaseTimes};
use serde::Serialize;
use std::io::{BufRead, BufReader, Read};
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

/// Strong or weak scaling: what a study holds fixed as the ranks grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scaling {
    /// Fixed global grid, growing ranks.
    Strong,
    /// Fixed points per rank, growing ranks.
    Weak,
}

/// A run record ([`Record`], the type the run writes) as a study reads
/// it, with what the reader found out when it read the line. It
/// dereferences to the record.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// The record; `per_rank` holds only the slowest rank's part.
    pub record: Record,
    /// Where the record was read from.
    pub source: Source,
    /// Distinct hosts among all ranks, counted when the record was read
    /// (before `per_rank` is cut to the slowest rank).
    pub host_count: usize,
    /// Whether any rank's GPU was emulated, found when the record was read
    /// (before `per_rank` is cut): such a run measures the host CPU
    /// running an emulator, never GPU performance.
    pub emulated: bool,
    /// The scaling the record says it belongs to, where it says so: its
    /// `scaling` field (`single`: none). A record written before the run
    /// stated it falls back to its label, where the word `weak` (any case)
    /// has always declared a weak study. `None`: not declared (the
    /// grouping decides from the grids).
    pub scaling: Option<Scaling>,
    /// The job's energy figures, where the record has them (see
    /// [`JobEnergy`]).
    pub energy: Option<JobEnergy>,
}

/// The job-level energy figures a record may hold (`--energy`): the
/// job's figures of the record's `energy` object, each where it is a
/// finite, non-negative number. A record without them (every record of a
/// run without an energy counter, and every older one) simply has none.
pub type JobEnergy = crate::energy::summary::Figures;

/// The job's figures of `record`, when it has any.
fn job_energy(record: &Record) -> Option<JobEnergy> {
    let e = record.energy.as_ref()?.figures.finite();
    (e != JobEnergy::default()).then_some(e)
}

impl std::ops::Deref for RunRecord {
    type Target = Record;
    fn deref(&self) -> &Record {
        &self.record
    }
}

impl std::ops::DerefMut for RunRecord {
    fn deref_mut(&mut self) -> &mut Record {
        &mut self.record
    }
}

/// The scaling a record declares (see [`RunRecord::scaling`]): its own
/// field, or for a record without one, its label's word `weak`.
fn declared_scaling(r: &Record) -> Option<Scaling> {
    match r.scaling {
        Some(StatedScaling::Strong) => Some(Scaling::Strong),
        Some(StatedScaling::Weak) => Some(Scaling::Weak),
        Some(StatedScaling::Single) => None,
        None => r
            .label
            .as_deref()
            .filter(|l| l.to_ascii_lowercase().contains("weak"))
            .map(|_| Scaling::Weak),
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
        self.host_count
    }

    /// Distinct hosts in `per_rank`.
    fn count_hosts(&self) -> usize {
        let mut h: Vec<&str> = self.per_rank.iter().map(|r| r.host.as_str()).collect();
        h.sort_unstable();
        h.dedup();
        h.len()
    }

    /// Iterations the record's timed loop ran: those after the
    /// checkpoint of a restarted run.
    pub fn timed_iterations(&self) -> u64 {
        let from = self.restarted_from.as_ref().map_or(0, |r| r.iteration);
        self.iterations.saturating_sub(from).max(1)
    }

    /// Seconds per iteration of the timed loop.
    pub fn seconds_per_iteration(&self) -> f64 {
        self.wall_s / self.timed_iterations() as f64
    }

    /// Seconds per iteration the slowest rank spent in each phase (zeros
    /// when the record has no per-rank data).
    pub fn slowest_phases(&self) -> PhaseTimes {
        self.per_rank
            .iter()
            .find(|r| r.rank == self.slowest_rank)
            .map_or_else(PhaseTimes::default, |r| {
                r.phases_s.divided_by(self.timed_iterations() as f64)
            })
    }

    /// Why this record is not fit for a scaling table, if it is not:
    /// stopped early, or verified and found wrong.
    pub fn flag(&self) -> Option<&'static str> {
        if !self.complete {
            Some("incomplete (stopped early)")
        } else if self.verified() == Some(false) {
            Some("verification failed")
        } else {
            None
        }
    }

    /// Checks the values a table divides by, groups on, plots or models:
    /// every number within what a real run can produce, every product of
    /// counts free of overflow. A record outside these bounds is skipped
    /// (`file:line: why`) rather than allowed to make a table, a plot's axis
    /// or the model infinite or NaN.
    fn check(&self) -> std::result::Result<(), String> {
        if self.schema != SCHEMA_VERSION {
            return Err(format!(
                "schema {} is not supported (this build reads schema {SCHEMA_VERSION})",
                self.schema
            ));
        }
        if let Some(&n) = self.grid.iter().find(|&&n| !(3..=MAX_POINTS).contains(&n)) {
            return Err(format!(
                "grid dimension {n} is not from 3 to {MAX_POINTS} points"
            ));
        }
        let product = self
            .procs
            .iter()
            .try_fold(1usize, |acc, &p| acc.checked_mul(p))
            .filter(|&p| p <= MAX_RANKS);
        if self.ranks == 0 || product != Some(self.ranks) {
            return Err(format!(
                "ranks {} does not match process grid {}x{}x{} (of at most {MAX_RANKS} ranks)",
                self.ranks, self.procs[0], self.procs[1], self.procs[2]
            ));
        }
        if (0..3).any(|d| self.procs[d] > self.grid[d] - 2) {
            return Err("the process grid splits the grid finer than its points".into());
        }
        if self.threads_per_rank == 0 {
            return Err("threads_per_rank is 0".into());
        }
        if !(1..=crate::grid::decomp::MAX_DEPTH).contains(&self.temporal) {
            return Err(format!("temporal {} is out of range", self.temporal));
        }
        if self.iterations == 0 {
            return Err("a run with 0 iterations".into());
        }
        if let Some(r) = &self.restarted_from
            && r.iteration >= self.iterations
        {
            return Err(format!(
                "restarted from iteration {} but ended at {}: it timed nothing",
                r.iteration, self.iterations
            ));
        }
        // A record that contradicts itself was not written by a run: each
        // number may be plausible alone, but a table of them would mislead.
        // 0: a record from before the plan was recorded.
        let planned = self.planned_iterations;
        if planned != 0
            && (self.iterations > planned || (self.complete && self.iterations != planned))
        {
            return Err(format!(
                "iterations {} against {planned} planned in a run marked {}",
                self.iterations,
                if self.complete { "complete" } else { "stopped" }
            ));
        }
        if self.wall_s == 0.0 {
            return Err(format!(
                "wall_s 0 for {} timed iterations: no loop takes no time",
                self.iterations
            ));
        }
        if self.per_rank.len() > self.ranks {
            return Err(format!(
                "{} per_rank entries for {} ranks",
                self.per_rank.len(),
                self.ranks
            ));
        }
        if let Some(r) = self.per_rank.iter().find(|r| r.rank >= self.ranks) {
            return Err(format!(
                "per_rank names rank {} of a run of {} ranks",
                r.rank, self.ranks
            ));
        }
        if self.slowest_rank >= self.ranks {
            return Err(format!(
                "slowest_rank {} of a run of {} ranks",
                self.slowest_rank, self.ranks
            ));
        }
        if !within(self.mflops, MAX_MFLOPS) {
            return Err(format!(
                "mflops {} is not a rate from 0 to {MAX_MFLOPS:e}",
                output::number(self.mflops)
            ));
        }
        if !within(self.wall_s, LONGEST_S) {
            return Err(format!(
                "wall_s {} is not a duration from 0 to {LONGEST_S:e} s",
                output::number(self.wall_s)
            ));
        }
        for (name, v) in [
            ("compute_share", self.compute_share),
            ("comm_share", self.comm_share),
        ] {
            if !within(v, MAX_SHARE) {
                return Err(format!(
                    "{name} {} is not a fraction of the loop time",
                    output::number(v)
                ));
            }
        }
        for r in &self.per_rank {
            let times = std::iter::once(("loop_s", r.loop_s))
                .chain(r.phases_s.iter().map(|(p, &v)| (p.name(), v)));
            for (name, v) in times {
                if !within(v, LONGEST_S) {
                    return Err(format!(
                        "per_rank rank {}: {name} {} is not a duration from 0 to \
                         {LONGEST_S:e} s",
                        r.rank,
                        output::number(v)
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Largest plausible rate of a whole job, in MFLOPS (a zettaflop machine).
const MAX_MFLOPS: f64 = 1e15;
/// Largest share of the loop time (a fraction, with room for rounding).
const MAX_SHARE: f64 = 1.01;

/// Whether `v` is a number from 0 to `max`.
fn within(v: f64, max: f64) -> bool {
    v.is_finite() && (0.0..=max).contains(&v)
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
    /// Slurm's energy figures for steps (`sacct-energy.sh --append`), in
    /// file and line order.
    pub slurm_energy: Vec<SlurmEnergy>,
}

/// Longest line read (64 MiB, a record of about 200 000 ranks): the rest
/// of a longer line is skipped without being kept in memory.
const MAX_LINE: usize = 64 << 20;

/// Most bytes read from one results file (16 GiB): a file larger, or one
/// that grows without end while it is read, is an error, not a read that
/// never ends.
const MAX_FILE: u64 = 16 << 30;

/// Parses the text of one results file; `name` labels sources.
pub fn parse(name: &str, text: &str, into: &mut Loaded) {
    for (i, line) in text.lines().enumerate() {
        parse_line(name, i + 1, line.as_bytes(), into);
    }
}

/// Parses line `number` (from 1) of file `name` into `into`.
fn parse_line(name: &str, number: usize, bytes: &[u8], into: &mut Loaded) {
    let source = Source {
        file: name.to_string(),
        line: number,
    };
    // Lossy decoding: a torn multi-byte character spoils one line, not the file.
    let line = String::from_utf8_lossy(bytes);
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return;
    }
    // A JSON array would deserialize into a record by position.
    let parsed = if trimmed.starts_with('{') {
        serde_json::from_str::<Record>(trimmed)
            .map_err(|e| format!("not a run record: {e}"))
            .and_then(|record| {
                let r = RunRecord {
                    scaling: declared_scaling(&record),
                    energy: job_energy(&record),
                    record,
                    source: source.clone(),
                    host_count: 0,
                    emulated: false,
                };
                r.check().map(|()| r)
            })
    } else {
        Err("not a run record: a record is one JSON object per line".to_string())
    };
    match parsed {
        Ok(mut r) => {
            // Only the slowest rank's part is used: keeping the rest would
            // let memory grow with every rank of every record.
            r.host_count = r.count_hosts();
            r.emulated = r.per_rank.iter().any(|p| p.emulated);
            let slowest = r.slowest_rank;
            r.per_rank.retain(|p| p.rank == slowest);
            r.per_rank.truncate(1);
            into.records.push(r);
        }
        // Not a record: a Slurm energy line is read as one, not skipped.
        Err(why) => match slurm_energy::parse(trimmed, name, number) {
            Some(Ok(e)) => into.slurm_energy.push(e),
            Some(Err(why)) => into.malformed.push(Malformed { source, why }),
            None => into.malformed.push(Malformed { source, why }),
        },
    }
}

/// Reads the lines of `reader` (file `name`) into `into`, each at most
/// [`MAX_LINE`] bytes kept, at most [`MAX_FILE`] bytes in all.
fn read_lines(name: &str, reader: impl Read, into: &mut Loaded) -> std::io::Result<()> {
    let mut reader = BufReader::new(reader.take(MAX_FILE + 1));
    let mut line: Vec<u8> = Vec::new();
    let mut too_long = false;
    let mut number = 0;
    let mut total: u64 = 0;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let (chunk, ends) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (&buf[..at], at + 1),
            None => (buf, buf.len()),
        };
        if line.len() + chunk.len() > MAX_LINE {
            too_long = true;
        } else {
            line.extend_from_slice(chunk);
        }
        let complete = ends > chunk.len();
        reader.consume(ends);
        total += ends as u64;
        if total > MAX_FILE {
            return Err(std::io::Error::other(format!(
                "more than {} GiB: not a results file",
                MAX_FILE >> 30
            )));
        }
        if complete {
            number += 1;
            finish_line(name, number, &mut line, &mut too_long, into);
        }
    }
    if !line.is_empty() || too_long {
        number += 1;
        finish_line(name, number, &mut line, &mut too_long, into);
    }
    Ok(())
}

/// Parses the line gathered in `line` (or reports it too long), and clears it.
fn finish_line(
    name: &str,
    number: usize,
    line: &mut Vec<u8>,
    too_long: &mut bool,
    into: &mut Loaded,
) {
    if *too_long {
        into.malformed.push(Malformed {
            source: Source {
                file: name.to_string(),
                line: number,
            },
            why: format!("line longer than {} MiB: not a run record", MAX_LINE >> 20),
        });
    } else {
        parse_line(name, number, line, into);
    }
    line.clear();
    *too_long = false;
}

/// Reads every file in `paths`. A file that cannot be read at all is a usage
/// error (a mistyped name should not produce an empty report); bad lines
/// inside files are collected, not fatal.
pub fn load(paths: &[impl AsRef<Path>]) -> Result<Loaded> {
    let mut loaded = Loaded::default();
    for p in paths {
        let p = p.as_ref();
        let cannot = |e: std::io::Error| {
            Error::usage(format!(
                "cannot read results file {}: {e}; pass files written by --output",
                p.display()
            ))
        };
        let file = files::open_regular(p, MAX_FILE, Links::Follow).map_err(cannot)?;
        read_lines(&p.display().to_string(), file, &mut loaded).map_err(cannot)?;
    }
    Ok(loaded)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::timing::Phase;

    /// The records of `lines` read as file `source`, every line valid.
    pub fn records_of(source: &str, lines: &[String]) -> Vec<RunRecord> {
        let mut l = Loaded::default();
        parse(source, &lines.join("\n"), &mut l);
        assert!(l.malformed.is_empty(), "{:?}", l.malformed);
        l.records
    }

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
    fn energy_is_read_from_the_energy_object() {
        let base: serde_json::Value =
            serde_json::from_str(&line("a", [10, 10, 10], [1, 1, 1], 1.0)).unwrap();
        let mut nested = base.clone();
        nested["energy"] = serde_json::json!({"energy_j": 5.0, "avg_power_w": 50.0,
            "gflops_per_w": null, "j_per_iteration": 0.5, "sources": ["rapl"], "nodes": []});
        let mut none = base.clone();
        none["energy"] = serde_json::json!({"energy_j": null, "notes": ["no counter"]});
        let mut l = Loaded::default();
        let text = [nested, none, base].map(|v| v.to_string()).join("\n");
        parse("f", &text, &mut l);
        let e: Vec<Option<JobEnergy>> = l.records.iter().map(|r| r.energy).collect();
        assert_eq!(
            e[0],
            Some(JobEnergy {
                energy_j: Some(5.0),
                avg_power_w: Some(50.0),
                gflops_per_w: None,
                j_per_iteration: Some(0.5)
            })
        );
        assert_eq!((e[1], e[2]), (None, None));
    }

    #[test]
    fn slowest_phases_are_per_iteration() {
        let mut l = Loaded::default();
        parse("f", &line("a", [10, 10, 10], [1, 1, 1], 1.0), &mut l);
        let ph = l.records[0].slowest_phases();
        assert!(
            (ph[Phase::Compute] - 0.09).abs() < 1e-12 && (ph[Phase::Comm] - 0.01).abs() < 1e-12
        );
        assert_eq!(l.records[0].flag(), None);
    }

    #[test]
    fn values_a_table_or_plot_cannot_take_are_refused() {
        let good = line("a", [10, 10, 10], [2, 1, 1], 100.0);
        let bad = [
            good.replace("\"compute\":0.9", "\"compute\":1e308"),
            good.replace("\"mflops\":100.0", "\"mflops\":1e300"),
            good.replace("\"wall_s\":1.0", "\"wall_s\":-1.0"),
            good.replace("\"comm_share\":0.1", "\"comm_share\":7.0"),
            good.replace("\"iterations\":10", "\"iterations\":0"),
            good.replace("[2,1,1]", "[4294967296,4294967296,2]"),
            good.replace("[2,1,1]", "[9,1,1]"),
            good.replace("[10,10,10]", "[10,10,2000000]"),
        ];
        // Records whose numbers contradict each other.
        let changed = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
            f(&mut v);
            v.to_string()
        };
        let rank = |r: usize| serde_json::json!({"rank": r, "host": "h", "loop_s": 1.0});
        let contradictory = [
            changed(&|v| v["planned_iterations"] = 5.into()),
            changed(&|v| v["planned_iterations"] = 20.into()),
            changed(&|v| v["wall_s"] = 0.0.into()),
            changed(&|v| v["per_rank"] = vec![rank(0), rank(1), rank(0)].into()),
            changed(&|v| v["per_rank"] = vec![rank(0), rank(2)].into()),
            changed(&|v| v["slowest_rank"] = 2.into()),
        ];
        let mut l = Loaded::default();
        parse("f", &good, &mut l);
        assert_eq!(l.records.len(), 1, "{:?}", l.malformed);
        // As the run writes them: a stopped run did fewer than planned.
        for fine in [
            changed(&|v| v["planned_iterations"] = 10.into()),
            changed(&|v| {
                v["planned_iterations"] = 20.into();
                v["complete"] = false.into();
            }),
        ] {
            let mut l = Loaded::default();
            parse("f", &fine, &mut l);
            assert_eq!(l.records.len(), 1, "{fine}: {:?}", l.malformed);
        }
        for b in bad.iter().chain(&contradictory) {
            assert_ne!(b, &good);
            let mut l = Loaded::default();
            parse("f", b, &mut l);
            assert!(l.records.is_empty(), "accepted: {b}");
            assert_eq!(l.malformed.len(), 1);
        }
    }

    #[test]
    fn only_json_objects_are_records() {
        let v: serde_json::Value =
            serde_json::from_str(&line("a", [10, 10, 10], [1, 1, 1], 1.0)).unwrap();
        let fields = [
            "schema",
            "timestamp",
            "label",
            "size",
            "grid",
            "procs",
            "ranks",
            "threads_per_rank",
            "backend",
            "iterations",
            "complete",
            "mflops",
            "wall_s",
        ];
        let array: Vec<serde_json::Value> = fields.iter().map(|f| v[f].clone()).collect();
        let mut l = Loaded::default();
        parse("f", &serde_json::to_string(&array).unwrap(), &mut l);
        assert!(l.records.is_empty());
        assert!(
            l.malformed[0].why.contains("JSON object"),
            "{:?}",
            l.malformed
        );
    }

    #[test]
    fn lines_are_bounded_and_only_the_slowest_rank_is_kept() {
        let mut rec: serde_json::Value =
            serde_json::from_str(&line("a", [10, 10, 10], [2, 1, 1], 1.0)).unwrap();
        rec["per_rank"] = serde_json::json!([
            {"rank": 0, "loop_s": 1.0, "phases_s": {"compute": 0.5}},
            {"rank": 1, "loop_s": 1.0, "phases_s": {"compute": 0.7}}
        ]);
        rec["slowest_rank"] = 1.into();
        let long = "x".repeat(MAX_LINE + 10);
        let text = format!("{rec}\n{long}\n{rec}");
        let mut l = Loaded::default();
        read_lines("f", text.as_bytes(), &mut l).unwrap();
        assert_eq!(l.records.len(), 2);
        assert_eq!(l.records[1].source.line, 3);
        assert_eq!(l.records[0].per_rank.len(), 1);
        assert!((l.records[0].slowest_phases()[Phase::Compute] - 0.07).abs() < 1e-12);
        assert_eq!(l.malformed.len(), 1);
        assert!(l.malformed[0].why.contains("longer than"));
        assert!(load(&["/dev/zero"]).is_err());
    }
}
