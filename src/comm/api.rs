//! The [`Comm`] trait: what the driver and the tools need from the job's
//! ranks, whatever carries their messages.

use crate::error::Result;
use serde::{Deserialize, Serialize};

/// How the job's ranks were started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Launch {
    /// One process, one rank.
    #[default]
    Single,
    /// MPI processes started by a launcher (mpirun, srun).
    Mpi,
    /// Threads of one process (`--local-ranks`).
    Threads,
}

/// What one step of a halo exchange swaps with the neighbours
/// ([`Comm::exchange`]), by side (below, above).
pub struct HaloSwap<'a> {
    /// The neighbours; a `None` side is skipped.
    pub peers: [Option<usize>; 2],
    /// What goes to each neighbour.
    pub send: [&'a [f32]; 2],
    /// Where each neighbour's message lands.
    pub recv: [&'a mut [f32]; 2],
    /// Distinguishes the exchange's steps.
    pub tag: i32,
}

impl HaloSwap<'_> {
    /// The tags of the step's messages by side: `(send, receive)`. A
    /// message travelling upwards carries `2*tag`, downwards `2*tag+1`,
    /// so what a rank receives from below was sent upwards by that rank;
    /// every transport keeps this rule.
    pub fn tags(&self) -> ([i32; 2], [i32; 2]) {
        let tag = self.tag;
        ([2 * tag + 1, 2 * tag], [2 * tag, 2 * tag + 1])
    }
}

/// Operations the solver and the benchmarks need from the job's ranks. All
/// collective methods must be called by every rank in the same order.
pub trait Comm {
    /// This rank's number, `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks in the job.
    fn size(&self) -> usize;
    /// This rank's number among the ranks of its node.
    fn node_rank(&self) -> usize;
    /// Number of ranks on this rank's node.
    fn node_size(&self) -> usize;
    /// Blocks until every rank has arrived.
    fn barrier(&self);
    /// Element-wise sum of `x` over all ranks, in place on every rank.
    fn sum(&self, x: &mut [f64]);
    /// Maximum of `x` over all ranks, on every rank.
    fn max(&self, x: f64) -> f64;
    /// Rank 0's value of `x`, on every rank.
    fn broadcast(&self, x: u64) -> u64;
    /// Every rank's `local` bytes, in rank order, on rank 0 (`None` elsewhere).
    fn gather(&self, local: &[u8]) -> Option<Vec<Vec<u8>>>;
    /// Rank 0's `data` on every rank (what the others pass is ignored).
    fn broadcast_bytes(&self, data: &[u8]) -> Vec<u8>;
    /// One step of a halo exchange: receive from both of the step's peers
    /// into its `recv`, send its `send` to them, then wait for all four
    /// transfers.
    fn exchange(&self, step: HaloSwap<'_>) -> Result<()>;
    /// Sends `buf` to `peer` (blocking); used by the point-to-point benchmark.
    fn send(&self, peer: usize, buf: &[u8]);
    /// Receives exactly `buf.len()` bytes from `peer` (blocking).
    fn recv(&self, peer: usize, buf: &mut [u8]);
    /// Ends the whole job at once with `code`; never returns.
    fn abort(&self, code: i32) -> !;
    /// Tells `line` on stderr and ends the whole job with `code`. Where
    /// several ranks share one stderr (in-process ranks), only the first
    /// rank to fail speaks: the others, failing at the same moment for the
    /// same cause, would only repeat it.
    fn fail(&self, line: &str, code: i32) -> ! {
        crate::error::print_line(line);
        self.abort(code)
    }
    /// Name of the host this rank runs on.
    fn host(&self) -> String;
    /// The MPI library's version string, or `None` without MPI.
    fn library(&self) -> Option<String>;
    /// How the ranks were started.
    fn launch(&self) -> Launch;
}
