//! The grammar of a benchmark run and of the halo self-test (clap): the
//! options as typed, which `crate::cli` includes in the command line.
//! Nothing here checks more than a value's syntax; [`super::validate`]
//! turns them into what the job runs.

use crate::args::{LaunchArgs, ProblemArgs, number, whole};
use crate::config::{MAX_ITERATIONS, Occupancy, Prefetch, Staging, Stores, StreamMeasure};
use crate::machine::threads::Bind;
use crate::output::Format;
use crate::trace::DEFAULT_KEEP;
use clap::{Args, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

/// Most committed checkpoints a run may keep.
pub const MAX_CHECKPOINT_KEEP: usize = 1000;

/// `--backend`, as typed: where the ranks should sweep. The job decides
/// `auto` collectively before it validates ([`super::validate`]); what
/// the run is configured with is a `crate::config::BackendKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// CPU threads.
    Cpu,
    /// One GPU per rank (build with `--features cuda`).
    Gpu,
    /// A GPU when every rank has a usable one, otherwise the CPU.
    Auto,
}

/// Options of the halo self-test.
#[derive(Debug, Args, Clone)]
pub struct SelftestArgs {
    /// The grid and process grid to test (default size XS).
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// How the ranks are started.
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Ghost layers to exchange and check, as a `--temporal T` run keeps.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub temporal: usize,
    /// Where the exchanged field lives: cpu (a host pattern), gpu (each
    /// rank's device: its buffers, pack/unpack kernels and staging), or
    /// auto (a GPU when every rank has one).
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
    /// GPU halo staging: pinned (the default) or pageable host memory.
    #[arg(long, value_enum)]
    pub staging: Option<Staging>,
    /// GPU ordinal to use; default: the node-local rank modulo the devices.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub device: Option<usize>,
}

/// Options of a benchmark run, as typed.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// The grid and process grid (default size M).
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// How the ranks are started.
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Sweep threads per rank; default: the cores this rank may use (shared
    /// with the node's other ranks when the launcher did not bind them).
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub threads: Option<usize>,
    /// Fixed number of timed iterations (overrides --seconds).
    #[arg(long, conflicts_with = "seconds", allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub iterations: Option<u64>,
    /// Target duration of the timed run in seconds, sized from the rehearsal
    /// as the original does (with --temporal T > 1, from the calibration of
    /// the T and tiles when they were timed, then from the loop's own pace
    /// an eighth and half of the way in).
    #[arg(long, default_value_t = 60.0, allow_negative_numbers = true, value_parser = number)]
    pub seconds: f64,
    /// Rehearsal iterations before the timed run (not recorded; the fields
    /// are reset afterwards).
    #[arg(long, default_value_t = 3, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub warmup: u64,
    /// Backend: cpu, gpu, or auto (a GPU when one is usable).
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
    /// Report format on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Append the result as one JSON line to this file (safe for concurrent
    /// jobs).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Verify the result against the reference kernel when no stored known
    /// answer covers this grid and iteration count.
    #[arg(long)]
    pub verify: bool,
    /// Thread placement: none or cores.
    #[arg(long, value_enum, default_value_t = Bind::None)]
    pub bind: Bind,
    /// GPU halo staging: pinned (the default) or pageable host memory.
    #[arg(long, value_enum)]
    pub staging: Option<Staging>,
    /// GPU ordinal to use; default: the node-local rank modulo the devices.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub device: Option<usize>,
    /// Overlap the interior sweep with the halo exchange (GPU backend; refused
    /// with --backend cpu, ignored when auto picks the CPU).
    #[arg(long)]
    pub overlap: bool,
    /// GPU sweep kernel variant: the thread blocks per multiprocessor it is
    /// compiled to fit (auto: the compiler's register choice; 4 or 5 cap
    /// the registers for more resident blocks). Results are identical.
    /// Default auto.
    #[arg(long, value_enum)]
    pub gpu_occupancy: Option<Occupancy>,
    /// How the CPU sweep writes the new field: streaming (non-temporal
    /// stores, no read of each line before writing it), cached, or auto
    /// (cached when the node's fields fit its last-level cache; beyond it
    /// the classic sweep times both before the rehearsal and the faster one
    /// runs, which the report says; the wavefront streams). Results are
    /// identical. Default auto.
    #[arg(long, value_enum)]
    pub stores: Option<Stores>,
    /// Whether the CPU classic sweep (`--temporal 1`) prefetches its input
    /// rows in software: on, off, or auto (off when the node's fields take
    /// at most half its last-level cache; beyond that both kernels are
    /// timed before the rehearsal and the faster one runs, which the
    /// report says). Results are identical. Default auto.
    #[arg(long, value_enum)]
    pub prefetch: Option<Prefetch>,
    /// Sweeps per halo exchange (temporal blocking): each rank keeps T
    /// ghost layers, exchanges them once every T iterations and runs T
    /// sweeps as a cache-blocked wavefront. The answer is bitwise the
    /// classic one (T = 1, the default, as the original benchmark), but
    /// with fewer memory passes, so its score is not comparable with
    /// classic Himeno scores. CPU backend only. `auto` chooses T for this
    /// machine (from its caches, and by timing the candidates when they
    /// cannot tell), T=1 when blocking does not pay; the report says what
    /// and why.
    #[arg(long, default_value = "1", allow_negative_numbers = true, value_parser = temporal)]
    pub temporal: Temporal,
    /// Rows per tile of the temporal wavefront (default: chosen from the
    /// detected cache sizes and timed against half that height before the
    /// rehearsal); fixed, nothing is timed.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub tile_rows: Option<usize>,
    /// Measured stream triad bandwidth in GB/s; the report shows the
    /// solver's effective bandwidth as a fraction of it.
    #[arg(long, allow_negative_numbers = true, value_parser = number)]
    pub stream_gbs: Option<f64>,
    /// Measure the stream triad and Sum13 bandwidths (`quick`: a fraction
    /// of a second after the timed loop, with the run's threads and
    /// binding) and report the solver's bandwidth as a fraction of both.
    #[arg(long, value_enum, default_value_t = StreamMeasure::Off, conflicts_with = "stream_gbs")]
    pub stream: StreamMeasure,
    /// Label recorded in the results, e.g. the study this run belongs to.
    #[arg(long, value_parser = clap::value_parser!(OsString))]
    pub label: Option<OsString>,
    /// The kind of study this run belongs to, recorded for `himeno report`
    /// (`himeno plan` gives it to a study's runs).
    #[arg(long, value_enum, default_value_t = crate::config::Scaling::Single)]
    pub scaling: crate::config::Scaling,
    /// Timeline of every rank's phases (`--trace FILE`).
    #[command(flatten)]
    pub trace: TraceArgs,
    /// Checkpoints and restart.
    #[command(flatten)]
    pub checkpoint: CheckpointArgs,
    /// GPU sweep kernel variant: classic (one i-plane at a time),
    /// pipelined (the next plane's loads issued before the current one is
    /// computed), slab (one base address and 32-bit offsets: fewer
    /// registers) or pipelined-slab. Results are identical. Default
    /// classic.
    #[arg(long, value_enum)]
    pub gpu_sweep: Option<crate::config::SweepVariant>,
    /// GPU field layout: exact (rows of the block's k extent, as on the
    /// host) or padded (each row's first owned k on a 128-byte boundary,
    /// pitches of an odd number of 128-byte lines). Results are
    /// identical. Default exact.
    #[arg(long, value_enum)]
    pub gpu_layout: Option<crate::config::GpuLayout>,
    /// Energy of the timed loop from the node's counters (RAPL, Cray
    /// pm_counters, NVML): `auto` reads every one the node offers and
    /// says in one line when none applies; `off` reads none.
    #[arg(long, value_enum, default_value_t = crate::energy::Mode::Auto)]
    pub energy: crate::energy::Mode,
    /// How GPU ranks move halo faces: staged (through host buffers, the
    /// default), peer (in-process ranks copy device to device), nccl
    /// (NCCL send/recv on the device) or mpi-device (device buffers
    /// handed to a CUDA-aware MPI). Results are identical.
    #[arg(long, value_enum)]
    pub halo: Option<crate::config::HaloPath>,
}

