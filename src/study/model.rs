//! The performance model: time per iteration and the compute/communication
//! split of a run, predicted from a single-rank compute rate and the
//! network's point-to-point latency and bandwidth.
//!
//! Per rank: compute = owned points x 34 flops / rate. Communication follows
//! the halo schedule (`Block::halo_faces`): one step per split dimension (k,
//! then j, then i), each sending one message per existing neighbour, of the
//! full ghost-inclusive face (`Face::len`), costing latency + bytes /
//! bandwidth.
//! The step's messages are counted one after the other (a conservative
//! choice: the ranks' links are shared). The gosa allreduce costs
//! ceil(log2(ranks)) latencies. The job's time is that of its slowest rank.
//!
//! With temporal blocking (`T` sweeps per exchange) the faces are `T`
//! layers deep and exchanged, with one allreduce, once every `T`
//! iterations: per iteration `1/T` of the messages and latencies, the same
//! bytes. Sweep `s` of a block also updates `T - s` ghost layers on each
//! side with a neighbour (redundant work, counted as compute at the same
//! rate). The rate given is the single-rank rate of the sweep being
//! modelled (a temporal run's own rate for `T` > 1).

use crate::bench::pingpong::PingpongReport;
use crate::error::{Error, Result};
use crate::grid::decomp::{Block, ProcGrid};
use crate::grid::{FLOPS_PER_POINT, Grid};
use serde::Serialize;
use std::path::Path;

/// Point-to-point network parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Network {
    /// One-way latency of a small message, in seconds.
    pub latency_s: f64,
    /// Bandwidth of large messages, in bytes per second.
    pub bandwidth_bytes_per_s: f64,
}

/// A predicted iteration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    /// Rank with the longest predicted iteration.
    pub slowest_rank: usize,
    /// Its compute seconds per iteration.
    pub compute_s: f64,
    /// Its halo-exchange seconds per iteration.
    pub halo_s: f64,
    /// Allreduce seconds per iteration.
    pub allreduce_s: f64,
    /// Seconds per iteration (slowest rank).
    pub total_s: f64,
    /// Fraction of the iteration spent computing.
    pub compute_share: f64,
    /// Fraction spent communicating (halo and allreduce).
    pub comm_share: f64,
    /// Predicted MFLOPS of the whole job.
    pub mflops: f64,
    /// Sweeps per halo exchange.
    pub temporal: usize,
    /// Halo messages the slowest rank sends per iteration.
    pub messages_per_iteration: f64,
    /// Halo bytes the slowest rank sends per iteration.
    pub halo_bytes_per_iteration: f64,
    /// Points the slowest rank updates beyond its own, in its ghost layers,
    /// as a fraction of its own.
    pub redundant_fraction: f64,
}

/// Predicts one iteration of `grid` on `procs` from a single-rank compute
/// rate in MFLOPS and the network parameters.
pub fn predict(grid: &Grid, procs: &ProcGrid, rate_mflops: f64, net: &Network) -> Prediction {
    predict_temporal(grid, procs, rate_mflops, net, 1)
}

