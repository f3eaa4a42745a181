//! The GPU backend: one rank's fourteen fields resident on its device, the
//! sweep as one kernel launch (plus a tiny reduction), halo faces packed on
//! the device and copied through host staging buffers.
//!
//! Streams: `main` (lowest priority) runs the sweep, the reduction and the
//! resets; `halo` (highest priority) runs the boundary slabs under
//! `--overlap` and every pack/unpack and copy. Work moves between the two
//! only across host synchronisation, so no cross-stream event is needed.

use super::compile::Compiled;
use super::driver::{Device, cuda_err};
use super::regions::{self, Region};
use super::staging::PinnedBuffer;
use crate::backend::api::{Backend, BackendInfo, HostBuffer, Kind, Staging};
use crate::config::RunConfig;
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::grid::decomp::{Block, Face};
use crate::grid::fields::{OMEGA, coefficient_values, p_initial};
use cudarc::driver::{
    CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg, result,
    sys,
};
use ndarray::Array3;
use std::sync::Arc;

/// Sweep thread block: k-values (one warp, coalesced) by j-values.
const BLOCK: (u32, u32) = (32, 8);
/// i-planes each sweep block marches through.
const PLANES: usize = 16;
/// Threads of the one-block reduction of per-block partial sums.
const REDUCE_THREADS: u32 = 1024;
/// Threads per block of the element-wise kernels (pack, unpack, fill).
const FLAT_THREADS: u32 = 256;

/// One launch of the sweep kernel over a box.
#[derive(Debug, Clone, Copy)]
struct SweepLaunch {
    region: Region,
    /// k-tiles and j-tiles per i-chunk.
    tiles: [u32; 2],
    /// Thread blocks in all.
    blocks: u32,
    /// Index of this launch's first per-block partial sum.
    first_partial: usize,
}

impl SweepLaunch {
    /// Plans launches over `regions`, numbering their partial sums from
    /// `first`. Returns the launches and the next free partial index.
    fn plan(regions: &[Region], mut first: usize) -> Result<(Vec<SweepLaunch>, usize)> {
        let mut out = Vec::new();
        for r in regions.iter().filter(|r| !r.is_empty()) {
            let nkb = r.n[2].div_ceil(BLOCK.0 as usize);
            let njb = r.n[1].div_ceil(BLOCK.1 as usize);
            let nib = r.n[0].div_ceil(PLANES);
            let blocks = nkb * njb * nib;
            let blocks = u32::try_from(blocks)
                .ok()
                .filter(|&b| b < i32::MAX as u32)
                .ok_or_else(|| {
                    Error::usage(format!(
                        "a block of {}x{}x{} points is too large for one GPU launch: use more ranks",
                        r.n[0], r.n[1], r.n[2]
                    ))
                })?;
            out.push(SweepLaunch {
                region: *r,
                tiles: [nkb as u32, njb as u32],
                blocks,
                first_partial: first,
            });
            first += blocks as usize;
        }
        Ok((out, first))
    }
}

/// The loaded kernels.
struct Kernels {
    sweep: CudaFunction,
    reduce: CudaFunction,
    pack: CudaFunction,
    unpack: CudaFunction,
    fill: CudaFunction,
    fill_planes: CudaFunction,
}

/// One rank's block on its GPU.
pub struct GpuBackend {
    dev: Device,
    main: Arc<CudaStream>,
    halo: Arc<CudaStream>,
    k: Kernels,
    dims: [usize; 3],
    /// `p` and `next`: `bufs[cur]` is `p`.
    bufs: [CudaSlice<f32>; 2],
    cur: usize,
    coef: Vec<CudaSlice<f32>>,
    /// Initial `p` per local i-plane, for resets.
    plane_values: CudaSlice<f32>,
    partial: CudaSlice<f64>,
    gosa: CudaSlice<f64>,
    /// Device side of a packed face (faces normal to j or k).
    face: CudaSlice<f32>,
    /// Without overlap: the whole block in one launch.
    whole: Vec<SweepLaunch>,
    /// With overlap: boundary slabs, then the interior.
    boundary: Vec<SweepLaunch>,
    interior: Vec<SweepLaunch>,
    /// Partial sums the current sweep wrote.
    partials_used: usize,
    overlap: bool,
    staging: Staging,
    /// Timing events around copies (created with timing enabled).
    ev: [CudaEvent; 2],
    arch: String,
}

