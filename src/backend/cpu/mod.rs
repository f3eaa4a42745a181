//! The CPU backend: the rank's fields in host memory, swept by a fixed pool
//! of threads with a static partition of the block's k-rows.
//!
//! Each thread owns a contiguous range of rows in memory for the whole run:
//! it first-touches those pages at initialisation (so they live on its NUMA
//! node) and computes the same rows every sweep. Per-row residual sums are
//! stored and added in row order, so gosa does not depend on the thread
//! count.
//!
//! The fourteen fields are allocated here rather than as `ndarray` arrays,
//! as [`HugeBuffer`]s wholly on huge pages, each starting at a different
//! offset modulo 4 KiB (and with its owned rows aligned to the vector
//! width), because identically aligned arrays make the 14 streams of a
//! sweep compete for the same few L1 sets and fall out of the cache between
//! neighbouring vector loads.
//!
//! When the fields cannot stay in the last-level cache, each thread writes
//! its rows of `next` through a [`LineWriter`] (streaming stores), so that
//! writing `next` does not first read it from memory.

pub mod kernel;
pub mod lines;

use super::api::{Backend, BackendInfo, HostBuffer, Kind, pack_plane, unpack_plane};
use crate::config::Stores;
use crate::error::Result;
use crate::grid::Grid;
use crate::grid::decomp::{Block, Face, split};
use crate::grid::fields::{FIELDS, OMEGA, coefficient_values, p_initial};
use crate::machine::alloc;
use crate::machine::cache::LastLevel;
use crate::machine::huge::HugeBuffer;
use crate::machine::isa::Isa;
use crate::machine::threads::{Bind, Pool};
use kernel::{Inputs, Layout};
use lines::LineWriter;
use ndarray::{Array3, ArrayView3, ArrayViewMut3};
use std::ops::Range;

/// What the CPU backend is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuOptions {
    /// Sweep threads.
    pub threads: usize,
    /// Thread placement.
    pub bind: Bind,
    /// How the new field is stored.
    pub stores: Stores,
}

/// The rows one thread owns.
#[derive(Debug, Clone)]
struct Part {
    /// Interior rows, numbered `(i-1)*(nj-2) + (j-1)`.
    rows: Range<usize>,
    /// Memory rows `i*nj + j` of every field this thread first-touches and
    /// writes; covers `rows` and the boundary rows between parts.
    mem: Range<usize>,
}

/// One thread's pieces of every field: (field number, memory).
type Pieces<'a> = Vec<(usize, &'a mut [f32])>;

/// Distance in bytes between the start offsets (modulo 4 KiB) of
/// consecutive fields: 14 fields spread over 3.5 KiB of L1 set positions.
const STAGGER_BYTES: usize = 256;
/// Alignment of the first owned point of every row (a cache line).
const ALIGN_BYTES: usize = 64;
/// `f32` values per cache line.
const LINE_FLOATS: usize = ALIGN_BYTES / 4;

/// A zeroed field of `len` values, the `n`-th of the block, on huge pages:
/// element 1 (the first owned k of a row, rows being multiples of the k
/// extent) sits on an ALIGN_BYTES boundary, so every row's owned points do
/// when nk*4 is a multiple of it; then the field is shifted by n *
/// STAGGER_BYTES within the page.
fn field(len: usize, n: usize) -> Result<Field> {
    HugeBuffer::zeroed(
        len,
        ALIGN_BYTES - 4 + n * STAGGER_BYTES,
        &format!("field {} of the CPU backend", crate::grid::fields::NAMES[n]),
    )
}

/// One field's memory.
type Field = HugeBuffer<f32>;