/// As [`predict`], with `temporal` sweeps per halo exchange (1 is the
/// classic iteration).
pub fn predict_temporal(
    grid: &Grid,
    procs: &ProcGrid,
    rate_mflops: f64,
    net: &Network,
    temporal: usize,
) -> Prediction {
    let t = temporal.max(1);
    let ranks = procs.ranks();
    let allreduce_s = if ranks > 1 {
        (ranks as f64).log2().ceil() * net.latency_s / t as f64
    } else {
        0.0
    };
    let mut best: Option<Prediction> = None;
    for rank in 0..ranks {
        let block = Block::of(grid, procs, rank).with_depth(t);
        let updated = updated_points(&block, t);
        let own = block.points() as f64 * t as f64;
        let compute_s = updated * FLOPS_PER_POINT / (rate_mflops * 1e6) / t as f64;
        let dims = block.local_dims();
        let faces: Vec<f64> = block
            .halo_faces()
            .map(|(face, _)| (face.len(dims) * t * 4) as f64)
            .collect();
        let halo_s: f64 = faces
            .iter()
            .map(|bytes| net.latency_s + bytes / net.bandwidth_bytes_per_s)
            .sum::<f64>()
            / t as f64;
        let total_s = compute_s + halo_s + allreduce_s;
        if best.is_none_or(|b| total_s > b.total_s) {
            best = Some(Prediction {
                slowest_rank: rank,
                compute_s,
                halo_s,
                allreduce_s,
                total_s,
                compute_share: compute_s / total_s,
                comm_share: (halo_s + allreduce_s) / total_s,
                mflops: grid.interior_points() as f64 * FLOPS_PER_POINT / total_s / 1e6,
                temporal: t,
                messages_per_iteration: faces.len() as f64 / t as f64,
                halo_bytes_per_iteration: faces.iter().sum::<f64>() / t as f64,
                redundant_fraction: updated / own - 1.0,
            });
        }
    }
    best.expect("a process grid has at least one rank")
}

/// Points `block` updates in one exchange's `t` sweeps: sweep `s` its own
/// and `t - s` more layers on each side with a neighbour.
fn updated_points(block: &Block, t: usize) -> f64 {
    (1..=t)
        .map(|s| {
            (0..3)
                .map(|d| {
                    let grow = (0..2)
                        .filter(|&side| block.neighbours[d][side].is_some())
                        .count();
                    (block.n[d] + grow * (t - s)) as f64
                })
                .product::<f64>()
        })
        .sum()
}

/// Checks a compute rate given by the user.
pub fn check_rate(rate: f64, what: &str) -> Result<f64> {
    if rate.is_finite() && rate > 0.0 {
        Ok(rate)
    } else {
        Err(Error::usage(format!(
            "{what} {rate} must be a rate above 0 in MFLOPS"
        )))
    }
}

/// Builds network parameters from a latency in microseconds and a bandwidth
/// in GB/s (1e9 bytes), checking both.
pub fn network(latency_us: f64, bandwidth_gbs: f64) -> Result<Network> {
    if !(latency_us.is_finite() && latency_us >= 0.0) {
        return Err(Error::usage(format!(
            "latency {latency_us} us must be a time of at least 0"
        )));
    }
    if !(bandwidth_gbs.is_finite() && bandwidth_gbs > 0.0) {
        return Err(Error::usage(format!(
            "bandwidth {bandwidth_gbs} GB/s must be above 0"
        )));
    }
    Ok(Network {
        latency_s: latency_us * 1e-6,
        bandwidth_bytes_per_s: bandwidth_gbs * 1e9,
    })
}

/// The network parameters of a ping-pong report: the mean over pairs of
/// the smallest message's latency and of the best bandwidth.
pub fn network_of(report: &PingpongReport) -> Result<Network> {
    network(report.latency_us, report.bandwidth_gbytes_per_s)
}

