//! Block decomposition of the grid's interior over a non-periodic Cartesian
//! process grid `PI x PJ x PK`, the automatic choice of that grid, and the
//! faces a block exchanges with its neighbours.
//!
//! Rank numbering is row-major over process coordinates (k fastest), as
//! `MPI_Cart_create` without reordering. Interior points are split as the
//! original does: each rank gets `n / P` points, the first `n % P` ranks one
//! more.

use super::Grid;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Range;

/// Most ranks a process grid may have (2^24, beyond the largest machines'
/// core counts): every loop over ranks or divisors of a rank count stays
/// bounded, and every product of rank counts fits in 64 bits.
pub const MAX_RANKS: usize = 1 << 24;

/// Most ghost layers a block keeps towards a neighbour, hence the most
/// sweeps per halo exchange (the largest `--temporal`): beyond this the
/// redundant updates in the ghost layers outweigh any saving.
pub const MAX_DEPTH: usize = 32;

/// A Cartesian process grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcGrid {
    /// Ranks per dimension.
    pub p: [usize; 3],
}

impl fmt::Display for ProcGrid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.p[0], self.p[1], self.p[2])
    }
}

impl std::str::FromStr for ProcGrid {
    type Err = Error;
    /// Parses `PIxPJxPK`, e.g. `2x2x1`, of at most [`MAX_RANKS`] ranks.
    fn from_str(s: &str) -> Result<Self> {
        let p = super::parse_triple(s, "process grid", "PIxPJxPK, e.g. 2x2x1")?;
        let ranks: u128 = p.iter().map(|&v| v as u128).product();
        if ranks > MAX_RANKS as u128 {
            return Err(Error::usage(format!(
                "process grid '{s}' has {ranks} ranks, more than the {MAX_RANKS} supported: \
                 give a smaller PIxPJxPK"
            )));
        }
        Ok(ProcGrid { p })
    }
}

impl ProcGrid {
    /// Total number of ranks (a parsed or chosen grid has at most
    /// [`MAX_RANKS`], so this cannot overflow).
    pub fn ranks(&self) -> usize {
        self.p.iter().product()
    }

    /// Checks that this process grid fits `ranks` ranks and gives every rank
    /// at least one interior point of `grid`.
    pub fn validate(&self, grid: &Grid, ranks: usize) -> Result<()> {
        if self.ranks() != ranks {
            return Err(Error::usage(format!(
                "process grid {self} has {} ranks but the job has {ranks}: \
                 pass --procs with PI*PJ*PK = {ranks}, or omit it to choose automatically",
                self.ranks()
            )));
        }
        for d in 0..3 {
            let interior = grid.n[d] - 2;
            if self.p[d] > interior {
                return Err(Error::usage(format!(
                    "process grid {self} splits dimension {} ({} interior points) into {} \
                     parts: some ranks would own no interior point; use fewer ranks along it",
                    ["i", "j", "k"][d],
                    interior,
                    self.p[d]
                )));
            }
        }
        Ok(())
    }

    /// Chooses the process grid for `ranks` ranks that minimises the total
    /// halo surface exchanged per iteration, every value counted alike (the
    /// choice for CPU ranks). Ties prefer splitting i, then j (their faces
    /// are contiguous or nearly so in memory).
    pub fn auto(grid: &Grid, ranks: usize) -> Result<ProcGrid> {
        ProcGrid::auto_weighted(grid, ranks, FaceWeights::UNIFORM)
    }

    /// Chooses the process grid for `ranks` ranks that minimises the halo
    /// surface exchanged per iteration, each face's values counted with the
    /// weight of the dimension normal to it. Ties prefer splitting i, then
    /// j.
    pub fn auto_weighted(grid: &Grid, ranks: usize, weights: FaceWeights) -> Result<ProcGrid> {
        let cannot = || {
            Error::usage(format!(
                "{ranks} ranks cannot share grid {grid}: every rank needs at least one \
                 interior point; use fewer ranks or a larger grid"
            ))
        };
        if ranks > MAX_RANKS {
            return Err(Error::usage(format!(
                "{ranks} ranks are more than the {MAX_RANKS} supported: use fewer ranks"
            )));
        }
        if ranks as u64 > grid.interior_points() {
            return Err(cannot());
        }
        let interior = grid.interior();
        let mut best: Option<(u128, ProcGrid)> = None;
        for pi in divisors(ranks) {
            for pj in divisors(ranks / pi) {
                let pk = ranks / pi / pj;
                let cand = ProcGrid { p: [pi, pj, pk] };
                if (0..3).any(|d| cand.p[d] > interior[d]) {
                    continue;
                }
                let cost = cand.weighted_surface(grid, weights);
                // Iteration order (pi ascending, pj ascending) plus `<=` keeps
                // the last of equal-cost candidates: the one splitting i most.
                if best.is_none_or(|(c, _)| cost <= c) {
                    best = Some((cost, cand));
                }
            }
        }
        best.map(|(_, g)| g).ok_or_else(cannot)
    }

