//! The validated configuration of a benchmark run. `run` turns the options
//! as typed into this, once, after the job has decided where its ranks
//! sweep; everything downstream trusts it and nothing changes it
//! afterwards.
//!
//! What every rank must have resolved alike is derived from
//! [`RunConfig`]'s own fields (`agreed`): a field that may differ from
//! rank to rank says so where it is declared.

pub mod agreed;

use crate::comm::Terms;
use crate::grid::Grid;
use crate::grid::decomp::{FaceWeights, ProcGrid};
use crate::machine::threads::Bind;
use crate::output::Format;
use crate::problem::Problem;
use serde::{Deserialize, Serialize};

/// Largest accepted iteration count: beyond this a run would take years.
/// `himeno plan` holds studies to it too, so that a plan has no run that
/// every run would refuse.
pub const MAX_ITERATIONS: u64 = 1_000_000_000;
use std::path::PathBuf;

/// Where a run's ranks sweep, as decided for the whole job (`--backend
/// auto` is resolved before a [`RunConfig`] exists).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// CPU threads.
    #[default]
    Cpu,
    /// One GPU per rank (build with `--features cuda`).
    Gpu,
}

impl BackendKind {
    /// Lower-case name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Gpu => "gpu",
        }
    }

    /// What one value of a halo face costs this backend, by the dimension
    /// normal to the face, for the automatic process grid. On the CPU the
    /// copies cost alike within the noise (the choice stays the plain
    /// surface). On a GPU a face normal to i is contiguous and copied
    /// directly, one normal to j is rows gathered by a coalesced pack
    /// kernel, but one normal to k takes a single value from every row:
    /// each 4-byte value then occupies its own 32-byte memory sector, in
    /// the pack and again in the unpack, so such a face is weighed 4 times
    /// (the cautious end of the 4-8x that uncoalesced access costs). CPU
    /// ranks that block in time weigh k faces as dear too, where that
    /// leaves T as deep (`ProblemSpec::resolve_blocked`).
    pub fn face_weights(self) -> FaceWeights {
        match self {
            BackendKind::Cpu => FaceWeights::UNIFORM,
            BackendKind::Gpu => FaceWeights::DEAR_K,
        }
    }
}

/// How the CPU sweep stores the new field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Stores {
    /// Cached when the fields of the node's ranks fit its last-level
    /// cache; beyond it, the classic sweep times both before the rehearsal
    /// and the faster one runs (`crate::kernel_choice`), the wavefront
    /// streams.
    Auto,
    /// Non-temporal stores of whole cache lines: no read of the line
    /// before it is written (4 bytes per point less memory traffic), but
    /// the new field is not left in the cache.
    Streaming,
    /// Ordinary stores through the cache.
    Cached,
}

/// Whether the CPU classic sweep prefetches its input rows from memory in
/// software.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Prefetch {
    /// No prefetch when the node's fields take at most half its
    /// last-level cache; beyond that, both kernels are timed before the
    /// rehearsal and the faster one runs (`crate::kernel_choice`).
    Auto,
    /// Software prefetch of every input stream ahead of its use.
    On,
    /// No software prefetch (the hardware prefetchers alone).
    Off,
}

/// Host memory used to stage GPU halo messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Staging {
    /// Page-locked host buffers (DMA straight from the device).
    Pinned,
    /// Ordinary host memory (the driver copies through its own bounce buffer).
    Pageable,
}

impl Staging {
    /// Lower-case name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            Staging::Pinned => "pinned",
            Staging::Pageable => "pageable",
        }
    }
}

/// How GPU ranks move halo faces (`--halo`): through host staging
/// buffers, or device to device (`crate::halo` keeps one schedule for
/// all; the device paths are the GPU backend's transports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HaloPath {
    /// Device -> host staging buffer -> MPI or the in-process mailbox ->
    /// host -> device (what a cluster without GPU-aware MPI has).
    #[default]
    Staged,
    /// In-process ranks (`--local-ranks`) copy faces device to device
    /// (peer copies between GPUs, a device copy on one GPU).
    Peer,
    /// NCCL send/recv of the faces on the halo stream.
    Nccl,
    /// Device buffers handed to a CUDA-aware MPI.
    MpiDevice,
}