/// Device memory the backend allocates for a block with local extents
/// `dims`, in bytes (used by the preflight check).
pub fn device_bytes(dims: [usize; 3], partials: usize) -> u64 {
    let cells = dims.iter().map(|&d| d as u64).product::<u64>();
    let face = face_capacity(dims) as u64;
    14 * cells * 4 + partials as u64 * 8 + face * 4 + dims[0] as u64 * 4 + 8
}

/// Values in the largest face normal to j or k (those go through `face`).
fn face_capacity(dims: [usize; 3]) -> usize {
    (dims[0] * dims[2]).max(dims[0] * dims[1])
}

/// Launch shape of an element-wise kernel over `n` values.
fn flat(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(FLAT_THREADS as usize).clamp(1, 65_535) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (FLAT_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Raw device address of `s` (no cudarc event tracking: see `driver`).
fn addr<T>(s: &CudaSlice<T>, st: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(st);
    p
}

impl GpuBackend {
    /// Allocates and initialises the fields of `block` on `dev`, loading the
    /// kernels from `compiled`.
    pub fn new(
        dev: Device,
        compiled: Compiled,
        grid: &Grid,
        block: &Block,
        cfg: &RunConfig,
    ) -> Result<GpuBackend> {
        let ctx = dev.ctx.clone();
        let dims = block.local_dims();
        let (whole, n_whole) = SweepLaunch::plan(&[regions::whole(block)], 0)?;
        let (slabs, inner) = regions::boundary_and_interior(block);
        let (boundary, next_free) = SweepLaunch::plan(&slabs, 0)?;
        let (interior, n_overlap) = SweepLaunch::plan(&[inner], next_free)?;
        let partials = n_whole.max(n_overlap).max(1);
        dev.check_memory(
            device_bytes(dims, partials),
            &format!(
                "this rank's block ({}x{}x{} points with ghosts, 14 fields)",
                dims[0], dims[1], dims[2]
            ),
        )?;

        let module = ctx
            .load_module(compiled.ptx)
            .map_err(cuda_err("loading the compiled kernels"))?;
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(cuda_err("finding a kernel"))
        };
        let k = Kernels {
            sweep: f("sweep")?,
            reduce: f("reduce_partials")?,
            pack: f("pack_face")?,
            unpack: f("unpack_face")?,
            fill: f("fill")?,
            fill_planes: f("fill_planes")?,
        };
        ctx.bind_to_thread()
            .map_err(cuda_err("binding the context"))?;
        let (least, greatest) =
            result::stream::get_priority_range().map_err(cuda_err("reading stream priorities"))?;
        let main = ctx
            .new_stream_with_priority(least)
            .map_err(cuda_err("creating a stream"))?;
        let halo = ctx
            .new_stream_with_priority(greatest)
            .map_err(cuda_err("creating a stream"))?;
        let cells: usize = dims.iter().product();
        let alloc = |n: usize| -> Result<CudaSlice<f32>> {
            main.alloc_zeros::<f32>(n)
                .map_err(cuda_err("allocating device memory"))
        };
        let bufs = [alloc(cells)?, alloc(cells)?];
        let coef = (0..12).map(|_| alloc(cells)).collect::<Result<Vec<_>>>()?;
        let face = alloc(face_capacity(dims))?;
        let planes: Vec<f32> = (0..dims[0])
            .map(|li| p_initial(grid, block.global(0, li)))
            .collect();
        let plane_values = main
            .clone_htod(&planes)
            .map_err(cuda_err("copying initial values"))?;
        let partial = main
            .alloc_zeros::<f64>(partials)
            .map_err(cuda_err("allocating device memory"))?;
        let gosa = main
            .alloc_zeros::<f64>(1)
            .map_err(cuda_err("allocating device memory"))?;
        let event = || {
            ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(cuda_err("creating a timing event"))
        };
        let ev = [event()?, event()?];
        let mut gpu = GpuBackend {
            dev,
            main,
            halo,
            k,
            dims,
            bufs,
            cur: 0,
            coef,
            plane_values,
            partial,
            gosa,
            face,
            whole,
            boundary,
            interior,
            partials_used: 0,
            overlap: cfg.overlap,
            staging: cfg.staging,
            ev,
            arch: compiled.arch,
        };
        gpu.reset()?;
        Ok(gpu)
    }

    /// Queues one sweep launch over `l` on `st`.
    fn launch_sweep(&self, st: &CudaStream, l: &SweepLaunch) -> Result<()> {
        let p = addr(&self.bufs[self.cur], st);
        let out = addr(&self.bufs[1 - self.cur], st);
        let coef: Vec<u64> = self.coef.iter().map(|c| addr(c, st)).collect();
        let partial = addr(&self.partial, st) + (l.first_partial * 8) as u64;
        let omega = OMEGA;
        let (d1, d2) = (self.dims[1] as i64, self.dims[2] as i64);
        let r = &l.region;
        let lo = r.lo.map(|v| v as i32);
        let n = r.n.map(|v| v as i32);
        let planes = PLANES as i32;
        let tiles = l.tiles.map(|v| v as i32);
        let mut b = st.launch_builder(&self.k.sweep);
        b.arg(&p).arg(&out);
        for c in &coef {
            b.arg(c);
        }
        b.arg(&omega).arg(&d1).arg(&d2);
        b.arg(&lo[0]).arg(&lo[1]).arg(&lo[2]);
        b.arg(&n[0]).arg(&n[1]).arg(&n[2]);
        b.arg(&planes).arg(&tiles[0]).arg(&tiles[1]).arg(&partial);
        let cfg = LaunchConfig {
            grid_dim: (l.blocks, 1, 1),
            block_dim: (BLOCK.0, BLOCK.1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments match `sweep` in kernels.cu one for one;
        // the region lies inside the owned points, so every access stays
        // within the fields' extents, and `partial` has a slot per block.
        unsafe { b.launch(cfg) }.map_err(cuda_err("launching the sweep"))?;
        Ok(())
    }

    /// The stream halo work runs on.
    fn halo_stream(&self) -> Arc<CudaStream> {
        if self.overlap {
            self.halo.clone()
        } else {
            self.main.clone()
        }
    }

    /// Queues the element-wise face kernel `func` (pack or unpack) for
    /// `face` of `next` against the device face buffer.
    fn launch_face(
        &self,
        st: &CudaStream,
        func: &CudaFunction,
        face: Face,
        plane: usize,
    ) -> Result<()> {
        let next = addr(&self.bufs[1 - self.cur], st);
        let buf = addr(&self.face, st);
        let dim = face.dim as i32;
        let plane = plane as i64;
        let n = face.len(self.dims) as i64;
        // (a, b) run over the other two dimensions; b is the faster.
        let nb = if face.dim == 2 {
            self.dims[1]
        } else {
            self.dims[2]
        } as i64;
        let (d1, d2) = (self.dims[1] as i64, self.dims[2] as i64);
        let mut b = st.launch_builder(func);
        b.arg(&next)
            .arg(&buf)
            .arg(&dim)
            .arg(&plane)
            .arg(&nb)
            .arg(&n)
            .arg(&d1)
            .arg(&d2);
        // SAFETY: the arguments match pack_face/unpack_face; the face lies
        // inside the field and fits the face buffer (`face_capacity`).
        unsafe { b.launch(flat(n as usize)) }.map_err(cuda_err("launching a face kernel"))?;
        Ok(())
    }

    /// Device address of plane `plane` of `next` normal to i (contiguous).
    fn i_plane(&self, st: &CudaStream, plane: usize) -> u64 {
        let plane_len = (self.dims[1] * self.dims[2]) as u64;
        addr(&self.bufs[1 - self.cur], st) + plane as u64 * plane_len * 4
    }

    /// Seconds between the two timing events (waits for the second).
    fn event_seconds(&self) -> Result<f64> {
        let ms = self.ev[0]
            .elapsed_ms(&self.ev[1])
            .map_err(cuda_err("reading a timing event"))?;
        Ok(f64::from(ms) / 1e3)
    }

    /// Fills every field with its initial value on `main` and waits.
    fn fill_all(&self) -> Result<()> {
        let st = &self.main;
        let cells: usize = self.dims.iter().product();
        let n = cells as i64;
        let plane_len = (self.dims[1] * self.dims[2]) as i64;
        let table = addr(&self.plane_values, st);
        for buf in &self.bufs {
            let f = addr(buf, st);
            let mut b = st.launch_builder(&self.k.fill_planes);
            b.arg(&f).arg(&table).arg(&plane_len).arg(&n);
            // SAFETY: matches fill_planes; `table` has one value per i-plane.
            unsafe { b.launch(flat(cells)) }.map_err(cuda_err("initialising p"))?;
        }
        for (c, v) in self.coef.iter().zip(coefficient_values()) {
            let f = addr(c, st);
            let mut b = st.launch_builder(&self.k.fill);
            b.arg(&f).arg(&n).arg(&v);
            // SAFETY: matches fill; `f` holds `n` values.
            unsafe { b.launch(flat(cells)) }.map_err(cuda_err("initialising coefficients"))?;
        }
        st.synchronize()
            .map_err(cuda_err("initialising the fields"))
    }
}

impl Backend for GpuBackend {
    fn info(&self) -> BackendInfo {
        let staging = self.staging.name();
        BackendInfo {
            kind: Kind::Gpu,
            threads: 1,
            device: Some(self.dev.description.clone()),
            detail: Some(format!(
                "kernels {}, staging {staging}, overlap {}",
                self.arch,
                if self.overlap { "on" } else { "off" }
            )),
            gpu_software: None,
        }
    }

    fn reset(&mut self) -> Result<()> {
        self.cur = 0;
        self.fill_all()
    }

    fn sweep_start(&mut self) -> Result<()> {
        if self.overlap {
            let halo = self.halo.clone();
            for l in &self.boundary {
                self.launch_sweep(&halo, l)?;
            }
            let main = self.main.clone();
            for l in &self.interior {
                self.launch_sweep(&main, l)?;
            }
            self.partials_used = self
                .interior
                .iter()
                .chain(&self.boundary)
                .map(|l| l.first_partial + l.blocks as usize)
                .max()
                .unwrap_or(0);
            // The planes the exchange sends are final; the interior runs on.
            halo.synchronize()
                .map_err(cuda_err("sweeping the boundary"))
        } else {
            let main = self.main.clone();
            for l in &self.whole {
                self.launch_sweep(&main, l)?;
            }
            self.partials_used = self
                .whole
                .iter()
                .map(|l| l.first_partial + l.blocks as usize)
                .max()
                .unwrap_or(0);
            main.synchronize().map_err(cuda_err("sweeping"))
        }
    }

    fn sweep_finish(&mut self) -> Result<f64> {
        let st = self.main.clone();
        let partial = addr(&self.partial, &st);
        let out = addr(&self.gosa, &st);
        let n = self.partials_used as i64;
        let mut b = st.launch_builder(&self.k.reduce);
        b.arg(&partial).arg(&n).arg(&out);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (REDUCE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches reduce_partials; `n` partials were written by this
        // sweep (boundary ones before the host synchronised in
        // sweep_start, interior ones earlier on this stream).
        unsafe { b.launch(cfg) }.map_err(cuda_err("launching the reduction"))?;
        let mut g = [0.0f64];
        // SAFETY: `out` holds one f64; the stream is synchronised below
        // before `g` is read.
        unsafe { result::memcpy_dtoh_async(&mut g, out, st.cu_stream()) }
            .map_err(cuda_err("copying gosa"))?;
        st.synchronize().map_err(cuda_err("finishing the sweep"))?;
        Ok(g[0])
    }

    fn pack(&mut self, face: Face, buf: &mut dyn HostBuffer) -> Result<f64> {
        let st = self.halo_stream();
        let plane = face.send_plane(self.dims);
        let dst = buf.as_mut_slice();
        debug_assert_eq!(dst.len(), face.len(self.dims));
        let src = if face.dim == 0 {
            self.i_plane(&st, plane)
        } else {
            self.launch_face(&st, &self.k.pack, face, plane)?;
            addr(&self.face, &st)
        };
        self.ev[0]
            .record(&st)
            .map_err(cuda_err("recording an event"))?;
        // SAFETY: `src` holds `dst.len()` values (a face of `next` or the
        // face buffer); the stream is synchronised before returning.
        unsafe { result::memcpy_dtoh_async(dst, src, st.cu_stream()) }
            .map_err(cuda_err("copying a face to the host"))?;
        self.ev[1]
            .record(&st)
            .map_err(cuda_err("recording an event"))?;
        st.synchronize().map_err(cuda_err("packing a face"))?;
        self.event_seconds()
    }

    fn unpack(&mut self, face: Face, buf: &dyn HostBuffer) -> Result<f64> {
        let st = self.halo_stream();
        let plane = face.ghost_plane(self.dims);
        let src = buf.as_slice();
        debug_assert_eq!(src.len(), face.len(self.dims));
        let dst = if face.dim == 0 {
            self.i_plane(&st, plane)
        } else {
            addr(&self.face, &st)
        };
        self.ev[0]
            .record(&st)
            .map_err(cuda_err("recording an event"))?;
        // SAFETY: `dst` has room for `src.len()` values; the stream is
        // synchronised before `buf` can change.
        unsafe { result::memcpy_htod_async(dst, src, st.cu_stream()) }
            .map_err(cuda_err("copying a face to the device"))?;
        self.ev[1]
            .record(&st)
            .map_err(cuda_err("recording an event"))?;
        if face.dim != 0 {
            self.launch_face(&st, &self.k.unpack, face, plane)?;
        }
        st.synchronize().map_err(cuda_err("unpacking a face"))?;
        self.event_seconds()
    }

    fn swap(&mut self) {
        self.cur = 1 - self.cur;
    }

    fn staging(&mut self, len: usize) -> Result<Box<dyn HostBuffer>> {
        match self.staging {
            Staging::Pinned if len > 0 => Ok(Box::new(PinnedBuffer::new(&self.dev.ctx, len)?)),
            _ => Ok(Box::new(vec![0.0f32; len])),
        }
    }

    fn field(&mut self) -> Result<Array3<f32>> {
        let st = self.main.clone();
        let host = st
            .clone_dtoh(&self.bufs[self.cur])
            .map_err(cuda_err("copying p to the host"))?;
        st.synchronize()
            .map_err(cuda_err("copying p to the host"))?;
        let [d0, d1, d2] = self.dims;
        Array3::from_shape_vec((d0, d1, d2), host)
            .map_err(|e| Error::runtime(format!("device field has the wrong shape: {e}")))
    }
}

impl Drop for GpuBackend {
    fn drop(&mut self) {
        // Nothing may be pending on a buffer when it is freed.
        let _ = self.main.synchronize();
        let _ = self.halo.synchronize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::decomp::ProcGrid;

    /// Every launch's thread blocks cover its box, and with overlap the
    /// boundary and interior launches write disjoint, gap-free ranges of
    /// partial sums that fit the buffer sized for them.
    #[test]
    fn launches_cover_their_boxes_and_partials_do_not_overlap() {
        let grid = Grid::new([40, 21, 70]).unwrap();
        let pg = ProcGrid { p: [2, 2, 1] };
        for rank in 0..pg.ranks() {
            let block = Block::of(&grid, &pg, rank);
            let (whole, n_whole) = SweepLaunch::plan(&[regions::whole(&block)], 0).unwrap();
            let (slabs, inner) = regions::boundary_and_interior(&block);
            let (boundary, next) = SweepLaunch::plan(&slabs, 0).unwrap();
            let (interior, n_overlap) = SweepLaunch::plan(&[inner], next).unwrap();
            assert_eq!(
                n_whole,
                whole.iter().map(|l| l.blocks as usize).sum::<usize>()
            );
            let mut expect = 0;
            for l in boundary.iter().chain(&interior) {
                assert_eq!(l.first_partial, expect, "rank {rank}");
                expect += l.blocks as usize;
                let r = l.region;
                assert!(l.tiles[0] as usize * BLOCK.0 as usize >= r.n[2]);
                assert!(l.tiles[1] as usize * BLOCK.1 as usize >= r.n[1]);
                let chunks = l.blocks as usize / (l.tiles[0] * l.tiles[1]) as usize;
                assert!(chunks * PLANES >= r.n[0] && (chunks - 1) * PLANES < r.n[0]);
            }
            assert_eq!(expect, n_overlap);
            // Threads per sweep block fit block_sum's MAX_WARPS (32) warps.
            assert!((BLOCK.0 * BLOCK.1).div_ceil(32) <= 32 && REDUCE_THREADS.div_ceil(32) <= 32);
        }
    }
}
