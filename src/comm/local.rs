//! In-process ranks (`--local-ranks N`): N ranks run as threads of one
//! process and talk through shared memory, with the same decomposition,
//! halo schedule, reductions, gather, stop decision and fail-fast abort as
//! MPI ranks. It needs no MPI library, so the single-node fallback can run
//! and test decompositions, CI can test them without `mpirun` start-up
//! costs, and ranks can share one GPU on a machine without MPI.
//!
//! Collectives are deterministic: each rank puts its value into its slot,
//! and once every rank has arrived each combines the slots in rank order
//! (a sum is always added up in the same order). Point-to-point messages
//! are copied into the receiver's mailbox at once, so a send never waits
//! and a halo step cannot deadlock.
//!
//! A rank that fails aborts the job as `MPI_Abort` does: the process ends.
//! A rank that leaves the job (returns, or fails) while another waits for
//! it in a collective or a receive ends the job too, with a message,
//! instead of leaving the other waiting forever.

use super::api::{Comm, HaloSwap, Launch};
use crate::error::{Error, Result, print_line};
use std::collections::{HashMap, VecDeque};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Most in-process ranks a job may have (each is a thread with its own
/// worker pool).
pub const MAX_LOCAL_RANKS: usize = 1024;

/// Stack of each in-process rank's thread: what a process's main thread,
/// which runs an MPI rank's job, gets under Linux's default `ulimit -s`.
/// A rank's job runs the GPU backend's NVRTC compile (a deep, recursive
/// front end) on that thread: on a thread's default 2 MiB, an emulated
/// in-process GPU run in CI once aborted with a stack overflow in a rank.
/// (A later overflow, at 8 MiB, was the emulated driver's scheduler
/// recursing between two devices: tests/cuda_emu/sched.cpp.)
const RANK_STACK_BYTES: usize = 8 << 20;

/// The thread of in-process rank `r`: named for it (the panic hook and
/// messages find the rank by the name), with [`RANK_STACK_BYTES`].
fn rank_thread(r: usize) -> std::thread::Builder {
    std::thread::Builder::new()
        .name(format!("himeno-rank-{r}"))
        .stack_size(RANK_STACK_BYTES)
}

/// Runs `job` on each of `n` in-process ranks, each rank's outcome mapped
/// by `finish` (which may end the process for a failing rank); returns
/// rank 0's exit code.
///
/// Every rank's thread is started before any is waited for, and a thread
/// the OS refuses (`ulimit -u`, `ulimit -v`) ends the job at once: the
/// ranks that did start would otherwise wait for the missing one in their
/// first collective, for good.
pub fn run(
    n: usize,
    job: &(dyn Fn(&dyn Comm) -> Result<ExitCode> + Sync),
    finish: fn(&dyn Comm, Result<ExitCode>) -> ExitCode,
) -> ExitCode {
    install_exit_hook();
    let shared = Job::new(n);
    std::thread::scope(|s| {
        let spawned: Vec<_> = (0..n)
            .map(|r| {
                let comm = shared.comm(r);
                let shared = &shared;
                rank_thread(r).spawn_scoped(s, move || {
                    let code = finish(&comm, job(&comm));
                    shared.leave(r);
                    code
                })
            })
            .collect();
        let mut ranks = Vec::with_capacity(n);
        for (r, started) in spawned.into_iter().enumerate() {
            match started {
                Ok(handle) => ranks.push(handle),
                Err(e) => end_process(
                    Some(&format!(
                        "himeno: error: the system refused to start rank {r}'s thread (of \
                         {n} in-process ranks): {e}; give fewer --local-ranks, or raise the \
                         process limits (ulimit -u, ulimit -v)"
                    )),
                    2,
                ),
            }
        }
        // A rank that panicked has already ended the process (the hook);
        // every other rank returns the job's common code.
        let codes: Vec<_> = ranks.into_iter().map(|h| h.join()).collect();
        codes
            .into_iter()
            .next()
            .and_then(|c| c.ok())
            .unwrap_or(ExitCode::from(2))
    })
}

/// Set by the first thread that ends the process.
static ENDING: AtomicBool = AtomicBool::new(false);

/// Ends the process with `code`, after `line` on stderr; the first caller
/// only. Ranks that fail together (all refused their worker threads, or
/// all see the same rank leave) would each tell the same story, and
/// `exit` from two threads at once is undefined in the C library: a later
/// caller waits here, silent, for the first caller's exit to end it.
fn end_process(line: Option<&str>, code: i32) -> ! {
    if ENDING.swap(true, Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    if let Some(line) = line {
        print_line(line);
    }
    crate::error::exit_now(code)
}

/// Makes a panic end the process with exit code 2 (an error, as an aborted
/// MPI job), after the usual message, instead of unwinding one rank's
/// thread while the others wait for it. Nothing here may panic again (a
/// full stderr): that would abort the process with a signal, not exit 2.
pub fn install_exit_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if ENDING.load(Ordering::SeqCst) {
            // The job is already ending; this rank only adds noise.
            end_process(None, 2);
        }
        let thread = std::thread::current();
        if let Some(rank) = thread.name().and_then(|n| n.strip_prefix("himeno-rank-")) {
            print_line(&format!("himeno: rank {rank} panicked; aborting all ranks"));
        }
        default(info);
        end_process(None, 2);
    }));
}

