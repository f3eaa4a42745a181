//! Every environment variable himeno reads, in one place: its name, what
//! it means, and the one function that reads it. The table of
//! `docs/environment.md` ("What himeno reads") is this list (a test holds them equal), and no
//! other module reads or sets the environment (a test scans the sources).
//!
//! The values are read where they are used, once per run: each reader
//! turns the text into a value at the start (a grace, a fault plan, a
//! library path) and passes that value down.

use std::ffi::OsString;

/// One variable himeno reads.
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// What it does, as the table of `docs/environment.md` says it.
    pub meaning: &'static str,
}

/// Seconds between a stop signal and the watchdog's abort (default 60).
pub const STOP_GRACE: &str = "HIMENO_STOP_GRACE";
/// A fault to inject, `RANK:ITERATION:KIND` (testing the failure paths).
pub const FAULT: &str = "HIMENO_FAULT";
/// The binding `scripts/bind.sh` applied, recorded in the result.
pub const BINDING: &str = "HIMENO_BINDING";
/// A TrueType font file for the plots.
pub const FONT: &str = "HIMENO_FONT";
/// The NVRTC library file the GPU backend opens instead of searching.
pub const NVRTC_LIB: &str = "HIMENO_NVRTC_LIB";
/// The CUDA driver's hardware queue count, set per in-process GPU ranks.
pub const CUDA_CONNECTIONS: &str = "CUDA_DEVICE_MAX_CONNECTIONS";
/// The log filter, as `tracing-subscriber` reads it.
pub const RUST_LOG: &str = "RUST_LOG";
/// The host name, when `/proc` does not give it.
pub const HOSTNAME: &str = "HOSTNAME";
/// `himeno gpu-check`'s results folder (as `--out`).
pub const GPU_CHECK_DIR: &str = "HIMENO_GPU_CHECK_DIR";
/// The folder of fresh private folders (`himeno gpu-check`'s default).
pub const TMPDIR: &str = "TMPDIR";
/// One last-level cache instance's size, instead of what sysfs says.
pub const LLC_BYTES: &str = "HIMENO_LLC_BYTES";
/// A folder of NVRTC output shared by processes (`himeno gpu-check`'s).
pub const NVRTC_CACHE: &str = "HIMENO_NVRTC_CACHE";
/// The NVTX library file to load instead of `libnvToolsExt.so.1`.
pub const NVTX_LIB: &str = "HIMENO_NVTX_LIB";
/// The CUDA MPS pipe folder: set (or its default pipe present) means an
/// MPS daemon serves the GPUs.
pub const MPS_PIPE: &str = "CUDA_MPS_PIPE_DIRECTORY";
/// The NCCL library file `--halo nccl` opens instead of `libnccl.so.2`.
pub const NCCL_LIB: &str = "HIMENO_NCCL_LIB";
/// `1`: hand device buffers to MPI (`--halo mpi-device`) even where the
/// library does not say it is CUDA-aware.
pub const MPI_CUDA_AWARE: &str = "HIMENO_MPI_CUDA_AWARE";
/// The switches that make Cray MPICH and MVAPICH2 accept device buffers:
/// what a library without a query says about itself.
pub const MPI_GPU_SWITCHES: [&str; 2] = ["MPICH_GPU_SUPPORT_ENABLED", "MV2_USE_CUDA"];

/// A folder laid out like `/sys` whose energy counters a run reads
/// instead (tests).
pub const ENERGY_ROOT: &str = "HIMENO_ENERGY_ROOT";

/// The Slurm job the run is part of, recorded in the result.
pub const SLURM_JOB_ID: &str = "SLURM_JOB_ID";
/// The Slurm step the run is part of, recorded in the result.
pub const SLURM_STEP_ID: &str = "SLURM_STEP_ID";

