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
use crate::output;
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

impl Prediction {
    /// Whether every time, share and rate is a finite number.
    pub fn is_finite(&self) -> bool {
        [
            self.compute_s,
            self.halo_s,
            self.allreduce_s,
            self.total_s,
            self.compute_share,
            self.comm_share,
            self.mflops,
            self.messages_per_iteration,
            self.halo_bytes_per_iteration,
            self.redundant_fraction,
        ]
        .iter()
        .all(|v| v.is_finite())
    }
}

/// Predicts one iteration of `grid` on `procs` from a single-rank compute
/// rate in MFLOPS and the network parameters.
///
/// A rank's time depends on its coordinates only through, per dimension,
/// its block's length and whether it has a neighbour below and above. So
/// instead of every rank (10^12 of them, as typed, never returned), one
/// rank of each such kind is evaluated: per dimension the first coordinate
/// (no neighbour below), the last (none above), and the smallest inner
/// coordinate with a longer block (1) and with a shorter one (the
/// remainder `n % P`). Taking them in rank order, the first of the slowest
/// is also the lowest slowest rank of the whole grid, as a loop over every
/// rank would find it.
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
    let kinds: Vec<Vec<usize>> = (0..3)
        .map(|d| {
            let p = procs.p[d];
            let mut c = vec![0, 1, (grid.n[d] - 2) % p, p - 1];
            c.retain(|&x| x < p);
            c.sort_unstable();
            c.dedup();
            c
        })
        .collect();
    let mut best: Option<Prediction> = None;
    for &ci in &kinds[0] {
        for &cj in &kinds[1] {
            for &ck in &kinds[2] {
                let rank = procs.rank_of([ci, cj, ck]);
                let p = predict_rank(grid, procs, rank, rate_mflops, net, allreduce_s, t);
                if best.is_none_or(|b| p.total_s > b.total_s) {
                    best = Some(p);
                }
            }
        }
    }
    best.expect("a process grid has at least one rank")
}

/// The prediction for one rank (`slowest_rank` is that rank) with `t`
/// sweeps per halo exchange.
fn predict_rank(
    grid: &Grid,
    procs: &ProcGrid,
    rank: usize,
    rate_mflops: f64,
    net: &Network,
    allreduce_s: f64,
    t: usize,
) -> Prediction {
    let block = Block::of(grid, procs, rank).with_depth(t);
    let updated = updated_points(&block, t);
    let own = block.points() as f64 * t as f64;
    let compute_s = updated * FLOPS_PER_POINT / (rate_mflops * 1e6) / t as f64;
    let dims = block.local_dims();
    let faces: Vec<f64> = block
        .halo_faces()
        .map(|(face, _)| face.len(dims) as f64 * t as f64 * 4.0)
        .collect();
    // Sums start at +0: Rust's float `sum` of nothing is -0.0, which a
    // rank without neighbours printed as a halo time of "-0".
    let halo_s: f64 = faces
        .iter()
        .map(|bytes| net.latency_s + bytes / net.bandwidth_bytes_per_s)
        .fold(0.0, |a, b| a + b)
        / t as f64;
    let total_s = compute_s + halo_s + allreduce_s;
    Prediction {
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
        halo_bytes_per_iteration: faces.iter().fold(0.0, |a, b| a + b) / t as f64,
        redundant_fraction: updated / own - 1.0,
    }
}

/// Range of accepted compute rates in MFLOPS: beyond it a prediction's
/// times under- or overflow, and no machine is that slow or fast.
pub const RATE_RANGE: (f64, f64) = (1e-6, 1e15);
/// Range of accepted latencies in microseconds (up to 1000 s).
const LATENCY_RANGE_US: (f64, f64) = (0.0, 1e9);
/// Range of accepted bandwidths in GB/s.
const BANDWIDTH_RANGE_GBS: (f64, f64) = (1e-6, 1e9);

