//! Results: the versioned record of a run, built on rank 0 from the
//! solver's outcome, and its renderings (text, JSON, CSV) and file append.

pub mod append;
pub mod csv;
pub mod provenance;
pub mod text;

use crate::backend::{BackendInfo, Kind};
use crate::checkpoint::{RestartedFrom, Segment, Written};
use crate::comm::Launch;
use crate::config::{RunConfig, Staging, Stores};
use crate::grid::{BYTES_PER_POINT, FLOPS_PER_POINT, PENTIUM3_MFLOPS};
use crate::machine::threads::Bind;
use crate::solver::{MemoryUse, Outcome};
use crate::temporal::TemporalChoice;
use crate::timing::{Phase, RESOLUTION_S, Stats};
use crate::verify::{Verdict, fingerprint_hex};
use provenance::Provenance;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the record layout; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Per-rank line of the record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankRecord {
    /// Rank number.
    pub rank: usize,
    /// Host name.
    pub host: String,
    /// Rank number among the ranks on its host (picks the GPU).
    #[serde(default)]
    pub node_rank: usize,
    /// Process coordinates.
    pub coords: [usize; 3],
    /// Owned interior points per dimension.
    pub points: [usize; 3],
    /// Seconds of the rank's timed loop.
    pub loop_s: f64,
    /// Seconds per phase.
    pub phases_s: BTreeMap<String, f64>,
    /// Where the rank's work ran (threads, device, binding).
    pub placement: String,
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
}

/// One run's result: what JSON lines in results files hold.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// Layout version ([`SCHEMA_VERSION`]).
    pub schema: u32,
    /// UTC time the run ended, RFC 3339.
    pub timestamp: String,
    /// User label (`--label`), e.g. a study name.
    pub label: Option<String>,
    /// Size preset or `custom`.
    pub size: String,
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
    pub threads_per_rank: usize,
    /// `cpu` or `gpu`.
    pub backend: Kind,
    /// Timed iterations completed.
    pub iterations: u64,
    /// Timed iterations planned.
    pub planned_iterations: u64,
    /// False when the run was stopped early by a signal.
    pub complete: bool,
    /// Gosa of the last iteration.
    pub gosa: f64,
    /// MFLOPS (34 flops per interior point and iteration).
    pub mflops: f64,
    /// Score: MFLOPS relative to the original's Pentium III 600 MHz.
    pub score: f64,
    /// Seconds of the timed loop (slowest rank).
    pub wall_s: f64,
    /// Seconds of the rehearsal (slowest rank).
    pub warmup_s: f64,
    /// Effective memory bandwidth: 56 bytes per interior point and
    /// iteration over the wall time, in GB/s (1e9 bytes).
    pub gbytes_per_s: f64,
    /// Stream triad bandwidth the run was compared with, in GB/s.
    pub stream_triad_gbytes_per_s: Option<f64>,
    /// `gbytes_per_s` over the stream triad bandwidth.
    pub stream_fraction: Option<f64>,
    /// Sum13 bandwidth (the solver's 56 bytes per point as 14 plain
    /// streams) measured by `--stream quick`, in GB/s.
    #[serde(default)]
    pub stream_sum13_gbytes_per_s: Option<f64>,
    /// `gbytes_per_s` over the Sum13 bandwidth.
    #[serde(default)]
    pub sum13_fraction: Option<f64>,
    /// Per phase: min/avg/max seconds across ranks.
    pub phases: BTreeMap<String, Stats>,
    /// Rank with the longest timed loop.
    pub slowest_rank: usize,
    /// Fraction of the slowest rank's loop spent computing.
    pub compute_share: f64,
    /// Fraction of the slowest rank's loop spent communicating.
    pub comm_share: f64,
    /// Halo bytes sent per iteration, all ranks together (a `T`-deep
    /// exchange every `T` iterations counts a `T`-th per iteration).
    pub halo_bytes_per_iteration: u64,
    /// Halo messages sent per iteration, all ranks together.
    #[serde(default)]
    pub halo_messages_per_iteration: f64,
    /// Sweeps per halo exchange (`--temporal`): 1 is the classic
    /// iteration; above 1 the answer is the classic one, computed with
    /// fewer memory passes, so the score is not comparable with classic
    /// Himeno scores.
    #[serde(default = "classic")]
    pub temporal: usize,
    /// What `--temporal auto` chose and why (with its calibration), or
    /// the warning that an explicit T's working set does not fit the
    /// cache; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temporal_choice: Option<TemporalChoice>,
    /// Fingerprint of the final interior `p`, hexadecimal.
    pub p_fingerprint: String,
    /// `true` passed, `false` failed, `null` not checked.
    pub verified: Option<bool>,
    /// How the result was verified.
    pub verification: Verdict,
    /// GPU halo staging (`pinned`/`pageable`), null on CPU.
    pub staging: Option<Staging>,
    /// Whether the halo exchange overlapped the sweep (GPU ranks only).
    pub overlap: bool,
    /// Thread binding policy.
    pub bind: Bind,
    /// CPU store policy asked for (`auto`, `streaming`, `cached`); each
    /// rank's placement says which stores it used.
    #[serde(default)]
    pub stores: Option<Stores>,
    /// NUMA binding set by `scripts/bind.sh` (`HIMENO_BINDING` on rank 0).
    #[serde(default)]
    pub binding: Option<String>,
    /// Per-rank details.
    pub per_rank: Vec<RankRecord>,
    /// Where and with what the run was made.
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
}

/// The temporal depth of records written before `--temporal` existed.
fn classic() -> usize {
    1
}

