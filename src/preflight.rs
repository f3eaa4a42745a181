//! Memory preflight: before any rank allocates its fields, estimate the host
//! memory every rank needs and refuse the run when the ranks of a node
//! together need more than the node has available.
//!
//! Without this, a too-large grid dies in the allocator (an abort with a
//! backtrace on one rank, or the OOM killer taking the node down) instead of
//! a clear message. Two limits are checked: what the ranks of a node need
//! together against the node's available memory (`MemAvailable`, the
//! cgroup), and what each rank needs against its own process limits
//! (`ulimit -v`/`-d`), which refuse an allocation long before the node runs
//! out. The check is collective: every rank sends its need, its node's
//! available memory and its own room to rank 0, which decides for the whole
//! job and broadcasts the decision, so no rank is left waiting. The buffers
//! themselves are then allocated fallibly (`crate::machine::alloc`), so a
//! refusal the estimate missed is still an error, not an abort.
//!
//! The estimate is no copy of anyone's allocation plan: each allocating
//! module states its own [`Footprint`] (the backend its fields and
//! buffers, the halo its staging, the benches their arrays), worked out
//! from the same sizes it allocates, and this module only adds and
//! decides. In-process ranks (`--local-ranks`) share one process, so their
//! address space is held against that process's limits together.

use crate::backend;
use crate::comm::{self, Comm};
use crate::config::RunConfig;
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::grid::decomp::Block;
use crate::grid::fields::FIELDS;
use crate::machine::alloc::process_room;
use crate::machine::memory::{self, Footprint, GIB};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Address space a process maps beyond the buffers counted, compared with
/// its own limits only: the main thread's stack, libraries loaded later
/// (an MPI library's transports, the CUDA driver), the allocator's arenas.
const PROCESS_MARGIN: u128 = 128 << 20;

/// Host memory the driver allocates on this rank beside the backend: the
/// thread that runs it, the halo staging buffers (a send and a receive
/// buffer per face with a neighbour, `block.depth` layers deep) and the
/// messages in flight (in-process ranks copy each one; MPI's shared-memory
/// transport holds a buffer of its own), the copy of `p` read back for the
/// fingerprint, and on rank 0 with `verify_grid` the reference run's own
/// fields over the whole grid.
pub fn driver_footprint(block: &Block, verify_grid: Option<&Grid>) -> Footprint {
    let dims = block.local_dims();
    let local: usize = dims.iter().product();
    let staging: Footprint = block
        .halo_faces()
        .map(|(face, _)| Footprint::vec::<f32>(face.len(dims) * block.depth).times(3))
        .sum();
    let reference = verify_grid.map_or_else(Footprint::default, |g| {
        Footprint::vec::<f32>(g.n.iter().product()).times(FIELDS)
    });
    Footprint::rank_thread() + Footprint::vec::<f32>(local) + staging + reference
}

/// Host memory one rank of the run `cfg` needs for `block` with the run's
/// backend: what the backend states for itself and what the driver
/// allocates beside it.
pub fn rank_footprint(cfg: &RunConfig, block: &Block, verify_grid: Option<&Grid>) -> Footprint {
    backend::host_footprint(cfg, block) + driver_footprint(block, verify_grid)
}

/// A figure with where it came from.
type Sourced = (u128, String);

/// One rank's report to rank 0: its host and process, its need, the
/// available memory of its node and the room its process's own limits
/// leave, each with its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RankReport {
    host: String,
    pid: u32,
    resident: u128,
    mapped: u128,
    available: Option<Sourced>,
    room: Option<Sourced>,
}

impl RankReport {
    /// This rank's report of `need`.
    fn mine(host: String, need: Footprint) -> RankReport {
        RankReport {
            host,
            pid: std::process::id(),
            resident: need.resident,
            mapped: need.mapped,
            available: memory::available().map(|(b, s)| (b, s.to_string())),
            room: process_room(),
        }
    }
}

