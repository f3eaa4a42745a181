//! Boxes of owned points that one sweep launch covers, and their split into
//! boundary slabs and interior for `--overlap`.
//!
//! With overlap, the owned planes next to every face that has a neighbour
//! are computed first (they are what the halo exchange sends), the rest
//! afterwards. A slab normal to i or j is one plane thick; one normal to k
//! is [`K_SLAB`] values wide where the block allows, so that its rows are
//! a warp wide and coalesced (a one-wide k slab gives every lane its own
//! row: a 32-byte sector read per value, on the path the host waits for). The slabs are peeled dimension by dimension (i, then j, then
//! k, each restricted to what earlier dimensions left) so that the boxes are
//! disjoint and together cover every owned point exactly once: each point is
//! computed once and counted once in gosa.

use crate::grid::decomp::Block;

/// Width of a boundary slab normal to k: a warp (`launch::WARP`, which a
/// test of `launch` checks), or what the block has left.
pub const K_SLAB: usize = 32;

/// A box of local indices `[lo[d], lo[d] + n[d])` per dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// First local index per dimension.
    pub lo: [usize; 3],
    /// Extent per dimension.
    pub n: [usize; 3],
}

impl Region {
    /// Number of points in the box.
    pub fn points(&self) -> usize {
        self.n.iter().product()
    }

    /// Whether the box holds no point.
    pub fn is_empty(&self) -> bool {
        self.points() == 0
    }
}

/// All owned points of `block` (local indices `1..=n` per dimension).
pub fn whole(block: &Block) -> Region {
    Region {
        lo: [1, 1, 1],
        n: block.n,
    }
}

/// The owned points of `block` split into boundary slabs (first) and the
/// interior box (last element; possibly empty). Every slab contains the
/// owned plane next to a face that has a neighbour; without neighbours
/// there is no slab and the interior is the whole block.
pub fn boundary_and_interior(block: &Block) -> (Vec<Region>, Region) {
    let mut rest = whole(block);
    let mut slabs = Vec::new();
    for d in 0..3 {
        let [below, above] = block.neighbours[d];
        let thick = if d == 2 { K_SLAB } else { 1 };
        if below.is_some() && rest.n[d] > 0 {
            let mut s = rest;
            s.n[d] = thick.min(rest.n[d]);
            slabs.push(s);
            rest.lo[d] += s.n[d];
            rest.n[d] -= s.n[d];
        }
        if above.is_some() && rest.n[d] > 0 {
            let mut s = rest;
            s.n[d] = thick.min(rest.n[d]);
            s.lo[d] = rest.lo[d] + rest.n[d] - s.n[d];
            slabs.push(s);
            rest.n[d] -= s.n[d];
        }
    }
    slabs.retain(|s| !s.is_empty());
    (slabs, rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::Grid;
    use crate::grid::decomp::Face;
    use crate::grid::decomp::ProcGrid;

    fn contains(r: &Region, p: [usize; 3]) -> bool {
        (0..3).all(|d| p[d] >= r.lo[d] && p[d] < r.lo[d] + r.n[d])
    }

    #[test]
    fn slabs_and_interior_cover_each_owned_point_once() {
        let grid = Grid::new([7, 6, 9]).unwrap();
        for procs in [
            [1, 1, 1],
            [2, 1, 1],
            [1, 2, 2],
            [2, 2, 2],
            [5, 4, 7],
            [3, 1, 2],
        ] {
            let pg = ProcGrid { p: procs };
            for rank in 0..pg.ranks() {
                let b = Block::of(&grid, &pg, rank);
                let (slabs, interior) = boundary_and_interior(&b);
                let dims = b.local_dims();
                for i in 1..=b.n[0] {
                    for j in 1..=b.n[1] {
                        for k in 1..=b.n[2] {
                            let p = [i, j, k];
                            let hits = slabs.iter().filter(|s| contains(s, p)).count()
                                + usize::from(contains(&interior, p));
                            assert_eq!(hits, 1, "{procs:?} rank {rank} point {p:?}");
                            // Points on a sent plane must be in a slab.
                            for dim in 0..3 {
                                for side in 0..2 {
                                    let f = Face { dim, side };
                                    if b.neighbours[dim][side].is_some()
                                        && p[dim] == f.send_plane(dims)
                                    {
                                        assert!(!contains(&interior, p), "{p:?} sent but interior");
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn k_slabs_are_a_warp_wide_where_the_block_allows() {
        let grid = Grid::new([10, 10, 202]).unwrap();
        let b = Block::of(&grid, &ProcGrid { p: [1, 1, 2] }, 0);
        let (slabs, interior) = boundary_and_interior(&b);
        assert_eq!(slabs.len(), 1, "{slabs:?}");
        assert_eq!(slabs[0].n[2], K_SLAB);
        assert_eq!(slabs[0].lo[2] + K_SLAB - 1, b.n[2]);
        assert_eq!(interior.n[2], b.n[2] - K_SLAB);
        // A middle block narrower than two slabs: both sides share it.
        let grid = Grid::new([10, 10, 62]).unwrap();
        let b = Block::of(&grid, &ProcGrid { p: [1, 1, 3] }, 1);
        let (slabs, interior) = boundary_and_interior(&b);
        let widths: Vec<usize> = slabs.iter().map(|s| s.n[2]).collect();
        assert_eq!(widths.iter().sum::<usize>(), b.n[2], "{slabs:?}");
        assert!(interior.is_empty());
    }

    #[test]
    fn no_neighbours_means_no_slabs() {
        let grid = Grid::new([5, 5, 5]).unwrap();
        let b = Block::of(&grid, &ProcGrid { p: [1, 1, 1] }, 0);
        let (slabs, interior) = boundary_and_interior(&b);
        assert!(slabs.is_empty());
        assert_eq!(interior, whole(&b));
    }
}
