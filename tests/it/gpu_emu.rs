//! The GPU kernels emulated on the host (the `gpu_emu_*` tests), in every
//! build and without a GPU: the index math of `kernels.cu` replayed over
//! the launch shapes and argument lists the backend uses
//! (`himeno::backend::gpu::launch`), against the CPU's reference.
//!
//! Each `emulate_*` function below transcribes one kernel of `kernels.cu`
//! line for line, reading its parameters by name from the launcher's
//! argument list; `gpu_emu_kernel_signatures_match_the_launchers` ties
//! those lists to the kernels' declarations.

use himeno::backend::api::{pack_plane, unpack_plane};
use himeno::backend::gpu::launch::{
    self, Arg, FaceCopy, KERNELS, SOURCE, Shape, SweepBuffers, SweepLaunch, SweepPlan, Value,
};
use himeno::grid::Grid;
use himeno::grid::decomp::{Block, Face, ProcGrid};
use himeno::grid::fields::{COEFFICIENTS, Fields, OMEGA, coef};
use himeno::verify::reference_sweep;
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
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
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

/// `face_offset` of kernels.cu.
fn face_offset(dim: i64, plane: i64, a: i64, b: i64, d1: i64, d2: i64) -> i64 {
    match dim {
        0 => (plane * d1 + a) * d2 + b,
        1 => (a * d1 + plane) * d2 + b,
        _ => (a * d1 + b) * d2 + plane,
    }
}

/// The (buffer index, field offset) pairs a face kernel launched with
/// `args` visits, in its grid-stride order.
fn emulate_face(args: &[Arg]) -> Vec<(usize, usize)> {
    let n = int(args, "n");
    let s = launch::flat(n as usize);
    let threads = i64::from(s.grid[0] * s.block[0]);
    let (dim, plane, nb) = (int(args, "dim"), int(args, "plane"), int(args, "nb"));
    let (d1, d2) = (int(args, "d1"), int(args, "d2"));
    let mut out = Vec::new();
    for t0 in 0..threads {
        let mut t = t0;
        while t < n {
            let off = face_offset(dim, plane, t / nb, t % nb, d1, d2);
            out.push((t as usize, off as usize));
            t += threads;
        }
    }
    out
}

#[test]
fn gpu_emu_face_copies_match_pack_and_unpack_plane() {
    let seed = 0x5EED_0002;
    let mut rng = Rng(seed);
    for _ in 0..30 {
        let dims = [
            2 * rng.range(1, 7) + 1,
            2 * rng.range(1, 7) + 1,
            2 * rng.range(1, 20) + 1,
        ];
        let field = Array3::from_shape_fn((dims[0], dims[1], dims[2]), |(i, j, k)| {
            ((i * dims[1] + j) * dims[2] + k) as f32 + 0.5
        });
        let flat: Vec<f32> = field.iter().copied().collect();
        for dim in 0..3 {
            for side in 0..2 {
                let face = Face { dim, side };
                let what = format!("seed {seed:#x} dims {dims:?} face {face:?}");
                let len = face.len(dims);
                // Pack: the device's buffer against pack_plane.
                let mut want = vec![0.0f32; len];
                pack_plane(field.view(), face, &mut want);
                let c = FaceCopy::of(face, dims, true);
                assert_eq!(c.len, len, "{what}");
                let mut got = vec![f32::NAN; len];
                match c.contiguous {
                    Some(off) => got.copy_from_slice(&flat[off..off + len]),
                    None => {
                        assert!(len <= launch::face_capacity(dims), "{what}");
                        let args = launch::face_args(1 << 40, 2 << 40, &c, dims);
                        for (t, off) in emulate_face(&args) {
                            assert!(got[t].is_nan(), "{what}: buffer index {t} written twice");
                            got[t] = flat[off];
                        }
                    }
                }
                assert_eq!(got, want, "{what}: pack");
                // Unpack: a message of fresh values into the ghost plane.
                let msg: Vec<f32> = (0..len).map(|x| -(x as f32) - 1.0).collect();
                let mut want_field = field.clone();
                unpack_plane(want_field.view_mut(), face, &msg);
                let c = FaceCopy::of(face, dims, false);
                let mut got_flat = flat.clone();
                match c.contiguous {
                    Some(off) => got_flat[off..off + len].copy_from_slice(&msg),
                    None => {
                        let args = launch::face_args(1 << 40, 2 << 40, &c, dims);
                        for (t, off) in emulate_face(&args) {
                            got_flat[off] = msg[t];
                        }
                    }
                }
                let want_flat: Vec<f32> = want_field.iter().copied().collect();
                assert_eq!(got_flat, want_flat, "{what}: unpack");
            }
        }
    }
}

