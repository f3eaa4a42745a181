//! Provenance: what produced a result (version, commit, features, MPI
//! library, hosts, devices, command line), so a number in a report can be
//! traced back and reproduced.

use crate::backend::GpuSoftware;
use crate::build;
use crate::environment;
use crate::solver::RankSummary;
use serde::{Deserialize, Serialize};

/// Where and with what a run was made.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Provenance {
    /// Crate version.
    pub version: String,
    /// Git commit the binary was built from (`unknown` outside a checkout).
    pub git_commit: String,
    /// Cargo features compiled in.
    pub features: Vec<String>,
    /// MPI library version string, if built with MPI.
    pub mpi_library: Option<String>,
    /// Distinct host names, in rank order of first appearance.
    pub hosts: Vec<String>,
    /// Distinct devices used (GPU backends).
    pub devices: Vec<String>,
    /// Distinct GPU software the ranks ran with: CUDA driver and NVRTC
    /// versions, NVRTC library (absent for CPU runs and older records).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_software: Vec<GpuSoftware>,
    /// The command line of rank 0 (bytes that are not UTF-8 replaced by
    /// U+FFFD).
    pub command: Vec<String>,
}

impl Provenance {
    /// Collects provenance from the gathered rank summaries.
    pub fn collect(ranks: &[RankSummary], mpi_library: Option<String>) -> Provenance {
        let mut hosts: Vec<String> = Vec::new();
        let mut devices: Vec<String> = Vec::new();
        let mut gpu_software: Vec<GpuSoftware> = Vec::new();
        for r in ranks {
            if let Some(g) = &r.backend.gpu_software
                && !gpu_software.contains(g)
            {
                gpu_software.push(g.clone());
            }
            if !hosts.contains(&r.host) {
                hosts.push(r.host.clone());
            }
            if let Some(d) = &r.backend.device
                && !devices.contains(d)
            {
                devices.push(d.clone());
            }
        }
        Provenance {
            version: build::VERSION.to_string(),
            git_commit: build::GIT_COMMIT.to_string(),
            features: build::features(),
            mpi_library,
            hosts,
            devices,
            gpu_software,
            // Arguments are OS strings (a path need not be UTF-8); the
            // record is JSON text, so they are kept lossily.
            command: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        }
    }
}

/// The Slurm job and step a run ran in, so that Slurm's accounting of the
/// step (`sacct`) can be found for the record.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SlurmStep {
    /// `SLURM_JOB_ID`.
    pub job_id: String,
    /// `SLURM_STEP_ID` (set by `srun` for its tasks; absent where the run
    /// was started from the batch script without `srun`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
}

impl SlurmStep {
    /// The job and step of this process, `None` outside a Slurm job. Read
    /// once per run, where the record is built (rank 0): every rank of a
    /// step has the same ones.
    pub fn from_env() -> Option<SlurmStep> {
        Some(SlurmStep {
            job_id: environment::get(environment::SLURM_JOB_ID)?,
            step_id: environment::get(environment::SLURM_STEP_ID),
        })
    }
}