    /// Checks that a halo `depth` layers deep can be filled on this process
    /// grid: every block must own at least `depth` points along each split
    /// dimension, because each face message carries the `depth` owned
    /// layers next to the face (a thinner neighbour would have to forward
    /// layers it has not received yet).
    pub fn check_depth(&self, grid: &Grid, depth: usize) -> Result<()> {
        for d in 0..3 {
            if self.p[d] == 1 {
                continue;
            }
            // The split gives the first `n % p` blocks one point more, so
            // the thinnest block owns `n / p`.
            let thinnest = (grid.n[d] - 2) / self.p[d];
            if thinnest < depth {
                return Err(Error::usage(format!(
                    "--temporal {depth} needs blocks at least {depth} points thick along every \
                     split dimension, but process grid {self} leaves blocks of {thinnest} \
                     point(s) along {}: use --temporal {thinnest} or less, or fewer ranks \
                     along {}",
                    ["i", "j", "k"][d],
                    ["i", "j", "k"][d],
                )));
            }
        }
        Ok(())
    }

    /// Points exchanged per iteration over all internal faces.
    pub fn halo_surface(&self, grid: &Grid) -> u128 {
        self.weighted_surface(grid, FaceWeights::UNIFORM)
    }

    /// Points exchanged per iteration over all internal faces, those of
    /// faces normal to dimension `d` counted `weights.0[d]` times.
    pub fn weighted_surface(&self, grid: &Grid, weights: FaceWeights) -> u128 {
        let n = grid.n;
        let face = [n[1] * n[2], n[0] * n[2], n[0] * n[1]];
        (0..3)
            .map(|d| (self.p[d] as u128 - 1) * face[d] as u128 * u128::from(weights.0[d]))
            .sum()
    }

    /// Process coordinates of `rank`.
    pub fn coords(&self, rank: usize) -> [usize; 3] {
        let [_, pj, pk] = self.p;
        [rank / (pj * pk), (rank / pk) % pj, rank % pk]
    }

    /// Rank at process coordinates `c`.
    pub fn rank_of(&self, c: [usize; 3]) -> usize {
        (c[0] * self.p[1] + c[1]) * self.p[2] + c[2]
    }
}

/// The relative cost of exchanging one value through a face, by the
/// dimension normal to the face (i, j, k), for choosing the process grid.
/// Which backend moves the values decides it; this module only weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaceWeights(pub [u32; 3]);

impl FaceWeights {
    /// Every value costs the same: what the CPU backend's copies cost
    /// within the noise, and the choice made before weights existed.
    pub const UNIFORM: FaceWeights = FaceWeights([1, 1, 1]);

    /// Faces normal to k weighed 4x: what a GPU pays for them (one value
    /// per row, uncoalesced), and what CPU ranks that block in time pay:
    /// the wavefront updates up to T - 1 points of every row in the k
    /// ghost layers, off the row kernel's blocks, and its rows get shorter
    /// (two ranks at size M, T = 8: compute 1.2-1.5x an i split's;
    /// notes/cpu-perf.md, twenty-second session).
    pub const DEAR_K: FaceWeights = FaceWeights([1, 1, 4]);
}

/// Positive divisors of `n`, ascending, found by trial division up to the
/// square root (4096 steps for [`MAX_RANKS`]).
fn divisors(n: usize) -> Vec<usize> {
    let mut low = Vec::new();
    let mut high = Vec::new();
    let mut d = 1;
    while d <= n / d {
        if n.is_multiple_of(d) {
            low.push(d);
            if d != n / d {
                high.push(n / d);
            }
        }
        d += 1;
    }
    low.extend(high.into_iter().rev());
    low
}