/// The launchers' variables for the job's size, in the order trusted.
pub const LAUNCHER_SIZE: [&str; 5] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMIX_SIZE",
    "MV2_COMM_WORLD_SIZE",
    "SLURM_STEP_NUM_TASKS",
];
/// The launchers' variables for this process's rank, in the order trusted.
pub const LAUNCHER_RANK: [&str; 4] = [
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "SLURM_PROCID",
];
/// CUDA toolkit roots the NVRTC search looks under, in order.
pub const CUDA_ROOTS: [&str; 4] = [
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_ROOT",
    "CUDA_TOOLKIT_ROOT_DIR",
];
/// Python environments whose NVIDIA wheels the NVRTC search looks in.
pub const PYTHON_PREFIXES: [&str; 2] = ["VIRTUAL_ENV", "CONDA_PREFIX"];

/// Every variable read, with its meaning: the table of `docs/environment.md`.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: STOP_GRACE,
        meaning: "seconds from a stop signal (SIGTERM, SIGINT, SIGUSR1) to the watchdog's abort \
                  of a rank that does not stop (60; from 0.001 to 86400)",
    },
    Variable {
        name: FAULT,
        meaning: "`RANK:ITERATION:KIND`: inject a fault (panic, error, nan, perturb, hang, term) \
                  to test the failure paths",
    },
    Variable {
        name: BINDING,
        meaning: "the CPU/NUMA binding `scripts/bind.sh` applied, recorded in the result",
    },
    Variable {
        name: FONT,
        meaning: "a TrueType font file for the plots, tried before the system's DejaVu, Liberation, Free or Noto Sans",
    },
    Variable {
        name: NVRTC_LIB,
        meaning: "the NVRTC library file (`libnvrtc.so.12` or `.13`) to open instead of searching",
    },
    Variable {
        name: GPU_CHECK_DIR,
        meaning: "`himeno gpu-check`'s results folder, as `--out DIR`: created if missing (not \
                  its parents), else it must be empty",
    },
    Variable {
        name: TMPDIR,
        meaning: "where `himeno gpu-check` makes its fresh private results folder \
                  (`himeno-gpu-check.XXXXXX`, mode 0700) when none is named (`/tmp`; never created)",
    },
    Variable {
        name: LLC_BYTES,
        meaning: "the size of one last-level cache instance (`32M`, `491520K`, bytes) to use \
                  instead of sysfs's: a virtual machine's share of its host's cache; sizes \
                  `bench stream`'s arrays and the in-cache choices",
    },
    Variable {
        name: ENERGY_ROOT,
        meaning: "a folder laid out like `/sys` (`class/powercap`, `cray/pm_counters`) whose \
                  energy counters `--energy auto` reads instead of the machine's: for tests; \
                  the record and report label such a run's energy as a test tree's",
    },
    Variable {
        name: "SLURM_JOB_ID, SLURM_STEP_ID",
        meaning: "the Slurm job and step a run is part of, recorded in the result (`slurm`) so \
                  that `himeno report` sets Slurm's energy figure for the step beside the record's",
    },
    Variable {
        name: CUDA_CONNECTIONS,
        meaning: "the CUDA driver's hardware queues; unset, a run sets two per in-process GPU rank",
    },
    Variable {
        name: "CUDA_HOME, CUDA_PATH, CUDA_ROOT, CUDA_TOOLKIT_ROOT_DIR",
        meaning: "CUDA toolkit roots searched for NVRTC",
    },
    Variable {
        name: "PATH, PYTHONPATH, VIRTUAL_ENV, CONDA_PREFIX, HOME",
        meaning: "where the NVRTC search looks for `nvcc` and for NVIDIA's Python wheels",
    },
    Variable {
        name: "LD_LIBRARY_PATH",
        meaning: "extended by `himeno gpu-check` for the runs it starts with an NVRTC it found",
    },
    Variable {
        name: "OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE, MV2_COMM_WORLD_SIZE, SLURM_STEP_NUM_TASKS",
        meaning: "the job's size as a launcher announces it, before MPI starts",
    },
    Variable {
        name: "OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID",
        meaning: "this process's rank as a launcher announces it (only rank 0 prints early errors)",
    },
    Variable {
        name: HOSTNAME,
        meaning: "the host name when `/proc/sys/kernel/hostname` cannot be read",
    },
    Variable {
        name: RUST_LOG,
        meaning: "log filter (overrides `-v`/`-vv`), as `tracing-subscriber` reads it",
    },
    Variable {
        name: NVRTC_CACHE,
        meaning: "a folder where GPU runs keep and reuse NVRTC's output, keyed by source, \
                  options, architecture and NVRTC version (`himeno gpu-check` sets it for its runs)",
    },
    Variable {
        name: NVTX_LIB,
        meaning: "the NVTX library file to load for `nsys` phase ranges instead of \
                  `libnvToolsExt.so.1` (none found: no ranges)",
    },
    Variable {
        name: MPS_PIPE,
        meaning: "the CUDA MPS daemon's pipe folder: its `control` pipe (default \
                  `/tmp/nvidia-mps`) tells a GPU run that MPS serves the device",
    },
    Variable {
        name: NCCL_LIB,
        meaning: "the NCCL library file (`libnccl.so.2`) `--halo nccl` opens instead of the \
                  loader's search",
    },
    Variable {
        name: MPI_CUDA_AWARE,
        meaning: "`1`: `--halo mpi-device` hands device buffers to MPI even where the library \
                  does not say it is CUDA-aware (at your risk: a library that is not crashes)",
    },
    Variable {
        name: "MPICH_GPU_SUPPORT_ENABLED, MV2_USE_CUDA",
        meaning: "`1` tells `--halo mpi-device` that Cray MPICH or MVAPICH2 takes device \
                  buffers, where the library has no `MPIX_Query_cuda_support` to ask",
    },
];

