//! The GPU sweep's model (docs/gpu.md, "Sweep variants and what they
//! should reach"): the rate of one rank per `--gpu-sweep` and
//! `--gpu-occupancy` on an H100 and an H200, beside the ceiling the
//! device copy bandwidth sets, and the sectors per load request of each
//! `--gpu-layout`. Predictions, not measurements: `himeno model --gpu`
//! prints them, `himeno gpu-check` measures what they predict.
//!
//! A point moves 56 bytes from HBM (12 coefficients and `p` read, `p`
//! written) for 34 flops, so the copy bandwidth bounds the rate at 34/56
//! of it. An SM keeps bandwidth x latency in flight only with enough
//! loads outstanding (Little's law, at the datasheet peak and ~900 ns):
//! each thread has one i-plane of 13 HBM values (52 bytes) in flight (two
//! for the pipelined variants), for a fraction [`DUTY`] of the time, and
//! the blocks per SM follow from the sweep's registers. The rate is the
//! ceiling times the fraction of the needed bytes in flight (at most 1),
//! with a [`GAP_S`] idle gap per iteration.

use crate::config::{GpuLayout, Occupancy, SweepVariant};
use crate::grid::{FLOPS_PER_POINT, Grid};
use serde::Serialize;

/// Bytes a sweep point moves from and to HBM.
pub const BYTES_PER_POINT: f64 = 56.0;
/// HBM bytes one thread loads per i-plane (12 coefficients and `p`).
pub const BYTES_PER_PLANE: f64 = 52.0;
/// Loaded HBM latency, seconds.
pub const LATENCY_S: f64 = 900e-9;
/// Fraction of the time a thread's plane of loads is in flight: set so
/// that `classic` at `auto` on the H100 gives the ~75 % of HBM peak an
/// independent review predicted.
pub const DUTY: f64 = 0.49;
/// Idle time per iteration left after the late gosa read, seconds.
pub const GAP_S: f64 = 3e-6;
/// Threads per sweep block (`launch::SWEEP_THREADS`).
const THREADS: f64 = 256.0;
/// Registers per SM on sm_90.
const REGISTERS_PER_SM: u32 = 65_536;
/// Most resident threads per SM on sm_90, in sweep blocks.
const MAX_BLOCKS: u32 = 8;

/// A GPU the model knows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Device {
    /// Its name.
    pub name: &'static str,
    /// HBM bandwidth on the datasheet, bytes/s.
    pub peak: f64,
    /// Device-to-device copy bandwidth (measured or assumed), bytes/s.
    pub copy: f64,
    /// Streaming multiprocessors.
    pub sms: f64,
}

/// The devices the model predicts for.
pub const DEVICES: [Device; 2] = [
    Device {
        name: "H100 SXM",
        peak: 3.35e12,
        copy: 2.96e12,
        sms: 132.0,
    },
    Device {
        name: "H200",
        peak: 4.8e12,
        copy: 4.25e12,
        sms: 132.0,
    },
];

impl Device {
    /// The rate the copy bandwidth bounds the sweep at, TFLOPS.
    pub fn ceiling_tflops(&self) -> f64 {
        self.copy * FLOPS_PER_POINT / BYTES_PER_POINT / 1e12
    }

    /// Bytes an SM must keep in flight to reach the peak.
    pub fn needed_in_flight(&self) -> f64 {
        self.peak * LATENCY_S / self.sms
    }
}

/// The sweep's registers per thread for sm_90 (NVRTC 13.0 and 12.9 agree;
/// docs/gpu.md), or `None` where it would spill (refused).
pub fn registers(sweep: SweepVariant, occ: Occupancy) -> Option<u32> {
    use Occupancy::{Auto, Blocks4, Blocks5};
    use SweepVariant::{Classic, Pipelined, PipelinedSlab, Slab};
    match (sweep, occ) {
        (Classic, Auto) => Some(72),
        (Pipelined, Auto) => Some(118),
        (Slab, Auto) => Some(48),
        (PipelinedSlab, Auto) => Some(70),
        (Pipelined, Blocks4) => Some(56),
        (_, Blocks4) => Some(64),
        (Classic | Slab, Blocks5) => Some(48),
        (Pipelined | PipelinedSlab, Blocks5) => None,
    }
}

