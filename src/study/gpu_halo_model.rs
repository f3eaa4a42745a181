//! The GPU halo model: one iteration of a job of GPU ranks for each
//! `--halo` path (staged, peer, nccl, mpi-device), with and without
//! `--overlap`, and its strong scaling from one GPU. Predictions, not
//! measurements: `himeno model --gpu` prints them for a process grid of
//! more than one rank; docs/gpu.md gives the table at L and XL.
//!
//! A rank's sweep takes the time [`gpu_model::predict`] gives its block
//! (the default sweep, `classic` at `auto`). The exchange follows the one
//! halo schedule: one step per split dimension (k, then j, then i), each
//! moving one full ghost-inclusive face per neighbour; as in the CPU model
//! the faces of a step are counted one after the other. Per face:
//! - every path unpacks it on the device (a launch and its bytes read and
//!   written at the copy bandwidth) and packs it the same way, except the
//!   first step's faces, which the sweep stores as it writes them (their
//!   bytes written once more, no launch); a contiguous face is counted
//!   like the others, which overstates it a little;
//! - `staged`: a device->host copy and a host->device copy over the host
//!   link (latency + bytes / bandwidth, `bench transfer`'s figures), the
//!   MPI message between hosts (the ping-pong's), and two host waits per
//!   step (after the packs and after the unpacks);
//! - `peer`: a device-to-device copy over the GPUs' link;
//! - `nccl`: a send/receive over the same link, at NCCL's latency;
//! - `mpi-device`: a host wait for the stream, then a CUDA-aware MPI
//!   message over the GPUs' link, at its latency.
//!
//! Every path waits once per iteration for gosa; staged also waits after
//! the sweep. With `--overlap` the interior is swept while the boundary
//! slabs' faces move: the iteration is the longer of the whole sweep and
//! the boundary slabs' sweep plus the exchange. The speed-up is over the
//! same path on one GPU (no exchange, the same host waits).

use super::gpu_model::{self, Device};
use super::model::Network;
use crate::config::{HaloPath, Occupancy, SweepVariant};
use crate::grid::Grid;
use crate::grid::decomp::{Block, ProcGrid};
use serde::Serialize;

/// A kernel launch as the device sees it (queue to start), seconds.
pub const LAUNCH_S: f64 = 4e-6;
/// A host wait: the host wakes after the device's work ends, seconds.
pub const HOST_WAIT_S: f64 = 8e-6;
/// A device-to-device copy's latency between two GPUs, seconds.
pub const PEER_LATENCY_S: f64 = 6e-6;
/// An NCCL send/receive's latency between two GPUs of a node, seconds.
pub const NCCL_LATENCY_S: f64 = 12e-6;
/// A CUDA-aware MPI message's latency between two GPUs of a node (CUDA
/// IPC), seconds.
pub const MPI_DEVICE_LATENCY_S: f64 = 18e-6;
/// The GPUs' link, one direction, bytes/s: NVLink 4 on an H100 or H200
/// SXM (900 GB/s both ways).
pub const DEVICE_LINK: f64 = 450e9;

/// The host link of the staged path: latency and bandwidth of a face's
/// copy each way.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HostLink {
    /// Device->host: latency in seconds and bandwidth in bytes/s.
    pub d2h: (f64, f64),
    /// Host->device: latency in seconds and bandwidth in bytes/s.
    pub h2d: (f64, f64),
}

/// Pinned host memory over PCIe 5 x16 as an H100 or H200 SXM host reads
/// it: about 10 us and 50 GB/s each way.
pub const PINNED_PCIE5: HostLink = HostLink {
    d2h: (10e-6, 50e9),
    h2d: (10e-6, 50e9),
};

/// The largest transfer report read (a few KiB; a wrong file is refused).
const MAX_TRANSFER_BYTES: u64 = 16 << 20;

/// The pinned host link of a `himeno bench transfer --format json`
/// report in `path`.
pub fn host_link_from_file(path: &std::path::Path) -> crate::error::Result<HostLink> {
    let rep: crate::bench::transfer::TransferReport = super::model::read_report(
        path,
        MAX_TRANSFER_BYTES,
        "transfer",
        "himeno bench transfer --format json",
    )?;
    let link = |dir: &str| {
        let key = format!("{dir}/pinned");
        match (rep.latency_us.get(&key), rep.peak_gbytes_per_s.get(&key)) {
            (Some(&l), Some(&b)) if l.is_finite() && l >= 0.0 && b.is_finite() && b > 0.0 => {
                Ok((l * 1e-6, b * 1e9))
            }
            _ => Err(crate::error::Error::usage(format!(
                "{} is not a transfer JSON report (no usable {key} latency and bandwidth); \
                 write one with `himeno bench transfer --format json > FILE`",
                path.display()
            ))),
        }
    };
    Ok(HostLink {
        d2h: link("d2h")?,
        h2d: link("h2d")?,
    })
}

