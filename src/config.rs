//! The validated configuration of a benchmark run. `cli` turns the options
//! as typed into this; everything downstream trusts it.

use crate::grid::Grid;
use crate::grid::decomp::ProcGrid;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which backend sweeps the rank's block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// CPU threads.
    Cpu,
    /// One GPU per rank (build with `--features cuda`).
    Gpu,
    /// A GPU when one is usable, otherwise the CPU.
    Auto,
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

/// Thread placement for CPU sweeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Bind {
    /// Leave placement to the operating system.
    None,
    /// Pin each sweep thread to one core of the rank's allowed set.
    Cores,
}

/// How the CPU sweep stores the new field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Stores {
    /// Streaming when the fields of the node's ranks exceed its last-level
    /// cache, cached otherwise.
    Auto,
    /// Non-temporal stores of whole cache lines: no read of the line
    /// before it is written (4 bytes per point less memory traffic), but
    /// the new field is not left in the cache.
    Streaming,
    /// Ordinary stores through the cache.
    Cached,
}

/// Whether a run measures the stream triad bandwidth itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum StreamMeasure {
    /// No measurement (use `--stream-gbs` if given).
    Off,
    /// A short in-process triad before the timed loop.
    Quick,
}

/// How the report is printed on standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The original's familiar lines plus decomposition and phase tables.
    Text,
    /// One JSON object.
    Json,
    /// A CSV header and one row.
    Csv,
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
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// Global grid.
    pub grid: Grid,
    /// Preset name, or `custom` for `--grid`.
    pub size_label: String,
    /// Process grid, or `None` to choose automatically.
    pub procs: Option<ProcGrid>,
    /// Sweep threads per rank.
    pub threads: usize,
    /// Length of the timed run.
    pub length: RunLength,
    /// Untimed rehearsal iterations before the timed run (fields are reset
    /// afterwards, so results are those of the timed iterations alone).
    pub warmup: u64,
    /// Backend choice.
    pub backend: BackendKind,
    /// Report format on standard output.
    pub format: Format,
    /// File to append one JSON line per run to.
    pub output: Option<PathBuf>,
    /// Verify against a reference even when no known answer is stored.
    pub verify: bool,
    /// Thread placement.
    pub bind: Bind,
    /// GPU halo staging memory.
    pub staging: Staging,
    /// GPU ordinal, or `None` to choose by node-local rank.
    pub device: Option<usize>,
    /// Overlap the interior sweep with the halo exchange (GPU).
    pub overlap: bool,
    /// How the CPU sweep stores the new field.
    pub stores: Stores,
    /// Stream triad bandwidth of this machine in GB/s, to report the
    /// solver's bandwidth as a fraction of it.
    pub stream_gbs: Option<f64>,
    /// Sum13 bandwidth (the solver's traffic as 14 plain streams) in GB/s,
    /// measured by `--stream quick`.
    pub stream_sum13_gbs: Option<f64>,
    /// Measure the stream triad and Sum13 before the run (fills
    /// `stream_gbs` and `stream_sum13_gbs`).
    pub stream: StreamMeasure,
    /// Free-form label recorded in the results (e.g. a study name).
    pub label: Option<String>,
}
