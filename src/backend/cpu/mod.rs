//! The CPU backend: the rank's fields in host memory, swept by a fixed pool
//! of threads with a static partition of the block's k-rows.
//!
//! Each thread owns a contiguous range of rows in memory for the whole run:
//! it first-touches those pages at initialisation (so they live on its NUMA
//! node) and computes the same rows every sweep. Per-row residual sums are
//! stored and added in row order, so gosa does not depend on the thread
//! count.
//!
//! The fields are allocated here rather than as `ndarray` arrays, as
//! [`HugeBuffer`]s wholly on huge pages, each starting at a different
//! offset modulo 4 KiB (and with its owned rows aligned to the vector
//! width), because identically aligned arrays make the streams of a sweep
//! compete for the same few L1 sets and fall out of the cache between
//! neighbouring vector loads. `p` and `next` are fields of the local
//! extents; the twelve coefficients are one buffer packed per row in
//! blocks ([`packed`]), which the row kernel reads as one stream.
//!
//! When the fields cannot stay in the last-level cache, each thread may
//! write its rows of `next` through a [`LineWriter`] (streaming stores), so
//! that writing `next` does not first read it from memory; whether that
//! pays, and whether software prefetch does, the driver times
//! ([`variant`]).
//!
//! Built for temporal blocking (a block with `depth` > 1 ghost layers), the
//! backend runs up to `depth` sweeps per call as a cache-blocked wavefront
//! ([`wavefront`]); one sweep per call is always the classic row sweep
//! above.
//!
//! [`footprint`] states what [`CpuBackend::new`] will allocate, from the
//! same [`Sizes`], so the memory preflight counts exactly that.

pub mod kernel;
pub mod lines;
pub mod packed;
pub mod variant;
pub mod wavefront;

use super::api::{Backend, BackendInfo, HostBuffer, pack_plane, unpack_plane};
use crate::config::{BackendKind, Prefetch, Stores};
use crate::error::Result;
use crate::grid::Grid;
use crate::grid::decomp::{Block, Face, split};
use crate::grid::fields::{NAMES, OMEGA, coefficient_values, p_initial};
use crate::machine::alloc;
use crate::machine::cache::{LastLevel, PerCore};
use crate::machine::huge::HugeBuffer;
use crate::machine::isa::Isa;
use crate::machine::memory::Footprint;
use crate::machine::threads::{Bind, Pool};
use crate::timeline;
use kernel::{Inputs, Layout};
use lines::{LineWriter, RowBuffer};
use ndarray::{Array3, ArrayView3, ArrayViewMut3, Axis};
use packed::{Packed, Packing};
use std::ops::Range;
use std::time::Instant;
use variant::{Offer, Variant};

/// What the CPU backend is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuOptions {
    /// Sweep threads.
    pub threads: usize,
    /// Thread placement.
    pub bind: Bind,
    /// How the new field is stored.
    pub stores: Stores,
    /// Whether the classic sweep prefetches.
    pub prefetch: Prefetch,
    /// Rows per tile of the temporal wavefront; `None`: chosen from the
    /// detected cache sizes.
    pub tile_rows: Option<usize>,
}

/// The rows one thread owns.
#[derive(Debug, Clone)]
struct Part {
    /// Owned rows, numbered `(i - i0) * nj + (j - j0)` for the block's
    /// first owned point `(i0, j0)` and `nj` owned rows per plane.
    rows: Range<usize>,
    /// Memory rows `i*nj + j` of every field this thread first-touches and
    /// writes; covers `rows` and the boundary rows between parts.
    mem: Range<usize>,
}

/// One thread's pieces of every field: (field number, memory).
type Pieces<'a> = Vec<(usize, &'a mut [f32])>;

/// Distance in bytes between the start offsets of consecutive fields: 256
/// B modulo 4 KiB, so that the fields (`p`, `next`, the packed
/// coefficients) and the wavefront's levels spread over the L1 set
/// positions, and 8 KiB more, so that they also spread over the L2's sets
/// (a 128 KiB period): on huge pages the L2 set follows the virtual
/// address, and 256 B apart the same rows of all fields landed on a few
/// percent of the sets, which emptied the temporal wavefront's tiles from
/// the L2 (cachegrind with a 1 MiB 8-way last level, 4 sweeps per block in
/// tiles of 8 rows: 7x more misses in the row kernel at 256 B).
const STAGGER_BYTES: usize = 8192 + 256;
/// Alignment of the first owned point of every row (a cache line).
const ALIGN_BYTES: usize = lines::LINE_BYTES;

/// A zeroed field of `len` values, `p` or `next` (`n`), on huge pages:
/// element `k0` (the first owned k of a row, rows being multiples of the k
/// extent) sits on an ALIGN_BYTES boundary, so every row's owned points do
/// when nk*4 is a multiple of it; then the field is shifted by n *
/// STAGGER_BYTES within the page.
fn field(len: usize, n: usize, k0: usize) -> Result<Field> {
    HugeBuffer::zeroed(
        len,
        field_shift(n, k0),
        &format!("field {} of the CPU backend", NAMES[n]),
    )
}

/// The packed coefficients of `len` values, on huge pages, starting on a
/// cache line (every block then does) after the two fields' staggers.
fn coef_buffer(len: usize) -> Result<Field> {
    HugeBuffer::zeroed(
        len,
        COEF_SHIFT,
        "the packed coefficients of the CPU backend",
    )
}

/// Where the packed coefficients start after their page boundary.
const COEF_SHIFT: usize = 2 * STAGGER_BYTES;

/// Where the `n`-th field's data starts after its page boundary (see
/// [`field`]).
fn field_shift(n: usize, k0: usize) -> usize {
    let to_line = (ALIGN_BYTES - (4 * k0) % ALIGN_BYTES) % ALIGN_BYTES;
    to_line + n * STAGGER_BYTES
}

/// The lengths of everything a CPU backend of a block allocates, worked
/// out once from the block and options: [`CpuBackend::new`] allocates
/// them, [`footprint`] states them.
struct Sizes {
    /// Sweep threads.
    threads: usize,
    /// Threads the pool spawns for them (none when the caller sweeps).
    spawned: usize,
    /// Values per field (owned points and ghost layers).
    points: usize,
    /// How the coefficients are packed.
    packing: Packing,
    /// Values of the packed coefficients.
    packed: usize,
    /// The block's first owned k (the fields' row alignment).
    k0: usize,
    /// Owned rows `(i, j)`.
    owned_rows: usize,
    /// Sweeps per call with a per-level residual set (0 for the classic
    /// sweep).
    sweeps: usize,
    /// Rows per wavefront tile of a call of `depth` sweeps: `--tile-rows`,
    /// else the model's (`wavefront::tile_rows`).
    tile_rows: usize,
    /// Rows per tile the wavefront's buffers are made for: `--tile-rows`,
    /// else the tallest any call or offered height may take.
    scratch_rows: usize,
}

impl Sizes {
    fn of(block: &Block, opts: &CpuOptions) -> Sizes {
        let dims = block.local_dims();
        let depth = block.depth;
        let packing = packing_of(block);
        Sizes {
            threads: opts.threads.max(1),
            spawned: Pool::spawned(opts.threads, opts.bind),
            points: dims.iter().product(),
            packing,
            packed: dims[0] * dims[1] * packing.row_len(),
            k0: block.origin(2),
            owned_rows: block.n[0] * block.n[1],
            sweeps: if depth > 1 { depth } else { 0 },
            tile_rows: opts
                .tile_rows
                .unwrap_or_else(|| wavefront::tile_rows(dims[2], depth, &PerCore::detect()))
                .max(1),
            scratch_rows: opts.tile_rows.unwrap_or(wavefront::TILE_ROWS).max(1),
        }
    }

