//! The MPI communicator (rsmpi). Also installs a panic hook that aborts the
//! whole job, because a panic on one rank would otherwise leave the others
//! waiting forever in their next collective, and turns a failed MPI start
//! into exit code 2 (the library's own exit code, 1, means a wrong answer
//! here).

use super::api::{Comm, HaloSwap, Launch};
use crate::error::{Error, Result};
use mpi::Threading;
use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A communicator over `MPI_COMM_WORLD`.
pub struct MpiComm {
    // Field order matters: communicators are freed before MPI is finalised
    // when the universe drops.
    world: SimpleCommunicator,
    node_rank: usize,
    node_size: usize,
    _universe: Universe,
}

/// Set while `MPI_Init` runs: an exit then is a failed start.
static STARTING: AtomicBool = AtomicBool::new(false);

/// The one line a failed MPI start gets, after the library's own messages.
const START_FAILED: &str = "himeno: error: MPI could not start (the MPI library's messages \
    above say why): check the MPI installation and the launcher's and OMPI_MCA_*/MPICH_* \
    settings";

/// Ends the process with `status`, except that a non-zero exit while MPI
/// starts becomes exit code 2 with one `himeno:` line.
///
/// Open MPI ends a process whose `MPI_Init` fails (a missing component, no
/// launcher to talk to) with `_exit(code)` where `code` is an MPI error
/// code, usually 1: the exit code this program reserves for a wrong
/// answer. Neither a return value nor an error handler can be had from
/// `MPI_Init` in Open MPI 4. Defined here, this function is the `_exit`
/// that the MPI libraries call: an executable's own symbols come first in
/// the dynamic linker's search order. Other callers (the C library's
/// `exit` uses its internal one) are unaffected, and every call ends the
/// process exactly as the C library's `_exit` does (`exit_group`).
#[unsafe(no_mangle)]
pub extern "C" fn _exit(status: libc::c_int) -> ! {
    let status = if status != 0 && STARTING.load(Ordering::SeqCst) {
        // Every rank that gets here tells it: under mpirun the first rank
        // to fail has the others killed, and that need not be rank 0.
        crate::error::print_line(START_FAILED);
        2
    } else {
        status
    };
    // SAFETY: exit_group ends every thread of the process; it returns not.
    unsafe {
        libc::syscall(libc::SYS_exit_group, libc::c_long::from(status));
    }
    std::process::abort()
}

/// Run by `exit` during a failed start, for MPI libraries that end with
/// `exit` rather than `_exit`: the same line and exit code 2.
extern "C" fn exit_while_starting() {
    if STARTING.load(Ordering::SeqCst) {
        _exit(1);
    }
}

/// Initialises MPI (threads funnelled: only the main thread calls MPI) and
/// installs the abort-on-panic hook. A failure inside `MPI_Init`, which the
/// library answers by ending the process, ends it with exit code 2 (see
/// [`_exit`]). Under `mpirun`, Open MPI's launcher reports such a failure
/// with its own exit code (1), whatever the ranks' are.
pub fn init() -> Result<Box<dyn Comm>> {
    STARTING.store(true, Ordering::SeqCst);
    // SAFETY: registers a plain function; atexit only fails when full.
    unsafe {
        libc::atexit(exit_while_starting);
    }
    let started = mpi::initialize_with_threading(Threading::Funneled);
    STARTING.store(false, Ordering::SeqCst);
    let (universe, _level) =
        started.ok_or_else(|| Error::runtime("MPI was already initialised"))?;
    let world = universe.world();
    // A launcher whose process-management interface the MPI library does
    // not speak (MPICH under `srun --mpi=pmix`) starts N singletons that
    // would each run the whole benchmark and append a record.
    if let Some(n) = super::launcher::launcher_size().filter(|&n| n > 1 && world.size() == 1) {
        return Err(Error::usage(format!(
            "the launcher started {n} ranks but MPI sees each as a job of 1: the launcher \
             and this MPI library do not talk; under srun pick the plugin the library \
             supports (Open MPI: --mpi=pmix, MPICH: --mpi=pmi2), or use its own mpirun"
        )));
    }
    let node = world.split_shared(world.rank());
    let node_rank = node.rank() as usize;
    let node_size = node.size() as usize;
    install_abort_hook(world.rank());
    // A job of one has no launcher's bookkeeping to get right, and Open
    // MPI would print its MPI_ABORT box for a plain run.
    if world.size() > 1 {
        crate::signals::set_watchdog_end(Some(abort_world));
    }
    Ok(Box::new(MpiComm {
        world,
        node_rank,
        node_size,
        _universe: universe,
    }))
}

/// Ends the whole MPI job with `code` (the stop watchdog's way out while
/// MPI runs: see `signals::set_watchdog_end`).
fn abort_world(code: i32) -> ! {
    abort_when_read(&SimpleCommunicator::world(), code)
}

/// Longest wait for the launcher to read what a rank wrote on stderr
/// before it aborts the job.
const STDERR_READ: Duration = Duration::from_secs(2);