/// The ranks of one node, or of one process, with what they need together
/// and the smallest figure they read of what is offered.
#[derive(Debug, Default, Clone, PartialEq)]
struct Group {
    ranks: Vec<usize>,
    need: u128,
    offered: Option<Sourced>,
}

impl Group {
    fn add(&mut self, rank: usize, need: u128, offered: &Option<Sourced>) {
        self.ranks.push(rank);
        self.need = self.need.saturating_add(need);
        // Ranks of one node read the same figures a moment apart; the
        // smallest is the safe one.
        if let Some(a) = offered
            && self.offered.as_ref().is_none_or(|b| a.0 < b.0)
        {
            self.offered = Some(a.clone());
        }
    }
}

/// Decides, from every rank's report, whether `what` (e.g. "grid 9x9x9")
/// fits; the error names the first process or node that does not.
fn judge_fit(what: &str, reports: &[RankReport]) -> Result<()> {
    let gib = |b: u128| b as f64 / GIB;
    let mut processes: BTreeMap<(&str, u32), Group> = BTreeMap::new();
    let mut nodes: BTreeMap<&str, Group> = BTreeMap::new();
    for (rank, r) in reports.iter().enumerate() {
        processes
            .entry((&r.host, r.pid))
            .or_default()
            .add(rank, r.mapped, &r.room);
        nodes
            .entry(&r.host)
            .or_default()
            .add(rank, r.resident, &r.available);
    }
    for ((host, _), p) in &processes {
        if let Some((room, source)) = &p.offered
            && p.need + PROCESS_MARGIN > *room
        {
            let whom = match &p.ranks[..] {
                [one] => format!("rank {one}"),
                [first, ..] => format!("the {} ranks of rank {first}'s process", p.ranks.len()),
                [] => unreachable!("a group has a rank"),
            };
            return Err(Error::usage(format!(
                "{what} needs {:.2} GiB of address space in {whom} (host {host}), but its \
                 process limits leave only {:.2} GiB ({source}): raise the limit (e.g. \
                 `ulimit -v unlimited` in the job script), use a smaller problem, or spread \
                 it over more ranks",
                gib(p.need + PROCESS_MARGIN),
                gib(*room)
            )));
        }
    }
    for (host, n) in &nodes {
        if let Some((avail, source)) = &n.offered
            && n.need > *avail
        {
            return Err(Error::usage(format!(
                "{what} needs {:.2} GiB of memory on host {host} ({} rank(s)), but only \
                 {:.2} GiB is available ({source}): use a smaller problem (--grid/--size), \
                 fewer ranks or threads per node, or spread the ranks over more nodes",
                gib(n.need),
                n.ranks.len(),
                gib(*avail)
            )));
        }
    }
    Ok(())
}

/// Checks, collectively, that every node has the memory its ranks need for
/// `block` under `cfg` with the run's backend, and for `apart`, memory the
/// rank uses only while the backend's is freed (the quick stream's arrays,
/// measured after the solver gave its fields back), and that every rank
/// can write its checkpoint. Call it before the backend allocates; returns
/// this rank's need.
pub fn check(
    cfg: &RunConfig,
    block: &Block,
    apart: Option<Footprint>,
    comm: &dyn Comm,
) -> Result<Footprint> {
    let need = rank_need(cfg, block, apart, comm.rank());
    if let Some(c) = &cfg.checkpoint {
        let bytes = crate::checkpoint::rankfile::file_bytes(block);
        check_checkpoint_dir(&c.dir, bytes, comm)?;
    }
    check_need(&format!("grid {}", cfg.grid()), need, comm)?;
    Ok(need)
}