/// The MPI network between host buffers of one node (shared memory):
/// about 1 us and 10 GB/s.
pub const NODE_MPI: Network = Network {
    latency_s: 1e-6,
    bandwidth_bytes_per_s: 10e9,
};

/// One path's predicted iteration on one device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PathPrediction {
    /// The device's name.
    pub device: &'static str,
    /// `--halo`.
    pub path: &'static str,
    /// `--overlap`.
    pub overlap: bool,
    /// The slowest rank's sweep, seconds.
    pub sweep_s: f64,
    /// Its exchange, seconds.
    pub exchange_s: f64,
    /// Its host waits per iteration.
    pub host_waits: f64,
    /// The iteration, seconds.
    pub iteration_s: f64,
    /// One GPU's iteration of the whole grid over this one.
    pub speedup: f64,
}

/// The sweep of `block` on `dev`, seconds (the default sweep).
fn sweep_s(dev: &Device, block: &Block) -> f64 {
    let n = block.n;
    let local = Grid::new([n[0] + 2, n[1] + 2, n[2] + 2]).expect("a block of at least one point");
    let p = gpu_model::predict(dev, SweepVariant::Classic, Occupancy::Auto, &local)
        .expect("the default sweep does not spill");
    local.interior_points() as f64 * crate::grid::FLOPS_PER_POINT / (p.tflops * 1e12)
}

/// The share of `block`'s points in its boundary slabs (one plane deep on
/// each side with a neighbour), which `--overlap` sweeps first.
fn boundary_share(block: &Block) -> f64 {
    let inner: f64 = block
        .n
        .iter()
        .zip(&block.neighbours)
        .map(|(&n, sides)| {
            let n = n as f64;
            let cut = sides.iter().filter(|s| s.is_some()).count() as f64;
            (n - cut).max(0.0) / n
        })
        .product();
    1.0 - inner
}

/// One face of `bytes` over `path`, seconds: its unpack, and its pack
/// unless the sweep `stored` it (the first step's faces: the sweep writes
/// them once more, with no launch and no read).
fn face_s(
    dev: &Device,
    path: HaloPath,
    bytes: f64,
    stored: bool,
    host: &HostLink,
    mpi: &Network,
) -> f64 {
    let kernel = LAUNCH_S + 2.0 * bytes / dev.copy;
    let pack = if stored { bytes / dev.copy } else { kernel };
    let device = pack + kernel;
    let over = |(latency, bandwidth): (f64, f64)| latency + bytes / bandwidth;
    device
        + match path {
            HaloPath::Staged => {
                over(host.d2h) + over((mpi.latency_s, mpi.bandwidth_bytes_per_s)) + over(host.h2d)
            }
            HaloPath::Peer => over((PEER_LATENCY_S, DEVICE_LINK)),
            HaloPath::Nccl => over((NCCL_LATENCY_S, DEVICE_LINK)),
            HaloPath::MpiDevice => over((MPI_DEVICE_LATENCY_S, DEVICE_LINK)),
        }
}

/// Host waits of one dimension step on `path`.
fn step_waits(path: HaloPath) -> f64 {
    match path {
        HaloPath::Staged => 2.0,
        HaloPath::MpiDevice => 1.0,
        HaloPath::Peer | HaloPath::Nccl => 0.0,
    }
}

/// The prediction for `path` on `dev` of `grid` on `procs`, the slowest
/// rank's; its speed-up is over the same path on one GPU.
pub fn predict(
    dev: &Device,
    grid: &Grid,
    procs: &ProcGrid,
    path: HaloPath,
    overlap: bool,
    host: &HostLink,
    mpi: &Network,
) -> PathPrediction {
    let one = ProcGrid { p: [1, 1, 1] };
    let one_gpu = rank_iteration(dev, &Block::of(grid, &one, 0), path, overlap, host, mpi);
    (0..procs.ranks())
        .map(|rank| {
            let block = Block::of(grid, procs, rank);
            let mut p = rank_iteration(dev, &block, path, overlap, host, mpi);
            p.speedup = one_gpu.iteration_s / p.iteration_s;
            p
        })
        .reduce(|w, p| if p.iteration_s > w.iteration_s { p } else { w })
        .expect("a process grid has a rank")
}