impl HaloPath {
    /// Every path, staged first.
    pub const ALL: [HaloPath; 4] = [
        HaloPath::Staged,
        HaloPath::Peer,
        HaloPath::Nccl,
        HaloPath::MpiDevice,
    ];

    /// The name as typed and reported.
    pub fn name(self) -> &'static str {
        match self {
            HaloPath::Staged => "staged",
            HaloPath::Peer => "peer",
            HaloPath::Nccl => "nccl",
            HaloPath::MpiDevice => "mpi-device",
        }
    }

    /// Whether faces move device to device, the host never staging them.
    pub fn device_direct(self) -> bool {
        self != HaloPath::Staged
    }
}

/// What kind of study a run belongs to (`--scaling`), as the run
/// declares it and the record states it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Scaling {
    /// One global grid, more ranks.
    Strong,
    /// One block per rank, more ranks.
    Weak,
    /// Not part of a study (the default): a study's report groups such
    /// runs by their grids.
    #[default]
    Single,
}

/// How many thread blocks per multiprocessor the sweep kernel is compiled
/// to fit (`__launch_bounds__`), which caps its registers. More resident
/// blocks keep more loads in flight; fewer registers may cost
/// instructions. Results are bitwise the same for every variant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Occupancy {
    /// No minimum: the compiler chooses the registers (72 on sm_90 with
    /// NVRTC 12.9 and 13.0, so 3 blocks of 256 threads per SM).
    #[default]
    #[value(name = "auto")]
    #[serde(rename = "auto")]
    Auto,
    /// At least 4 blocks per SM (at most 64 registers, 50 % occupancy).
    #[value(name = "4")]
    #[serde(rename = "4")]
    Blocks4,
    /// At least 5 blocks per SM (at most 48 registers, 62.5 % occupancy;
    /// meant for Hopper: on sm_80 the sweep spills registers).
    #[value(name = "5")]
    #[serde(rename = "5")]
    Blocks5,
}

impl Occupancy {
    /// Every variant, for the compile checks.
    pub const ALL: [Occupancy; 3] = [Occupancy::Auto, Occupancy::Blocks4, Occupancy::Blocks5];

    /// The minimum blocks per SM, 0 for none.
    pub fn min_blocks(self) -> u32 {
        match self {
            Occupancy::Auto => 0,
            Occupancy::Blocks4 => 4,
            Occupancy::Blocks5 => 5,
        }
    }

    /// The name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Occupancy::Auto => "auto",
            Occupancy::Blocks4 => "4",
            Occupancy::Blocks5 => "5",
        }
    }
}

/// Which variant of the GPU sweep kernel runs (`--gpu-sweep`): they do the
/// same arithmetic in the same order (results are bitwise the same) and
/// differ in how many loads each thread keeps in flight and how many
/// registers its addresses take (docs/gpu.md, "Sweep variants").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum SweepVariant {
    /// One i-plane at a time, a 64-bit pointer per field (the kernel
    /// `sweep`).
    #[default]
    #[value(name = "classic")]
    #[serde(rename = "classic")]
    Classic,
    /// The next i-plane's loads issued before the current plane is
    /// computed (software pipelining): twice the loads in flight per
    /// thread, for more registers.
    #[value(name = "pipelined")]
    #[serde(rename = "pipelined")]
    Pipelined,
    /// One base address and a 32-bit offset per field, 32-bit indices:
    /// fewer address registers (needs every field within 2^32 values of
    /// the lowest one, which the backend checks).
    #[value(name = "slab")]
    #[serde(rename = "slab")]
    Slab,
    /// Both: pipelined loads through one base and 32-bit offsets.
    #[value(name = "pipelined-slab")]
    #[serde(rename = "pipelined-slab")]
    PipelinedSlab,
}