/// Whether `v` is a number within `range` (both ends included).
fn within(v: f64, range: (f64, f64)) -> bool {
    v.is_finite() && v >= range.0 && v <= range.1
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
    if within(rate, RATE_RANGE) {
        Ok(rate)
    } else {
        Err(Error::usage(format!(
            "{what} {} must be a rate in MFLOPS from {:e} to {:e}",
            output::number(rate),
            RATE_RANGE.0,
            RATE_RANGE.1
        )))
    }
}

/// Builds network parameters from a latency in microseconds and a bandwidth
/// in GB/s (1e9 bytes), checking both.
pub fn network(latency_us: f64, bandwidth_gbs: f64) -> Result<Network> {
    if !within(latency_us, LATENCY_RANGE_US) {
        return Err(Error::usage(format!(
            "latency {} us must be a time from 0 to {:e} us",
            output::number(latency_us),
            LATENCY_RANGE_US.1
        )));
    }
    if !within(bandwidth_gbs, BANDWIDTH_RANGE_GBS) {
        return Err(Error::usage(format!(
            "bandwidth {} GB/s must be from {:e} to {:e} GB/s",
            output::number(bandwidth_gbs),
            BANDWIDTH_RANGE_GBS.0,
            BANDWIDTH_RANGE_GBS.1
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

/// Largest ping-pong report read: far more than any real one (a few KiB
/// per pair), so that a wrong file (a disk image, `/dev/zero`) is refused
/// instead of read into memory.
const MAX_PINGPONG_BYTES: u64 = 64 << 20;

/// Reads a ping-pong JSON report (`himeno bench pingpong --format json`)
/// and returns its network parameters.
pub fn network_from_file(path: &Path) -> Result<Network> {
    let rep: PingpongReport = read_report(
        path,
        MAX_PINGPONG_BYTES,
        "ping-pong",
        "himeno bench pingpong --format json",
    )?;
    network_of(&rep)
}

/// Reads the JSON report of kind `kind` (as "ping-pong") that `command`
/// writes, at most `max` bytes; a file that cannot be read or is not such
/// a report is a usage error that says how to write one.
pub fn read_report<T: serde::de::DeserializeOwned>(
    path: &Path,
    max: u64,
    kind: &str,
    command: &str,
) -> Result<T> {
    let how = format!("write one with `{command} > FILE`");
    let text = crate::files::read_text(path, max).map_err(|e| {
        Error::usage(format!(
            "cannot read {kind} file {}: {e}; {how}",
            path.display()
        ))
    })?;
    let bad = |e: &dyn std::fmt::Display| {
        Error::usage(format!(
            "{} is not a {kind} JSON report ({e}); {how}",
            path.display()
        ))
    };
    // A JSON array would fill the report's fields by position.
    if !text.trim_start().starts_with('{') {
        return Err(bad(&"not a JSON object"));
    }
    serde_json::from_str(&text).map_err(|e| bad(&e))
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
    fn the_kinds_of_rank_give_what_every_rank_gives() {
        let net = network(3.0, 2.0).unwrap();
        for n in [[12, 12, 12], [13, 9, 30], [40, 7, 11]] {
            let grid = Grid::new(n).unwrap();
            for procs in [[1, 1, 1], [3, 1, 2], [2, 2, 2], [5, 3, 4], [7, 1, 9]] {
                let procs = ProcGrid { p: procs };
                if procs.validate(&grid, procs.ranks()).is_err() {
                    continue;
                }
                let fast = predict(&grid, &procs, 34.0, &net);
                let all = (0..procs.ranks())
                    .map(|r| predict_rank(&grid, &procs, r, 34.0, &net, fast.allreduce_s, 1))
                    .fold(None::<Prediction>, |b, p| {
                        if b.is_none_or(|b| p.total_s > b.total_s) {
                            Some(p)
                        } else {
                            b
                        }
                    })
                    .unwrap();
                assert_eq!(fast, all, "{n:?} {procs}");
            }
        }
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
        // +0, not -0 (which == compares equal to), or it prints as "-0".
        for v in [
            p.halo_s,
            p.halo_bytes_per_iteration,
            p.messages_per_iteration,
        ] {
            assert!(v.is_sign_positive(), "{v}");
        }
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
