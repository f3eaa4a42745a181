//! The worker pool shared by the CPU sweep and `himeno bench stream`: a fixed
//! set of threads, optionally pinned one per CPU of the rank's allowed set
//! (which a launcher such as `mpirun --bind-to` may have narrowed), where
//! thread `t` always runs the `t`-th part of a static partition. Using one
//! pool for both makes the stream bandwidth comparable with the solver's.

use crate::error::{Error, Result};
use rayon::{ThreadPool, ThreadPoolBuilder};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

/// Thread placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Bind {
    /// Leave placement to the operating system.
    None,
    /// Pin each worker thread to one CPU of the rank's allowed set.
    Cores,
}

impl Bind {
    /// Lower-case name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            Bind::None => "none",
            Bind::Cores => "cores",
        }
    }
}

/// Largest accepted `--threads`.
pub const MAX_THREADS: usize = 4096;

/// A fixed pool of worker threads with a known placement.
pub struct Pool {
    pool: ThreadPool,
    bind: Bind,
    /// CPUs this process may run on, as the launcher left them.
    allowed: Vec<usize>,
    /// CPU each thread is pinned to (`bind cores`), by thread index.
    pinned: Vec<usize>,
}

/// Worker threads of one of `node_ranks` ranks on this node: `given`
/// (checked), or by default the CPUs this rank may use. A launcher that
/// binds ranks gives each its own CPUs; one that leaves every rank free to
/// use the whole node (oversubscribed runs, `--bind-to none`) would
/// otherwise start one thread per CPU in every rank, so then the node's
/// ranks share its CPUs. The solver and `bench stream` both use this, so
/// they run with the same threads.
pub fn for_rank(given: Option<usize>, node_ranks: usize) -> Result<usize> {
    let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
    match given {
        Some(0) => Err(Error::usage("--threads must be at least 1")),
        Some(t) if t > MAX_THREADS => Err(Error::usage(format!(
            "--threads {t} is more than {MAX_THREADS}: give at most {MAX_THREADS} threads per rank"
        ))),
        Some(t) => Ok(t),
        None => {
            // SAFETY: sysconf only reads a system constant.
            let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
            let unbound = online > 0 && allowed >= online as usize;
            Ok(if unbound && node_ranks > 1 {
                (allowed / node_ranks).max(1)
            } else {
                allowed
            })
        }
    }
}

impl Pool {
    /// Starts `threads` workers; with [`Bind::Cores`] thread `t` is pinned
    /// to the `t`-th CPU of the allowed set (cyclically, with a warning, when
    /// there are more threads than CPUs). When the launcher left the rank
    /// free to use every CPU of the node (it did not bind, e.g. `mpirun
    /// --bind-to none` or an oversubscribed run), the node's ranks would all
    /// pin their threads to the same first CPUs; then thread `t` of the
    /// rank with node-local number `r` (from the launcher's environment,
    /// see [`launcher_local_rank`]) takes CPU `r * threads + t` instead.
    pub fn new(threads: usize, bind: Bind) -> Result<Pool> {
        let threads = threads.max(1);
        let allowed = affinity::allowed()?;
        let pool = ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|t| format!("himeno-worker-{t}"))
            .build()
            .map_err(|e| Error::runtime(format!("cannot start {threads} threads: {e}")))?;
        let mut pinned = Vec::new();
        if bind == Bind::Cores {
            if allowed.is_empty() {
                return Err(Error::usage(
                    "--bind cores is not supported on this platform: use --bind none",
                ));
            }
            if threads > allowed.len() {
                tracing::warn!(
                    threads,
                    cpus = allowed.len(),
                    "more threads than allowed CPUs: threads share CPUs"
                );
            }
            // SAFETY: sysconf only reads a system constant.
            let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
            let unbound = online > 0 && allowed.len() >= online as usize;
            let first = if unbound {
                launcher_local_rank().unwrap_or(0) * threads
            } else {
                0
            };
            pinned = (0..threads)
                .map(|t| allowed[(first + t) % allowed.len()])
                .collect();
            let outcomes = broadcast_on(&pool, |t| affinity::pin(pinned[t]));
            for (t, r) in outcomes.into_iter().enumerate() {
                r.map_err(|e| {
                    Error::runtime(format!("cannot pin thread {t} to cpu {}: {e}", pinned[t]))
                })?;
            }
        }
        Ok(Pool {
            pool,
            bind,
            allowed,
            pinned,
        })
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Runs `f(t)` once on every worker `t` and returns the results in
    /// thread order. Blocks until all are done.
    pub fn broadcast<R: Send>(&self, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
        broadcast_on(&self.pool, f)
    }

