//! The run record: one type, written by the run (one JSON line per run in
//! results files, `--format json`) and read back by the studies
//! (`study::records`).
//!
//! Its JSON is the schema-1 layout records have always had, byte for byte
//! (`tests/it/records.rs` holds records written before this type existed
//! and checks that each reads and writes back to the same bytes). So that
//! records from older builds, hand-made test lines and foreign writers'
//! records still read, every field but the few a table cannot do without
//! (`schema`, `grid`, `procs`, `ranks`, `iterations`, `mflops`, `wall_s`,
//! a rank's `rank`) takes a default when it is missing; the reader checks
//! the values (`study::records`), not their presence.

use super::placement::Placement;
use super::provenance::Provenance;
use crate::checkpoint::{RestartedFrom, Segment, Written};
use crate::comm::Launch;
use crate::config::{BackendKind, Scaling};
use crate::config::{Prefetch, Staging, Stores};
use crate::grid::Size;
use crate::kernel_choice::KernelChoice;
use crate::machine::threads::Bind;
use crate::solver::MemoryUse;
use crate::temporal::TemporalChoice;
use crate::timing::{PerPhase, PhaseTimes, Stats};
use crate::verify::Verdict;
use serde::{Deserialize, Serialize};

/// Per-rank line of the record.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RankRecord {
    /// Rank number.
    pub rank: usize,
    /// Host name.
    #[serde(default)]
    pub host: String,
    /// Rank number among the ranks on its host (picks the GPU).
    #[serde(default)]
    pub node_rank: usize,
    /// Process coordinates.
    #[serde(default)]
    pub coords: [usize; 3],
    /// Owned interior points per dimension.
    #[serde(default)]
    pub points: [usize; 3],
    /// Seconds of the rank's timed loop.
    #[serde(default)]
    pub loop_s: f64,
    /// Seconds per phase.
    #[serde(default)]
    pub phases_s: PhaseTimes,
    /// Where the rank's work ran (backend, threads, device, binding).
    #[serde(default)]
    pub placement: Placement,
    /// CPU time of the rank's process in the timed loop over the loop's
    /// wall time times its sweep threads: near 1 when the rank had its
    /// CPUs to itself (its main thread adds a little during exchanges),
    /// well below when other processes ran on them.
    #[serde(default)]
    pub cpu_share: f64,
    /// Fraction of the rank's memory on huge pages, where Linux tells.
    #[serde(default)]
    pub huge_pages: Option<f64>,
    /// The rank's memory: the preflight's estimate, its process's resident
    /// memory before the buffers and at its peak.
    #[serde(default)]
    pub memory: MemoryUse,
    /// `true` when the rank's GPU was emulated on the host CPU (absent
    /// otherwise): its times are not GPU performance.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub emulated: bool,
    /// The emulator's own description, with `emulated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<String>,
    /// The GPU sweep kernel's variant (`--gpu-sweep`); absent for CPU
    /// ranks and in records written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_sweep: Option<String>,
    /// Host waits for the device (stream, event and context
    /// synchronisations, blocking copies) in one steady-state iteration of
    /// the timed loop, as an emulated device counts them; absent on real
    /// devices, CPU ranks and in records written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_waits_per_iteration: Option<u64>,
    /// Bytes copied between host and device in one steady-state iteration
    /// (gosa's 8 included), counted like `host_waits_per_iteration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_device_bytes_per_iteration: Option<u64>,
    /// The GPU field layout (`--gpu-layout`); absent for CPU ranks and
    /// in records written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_layout: Option<String>,
}