    /// What the buffers of these sizes take.
    fn footprint(&self, block: &Block) -> Footprint {
        let fields: Footprint = [P, NEXT]
            .map(|n| HugeBuffer::<f32>::footprint(self.points, field_shift(n, self.k0)))
            .into_iter()
            .sum();
        fields
            + HugeBuffer::<f32>::footprint(self.packed, COEF_SHIFT)
            + Footprint::vec::<f64>(self.owned_rows)
            + Footprint::vec::<f64>(self.sweeps * self.owned_rows)
            + Footprint::vec::<f32>(scratch_len(block, self.scratch_rows)).times(self.threads)
            + Footprint::vec::<f32>(edges_len(block))
            + Footprint::threads(self.spawned)
    }
}

/// Values in each thread's wavefront rings for tiles of `tile_rows` rows
/// of the block's one band (0 for the classic sweep).
fn scratch_len(block: &Block, tile_rows: usize) -> usize {
    if block.depth > 1 {
        wavefront::Plan::new(block, block.depth, tile_rows).scratch_len(block.n[1])
    } else {
        0
    }
}

/// Values in the wavefront's shared edge buffer (0 for the classic sweep).
fn edges_len(block: &Block) -> usize {
    if block.depth > 1 {
        wavefront::Plan::new(block, block.depth, 1).edges_len()
    } else {
        0
    }
}

/// The host memory a [`CpuBackend`] of `block` under `opts` allocates: its
/// fields (whole pages, huge ones for large fields), residual sums, each
/// thread's wavefront buffers and the threads' stacks.
pub fn footprint(block: &Block, opts: &CpuOptions) -> Footprint {
    Sizes::of(block, opts).footprint(block)
}

/// One field's memory.
type Field = HugeBuffer<f32>;

/// Where `p` and `next` sit in [`CpuBackend`]'s `fields` (the order of
/// [`crate::grid::fields::NAMES`]).
const P: usize = 0;
/// See [`P`].
const NEXT: usize = 1;
/// The number [`CpuBackend::for_each_part_mut`] gives the packed
/// coefficients (the first coefficient's in [`crate::grid::fields::NAMES`]).
const COEF: usize = 2;

/// How the coefficients of `block`'s rows are packed: blocks from the
/// first owned k, the first point every sweep updates.
fn packing_of(block: &Block) -> Packing {
    Packing::new(block.local_dims()[2], block.owned(2))
}

/// What a sweep reads (`p` and the packed coefficients) and the field it
/// writes (`next`), from the backend's two fields.
fn sweep_io<'a>(
    fields: &'a mut [Field],
    coef: &'a [f32],
    packing: Packing,
    lay: Layout,
) -> (Inputs<'a>, &'a mut [f32]) {
    let [p, next] = fields else {
        unreachable!("the backend holds p and next")
    };
    let inp = Inputs {
        lay,
        p: &p[..],
        coef: Packed {
            values: coef,
            packing,
        },
        omega: OMEGA,
    };
    (inp, &mut next[..])
}

/// One rank's fields on the host, swept by a pool of threads.
pub struct CpuBackend {
    grid: Grid,
    block: Block,
    lay: Layout,
    /// `p`, `next`.
    fields: Vec<Field>,
    /// `a0..a3, b0..b2, c0..c2, bnd, wrk1`, packed per row.
    coef: Field,
    /// How they are packed.
    packing: Packing,
    pool: Pool,
    isa: Isa,
    parts: Vec<Part>,
    /// Whether `next` is written with streaming (non-temporal) stores.
    streaming: bool,
    /// Whether the classic sweep's row kernel prefetches: as asked, or
    /// with `auto` unless the node's fields take at most half the
    /// last-level cache.
    prefetch: bool,
    /// Whether the wavefront's first level prefetches: where the classic
    /// sweep would by the fit (the node's fields beyond half the
    /// last-level cache), whatever `--prefetch` asked of the classic sweep.
    first_prefetch: bool,
    /// The classic sweep's variants the driver may time and choose
    /// between ([`Backend::kernel_variants`]): with and without prefetch
    /// for `--prefetch auto` and fields beyond half the cache, streaming
    /// and cached stores for `--stores auto` and fields beyond it.
    offer: Offer,
    /// The classic sweep's residual sums, per owned row.
    row_gosa: Vec<f64>,
    /// The wavefront's residual sums: `[level, i, j]` over owned rows.
    level_gosa: Array3<f64>,
    /// Each thread's wavefront rings (empty with one ghost layer).
    scratch: Vec<Vec<f32>>,
    /// The wavefront's edge buffer, which the threads share
    /// ([`wavefront::Edges`]; empty with one ghost layer).
    edges: Vec<f32>,
    /// Rows per wavefront tile when fixed: by `--tile-rows`, or by the
    /// driver's choice among the heights offered. Until then each call
    /// takes the model's height for its number of sweeps, so that
    /// `--temporal auto` times every T with its own tiles.
    tile_rows: Option<usize>,
    /// The caches the model sizes tiles for.
    core: PerCore,
    /// Whether `--tile-rows` gave the height (nothing then to time).
    given_tiles: bool,
    /// Gosa of each sweep of the last call.
    gosa: Vec<f64>,
    /// The least share of the block a calibration's sample holds, where
    /// the block is large enough to sample ([`sample_share`]).
    sample_share: Option<f64>,
    /// Whether the calibrations sweep a sample now ([`Backend::sample`]).
    sampling: bool,
}

/// How many times the last-level cache the node's fields must hold for
/// the calibrations to sweep a sample of each block: a sample of a
/// quarter of them then still holds twice the cache.
const SAMPLE_CACHES: usize = 8;

/// The share of the rows of each thread the classic sweep's sample
/// sweeps: its first quarter.
const CLASSIC_SAMPLE: usize = 4;

/// The least share of a block a calibration's sample holds, for fields
/// of `node_fields` bytes on the node and a last level of `llc` bytes:
/// what holds twice the cache, so that a sample swept turn after turn is
/// fed from memory as the whole block is; `None` (whole blocks) for
/// fields within [`SAMPLE_CACHES`] times the cache.
fn sample_share(node_fields: usize, llc: usize) -> Option<f64> {
    (node_fields >= SAMPLE_CACHES.saturating_mul(llc))
        .then(|| 2.0 * llc as f64 / node_fields as f64)
}

/// The classic sweep's `parts` as a calibration's sample sweeps them: the
/// first [`CLASSIC_SAMPLE`]th of each one's rows (and at least `share`), so
/// that a thread sweeps rows it first-touched, as in the run, its memory
/// range kept.
fn sample_parts(parts: &[Part], share: f64) -> Vec<Part> {
    let share = share.max(1.0 / CLASSIC_SAMPLE as f64);
    parts
        .iter()
        .map(|p| {
            let len = ((p.rows.len() as f64 * share).ceil() as usize).min(p.rows.len());
            Part {
                rows: p.rows.start..p.rows.start + len,
                mem: p.mem.clone(),
            }
        })
        .collect()
}

/// The wavefront's tile heights offered from `start` for `sweeps` sweeps of
/// rows `nk` values long on a thread of `core`: its own, then the others
/// worth timing ([`wavefront::other_tile_rows`]).
fn tile_offer(start: Variant, nk: usize, sweeps: usize, core: &PerCore) -> Offer {
    Offer::tiles(
        start,
        &wavefront::other_tile_rows(start.tile_rows, nk, sweeps, core),
    )
}