/// Resident sweep blocks per SM with `regs` registers per thread
/// (allocated in units of 8).
pub fn blocks_per_sm(regs: u32) -> u32 {
    let per_block = regs.div_ceil(8) * 8 * THREADS as u32;
    (REGISTERS_PER_SM / per_block).min(MAX_BLOCKS)
}

/// One variant's prediction on one device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VariantPrediction {
    /// The device's name.
    pub device: &'static str,
    /// `--gpu-sweep`.
    pub sweep: &'static str,
    /// `--gpu-occupancy`.
    pub occupancy: &'static str,
    /// Registers per thread.
    pub registers: u32,
    /// Resident blocks per SM.
    pub blocks_per_sm: u32,
    /// Bytes in flight per SM.
    pub in_flight_bytes: f64,
    /// Predicted TFLOPS of one rank on the grid.
    pub tflops: f64,
    /// The device's copy-bandwidth ceiling, TFLOPS.
    pub ceiling_tflops: f64,
}

/// The prediction for `sweep` at `occ` on `dev` for one rank of `grid`,
/// or `None` for a pair that would spill.
pub fn predict(
    dev: &Device,
    sweep: SweepVariant,
    occ: Occupancy,
    grid: &Grid,
) -> Option<VariantPrediction> {
    let registers = registers(sweep, occ)?;
    let blocks = blocks_per_sm(registers);
    let planes = if sweep.pipelined() { 2.0 } else { 1.0 };
    let in_flight = f64::from(blocks) * THREADS * BYTES_PER_PLANE * planes * DUTY;
    let fraction = (in_flight / dev.needed_in_flight()).min(1.0);
    let points = grid.interior_points() as f64;
    let seconds = points * BYTES_PER_POINT / (dev.copy * fraction) + GAP_S;
    Some(VariantPrediction {
        device: dev.name,
        sweep: sweep.name(),
        occupancy: occ.name(),
        registers,
        blocks_per_sm: blocks,
        in_flight_bytes: in_flight,
        tflops: points * FLOPS_PER_POINT / seconds / 1e12,
        ceiling_tflops: dev.ceiling_tflops(),
    })
}

/// Every accepted variant on every device for one rank of `grid`.
pub fn predict_all(grid: &Grid) -> Vec<VariantPrediction> {
    DEVICES
        .iter()
        .flat_map(|d| {
            SweepVariant::ALL.iter().flat_map(move |&s| {
                Occupancy::ALL
                    .iter()
                    .filter_map(move |&o| predict(d, s, o, grid))
            })
        })
        .collect()
}