/// Reads a ping-pong JSON report (`himeno bench pingpong --format json`)
/// and returns its network parameters.
pub fn network_from_file(path: &Path) -> Result<Network> {
    let how = "write one with `himeno bench pingpong --format json > FILE`";
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::usage(format!(
            "cannot read ping-pong file {}: {e}; {how}",
            path.display()
        ))
    })?;
    let rep: PingpongReport = serde_json::from_str(&text).map_err(|e| {
        Error::usage(format!(
            "{} is not a ping-pong JSON report ({e}); {how}",
            path.display()
        ))
    })?;
    network_of(&rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_two_ranks() {
        // 12^3 grid: 10^3 interior points, split 2x1x1 into 5x10x10 blocks
        // with local extents 7x12x12. Each rank has one neighbour in i; the
        // face holds 12*12 = 144 values = 576 bytes.
        let grid = Grid::new([12, 12, 12]).unwrap();
        let procs = ProcGrid { p: [2, 1, 1] };
        let net = network(1.0, 1.0).unwrap(); // 1 us, 1e9 B/s
        let p = predict(&grid, &procs, 34.0, &net);
        // 500 points * 34 flops / 34e6 flop/s = 500 us.
        assert!((p.compute_s - 500e-6).abs() < 1e-15);
        assert!((p.halo_s - (1e-6 + 576e-9)).abs() < 1e-15);
        assert!((p.allreduce_s - 1e-6).abs() < 1e-15);
        assert!((p.total_s - 502.576e-6).abs() < 1e-12);
        assert!((p.compute_share + p.comm_share - 1.0).abs() < 1e-12);
    }

    #[test]
    fn middle_rank_is_slowest() {
        // 3 ranks along i share 9 interior planes evenly; the middle one
        // has two neighbours.
        let grid = Grid::new([11, 12, 12]).unwrap();
        let p = predict(
            &grid,
            &ProcGrid { p: [3, 1, 1] },
            34.0,
            &network(10.0, 1.0).unwrap(),
        );
        assert_eq!(p.slowest_rank, 1);
        assert!((p.allreduce_s - 2.0 * 10e-6).abs() < 1e-15);
    }

    #[test]
    fn one_rank_has_no_communication() {
        let grid = Grid::new([12, 12, 12]).unwrap();
        let p = predict(
            &grid,
            &ProcGrid { p: [1, 1, 1] },
            34.0,
            &network(5.0, 1.0).unwrap(),
        );
        assert_eq!((p.halo_s, p.allreduce_s, p.comm_share), (0.0, 0.0, 0.0));
        assert!((p.mflops - 34.0).abs() < 1e-9);
        assert!(network(-1.0, 1.0).is_err() && network(1.0, 0.0).is_err());
    }

    #[test]
    fn temporal_blocking_divides_messages_and_adds_ghost_updates() {
        // The two-rank case above with T = 2: faces two layers deep every
        // second iteration, and the first sweep of each pair also updates
        // the ghost layer next to the neighbour (one 10x10 plane more).
        let grid = Grid::new([12, 12, 12]).unwrap();
        let procs = ProcGrid { p: [2, 1, 1] };
        let net = network(1.0, 1.0).unwrap();
        let one = predict(&grid, &procs, 34.0, &net);
        let two = predict_temporal(&grid, &procs, 34.0, &net, 2);
        assert_eq!((one.temporal, two.temporal), (1, 2));
        assert_eq!(
            (one.messages_per_iteration, two.messages_per_iteration),
            (1.0, 0.5)
        );
        // One layer: 12*12 values; two layers of a block 8 deep in i: 2*12*12.
        assert_eq!(one.halo_bytes_per_iteration, 576.0);
        assert_eq!(two.halo_bytes_per_iteration, 576.0);
        assert_eq!(one.redundant_fraction, 0.0);
        // 600 + 500 points per two sweeps over 1000 own.
        assert!((two.redundant_fraction - 0.1).abs() < 1e-12);
        assert!((two.compute_s - 550e-6).abs() < 1e-15);
        assert!((two.halo_s - (1e-6 + 1152e-9) / 2.0).abs() < 1e-15);
        assert!((two.allreduce_s - 0.5e-6).abs() < 1e-15);
    }

    #[test]
    fn a_pingpong_report_gives_the_network() {
        let r = crate::bench::pingpong::summarise(2, vec!["h".into(); 2], Vec::new());
        assert!(network_of(&r).is_err(), "no pair: no bandwidth");
        let r = PingpongReport {
            latency_us: 2.0,
            bandwidth_gbytes_per_s: 6.0,
            ..r
        };
        let net = network_of(&r).unwrap();
        assert_eq!((net.latency_s, net.bandwidth_bytes_per_s), (2e-6, 6e9));
    }
}
