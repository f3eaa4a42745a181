//! Properties of the GPU launch plan (`himeno::backend::gpu::launch`), in
//! every build and without a GPU, that the runs on the emulated device
//! (`emulated_gpu.rs`, which execute the real kernels) cannot afford or do
//! not see: that the sweep launches cover every owned point of large and
//! random blocks exactly once (the index math of the sweep kernel replayed
//! here, `emulate_sweep_thread`), that thin slabs keep lanes busy, that
//! the grid-stride launches cover any length, and that the launch
//! constants have one home. Face copies, the gosa reduction and the
//! kernels' argument lists are checked by the real kernels on the
//! emulated device.

use himeno::backend::gpu::launch::{
    self, Arg, SOURCE, Shape, SweepBuffers, SweepLaunch, SweepPlan, Value,
};
use himeno::grid::Grid;
use himeno::grid::decomp::{Block, ProcGrid};
use himeno::grid::fields::COEFFICIENTS;
use ndarray::Array3;

/// SplitMix64: a small reproducible generator (the seed is in every
/// failure message).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}

/// Dummy device addresses: distinct, 256-byte aligned, far apart.
fn buffers() -> SweepBuffers {
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
    }
}

/// The integer value of argument `name` in `args`.
fn int(args: &[Arg], name: &str) -> i64 {
    match args.iter().find(|a| a.name == name).map(|a| a.value) {
        Some(Value::I32(v)) => i64::from(v),
        Some(Value::I64(v)) => v,
        other => panic!("argument {name}: {other:?}"),
    }
}

/// The device address in argument `name` of `args`.
fn ptr(args: &[Arg], name: &str) -> u64 {
    match args.iter().find(|a| a.name == name).map(|a| a.value) {
        Some(Value::Ptr(v)) => v,
        other => panic!("argument {name}: {other:?}"),
    }
}

/// What one thread of `sweep` does: the point (k, j) and the i-range it
/// marches through, or `None` when it is masked off.
#[derive(Debug, Clone)]
struct SweepThread {
    k: i64,
    j: i64,
    i: std::ops::Range<i64>,
}

/// Block `b`, thread (tx, ty) of `sweep` launched with `shape` and
/// `args`, as kernels.cu computes it.
fn emulate_sweep_thread(
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
fn launches(plan: &SweepPlan, overlap: bool) -> Vec<SweepLaunch> {
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
fn random_layouts(rng: &mut Rng, count: usize) -> Vec<(Grid, ProcGrid)> {
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
fn coverage(block: &Block, ls: &[SweepLaunch], partials: usize) -> Array3<u8> {
    let dims = block.local_dims();
    let b = buffers();
    let mut hits = Array3::<u8>::zeros((dims[0], dims[1], dims[2]));
    let mut slots = Vec::new();
    for l in ls {
        let args = launch::sweep_args(&b, dims, l);
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
fn assert_exactly_once(block: &Block, hits: &Array3<u8>, what: &str) {
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

#[test]
fn gpu_emu_thin_slabs_keep_lanes_busy() {
    // A k split under overlap: the k slabs are one point wide. Their
    // launches must not leave 31 of 32 lanes idle.
    let grid = Grid::new([66, 130, 258]).unwrap();
    let procs = ProcGrid { p: [1, 1, 2] };
    let block = Block::of(&grid, &procs, 0);
    let plan = SweepPlan::of(&block).unwrap();
    for l in &plan.boundary {
        let b = buffers();
        let args = launch::sweep_args(&b, block.local_dims(), l);
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
        // 128 j-values of 256 lanes in the k slab; whole warps elsewhere.
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