/// Fields of `grid` with random values everywhere (p and every
/// coefficient), so every point's residual differs.
fn random_fields(grid: &Grid, rng: &mut Rng) -> Fields {
    let block = Block::of(grid, &ProcGrid { p: [1, 1, 1] }, 0);
    let mut f = Fields::initial(grid, &block).expect("a small grid fits in memory");
    for v in f.p.iter_mut() {
        *v = rng.unit();
    }
    for c in f.coef.iter_mut() {
        for v in c.iter_mut() {
            *v = 0.5 + rng.unit();
        }
    }
    f
}

/// The squared residual of every point of `f` as the reference computes
/// it (f32, then widened), by global index; zero on the boundary.
fn residuals(f: &Fields) -> Array3<f64> {
    let p = &f.p;
    let (ni, nj, nk) = p.dim();
    let c = &f.coef;
    let mut out = Array3::zeros((ni, nj, nk));
    for i in 1..ni - 1 {
        for j in 1..nj - 1 {
            for k in 1..nk - 1 {
                let at = |x: usize| c[x][[i, j, k]];
                let s0 = at(coef::A0) * p[[i + 1, j, k]]
                    + at(coef::A1) * p[[i, j + 1, k]]
                    + at(coef::A2) * p[[i, j, k + 1]]
                    + at(coef::B0)
                        * (p[[i + 1, j + 1, k]] - p[[i + 1, j - 1, k]] - p[[i - 1, j + 1, k]]
                            + p[[i - 1, j - 1, k]])
                    + at(coef::B1)
                        * (p[[i, j + 1, k + 1]] - p[[i, j - 1, k + 1]] - p[[i, j + 1, k - 1]]
                            + p[[i, j - 1, k - 1]])
                    + at(coef::B2)
                        * (p[[i + 1, j, k + 1]] - p[[i - 1, j, k + 1]] - p[[i + 1, j, k - 1]]
                            + p[[i - 1, j, k - 1]])
                    + at(coef::C0) * p[[i - 1, j, k]]
                    + at(coef::C1) * p[[i, j - 1, k]]
                    + at(coef::C2) * p[[i, j, k - 1]]
                    + at(coef::WRK1);
                let ss = (s0 * at(coef::A3) - p[[i, j, k]]) * at(coef::BND);
                out[[i, j, k]] = f64::from(ss * ss);
            }
        }
    }
    out
}

/// `block_sum` of kernels.cu over per-thread values `v` (thread t =
/// threadIdx.y * blockDim.x + threadIdx.x): a shuffle-down tree in each
/// warp, then the same tree over the warp sums in warp 0.
fn emulate_block_sum(v: &[f64]) -> f64 {
    let w = launch::WARP as usize;
    let tree = |lanes: &mut [f64]| {
        let mut off = w / 2;
        while off > 0 {
            let old = lanes.to_vec();
            for l in 0..w {
                // __shfl_down_sync returns the caller's own value past the
                // last lane.
                lanes[l] += if l + off < w { old[l + off] } else { old[l] };
            }
            off /= 2;
        }
        lanes[0]
    };
    let warps = v.len().div_ceil(w);
    assert!(warps <= launch::MAX_WARPS as usize);
    let sums: Vec<f64> = v
        .chunks(w)
        .map(|c| {
            let mut lanes = vec![0.0; w];
            lanes[..c.len()].copy_from_slice(c);
            tree(&mut lanes)
        })
        .collect();
    let mut lanes = vec![0.0; w];
    lanes[..warps].copy_from_slice(&sums);
    tree(&mut lanes)
}

/// One rank's gosa as its GPU computes it: each sweep thread sums its
/// points' squared residuals in i order, each block reduces its threads
/// into its partial slot, and `reduce_partials` sums the slots.
fn emulate_rank_gosa(block: &Block, res: &Array3<f64>, plan: &SweepPlan, overlap: bool) -> f64 {
    let dims = block.local_dims();
    let b = buffers();
    let mut partial = vec![f64::NAN; plan.partials];
    for l in &launches(plan, overlap) {
        let args = launch::sweep_args(&b, dims, l);
        let shape = l.shape();
        let first = ((ptr(&args, "partial") - b.partial) / 8) as usize;
        for blk in 0..shape.grid[0] {
            let mut per_thread = Vec::new();
            for ty in 0..shape.block[1] {
                for tx in 0..shape.block[0] {
                    let mut g = 0.0f64;
                    if let Some(t) = emulate_sweep_thread(&shape, &args, blk, tx, ty) {
                        for i in t.i {
                            let gi = block.global(0, i as usize);
                            let gj = block.global(1, t.j as usize);
                            let gk = block.global(2, t.k as usize);
                            g += res[[gi, gj, gk]];
                        }
                    }
                    per_thread.push(g);
                }
            }
            partial[first + blk as usize] = emulate_block_sum(&per_thread);
        }
    }
    // reduce_partials: thread x sums slots x, x + 1024, ... in order.
    let args = launch::reduce_args(1 << 40, plan.used(overlap), 2 << 40);
    let n = int(&args, "n") as usize;
    let threads = launch::reduce_shape().block[0] as usize;
    let per_thread: Vec<f64> = (0..threads)
        .map(|x| (x..n).step_by(threads).fold(0.0, |v, s| v + partial[s]))
        .collect();
    assert!(
        partial[..n].iter().all(|v| !v.is_nan()),
        "a slot was never written"
    );
    emulate_block_sum(&per_thread)
}