/// One rank's fields on the host, swept by a pool of threads.
pub struct CpuBackend {
    grid: Grid,
    block: Block,
    lay: Layout,
    /// `p`, `next`, `a0..a3, b0..b2, c0..c2, bnd, wrk1`.
    fields: Vec<Field>,
    pool: Pool,
    isa: Isa,
    parts: Vec<Part>,
    /// Whether `next` is written with streaming (non-temporal) stores.
    streaming: bool,
    row_gosa: Vec<f64>,
    gosa: f64,
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
        let [node_rank, node_ranks] = node;
        let pool = Pool::new(opts.threads, opts.bind, node_rank)?;
        let threads = pool.threads();
        let lay = Layout {
            dims: block.local_dims(),
        };
        let parts = partition(lay.dims, threads);
        let interior_rows = block.n[0] * block.n[1];
        let points: usize = lay.dims.iter().product();
        let field_bytes = points
            .saturating_mul(FIELDS)
            .saturating_mul(size_of::<f32>());
        let streaming = match opts.stores {
            Stores::Streaming => true,
            Stores::Cached => false,
            // Streaming measured up to 7% faster at sizes M and L, whose
            // fields come from memory every sweep, and 9% slower at S,
            // whose fields fit in a 32 MiB L3 (notes/cpu-perf.md).
            Stores::Auto => field_bytes.saturating_mul(node_ranks) > LastLevel::detect().node_bytes,
        };
        let mut cpu = CpuBackend {
            grid: *grid,
            block: *block,
            lay,
            fields: (0..FIELDS)
                .map(|n| field(points, n))
                .collect::<Result<_>>()?,
            pool,
            isa: Isa::detect(),
            parts,
            streaming,
            row_gosa: alloc::zeroed(interior_rows, "the per-row residuals")?,
            gosa: 0.0,
        };
        cpu.reset()?;
        Ok(cpu)
    }

    /// Splits every field into the threads' memory ranges and calls `f` on
    /// each thread for each of its pieces, with the field's number in
    /// `p, next, a0..wrk1` order.
    fn for_each_part_mut(&mut self, f: impl Fn(&Part, usize, &mut [f32]) + Sync) {
        let nk = self.lay.dims[2];
        let mut pieces: Vec<Pieces> = (0..self.parts.len()).map(|_| Vec::new()).collect();
        for (fi, field) in self.fields.iter_mut().enumerate() {
            let mut rest = &mut field[..];
            for (t, part) in self.parts.iter().enumerate() {
                let (head, tail) = rest.split_at_mut(part.mem.len() * nk);
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

/// Static partition of the interior rows of a block with local extents
/// `dims` over `threads` threads, with the memory rows each one owns.
fn partition(dims: [usize; 3], threads: usize) -> Vec<Part> {
    let nj_in = dims[1] - 2;
    let total = (dims[0] - 2) * nj_in;
    let mem_row = |q: usize| {
        if q >= total {
            dims[0] * dims[1]
        } else {
            (q / nj_in + 1) * dims[1] + q % nj_in + 1
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

/// The interior rows `(i, j)` of `part`, in memory order.
fn part_rows(lay: Layout, part: &Part) -> impl Iterator<Item = (usize, usize)> {
    let nj_in = lay.dims[1] - 2;
    part.rows
        .clone()
        .map(move |q| (q / nj_in + 1, q % nj_in + 1))
}

/// Sweeps `part`'s rows straight into its memory `out` of `next` (the
/// kernel prefetches each line of `next` before writing it), storing each
/// row's residual sum in `gosa`.
fn sweep_part_cached(isa: Isa, inp: &Inputs<'_>, part: &Part, out: &mut [f32], gosa: &mut [f64]) {
    let start = part.mem.start * inp.lay.dims[2];
    for ((i, j), g) in part_rows(inp.lay, part).zip(gosa) {
        *g = kernel::sweep_row(isa, inp, i, j, &mut out[inp.lay.row(i, j) - start..]);
    }
}

/// As [`sweep_part_cached`], but each row is computed into a buffer that
/// stays in L1 and written out by a [`LineWriter`] with streaming stores.
fn sweep_part_streaming(
    isa: Isa,
    inp: &Inputs<'_>,
    part: &Part,
    out: &mut [f32],
    gosa: &mut [f64],
) {
    let nk = inp.lay.dims[2];
    let start = part.mem.start * nk;
    let mut buf = vec![0.0f32; nk + LINE_FLOATS];
    // The row buffer's owned points start on a cache line, as the field's do.
    let skew = (buf[1..].as_ptr() as usize % ALIGN_BYTES) / 4;
    let row = &mut buf[(LINE_FLOATS - skew) % LINE_FLOATS..][..nk];
    let mut writer = LineWriter::new(out);
    for ((i, j), g) in part_rows(inp.lay, part).zip(gosa) {
        let at = inp.lay.row(i, j);
        // The row's two end values are p's (a boundary value both fields
        // share, or a ghost that the exchange replaces), so that
        // consecutive rows of a plane reach the writer as one contiguous
        // run of whole lines.
        row[0] = inp.p[at];
        row[nk - 1] = inp.p[at + nk - 1];
        *g = kernel::sweep_row(isa, inp, i, j, row);
        writer.write(at - start, row);
    }
}

impl Backend for CpuBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: Kind::Cpu,
            threads: self.parts.len(),
            device: None,
            detail: Some(format!(
                "kernel {}; {} stores; {}",
                self.isa.name(),
                if self.streaming {
                    "streaming"
                } else {
                    "cached"
                },
                self.pool.describe()
            )),
            gpu_software: None,
        }
    }

    fn reset(&mut self) -> Result<()> {
        let (grid, block, dims) = (self.grid, self.block, self.lay.dims);
        let values = coefficient_values();
        self.for_each_part_mut(|part, field, piece| {
            for (n, row) in piece.chunks_exact_mut(dims[2]).enumerate() {
                let li = (part.mem.start + n) / dims[1];
                let v = match field {
                    0 | 1 => p_initial(&grid, block.global(0, li)),
                    f => values[f - 2],
                };
                row.fill(v);
            }
        });
        self.gosa = 0.0;
        Ok(())
    }

    fn sweep_start(&mut self) -> Result<()> {
        let lay = self.lay;
        let nk = lay.dims[2];
        let isa = self.isa;
        let (pn, coef) = self.fields.split_at_mut(2);
        let (p, next) = pn.split_at_mut(1);
        let inp = Inputs {
            lay,
            p: &p[0][..],
            coef: std::array::from_fn(|f| &coef[f][..]),
            omega: OMEGA,
        };
        let mut out_rest = &mut next[0][..];
        let mut gosa_rest = &mut self.row_gosa[..];
        let mut work = Vec::with_capacity(self.parts.len());
        for part in &self.parts {
            let (out, o_tail) = out_rest.split_at_mut(part.mem.len() * nk);
            let (g, g_tail) = gosa_rest.split_at_mut(part.rows.len());
            out_rest = o_tail;
            gosa_rest = g_tail;
            work.push((out, g));
        }
        let parts = &self.parts;
        let streaming = self.streaming;
        self.pool.scatter(work, |t, (out, g)| {
            if streaming {
                sweep_part_streaming(isa, &inp, &parts[t], out, g);
            } else {
                sweep_part_cached(isa, &inp, &parts[t], out, g);
            }
        });
        // Summed in row order: independent of the number of threads.
        self.gosa = self.row_gosa.iter().sum();
        Ok(())
    }

    fn sweep_finish(&mut self) -> Result<f64> {
        Ok(self.gosa)
    }

    fn pack(&mut self, face: Face, buf: &mut dyn HostBuffer) -> Result<f64> {
        let next = ArrayView3::from_shape(self.lay.dims, &self.fields[1][..]).expect("field shape");
        pack_plane(next, face, buf.as_mut_slice());
        Ok(0.0)
    }

    fn unpack(&mut self, face: Face, buf: &dyn HostBuffer) -> Result<f64> {
        let next =
            ArrayViewMut3::from_shape(self.lay.dims, &mut self.fields[1][..]).expect("field shape");
        unpack_plane(next, face, buf.as_slice());
        Ok(0.0)
    }

    fn swap(&mut self) {
        self.fields.swap(0, 1);
    }

    fn field(&mut self) -> Result<Array3<f32>> {
        let d = self.lay.dims;
        let copy = alloc::copied(&self.fields[0][..], "the copy of p read back")?;
        Array3::from_shape_vec((d[0], d[1], d[2]), copy)
            .map_err(|e| crate::error::Error::runtime(format!("field shape: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_covers_rows_and_memory_once() {
        for dims in [[3, 3, 3], [4, 7, 5], [10, 3, 8], [6, 6, 6]] {
            for threads in 1..9 {
                let parts = partition(dims, threads);
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
}