    /// Hands `items[t]` to worker `t` and runs `f(t, items[t])` there, one
    /// item per worker (`items` must have one per thread); returns the
    /// results in thread order. This is how disjoint `&mut` pieces of an
    /// array reach the thread that owns them.
    pub fn scatter<T: Send, R: Send>(
        &self,
        items: Vec<T>,
        f: impl Fn(usize, T) -> R + Sync,
    ) -> Vec<R> {
        assert_eq!(items.len(), self.threads(), "one item per thread");
        let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|x| Mutex::new(Some(x))).collect();
        self.broadcast(|t| {
            let item = slots[t]
                .lock()
                .expect("slot lock")
                .take()
                .expect("each slot is taken once");
            f(t, item)
        })
    }

    /// Where the threads run, for reports: the binding, the CPU of each
    /// thread (pinned, or where it is running now when unbound) and the
    /// allowed set.
    pub fn describe(&self) -> String {
        let list = |v: &[usize]| {
            v.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        match self.bind {
            Bind::Cores => format!(
                "bind cores: threads on cpus {} (allowed {})",
                list(&self.pinned),
                list(&self.allowed)
            ),
            Bind::None => {
                let now: Vec<String> = self
                    .broadcast(|_| affinity::current_cpu())
                    .into_iter()
                    .map(|c| c.map_or("?".to_string(), |c| c.to_string()))
                    .collect();
                format!(
                    "bind none: threads seen on cpus {} (allowed {})",
                    now.join(","),
                    list(&self.allowed)
                )
            }
        }
    }
}

/// This process's node-local rank as the launcher exports it (Open MPI,
/// Slurm, MPICH/Hydra, PMI), if it does.
pub fn launcher_local_rank() -> Option<usize> {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_LOCALID",
        "MPI_LOCALRANKID",
        "PMI_LOCAL_RANK",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

fn broadcast_on<R: Send>(pool: &ThreadPool, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    pool.broadcast(|ctx| f(ctx.index()))
}

/// CPU affinity through the Linux system calls (`sched_getaffinity`,
/// `sched_setaffinity`, `sched_getcpu`).
#[cfg(target_os = "linux")]
mod affinity {
    use crate::error::{Error, Result};

    /// The CPUs the calling thread may run on.
    pub fn allowed() -> Result<Vec<usize>> {
        // SAFETY: cpu_set_t is plain data; the kernel writes at most its size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
        if rc != 0 {
            return Err(Error::runtime(format!(
                "cannot read the CPU affinity: {}",
                std::io::Error::last_os_error()
            )));
        }
        let max = libc::CPU_SETSIZE as usize;
        // SAFETY: every index is below CPU_SETSIZE.
        Ok((0..max)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect())
    }

    /// Pins the calling thread to `cpu`.
    pub fn pin(cpu: usize) -> std::io::Result<()> {
        // SAFETY: as in `allowed`; `cpu` comes from the allowed set, below
        // CPU_SETSIZE.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        unsafe { libc::CPU_SET(cpu, &mut set) };
        let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// The CPU the calling thread runs on now.
    pub fn current_cpu() -> Option<usize> {
        // SAFETY: no arguments; returns -1 on error.
        let c = unsafe { libc::sched_getcpu() };
        usize::try_from(c).ok()
    }
}

/// No affinity control off Linux: nothing is known, pinning is refused.
#[cfg(not(target_os = "linux"))]
mod affinity {
    use crate::error::Result;

    /// Unknown: empty.
    pub fn allowed() -> Result<Vec<usize>> {
        Ok(Vec::new())
    }

    /// Never called: `Pool::new` refuses `bind cores` first.
    pub fn pin(_cpu: usize) -> std::io::Result<()> {
        Err(std::io::Error::other("thread pinning needs Linux"))
    }

    /// Unknown.
    pub fn current_cpu() -> Option<usize> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_threads_run_where_they_are_pinned() {
        let pool = Pool::new(2, Bind::Cores).unwrap();
        if cfg!(target_os = "linux") {
            let seen = pool.broadcast(|_| affinity::current_cpu());
            let want: Vec<Option<usize>> = pool.pinned.iter().map(|&c| Some(c)).collect();
            assert_eq!(seen, want);
            assert!(pool.describe().starts_with("bind cores: threads on cpus"));
        }
    }

    #[test]
    fn broadcast_returns_in_thread_order() {
        let pool = Pool::new(3, Bind::None).unwrap();
        assert_eq!(pool.broadcast(|t| t * 10), vec![0, 10, 20]);
        assert!(pool.describe().contains("allowed"));
    }
}
