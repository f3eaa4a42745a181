//! The validated configuration of a benchmark run. `cli` turns the options
//! as typed into this, once; everything downstream trusts it and nothing
//! changes it afterwards.

use crate::backend::api::Staging;
use crate::backend::cpu::{CpuOptions, Stores};
use crate::comm::Terms;
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

    /// The terms every rank of a job must have resolved alike
    /// (`crate::comm::agree`): everything but the thread count and the GPU
    /// ordinal, which may differ from rank to rank (nodes of different
    /// sizes, one device per rank given by an MPMD launch).
    pub fn agreement_terms(&self) -> Terms {
        vec![
            ("command", "run".into()),
            ("grid", self.problem.grid.to_string()),
            ("size", self.problem.size_label.clone()),
            ("process grid", self.problem.procs.to_string()),
            ("run length", format!("{:?}", self.length)),
            ("warm-up", self.warmup.to_string()),
            ("backend", format!("{:?}", self.backend)),
            ("format", format!("{:?}", self.format)),
            ("results file", format!("{:?}", self.output)),
            ("verification", self.verify.to_string()),
            ("binding", format!("{:?}", self.bind)),
            ("staging", format!("{:?}", self.staging)),
            ("overlap", self.overlap.to_string()),
            ("stores", format!("{:?}", self.stores)),
            ("stream bandwidth", format!("{:?}", self.stream_gbs)),
            ("stream measurement", format!("{:?}", self.stream)),
            ("label", format!("{:?}", self.label)),
        ]
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