/// One run's result: what JSON lines in results files hold.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// Layout version ([`super::SCHEMA_VERSION`]).
    pub schema: u32,
    /// UTC time the run ended, RFC 3339.
    #[serde(default)]
    pub timestamp: String,
    /// User label (`--label`), e.g. a study name.
    #[serde(default)]
    pub label: Option<String>,
    /// The kind of study the run belongs to (`--scaling`: `strong`,
    /// `weak` or `single`); absent in records written before the run
    /// stated it, whose readers fall back to the label
    /// (`study::records`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<Scaling>,
    /// Size preset or `custom`.
    #[serde(default)]
    pub size: Size,
    /// Global grid `[NI, NJ, NK]`.
    pub grid: [usize; 3],
    /// Process grid `[PI, PJ, PK]`.
    pub procs: [usize; 3],
    /// Number of ranks.
    pub ranks: usize,
    /// How the ranks were started: `single`, `mpi`, or `threads` (in-process
    /// ranks, `--local-ranks`).
    #[serde(default)]
    pub launch: Launch,
    /// Sweep threads per rank.
    #[serde(default = "one")]
    pub threads_per_rank: usize,
    /// `cpu` or `gpu`.
    #[serde(default)]
    pub backend: BackendKind,
    /// Timed iterations completed.
    pub iterations: u64,
    /// Timed iterations planned (0 in records written before it was
    /// recorded: a run plans at least one).
    #[serde(default)]
    pub planned_iterations: u64,
    /// For a blocked `--seconds` run, the iterations first planned from
    /// the calibration, before the loop planned again from its own pace
    /// an eighth and half of the way in (`planned_iterations`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_iterations: Option<u64>,
    /// False when the run was stopped early by a signal.
    #[serde(default = "yes")]
    pub complete: bool,
    /// Gosa of the last iteration.
    #[serde(default)]
    pub gosa: f64,
    /// MFLOPS (34 flops per interior point and iteration).
    pub mflops: f64,
    /// Score: MFLOPS relative to the original's Pentium III 600 MHz.
    #[serde(default)]
    pub score: f64,
    /// Seconds of the timed loop (slowest rank).
    pub wall_s: f64,
    /// Seconds of the rehearsal (slowest rank).
    #[serde(default)]
    pub warmup_s: f64,
    /// Effective memory bandwidth: 56 bytes per interior point and
    /// iteration over the wall time, in GB/s (1e9 bytes).
    #[serde(default)]
    pub gbytes_per_s: f64,
    /// Stream triad bandwidth the run was compared with, in GB/s.
    #[serde(default)]
    pub stream_triad_gbytes_per_s: Option<f64>,
    /// `gbytes_per_s` over the stream triad bandwidth.
    #[serde(default)]
    pub stream_fraction: Option<f64>,
    /// Sum13 bandwidth (the solver's 56 bytes per point as 14 plain
    /// streams) measured by `--stream quick`, in GB/s.
    #[serde(default)]
    pub stream_sum13_gbytes_per_s: Option<f64>,
    /// `gbytes_per_s` over the Sum13 bandwidth.
    #[serde(default)]
    pub sum13_fraction: Option<f64>,
    /// Per phase: min/avg/max seconds across ranks.
    #[serde(default)]
    pub phases: PerPhase<Stats>,
    /// Rank with the longest timed loop.
    #[serde(default)]
    pub slowest_rank: usize,
    /// Fraction of the slowest rank's loop spent computing.
    #[serde(default)]
    pub compute_share: f64,
    /// Fraction of the slowest rank's loop spent communicating.
    #[serde(default)]
    pub comm_share: f64,
    /// Halo bytes sent per iteration, all ranks together (a `T`-deep
    /// exchange every `T` iterations counts a `T`-th per iteration).
    #[serde(default)]
    pub halo_bytes_per_iteration: u64,
    /// Halo messages sent per iteration, all ranks together.
    #[serde(default)]
    pub halo_messages_per_iteration: f64,
    /// Sweeps per halo exchange (`--temporal`): 1 is the classic
    /// iteration; above 1 the answer is the classic one, computed with
    /// fewer memory passes, so the score is not comparable with classic
    /// Himeno scores.
    #[serde(default = "one")]
    pub temporal: usize,
    /// What `--temporal auto` chose and why (with its calibration), or
    /// the warning that an explicit T's working set does not fit the
    /// cache; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temporal_choice: Option<TemporalChoice>,
    /// Which kernel `--prefetch auto` and `--stores auto` timed fastest
    /// and swept with, or which tile height the wavefront did (with the
    /// calibration); absent when nothing was timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_choice: Option<KernelChoice>,
    /// Fingerprint of the final interior `p`, hexadecimal.
    #[serde(default)]
    pub p_fingerprint: String,
    /// How the result was verified. It is written as two fields, as
    /// records always had it: `verified` (`true` passed, `false` failed,
    /// `null` not checked) and `verification` (the whole verdict, which
    /// repeats it); see [`verdict_fields`].
    #[serde(flatten, with = "verdict_fields")]
    pub verification: Verdict,
    /// GPU halo staging (`pinned`/`pageable`), null on CPU.
    #[serde(default)]
    pub staging: Option<Staging>,
    /// Whether the halo exchange overlapped the sweep (GPU ranks only).
    #[serde(default)]
    pub overlap: bool,
    /// Thread binding policy.
    #[serde(default = "unbound")]
    pub bind: Bind,
    /// CPU store policy asked for (`auto`, `streaming`, `cached`); each
    /// rank's placement says which stores it used.
    #[serde(default)]
    pub stores: Option<Stores>,
    /// CPU prefetch policy asked for when not the default `auto` (`on`,
    /// `off`; absent for `auto`, as in records written before the option
    /// existed) and the classic sweep ran (absent when `--temporal auto`
    /// chose a wavefront, which prefetches its first level by the fit
    /// whatever was asked); each rank's placement says `(no prefetch)`
    /// where its classic sweep, or its wavefront's first level, ran
    /// without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<Prefetch>,
    /// NUMA binding set by `scripts/bind.sh` (`HIMENO_BINDING` on rank 0).
    #[serde(default)]
    pub binding: Option<String>,
    /// Per-rank details.
    #[serde(default)]
    pub per_rank: Vec<RankRecord>,
    /// Where and with what the run was made.
    #[serde(default)]
    pub provenance: Provenance,
    /// Where a restarted run took up the work (absent for a run from the
    /// initial state): the rates are those of the iterations after it,
    /// the ones this record timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_from: Option<RestartedFrom>,
    /// The segments of a run with checkpoints, oldest first, this record's
    /// last: each job's timed iterations and seconds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<Segment>,
    /// The checkpoints this job wrote (absent without a checkpoint folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<Written>,
    /// Side writes that failed (a checkpoint, a trace, ...): the measurement is kept, the run
    /// exits 2.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The timed loop's energy per node and for the job (`--energy`);
    /// absent with `--energy off` and in records written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::energy::EnergyRecord>,
    /// The Slurm job and step the run ran in, as rank 0 saw them
    /// (`SLURM_JOB_ID`, `SLURM_STEP_ID`): `himeno report` sets Slurm's own
    /// energy figure for that step beside the record's. Absent outside
    /// Slurm and in records written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<super::provenance::SlurmStep>,
    /// How the GPU ranks moved halo faces (`--halo`: `staged`, `peer`,
    /// `nccl`, `mpi-device`); absent for CPU runs and in records written
    /// before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halo_path: Option<crate::config::HaloPath>,
}

