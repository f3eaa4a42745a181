//! The validated configuration of a benchmark run. `cli` turns the options
//! as typed into this, once; everything downstream trusts it and nothing
//! changes it afterwards.

use crate::backend::api::Staging;
use crate::backend::cpu::{CpuOptions, Stores};
use crate::grid::Grid;
use crate::grid::decomp::ProcGrid;
use crate::machine::threads::Bind;
use crate::output::Format;
use crate::problem::Problem;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which backend the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// CPU threads.
    Cpu,
    /// One GPU per rank (build with `--features cuda`).
    Gpu,
    /// A GPU when every rank has a usable one, otherwise the CPU.
    Auto,
}

/// Whether a run measures the stream bandwidths itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum StreamMeasure {
    /// No measurement (use `--stream-gbs` if given).
    Off,
    /// A short in-process triad and Sum13 before the timed loop.
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
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// Global grid, its label and the process grid.
    pub problem: Problem,
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
    /// Sweeps per halo exchange (temporal blocking; 1 is the classic
    /// iteration).
    pub temporal: usize,
    /// Rows per tile of the temporal wavefront, overriding the choice from
    /// the cache sizes.
    pub tile_rows: Option<usize>,
    /// Stream triad bandwidth of this machine in GB/s given by the user, to
    /// report the solver's bandwidth as a fraction of it.
    pub stream_gbs: Option<f64>,
    /// Measure the stream triad and Sum13 before the run.
    pub stream: StreamMeasure,
    /// Free-form label recorded in the results (e.g. a study name).
    pub label: Option<String>,
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

    /// What the CPU backend is asked for.
    pub fn cpu_options(&self) -> CpuOptions {
        CpuOptions {
            threads: self.threads,
            bind: self.bind,
            stores: self.stores,
        }
    }
}