/// The mean number of 32-byte sectors a warp's load request of 32
/// consecutive k values touches in one sweep of a block whose rows hold
/// `d2` values (ghosts included), laid out as `layout`: the 19 loads at
/// the point's own k (12 coefficients, 7 of `p`) and the 10 at k +- 1, over
/// every row's first warp (the others follow it by whole lines). This is
/// what the ncu pass of gpu-check reads as sectors per request.
pub fn sectors_per_request(layout: GpuLayout, d2: usize) -> f64 {
    let pitch = crate::backend::gpu::layout::FieldLayout::of(layout, [1, 1, d2]).pitch;
    // Offset in values of a row's local k = 1 from a sector boundary, for
    // the rows of a plane: padded rows start every first owned k on a
    // line; exact rows, from an aligned allocation, at row * d2 + 1.
    let rows = 8usize;
    let mut sum = 0.0;
    for r in 0..rows {
        let first = if layout == GpuLayout::Padded {
            0
        } else {
            r * pitch + 1
        };
        let sectors = |shift: isize| {
            let o = (first as isize + shift).rem_euclid(8) as usize;
            (o + 32).div_ceil(8) as f64
        };
        sum += 19.0 * sectors(0) + 5.0 * sectors(1) + 5.0 * sectors(-1);
    }
    sum / (rows as f64 * 29.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xl() -> Grid {
        Grid::new([512, 512, 1024]).unwrap()
    }

    #[test]
    fn the_ceilings_and_the_needed_bytes_are_the_documents() {
        let [h100, h200] = DEVICES;
        assert!((h100.ceiling_tflops() - 1.80).abs() < 0.005);
        assert!((h200.ceiling_tflops() - 2.58).abs() < 0.005);
        assert!((h100.needed_in_flight() / 1e3 - 22.8).abs() < 0.05);
        assert!((h200.needed_in_flight() / 1e3 - 32.7).abs() < 0.05);
    }

    #[test]
    fn blocks_follow_the_registers() {
        assert_eq!(blocks_per_sm(72), 3);
        assert_eq!(blocks_per_sm(64), 4);
        assert_eq!(blocks_per_sm(48), 5);
        assert_eq!(blocks_per_sm(118), 2);
        assert_eq!(blocks_per_sm(56), 4);
        assert_eq!(blocks_per_sm(16), MAX_BLOCKS);
    }

    #[test]
    fn the_variants_reach_what_the_table_says() {
        let [h100, h200] = DEVICES;
        let g = xl();
        let t = |d: &Device, s, o| predict(d, s, o, &g).unwrap().tflops;
        use Occupancy::*;
        use SweepVariant::*;
        // classic at auto: ~85 % of the copy ceiling on the H100, ~59 % on the H200.
        assert!((t(&h100, Classic, Auto) / h100.ceiling_tflops() - 0.857).abs() < 0.01);
        assert!((t(&h200, Classic, Auto) / h200.ceiling_tflops() - 0.598).abs() < 0.01);
        // 4 blocks reach the H100's ceiling, not the H200's; the
        // pipelined ones reach both.
        assert!(t(&h100, Classic, Blocks4) > 0.99 * h100.ceiling_tflops());
        assert!(t(&h200, Classic, Blocks4) < 0.8 * h200.ceiling_tflops());
        assert!(t(&h200, Pipelined, Blocks4) > 0.99 * h200.ceiling_tflops());
        assert!(predict(&h100, Pipelined, Blocks5, &g).is_none());
        // Every accepted pair on both devices.
        assert_eq!(predict_all(&g).len(), 2 * 10);
    }

    #[test]
    fn padding_puts_the_point_loads_on_four_sectors() {
        // One rank of XL: rows of 1024 values (4 KiB), so every owned k
        // starts one value past a line: 5 sectors at k, 5 at k + 1 and 4
        // at k - 1.
        let exact = sectors_per_request(GpuLayout::Exact, 1024);
        let padded = sectors_per_request(GpuLayout::Padded, 1024);
        assert!(
            (exact - (19.0 * 5.0 + 10.0 * 4.5) / 29.0).abs() < 1e-9,
            "{exact}"
        );
        assert!(
            (padded - (19.0 * 4.0 + 10.0 * 5.0) / 29.0).abs() < 1e-9,
            "{padded}"
        );
        // Rows of 1026 values start on every odd value: 4 or 5 at k +- 1.
        let exact = sectors_per_request(GpuLayout::Exact, 1026);
        let padded = sectors_per_request(GpuLayout::Padded, 1026);
        assert!(
            (exact - (19.0 * 5.0 + 10.0 * 4.75) / 29.0).abs() < 1e-9,
            "{exact}"
        );
        assert!(
            (padded - (19.0 * 4.0 + 10.0 * 5.0) / 29.0).abs() < 1e-9,
            "{padded}"
        );
        assert!(padded < exact);
    }
}