/// One rank's block of the global interior.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// Process coordinates of the owner.
    pub coords: [usize; 3],
    /// Global index of the first owned interior point per dimension (>= 1).
    pub lo: [usize; 3],
    /// Owned interior points per dimension (>= 1).
    pub n: [usize; 3],
    /// Rank of the neighbour below (`[d][0]`) and above (`[d][1]`) in each
    /// dimension, if any.
    pub neighbours: [[Option<usize>; 2]; 3],
    /// Ghost layers on each side that has a neighbour: 1 for the classic
    /// iteration, `T` for temporal blocking (`T` sweeps between two
    /// exchanges). A side on the grid's edge always has one layer, the
    /// fixed boundary.
    pub depth: usize,
}

impl Block {
    /// The block of `rank` in `procs` over `grid` (both validated).
    pub fn of(grid: &Grid, procs: &ProcGrid, rank: usize) -> Block {
        let coords = procs.coords(rank);
        let mut lo = [0; 3];
        let mut n = [0; 3];
        let mut neighbours = [[None; 2]; 3];
        for d in 0..3 {
            let (start, len) = split(grid.n[d] - 2, procs.p[d], coords[d]);
            lo[d] = 1 + start;
            n[d] = len;
            let mut c = coords;
            if coords[d] > 0 {
                c[d] = coords[d] - 1;
                neighbours[d][0] = Some(procs.rank_of(c));
            }
            if coords[d] + 1 < procs.p[d] {
                c[d] = coords[d] + 1;
                neighbours[d][1] = Some(procs.rank_of(c));
            }
        }
        Block {
            coords,
            lo,
            n,
            neighbours,
            depth: 1,
        }
    }

    /// This block with `depth` ghost layers on each side that has a
    /// neighbour (at least 1).
    pub fn with_depth(self, depth: usize) -> Block {
        Block {
            depth: depth.max(1),
            ..self
        }
    }

    /// Layers outside the owned points on `side` of dimension `d`: `depth`
    /// ghost layers towards a neighbour, the one boundary layer at the
    /// grid's edge.
    pub fn halo(&self, d: usize, side: usize) -> usize {
        if self.neighbours[d][side].is_some() {
            self.depth
        } else {
            1
        }
    }

    /// Local index of the first owned point along dimension `d`.
    pub fn origin(&self, d: usize) -> usize {
        self.halo(d, 0)
    }

    /// Local indices of the owned points along dimension `d`.
    pub fn owned(&self, d: usize) -> Range<usize> {
        self.origin(d)..self.origin(d) + self.n[d]
    }

    /// Local array extents: owned points plus the layers on each side (ghost
    /// layers from a neighbour, or the global boundary).
    pub fn local_dims(&self) -> [usize; 3] {
        std::array::from_fn(|d| self.halo(d, 0) + self.n[d] + self.halo(d, 1))
    }

    /// Global index of local index `l` along dimension `d`.
    pub fn global(&self, d: usize, l: usize) -> usize {
        self.lo[d] - self.origin(d) + l
    }

    /// Owned interior points.
    pub fn points(&self) -> u64 {
        self.n.iter().map(|&v| v as u64).product()
    }

    /// The faces this block exchanges and the neighbour behind each, in the
    /// halo schedule's order: dimension k, then j, then i (each later step
    /// forwards the ghosts an earlier one received, which fills the edges),
    /// the low side before the high side within a dimension.
    pub fn halo_faces(&self) -> impl Iterator<Item = (Face, usize)> + '_ {
        EXCHANGE_ORDER.into_iter().flat_map(move |dim| {
            (0..2).filter_map(move |side| {
                self.neighbours[dim][side].map(|peer| (Face { dim, side }, peer))
            })
        })
    }
}

/// Dimensions in the order the halo schedule exchanges them: k, j, i.
pub const EXCHANGE_ORDER: [usize; 3] = [2, 1, 0];

/// One face of a block: dimension `dim` (0 = i, 1 = j, 2 = k) and `side`
/// (0 = towards lower indices, 1 = towards higher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Face {
    /// Dimension normal to the face.
    pub dim: usize,
    /// 0 for the low side, 1 for the high side.
    pub side: usize,
}

impl Face {
    /// Number of values in one layer of this face of a block with local
    /// extents `dims` (the full extents of the other two dimensions, ghosts
    /// included, so that exchanging dimension by dimension fills edge and
    /// corner ghosts at any depth). A message carries `depth` layers.
    pub fn len(&self, dims: [usize; 3]) -> usize {
        (0..3).filter(|&d| d != self.dim).map(|d| dims[d]).product()
    }

