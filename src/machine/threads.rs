//! The worker pool shared by the CPU sweep and `himeno bench stream`: a fixed
//! set of threads, optionally pinned one per CPU of the rank's allowed set
//! (which a launcher such as `mpirun --bind-to` may have narrowed), where
//! thread `t` always runs the `t`-th part of a static partition. Using one
//! pool for both makes the stream bandwidth comparable with the solver's.
//!
//! Part 0 runs on the calling thread wherever that is where it would run
//! anyway (unbound, or pinned to the one CPU the caller may use), as an
//! OpenMP master thread does: the caller then first-touches and sweeps its
//! part, and only the other parts wait for a hand-off ([`super::team`]).
//! Waking a worker and waiting for it took about a third of an iteration on
//! grids that live in the L2 (notes/cpu-perf.md).

use super::team::Team;
use crate::error::{Error, Result};
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

/// Most threads accepted per CPU a rank may use. A few more threads than
/// CPUs can be worth trying; far more only queue for the same CPUs (4096
/// threads took 54 s for one iteration of a 9^3 grid on 2 CPUs).
pub const MAX_THREADS_PER_CPU: usize = 8;

/// A fixed pool of worker threads with a known placement.
pub struct Pool {
    /// The threads, the caller among them where it runs part 0.
    team: Team,
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
        Some(t) if t > MAX_THREADS_PER_CPU * allowed => Err(Error::usage(format!(
            "--threads {t} is more than {MAX_THREADS_PER_CPU} per CPU this rank may use \
             ({allowed} CPU(s)), where the threads would only wait for each other: give at \
             most {}, or start the rank with more CPUs",
            MAX_THREADS_PER_CPU * allowed
        ))),
        Some(t) => Ok(t),
        None => Ok(if unbound(allowed) && node_ranks > 1 {
            (allowed / node_ranks).max(1)
        } else {
            allowed
        }),
    }
}

/// Whether a process allowed on `allowed` CPUs may run on every CPU of the
/// node: no launcher bound it, so it shares them with the node's other
/// ranks (or it holds them all, as in-process ranks do).
fn unbound(allowed: usize) -> bool {
    // SAFETY: sysconf only reads a system constant.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    online > 0 && allowed >= online as usize
}