impl CpuBackend {
    /// Allocates and initialises the fields of `block` as `opts` asks, for
    /// rank `node[0]` of the `node[1]` ranks that share this node's caches
    /// (and, when no launcher bound them, its CPUs).
    pub fn new(
        grid: &Grid,
        block: &Block,
        opts: &CpuOptions,
        node: [usize; 2],
    ) -> Result<CpuBackend> {
        let node_ranks = node[1];
        let sizes = Sizes::of(block, opts);
        let pool = Pool::new(sizes.threads, opts.bind, node)?;
        let threads = pool.threads();
        let lay = Layout {
            dims: block.local_dims(),
        };
        let parts = partition(block, threads);
        let owned_rows = sizes.owned_rows;
        let depth = block.depth;
        let level_shape = (sizes.sweeps, block.n[0], block.n[1]);
        let points = sizes.points;
        let field_bytes = points
            .saturating_mul(2)
            .saturating_add(sizes.packed)
            .saturating_mul(size_of::<f32>());
        let node_fields = field_bytes.saturating_mul(node_ranks);
        let llc = LastLevel::detect();
        let core = PerCore::detect();
        let over_cache = node_fields > llc.node_bytes;
        let beyond_half = !llc.holds(node_fields);
        let streaming = match opts.stores {
            Stores::Streaming => true,
            Stores::Cached => false,
            // Streaming measured 9% slower at S, whose fields fit in a
            // 32 MiB L3. Beyond the cache it measured up to 7% faster at
            // sizes M and L on one guest and 0.85-1.0x cached stores on a
            // Zen 3 one, so the classic sweep starts with it and lets the
            // driver time both (notes/cpu-perf.md).
            Stores::Auto => over_cache,
        };
        let classic = depth == 1;
        // Well inside the cache the prefetches only compete with the
        // loads: without them the sweep measured 1.08-1.4x faster with
        // fields of 1-16.5 MB in a 32 MiB L3, but 0.85x at 22.5 MB and
        // 0.72-0.78x at size S (28 MiB), which the L3 no longer holds
        // from one sweep to the next ([`LastLevel::holds`]); hence half
        // the cache, not the whole of it as for the stores
        // (notes/cpu-perf.md). Beyond it, which kernel wins from memory
        // differs between machines and thread counts (Zen 5: no
        // prefetch 1.05-1.49x faster at size L on all cores, 0.8-0.9x
        // at M; Zen 4: 0.65-0.85x at both), so `auto` starts with
        // prefetch and lets the driver time both.
        let prefetch = match opts.prefetch {
            Prefetch::On => true,
            Prefetch::Off => false,
            Prefetch::Auto => beyond_half,
        };
        let mut cpu = CpuBackend {
            grid: *grid,
            block: *block,
            lay,
            fields: [P, NEXT]
                .into_iter()
                .map(|n| field(points, n, sizes.k0))
                .collect::<Result<_>>()?,
            coef: coef_buffer(sizes.packed)?,
            packing: sizes.packing,
            pool,
            isa: Isa::detect(),
            parts,
            streaming,
            prefetch,
            first_prefetch: beyond_half,
            sample_share: sample_share(node_fields, llc.node_bytes),
            sampling: false,
            offer: {
                let start = Variant {
                    prefetch,
                    streaming,
                    tile_rows: sizes.tile_rows,
                };
                if classic {
                    Offer::new(
                        start,
                        opts.prefetch == Prefetch::Auto && beyond_half,
                        opts.stores == Stores::Auto && over_cache,
                    )
                } else if opts.tile_rows.is_none() {
                    tile_offer(start, lay.dims[2], depth, &core)
                } else {
                    Offer::default()
                }
            },
            row_gosa: alloc::zeroed(owned_rows, "the per-row residuals")?,
            level_gosa: Array3::from_shape_vec(
                level_shape,
                alloc::zeroed(level_shape.0 * owned_rows, "the per-level residuals")?,
            )
            .expect("the shape's length"),
            scratch: Vec::new(),
            edges: Vec::new(),
            tile_rows: opts.tile_rows,
            core,
            given_tiles: opts.tile_rows.is_some(),
            gosa: vec![0.0; depth],
        };
        cpu.make_scratch(sizes.scratch_rows)?;
        cpu.reset()?;
        Ok(cpu)
    }

    /// Fixes the rows per tile of the temporal wavefront and sizes each
    /// thread's wavefront buffers for them (an error when they cannot be
    /// allocated).
    fn set_tile_rows(&mut self, rows: usize) -> Result<()> {
        self.tile_rows = Some(rows.max(1));
        self.make_scratch(rows.max(1))
    }

    /// Rows per tile of a call of `sweeps` sweeps.
    fn rows_for(&self, sweeps: usize) -> usize {
        self.tile_rows
            .unwrap_or_else(|| wavefront::tile_rows(self.lay.dims[2], sweeps, &self.core))
    }

    /// Sizes each thread's wavefront buffers for tiles of up to `rows`
    /// rows (an error when they cannot be allocated); buffers already
    /// large enough are kept (they are made for the tallest height a run
    /// may take).
    fn make_scratch(&mut self, rows: usize) -> Result<()> {
        let edges = edges_len(&self.block);
        if self.edges.len() < edges {
            self.edges = alloc::zeroed::<f32>(edges, "the wavefront's edge buffer")?;
        }
        let len = scratch_len(&self.block, rows);
        if self.scratch.len() == self.parts.len() && self.scratch.iter().all(|s| s.len() >= len) {
            return Ok(());
        }
        // Each thread makes and touches its own buffers (their pages then
        // sit on its NUMA node, and no sweep pays their page faults).
        self.scratch = self
            .pool
            .broadcast(|_| {
                let mut v = alloc::zeroed::<f32>(len, "the wavefront's buffers")?;
                for at in (0..len).step_by(1024) {
                    v[at] = std::hint::black_box(0.0);
                }
                Ok(v)
            })
            .into_iter()
            .collect::<Result<_>>()?;
        Ok(())
    }

    /// Splits `p`, `next` and the packed coefficients into the threads'
    /// memory ranges and calls `f` on each thread for each of its pieces,
    /// with the field's number ([`P`], [`NEXT`] or [`COEF`]).
    fn for_each_part_mut(&mut self, f: impl Fn(&Part, usize, &mut [f32]) + Sync) {
        let nk = self.lay.dims[2];
        let mut pieces: Vec<Pieces> = (0..self.parts.len()).map(|_| Vec::new()).collect();
        let row_len = self.packing.row_len();
        let fields = self.fields.iter_mut().enumerate().map(|(n, f)| (n, nk, f));
        for (fi, row, field) in fields.chain([(COEF, row_len, &mut self.coef)]) {
            let mut rest = &mut field[..];
            for (t, part) in self.parts.iter().enumerate() {
                let (head, tail) = rest.split_at_mut(part.mem.len() * row);
                pieces[t].push((fi, head));
                rest = tail;
            }
        }
        let parts = &self.parts;
        self.pool.scatter(pieces, |t, mut mine| {
            for (fi, piece) in mine.iter_mut() {
                f(&parts[t], *fi, piece);
            }
        });
    }
}

/// Static partition of the owned rows of `block` over `threads` threads,
/// with the memory rows each one owns.
fn partition(block: &Block, threads: usize) -> Vec<Part> {
    let dims = block.local_dims();
    let (i0, j0, nj) = (block.origin(0), block.origin(1), block.n[1]);
    let total = block.n[0] * nj;
    let mem_row = |q: usize| {
        if q >= total {
            dims[0] * dims[1]
        } else {
            (q / nj + i0) * dims[1] + q % nj + j0
        }
    };
    let mut parts = Vec::with_capacity(threads);
    for t in 0..threads {
        let (start, len) = split(total, threads, t);
        let rows = start..start + len;
        let mem_start = if t == 0 { 0 } else { mem_row(start) };
        let mem_end = if t + 1 == threads {
            dims[0] * dims[1]
        } else {
            mem_row(start + len)
        };
        parts.push(Part {
            rows,
            mem: mem_start..mem_end,
        });
    }
    parts
}