/// Checkpoint and restart options of a benchmark run.
#[derive(Debug, Args, Clone, Default)]
pub struct CheckpointArgs {
    /// Write a checkpoint every N timed iterations (rounded up to whole
    /// blocks with --temporal), into --checkpoint-dir. Without it a
    /// checkpoint is written only when a stop signal (SIGTERM, SIGUSR1)
    /// ends the run.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=MAX_ITERATIONS))]
    pub checkpoint_every: Option<u64>,
    /// Folder of this run's checkpoints: one sub-folder per checkpoint, a
    /// file per rank and a manifest written last. Give each run its own.
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Committed checkpoints to keep (older ones are removed once a newer
    /// one is committed) [default: 2].
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=MAX_CHECKPOINT_KEEP as u64))]
    pub checkpoint_keep: Option<u64>,
    /// Continue from a checkpoint: `latest` (the newest committed one in
    /// --checkpoint-dir; the initial state if there is none) or the path of
    /// one checkpoint's manifest. The final answer is bitwise the one of
    /// the uninterrupted run.
    #[arg(long, value_name = "latest|PATH")]
    pub restart: Option<PathBuf>,
}

/// `--temporal`: a number of sweeps per halo exchange, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Temporal {
    /// Chosen by the run (`crate::temporal`).
    Auto,
    /// This many.
    Sweeps(usize),
}

impl Temporal {
    /// The sweeps asked for; `auto` may end at 1, so it counts as 1 where
    /// a fixed depth is checked.
    pub fn fixed(self) -> usize {
        match self {
            Temporal::Auto => 1,
            Temporal::Sweeps(t) => t,
        }
    }
}

/// Parses `--temporal`: `auto` or a whole number.
fn temporal(s: &str) -> std::result::Result<Temporal, String> {
    if s.trim().eq_ignore_ascii_case("auto") {
        return Ok(Temporal::Auto);
    }
    whole(s)
        .map(Temporal::Sweeps)
        .map_err(|e| format!("{e}, or auto"))
}

/// Options of `--trace`. Every rank must trace, or none (tracing adds
/// collectives): its `Serialize` gives the terms ranks agree on.
#[derive(Debug, Args, Clone, Default, serde::Serialize)]
pub struct TraceArgs {
    /// Write a timeline of every rank's phases to FILE, merged into one
    /// Chrome Trace Event JSON (open it in ui.perfetto.dev; `himeno report
    /// --timeline FILE --plot DIR` draws it).
    #[arg(long, value_name = "FILE")]
    #[serde(serialize_with = "crate::config::agreed::debug")]
    pub trace: Option<PathBuf>,
    /// Timed iterations a trace keeps at each end of the run: runs of up
    /// to twice N are traced whole, longer ones keep the first and last N
    /// (the file says which were dropped).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_KEEP, requires = "trace",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    #[serde(rename = "trace keep")]
    pub trace_keep: u64,
}
