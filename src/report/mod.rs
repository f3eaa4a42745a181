//! Results: the versioned record of a run, built on rank 0 from the
//! solver's outcome, and its renderings (text, JSON, CSV) and file append.

pub mod append;
pub mod csv;
pub mod placement;
pub mod provenance;
pub mod record;
pub mod text;

pub use placement::Placement;
pub use record::{RankRecord, Record};

use crate::comm::Launch;
use crate::config::RunConfig;
use crate::config::{BackendKind, Prefetch};
use crate::grid::{BYTES_PER_POINT, FLOPS_PER_POINT, PENTIUM3_MFLOPS};
use crate::kernel_choice::KernelChoice;
use crate::solver::Outcome;
use crate::temporal::TemporalChoice;
use crate::timing::{PerPhase, Phase, RESOLUTION_S, Stats};
use crate::verify::{Verdict, fingerprint_hex};
use provenance::{Provenance, SlurmStep};

/// Version of the record layout; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

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
    /// Which kernel `--prefetch auto` timed fastest, when it timed any.
    pub kernel: Option<KernelChoice>,
    /// Side writes that failed (see [`Record::warnings`]).
    pub warnings: Vec<String>,
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
        let phases = PerPhase::from_fn(|p| Stats::of(out.ranks.iter().map(|r| r.times[p])));
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
                phases_s: r.times,
                placement: Placement::from(&r.backend),
                cpu_share: r.cpu_s / (r.loop_s * r.backend.threads.max(1) as f64).max(1e-9),
                huge_pages: r.huge_pages,
                memory: r.memory,
                emulated: r.backend.emulated.is_some(),
                emulator: r.backend.emulated.clone(),
                gpu_sweep: r.backend.gpu_sweep.clone(),
                host_waits_per_iteration: r.backend.host_traffic.map(|t| t.waits),
                host_device_bytes_per_iteration: r.backend.host_traffic.map(|t| t.bytes),
                gpu_layout: r.backend.gpu_layout.clone(),
            })
            .collect();
        Record {
            schema: SCHEMA_VERSION,
            timestamp: crate::build::utc_now(),
            label: cfg.label.clone(),
            scaling: Some(cfg.scaling),
            size: cfg.problem.size,
            grid: cfg.grid().n,
            procs: cfg.procs().p,
            ranks: out.ranks.len(),
            launch: inp.launch,
            threads_per_rank: first.threads,
            backend: first.kind,
            iterations: out.iterations,
            planned_iterations: out.planned,
            estimated_iterations: out.estimated,
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
            kernel_choice: inp.kernel,
            p_fingerprint: fingerprint_hex(out.fingerprint),
            verification: inp.verdict,
            staging: (cfg.backend == BackendKind::Gpu).then_some(cfg.staging),
            overlap: cfg.overlap && cfg.backend == BackendKind::Gpu,
            bind: cfg.bind,
            stores: (cfg.backend == BackendKind::Cpu).then_some(cfg.stores),
            // Only the classic sweep heeds it: a wavefront (`--temporal
            // auto` may choose one) prefetches its first level whatever
            // was asked, so the record does not claim it there.
            prefetch: (cfg.backend == BackendKind::Cpu
                && cfg.prefetch != Prefetch::Auto
                && temporal == 1)
                .then_some(cfg.prefetch),
            binding: inp.binding,
            per_rank,
            provenance: Provenance::collect(&out.ranks, inp.mpi_library),
            restarted_from: out.restarted_from.clone(),
            segments: out.segments.clone(),
            checkpoints: out.checkpoints.clone(),
            warnings: inp.warnings,
            energy: None,
            slurm: SlurmStep::from_env(),
            halo_path: (cfg.backend == BackendKind::Gpu).then_some(cfg.halo),
        }
    }
}