/// Whether `name` is one of [`VARIABLES`] (a row may name several).
pub fn is_listed(name: &str) -> bool {
    VARIABLES
        .iter()
        .any(|v| v.name.split(", ").any(|n| n == name))
}

/// The value of `name`, `None` when it is unset or empty (an empty value
/// means unset everywhere himeno reads one).
///
/// # Panics
///
/// When `name` is not in [`VARIABLES`]: a variable read must be
/// documented, and a test run finds the one that is not.
pub fn get_os(name: &str) -> Option<OsString> {
    assert!(
        is_listed(name),
        "environment variable {name} is read but not listed in environment::VARIABLES"
    );
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// [`get_os`] as text; a value that is not UTF-8 reads as unset.
pub fn get(name: &str) -> Option<String> {
    get_os(name).and_then(|v| v.into_string().ok())
}

/// Sets `name` to `value` for this process and the libraries it loads.
///
/// # Safety
///
/// The process must have one thread: the environment is not synchronised
/// with other threads' reads of it, which is why Rust 2024 makes setting
/// it unsafe.
pub unsafe fn set(name: &str, value: &str) {
    assert!(
        is_listed(name),
        "environment variable {name} is set but not listed"
    );
    // SAFETY: the caller guarantees a single-threaded process.
    unsafe { std::env::set_var(name, value) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_constant_and_group_is_listed() {
        let named = [
            STOP_GRACE,
            FAULT,
            BINDING,
            FONT,
            NVRTC_LIB,
            CUDA_CONNECTIONS,
            HOSTNAME,
            RUST_LOG,
            GPU_CHECK_DIR,
            TMPDIR,
            LLC_BYTES,
            NVRTC_CACHE,
            NVTX_LIB,
            MPS_PIPE,
            SLURM_JOB_ID,
            SLURM_STEP_ID,
        ];
        let groups = LAUNCHER_SIZE
            .iter()
            .chain(&LAUNCHER_RANK)
            .chain(&CUDA_ROOTS)
            .chain(&PYTHON_PREFIXES);
        for name in named.iter().chain(groups) {
            assert!(is_listed(name), "{name}");
        }
        assert!(!is_listed("HIMENO_UNKNOWN"));
        assert!(!is_listed("CUDA"), "a part of a name is not a name");
    }
}