/// The owned rows of `part` of `block`, in memory order, as runs of rows
/// `(i, j)` of one plane: `(i, js)`.
fn part_runs(block: &Block, part: &Part) -> impl Iterator<Item = (usize, Range<usize>)> {
    let (i0, j0, nj) = (block.origin(0), block.origin(1), block.n[1]);
    let rows = part.rows.clone();
    let mut q = rows.start;
    std::iter::from_fn(move || {
        (q < rows.end).then(|| {
            // To the end of the plane or of the part, whichever comes first.
            let end = rows.end.min((q / nj + 1) * nj);
            let run = (q / nj + i0, q % nj + j0..(end - 1) % nj + j0 + 1);
            q = end;
            run
        })
    })
}

/// The classic sweep's kernel for a run of rows:
/// [`kernel::sweep_rows_at`] (with prefetch) or
/// [`kernel::sweep_rows_at_cached`] (without, for fields well inside the
/// cache).
type RowsAt = fn(Isa, &Inputs<'_>, usize, Range<usize>, Range<usize>, &mut [f32], &mut [f64]);

/// One thread's share of a classic sweep: its rows, the row kernel and
/// the fields it reads.
struct PartSweep<'a> {
    rows_at: RowsAt,
    isa: Isa,
    inp: &'a Inputs<'a>,
    block: &'a Block,
    part: &'a Part,
}

impl PartSweep<'_> {
    /// Sweeps the rows straight into the part's memory `out` of `next`
    /// (the prefetching kernel prefetches each line of `next` before
    /// writing it), storing each row's residual sum in `gosa`, a run of
    /// rows per call.
    fn cached(&self, out: &mut [f32], mut gosa: &mut [f64]) {
        let nk = self.inp.lay.dims[2];
        let start = self.part.mem.start * nk;
        let k = self.block.owned(2);
        for (i, js) in part_runs(self.block, self.part) {
            let (g, rest) = gosa.split_at_mut(js.len());
            gosa = rest;
            let rows = &mut out[self.inp.lay.row(i, js.start) - start..];
            (self.rows_at)(self.isa, self.inp, i, js, k.clone(), rows, g);
        }
    }

    /// As [`PartSweep::cached`], but each row is computed into a buffer
    /// that stays in L1 and written out by a [`LineWriter`] with streaming
    /// stores.
    fn streaming(&self, out: &mut [f32], gosa: &mut [f64]) {
        let nk = self.inp.lay.dims[2];
        let start = self.part.mem.start * nk;
        let k = self.block.owned(2);
        let mut buf = RowBuffer::new(nk, k.start);
        let mut writer = LineWriter::new(out);
        let rows = part_runs(self.block, self.part).flat_map(|(i, js)| js.map(move |j| (i, j)));
        for ((i, j), g) in rows.zip(gosa.chunks_exact_mut(1)) {
            let at = self.inp.lay.row(i, j);
            let row = buf.with_ends(&self.inp.p[at..at + nk], &k);
            (self.rows_at)(self.isa, self.inp, i, j..j + 1, k.clone(), row, g);
            writer.write(at - start, row);
        }
    }
}

impl CpuBackend {
    /// The wavefront's band: the block's owned rows (local j), whose
    /// tiles the threads take in turn.
    fn band(&self) -> Range<usize> {
        let j0 = self.block.origin(1);
        j0..j0 + self.block.n[1]
    }

    /// The wavefront's plan for `sweeps` sweeps, its tiles shared by the
    /// threads.
    fn plan(&self, sweeps: usize) -> wavefront::Plan {
        wavefront::Plan::new(&self.block, sweeps, self.rows_for(sweeps))
            .shared_by(self.scratch.len())
    }

    /// The least share of the block a sample holds while the calibrations
    /// sample ([`Backend::sample`]); `None` while the block is swept whole.
    fn sampled(&self) -> Option<f64> {
        self.sample_share.filter(|_| self.sampling)
    }

    /// The rows of `band` the wavefront of `plan` sweeps: all of them, or
    /// while the calibrations sample its sample's first rows
    /// ([`wavefront::Plan::sample_rows`]).
    fn swept_band(&self, plan: &wavefront::Plan, band: Range<usize>) -> Range<usize> {
        match self
            .sampled()
            .and_then(|share| plan.sample_rows(band.len(), share))
        {
            Some(n) => band.start..band.start + n,
            None => band,
        }
    }

    /// One classic sweep: each thread its static part of the rows (while
    /// the calibrations sample, the first rows of it: [`sample_parts`]).
    fn sweep_rows(&mut self) {
        let lay = self.lay;
        let sample = self.sampled().map(|share| sample_parts(&self.parts, share));
        let parts = sample.as_deref().unwrap_or(&self.parts);
        let nk = lay.dims[2];
        let isa = self.isa;
        let (inp, next) = sweep_io(&mut self.fields, &self.coef, self.packing, lay);
        let mut out_rest = next;
        let mut gosa_rest = &mut self.row_gosa[..];
        let mut work = Vec::with_capacity(parts.len());
        for part in parts {
            let (out, o_tail) = out_rest.split_at_mut(part.mem.len() * nk);
            let (g, g_tail) = gosa_rest.split_at_mut(part.rows.len());
            out_rest = o_tail;
            gosa_rest = g_tail;
            work.push((out, g));
        }
        let block = &self.block;
        let streaming = self.streaming;
        let rows_at: RowsAt = if self.prefetch {
            kernel::sweep_rows_at
        } else {
            kernel::sweep_rows_at_cached
        };
        // Each thread's span, for a timeline (two clock reads per thread).
        let spans = self.pool.scatter(work, |t, (out, g)| {
            let start = Instant::now();
            let sweep = PartSweep {
                rows_at,
                isa,
                inp: &inp,
                block,
                part: &parts[t],
            };
            if streaming {
                sweep.streaming(out, g);
            } else {
                sweep.cached(out, g);
            }
            (start, Instant::now())
        });
        timeline::record_threads(&spans);
        // Summed in row order: independent of the number of threads.
        self.gosa[0] = self.row_gosa.iter().sum();
    }

    /// `sweeps` sweeps as a wavefront: the threads take the band's tiles
    /// in turn (tile `t` on thread `t % threads`).
    fn sweep_wavefront(&mut self, sweeps: usize) {
        let lay = self.lay;
        let isa = self.isa;
        let plan = self.plan(sweeps);
        let band = self.band();
        let schedule = wavefront::Schedule::new(&plan, self.swept_band(&plan, band.clone()));
        let (inp, next) = sweep_io(&mut self.fields, &self.coef, self.packing, lay);
        let next = ArrayViewMut3::from_shape(lay.dims, next).expect("field shape");
        let tiles = schedule.split(next, self.level_gosa.view_mut(), band.start);
        let threads = self.scratch.len();
        let mut work: Vec<(Vec<wavefront::TileOut>, &mut [f32])> = self
            .scratch
            .iter_mut()
            .map(|scratch| (Vec::new(), &mut scratch[..]))
            .collect();
        for tile in tiles {
            work[tile.tile % threads].0.push(tile);
        }
        let edges = wavefront::Edges::new(&plan, &mut self.edges);
        let shared = wavefront::Shared::new(edges, schedule.tiles());
        let kernel = wavefront::Kernel {
            streaming: self.streaming,
            prefetch: self.first_prefetch,
        };
        let spans = self.pool.scatter(work, |_, (tiles, scratch)| {
            let start = Instant::now();
            wavefront::sweep_tiles(isa, &plan, &inp, &schedule, &shared, tiles, scratch, kernel);
            (start, Instant::now())
        });
        timeline::record_threads(&spans);
        // Each level summed in row order, as the classic sweep sums.
        for (s, g) in self.gosa[..sweeps].iter_mut().enumerate() {
            *g = self.level_gosa.index_axis(Axis(0), s).iter().sum();
        }
    }
}

