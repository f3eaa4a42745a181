//! The GPU launch plan replayed on the host (`himeno::backend::gpu::launch`):
//! the sweep kernel's index math (`emulate_sweep_thread`), random block
//! layouts and the coverage check, shared by the fast tests of the launch
//! plan (`tests/it/gpu_emu.rs`) and the long coverage sweep of the system
//! tier.

use himeno::backend::gpu::launch::{self, Arg, Shape, SweepBuffers, SweepLaunch, SweepPlan, Value};
use himeno::backend::gpu::layout::FieldLayout;
use himeno::grid::Grid;
use himeno::grid::decomp::{Block, ProcGrid};
use himeno::grid::fields::COEFFICIENTS;
use ndarray::Array3;

/// SplitMix64: a small reproducible generator (the seed is in every
/// failure message).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}

/// Dummy device addresses: distinct, 256-byte aligned, far apart.
pub(crate) fn buffers() -> SweepBuffers {
    let base = |n: u64| 0x7f00_0000_0000 + (n << 36);
    let mut coef = [0u64; COEFFICIENTS];
    for (c, a) in coef.iter_mut().enumerate() {
        *a = base(2 + c as u64);
    }
    SweepBuffers {
        p: base(0),
        out: base(1),
        coef,
        partial: base(20),
        ticket: base(21),
        gosa: base(21) + 8,
    }
}

/// The integer value of argument `name` in `args`.
pub(crate) fn int(args: &[Arg], name: &str) -> i64 {
    match args.iter().find(|a| a.name == name).map(|a| a.value) {
        Some(Value::I32(v)) => i64::from(v),
        Some(Value::I64(v)) => v,
        other => panic!("argument {name}: {other:?}"),
    }
}

/// The device address in argument `name` of `args`.
pub(crate) fn ptr(args: &[Arg], name: &str) -> u64 {
    match args.iter().find(|a| a.name == name).map(|a| a.value) {
        Some(Value::Ptr(v)) => v,
        other => panic!("argument {name}: {other:?}"),
    }
}

/// What one thread of `sweep` does: the point (k, j) and the i-range it
/// marches through, or `None` when it is masked off.
#[derive(Debug, Clone)]
pub(crate) struct SweepThread {
    pub(crate) k: i64,
    pub(crate) j: i64,
    pub(crate) i: std::ops::Range<i64>,
}

/// Block `b`, thread (tx, ty) of `sweep` launched with `shape` and
/// `args`, as kernels.cu computes it.
pub(crate) fn emulate_sweep_thread(
    shape: &Shape,
    args: &[Arg],
    b: u32,
    tx: u32,
    ty: u32,
) -> Option<SweepThread> {
    let [bdx, bdy, _] = shape.block;
    let (nkb, njb) = (int(args, "nkb"), int(args, "njb"));
    let (i0, j0, k0) = (int(args, "i0"), int(args, "j0"), int(args, "k0"));
    let (ni, nj, nk) = (int(args, "ni"), int(args, "nj"), int(args, "nk"));
    let planes = int(args, "planes");
    let b = i64::from(b);
    let kt = b % nkb;
    let jt = (b / nkb) % njb;
    let it = b / (nkb * njb);
    let k = k0 + kt * i64::from(bdx) + i64::from(tx);
    let j = j0 + jt * i64::from(bdy) + i64::from(ty);
    let ifirst = i0 + it * planes;
    let iend = (ifirst + planes).min(i0 + ni);
    (k < k0 + nk && j < j0 + nj && ifirst < iend).then_some(SweepThread {
        k,
        j,
        i: ifirst..iend,
    })
}

/// The sweep launches of a block with or without overlap.
pub(crate) fn launches(plan: &SweepPlan, overlap: bool) -> Vec<SweepLaunch> {
    if overlap {
        plan.boundary
            .iter()
            .chain(&plan.interior)
            .copied()
            .collect()
    } else {
        plan.whole.clone()
    }
}

/// Random small process grids and grids, including one-wide and odd
/// blocks: `(grid, procs)`.
pub(crate) fn random_layouts(rng: &mut Rng, count: usize) -> Vec<(Grid, ProcGrid)> {
    let mut out = Vec::new();
    while out.len() < count {
        let p = [rng.range(1, 3), rng.range(1, 3), rng.range(1, 3)];
        // Interior per dimension: from one point per rank (one-wide
        // blocks) to a few tiles.
        let n = [
            p[0] * rng.range(1, 20),
            p[1] * rng.range(1, 11),
            p[2] * rng.range(1, 40),
        ];
        if let Ok(g) = Grid::new([n[0] + 2, n[1] + 2, n[2] + 2]) {
            out.push((g, ProcGrid { p }));
        }
    }
    out
}

/// Counts, per local point of `block`, the sweep threads of `ls` that
/// update it; checks the partial-sum slots on the way.
pub(crate) fn coverage(block: &Block, ls: &[SweepLaunch], partials: usize) -> Array3<u8> {
    let dims = block.local_dims();
    let b = buffers();
    let mut hits = Array3::<u8>::zeros((dims[0], dims[1], dims[2]));
    let mut slots = Vec::new();
    for l in ls {
        let args = launch::sweep_args(&b, &FieldLayout::exact(dims), l, partials);
        let shape = l.shape();
        assert_eq!(
            shape.block[0] * shape.block[1],
            launch::SWEEP_THREADS,
            "{l:?}"
        );
        let first = (ptr(&args, "partial") - b.partial) / 8;
        for blk in 0..shape.grid[0] {
            slots.push(first + u64::from(blk));
            for ty in 0..shape.block[1] {
                for tx in 0..shape.block[0] {
                    if let Some(t) = emulate_sweep_thread(&shape, &args, blk, tx, ty) {
                        for i in t.i {
                            hits[[i as usize, t.j as usize, t.k as usize]] += 1;
                        }
                    }
                }
            }
        }
    }
    // Partial-sum slots: contiguous from 0, disjoint, inside the buffer.
    slots.sort_unstable();
    let expect: Vec<u64> = (0..slots.len() as u64).collect();
    assert_eq!(slots, expect, "partial slots of {block:?}");
    assert!(
        slots.len() <= partials,
        "{} slots, buffer of {partials}",
        slots.len()
    );
    hits
}

/// Asserts that `hits` is 1 on every owned point of `block` and 0 on every
/// ghost.
pub(crate) fn assert_exactly_once(block: &Block, hits: &Array3<u8>, what: &str) {
    for ((i, j, k), &h) in hits.indexed_iter() {
        let owned = [i, j, k]
            .iter()
            .zip(block.n)
            .all(|(&x, n)| x >= 1 && x <= n);
        assert_eq!(
            h,
            u8::from(owned),
            "{what}: point ({i},{j},{k}) updated {h} times"
        );
    }
}