/// Everything rank `rank` of the run `cfg` holds at once for `block`
/// ([`check`] counts it): its backend and driver, a checkpoint's copy of
/// `p`, or `apart` where that is more.
pub fn rank_need(
    cfg: &RunConfig,
    block: &Block,
    apart: Option<Footprint>,
    rank: usize,
) -> Footprint {
    let grid = cfg.grid();
    // Rank 0 runs the reference kernel over the whole grid when asked to
    // verify and no known answer exists; counting it always (when asked)
    // keeps the check independent of the iteration count.
    // A restart's checkpoint may be checked by a reference run of its own
    // (`verify::after_rehearsal`), on grids small enough for it.
    let restart_check = cfg.checkpoint.as_ref().is_some_and(|c| c.restart.is_some())
        && crate::verify::reference_affordable(&grid, 1);
    let verify_grid = ((cfg.verify || restart_check) && rank == 0).then_some(&grid);
    let need = rank_footprint(cfg, block, verify_grid)
        + match &cfg.checkpoint {
            // A checkpoint's owned points of `p` on their way to or from
            // the rank's file (a restart holds them from the check of its
            // file until the timed loop starts).
            Some(_) => Footprint::vec::<f32>(block.points() as usize),
            None => Footprint::default(),
        };
    let apart = apart.unwrap_or_default();
    Footprint {
        resident: need.resident.max(apart.resident),
        mapped: need.mapped.max(apart.mapped),
    }
}

/// Whether, collectively, every node has room for `need` (this rank's)
/// and every process's limits allow it: [`check_need`]'s test, as an
/// answer instead of a refusal, for a choice that may do without it
/// (`--temporal auto`'s deeper candidates).
pub fn fits(need: Footprint, comm: &dyn Comm) -> Result<bool> {
    let mine = RankReport::mine(comm.host(), need);
    comm::decide(comm, "the memory of a candidate", &mine, |reports| {
        Ok(judge_fit("", &reports).is_ok())
    })
}

/// Checks, collectively, that every node and process also has room for
/// the `--trace` recorders of `bound` beside `need` (this rank's need for
/// the run itself); returns the two together.
pub fn check_trace(
    cfg: &RunConfig,
    need: Footprint,
    bound: crate::timeline::Bound,
    comm: &dyn Comm,
) -> Result<Footprint> {
    let need = need + bound.footprint(comm.rank() == 0);
    let what = format!(
        "grid {} with its --trace (fewer events: a smaller --trace-keep)",
        cfg.grid()
    );
    check_need(&what, need, comm)?;
    Ok(need)
}

/// Checks, collectively, that every rank can write its file of `bytes`
/// into the checkpoint folder `dir`, so that a folder that cannot take
/// them is found now rather than at the first checkpoint, an hour into
/// the run.
pub fn check_checkpoint_dir(dir: &Path, bytes: u64, comm: &dyn Comm) -> Result<()> {
    let local = crate::checkpoint::store::check_writable(dir, bytes);
    crate::comm::agree(comm, local, |()| Vec::new())
}

/// Checks, collectively, that every node has room for `need` (this rank's
/// need) for each of its ranks doing `what`, and that each process's own
/// limits allow its ranks' needs together.
pub fn check_need(what: &str, need: Footprint, comm: &dyn Comm) -> Result<()> {
    let mine = RankReport::mine(comm.host(), need);
    comm::decide(comm, "the memory", &mine, |reports| {
        judge_fit(what, &reports)
    })?;
    tracing::info!(
        need_gib = need.resident as f64 / GIB,
        "memory preflight passed"
    );
    Ok(())
}