/// The bandwidths a run's effective bandwidth is compared with, in GB/s:
/// given by the user or measured before the run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ceilings {
    /// Stream triad.
    pub triad_gbs: Option<f64>,
    /// Sum13, the solver's traffic as 14 plain streams.
    pub sum13_gbs: Option<f64>,
}

/// Inputs to a record that the outcome does not carry.
pub struct RecordInputs<'a> {
    /// The validated configuration.
    pub cfg: &'a RunConfig,
    /// The verdict.
    pub verdict: Verdict,
    /// The bandwidths to compare with.
    pub ceilings: Ceilings,
    /// NUMA binding set by `scripts/bind.sh` (`HIMENO_BINDING`).
    pub binding: Option<String>,
    /// How the ranks were started.
    pub launch: Launch,
    /// MPI library version, if any.
    pub mpi_library: Option<String>,
    /// How the sweeps per exchange were chosen (`--temporal auto`), or
    /// the warning for an explicit T that does not fit the cache.
    pub temporal: Option<TemporalChoice>,
}

impl Record {
    /// Builds the record on rank 0.
    pub fn build(out: &Outcome, inp: RecordInputs<'_>) -> Record {
        let cfg = inp.cfg;
        let points = cfg.grid().interior_points() as f64;
        // Only the iterations this job timed: those before a restart's
        // checkpoint were timed by an earlier job (see `segments`).
        let start = out.restarted_from.as_ref().map_or(0, |r| r.iteration);
        let work = points * out.iterations.saturating_sub(start) as f64;
        let wall = out.wall_s.max(RESOLUTION_S);
        let mflops = FLOPS_PER_POINT * work / wall / 1e6;
        let gbytes_per_s = BYTES_PER_POINT * work / wall / 1e9;
        let phases = Phase::ALL
            .iter()
            .map(|&p| {
                let s = Stats::of(out.ranks.iter().map(|r| r.times.get(p)));
                (p.name().to_string(), s)
            })
            .collect();
        let slowest = out
            .ranks
            .iter()
            .max_by(|a, b| a.loop_s.total_cmp(&b.loop_s))
            .expect("at least one rank");
        let loop_s = slowest.loop_s.max(f64::MIN_POSITIVE);
        // One exchange serves `temporal` iterations.
        let temporal = out.temporal.max(1);
        let halo_bytes: usize = out.ranks.iter().map(|r| r.halo_bytes).sum();
        let halo_messages: usize = out.ranks.iter().map(|r| r.halo_messages).sum();
        let first = &out.ranks[0].backend;
        let per_rank = out
            .ranks
            .iter()
            .map(|r| RankRecord {
                rank: r.rank,
                host: r.host.clone(),
                node_rank: r.node_rank,
                coords: r.coords,
                points: r.points,
                loop_s: r.loop_s,
                phases_s: Phase::ALL
                    .iter()
                    .map(|&p| (p.name().to_string(), r.times.get(p)))
                    .collect(),
                placement: placement(&r.backend),
                cpu_share: r.cpu_s / (r.loop_s * r.backend.threads.max(1) as f64).max(1e-9),
                huge_pages: r.huge_pages,
                memory: r.memory,
                emulated: r.backend.emulated.is_some(),
                emulator: r.backend.emulated.clone(),
            })
            .collect();
        Record {
            schema: SCHEMA_VERSION,
            timestamp: provenance::utc_now(),
            label: cfg.label.clone(),
            size: cfg.problem.size_label.clone(),
            grid: cfg.grid().n,
            procs: cfg.procs().p,
            ranks: out.ranks.len(),
            launch: inp.launch,
            threads_per_rank: first.threads,
            backend: first.kind,
            iterations: out.iterations,
            planned_iterations: out.planned,
            complete: out.complete,
            gosa: out.gosa,
            mflops,
            score: mflops / PENTIUM3_MFLOPS,
            wall_s: out.wall_s,
            warmup_s: out.warmup_s,
            gbytes_per_s,
            stream_triad_gbytes_per_s: inp.ceilings.triad_gbs,
            stream_fraction: inp.ceilings.triad_gbs.map(|s| gbytes_per_s / s),
            stream_sum13_gbytes_per_s: inp.ceilings.sum13_gbs,
            sum13_fraction: inp.ceilings.sum13_gbs.map(|s| gbytes_per_s / s),
            phases,
            slowest_rank: slowest.rank,
            compute_share: slowest.times.get(Phase::Compute) / loop_s,
            comm_share: slowest.times.communication() / loop_s,
            halo_bytes_per_iteration: (halo_bytes as f64 / temporal as f64).round() as u64,
            halo_messages_per_iteration: halo_messages as f64 / temporal as f64,
            temporal,
            temporal_choice: inp.temporal,
            p_fingerprint: fingerprint_hex(out.fingerprint),
            verified: inp.verdict.verified,
            verification: inp.verdict,
            staging: (first.kind == Kind::Gpu).then_some(cfg.staging),
            overlap: cfg.overlap && first.kind == Kind::Gpu,
            bind: cfg.bind,
            stores: (first.kind == Kind::Cpu).then_some(cfg.stores),
            binding: inp.binding,
            per_rank,
            provenance: Provenance::collect(&out.ranks, inp.mpi_library),
            restarted_from: out.restarted_from.clone(),
            segments: out.segments.clone(),
            checkpoints: out.checkpoints.clone(),
        }
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

/// One-line description of where a rank's work ran.
fn placement(b: &BackendInfo) -> String {
    let mut s = format!("{} x{} threads", b.kind.name(), b.threads);
    if let Some(d) = &b.device {
        s.push_str(&format!(", device {d}"));
    }
    if let Some(d) = &b.detail {
        s.push_str(&format!(", {d}"));
    }
    s
}