#[test]
fn gpu_emu_reduction_replay_equals_the_cpu_gosa() {
    let seed = 0x5EED_0003;
    let mut rng = Rng(seed);
    let mut layouts = random_layouts(&mut rng, 12);
    // More partial sums than the reduction has threads.
    layouts.push((
        Grid::new([131, 67, 259]).unwrap(),
        ProcGrid { p: [1, 1, 1] },
    ));
    layouts.push((
        Grid::new([131, 67, 259]).unwrap(),
        ProcGrid { p: [2, 2, 1] },
    ));
    for (grid, procs) in &layouts {
        let f = random_fields(grid, &mut rng);
        let res = residuals(&f);
        let mut reference = f.clone();
        let want = reference_sweep(&mut reference);
        // The transcription above is the reference's, bit for bit.
        let (ni, nj, nk) = res.dim();
        let mut plain = 0.0f64;
        for i in 1..ni - 1 {
            for j in 1..nj - 1 {
                for k in 1..nk - 1 {
                    plain += res[[i, j, k]];
                }
            }
        }
        assert_eq!(
            plain.to_bits(),
            want.to_bits(),
            "seed {seed:#x} grid {grid}"
        );
        for overlap in [false, true] {
            let got: f64 = (0..procs.ranks())
                .map(|rank| {
                    let block = Block::of(grid, procs, rank);
                    let plan = SweepPlan::of(&block).unwrap();
                    emulate_rank_gosa(&block, &res, &plan, overlap)
                })
                .sum();
            let rel = (got - want).abs() / want.abs();
            assert!(
                rel <= 1e-12,
                "seed {seed:#x} grid {grid} procs {:?} overlap {overlap}: {got} vs {want} ({rel:e})",
                procs.p
            );
        }
    }
}

/// A kernel parameter's kind, as the launchers' [`Value`]s carry it.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Ptr(_) => "pointer",
        Value::I32(_) => "int",
        Value::I64(_) => "long long",
        Value::F32(_) => "float",
    }
}

/// Every `extern "C" __global__` kernel of `src`: its name and its
/// parameters as (kind, name).
fn declared_kernels(src: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let marker = "extern \"C\" __global__ void";
    let mut rest = src;
    while let Some(at) = rest.find(marker) {
        rest = &rest[at + marker.len()..];
        let open = rest.find('(').expect("a parameter list");
        let name = rest[..open]
            .split_whitespace()
            .last()
            .expect("a kernel name")
            .to_string();
        let close = rest.find(')').expect("a parameter list's end");
        let params = rest[open + 1..close]
            .split(',')
            .map(|p| {
                let words: Vec<&str> = p.split_whitespace().collect();
                let pname = words.last().expect("a parameter name").to_string();
                let ty = words[..words.len() - 1].join(" ");
                let kind = if ty.contains('*') {
                    "pointer"
                } else if ty == "long long" {
                    "long long"
                } else {
                    ty.as_str()
                };
                (kind.to_string(), pname)
            })
            .collect();
        out.push((name, params));
        rest = &rest[close..];
    }
    out
}

