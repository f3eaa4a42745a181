//! Slurm's own energy figure for a step, as a results file holds it
//! (`slurm_join` sets it beside the records of that step). `scripts/slurm/sacct-energy.sh --append RESULTS JOBID` appends,
//! after the job's runs, one line per step that Slurm measured:
//! `{"kind":"slurm-energy","job_id":"123","step_id":"0","consumed_energy_j":1234}`
//! (`sacct`'s `ConsumedEnergyRaw`, joules). This module reads one such
//! line; it knows nothing of records, so that the reader of results files
//! can use it.

use serde::{Deserialize, Serialize};

/// The `kind` of a Slurm energy line.
pub const KIND: &str = "slurm-energy";

/// Longest job or step ID read: Slurm's are a few characters.
const MAX_ID: usize = 64;

/// One Slurm energy line as read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlurmEnergy {
    /// The results file, as given on the command line.
    pub file: String,
    /// The line's number in it, from 1.
    pub line: usize,
    /// The job's ID (`SLURM_JOB_ID`).
    pub job_id: String,
    /// The step's ID (`SLURM_STEP_ID`, e.g. `0`).
    pub step_id: String,
    /// Joules Slurm accounted to the whole step.
    pub consumed_energy_j: f64,
}

/// The line's fields.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    kind: String,
    job_id: String,
    step_id: String,
    consumed_energy_j: f64,
}

/// Reads `line` as a Slurm energy line: `None` when it is not one (its
/// `kind` is not [`KIND`]), `Some(Err(why))` when it says it is one but
/// its values are not usable.
pub fn parse(line: &str, file: &str, number: usize) -> Option<Result<SlurmEnergy, String>> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v.get("kind").and_then(|k| k.as_str()) != Some(KIND) {
        return None;
    }
    let checked = serde_json::from_value::<Line>(v)
        .map_err(|e| format!("not a Slurm energy line: {e}"))
        .and_then(|l| {
            let id_ok = |s: &str| {
                !s.is_empty()
                    && s.len() <= MAX_ID
                    && s.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_+".contains(&b))
            };
            if !id_ok(&l.job_id) || !id_ok(&l.step_id) {
                return Err(format!(
                    "Slurm energy line with a job or step ID that is not one: {:?}.{:?}",
                    l.job_id, l.step_id
                ));
            }
            if !(l.consumed_energy_j.is_finite() && l.consumed_energy_j >= 0.0) {
                return Err(format!(
                    "Slurm energy line with consumed_energy_j {}: not a number of joules",
                    l.consumed_energy_j
                ));
            }
            debug_assert_eq!(l.kind, KIND);
            Ok(SlurmEnergy {
                file: file.to_string(),
                line: number,
                job_id: l.job_id,
                step_id: l.step_id,
                consumed_energy_j: l.consumed_energy_j,
            })
        });
    Some(checked)
}
