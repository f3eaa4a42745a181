//! The fourteen fields of one rank's block, their names and order (the one
//! place every backend, the preflight and the reference kernel take them
//! from), and their initial values.
//!
//! Every field has the block's local extents (owned points plus one layer on
//! each side). Coefficient arrays are real arrays read every sweep: the
//! benchmark measures that memory traffic, so the constants are never folded
//! into the kernel.

use super::Grid;
use super::decomp::Block;
use crate::error::{Error, Result};
use crate::machine::alloc;
use ndarray::{Array3, Axis};

/// Relaxation factor of the original benchmark.
pub const OMEGA: f32 = 0.8;

/// Every field of a block, in the order backends store them: the pressure
/// `p`, the sweep's output `next` (the original's `wrk2`), then the twelve
/// coefficients.
pub const NAMES: [&str; FIELDS] = [
    "p", "next", "a0", "a1", "a2", "a3", "b0", "b1", "b2", "c0", "c1", "c2", "bnd", "wrk1",
];

/// Number of full-size fields of a block: `p`, `next` and the coefficients.
pub const FIELDS: usize = 2 + COEFFICIENTS;

/// Number of coefficient fields.
pub const COEFFICIENTS: usize = 12;

/// Index of each coefficient among the [`COEFFICIENTS`] (field `2 + index`
/// of [`NAMES`]).
pub mod coef {
    /// `a0`, weight of `p[i+1][j][k]`.
    pub const A0: usize = 0;
    /// `a1`, weight of `p[i][j+1][k]`.
    pub const A1: usize = 1;
    /// `a2`, weight of `p[i][j][k+1]`.
    pub const A2: usize = 2;
    /// `a3`, the scale of the stencil sum.
    pub const A3: usize = 3;
    /// `b0`, weight of the i-j cross term.
    pub const B0: usize = 4;
    /// `b1`, weight of the j-k cross term.
    pub const B1: usize = 5;
    /// `b2`, weight of the i-k cross term.
    pub const B2: usize = 6;
    /// `c0`, weight of `p[i-1][j][k]`.
    pub const C0: usize = 7;
    /// `c1`, weight of `p[i][j-1][k]`.
    pub const C1: usize = 8;
    /// `c2`, weight of `p[i][j][k-1]`.
    pub const C2: usize = 9;
    /// `bnd`, the boundary mask.
    pub const BND: usize = 10;
    /// `wrk1`, the source term.
    pub const WRK1: usize = 11;
}

/// Initial value of every coefficient field, in [`coef`] order
/// (`a0 a1 a2 a3 b0 b1 b2 c0 c1 c2 bnd wrk1`).
pub fn coefficient_values() -> [f32; COEFFICIENTS] {
    // a3 = 1/6 is computed in f64 and rounded once, as specified.
    let a3 = (1.0f64 / 6.0) as f32;
    [1.0, 1.0, 1.0, a3, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0]
}

/// Initial pressure at global i-index `i`: `i*i / ((NI-1)*(NI-1))`, integer
/// products then one `f32` division.
pub fn p_initial(grid: &Grid, i: usize) -> f32 {
    let num = (i as u64 * i as u64) as f32;
    let den = ((grid.n[0] as u64 - 1) * (grid.n[0] as u64 - 1)) as f32;
    num / den
}

/// The fields of one block, with the block's local extents.
#[derive(Clone)]
pub struct Fields {
    /// Pressure, read by the sweep.
    pub p: Array3<f32>,
    /// The sweep's output (`wrk2`); swapped with `p` after each iteration.
    pub next: Array3<f32>,
    /// Coefficients `a0..a3, b0..b2, c0..c2, bnd, wrk1`, in that order.
    pub coef: Vec<Array3<f32>>,
}

impl Fields {
    /// Allocates zeroed fields for `block` without touching their pages, so
    /// that the thread that first writes a page decides its NUMA node; an
    /// error when the memory is refused.
    pub fn zeroed(block: &Block) -> Result<Fields> {
        let d = block.local_dims();
        let shape = (d[0], d[1], d[2]);
        let len = d.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n));
        let one = |name: &str| -> Result<Array3<f32>> {
            let len = len.ok_or_else(|| {
                Error::runtime(format!(
                    "field {name} of {d:?} points does not fit in memory"
                ))
            })?;
            let data = alloc::zeroed(len, &format!("field {name} of the reference kernel"))?;
            Array3::from_shape_vec(shape, data)
                .map_err(|e| Error::runtime(format!("field {name}: {e}")))
        };
        Ok(Fields {
            p: one(NAMES[0])?,
            next: one(NAMES[1])?,
            coef: (0..COEFFICIENTS)
                .map(|c| one(NAMES[2 + c]))
                .collect::<Result<_>>()?,
        })
    }

    /// Allocates and initialises the fields of `block` sequentially.
    pub fn initial(grid: &Grid, block: &Block) -> Result<Fields> {
        let mut f = Fields::zeroed(block)?;
        let planes = block.local_dims()[0];
        f.init_planes(grid, block, 0..planes);
        Ok(f)
    }

    /// Writes initial values into local i-planes `planes` of every field.
    pub fn init_planes(&mut self, grid: &Grid, block: &Block, planes: std::ops::Range<usize>) {
        let values = coefficient_values();
        for li in planes {
            let pv = p_initial(grid, block.global(0, li));
            self.p.index_axis_mut(Axis(0), li).fill(pv);
            self.next.index_axis_mut(Axis(0), li).fill(pv);
            for (field, &v) in self.coef.iter_mut().zip(&values) {
                field.index_axis_mut(Axis(0), li).fill(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::decomp::ProcGrid;

    #[test]
    fn initial_values_match_the_specification() {
        let g = Grid::new([5, 4, 3]).unwrap();
        let b = Block::of(&g, &ProcGrid { p: [1, 1, 1] }, 0);
        let f = Fields::initial(&g, &b).unwrap();
        assert_eq!(f.p[[0, 1, 1]], 0.0);
        assert_eq!(f.p[[4, 0, 2]], 1.0);
        assert_eq!(f.p[[2, 3, 0]], 4.0f32 / 16.0f32);
        assert_eq!(f.coef[coef::A3][[1, 1, 1]], (1.0f64 / 6.0) as f32);
        assert_eq!(NAMES[2 + coef::WRK1], "wrk1");
        assert_eq!(f.next, f.p);
    }
}
