//! The sweep launches cover every owned point of large and random blocks
//! exactly once (the long coverage sweep of the launch plan).

use crate::both::gpu_emu::*;
use himeno::backend::gpu::launch::SweepPlan;
use himeno::grid::Grid;
use himeno::grid::decomp::{Block, ProcGrid};

#[test]
fn gpu_emu_sweep_launches_cover_every_owned_point_once() {
    let seed = 0x5EED_0001;
    let mut rng = Rng(seed);
    let mut layouts = random_layouts(&mut rng, 40);
    // One-wide blocks in every dimension, and a large odd block.
    layouts.push((Grid::new([5, 6, 7]).unwrap(), ProcGrid { p: [3, 4, 5] }));
    layouts.push((
        Grid::new([259, 131, 517]).unwrap(),
        ProcGrid { p: [1, 1, 1] },
    ));
    layouts.push((
        Grid::new([259, 131, 517]).unwrap(),
        ProcGrid { p: [2, 1, 3] },
    ));
    for (grid, procs) in &layouts {
        for rank in 0..procs.ranks() {
            let block = Block::of(grid, procs, rank);
            let plan = SweepPlan::of(&block).unwrap();
            for overlap in [false, true] {
                let what = format!(
                    "seed {seed:#x} grid {grid} procs {:?} rank {rank} overlap {overlap}",
                    procs.p
                );
                let hits = coverage(&block, &launches(&plan, overlap), plan.partials);
                assert_exactly_once(&block, &hits, &what);
                assert_eq!(
                    plan.used(overlap),
                    launches(&plan, overlap)
                        .iter()
                        .map(|l| l.blocks as usize)
                        .sum::<usize>(),
                    "{what}"
                );
            }
        }
    }
}