/// The iteration of the rank of `block` (its speed-up not yet known).
fn rank_iteration(
    dev: &Device,
    block: &Block,
    path: HaloPath,
    overlap: bool,
    host: &HostLink,
    mpi: &Network,
) -> PathPrediction {
    let dims = block.local_dims();
    let sweep = sweep_s(dev, block);
    let faces: Vec<(usize, f64)> = block
        .halo_faces()
        .map(|(f, _)| (f.dim, f.len(dims) as f64 * 4.0))
        .collect();
    let mut steps: Vec<usize> = faces.iter().map(|f| f.0).collect();
    steps.dedup();
    let exchange: f64 = faces
        .iter()
        .map(|&(d, b)| face_s(dev, path, b, Some(&d) == steps.first(), host, mpi))
        .fold(0.0, |a, b| a + b)
        + steps.len() as f64 * step_waits(path) * HOST_WAIT_S;
    let gosa_waits = if path == HaloPath::Staged { 2.0 } else { 1.0 };
    // The device sweeps every point either way: overlap hides the
    // exchange behind the interior, never the sweep's own time.
    let body = if overlap {
        sweep.max(sweep * boundary_share(block) + exchange)
    } else {
        sweep + exchange
    };
    PathPrediction {
        device: dev.name,
        path: path.name(),
        overlap,
        sweep_s: sweep,
        exchange_s: exchange,
        host_waits: steps.len() as f64 * step_waits(path) + gosa_waits,
        iteration_s: body + gosa_waits * HOST_WAIT_S,
        speedup: 1.0,
    }
}

/// Every path with and without overlap on every device, for `grid` on
/// `procs`.
pub fn predict_all(
    grid: &Grid,
    procs: &ProcGrid,
    host: &HostLink,
    mpi: &Network,
) -> Vec<PathPrediction> {
    let mut out = Vec::new();
    for dev in &gpu_model::DEVICES {
        for path in HaloPath::ALL {
            for overlap in [false, true] {
                out.push(predict(dev, grid, procs, path, overlap, host, mpi));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l() -> Grid {
        Grid::new([256, 256, 512]).unwrap()
    }

    fn run(path: HaloPath, overlap: bool, procs: [usize; 3]) -> PathPrediction {
        let dev = gpu_model::DEVICES[0];
        predict(
            &dev,
            &l(),
            &ProcGrid { p: procs },
            path,
            overlap,
            &PINNED_PCIE5,
            &NODE_MPI,
        )
    }

    /// The first step's faces, which the sweep stores, cost their
    /// unpack, their move and one more write of their bytes: no pack
    /// launch and no read.
    #[test]
    fn the_faces_the_sweep_stores_cost_no_pack() {
        let dev = gpu_model::DEVICES[0];
        let bytes = 1e6;
        for path in HaloPath::ALL {
            let face = |stored| face_s(&dev, path, bytes, stored, &PINNED_PCIE5, &NODE_MPI);
            let saved = face(false) - face(true);
            let want = LAUNCH_S + bytes / dev.copy;
            assert!(
                (saved - want).abs() < 1e-12 * want.max(1.0),
                "{path:?}: {saved} vs {want}"
            );
        }
    }

    #[test]
    fn one_gpu_has_no_exchange_and_scales_by_one() {
        for path in HaloPath::ALL {
            let p = run(path, false, [1, 1, 1]);
            assert_eq!(p.exchange_s, 0.0);
            let waits = if path == HaloPath::Staged { 2.0 } else { 1.0 };
            assert_eq!(p.host_waits, waits);
            assert_eq!(p.speedup, 1.0, "{p:?}");
        }
    }

    #[test]
    fn the_device_paths_move_l_faster_than_staging_and_wait_once() {
        let staged = run(HaloPath::Staged, false, [2, 2, 1]);
        // 2x2x1: two dimension steps, two host waits each, and the
        // sweep's and gosa's.
        assert_eq!(staged.host_waits, 6.0);
        for path in [HaloPath::Peer, HaloPath::Nccl] {
            let p = run(path, false, [2, 2, 1]);
            assert_eq!(p.host_waits, 1.0);
            assert!(
                p.exchange_s < 0.3 * staged.exchange_s,
                "{p:?} vs {staged:?}"
            );
            assert!(p.speedup > staged.speedup);
        }
        let mpi = run(HaloPath::MpiDevice, false, [2, 2, 1]);
        assert_eq!(mpi.host_waits, 3.0);
        assert!(mpi.exchange_s < staged.exchange_s);
    }

    #[test]
    fn overlap_hides_what_the_interior_can_cover_and_never_costs() {
        for path in HaloPath::ALL {
            let plain = run(path, false, [2, 2, 1]);
            let over = run(path, true, [2, 2, 1]);
            assert!(over.iteration_s <= plain.iteration_s, "{path:?}");
            assert!(over.speedup <= 4.0 + 1e-9, "{over:?}");
        }
    }

    #[test]
    fn the_boundary_share_counts_only_sides_with_a_neighbour() {
        let g = Grid::new([12, 12, 12]).unwrap();
        let alone = Block::of(&g, &ProcGrid { p: [1, 1, 1] }, 0);
        assert_eq!(boundary_share(&alone), 0.0);
        let half = Block::of(&g, &ProcGrid { p: [2, 1, 1] }, 0);
        // 5 of 10 planes of i, one of them on the side with a neighbour.
        assert!((boundary_share(&half) - 0.2).abs() < 1e-12);
    }
}