/// Ends the whole job with `code` once the launcher has read what this
/// rank last wrote on stderr (why it ends it): `MPI_Abort` has the
/// launcher kill every rank and exit, and MPICH's launcher, on a loaded
/// machine, was seen to exit before forwarding a line still in the pipe
/// (the job failed with an empty stderr).
fn abort_when_read(world: &SimpleCommunicator, code: i32) -> ! {
    crate::error::wait_until_read(libc::STDERR_FILENO, STDERR_READ);
    world.abort(code)
}

impl Drop for MpiComm {
    /// MPI is finalised when the fields drop, after this: from then on the
    /// watchdog must not call into it.
    fn drop(&mut self) {
        crate::signals::set_watchdog_end(None);
    }
}

fn install_abort_hook(rank: i32) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        crate::error::print_line(&format!("himeno: rank {rank} panicked; aborting all ranks"));
        default(info);
        abort_when_read(&SimpleCommunicator::world(), 2);
    }));
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn node_rank(&self) -> usize {
        self.node_rank
    }

    fn node_size(&self) -> usize {
        self.node_size
    }

    fn barrier(&self) {
        self.world.barrier();
    }

    fn sum(&self, x: &mut [f64]) {
        let local = x.to_vec();
        self.world
            .all_reduce_into(&local[..], x, SystemOperation::sum());
    }

    fn max(&self, x: f64) -> f64 {
        let mut out = 0.0;
        self.world
            .all_reduce_into(&x, &mut out, SystemOperation::max());
        out
    }

    fn broadcast(&self, x: u64) -> u64 {
        let mut v = x;
        self.world.process_at_rank(0).broadcast_into(&mut v);
        v
    }

    fn broadcast_bytes(&self, data: &[u8]) -> Vec<u8> {
        let len = self.broadcast(data.len() as u64) as usize;
        let mut buf = if self.world.rank() == 0 {
            data.to_vec()
        } else {
            vec![0u8; len]
        };
        if len > 0 {
            self.world.process_at_rank(0).broadcast_into(&mut buf[..]);
        }
        buf
    }

    fn gather(&self, local: &[u8]) -> Option<Vec<Vec<u8>>> {
        let root = self.world.process_at_rank(0);
        let len = local.len() as i32;
        if self.world.rank() == 0 {
            let mut counts = vec![0i32; self.size()];
            root.gather_into_root(&len, &mut counts[..]);
            let displs: Vec<i32> = counts
                .iter()
                .scan(0, |acc, &c| {
                    let d = *acc;
                    *acc += c;
                    Some(d)
                })
                .collect();
            let mut all = vec![0u8; counts.iter().map(|&c| c as usize).sum()];
            {
                let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
                root.gather_varcount_into_root(local, &mut part);
            }
            let mut out = Vec::with_capacity(counts.len());
            for (c, d) in counts.iter().zip(&displs) {
                out.push(all[*d as usize..(*d + *c) as usize].to_vec());
            }
            Some(out)
        } else {
            root.gather_into(&len);
            root.gather_varcount_into(local);
            None
        }
    }

    fn exchange(&self, step: HaloSwap<'_>) -> Result<()> {
        let ([send_lo_tag, send_hi_tag], [recv_lo_tag, recv_hi_tag]) = step.tags();
        let HaloSwap {
            peers,
            send,
            recv: [recv_lo, recv_hi],
            ..
        } = step;
        // All four requests live in one scope: a scope per message would wait
        // on each send before the matching receive is posted and deadlock
        // past the eager limit.
        mpi::request::scope(|scope| {
            let mut reqs = Vec::with_capacity(4);
            if let Some(lo) = peers[0] {
                let p = self.world.process_at_rank(lo as i32);
                reqs.push(p.immediate_receive_into_with_tag(scope, recv_lo, recv_lo_tag));
            }
            if let Some(hi) = peers[1] {
                let p = self.world.process_at_rank(hi as i32);
                reqs.push(p.immediate_receive_into_with_tag(scope, recv_hi, recv_hi_tag));
            }
            let mut sends = Vec::with_capacity(2);
            if let Some(lo) = peers[0] {
                let p = self.world.process_at_rank(lo as i32);
                sends.push(p.immediate_send_with_tag(scope, send[0], send_lo_tag));
            }
            if let Some(hi) = peers[1] {
                let p = self.world.process_at_rank(hi as i32);
                sends.push(p.immediate_send_with_tag(scope, send[1], send_hi_tag));
            }
            for r in reqs {
                r.wait();
            }
            for s in sends {
                s.wait();
            }
        });
        Ok(())
    }

    fn send(&self, peer: usize, buf: &[u8]) {
        self.world.process_at_rank(peer as i32).send(buf);
    }

    fn recv(&self, peer: usize, buf: &mut [u8]) {
        self.world.process_at_rank(peer as i32).receive_into(buf);
    }

    fn abort(&self, code: i32) -> ! {
        abort_when_read(&self.world, code)
    }

    fn host(&self) -> String {
        mpi::environment::processor_name().unwrap_or_else(|_| super::launcher::hostname())
    }

    fn library(&self) -> Option<String> {
        mpi::environment::library_version()
            .ok()
            // The C string's terminating NUL can come back inside the string.
            .map(|s| {
                s.lines()
                    .next()
                    .unwrap_or("")
                    .trim_matches(|c: char| c == '\0' || c.is_whitespace())
                    .to_string()
            })
    }

    fn launch(&self) -> Launch {
        Launch::Mpi
    }
}