impl Backend for CpuBackend {
    fn info(&self) -> BackendInfo {
        let temporal = if self.block.depth > 1 {
            format!(
                "; wavefront of {} sweeps, tiles of {} rows",
                self.block.depth,
                self.rows_for(self.block.depth)
            )
        } else {
            String::new()
        };
        BackendInfo {
            kind: BackendKind::Cpu,
            threads: self.parts.len(),
            detail: Some(format!(
                "kernel {}{}; {} stores{temporal}",
                self.isa.name(),
                // The wavefront's first level prefetches by the fit alone.
                if self.block.depth == 1 && self.prefetch
                    || self.block.depth > 1 && self.first_prefetch
                {
                    ""
                } else {
                    " (no prefetch)"
                },
                if self.streaming {
                    "streaming"
                } else {
                    "cached"
                },
            )),
            cpus: Some(self.pool.cpus()),
            // The GPU's fields stay empty.
            ..BackendInfo::default()
        }
    }

    fn reset(&mut self) -> Result<()> {
        let (grid, block, dims) = (self.grid, self.block, self.lay.dims);
        let values = coefficient_values();
        let packing = self.packing;
        self.for_each_part_mut(|part, field, piece| {
            if field == COEF {
                for row in piece.chunks_exact_mut(packing.row_len()) {
                    packing.pack_row(row, |f, _| values[f]);
                }
                return;
            }
            for (n, row) in piece.chunks_exact_mut(dims[2]).enumerate() {
                let li = (part.mem.start + n) / dims[1];
                row.fill(p_initial(&grid, block.global(0, li)));
            }
        });
        self.gosa.fill(0.0);
        Ok(())
    }

    fn sweeps_start(&mut self, sweeps: usize) -> Result<()> {
        if sweeps == 0 || sweeps > self.block.depth {
            return Err(crate::error::Error::runtime(format!(
                "{sweeps} sweeps asked of a block with {} ghost layers",
                self.block.depth
            )));
        }
        if sweeps == 1 {
            self.sweep_rows();
        } else {
            self.sweep_wavefront(sweeps);
        }
        Ok(())
    }

    fn sweeps_finish(&mut self, gosa: &mut [f64]) -> Result<()> {
        gosa.copy_from_slice(&self.gosa[..gosa.len()]);
        Ok(())
    }

    fn pack(&mut self, faces: &mut [(Face, &mut dyn HostBuffer)]) -> Result<f64> {
        let next =
            ArrayView3::from_shape(self.lay.dims, &self.fields[NEXT][..]).expect("field shape");
        for (face, buf) in faces {
            pack_plane(next.view(), *face, buf.as_mut_slice());
        }
        Ok(0.0)
    }

    fn unpack(&mut self, faces: &[(Face, &dyn HostBuffer)]) -> Result<f64> {
        let mut next = ArrayViewMut3::from_shape(self.lay.dims, &mut self.fields[NEXT][..])
            .expect("field shape");
        for (face, buf) in faces {
            unpack_plane(next.view_mut(), *face, buf.as_slice());
        }
        Ok(0.0)
    }

    fn swap(&mut self) {
        self.fields.swap(P, NEXT);
    }

    fn load_next(&mut self, field: &Array3<f32>) -> Result<()> {
        let next = &mut self.fields[NEXT][..];
        match field.as_slice() {
            Some(values) if values.len() == next.len() => {
                next.copy_from_slice(values);
                Ok(())
            }
            _ => Err(crate::error::Error::runtime(format!(
                "a field of {:?} values for a block of {:?}",
                field.dim(),
                self.lay.dims
            ))),
        }
    }

    fn field(&mut self) -> Result<Array3<f32>> {
        let d = self.lay.dims;
        let copy = alloc::copied(&self.fields[P][..], "the copy of p read back")?;
        Array3::from_shape_vec((d[0], d[1], d[2]), copy)
            .map_err(|e| crate::error::Error::runtime(format!("field shape: {e}")))
    }

    fn kernel_variants(&self) -> Vec<crate::backend::kernel_variant::KernelVariant> {
        self.offer.names()
    }

    fn use_kernel_variant(&mut self, index: usize) -> Result<()> {
        let Some(v) = self.offer.get(index) else {
            return Err(crate::error::Error::runtime(format!(
                "kernel variant {index} of {:?}",
                self.kernel_variants()
            )));
        };
        (self.prefetch, self.streaming) = (v.prefetch, v.streaming);
        if self.block.depth > 1 && self.tile_rows != Some(v.tile_rows) {
            self.set_tile_rows(v.tile_rows)?;
        }
        Ok(())
    }

    fn tile_starts(&self, sweeps: usize) -> Vec<usize> {
        if self.block.depth < 2 || sweeps < 2 || self.given_tiles {
            return Vec::new();
        }
        wavefront::tile_heights(self.lay.dims[2], sweeps, &self.core).to_vec()
    }

    fn start_tiles(&mut self, sweeps: usize, index: usize) -> Result<()> {
        let Some(&rows) = self.tile_starts(sweeps).get(index) else {
            return Ok(());
        };
        self.set_tile_rows(rows)?;
        let start = Variant {
            prefetch: self.prefetch,
            streaming: self.streaming,
            tile_rows: rows,
        };
        self.offer = tile_offer(start, self.lay.dims[2], sweeps, &self.core);
        Ok(())
    }

    fn sample(&mut self, on: bool) -> bool {
        self.sampling = on && self.sample_share.is_some();
        self.sampling
    }

