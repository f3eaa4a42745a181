//! A team of threads that run one job together, as an OpenMP parallel
//! region does: the calling thread may take part 0 itself, and the workers
//! wait for the next job spinning for a short while before they sleep.
//!
//! Why not a work-stealing pool: a sweep of a grid that lives in the cache
//! takes tens of microseconds, and rayon's hand-off (the caller asleep on a
//! latch, the workers yielding and then asleep between jobs) cost 16 us per
//! call on a 2-vCPU guest, and put 40% of the CPU time of a two-thread
//! in-cache sweep in the scheduler (notes/cpu-perf.md). Here a worker that
//! is spinning sees a new job within a cache-line transfer.

use std::any::Any;
use std::cell::UnsafeCell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a thread that waits (a worker for its next job, the caller for
/// the workers) spins before it sleeps: long enough to span the caller's
/// work between two sweeps (the gosa sum, a halo exchange of a small grid),
/// short enough that a team left idle soon gives its CPUs back. libgomp
/// spins for a similar time by default.
pub const SPIN: Duration = Duration::from_micros(200);

/// A job as the workers see it: the caller's closure, its lifetime erased.
/// [`Team::run`] does not return before every worker is done with it.
type Job = *const (dyn Fn(usize) + Sync + 'static);

/// What the threads of a team share.
struct Shared {
    /// Number of the latest job posted; a worker runs each number once.
    posted: AtomicU64,
    /// The latest job; written only by [`Team::run`] while no worker runs.
    job: UnsafeCell<Option<Job>>,
    /// Workers still running the latest job.
    remaining: AtomicUsize,
    /// Who sleeps (read and changed under the lock, so that no wake-up is
    /// lost between a sleeper's last look and its wait).
    sleep: Mutex<Sleepers>,
    /// Where workers sleep until a job is posted.
    wake: Condvar,
    /// Where the caller sleeps until the workers are done.
    done: Condvar,
    /// The first panic of a worker in the latest job.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// Set once, under the lock, when the team is dropped: workers end.
    stop: AtomicBool,
    /// Whether waiting threads spin before they sleep (not when the team
    /// has more threads than CPUs: a spinner would hold a CPU that a
    /// thread with work needs).
    spin: bool,
}

/// The sleeping threads of a team.
#[derive(Default)]
struct Sleepers {
    workers: usize,
    caller: bool,
}

// SAFETY: `job` is written by the caller only between jobs (after every
// worker decremented `remaining` for the previous one, before `posted` is
// bumped for the next), and read by workers only after they saw `posted`
// bumped (Release/Acquire), so no write races a read; the closure it points
// to is `Sync`.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer is only dereferenced under that protocol.
unsafe impl Send for Shared {}

impl Shared {
    fn sleepers(&self) -> MutexGuard<'_, Sleepers> {
        self.sleep.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spins up to [`SPIN`] (when the team spins) until `ready()`; returns
    /// whether it became true. Between short bursts of spinning it yields
    /// the CPU: a thread that needs this CPU (the scheduler may have put
    /// the caller and a worker on one) runs at once, instead of waiting
    /// out the spin, which made a two-thread sweep of an L2-sized grid
    /// 4-5x slower in some runs.
    fn spin_until(&self, ready: impl Fn() -> bool) -> bool {
        if !self.spin {
            return ready();
        }
        let start = Instant::now();
        loop {
            for _ in 0..64 {
                if ready() {
                    return true;
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= SPIN {
                return ready();
            }
            std::thread::yield_now();
        }
    }
}

/// A fixed team of `threads` parts: part 0 on the caller or on a worker,
/// the others on workers that live as long as the team.
pub struct Team {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
    /// Whether the caller runs part 0.
    caller: bool,
    /// One job at a time.
    running: Mutex<()>,
}

impl Team {
    /// Starts the workers of a team of `threads` parts; `caller` says
    /// whether part 0 runs on the calling thread (then `threads - 1`
    /// workers start); `cpus` is how many CPUs the team's threads may use
    /// (waiting threads spin only if there are enough of them). Workers
    /// are named `himeno-worker-N`, N their part.
    pub fn new(threads: usize, caller: bool, cpus: usize) -> std::io::Result<Team> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            posted: AtomicU64::new(0),
            job: UnsafeCell::new(None),
            remaining: AtomicUsize::new(0),
            sleep: Mutex::new(Sleepers::default()),
            wake: Condvar::new(),
            done: Condvar::new(),
            panic: Mutex::new(None),
            stop: AtomicBool::new(false),
            spin: threads <= cpus,
        });
        let mut team = Team {
            shared,
            handles: Vec::new(),
            caller,
            running: Mutex::new(()),
        };
        for part in usize::from(caller)..threads {
            let shared = Arc::clone(&team.shared);
            let handle = std::thread::Builder::new()
                .name(format!("himeno-worker-{part}"))
                .spawn(move || work(&shared, part))?;
            team.handles.push(handle);
        }
        Ok(team)
    }

    /// Number of parts.
    pub fn threads(&self) -> usize {
        self.handles.len() + usize::from(self.caller)
    }

    /// Threads the team started (the caller not counted).
    pub fn spawned(&self) -> usize {
        self.handles.len()
    }

    /// Runs `f(part)` once for every part, each on its own thread, and
    /// returns when all are done. A panic in any part is raised again here,
    /// after every part has ended.
    pub fn run(&self, f: &(dyn Fn(usize) + Sync)) {
        let _one = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let shared = &*self.shared;
        let workers = self.handles.len();
        if workers > 0 {
            // SAFETY: the lifetime is erased for the workers' sake only:
            // this function waits below until every worker is done with the
            // job (also when the caller's own part panics), and no worker
            // reads `job` again before the next post.
            let job: Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(f) };
            // SAFETY: no worker runs (the last job's `remaining` reached 0),
            // so none reads `job` now; see `Shared`'s Sync.
            unsafe { *shared.job.get() = Some(job) };
            shared.remaining.store(workers, Ordering::Relaxed);
            let sleepers = shared.sleepers();
            shared.posted.fetch_add(1, Ordering::Release);
            if sleepers.workers > 0 {
                shared.wake.notify_all();
            }
        }
        let own = if self.caller {
            catch_unwind(AssertUnwindSafe(|| f(0))).err()
        } else {
            None
        };
        if workers > 0 {
            self.wait_for_workers();
        }
        let theirs = shared
            .panic
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(payload) = own.or(theirs) {
            resume_unwind(payload);
        }
    }

    /// Waits until every worker has finished the latest job: spinning
    /// first when the caller ran a part too (its CPU is its own), asleep
    /// at once when it did not (the workers have every CPU of the team).
    fn wait_for_workers(&self) {
        let shared = &*self.shared;
        let finished = || shared.remaining.load(Ordering::Acquire) == 0;
        if self.caller && shared.spin_until(finished) {
            return;
        }
        let mut sleepers = shared.sleepers();
        sleepers.caller = true;
        while !finished() {
            sleepers = shared
                .done
                .wait(sleepers)
                .unwrap_or_else(|p| p.into_inner());
        }
        sleepers.caller = false;
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        let shared = &*self.shared;
        {
            let _sleepers = shared.sleepers();
            shared.stop.store(true, Ordering::Release);
            shared.posted.fetch_add(1, Ordering::Release);
            shared.wake.notify_all();
        }
        for handle in self.handles.drain(..) {
            // A worker's job panics are caught; nothing else can fail.
            let _ = handle.join();
        }
    }
}

