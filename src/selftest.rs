//! The halo self-test: every rank fills the points it holds with a function
//! of the global index (ghosts with NaN), runs the real halo schedule over
//! the real communicator, and checks every ghost — faces, edges and corners.
//! It catches wrong neighbours, offsets and missing dimensions.

use crate::backend::{Backend, BackendInfo, Capabilities, HostBuffer, pack_plane, unpack_plane};
use crate::comm::Comm;
use crate::config::BackendKind;
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::grid::decomp::{Block, Face};
use crate::halo::Halo;
use crate::machine::memory::Footprint;
use crate::problem::Problem;
use crate::timing::PhaseTimes;
use ndarray::Array3;

/// The value every copy of global point `g` must hold: a hash of its linear
/// index, truncated to 24 bits so that it is exact in `f32`.
fn pattern(grid: &Grid, g: [usize; 3]) -> f32 {
    let lin = ((g[0] * grid.n[1] + g[1]) * grid.n[2] + g[2]) as u64;
    let h = lin.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 40) as f32
}

/// A backend whose only field holds the pattern; it does no sweeping.
struct PatternBackend {
    field: Array3<f32>,
}

impl Backend for PatternBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: BackendKind::Cpu,
            threads: 1,
            detail: Some("halo self-test pattern".into()),
            ..BackendInfo::default()
        }
    }
    fn reset(&mut self) -> Result<()> {
        Ok(())
    }
    fn sweeps_start(&mut self, sweeps: usize) -> Result<()> {
        Capabilities::ONE_LAYER.check_sweeps(sweeps)
    }
    fn sweeps_finish(&mut self, gosa: &mut [f64]) -> Result<()> {
        gosa[0] = 0.0;
        Ok(())
    }
    fn pack(&mut self, faces: &mut [(Face, &mut dyn HostBuffer)]) -> Result<f64> {
        for (face, buf) in faces {
            pack_plane(self.field.view(), *face, buf.as_mut_slice());
        }
        Ok(0.0)
    }
    fn unpack(&mut self, faces: &[(Face, &dyn HostBuffer)]) -> Result<f64> {
        for (face, buf) in faces {
            unpack_plane(self.field.view_mut(), *face, buf.as_slice());
        }
        Ok(0.0)
    }
    fn swap(&mut self) {}
    fn load_next(&mut self, field: &Array3<f32>) -> Result<()> {
        self.field = field.clone();
        Ok(())
    }
    fn field(&mut self) -> Result<Array3<f32>> {
        Ok(self.field.clone())
    }
}

/// Host memory the self-test allocates for `block` beside what the driver
/// does (the halo staging, the read-back copy): its patterned field and,
/// on the CPU, the stand-in backend's copy of it.
pub fn footprint(block: &Block) -> Footprint {
    Footprint::vec::<f32>(block.local_dims().iter().product()).times(2)
}

/// Runs the halo self-test on every rank of `comm` for `problem` (resolved
/// for `comm`'s ranks) with `depth` ghost layers, through `backend` (a GPU
/// backend: its device buffers, pack and unpack kernels and staging), or
/// through a host-only pattern when `None`. Returns the number of ghost
/// values checked on this rank, or an error naming the first wrong one;
/// the outcome is agreed by all ranks.
pub fn halo_self_test(
    comm: &dyn Comm,
    problem: &Problem,
    depth: usize,
    backend: Option<&mut dyn Backend>,
) -> Result<u64> {
    let grid = &problem.grid;
    let block = Block::of(grid, &problem.procs, comm.rank()).with_depth(depth);
    // A ghost lies beyond the owned points on a side with a neighbour (the
    // layer beyond them on the other sides is the fixed boundary).
    let is_ghost = |l: [usize; 3]| {
        (0..3).any(|x| {
            let own = block.owned(x);
            let side = if l[x] < own.start {
                Some(0)
            } else if l[x] >= own.end {
                Some(1)
            } else {
                None
            };
            side.is_some_and(|s| block.neighbours[x][s].is_some())
        })
    };
    let d = block.local_dims();
    let global = |l: [usize; 3]| {
        [
            block.global(0, l[0]),
            block.global(1, l[1]),
            block.global(2, l[2]),
        ]
    };
    let len = d[0] * d[1] * d[2];
    let data = crate::machine::alloc::zeroed(len, "the self-test's field")?;
    let mut field = Array3::from_shape_vec((d[0], d[1], d[2]), data)
        .map_err(|e| Error::runtime(format!("self-test field: {e}")))?;
    for ((i, j, k), v) in field.indexed_iter_mut() {
        *v = if is_ghost([i, j, k]) {
            f32::NAN
        } else {
            pattern(grid, global([i, j, k]))
        };
    }
    let mut host = PatternBackend {
        field: Array3::zeros((0, 0, 0)),
    };
    let backend: &mut dyn Backend = match backend {
        Some(b) => b,
        None => &mut host,
    };
    backend.load_next(&field)?;
    let mut halo = Halo::new(&block, backend)?;
    halo.exchange(backend, comm, &mut PhaseTimes::default())?;
    backend.swap();
    let exchanged = backend.field()?;

    let mut checked = 0u64;
    let mut first_bad: Option<String> = None;
    for ((i, j, k), v) in exchanged.indexed_iter() {
        if !is_ghost([i, j, k]) {
            continue;
        }
        checked += 1;
        let g = global([i, j, k]);
        let want = pattern(grid, g);
        if v.to_bits() != want.to_bits() && first_bad.is_none() {
            first_bad = Some(format!(
                "rank {}: ghost at local {:?} (global {:?}) holds {v}, expected {want}",
                comm.rank(),
                [i, j, k],
                g
            ));
        }
    }
    let mut bad = [f64::from(u8::from(first_bad.is_some()))];
    comm.sum(&mut bad);
    match first_bad {
        Some(msg) => Err(Error::Verification(format!("halo self-test failed: {msg}"))),
        None if bad[0] > 0.0 => Err(Error::Verification(
            "halo self-test failed on another rank".into(),
        )),
        None => Ok(checked),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::SingleComm;
    use crate::grid::decomp::ProcGrid;

    #[test]
    fn single_rank_has_no_ghosts_to_check() {
        let problem = Problem {
            grid: Grid::new([6, 7, 8]).unwrap(),
            size: crate::grid::Size::Custom,
            procs: ProcGrid { p: [1, 1, 1] },
        };
        assert_eq!(halo_self_test(&SingleComm, &problem, 3, None).unwrap(), 0);
    }
}