    fn sample_scale(&self, sweeps: usize) -> f64 {
        let Some(share) = self.sampled() else {
            return 1.0;
        };
        if sweeps == 1 {
            let rows = |parts: &[Part]| parts.iter().map(|p| p.rows.len()).sum::<usize>() as f64;
            return rows(&self.parts) / rows(&sample_parts(&self.parts, share));
        }
        let plan = self.plan(sweeps);
        let band = self.band();
        let swept = self.swept_band(&plan, band.clone());
        plan.band_updates(&band) as f64 / plan.band_updates(&swept).max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::decomp::ProcGrid;

    #[test]
    fn partition_covers_rows_and_memory_once() {
        for n in [[3, 3, 3], [4, 7, 5], [10, 3, 8], [6, 6, 6]] {
            let block = Block::of(&Grid::new(n).unwrap(), &ProcGrid { p: [1, 1, 1] }, 0);
            let dims = block.local_dims();
            for threads in 1..9 {
                let parts = partition(&block, threads);
                assert_eq!(parts[0].mem.start, 0);
                assert_eq!(parts.last().unwrap().mem.end, dims[0] * dims[1]);
                assert_eq!(
                    parts.last().unwrap().rows.end,
                    (dims[0] - 2) * (dims[1] - 2)
                );
                for w in parts.windows(2) {
                    assert_eq!(w[0].mem.end, w[1].mem.start);
                    assert_eq!(w[0].rows.end, w[1].rows.start);
                }
            }
        }
    }

    /// The backend's classic sweep with every kernel copy, with and
    /// without prefetch, and 1 to 3 threads, on rows of odd lengths (1 to
    /// 17 points and longer), cached and streaming stores: the reference's
    /// field bit for bit, and one gosa, the same bits for every copy and
    /// thread count.
    #[test]
    fn every_isa_and_thread_count_sweeps_alike() {
        use crate::grid::fields::Fields;
        use crate::verify::reference_sweep;
        let lengths = (1..=17).chain([31, 33, 35]);
        for dims in lengths.map(|m| [5, 6, m + 2]) {
            let grid = Grid::new(dims).unwrap();
            let block = Block::of(&grid, &ProcGrid { p: [1, 1, 1] }, 0);
            let mut reference = Fields::initial(&grid, &block).unwrap();
            let mut want_gosa = Vec::new();
            let mut want_field = Vec::new();
            for _ in 0..2 {
                reference_sweep(&mut reference);
                want_field.push(reference.p.clone());
            }
            for isa in Isa::all_supported() {
                for threads in 1..=3 {
                    for (stores, prefetch) in [Stores::Cached, Stores::Streaming]
                        .into_iter()
                        .flat_map(|s| [(s, false), (s, true)])
                    {
                        let mut cpu = backend(&grid, block.depth, threads, stores);
                        assert!(!cpu.prefetch, "{dims:?}: small fields fit the cache");
                        cpu.isa = isa;
                        cpu.prefetch = prefetch;
                        let what = format!(
                            "{dims:?} {} {threads} threads {stores:?} prefetch {prefetch}",
                            isa.name()
                        );
                        for (s, field) in want_field.iter().enumerate() {
                            let mut g = [0.0];
                            cpu.sweeps_start(1).unwrap();
                            cpu.sweeps_finish(&mut g).unwrap();
                            cpu.swap();
                            assert_eq!(&cpu.field().unwrap(), field, "{what} sweep {s}");
                            if want_gosa.len() == s {
                                want_gosa.push(g[0]);
                            }
                            assert_eq!(g[0].to_bits(), want_gosa[s].to_bits(), "{what} sweep {s}");
                        }
                    }
                }
            }
        }
    }

    fn backend(grid: &Grid, depth: usize, threads: usize, stores: Stores) -> CpuBackend {
        let block = Block::of(grid, &ProcGrid { p: [1, 1, 1] }, 0).with_depth(depth);
        let opts = CpuOptions {
            threads,
            bind: Bind::None,
            stores,
            prefetch: Prefetch::Auto,
            tile_rows: None,
        };
        CpuBackend::new(grid, &block, &opts, [0, 1]).unwrap()
    }

    /// Blocks of `sweeps` wavefront sweeps leave bitwise the field of as
    /// many classic sweeps and give each sweep's gosa bit for bit, for
    /// every tile height (down to one row, where the redundant rows of
    /// neighbouring tiles overlap most), thread count and store kind.
    #[test]
    fn wavefront_sweeps_equal_classic_sweeps() {
        for n in [[7, 9, 21], [5, 4, 3], [6, 13, 40]] {
            let grid = Grid::new(n).unwrap();
            let mut classic = backend(&grid, 1, 1, Stores::Cached);
            let mut want = Vec::new();
            for _ in 0..6 {
                classic.sweeps_start(1).unwrap();
                let mut g = [0.0];
                classic.sweeps_finish(&mut g).unwrap();
                classic.swap();
                want.push((g[0], classic.field().unwrap()));
            }
            for (depth, threads, rows, stores) in [
                (2, 1, 1, Stores::Cached),
                (3, 2, 2, Stores::Streaming),
                (4, 3, 3, Stores::Cached),
                (5, 2, 100, Stores::Streaming),
            ] {
                let mut cpu = backend(&grid, depth, threads, stores);
                cpu.set_tile_rows(rows).unwrap();
                let mut done = 0;
                while done < want.len() {
                    let sweeps = depth.min(want.len() - done);
                    let mut g = vec![0.0; sweeps];
                    cpu.sweeps_start(sweeps).unwrap();
                    cpu.sweeps_finish(&mut g).unwrap();
                    cpu.swap();
                    for (s, g) in g.iter().enumerate() {
                        assert_eq!(
                            g.to_bits(),
                            want[done + s].0.to_bits(),
                            "{n:?} depth {depth} sweep {}",
                            done + s + 1
                        );
                    }
                    done += sweeps;
                    assert_eq!(
                        cpu.field().unwrap(),
                        want[done - 1].1,
                        "{n:?} depth {depth}"
                    );
                }
            }
        }
    }

    /// A calibration's sample ([`Backend::sample`]) updates only its
    /// points: the wavefront three tiles from the start of each thread's
    /// band, every plane, the classic sweep the first quarter of each
    /// thread's rows; its scale is the whole block's updates over the
    /// sample's. A block the cache holds is not sampled. Sampling no
    /// more, the backend sweeps bitwise as one that never sampled.
    #[test]
    fn a_sample_sweeps_its_points_only_and_whole_again_as_before() {
        let grid = Grid::new([12, 50, 9]).unwrap();
        // Rows (local i, j) of `field` that differ from `before`'s.
        let changed = |before: &Array3<f32>, field: &Array3<f32>| -> Vec<(usize, usize)> {
            let (ni, nj, _) = field.dim();
            (0..ni * nj)
                .map(|r| (r / nj, r % nj))
                .filter(|&(i, j)| {
                    before.slice(ndarray::s![i, j, ..]) != field.slice(ndarray::s![i, j, ..])
                })
                .collect()
        };
        let sweep = |cpu: &mut CpuBackend, sweeps: usize| {
            let mut g = vec![0.0; sweeps];
            cpu.sweeps_start(sweeps).unwrap();
            cpu.sweeps_finish(&mut g).unwrap();
            cpu.swap();
        };
        for threads in 1..=3 {
            let mut cpu = backend(&grid, 4, threads, Stores::Cached);
            assert_eq!(cpu.sample_share, None, "a small block is swept whole");
            assert!(!cpu.sample(true));
            assert_eq!(cpu.sample_scale(4), 1.0);
            cpu.sample_share = Some(0.01);
            cpu.set_tile_rows(2).unwrap();
            assert!(cpu.sample(true));
            let (i0, ni) = (cpu.block.origin(0), cpu.block.n[0]);
            // A tile of 4 rows, then 2-row tiles: three tiles per thread
            // from the band's start.
            let band = cpu.band();
            let rows = 4 + (3 * threads - 1) * 2;
            let want: Vec<(usize, usize)> = (i0..i0 + ni)
                .flat_map(|i| (band.start..band.start + rows).map(move |j| (i, j)))
                .collect();
            let before = cpu.field().unwrap();
            sweep(&mut cpu, 4);
            assert_eq!(
                changed(&before, &cpu.field().unwrap()),
                want,
                "{threads} threads"
            );
            if threads == 1 {
                // 48 rows at every level of the whole band; 11, 10, 9 and 8
                // at levels 1 to 4 of the sample (three more, two, one into
                // the rows after it).
                assert_eq!(cpu.sample_scale(4), 192.0 / 38.0);
            }
            // The classic sweep: the first quarter of each thread's rows.
            cpu.reset().unwrap();
            let before = cpu.field().unwrap();
            sweep(&mut cpu, 1);
            let rows = changed(&before, &cpu.field().unwrap()).len();
            let quarters: usize = cpu.parts.iter().map(|p| p.rows.len().div_ceil(4)).sum();
            assert_eq!(rows, quarters, "{threads} threads");
            assert_eq!(
                cpu.sample_scale(1),
                (ni * cpu.block.n[1]) as f64 / rows as f64
            );
            // Whole again: bitwise what a backend that never sampled makes.
            assert!(!cpu.sample(false));
            assert_eq!(cpu.sample_scale(4), 1.0);
            cpu.reset().unwrap();
            let mut fresh = backend(&grid, 4, threads, Stores::Cached);
            fresh.set_tile_rows(2).unwrap();
            sweep(&mut cpu, 4);
            sweep(&mut fresh, 4);
            assert_eq!(cpu.field().unwrap(), fresh.field().unwrap());
        }
    }

    /// Blocks are sampled from eight times the last-level cache on, the
    /// sample holding at least twice the cache.
    #[test]
    fn blocks_far_beyond_the_cache_are_sampled() {
        let mib = 1 << 20;
        assert_eq!(sample_share(8 * mib - 1, mib), None);
        assert_eq!(sample_share(8 * mib, mib), Some(0.25));
        assert_eq!(sample_share(64 * mib, mib), Some(2.0 / 64.0));
    }

    /// A 6x6x6 grid on one rank, its block, and options of one thread with
    /// `stores` and `--prefetch auto`.
    fn tiny(stores: Stores) -> (Grid, Block, CpuOptions) {
        let grid = Grid::new([6, 6, 6]).unwrap();
        let block = Block::of(&grid, &ProcGrid { p: [1, 1, 1] }, 0);
        let opts = CpuOptions {
            threads: 1,
            bind: Bind::None,
            stores,
            prefetch: Prefetch::Auto,
            tile_rows: None,
        };
        (grid, block, opts)
    }

    /// The classic sweep prefetches unless the node's fields take at most
    /// half the last-level cache (here exceeded by a node of a million
    /// ranks), and the report says which kernel ran. Beyond it, and only
    /// there, `--prefetch auto` offers the driver both kernels; `on` and
    /// `off` are taken as given and offer no choice.
    #[test]
    fn the_classic_sweep_prefetches_only_fields_beyond_the_cache() {
        let (grid, block, opts) = tiny(Stores::Cached);
        let detail = |cpu: &CpuBackend| cpu.info().detail.unwrap();
        let cached = CpuBackend::new(&grid, &block, &opts, [0, 1]).unwrap();
        assert!(!cached.prefetch);
        assert!(detail(&cached).contains(" (no prefetch); cached stores"));
        let beyond = CpuBackend::new(&grid, &block, &opts, [0, 1 << 20]).unwrap();
        assert!(beyond.prefetch);
        assert!(!detail(&beyond).contains("prefetch"), "{}", detail(&beyond));
        // The wavefront's first level prefetches by the fit alone.
        let deep = Block::of(&grid, &ProcGrid { p: [1, 1, 1] }, 0).with_depth(2);
        for (node, says) in [([0, 1], true), ([0, 1 << 20], false)] {
            for prefetch in [Prefetch::On, Prefetch::Off, Prefetch::Auto] {
                let opts = CpuOptions { prefetch, ..opts };
                let wavefront = CpuBackend::new(&grid, &deep, &opts, node).unwrap();
                let detail = detail(&wavefront);
                assert_eq!(detail.contains(" (no prefetch)"), says, "{node:?} {detail}");
            }
        }

        assert!(cached.kernel_variants().is_empty());
        let mut beyond = beyond;
        assert_eq!(beyond.kernel_variants(), ["prefetch", "no prefetch"]);
        beyond.use_kernel_variant(1).unwrap();
        assert!(detail(&beyond).contains(" (no prefetch); cached stores"));
        beyond.use_kernel_variant(0).unwrap();
        assert!(!detail(&beyond).contains("prefetch"));
        assert!(beyond.use_kernel_variant(2).is_err());
        for (asked, prefetches) in [(Prefetch::On, true), (Prefetch::Off, false)] {
            let opts = CpuOptions {
                prefetch: asked,
                ..opts
            };
            for node in [[0, 1], [0, 1 << 20]] {
                let mut cpu = CpuBackend::new(&grid, &block, &opts, node).unwrap();
                assert_eq!(cpu.prefetch, prefetches, "{asked:?} {node:?}");
                assert!(cpu.kernel_variants().is_empty(), "{asked:?} {node:?}");
                assert!(cpu.use_kernel_variant(0).is_err());
            }
        }
    }

    /// `--stores auto` offers the driver streaming and cached stores for
    /// the classic sweep of fields beyond the last-level cache (with both
    /// kernels under `--prefetch auto`: four variants), streaming first;
    /// a fixed `--stores`, fields in the cache or a wavefront offer no
    /// stores. The variant taken is the one that sweeps and is reported.
    #[test]
    fn stores_auto_offers_both_stores_beyond_the_cache() {
        let (grid, block, opts) = tiny(Stores::Auto);
        let detail = |cpu: &CpuBackend| cpu.info().detail.unwrap();
        let beyond = [0, 1 << 20];
        let mut cpu = CpuBackend::new(&grid, &block, &opts, beyond).unwrap();
        assert!(cpu.streaming && cpu.prefetch);
        assert_eq!(
            cpu.kernel_variants(),
            [
                "prefetch, streaming stores",
                "no prefetch, streaming stores",
                "prefetch, cached stores",
                "no prefetch, cached stores"
            ]
        );
        cpu.use_kernel_variant(3).unwrap();
        assert!(!cpu.streaming && !cpu.prefetch);
        assert!(detail(&cpu).contains(" (no prefetch); cached stores"));
        cpu.use_kernel_variant(2).unwrap();
        assert!(!cpu.streaming && cpu.prefetch);
        cpu.use_kernel_variant(0).unwrap();
        assert!(
            detail(&cpu).ends_with("; streaming stores"),
            "{}",
            detail(&cpu)
        );
        assert!(cpu.use_kernel_variant(4).is_err());

        let fixed = |stores, prefetch| CpuOptions {
            stores,
            prefetch,
            ..opts
        };
        let cpu = CpuBackend::new(&grid, &block, &fixed(Stores::Auto, Prefetch::Off), beyond);
        let mut cpu = cpu.unwrap();
        assert_eq!(cpu.kernel_variants(), ["streaming stores", "cached stores"]);
        cpu.use_kernel_variant(1).unwrap();
        assert!(!cpu.streaming && !cpu.prefetch);
        let opts = fixed(Stores::Streaming, Prefetch::Auto);
        let cpu = CpuBackend::new(&grid, &block, &opts, beyond).unwrap();
        assert_eq!(cpu.kernel_variants(), ["prefetch", "no prefetch"]);
        let mut cpu = cpu;
        cpu.use_kernel_variant(1).unwrap();
        assert!(cpu.streaming && !cpu.prefetch);

        let auto = fixed(Stores::Auto, Prefetch::Auto);
        let inside = CpuBackend::new(&grid, &block, &auto, [0, 1]).unwrap();
        assert!(inside.kernel_variants().is_empty());
    }

    /// Until a height is fixed, each call of T sweeps takes the model's
    /// height for T (here, for a 128 KiB private cache, 11 rows for two
    /// sweeps of 42-value rows down to 5 for four), as `--temporal auto`
    /// times them; every mix of calls still sweeps bitwise as the classic
    /// sweep, on 1 to 3 threads.
    #[test]
    fn each_call_takes_the_tiles_of_its_own_sweeps_and_sweeps_alike() {
        let small = PerCore {
            private_bytes: 128 << 10,
            shared_bytes: 1 << 20,
            sharing: 2,
        };
        let grid = Grid::new([6, 23, 42]).unwrap();
        let mut classic = backend(&grid, 1, 1, Stores::Cached);
        let mut want = Vec::new();
        for _ in 0..9 {
            let mut g = [0.0];
            classic.sweeps_start(1).unwrap();
            classic.sweeps_finish(&mut g).unwrap();
            classic.swap();
            want.push((g[0], classic.field().unwrap()));
        }
        for threads in 1..=3 {
            let mut cpu = backend(&grid, 4, threads, Stores::Cached);
            cpu.core = small;
            let heights: Vec<usize> = (2..=4).map(|t| cpu.rows_for(t)).collect();
            assert_eq!(heights, [11, 7, 5]);
            let mut done = 0;
            for sweeps in [2, 3, 4] {
                let mut g = vec![0.0; sweeps];
                cpu.sweeps_start(sweeps).unwrap();
                cpu.sweeps_finish(&mut g).unwrap();
                cpu.swap();
                for (s, g) in g.iter().enumerate() {
                    let case = format!("{threads} threads, {sweeps} sweeps, sweep {}", done + s);
                    assert_eq!(g.to_bits(), want[done + s].0.to_bits(), "{case}");
                }
                done += sweeps;
                assert_eq!(cpu.field().unwrap(), want[done - 1].1, "{threads} threads");
            }
        }
    }

    /// A wavefront without `--tile-rows` offers its tile height and half
    /// of it (neither prefetch nor stores, whatever the fields' size), and
    /// sweeps with the one the driver picks; a height given is kept.
    #[test]
    fn a_wavefront_offers_its_tile_heights_unless_given_one() {
        let (grid, block, opts) = tiny(Stores::Auto);
        let deep = block.with_depth(2);
        for node in [[0, 1], [0, 1 << 20]] {
            let mut cpu = CpuBackend::new(&grid, &deep, &opts, node).unwrap();
            assert_eq!(
                cpu.kernel_variants(),
                ["tiles of 32 rows", "tiles of 16 rows"],
                "{node:?}"
            );
            cpu.use_kernel_variant(1).unwrap();
            assert!(cpu.info().detail.unwrap().ends_with("tiles of 16 rows"));
            cpu.use_kernel_variant(0).unwrap();
            assert_eq!(cpu.tile_rows, Some(32));
            assert!(cpu.use_kernel_variant(2).is_err());
        }
        let given = CpuOptions {
            tile_rows: Some(32),
            ..opts
        };
        let cpu = CpuBackend::new(&grid, &deep, &given, [0, 1]).unwrap();
        assert!(cpu.kernel_variants().is_empty());
    }

    /// A blocked backend starts each T with one height per cache (none for
    /// the classic sweep or a height given); starting with one sweeps with
    /// it and offers the heights around it, and every start sweeps bitwise
    /// as the classic sweep.
    #[test]
    fn tiles_start_from_either_cache_and_offer_the_heights_around_them() {
        // Rows of 42 values: 8.7 KB per tile row at T = 4.
        let grid = Grid::new([12, 40, 40]).unwrap();
        let mut classic = backend(&grid, 1, 1, Stores::Cached);
        assert!(classic.tile_starts(4).is_empty());
        let mut want = vec![0.0; 4];
        for g in &mut want {
            let mut one = [0.0];
            classic.sweeps_start(1).unwrap();
            classic.sweeps_finish(&mut one).unwrap();
            classic.swap();
            *g = one[0];
        }
        let field = classic.field().unwrap();
        let mut cpu = backend(&grid, 4, 2, Stores::Cached);
        // A 64 KiB L2 (3/8: 24 KiB, 2 rows: the floor) and 256 KiB of
        // the last level each (a quarter: 64 KiB, 7 rows).
        cpu.core = PerCore {
            private_bytes: 64 << 10,
            shared_bytes: 512 << 10,
            sharing: 2,
        };
        assert!(cpu.tile_starts(1).is_empty());
        assert_eq!(cpu.tile_starts(4), [wavefront::MIN_TILE_ROWS, 7]);
        for (start, names) in [
            (0, ["tiles of 4 rows", "tiles of 8 rows", "tiles of 7 rows"]),
            (
                1,
                ["tiles of 7 rows", "tiles of 14 rows", "tiles of 4 rows"],
            ),
        ] {
            cpu.start_tiles(4, start).unwrap();
            assert_eq!(cpu.kernel_variants(), names);
            assert_eq!(cpu.tile_rows, Some(cpu.tile_starts(4)[start]));
            cpu.reset().unwrap();
            let mut g = vec![0.0; 4];
            cpu.sweeps_start(4).unwrap();
            cpu.sweeps_finish(&mut g).unwrap();
            cpu.swap();
            assert_eq!(g, want, "start {start}");
            assert_eq!(cpu.field().unwrap(), field, "start {start}");
        }
        let given = CpuOptions {
            threads: 2,
            bind: Bind::None,
            stores: Stores::Cached,
            prefetch: Prefetch::Auto,
            tile_rows: Some(5),
        };
        let block = Block::of(&grid, &ProcGrid { p: [1, 1, 1] }, 0).with_depth(4);
        let mut fixed = CpuBackend::new(&grid, &block, &given, [0, 1]).unwrap();
        assert!(fixed.tile_starts(4).is_empty());
        fixed.start_tiles(4, 0).unwrap();
        assert_eq!(fixed.tile_rows, Some(5));
    }

    #[test]
    fn more_sweeps_than_the_halo_is_deep_are_refused() {
        let grid = Grid::new([5, 5, 5]).unwrap();
        let mut cpu = backend(&grid, 2, 1, Stores::Auto);
        assert!(cpu.sweeps_start(3).is_err());
        assert!(cpu.sweeps_start(0).is_err());
        assert!(cpu.sweeps_start(2).is_ok());
    }

    /// Every kernel copy sweeps the wavefront bitwise as the classic sweep
    /// (the field after each block, every sweep's gosa), on rows of odd
    /// lengths (1 to 17 points, and longer rows that are not whole
    /// blocks), with 1 to 3 threads, T = 2 to 4, tiles of one row (the
    /// most tiles and edge rows), two rows and the default height, cached
    /// and streaming stores, the levels with and without prefetch.
    #[test]
    fn every_isa_and_thread_count_sweeps_the_wavefront_alike() {
        let sweeps = 5;
        for m in (1..=17).chain([31, 33, 35]) {
            let grid = Grid::new([6, 9, m + 2]).unwrap();
            let mut classic = backend(&grid, 1, 1, Stores::Cached);
            classic.isa = Isa::baseline();
            let mut want = Vec::new();
            for _ in 0..sweeps {
                let mut g = [0.0];
                classic.sweeps_start(1).unwrap();
                classic.sweeps_finish(&mut g).unwrap();
                classic.swap();
                want.push((g[0], classic.field().unwrap()));
            }
            for isa in Isa::all_supported() {
                for threads in 1..=3 {
                    for (depth, rows, stores, prefetch) in [
                        (2, 1, Stores::Cached, false),
                        (3, 2, Stores::Streaming, true),
                        (4, 32, Stores::Cached, true),
                        (4, 1, Stores::Streaming, false),
                    ] {
                        let mut cpu = backend(&grid, depth, threads, stores);
                        cpu.isa = isa;
                        cpu.first_prefetch = prefetch;
                        cpu.set_tile_rows(rows).unwrap();
                        let case = format!(
                            "{m} points {} {threads} threads T={depth} tiles of {rows} \
                             {stores:?} prefetch {prefetch}",
                            isa.name()
                        );
                        let mut done = 0;
                        while done < sweeps {
                            let t = depth.min(sweeps - done);
                            let mut g = vec![0.0; t];
                            cpu.sweeps_start(t).unwrap();
                            cpu.sweeps_finish(&mut g).unwrap();
                            cpu.swap();
                            for (s, g) in g.iter().enumerate() {
                                let sweep = done + s;
                                let want = want[sweep].0.to_bits();
                                assert_eq!(g.to_bits(), want, "{case}: sweep {}", sweep + 1);
                            }
                            done += t;
                            assert_eq!(cpu.field().unwrap(), want[done - 1].1, "{case}");
                        }
                    }
                }
            }
        }
    }
}