/// A message in flight: halo values or benchmark bytes.
#[derive(Debug)]
enum Payload {
    Values(Vec<f32>),
    Bytes(Vec<u8>),
}

/// Messages waiting to be received, by (sender, receiver, tag).
type Mailboxes = HashMap<(usize, usize, i32), VecDeque<Payload>>;

/// What the job's rank threads share, behind one lock.
#[derive(Debug, Default)]
struct State {
    /// Barrier: ranks arrived in the current generation.
    arrived: usize,
    /// Barrier generation, advanced when the last rank arrives.
    generation: u64,
    /// One value per rank for the collective in progress.
    slots: Vec<Option<Vec<u8>>>,
    /// Point-to-point messages.
    mail: Mailboxes,
    /// The first rank that left the job, if any.
    gone: Option<usize>,
}

/// The job of in-process ranks.
///
/// Each rank sleeps on a condition variable of its own (all under the one
/// lock), and is woken only when something it may wait for changes: a
/// message to it, the end of a collective, a rank leaving. With one shared
/// condition variable every message woke every rank: 64 ranks of `bench
/// pingpong` spent 30 s in the kernel re-checking, for 0.3 s of work.
#[derive(Debug)]
pub struct Job {
    size: usize,
    state: Mutex<State>,
    wake: Vec<Condvar>,
}

impl Job {
    /// A job of `size` ranks.
    pub fn new(size: usize) -> Arc<Job> {
        Arc::new(Job {
            size,
            state: Mutex::new(State {
                slots: vec![None; size],
                ..State::default()
            }),
            wake: (0..size).map(|_| Condvar::new()).collect(),
        })
    }

    /// Wakes every rank (a collective completed, a rank left).
    fn wake_all(&self) {
        for c in &self.wake {
            c.notify_one();
        }
    }

    /// The communicator of `rank`.
    pub fn comm(self: &Arc<Job>, rank: usize) -> LocalComm {
        assert!(rank < self.size, "rank {rank} of {}", self.size);
        LocalComm {
            rank,
            job: Arc::clone(self),
        }
    }