impl SweepVariant {
    /// Every variant, for the compile checks and gpu-check's timing.
    pub const ALL: &'static [SweepVariant] = &[
        SweepVariant::Classic,
        SweepVariant::Pipelined,
        SweepVariant::Slab,
        SweepVariant::PipelinedSlab,
    ];

    /// The name as on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            SweepVariant::Classic => "classic",
            SweepVariant::Pipelined => "pipelined",
            SweepVariant::Slab => "slab",
            SweepVariant::PipelinedSlab => "pipelined-slab",
        }
    }

    /// The kernel's name in `kernels.cu`.
    pub fn kernel(&self) -> &'static str {
        match self {
            SweepVariant::Classic => "sweep",
            SweepVariant::Pipelined => "sweep_pipelined",
            SweepVariant::Slab => "sweep_slab",
            SweepVariant::PipelinedSlab => "sweep_pipelined_slab",
        }
    }

    /// Whether it issues the next i-plane's loads before computing the
    /// current one (too many registers for `--gpu-occupancy 5`).
    pub fn pipelined(&self) -> bool {
        matches!(self, SweepVariant::Pipelined | SweepVariant::PipelinedSlab)
    }

    /// Whether it runs within `occupancy`'s register budget without
    /// spilling: the pipelined variants' two planes of loads do not fit
    /// the 48 registers of `--gpu-occupancy 5`.
    pub fn fits(&self, occupancy: Occupancy) -> bool {
        !(self.pipelined() && occupancy == Occupancy::Blocks5)
    }

    /// Whether it addresses the fields from one base with 32-bit offsets.
    pub fn slab(&self) -> bool {
        matches!(self, SweepVariant::Slab | SweepVariant::PipelinedSlab)
    }
}

/// How the GPU backend lays a field out in device memory (`--gpu-layout`):
/// the values and results are the same in both (docs/gpu.md, "Padded
/// rows").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum GpuLayout {
    /// Rows of exactly the block's local k extent, back to back, as on
    /// the host.
    #[default]
    #[value(name = "exact")]
    #[serde(rename = "exact")]
    Exact,
    /// Rows padded to a pitch that puts the first owned k of every row on
    /// a 128-byte boundary, an odd number of 128-byte lines long (so no
    /// row, plane or field size is a power of two).
    #[value(name = "padded")]
    #[serde(rename = "padded")]
    Padded,
}

impl GpuLayout {
    /// Both layouts, the default first, for gpu-check's timing.
    pub const ALL: &'static [GpuLayout] = &[GpuLayout::Exact, GpuLayout::Padded];

    /// The name as on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            GpuLayout::Exact => "exact",
            GpuLayout::Padded => "padded",
        }
    }
}

/// Whether a run measures the stream bandwidths itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum StreamMeasure {
    /// No measurement (use `--stream-gbs` if given).
    Off,
    /// A short in-process triad and Sum13 after the timed loop (so that it cannot disturb it).
    Quick,
}

/// How many iterations the timed run does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum RunLength {
    /// Exactly this many.
    Iterations(u64),
    /// As many as fit in this many seconds, sized from the rehearsal.
    Seconds(f64),
}