impl Pool {
    /// Starts `threads` workers for the rank `node = [node_rank,
    /// node_ranks]` of its node's ranks; with [`Bind::Cores`] thread `t` is pinned to the `t`-th CPU of the allowed
    /// set (cyclically, with a warning, when there are more threads than
    /// CPUs). When the allowed set is the whole node, which the node's
    /// ranks share, rank `r`'s threads start at its `r * threads`-th CPU,
    /// so that ranks do not pin their threads onto the same CPUs.
    ///
    /// Part 0, where it would run where the caller may run anyway
    /// ([`Bind::None`], or [`Bind::Cores`] onto the only CPU the caller is
    /// allowed), runs on the calling thread itself: see [`Pool::spawned`].
    /// Waiting threads spin briefly before they sleep where the rank's
    /// threads have a CPU each ([`super::team`]).
    pub fn new(threads: usize, bind: Bind, node: [usize; 2]) -> Result<Pool> {
        let [node_rank, node_ranks] = node;
        let threads = threads.max(1);
        let allowed = affinity::allowed()?;
        if bind == Bind::Cores && allowed.is_empty() {
            return Err(Error::usage(
                "--bind cores is not supported on this platform: use --bind none",
            ));
        }
        let caller = runs_on_caller(bind, &allowed);
        // The CPUs this rank's threads have to themselves: the node's
        // ranks share them when no launcher gave each its own.
        let cpus = if allowed.is_empty() {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else if unbound(allowed.len()) {
            allowed.len() / node_ranks.max(1)
        } else {
            allowed.len()
        };
        let team = Team::new(threads, caller, cpus)
            .map_err(|e| Error::runtime(format!("cannot start {threads} threads: {e}")))?;
        let mut pinned = Vec::new();
        if bind == Bind::Cores {
            if threads > allowed.len() {
                tracing::warn!(
                    threads,
                    cpus = allowed.len(),
                    "more threads than allowed CPUs: threads share CPUs"
                );
            }
            let first = if unbound(allowed.len()) {
                node_rank.saturating_mul(threads)
            } else {
                0
            };
            pinned = (0..threads)
                .map(|t| allowed[first.wrapping_add(t) % allowed.len()])
                .collect();
            // The caller's part needs no pinning: it runs on the caller
            // only where the caller may use that one CPU alone.
            let outcomes = broadcast_on(&team, |t| {
                if caller && t == 0 {
                    Ok(())
                } else {
                    affinity::pin(pinned[t])
                }
            });
            for (t, r) in outcomes.into_iter().enumerate() {
                r.map_err(|e| {
                    Error::runtime(format!("cannot pin thread {t} to cpu {}: {e}", pinned[t]))
                })?;
            }
        }
        Ok(Pool {
            team,
            bind,
            allowed,
            pinned,
        })
    }

    /// Threads [`Pool::new`] would spawn for `threads` parts under `bind`
    /// when called from this thread: one per part, less the caller's where
    /// it runs part 0.
    pub fn spawned(threads: usize, bind: Bind) -> usize {
        affinity::allowed().map_or(threads.max(1), |allowed| {
            spawns(threads.max(1), bind, &allowed)
        })
    }

    /// Number of worker threads (parts), the caller counted when it runs
    /// part 0.
    pub fn threads(&self) -> usize {
        self.team.threads()
    }

    /// Runs `f(t)` once on every worker `t` and returns the results in
    /// thread order. Blocks until all are done.
    pub fn broadcast<R: Send>(&self, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
        broadcast_on(&self.team, f)
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

    /// Where the threads run: the binding, the CPU of each thread (pinned,
    /// or where it is running now when unbound) and the allowed set.
    pub fn cpus(&self) -> ThreadCpus {
        let cpus = match self.bind {
            Bind::Cores => self.pinned.iter().map(|&c| Some(c)).collect(),
            Bind::None => self.broadcast(|_| affinity::current_cpu()),
        };
        ThreadCpus {
            bind: self.bind,
            cpus,
            allowed: self.allowed.clone(),
        }
    }

    /// [`Pool::cpus`] as reports write it.
    pub fn describe(&self) -> String {
        self.cpus().to_string()
    }
}

/// Where a pool's threads run, as a rank's placement records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCpus {
    /// The binding policy.
    pub bind: Bind,
    /// Each thread's CPU, by thread index: the one it is pinned to
    /// (`cores`), or the one it was seen on (`none`; `None` where the
    /// system did not tell).
    pub cpus: Vec<Option<usize>>,
    /// The CPUs the process may run on.
    pub allowed: Vec<usize>,
}

impl std::fmt::Display for ThreadCpus {
    /// `bind cores: threads on cpus 0,1 (allowed 0,1)`, or `bind none:
    /// threads seen on cpus 1,? (allowed 0,1)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(",");
        let cpus = list(
            &mut self
                .cpus
                .iter()
                .map(|c| c.map_or("?".into(), |c| c.to_string())),
        );
        let allowed = list(&mut self.allowed.iter().map(|c| c.to_string()));
        let on = match self.bind {
            Bind::Cores => "on",
            Bind::None => "seen on",
        };
        write!(
            f,
            "bind {}: threads {on} cpus {cpus} (allowed {allowed})",
            self.bind.name()
        )
    }
}

impl std::str::FromStr for ThreadCpus {
    type Err = String;
    /// Reads what [`ThreadCpus`]'s `Display` writes (records keep it as
    /// text inside a rank's placement).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let bad = || format!("'{s}' is not a thread placement");
        let (bind, rest) = if let Some(r) = s.strip_prefix("bind cores: threads on cpus ") {
            (Bind::Cores, r)
        } else if let Some(r) = s.strip_prefix("bind none: threads seen on cpus ") {
            (Bind::None, r)
        } else {
            return Err(bad());
        };
        let (cpus, allowed) = rest
            .strip_suffix(')')
            .and_then(|r| r.split_once(" (allowed "))
            .ok_or_else(bad)?;
        let numbers = |l: &str| -> std::result::Result<Vec<Option<usize>>, String> {
            l.split(',')
                .filter(|c| !c.is_empty())
                .map(|c| match c {
                    "?" => Ok(None),
                    c => c.parse().map(Some).map_err(|_| bad()),
                })
                .collect()
        };
        Ok(ThreadCpus {
            bind,
            cpus: numbers(cpus)?,
            allowed: numbers(allowed)?
                .into_iter()
                .map(|c| c.ok_or_else(bad))
                .collect::<std::result::Result<_, _>>()?,
        })
    }
}

