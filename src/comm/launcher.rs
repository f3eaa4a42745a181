//! What the launcher (mpirun, srun, hydra) and the system say about this
//! process before any communication starts: its rank, the job's size, the
//! host name.

use crate::environment;

/// The number of ranks a launcher (mpirun, srun, hydra) says this process
/// belongs to, read from the variables launchers set. The launcher that
/// started this process sets its own variable, but a process can also
/// inherit another's (mpirun inside a Slurm job step passes Slurm's on), so
/// the MPI libraries' own variables come before Slurm's.
pub fn launcher_size() -> Option<usize> {
    environment::LAUNCHER_SIZE
        .iter()
        .filter_map(|v| environment::get(v))
        .find_map(|s| s.trim().parse::<usize>().ok())
}

/// This process's rank as a launcher announced it, before MPI starts (so
/// that only one of N identical failures is printed).
pub fn launcher_rank() -> Option<usize> {
    environment::LAUNCHER_RANK
        .iter()
        .filter_map(|v| environment::get(v))
        .find_map(|s| s.trim().parse().ok())
}

/// Whether this process is the launcher's rank 0, or was not started by a
/// launcher: the one process of a job that prints what every rank would
/// print alike.
pub fn is_first_rank() -> bool {
    launcher_rank().unwrap_or(0) == 0
}

/// This machine's host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .or_else(|| environment::get(environment::HOSTNAME))
        .unwrap_or_else(|| "unknown".to_string())
}