/// The default of counts that records written before them did not have:
/// one thread per rank, the classic depth of one sweep per exchange.
fn one() -> usize {
    1
}

/// A record without `complete` comes from before runs could be stopped.
fn yes() -> bool {
    true
}

/// A record without `bind` comes from before threads could be pinned.
fn unbound() -> Bind {
    Bind::None
}

impl Record {
    /// Whether the result passed (`Some(true)`), failed (`Some(false)`)
    /// or was not checked.
    pub fn verified(&self) -> Option<bool> {
        self.verification.verified()
    }

    /// The emulator's description when any rank's GPU was emulated (the
    /// first such rank's), else `None`.
    pub fn emulator(&self) -> Option<&str> {
        self.per_rank
            .iter()
            .find(|x| x.emulated)
            .map(|x| x.emulator.as_deref().unwrap_or("an emulated CUDA driver"))
    }
}

/// The verdict as the record's two JSON fields: `verified` and
/// `verification`, which both carry whether it passed. The type keeps it
/// once ([`Verdict::verified`]); a record read with only `verified` (older
/// or hand-made lines) gets an unchecked-against verdict with it, and
/// where both are present the top-level `verified` is the one believed,
/// as readers always have.
pub mod verdict_fields {
    use crate::verify::{Verdict, VerdictFields};
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `"verified": …, "verification": {…}`.
    pub fn serialize<S: Serializer>(v: &Verdict, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("verified", &v.verified())?;
        m.serialize_entry("verification", v)?;
        m.end()
    }

    /// The two fields as read.
    #[derive(Deserialize)]
    struct Fields {
        #[serde(default)]
        verified: Option<bool>,
        #[serde(default)]
        verification: Option<VerdictFields>,
    }

    /// Reads the two fields into one verdict.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Verdict, D::Error> {
        let f = Fields::deserialize(d)?;
        let inner = f
            .verification
            .unwrap_or_else(|| VerdictFields::from(Verdict::default()));
        Ok(Verdict::from(VerdictFields {
            verified: f.verified,
            ..inner
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::provenance::SlurmStep;

    #[test]
    fn the_slurm_step_round_trips_and_is_absent_outside_slurm() {
        let line = include_str!("../../tests/records/valid.jsonl").trim_end();
        let mut r: Record = serde_json::from_str(line).unwrap();
        assert_eq!(r.slurm, None);
        assert_eq!(serde_json::to_string(&r).unwrap(), line, "no field written");
        r.slurm = Some(SlurmStep {
            job_id: "123".into(),
            step_id: Some("0".into()),
        });
        let s = serde_json::to_string(&r).unwrap();
        assert!(
            s.ends_with(r#","slurm":{"job_id":"123","step_id":"0"}}"#),
            "{s}"
        );
        assert_eq!(serde_json::from_str::<Record>(&s).unwrap(), r);
        r.slurm.as_mut().unwrap().step_id = None;
        let s = serde_json::to_string(&r).unwrap();
        assert!(s.ends_with(r#","slurm":{"job_id":"123"}}"#), "{s}");
        assert_eq!(serde_json::from_str::<Record>(&s).unwrap(), r);
    }
}