    /// Records that `rank` left the job (its work returned): any rank still
    /// waiting for it cannot complete and ends the job.
    pub fn leave(&self, rank: usize) {
        let mut st = self.lock();
        st.gone.get_or_insert(rank);
        self.wake_all();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A rank that panics ends the process (see `install_exit_hook`), so
        // a poisoned lock is never seen by a rank that goes on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One in-process rank's communicator.
#[derive(Debug)]
pub struct LocalComm {
    rank: usize,
    job: Arc<Job>,
}

impl LocalComm {
    /// Waits on the job's condition variable until `ready` gives a value;
    /// ends the job if another rank left it meanwhile (it will never
    /// arrive).
    fn wait_for<'a, T>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        what: &str,
        mut ready: impl FnMut(&mut State) -> Option<T>,
    ) -> (MutexGuard<'a, State>, T) {
        loop {
            if let Some(v) = ready(&mut st) {
                return (st, v);
            }
            if let Some(gone) = st.gone {
                drop(st);
                self.fail(
                    &format!(
                        "himeno: rank {}: rank {gone} left the job while this rank waited in \
                         {what}; ending the job",
                        self.rank
                    ),
                    2,
                );
            }
            st = self.job.wake[self.rank]
                .wait(st)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Blocks until every rank has called it (with the state lock held
    /// between calls, so slots written before are visible after).
    fn sync<'a>(&'a self, st: MutexGuard<'a, State>, what: &str) -> MutexGuard<'a, State> {
        let mut st = st;
        let generation = st.generation;
        st.arrived += 1;
        if st.arrived == self.job.size {
            st.arrived = 0;
            st.generation += 1;
            self.job.wake_all();
            return st;
        }
        self.wait_for(st, what, |s| (s.generation != generation).then_some(()))
            .0
    }

    /// Puts `mine` in this rank's slot and, once every rank has, returns
    /// what `read` makes of all the slots (in rank order). Each rank reads
    /// only what it needs under the lock: copying every slot on every rank
    /// made a collective of 1024 ranks a million allocations.
    fn collective<T>(
        &self,
        mine: Vec<u8>,
        what: &str,
        read: impl FnOnce(&mut dyn Iterator<Item = &[u8]>) -> T,
    ) -> T {
        let mut st = self.job.lock();
        st.slots[self.rank] = Some(mine);
        let st = self.sync(st, what);
        let value = read(
            &mut st
                .slots
                .iter()
                .map(|s| s.as_deref().expect("every rank filled its slot")),
        );
        // No rank may refill its slot before every rank has read them.
        let mut st = self.sync(st, what);
        st.slots[self.rank] = None;
        drop(st);
        value
    }

    fn post(&self, to: usize, tag: i32, payload: Payload) {
        let mut st = self.job.lock();
        st.mail
            .entry((self.rank, to, tag))
            .or_default()
            .push_back(payload);
        // Only the receiver can be waiting for this.
        self.job.wake[to].notify_one();
    }

    fn take(&self, from: usize, tag: i32) -> Payload {
        let st = self.job.lock();
        let what = format!("a receive from rank {from}");
        let (_st, msg) = self.wait_for(st, &what, |s| {
            s.mail
                .get_mut(&(from, self.rank, tag))
                .and_then(VecDeque::pop_front)
        });
        msg
    }
}

fn f64s(bytes: &[u8]) -> impl Iterator<Item = f64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().expect("8 bytes")))
}

impl Comm for LocalComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.job.size
    }

    fn node_rank(&self) -> usize {
        self.rank
    }

    fn node_size(&self) -> usize {
        self.job.size
    }

    fn barrier(&self) {
        let st = self.job.lock();
        drop(self.sync(st, "a barrier"));
    }

    fn sum(&self, x: &mut [f64]) {
        let mine = x.iter().flat_map(|v| v.to_ne_bytes()).collect();
        x.fill(0.0);
        self.collective(mine, "a sum", |all| {
            // Rank order, so that every rank and every run adds alike.
            for part in all {
                for (acc, v) in x.iter_mut().zip(f64s(part)) {
                    *acc += v;
                }
            }
        });
    }

    fn max(&self, x: f64) -> f64 {
        self.collective(x.to_ne_bytes().to_vec(), "a maximum", |all| {
            all.flat_map(f64s).fold(f64::MIN, f64::max)
        })
    }

    fn broadcast(&self, x: u64) -> u64 {
        self.collective(x.to_ne_bytes().to_vec(), "a broadcast", |all| {
            let root = all.next().expect("rank 0's slot");
            u64::from_ne_bytes(root[..8].try_into().expect("8 bytes"))
        })
    }

    fn broadcast_bytes(&self, data: &[u8]) -> Vec<u8> {
        self.collective(data.to_vec(), "a broadcast", |all| {
            all.next().expect("rank 0's slot").to_vec()
        })
    }

    fn gather(&self, local: &[u8]) -> Option<Vec<Vec<u8>>> {
        let root = self.rank == 0;
        self.collective(local.to_vec(), "a gather", |all| {
            root.then(|| all.map(<[u8]>::to_vec).collect())
        })
    }

    fn exchange(&self, step: HaloSwap<'_>) -> Result<()> {
        let (tags, from_tags) = step.tags();
        let HaloSwap {
            peers, send, recv, ..
        } = step;
        for side in 0..2 {
            if let Some(peer) = peers[side] {
                self.post(peer, tags[side], Payload::Values(send[side].to_vec()));
            }
        }
        for (side, buf) in recv.into_iter().enumerate() {
            if let Some(peer) = peers[side] {
                match self.take(peer, from_tags[side]) {
                    Payload::Values(v) if v.len() == buf.len() => buf.copy_from_slice(&v),
                    other => {
                        return Err(Error::runtime(format!(
                            "rank {}: halo message from rank {peer} does not fit: {} values \
                             expected, got {other:?}",
                            self.rank,
                            buf.len()
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn send(&self, peer: usize, buf: &[u8]) {
        self.post(peer, -1, Payload::Bytes(buf.to_vec()));
    }

    fn recv(&self, peer: usize, buf: &mut [u8]) {
        match self.take(peer, -1) {
            Payload::Bytes(b) if b.len() == buf.len() => buf.copy_from_slice(&b),
            other => self.fail(
                &format!(
                    "himeno: rank {}: a message from rank {peer} does not fit its buffer \
                     ({} bytes): {other:?}",
                    self.rank,
                    buf.len()
                ),
                2,
            ),
        }
    }

    fn abort(&self, code: i32) -> ! {
        // The ranks are threads of this process: ending it ends them all,
        // as MPI_Abort ends every process of a job.
        end_process(None, code)
    }

    fn fail(&self, line: &str, code: i32) -> ! {
        end_process(Some(line), code)
    }

    fn host(&self) -> String {
        super::launcher::hostname()
    }

    fn library(&self) -> Option<String> {
        None
    }

    fn launch(&self) -> Launch {
        Launch::Threads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on every rank of a job of `n` in-process ranks; returns the
    /// results in rank order.
    fn on_ranks<R: Send>(n: usize, f: impl Fn(&LocalComm) -> R + Sync) -> Vec<R> {
        let job = Job::new(n);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|r| {
                    let comm = job.comm(r);
                    let f = &f;
                    s.spawn(move || f(&comm))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// Uses about `kib` KiB of this thread's stack.
    fn deep(kib: usize) -> u8 {
        let frame = std::hint::black_box([kib as u8; 1024]);
        if kib <= 1 {
            return frame[0];
        }
        frame[kib % 1024].wrapping_add(deep(kib - 1))
    }

    /// A rank's thread has a main thread's stack: work that needs 6 MiB of
    /// it (a thread's default is 2 MiB) runs. (Not through `run`, whose
    /// panic hook would end this test process at another test's panic.)
    #[test]
    fn a_rank_has_a_main_threads_stack() {
        let (name, got) = std::thread::scope(|s| {
            let rank = rank_thread(1).spawn_scoped(s, || {
                let name = std::thread::current().name().map(String::from);
                (name, deep(6 << 10))
            });
            rank.unwrap().join().unwrap()
        });
        assert_eq!(name.as_deref(), Some("himeno-rank-1"));
        let want = (2..=6 << 10).fold(1u8, |sum, kib| sum.wrapping_add(kib as u8));
        assert_eq!(got, want);
    }

    #[test]
    fn collectives_agree_on_every_rank() {
        let got = on_ranks(5, |c| {
            let mut x = [c.rank() as f64, 1.0];
            c.sum(&mut x);
            let m = c.max(c.rank() as f64 * 1.5);
            let b = c.broadcast(100 + c.rank() as u64);
            let g = c.gather(&[c.rank() as u8; 3]);
            c.barrier();
            // Twice in a row: the slots are reused safely.
            let mut y = [2.0];
            c.sum(&mut y);
            (x, m, b, g, y[0])
        });
        for (rank, (x, m, b, g, y)) in got.into_iter().enumerate() {
            assert_eq!(x, [10.0, 5.0]);
            assert_eq!((m, b, y), (6.0, 100, 10.0));
            if rank == 0 {
                let want: Vec<Vec<u8>> = (0..5).map(|r| vec![r as u8; 3]).collect();
                assert_eq!(g, Some(want));
            } else {
                assert_eq!(g, None);
            }
        }
    }

    #[test]
    fn sums_are_added_in_rank_order() {
        // 1e16 + 1 - 1e16 depends on the order: rank order gives 0, and
        // every rank gets the same bits.
        let got = on_ranks(3, |c| {
            let mut x = [[1e16, 1.0, -1e16][c.rank()]];
            c.sum(&mut x);
            x[0].to_bits()
        });
        assert_eq!(got, vec![0.0f64.to_bits(); 3]);
    }

    #[test]
    fn halo_steps_pass_values_both_ways() {
        let got = on_ranks(3, |c| {
            let r = c.rank();
            let peers = [r.checked_sub(1), (r + 1 < 3).then_some(r + 1)];
            let send = [vec![r as f32; 4], vec![10.0 + r as f32; 4]];
            let (mut lo, mut hi) = (vec![-1.0; 4], vec![-1.0; 4]);
            for tag in 0..3 {
                c.exchange(HaloSwap {
                    peers,
                    send: [&send[0], &send[1]],
                    recv: [&mut lo, &mut hi],
                    tag,
                })
                .unwrap();
            }
            (lo[0], hi[0])
        });
        // From below: the lower rank's upward message; from above: the
        // upper rank's downward one.
        assert_eq!(got, vec![(-1.0, 1.0), (10.0, 2.0), (11.0, -1.0)]);
    }

    #[test]
    fn point_to_point_bytes_arrive_in_order() {
        let got = on_ranks(2, |c| {
            let mut buf = [0u8; 2];
            if c.rank() == 0 {
                c.send(1, &[1, 2]);
                c.send(1, &[3, 4]);
                c.recv(1, &mut buf);
            } else {
                c.recv(0, &mut buf);
                c.recv(0, &mut buf);
                c.send(0, &[buf[0] + buf[1], 0]);
            }
            buf
        });
        assert_eq!(got, vec![[7, 0], [3, 4]]);
    }

    #[test]
    fn a_wrong_sized_halo_message_is_an_error() {
        let got = on_ranks(2, |c| {
            let peers = if c.rank() == 0 {
                [None, Some(1)]
            } else {
                [Some(0), None]
            };
            let send = vec![1.0f32; 3 + c.rank()];
            let mut a = vec![0.0; 3];
            let mut b = vec![0.0; 3];
            c.exchange(HaloSwap {
                peers,
                send: [&send, &send],
                recv: [&mut a, &mut b],
                tag: 0,
            })
            .is_ok()
        });
        // Rank 0 receives 4 values into a buffer of 3.
        assert_eq!(got, vec![false, true]);
    }
}
