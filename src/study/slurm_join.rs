//! Slurm's energy figure for a step ([`slurm_energy`](super::slurm_energy)) set beside the
//! records of that step. A record knows its job and step (its `slurm`
//! object), so `himeno report` joins each record to the first Slurm energy
//! line after it in the same file with the same job and step: after a
//! requeue a job's step numbers start again, and the line that follows a
//! record is the one its job's end wrote. Slurm's figure covers the whole
//! step (start-up, rehearsal, verification, the report), the record's own
//! `energy_j` the timed loop only: the two are shown side by side, never
//! merged.

use super::records::Loaded;
use serde::Serialize;
use std::fmt::Write as _;

/// A record and Slurm's figure for its step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Joined {
    /// Where the record is.
    pub record: String,
    /// The record's label.
    pub label: Option<String>,
    /// The job's ID.
    pub job_id: String,
    /// The step's ID.
    pub step_id: String,
    /// Joules of the whole step, as Slurm accounted them.
    pub slurm_energy_j: f64,
    /// Joules of the record's timed loop (`energy.energy_j`), where it
    /// measured them.
    pub record_energy_j: Option<f64>,
    /// Where Slurm's line is.
    pub slurm_line: String,
    /// What the two figures cover.
    pub covers: &'static str,
}

/// What Slurm's figure covers, said wherever it is shown.
const COVERS: &str = "Slurm's figure covers the whole step (start-up, rehearsal, verification, \
                      the report); the record's covers its timed loop only";

/// Each record with a job and step, joined to the first Slurm energy line
/// after it in the same file with the same job and step; records without
/// one are left out.
pub fn join(loaded: &Loaded) -> Vec<Joined> {
    let mut out = Vec::new();
    for r in &loaded.records {
        let Some(s) = &r.slurm else { continue };
        let Some(step) = &s.step_id else { continue };
        let found = loaded.slurm_energy.iter().find(|e| {
            e.file == r.source.file
                && e.line > r.source.line
                && e.job_id == s.job_id
                && e.step_id == *step
        });
        if let Some(e) = found {
            out.push(Joined {
                record: r.source.to_string(),
                label: r.label.clone(),
                job_id: s.job_id.clone(),
                step_id: step.clone(),
                slurm_energy_j: e.consumed_energy_j,
                record_energy_j: r.energy.and_then(|x| x.energy_j),
                slurm_line: format!("{}:{}", e.file, e.line),
                covers: COVERS,
            });
        }
    }
    out
}

/// The text report's lines for the joined records (nothing when none).
pub fn text(joined: &[Joined]) -> String {
    let mut s = String::new();
    if joined.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "Slurm's energy (sacct ConsumedEnergyRaw) beside the records' own:"
    );
    let _ = writeln!(s, "  ({COVERS})");
    for j in joined {
        let own = j
            .record_energy_j
            .map_or_else(|| "none measured".to_string(), |e| format!("{e:.3} J"));
        let _ = writeln!(
            s,
            "  {} job {} step {}: Slurm {:.0} J, record {own}{}",
            j.record,
            j.job_id,
            j.step_id,
            j.slurm_energy_j,
            j.label
                .as_deref()
                .map_or_else(String::new, |l| format!(" [{l}]")),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::records::{self, tests::line};
    use crate::study::slurm_energy;

    fn with_slurm(label: &str, job: &str, step: &str, energy_j: Option<f64>) -> String {
        let mut v: serde_json::Value =
            serde_json::from_str(&line(label, [9, 9, 9], [1, 1, 1], 100.0)).unwrap();
        v["slurm"] = serde_json::json!({"job_id": job, "step_id": step});
        if let Some(e) = energy_j {
            v["energy"] = serde_json::json!({"energy_j": e});
        }
        v.to_string()
    }

    fn energy(job: &str, step: &str, j: f64) -> String {
        serde_json::json!({"kind": slurm_energy::KIND, "job_id": job, "step_id": step, "consumed_energy_j": j})
            .to_string()
    }

    #[test]
    fn records_join_the_next_line_of_their_job_and_step() {
        let text = [
            with_slurm("a", "7", "0", Some(2.5)),
            with_slurm("b", "7", "1", None),
            energy("7", "1", 900.0),
            energy("7", "0", 1200.0),
            // A requeued job numbers its steps again: this record's line
            // is the one after it, not the one above.
            with_slurm("c", "7", "0", None),
            energy("7", "0", 3000.0),
            energy("8", "0", 5.0),
        ]
        .join("\n");
        let mut l = Loaded::default();
        records::parse("f", &text, &mut l);
        assert!(l.malformed.is_empty(), "{:?}", l.malformed);
        assert_eq!(l.records.len(), 3);
        assert_eq!(l.slurm_energy.len(), 4);
        let j = join(&l);
        let got: Vec<(&str, f64, Option<f64>)> = j
            .iter()
            .map(|x| {
                (
                    x.label.as_deref().unwrap(),
                    x.slurm_energy_j,
                    x.record_energy_j,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a", 1200.0, Some(2.5)),
                ("b", 900.0, None),
                ("c", 3000.0, None)
            ]
        );
        let t = super::text(&j);
        assert!(
            t.contains("f:1 job 7 step 0: Slurm 1200 J, record 2.500 J [a]"),
            "{t}"
        );
        assert!(t.contains("whole step"), "{t}");
    }

    #[test]
    fn bad_slurm_lines_are_named_and_other_objects_stay_records() {
        let text = [
            energy("7", "0", -1.0),
            energy("7\"x", "0", 1.0),
            r#"{"kind":"slurm-energy","job_id":"7"}"#.to_string(),
            r#"{"kind":"other"}"#.to_string(),
        ]
        .join("\n");
        let mut l = Loaded::default();
        records::parse("f", &text, &mut l);
        assert!(l.slurm_energy.is_empty());
        let why: Vec<&str> = l.malformed.iter().map(|m| m.why.as_str()).collect();
        assert_eq!(why.len(), 4, "{why:?}");
        assert!(why[0].contains("not a number of joules"), "{why:?}");
        assert!(why[1].contains("not one"), "{why:?}");
        assert!(why[2].contains("not a Slurm energy line"), "{why:?}");
        assert!(why[3].starts_with("not a run record"), "{why:?}");
    }
}