#[test]
fn gpu_emu_kernel_signatures_match_the_launchers() {
    let declared = declared_kernels(SOURCE);
    let names: Vec<&str> = declared.iter().map(|(n, _)| n.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    let mut want = KERNELS.to_vec();
    want.sort_unstable();
    assert_eq!(sorted, want, "kernels.cu defines {names:?}");
    let grid = Grid::new([9, 8, 40]).unwrap();
    let block = Block::of(&grid, &ProcGrid { p: [1, 1, 1] }, 0);
    let dims = block.local_dims();
    let plan = SweepPlan::of(&block).unwrap();
    let copy = FaceCopy::of(Face { dim: 2, side: 1 }, dims, true);
    let lists: [(&str, Vec<Arg>); 6] = [
        (
            "sweep",
            launch::sweep_args(&buffers(), dims, &plan.whole[0]),
        ),
        ("reduce_partials", launch::reduce_args(8, 3, 16)),
        ("pack_face", launch::face_args(8, 16, &copy, dims)),
        ("unpack_face", launch::face_args(8, 16, &copy, dims)),
        ("fill", launch::fill_args(8, 3, 1.0)),
        ("fill_planes", launch::fill_planes_args(8, 16, 4, 12)),
    ];
    for (kernel, args) in &lists {
        let (_, params) = declared
            .iter()
            .find(|(n, _)| n == kernel)
            .unwrap_or_else(|| panic!("{kernel} not in kernels.cu"));
        let got: Vec<(String, String)> = args
            .iter()
            .map(|a| (kind(&a.value).to_string(), a.name.to_string()))
            .collect();
        assert_eq!(&got, params, "{kernel}: launcher vs kernels.cu");
    }
    // The sweep's omega is the specification's.
    let omega = launch::sweep_args(&buffers(), dims, &plan.whole[0])
        .into_iter()
        .find(|a| a.name == "omega")
        .map(|a| a.value);
    assert_eq!(omega, Some(Value::F32(OMEGA)));
}

/// What the emulated driver says of a launch whose declared parameters
/// are `params` (kind, name) and whose argument slots are `slots`, the
/// end marker not included: one line per width or count mismatch.
fn slot_errors(params: &[(String, String)], slots: &[u64]) -> Vec<String> {
    let mut bad = Vec::new();
    if slots.len() != params.len() {
        bad.push(format!(
            "{} slots for {} parameters",
            slots.len(),
            params.len()
        ));
    }
    for ((kind, name), &slot) in params.iter().zip(slots) {
        let narrow = slot >> 32 == launch::CANARY;
        match (kind.as_str(), narrow) {
            ("int" | "float", false) => bad.push(format!("{name}: 8 bytes for a 4-byte {kind}")),
            ("pointer" | "long long", true) => {
                bad.push(format!("{name}: 4 bytes for an 8-byte {kind}"))
            }
            _ => {}
        }
    }
    bad
}

#[test]
fn gpu_emu_argument_slots_pass_the_emulated_drivers_width_check() {
    let declared = declared_kernels(SOURCE);
    let grid = Grid::new([9, 8, 40]).unwrap();
    let block = Block::of(&grid, &ProcGrid { p: [1, 1, 1] }, 0);
    let dims = block.local_dims();
    let plan = SweepPlan::of(&block).unwrap();
    let copy = FaceCopy::of(Face { dim: 1, side: 0 }, dims, true);
    let lists: [(&str, Vec<Arg>); 6] = [
        (
            "sweep",
            launch::sweep_args(&buffers(), dims, &plan.whole[0]),
        ),
        ("reduce_partials", launch::reduce_args(8, 3, 16)),
        ("pack_face", launch::face_args(8, 16, &copy, dims)),
        ("unpack_face", launch::face_args(8, 16, &copy, dims)),
        ("fill", launch::fill_args(8, 3, -1.5)),
        ("fill_planes", launch::fill_planes_args(8, 16, 4, 12)),
    ];
    for (kernel, args) in &lists {
        let (_, params) = declared.iter().find(|(n, _)| n == kernel).unwrap();
        let slots = launch::slots(args);
        assert_eq!(
            slot_errors(params, &slots),
            Vec::<String>::new(),
            "{kernel}"
        );
        // Each parameter read with its declared width is the value.
        for (a, &slot) in args.iter().zip(&slots) {
            let low = slot.to_le_bytes();
            let four: [u8; 4] = low[..4].try_into().unwrap();
            let same = match a.value {
                Value::Ptr(v) => slot == v,
                Value::I64(v) => i64::from_le_bytes(low) == v,
                Value::I32(v) => i32::from_le_bytes(four) == v,
                Value::F32(v) => f32::from_le_bytes(four).to_bits() == v.to_bits(),
            };
            assert!(same, "{kernel}: {} read back wrong from {slot:#x}", a.name);
        }
    }
    // The check catches a launcher that passes the wrong width or count.
    let (_, face) = declared.iter().find(|(n, _)| n == "pack_face").unwrap();
    let mut wrong = launch::face_args(8, 16, &copy, dims);
    wrong[2].value = Value::I64(1);
    wrong[3].value = Value::I32(2);
    assert_eq!(
        slot_errors(face, &launch::slots(&wrong)),
        [
            "dim: 8 bytes for a 4-byte int",
            "plane: 4 bytes for an 8-byte long long"
        ]
    );
    // One argument short: the count is wrong too.
    wrong.pop();
    assert_eq!(
        slot_errors(face, &launch::slots(&wrong))[0],
        "7 slots for 8 parameters"
    );
    assert_eq!(launch::ARGS_END.to_be_bytes(), *b"HIMENO..");
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