    /// Local indices of the `depth` owned planes sent through this face (a
    /// face exists only towards a neighbour, so its side has `depth` ghost
    /// layers).
    pub fn send_planes(&self, dims: [usize; 3], depth: usize) -> Range<usize> {
        if self.side == 0 {
            depth..2 * depth
        } else {
            dims[self.dim] - 2 * depth..dims[self.dim] - depth
        }
    }

    /// Local indices of the `depth` ghost planes this face's message is
    /// written to.
    pub fn ghost_planes(&self, dims: [usize; 3], depth: usize) -> Range<usize> {
        if self.side == 0 {
            0..depth
        } else {
            dims[self.dim] - depth..dims[self.dim]
        }
    }

    /// Local index of the owned plane sent through this face of a block
    /// with one ghost layer.
    pub fn send_plane(&self, dims: [usize; 3]) -> usize {
        self.send_planes(dims, 1).start
    }

    /// Local index of the ghost plane this face's message is written to, in
    /// a block with one ghost layer.
    pub fn ghost_plane(&self, dims: [usize; 3]) -> usize {
        self.ghost_planes(dims, 1).start
    }
}

/// Start offset and length of part `c` when `n` items are split in `p` parts,
/// the first `n % p` parts one larger.
pub fn split(n: usize, p: usize, c: usize) -> (usize, usize) {
    let base = n / p;
    let rem = n % p;
    let len = base + usize::from(c < rem);
    let start = c * base + c.min(rem);
    (start, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_everything_once() {
        for n in 1..40 {
            for p in 1..=n {
                let mut next = 0;
                for c in 0..p {
                    let (s, l) = split(n, p, c);
                    assert_eq!(s, next);
                    assert!(l >= 1);
                    next = s + l;
                }
                assert_eq!(next, n);
            }
        }
    }

    #[test]
    fn auto_prefers_small_surface() {
        let g = Grid::new([128, 128, 256]).unwrap();
        assert_eq!(ProcGrid::auto(&g, 1).unwrap().p, [1, 1, 1]);
        assert_eq!(ProcGrid::auto(&g, 2).unwrap().p, [1, 1, 2]);
        assert_eq!(ProcGrid::auto(&g, 8).unwrap().p, [2, 2, 2]);
        let thin = Grid::new([3, 3, 100]).unwrap();
        assert_eq!(ProcGrid::auto(&thin, 4).unwrap().p, [1, 1, 4]);
        assert!(ProcGrid::auto(&Grid::new([3, 3, 3]).unwrap(), 2).is_err());
    }

    #[test]
    fn weights_move_the_split_and_uniform_weights_change_nothing() {
        let l = Grid::new([256, 256, 512]).unwrap();
        for ranks in [1, 2, 3, 4, 6, 8, 12, 16, 64] {
            assert_eq!(
                ProcGrid::auto(&l, ranks).unwrap(),
                ProcGrid::auto_weighted(&l, ranks, FaceWeights::UNIFORM).unwrap(),
                "{ranks} ranks"
            );
        }
        // Faces normal to k made dear: k is split last.
        let dear_k = FaceWeights([1, 1, 4]);
        assert_eq!(ProcGrid::auto(&l, 2).unwrap().p, [1, 1, 2]);
        assert_eq!(ProcGrid::auto_weighted(&l, 2, dear_k).unwrap().p, [2, 1, 1]);
        let pg = ProcGrid { p: [1, 1, 2] };
        assert_eq!(pg.weighted_surface(&l, dear_k), 4 * pg.halo_surface(&l));
    }

    #[test]
    fn divisors_and_huge_rank_counts() {
        assert_eq!(divisors(1), [1]);
        assert_eq!(divisors(12), [1, 2, 3, 4, 6, 12]);
        assert_eq!(divisors(49), [1, 7, 49]);
        for n in 1..500 {
            let slow: Vec<usize> = (1..=n).filter(|d| n % d == 0).collect();
            assert_eq!(divisors(n), slow, "{n}");
        }
        let g = Grid::new([5, 5, 5]).unwrap();
        assert!(ProcGrid::auto(&g, 1_000_000_000_000).is_err());
        assert!(ProcGrid::auto(&g, 28).is_err(), "27 interior points");
        let big = Grid::new([1 << 20, 1 << 20, 1 << 20]).unwrap();
        assert_eq!(ProcGrid::auto(&big, MAX_RANKS).unwrap().ranks(), MAX_RANKS);
        for bad in [
            "4294967296x4294967296x2",
            "65536x65536x65536",
            "4097x4096x1",
        ] {
            let err = bad.parse::<ProcGrid>().unwrap_err();
            assert!(err.to_string().contains("more than"), "{bad}: {err}");
        }
        assert_eq!(
            "4096x4096x1".parse::<ProcGrid>().unwrap().ranks(),
            MAX_RANKS
        );
    }

    #[test]
    fn neighbours_are_symmetric() {
        let g = Grid::new([20, 21, 22]).unwrap();
        let pg = ProcGrid { p: [2, 3, 2] };
        for r in 0..pg.ranks() {
            let b = Block::of(&g, &pg, r);
            for d in 0..3 {
                if let Some(up) = b.neighbours[d][1] {
                    assert_eq!(Block::of(&g, &pg, up).neighbours[d][0], Some(r));
                    assert_eq!(Block::of(&g, &pg, up).lo[d], b.lo[d] + b.n[d]);
                }
            }
        }
    }

    #[test]
    fn halo_faces_follow_the_schedule() {
        let g = Grid::new([20, 21, 22]).unwrap();
        let pg = ProcGrid { p: [3, 1, 2] };
        // Rank 2 sits at coords (1, 0, 0): a neighbour above in k, and
        // both i neighbours (ranks 0 and 4).
        let b = Block::of(&g, &pg, 2);
        let faces: Vec<(usize, usize, usize)> = b
            .halo_faces()
            .map(|(f, peer)| (f.dim, f.side, peer))
            .collect();
        assert_eq!(faces, [(2, 1, 3), (0, 0, 0), (0, 1, 4)]);
        let alone = Block::of(&g, &ProcGrid { p: [1, 1, 1] }, 0);
        assert_eq!(alone.halo_faces().count(), 0);
    }

    #[test]
    fn deep_halos_shift_the_owned_points_and_only_towards_neighbours() {
        let g = Grid::new([20, 21, 22]).unwrap();
        let pg = ProcGrid { p: [3, 1, 2] };
        // Rank 2 at (1, 0, 0): neighbours on both i sides and above in k.
        let b = Block::of(&g, &pg, 2).with_depth(3);
        assert_eq!(b.n, [6, 19, 10]);
        assert_eq!(b.local_dims(), [3 + 6 + 3, 1 + 19 + 1, 1 + 10 + 3]);
        assert_eq!((b.origin(0), b.origin(1), b.origin(2)), (3, 1, 1));
        assert_eq!(b.owned(0), 3..9);
        // The first owned point keeps its global index at any depth.
        let one = Block::of(&g, &pg, 2);
        for d in 0..3 {
            assert_eq!(b.global(d, b.origin(d)), one.global(d, one.origin(d)));
        }
        let dims = b.local_dims();
        let low = Face { dim: 0, side: 0 };
        let high = Face { dim: 0, side: 1 };
        assert_eq!(
            (low.send_planes(dims, 3), low.ghost_planes(dims, 3)),
            (3..6, 0..3)
        );
        assert_eq!(
            (high.send_planes(dims, 3), high.ghost_planes(dims, 3)),
            (6..9, 9..12)
        );
        assert_eq!(high.send_plane(one.local_dims()), one.local_dims()[0] - 2);
    }

    #[test]
    fn check_depth_refuses_blocks_thinner_than_the_halo() {
        // 10 interior points along i over 3 ranks: blocks of 4, 3 and 3.
        let g = Grid::new([12, 5, 5]).unwrap();
        let pg = ProcGrid { p: [3, 1, 1] };
        assert!(pg.check_depth(&g, 3).is_ok());
        let err = pg.check_depth(&g, 4).unwrap_err().to_string();
        assert!(err.contains("--temporal 3 or less"), "{err}");
        // Unsplit dimensions are never too thin: their edges are boundary.
        assert!(ProcGrid { p: [1, 1, 1] }.check_depth(&g, 8).is_ok());
    }

    #[test]
    fn validate_rejects_mismatch_and_empty_blocks() {
        let g = Grid::new([4, 10, 10]).unwrap();
        assert!(ProcGrid { p: [2, 1, 1] }.validate(&g, 2).is_ok());
        assert!(ProcGrid { p: [2, 1, 1] }.validate(&g, 4).is_err());
        assert!(ProcGrid { p: [3, 1, 1] }.validate(&g, 3).is_err());
    }
}