/// Checks `need` for `what` in this process alone (a tool that runs
/// outside the job's communicator).
pub fn check_local(what: &str, need: Footprint) -> Result<()> {
    judge_fit(what, &[RankReport::mine(crate::comm::hostname(), need)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::decomp::ProcGrid;

    #[test]
    fn halo_staging_is_counted_per_neighbour() {
        let g = Grid::new([12, 12, 12]).unwrap();
        let pg = ProcGrid { p: [2, 1, 1] };
        let alone = driver_footprint(&Block::of(&g, &ProcGrid { p: [1, 1, 1] }, 0), None);
        let b = Block::of(&g, &pg, 0);
        let face = Footprint::vec::<f32>(12 * 12);
        let thread = Footprint::rank_thread();
        assert_eq!(
            driver_footprint(&b, None),
            thread + Footprint::vec::<f32>(7 * 12 * 12) + face.times(3)
        );
        assert_eq!(alone, thread + Footprint::vec::<f32>(12 * 12 * 12));
        // Verification on rank 0 adds the reference run's fields.
        let with = driver_footprint(&b, Some(&g));
        assert_eq!(
            with.resident - driver_footprint(&b, None).resident,
            Footprint::vec::<f32>(12 * 12 * 12).times(FIELDS).resident
        );
    }

    #[test]
    fn huge_grids_do_not_overflow() {
        let g = Grid::new([1 << 20, 1 << 20, 1 << 20]).unwrap();
        let b = Block::of(&g, &ProcGrid { p: [1, 1, 1] }, 0);
        assert!(driver_footprint(&b, Some(&g)).resident > 1u128 << 64);
    }

    fn report(
        host: &str,
        pid: u32,
        need: u128,
        avail: Option<u128>,
        room: Option<u128>,
    ) -> RankReport {
        RankReport {
            host: host.to_string(),
            pid,
            resident: need,
            mapped: need,
            available: avail.map(|b| (b, "test".to_string())),
            room: room.map(|b| (b, "ulimit".to_string())),
        }
    }

    #[test]
    fn nodes_are_summed_and_compared_with_their_memory() {
        let fits = [
            report("a", 1, 40, Some(100), None),
            report("a", 2, 40, Some(90), None),
            report("b", 3, 80, Some(100), None),
        ];
        assert!(judge_fit("grid 3x3x3", &fits).is_ok());
        let too_much = [
            report("a", 1, 60, Some(100), None),
            report("a", 2, 60, Some(100), None),
            report("b", 3, 1, None, None),
        ];
        let err = judge_fit("grid 3x3x3", &too_much).unwrap_err();
        assert!(
            matches!(&err, Error::Usage(m) if m.contains("grid 3x3x3 needs")
                && m.contains("host a (2 rank(s))")),
            "{err}"
        );
    }

    #[test]
    fn each_process_is_held_to_its_own_limits() {
        let gib = 1u128 << 30;
        let fine = [report("a", 1, gib, Some(100 * gib), Some(2 * gib))];
        assert!(judge_fit("x", &fine).is_ok());
        // The node has room, the second rank's ulimit does not.
        let limited = [
            report("a", 1, gib, Some(100 * gib), None),
            report("a", 2, 2 * gib, Some(100 * gib), Some(2 * gib)),
        ];
        let err = judge_fit("grid 9x9x9", &limited).unwrap_err();
        assert!(
            matches!(&err, Error::Usage(m) if m.contains("rank 1") && m.contains("ulimit")),
            "{err}"
        );
        // In-process ranks share their process's limits: each fits alone,
        // together they do not.
        let shared: Vec<_> = (0..4)
            .map(|_| report("a", 7, gib / 2, Some(100 * gib), Some(gib)))
            .collect();
        let err = judge_fit("grid 9x9x9", &shared).unwrap_err();
        assert!(
            matches!(&err, Error::Usage(m) if m.contains("the 4 ranks of rank 0's process")),
            "{err}"
        );
    }

    /// A need the node cannot offer is no fit, and says nothing; a small
    /// one fits.
    #[test]
    fn a_candidate_fits_or_not_without_a_refusal() {
        let comm = crate::comm::SingleComm;
        assert!(fits(Footprint::vec::<f32>(1024), &comm).unwrap());
        let huge = Footprint {
            resident: 1 << 80,
            mapped: 1 << 80,
        };
        assert!(!fits(huge, &comm).unwrap());
    }

    #[test]
    fn reports_round_trip() {
        let r = report("n1", 9, 42, Some(7), None);
        let back: RankReport = serde_json::from_slice(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