/// Whether part 0 runs on the caller under `bind` for a caller allowed on
/// `allowed`: unbound, or pinned where the caller's only CPU is anyway. A
/// part pinned onto one of several allowed CPUs keeps its own worker, so
/// the caller's affinity (which the threads it starts later inherit) stays
/// as the launcher set it.
fn runs_on_caller(bind: Bind, allowed: &[usize]) -> bool {
    match bind {
        Bind::None => true,
        Bind::Cores => allowed.len() == 1,
    }
}

/// Threads to spawn for `threads` parts under `bind` for a caller allowed
/// on `allowed`: one per part but the caller's.
fn spawns(threads: usize, bind: Bind, allowed: &[usize]) -> usize {
    threads - usize::from(runs_on_caller(bind, allowed))
}

/// `f(t)` for every part of `team`, results in part order.
fn broadcast_on<R: Send>(team: &Team, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let slots: Vec<Mutex<Option<R>>> = (0..team.threads()).map(|_| Mutex::new(None)).collect();
    team.run(&|t| {
        let r = f(t);
        *slots[t].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .expect("every part ran")
        })
        .collect()
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
        let pool = Pool::new(2, Bind::Cores, [0, 1]).unwrap();
        if cfg!(target_os = "linux") {
            let seen = pool.broadcast(|_| affinity::current_cpu());
            let want: Vec<Option<usize>> = pool.pinned.iter().map(|&c| Some(c)).collect();
            assert_eq!(seen, want);
            assert!(pool.describe().starts_with("bind cores: threads on cpus"));
        }
    }

    /// Part 0 runs on the caller where it would run there anyway
    /// (unbound, or pinned to the caller's only CPU); a part pinned onto
    /// one of several CPUs keeps its own worker, so pinning never narrows
    /// the caller's affinity.
    #[test]
    fn part_zero_runs_on_the_caller_only_where_it_would_run_anyway() {
        let me = std::thread::current().id();
        let ids = |pool: &Pool| pool.broadcast(|_| std::thread::current().id());
        let unbound = Pool::new(1, Bind::None, [0, 1]).unwrap();
        assert_eq!(ids(&unbound), vec![me]);
        assert_eq!(Pool::spawned(1, Bind::None), 0);
        assert_eq!(unbound.threads(), 1);
        assert!(
            unbound
                .describe()
                .starts_with("bind none: threads seen on cpus")
        );
        let two = ids(&Pool::new(2, Bind::None, [0, 1]).unwrap());
        assert_eq!(two[0], me);
        assert_ne!(two[1], me);
        assert_eq!(Pool::spawned(2, Bind::None), 1);
        if cfg!(target_os = "linux") {
            let allowed = affinity::allowed().unwrap();
            let pinned = Pool::new(1, Bind::Cores, [0, 1]).unwrap();
            assert_eq!(ids(&pinned) == vec![me], allowed.len() == 1);
            assert_eq!(
                Pool::spawned(1, Bind::Cores),
                usize::from(allowed.len() > 1)
            );
            assert_eq!(affinity::allowed().unwrap(), allowed, "the caller's CPUs");
            let seen = pinned.broadcast(|_| affinity::current_cpu());
            assert_eq!(seen, vec![Some(pinned.pinned[0])]);
        }
        assert_eq!(spawns(1, Bind::Cores, &[3]), 0);
        assert_eq!(spawns(3, Bind::Cores, &[3]), 2);
        assert_eq!(spawns(1, Bind::Cores, &[0, 1]), 1);
        assert_eq!(spawns(2, Bind::Cores, &[0, 1]), 2);
        assert_eq!(spawns(3, Bind::None, &[0]), 2);
    }

    #[test]
    fn broadcast_returns_in_thread_order() {
        let pool = Pool::new(3, Bind::None, [0, 1]).unwrap();
        assert_eq!(pool.broadcast(|t| t * 10), vec![0, 10, 20]);
        assert!(pool.describe().contains("allowed"));
    }

    #[test]
    fn thread_placements_read_back_from_their_text() {
        for text in [
            "bind cores: threads on cpus 0,1 (allowed 0,1)",
            "bind none: threads seen on cpus 1,? (allowed 0,1,2)",
        ] {
            let t: ThreadCpus = text.parse().unwrap();
            assert_eq!(t.to_string(), text);
        }
        let pool = Pool::new(2, Bind::Cores, [0, 1]).unwrap();
        assert_eq!(pool.describe().parse::<ThreadCpus>(), Ok(pool.cpus()));
        assert!(
            "bind cores: threads on cpus x (allowed 0)"
                .parse::<ThreadCpus>()
                .is_err()
        );
        assert!("kernel avx512".parse::<ThreadCpus>().is_err());
    }
}