/// A worker's life: wait for each new job, run it, report it done.
fn work(shared: &Shared, part: usize) {
    let mut seen = 0;
    loop {
        let posted = || shared.posted.load(Ordering::Acquire);
        if !shared.spin_until(|| posted() != seen) {
            let mut sleepers = shared.sleepers();
            sleepers.workers += 1;
            while posted() == seen && !shared.stop.load(Ordering::Acquire) {
                sleepers = shared
                    .wake
                    .wait(sleepers)
                    .unwrap_or_else(|p| p.into_inner());
            }
            sleepers.workers -= 1;
        }
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        seen = posted();
        // SAFETY: `posted` was bumped after `job` was written (Acquire
        // above pairs with the caller's Release), and the caller keeps the
        // closure alive until this worker decrements `remaining`.
        let job = unsafe { (*shared.job.get()).expect("a posted job") };
        // SAFETY: as above: the closure outlives this call.
        let outcome = catch_unwind(AssertUnwindSafe(|| unsafe { (*job)(part) }));
        if let Err(payload) = outcome {
            let mut first = shared.panic.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert(payload);
        }
        if shared.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last one: wake the caller if it sleeps (it checks
            // `remaining` under the same lock before it waits).
            let sleepers = shared.sleepers();
            if sleepers.caller {
                shared.done.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_part_runs_once_per_job_on_its_own_thread() {
        for caller in [true, false] {
            let team = Team::new(3, caller, 64).unwrap();
            assert_eq!(team.threads(), 3);
            assert_eq!(team.spawned(), 3 - usize::from(caller));
            let me = std::thread::current().id();
            for _ in 0..100 {
                let ran = [(); 3].map(|_| AtomicUsize::new(0));
                let ids = Mutex::new(vec![None; 3]);
                team.run(&|t| {
                    ran[t].fetch_add(1, Ordering::Relaxed);
                    ids.lock().unwrap()[t] = Some(std::thread::current().id());
                });
                assert!(ran.iter().all(|r| r.load(Ordering::Relaxed) == 1));
                let ids = ids.into_inner().unwrap();
                assert_eq!(ids[0] == Some(me), caller, "part 0 on the caller");
                assert!(ids[1..].iter().all(|&i| i.is_some() && i != Some(me)));
                assert_ne!(ids[1], ids[2]);
            }
        }
    }

    /// Workers that slept (past the spin, or never spinning: more threads
    /// than CPUs) are woken for the next job, and the caller that sleeps
    /// for slow workers is woken when they end.
    #[test]
    fn sleeping_workers_and_a_sleeping_caller_are_woken() {
        for (caller, cpus) in [(true, 64), (false, 64), (true, 1), (false, 1)] {
            let team = Team::new(2, caller, cpus).unwrap();
            for _ in 0..3 {
                std::thread::sleep(SPIN * 3);
                let sum = AtomicUsize::new(0);
                team.run(&|t| {
                    if t == 1 {
                        std::thread::sleep(SPIN * 2);
                    }
                    sum.fetch_add(t + 1, Ordering::Relaxed);
                });
                assert_eq!(sum.load(Ordering::Relaxed), 3);
            }
        }
    }

    #[test]
    fn a_panic_in_any_part_reaches_the_caller_after_all_parts_end() {
        for (caller, bad) in [(true, 0), (true, 1), (false, 0), (false, 1)] {
            let team = Team::new(2, caller, 64).unwrap();
            let ended = AtomicUsize::new(0);
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                team.run(&|t| {
                    if t == bad {
                        panic!("part {t} fails");
                    }
                    std::thread::sleep(Duration::from_millis(5));
                    ended.fetch_add(1, Ordering::Relaxed);
                })
            }));
            let payload = outcome.expect_err("the panic is raised again");
            assert_eq!(
                payload.downcast_ref::<String>().map(String::as_str),
                Some(format!("part {bad} fails").as_str())
            );
            assert_eq!(ended.load(Ordering::Relaxed), 1, "the other part ended");
            let after = AtomicUsize::new(0);
            team.run(&|_| {
                after.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(after.load(Ordering::Relaxed), 2, "the team still works");
        }
    }
}