/// Everything a benchmark run needs to know.
///
/// Its `Serialize` is what the ranks of a job agree on
/// ([`RunConfig::agreement_terms`]): every field is compared under its
/// serde name (the name a disagreement message gives) unless it is marked
/// `#[serde(skip)]` as rank-local. Nothing else serialises it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunConfig {
    /// Global grid, its label and the process grid. Agreed as its own
    /// terms (grid, size, process grid), so that a message names the one
    /// that differs.
    #[serde(skip)]
    pub problem: Problem,
    /// Sweep threads per rank. Rank-local: nodes of different sizes give
    /// their ranks different counts.
    #[serde(skip)]
    pub threads: usize,
    /// Length of the timed run.
    #[serde(rename = "run length")]
    pub length: RunLength,
    /// Untimed rehearsal iterations before the timed run (fields are reset
    /// afterwards, so results are those of the timed iterations alone).
    #[serde(rename = "warm-up")]
    pub warmup: u64,
    /// Where the ranks sweep, decided for the whole job.
    pub backend: BackendKind,
    /// Report format on standard output.
    pub format: Format,
    /// File to append one JSON line per run to.
    #[serde(rename = "results file", serialize_with = "agreed::debug")]
    pub output: Option<PathBuf>,
    /// Verify against a reference even when no known answer is stored.
    #[serde(rename = "verification")]
    pub verify: bool,
    /// Thread placement.
    #[serde(rename = "binding")]
    pub bind: Bind,
    /// GPU halo staging memory.
    pub staging: Staging,
    /// GPU ordinal, or `None` to choose by node-local rank. Rank-local: an
    /// MPMD launch may give each rank its own device.
    #[serde(skip)]
    pub device: Option<usize>,
    /// Overlap the interior sweep with the halo exchange (GPU).
    pub overlap: bool,
    /// GPU sweep kernel variant (blocks per multiprocessor it fits).
    #[serde(rename = "gpu occupancy")]
    pub gpu_occupancy: Occupancy,
    /// How the CPU sweep stores the new field.
    pub stores: Stores,
    /// Whether the CPU classic sweep prefetches in software.
    pub prefetch: Prefetch,
    /// Sweeps per halo exchange (temporal blocking; 1 is the classic
    /// iteration); with `temporal_auto`, the most the choice may take.
    pub temporal: usize,
    /// `--temporal auto`: the run chooses its sweeps per exchange
    /// (`crate::temporal`).
    #[serde(rename = "temporal auto")]
    pub temporal_auto: bool,
    /// Rows per tile of the temporal wavefront, overriding the choice from
    /// the cache sizes.
    #[serde(rename = "tile rows")]
    pub tile_rows: Option<usize>,
    /// Stream triad bandwidth of this machine in GB/s given by the user, to
    /// report the solver's bandwidth as a fraction of it.
    #[serde(rename = "stream bandwidth")]
    pub stream_gbs: Option<f64>,
    /// Measure the stream triad and Sum13 after the timed loop.
    #[serde(rename = "stream measurement")]
    pub stream: StreamMeasure,
    /// Free-form label recorded in the results (e.g. a study name).
    pub label: Option<String>,
    /// The kind of study the run belongs to (`--scaling`).
    pub scaling: Scaling,
    /// Checkpoints and restart (`--checkpoint-dir`), if asked for.
    #[serde(rename = "checkpoints", serialize_with = "agreed::debug")]
    pub checkpoint: Option<CheckpointConfig>,
    /// GPU sweep kernel variant (`--gpu-sweep`; results are bitwise the
    /// same for every one).
    #[serde(rename = "gpu sweep")]
    pub gpu_sweep: SweepVariant,
    /// How GPU ranks move halo faces (`--halo`).
    #[serde(rename = "halo path")]
    pub halo: HaloPath,
    /// GPU field layout (`--gpu-layout`; results are bitwise the same
    /// for both).
    #[serde(rename = "gpu layout")]
    pub gpu_layout: GpuLayout,
}

/// Where a run restarts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restart {
    /// The newest committed checkpoint in the checkpoint folder (the
    /// initial state when it holds none).
    Latest,
    /// The checkpoint of this manifest (or of the folder holding it).
    Manifest(PathBuf),
}

/// The validated checkpoint settings of a run (see `crate::checkpoint`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointConfig {
    /// Folder the run's checkpoints go to, one sub-folder each.
    pub dir: PathBuf,
    /// Timed iterations between two checkpoints, a whole number of
    /// temporal blocks; `None`: only when a stop signal comes.
    pub every: Option<u64>,
    /// Committed checkpoints kept; older ones are removed once a newer
    /// one is committed.
    pub keep: usize,
    /// Where the run restarts from; `None` starts from the initial state.
    pub restart: Option<Restart>,
}

