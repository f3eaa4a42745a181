//! Properties of the GPU launch plan (`himeno::backend::gpu::launch`), in
//! every build and without a GPU, that the runs on the emulated device
//! (`tests/system/emulated_gpu.rs`, which execute the real kernels) cannot afford or do
//! not see: that the sweep launches cover every owned point of large and
//! random blocks exactly once (the index math of the sweep kernel replayed
//! here, `emulate_sweep_thread`), that thin slabs keep lanes busy, that
//! the grid-stride launches cover any length, and that the launch
//! constants have one home. Face copies, the gosa reduction and the
//! kernels' argument lists are checked by the real kernels on the
//! emulated device.

use crate::both::gpu_emu::*;
use himeno::backend::gpu::launch::{self, SOURCE, SweepPlan};
use himeno::backend::gpu::layout::FieldLayout;
use himeno::grid::Grid;
use himeno::grid::decomp::{Block, ProcGrid};

#[test]
fn gpu_emu_thin_slabs_keep_lanes_busy() {
    // A k split under overlap: the k slabs are a warp wide (32 values),
    // not one point. Their launches must not leave lanes idle.
    let grid = Grid::new([66, 130, 258]).unwrap();
    let procs = ProcGrid { p: [1, 1, 2] };
    let block = Block::of(&grid, &procs, 0);
    let plan = SweepPlan::of(&block).unwrap();
    for l in &plan.boundary {
        let b = buffers();
        let args = launch::sweep_args(
            &b,
            &FieldLayout::exact(block.local_dims()),
            l,
            plan.used(true),
        );
        let shape = l.shape();
        let mut active = 0usize;
        for blk in 0..shape.grid[0] {
            for ty in 0..shape.block[1] {
                for tx in 0..shape.block[0] {
                    active +=
                        usize::from(emulate_sweep_thread(&shape, &args, blk, tx, ty).is_some());
                }
            }
        }
        let threads = shape.grid[0] as usize * launch::SWEEP_THREADS as usize;
        // Whole warps along k, in the k slab as elsewhere.
        assert!(
            2 * active >= threads,
            "{l:?}: {active} of {threads} threads busy"
        );
    }
}

#[test]
fn gpu_emu_flat_launches_cover_each_index_once() {
    let cap = (launch::FLAT_MAX_BLOCKS * launch::FLAT_THREADS) as usize;
    for n in [
        1,
        255,
        256,
        257,
        70_000,
        cap - 1,
        cap,
        cap + 1,
        2 * cap + 77,
    ] {
        let s = launch::flat(n);
        let threads = (s.grid[0] * s.block[0]) as usize;
        let mut seen = vec![0u8; n];
        // The grid-stride loop of pack_face/unpack_face/fill/fill_planes.
        for t0 in 0..threads {
            let mut t = t0;
            while t < n {
                seen[t] += 1;
                t += threads;
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "n = {n}");
    }
}

#[test]
fn gpu_emu_launch_constants_come_from_one_place() {
    // Every constant kernels.cu uses is one the launcher defines.
    let defined: Vec<String> = launch::defines(launch::Occupancy::Blocks4)
        .iter()
        .map(|d| {
            d.trim_start_matches("-D")
                .split('=')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    let mut used: Vec<String> = SOURCE
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("HIMENO_"))
        .map(str::to_string)
        .collect();
    used.sort();
    used.dedup();
    let mut defined_sorted = defined.clone();
    defined_sorted.sort();
    assert_eq!(used, defined_sorted);
    // No launch constant written out in the source instead.
    for stale in ["MAX_WARPS 32", "off = 16", "& 31u", ">> 5"] {
        assert!(!SOURCE.contains(stale), "kernels.cu hard-codes `{stale}`");
    }
    for occ in launch::Occupancy::ALL {
        let d = launch::defines(occ);
        assert!(d.contains(&format!("-DHIMENO_SWEEP_MIN_BLOCKS={}", occ.min_blocks())));
    }
}