impl RunConfig {
    /// The global grid.
    pub fn grid(&self) -> Grid {
        self.problem.grid
    }

    /// The process grid.
    pub fn procs(&self) -> ProcGrid {
        self.problem.procs
    }

    /// The terms every rank of a job must have resolved alike
    /// (`crate::comm::agree`): the command, the problem's fields and every
    /// field of this configuration but the rank-local ones (the thread
    /// count and the GPU ordinal), in declaration order.
    pub fn agreement_terms(&self) -> Terms {
        let mut terms = vec![("command", "run".into())];
        terms.extend(agreed::terms(&self.problem));
        terms.extend(agreed::terms(self));
        terms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::Size;

    fn config() -> RunConfig {
        RunConfig {
            problem: Problem {
                grid: Grid::new([9, 9, 9]).unwrap(),
                size: Size::Custom,
                procs: ProcGrid { p: [1, 1, 1] },
            },
            threads: 2,
            length: RunLength::Iterations(5),
            warmup: 3,
            backend: BackendKind::Cpu,
            format: Format::Text,
            output: None,
            verify: false,
            bind: Bind::None,
            staging: Staging::Pinned,
            device: None,
            overlap: true,
            gpu_occupancy: Occupancy::Auto,
            stores: Stores::Auto,
            prefetch: Prefetch::Auto,
            temporal: 1,
            temporal_auto: false,
            tile_rows: None,
            stream_gbs: None,
            stream: StreamMeasure::Off,
            label: None,
            scaling: Scaling::Single,
            checkpoint: None,
            gpu_sweep: SweepVariant::Classic,
            halo: HaloPath::Staged,
            gpu_layout: GpuLayout::Exact,
        }
    }

    /// The terms are the configuration's fields under the names the
    /// disagreement message gives, rank-local ones left out.
    #[test]
    fn the_terms_are_every_field_but_the_rank_local_ones() {
        let names: Vec<&str> = config().agreement_terms().iter().map(|t| t.0).collect();
        assert_eq!(
            names,
            [
                "command",
                "grid",
                "size",
                "process grid",
                "run length",
                "warm-up",
                "backend",
                "format",
                "results file",
                "verification",
                "binding",
                "staging",
                "overlap",
                "gpu occupancy",
                "stores",
                "prefetch",
                "temporal",
                "temporal auto",
                "tile rows",
                "stream bandwidth",
                "stream measurement",
                "label",
                "scaling",
                "checkpoints",
                "gpu sweep",
                "halo path",
                "gpu layout",
            ]
        );
    }

    /// A rank-local value leaves the terms alike; any other differs in
    /// the term of its name.
    #[test]
    fn only_rank_local_fields_may_differ() {
        let base = config().agreement_terms();
        let other = RunConfig {
            threads: 7,
            device: Some(1),
            ..config()
        };
        assert_eq!(other.agreement_terms(), base);
        let differing = |cfg: RunConfig| {
            let terms = cfg.agreement_terms();
            let diff: Vec<&str> = base
                .iter()
                .zip(&terms)
                .filter(|(a, b)| a != b)
                .map(|(a, _)| a.0)
                .collect();
            diff
        };
        let labelled = RunConfig {
            label: Some("x".into()),
            ..config()
        };
        assert_eq!(differing(labelled), ["label"]);
        let longer = RunConfig {
            length: RunLength::Iterations(7),
            ..config()
        };
        assert_eq!(differing(longer), ["run length"]);
        let wider = RunConfig {
            problem: Problem {
                procs: ProcGrid { p: [1, 1, 1] },
                grid: Grid::new([9, 9, 17]).unwrap(),
                size: Size::Custom,
            },
            ..config()
        };
        assert_eq!(differing(wider), ["grid"]);
    }
}
