//! The GPU backend: one rank's fourteen fields resident on its device, the
//! sweep as one kernel launch per box (plus a tiny reduction), halo faces
//! packed on the device and copied through host staging buffers.
//!
//! Streams: `main` (lowest priority) runs the sweep, the reduction and the
//! resets; `halo` (highest priority) runs the boundary slabs under
//! `--overlap` and every pack/unpack and copy. Work moves between the two
//! only across host synchronisation, so no cross-stream event is needed.
//!
//! Host round trips per iteration: the sweep's gosa stays on the device
//! (the sweep's last block sums the per-block partials, in a fixed order)
//! and comes back through an 8-byte page-locked copy into one of two
//! slots, read one iteration late (`sweeps_finish_late`): the host queues
//! the next sweep before it waits for the last one's gosa, so the device
//! does not idle between iterations. The solver reads the last pending
//! gosa (`gosa_pending`) before it uses a final value. With neighbours,
//! the host also waits for the planes the exchange sends before packing
//! them, and twice per dimension step of the exchange: once after packing
//! both faces and copying them to the host, once after copying both
//! received faces to the device and unpacking them.
//!
//! Layout (`--gpu-layout`, `layout`): every field is addressed from its
//! origin with the row pitch of its layout, which the kernels take as
//! their `d2`; exact, a field is the host's array value for value and is
//! copied whole; padded, it is copied an i-plane at a time through the
//! pack/unpack kernels and a plane buffer.
//!
//! Faces: a face normal to i is contiguous in the exact layout and copied
//! in place; any other face (normal to j or k, or to i when padded) is
//! gathered by the pack kernel into its own device face buffer (one per
//! face with a neighbour, sized by `launch::face_buffer_len`), so that the
//! two faces of a step are in flight together. The halo's first dimension
//! step's faces are the exception: the sweep stores them into their
//! buffers itself (`swept`, `launch::FaceStores`), as every value of them
//! is final once it has run, and no pack kernel gathers them. Two timing events around the copies of a step give
//! its transfer time. The GPU backend keeps one ghost layer (its
//! `Capabilities`, which the command line's validation reads), so a face's
//! message is one layer.
//!
//! Under `--trace`, `device_trace` records further events around the
//! sweep and the face steps, whose spans become the streams' own tracks.
//!
//! Device-direct halos (`--halo peer|nccl|mpi-device`): the backend is
//! then a [`DeviceHalo`]. Each step packs the faces normal to j or k into
//! their send buffers (the first step's are the sweep's, in stream order
//! before it; a face normal to i is sent from its plane of
//! `next`), hands the step to its [`FaceTransport`], which moves the faces
//! into receive buffers of their own (a face normal to i straight into
//! its ghost plane), and unpacks, all on the halo stream and in stream
//! order: the host waits neither after the sweep nor within the exchange.
//! Events take the place of those waits: the gosa copy on `main` waits for
//! the boundary slabs on `halo` (`boundary_done`), and the next sweep on
//! `main`, and `field`, for the last unpack (`halo_done`). What is left is
//! the one wait per iteration for the previous gosa.
//!
//! Every launch's shape and arguments come from `launch`. The tests run
//! this backend on the emulated CUDA driver (`scripts/cuda-emu.sh`), which
//! executes the real kernels and checks every launch's arguments against
//! the kernel's declaration.

use super::alloc::{Allocator, DeviceBuf};
use super::compile::Compiled;
use super::connections;
use super::device_trace::{self, DeviceTrace};
use super::driver::{self, Device, Probe, cuda_err};
use super::host_counts::{HostCounter, Steady};
use super::launch::{
    self, Arg, FaceCopy, FaceStores, GOSA_WORDS, Shape, SweepBuffers, SweepLaunch, SweepPlan,
    SweepVariant, face_args, fill_args, fill_planes_args, sweep_args_storing,
};
use super::layout::FieldLayout;
use super::nvtx;
use super::options::GpuOptions;
use super::staging::{self, Pinned, PinnedBuffer};
use super::transport::{DeviceFace, DeviceStep, FaceTransport};
use crate::backend::api::{
    Backend, BackendInfo, Capabilities, DeviceHalo, GpuSoftware, HaloStep, HostBuffer,
};
use crate::comm::Comm;
use crate::config::Staging;
use crate::config::{BackendKind, HaloPath};
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::grid::decomp::{Block, Face};
use crate::grid::fields::{COEFFICIENTS, NAMES, coefficient_values, p_initial};
use crate::timeline;
use crate::timing::Phase;
use cudarc::driver::{
    CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
    PushKernelArg, result, sys,
};
use ndarray::Array3;
use std::sync::Arc;

/// The loaded kernels.
pub struct Kernels {
    /// The sweep variant the run asked for.
    sweep: CudaFunction,
    /// Its twin that also stores the first halo step's faces, for the
    /// launches that store them.
    sweep_faces: CudaFunction,
    pack: CudaFunction,
    unpack: CudaFunction,
    fill: CudaFunction,
    fill_planes: CudaFunction,
}

impl Kernels {
    /// Finds the sweep kernel of `variant` and every other kernel of
    /// `launch::KERNELS` in `module`.
    pub fn load(module: &Arc<CudaModule>, variant: SweepVariant) -> Result<Kernels> {
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(cuda_err("finding a kernel"))
        };
        let [.., pack, unpack, fill, fill_planes] = launch::KERNELS;
        Ok(Kernels {
            sweep: f(variant.kernel())?,
            sweep_faces: f(&format!("{}{}", variant.kernel(), launch::FACES_SUFFIX))?,
            pack: f(pack)?,
            unpack: f(unpack)?,
            fill: f(fill)?,
            fill_planes: f(fill_planes)?,
        })
    }
}

/// A rank's opened device: what the probe found, the device, and the
/// kernels compiled and loaded for it.
pub struct Opened {
    /// What the library probe found.
    pub probe: Probe,
    /// The device and its context.
    pub dev: Device,
    /// How the kernels were compiled.
    pub compiled: Arc<Compiled>,
    /// The kernels, loaded in the device's context.
    pub kernels: Kernels,
}

/// One rank's block on its GPU.
pub struct GpuBackend {
    dev: Device,
    main: Arc<CudaStream>,
    halo: Arc<CudaStream>,
    k: Kernels,
    dims: [usize; 3],
    /// How the fields lie in their allocations.
    layout: FieldLayout,
    /// Values from each field's allocation to its origin, in
    /// `grid::fields::NAMES` order (`bufs[0]`, `bufs[1]`, then `coef`).
    fronts: [usize; NAMES.len()],
    /// `p` and `next`: `bufs[cur]` is `p`.
    bufs: [DeviceBuf<f32>; 2],
    cur: usize,
    coef: Vec<DeviceBuf<f32>>,
    /// A padded layout's buffer of one i-plane, which fields are loaded
    /// and read back through.
    plane_buf: Option<DeviceBuf<f32>>,
    /// Initial `p` per local i-plane, for resets.
    plane_values: DeviceBuf<f32>,
    partial: DeviceBuf<f64>,
    /// This rank's gosa of the last two sweeps on the device (words 0 and
    /// 1, as f64 bits) and the fused reduction's ticket (word 2): see
    /// [`launch::GOSA_WORDS`] ...
    gosa: DeviceBuf<u64>,
    /// ... and the two gosa slots' page-locked copy on the host.
    gosa_host: Pinned<f64>,
    /// The slot the next sweep writes its gosa to.
    slot: usize,
    /// The slot whose gosa is on its way to the host and not yet read.
    pending: Option<usize>,
    /// Recorded on `main` after each slot's copy to the host.
    gosa_copied: [CudaEvent; 2],
    /// Recorded on `main` after a sweep's gosa copy: under `--overlap` the
    /// next boundary sweep (on `halo`) waits for it, since the host no
    /// longer waits for `main` between iterations.
    main_done: CudaEvent,
    /// Device face buffers of the faces with a neighbour that need one
    /// (`launch::face_buffer_len`), by `[dim][side]`.
    faces: [[Option<DeviceBuf<f32>>; 2]; 3],
    /// The dimension of the halo's first step when its faces have device
    /// buffers: the sweep stores those faces itself ([`FaceStores`]), as
    /// every value of them is final once it has run (a later step's faces
    /// carry ghosts that the earlier steps receive after the sweep).
    swept: Option<usize>,
    /// Whether the faces of `swept` hold the last sweep's, not yet packed:
    /// set when a sweep is queued, cleared once the step is packed and
    /// whenever `next` changes otherwise (swap, reset, load_next), so that
    /// an exchange without a sweep before it (the halo self-test) packs.
    swept_fresh: bool,
    plan: SweepPlan,
    overlap: bool,
    /// Whether the block exchanges any face (else nothing waits for the
    /// sweep before its gosa).
    neighbours: bool,
    staging: Staging,
    /// Timing events around copies (created with timing enabled).
    ev: [CudaEvent; 2],
    /// The streams' events for `--trace`, once this rank's thread records
    /// a timeline.
    trace: Option<DeviceTrace>,
    info: BackendInfo,
    /// The device-direct halo transport (`None`: staged through the host).
    transport: Option<Box<dyn FaceTransport>>,
    /// Receive buffers of the faces with a neighbour that are not one
    /// contiguous plane of the field, by `[dim][side]`, on the device
    /// paths (the staged path receives into `faces`).
    recv_faces: [[Option<DeviceBuf<f32>>; 2]; 3],
    /// Recorded on the halo stream after the boundary slabs (device paths,
    /// `--overlap`): the gosa copy on `main` waits for it.
    boundary_done: CudaEvent,
    /// Recorded on the halo stream after each step's unpacks (device
    /// paths): `main` waits for it before the next sweep and `field`.
    halo_done: CudaEvent,
    /// The emulated driver's counts of host waits and bytes, if it has
    /// them, and the most of any iteration since the last reset.
    counter: Option<HostCounter>,
    steady: Steady,
}

/// Raw device address of `s` (no cudarc event tracking: see `driver`).
fn addr<T>(s: &CudaSlice<T>, st: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(st);
    p
}

/// The end marker every launch passes after its declared parameters
/// (see [`launch::ARGS_END`]); a static, so its address outlives any launch.
static ARGS_END_STATIC: u64 = launch::ARGS_END;

/// Queues kernel `f` on `st` with launch shape `shape` and arguments
/// `args`; `what` names it in errors. Each argument goes in its own 8-byte
/// slot ([`launch::slots`]), then the end marker, so that an emulated
/// driver can check the count and width of every parameter.
fn launch(st: &CudaStream, f: &CudaFunction, shape: Shape, args: &[Arg], what: &str) -> Result<()> {
    let slots = launch::slots(args);
    let mut b = st.launch_builder(f);
    for s in &slots {
        b.arg(s);
    }
    b.arg(&ARGS_END_STATIC);
    let [gx, gy, gz] = shape.grid;
    let [bx, by, bz] = shape.block;
    let cfg = LaunchConfig {
        grid_dim: (gx, gy, gz),
        block_dim: (bx, by, bz),
        shared_mem_bytes: 0,
    };
    // SAFETY: `args` is the kernel's parameter list in order, with the
    // C types of its parameters (the emulated driver checks the count and
    // every width against the compiled kernel); each slot starts with the value's bytes, which
    // is what the driver reads for a parameter of that width on a
    // little-endian host, and the driver ignores the one extra pointer.
    // `slots` outlives the call, which copies the values.
    // Every address lies in a live allocation of this backend and every
    // index range inside it (the launch plan and face geometry are checked
    // by the same tests).
    unsafe { b.launch(cfg) }.map_err(cuda_err(what))?;
    Ok(())
}

impl GpuBackend {
    /// Allocates and initialises the fields of `block` on the opened
    /// device, with the launches of `plan`.
    pub fn new(
        opened: Opened,
        plan: SweepPlan,
        grid: &Grid,
        block: &Block,
        cfg: &GpuOptions,
        comm: &dyn Comm,
    ) -> Result<GpuBackend> {
        let Opened {
            probe,
            dev,
            compiled,
            kernels,
        } = opened;
        let ctx = dev.ctx.clone();
        let dims = block.local_dims();
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
        let layout = FieldLayout::of(cfg.layout, dims);
        // MPI reads the fields' planes and the faces itself on the
        // mpi-device path: memory it can share, not pool memory.
        let allocator = if cfg.halo == HaloPath::MpiDevice {
            Allocator::Shareable
        } else {
            dev.allocator
        };
        let alloc = |n: usize| DeviceBuf::<f32>::zeros(&main, n, allocator);
        let bufs = [alloc(layout.alloc_len(0))?, alloc(layout.alloc_len(1))?];
        let coef = (0..COEFFICIENTS)
            .map(|c| alloc(layout.alloc_len(2 + c)))
            .collect::<Result<Vec<_>>>()?;
        let transport = super::halo_path::open(cfg.halo, &ctx, comm)?;
        let mut fronts = [0; NAMES.len()];
        for (f, buf) in bufs.iter().chain(&coef).enumerate() {
            fronts[f] = layout.front(addr(buf, &main), f);
        }
        let mut faces = [[None, None], [None, None], [None, None]];
        let mut recv_faces = [[None, None], [None, None], [None, None]];
        for (face, _) in block.halo_faces() {
            if let Some(n) = launch::face_buffer_len(face, &layout) {
                faces[face.dim][face.side] = Some(alloc(n)?);
                if transport.is_some() {
                    recv_faces[face.dim][face.side] = Some(alloc(n)?);
                }
            }
        }
        let plane_buf = launch::plane_buffer_len(&layout).map(alloc).transpose()?;
        let planes: Vec<f32> = (0..dims[0])
            .map(|li| p_initial(grid, block.global(0, li)))
            .collect();
        let plane_values = DeviceBuf::from_host(&main, &planes, dev.allocator)?;
        let partial = DeviceBuf::<f64>::zeros(&main, plan.partials, dev.allocator)?;
        // Zeroed: the ticket starts at 0 (the last block of each sweep
        // sets it back).
        let gosa = DeviceBuf::<u64>::zeros(&main, GOSA_WORDS, dev.allocator)?;
        let gosa_host = Pinned::<f64>::new(&ctx, 2)?;
        let event = || {
            ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(cuda_err("creating a timing event"))
        };
        let ev = [event()?, event()?];
        let order = || ctx.new_event(None).map_err(cuda_err("creating an event"));
        let gosa_copied = [order()?, order()?];
        let main_done = order()?;
        let boundary_done = order()?;
        let halo_done = order()?;
        if cfg.sweep.slab() {
            let fields: Vec<u64> = bufs
                .iter()
                .chain(&coef)
                .zip(fronts)
                .map(|(b, front)| addr(b, &main) + 4 * front as u64)
                .collect();
            if !launch::slab_fits(&fields, layout.len()) {
                return Err(Error::usage(format!(
                    "--gpu-sweep {} addresses the fields from one base with 32-bit offsets, and \
                     this device placed them more than 2^32 values apart: use --gpu-sweep \
                     classic or pipelined, or more ranks",
                    cfg.sweep.name()
                )));
            }
        }
        let sweep = compiled.resources.get(cfg.sweep.kernel());
        let info = BackendInfo {
            kind: BackendKind::Gpu,
            threads: 1,
            device: Some(dev.description.clone()),
            detail: Some(
                format!(
                    "kernels {} by NVRTC {}{}, occupancy {}, sweep {}, layout {} (pitch {}), \
                     staging {}, overlap {}, {}",
                    compiled.arch,
                    compiled.nvrtc_version,
                    sweep.map_or(String::new(), |r| format!(
                        " (sweep {} registers{})",
                        r.registers,
                        if r.spills() { ", SPILLS" } else { "" }
                    )),
                    compiled.occupancy.name(),
                    cfg.sweep.name(),
                    cfg.layout.name(),
                    layout.pitch,
                    cfg.staging.name(),
                    if cfg.overlap { "on" } else { "off" },
                    connections::describe()
                ) + &transport
                    .as_ref()
                    .map_or(String::new(), |t| format!(", halo {}", t.path().name())),
            ),
            cpus: None,
            gpu_software: Some(GpuSoftware {
                cuda_driver: format!("{}.{}", probe.driver.0, probe.driver.1),
                nvrtc: probe.nvrtc.version_string(),
                nvrtc_library: probe.nvrtc.path.clone(),
                allocator: Some(allocator.name().into()),
            }),
            emulated: driver::emulator(),
            gpu_sweep: Some(cfg.sweep.name().to_string()),
            host_traffic: None,
            gpu_layout: Some(cfg.layout.name().to_string()),
        };
        let mut gpu = GpuBackend {
            dev,
            main,
            halo,
            k: kernels,
            dims,
            layout,
            fronts,
            bufs,
            cur: 0,
            coef,
            plane_buf,
            plane_values,
            partial,
            gosa,
            gosa_host,
            slot: 0,
            pending: None,
            gosa_copied,
            main_done,
            swept: block
                .halo_faces()
                .next()
                .map(|(face, _)| face)
                .filter(|&face| launch::face_buffer_len(face, &layout).is_some())
                .map(|face| face.dim),
            swept_fresh: false,
            faces,
            plan,
            overlap: cfg.overlap,
            neighbours: block.halo_faces().next().is_some(),
            staging: cfg.staging,
            ev,
            trace: None,
            info,
            transport,
            recv_faces,
            boundary_done,
            halo_done,
            counter: HostCounter::find(),
            steady: Steady::default(),
        };
        gpu.reset()?;
        Ok(gpu)
    }

    /// The device address of field `f`'s origin (its number in
    /// `grid::fields::NAMES`: 0 and 1 are `bufs`, then the coefficients),
    /// as seen from `st`.
    fn origin(&self, f: usize, st: &CudaStream) -> u64 {
        let buf = match f {
            0 | 1 => &self.bufs[f],
            c => &self.coef[c - 2],
        };
        addr(buf, st) + 4 * self.fronts[f] as u64
    }

    /// Device addresses of the sweep's fields' origins, as seen from `st`.
    fn sweep_buffers(&self, st: &CudaStream) -> SweepBuffers {
        let mut coef = [0u64; COEFFICIENTS];
        for (c, a) in coef.iter_mut().enumerate() {
            *a = self.origin(2 + c, st);
        }
        let words = addr(&self.gosa, st);
        SweepBuffers {
            p: self.origin(self.cur, st),
            out: self.origin(1 - self.cur, st),
            coef,
            partial: addr(&self.partial, st),
            ticket: words + 8 * 2,
            gosa: words + 8 * self.slot as u64,
        }
    }

    /// Queues the sweep launches `ls` on `st`, of a sweep whose launches
    /// write `total` partial sums in all; each launch also stores what it
    /// computes of the first step's faces into their device buffers.
    fn launch_sweeps(&self, st: &CudaStream, ls: &[SweepLaunch]) -> Result<()> {
        let b = self.sweep_buffers(st);
        let total = self.plan.used(self.overlap);
        let face_bufs = self.swept.map(|d| {
            (
                d,
                self.faces[d]
                    .each_ref()
                    .map(|f| f.as_ref().map(|f| addr(f, st))),
            )
        });
        for l in ls {
            let faces = face_bufs.map_or(FaceStores::default(), |(d, bufs)| {
                FaceStores::of(d, bufs, l, self.dims)
            });
            let kernel = if faces.any() {
                &self.k.sweep_faces
            } else {
                &self.k.sweep
            };
            launch(
                st,
                kernel,
                l.shape(),
                &sweep_args_storing(&b, &self.layout, l, total, faces),
                "launching the sweep",
            )?;
        }
        Ok(())
    }

    /// Whether the sweep just queued stored `face` into its device buffer,
    /// so that no pack kernel gathers it.
    fn swept_face(&self, face: Face) -> bool {
        self.swept_fresh && self.swept == Some(face.dim)
    }

    /// Queues the copy of this sweep's gosa slot to its host slot on
    /// `main`, with the events that say it is done; the next sweep writes
    /// the other slot. Returns the slot copied.
    fn queue_gosa(&mut self) -> Result<usize> {
        let st = self.main.clone();
        let slot = self.slot;
        let src = addr(&self.gosa, &st) + 8 * slot as u64;
        // The last block of the sweep wrote the slot: in a launch on
        // `main` (ordered before this copy), or on `halo`, which the host
        // waited for in sweeps_start, or on the device paths this copy
        // waits for.
        if self.transport.is_some() && self.overlap {
            st.wait(&self.boundary_done)
                .map_err(cuda_err("ordering the streams"))?;
        }
        let dst = &mut self.gosa_host.values_mut()[slot..=slot];
        // SAFETY: `src` is one f64 of the gosa allocation and `dst` one of
        // the page-locked host slots; the host reads that slot only after
        // waiting for `gosa_copied[slot]`, and the next copy into it is
        // queued two sweeps later, after that read.
        unsafe { result::memcpy_dtoh_async(dst, src, st.cu_stream()) }
            .map_err(cuda_err("copying gosa"))?;
        self.gosa_copied[slot]
            .record(&st)
            .map_err(cuda_err("recording an event"))?;
        self.main_done
            .record(&st)
            .map_err(cuda_err("recording an event"))?;
        self.slot = 1 - slot;
        Ok(slot)
    }

    /// Waits for the copy of gosa slot `slot` and reads it.
    fn read_gosa(&self, slot: usize) -> Result<f64> {
        self.gosa_copied[slot]
            .synchronize()
            .map_err(cuda_err("finishing the sweep"))?;
        Ok(self.gosa_host.values()[slot])
    }

    /// Under `--trace`, waits for the sweep just queued and hands its
    /// spans to the timeline (a trace reads each sweep's events before the
    /// next sweep records them again; its runs give up the late read's
    /// overlap). The halo stream's boundary slabs were waited for in
    /// sweeps_start.
    fn trace_sweep_done(&mut self) -> Result<()> {
        if self.trace.is_some() {
            self.main
                .synchronize()
                .map_err(cuda_err("finishing the sweep"))?;
        }
        if let Some(t) = self.trace.as_mut() {
            t.sweep_done()?;
        }
        Ok(())
    }

    /// Queues the sweep launches that `which` picks from the plan on
    /// `st`, between the trace's sweep events when tracing (`halo`: the
    /// boundary slabs on the halo stream); `any` false: there are none.
    fn traced_sweeps(
        &mut self,
        st: &CudaStream,
        halo: bool,
        any: bool,
        which: impl Fn(&GpuBackend) -> &Vec<SweepLaunch>,
    ) -> Result<()> {
        let traced = any && self.trace.is_some();
        if traced && let Some(t) = self.trace.as_mut() {
            t.sweep_begins(st, halo)?;
        }
        self.launch_sweeps(st, which(self))?;
        if traced && let Some(t) = &self.trace {
            t.sweep_ends(st, halo)?;
        }
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

    /// The copy of `face` (its sent plane when `send`) after checking that
    /// `len`, the host buffer's length, is one layer of it.
    fn face_copy(&self, face: Face, len: usize, send: bool) -> Result<FaceCopy> {
        let c = FaceCopy::of(face, &self.layout, send);
        if len != c.len {
            return Err(Error::runtime(format!(
                "halo buffer of {len} values for a face of {} (the GPU backend exchanges one \
                 layer)",
                c.len
            )));
        }
        Ok(c)
    }

    /// The device address the host copy of `c` (of `face`) reads or
    /// writes: the plane of `next` itself when it is contiguous, else the
    /// face's device buffer.
    fn face_device(&self, st: &CudaStream, face: Face, c: &FaceCopy) -> Result<u64> {
        match c.contiguous {
            Some(off) => Ok(self.origin(1 - self.cur, st) + off as u64 * 4),
            None => self.faces[face.dim][face.side]
                .as_ref()
                .map(|b| addr(b, st))
                .ok_or_else(|| {
                    Error::runtime(format!(
                        "no device face buffer for {face:?}, which has no neighbour"
                    ))
                }),
        }
    }

    /// Queues the element-wise face kernel `func` (pack or unpack) for
    /// the copy `c` of `face` between `next` and the face's device buffer;
    /// nothing for a contiguous face.
    fn launch_face(
        &self,
        st: &CudaStream,
        func: &CudaFunction,
        face: Face,
        c: &FaceCopy,
    ) -> Result<()> {
        if c.contiguous.is_some() {
            return Ok(());
        }
        let buf = self.face_device(st, face, c)?;
        self.launch_face_at(st, func, c, buf)
    }

    /// Queues the face kernel `func` for the copy `c` between `next` and
    /// the device face buffer at `buf`.
    fn launch_face_at(
        &self,
        st: &CudaStream,
        func: &CudaFunction,
        c: &FaceCopy,
        buf: u64,
    ) -> Result<()> {
        let next = self.origin(1 - self.cur, st);
        launch(
            st,
            func,
            launch::flat(c.len),
            &face_args(next, buf, c, &self.layout),
            "launching a face kernel",
        )
    }

    /// Queues the packing of `faces` (checked by the caller) on `st`: the
    /// pack kernels of the faces normal to j or k, a timing event, the
    /// copies of every face to its host buffer, a timing event.
    fn queue_pack(&self, st: &CudaStream, faces: &mut [(Face, &mut dyn HostBuffer)]) -> Result<()> {
        if let Some(t) = &self.trace {
            t.pack_begins(st)?;
        }
        for (face, buf) in faces.iter() {
            let c = self.face_copy(*face, buf.as_slice().len(), true)?;
            if !self.swept_face(*face) {
                self.launch_face(st, &self.k.pack, *face, &c)?;
            }
        }
        self.ev[0]
            .record(st)
            .map_err(cuda_err("recording an event"))?;
        for (face, buf) in faces.iter_mut() {
            let dst = buf.as_mut_slice();
            let c = self.face_copy(*face, dst.len(), true)?;
            let src = self.face_device(st, *face, &c)?;
            // SAFETY: `src` holds `dst.len()` values (a plane of `next` or
            // the face's own buffer, which no other face of the step
            // uses); the caller synchronises the stream before returning,
            // so `dst` is not read or dropped while the copy is pending.
            unsafe { result::memcpy_dtoh_async(dst, src, st.cu_stream()) }
                .map_err(cuda_err("copying a face to the host"))?;
        }
        self.ev[1]
            .record(st)
            .map_err(cuda_err("recording an event"))
    }

    /// Queues the unpacking of `faces` (checked by the caller) on `st`: a
    /// timing event, the copies of every host buffer to the device, a
    /// timing event, the unpack kernels of the faces normal to j or k.
    fn queue_unpack(&self, st: &CudaStream, faces: &[(Face, &dyn HostBuffer)]) -> Result<()> {
        self.ev[0]
            .record(st)
            .map_err(cuda_err("recording an event"))?;
        for (face, buf) in faces {
            let src = buf.as_slice();
            let c = self.face_copy(*face, src.len(), false)?;
            let dst = self.face_device(st, *face, &c)?;
            // SAFETY: `dst` has room for `src.len()` values (the ghost
            // plane of `next` or the face's own buffer); the caller
            // synchronises the stream before returning, so `buf` cannot
            // change or be dropped while the copy is pending.
            unsafe { result::memcpy_htod_async(dst, src, st.cu_stream()) }
                .map_err(cuda_err("copying a face to the device"))?;
        }
        self.ev[1]
            .record(st)
            .map_err(cuda_err("recording an event"))?;
        for (face, buf) in faces {
            let c = self.face_copy(*face, buf.as_slice().len(), false)?;
            self.launch_face(st, &self.k.unpack, *face, &c)?;
        }
        if let Some(t) = &self.trace {
            t.unpack_ends(st)?;
        }
        Ok(())
    }

    /// Notes that `faces` were packed: faces the sweep stored serve one
    /// pack (the staged path receives into the same buffers).
    fn faces_packed(&mut self, mut faces: impl Iterator<Item = Face>) {
        if faces.any(|f| self.swept == Some(f.dim)) {
            self.swept_fresh = false;
        }
    }

    /// Whether any of `faces` needs a pack or unpack kernel (a face normal
    /// to j or k), so that a trace shows that kernel work.
    fn any_kernel(&self, mut faces: impl Iterator<Item = Face>) -> bool {
        faces.any(|face| FaceCopy::of(face, &self.layout, true).contiguous.is_none())
    }

    /// Starts the device events of a trace once this thread records a
    /// timeline (the compute stream is idle between sweeps), and records
    /// the sweep's anchor; stops them when it no longer records.
    fn trace_sweep(&mut self) -> Result<()> {
        if !timeline::recording() {
            self.trace = None;
            return Ok(());
        }
        if self.trace.is_none() {
            self.trace = Some(DeviceTrace::start(&self.dev.ctx, &self.main)?);
        }
        if let Some(t) = self.trace.as_mut() {
            t.anchor(&self.main)?;
        }
        Ok(())
    }

    /// The plane buffer of a padded layout and its address from `st`.
    fn plane_buffer(&self, st: &CudaStream) -> Result<u64> {
        self.plane_buf
            .as_ref()
            .map(|b| addr(b, st))
            .ok_or_else(|| Error::runtime("a padded field without its plane buffer"))
    }

    /// Queues the copy of the host's `values` (the exact layout's order)
    /// into `next` of a padded layout on `st`, an i-plane at a time:
    /// each plane to the plane buffer, then unpacked into its rows. The
    /// caller waits for `st` before `values` may change.
    fn planes_to_device(&self, st: &CudaStream, values: &[f32]) -> Result<()> {
        let buf = self.plane_buffer(st)?;
        let next = self.origin(1 - self.cur, st);
        let len = self.dims[1] * self.dims[2];
        for (i, plane) in values.chunks_exact(len).enumerate() {
            // SAFETY: the plane buffer holds `len` values; the caller
            // synchronises `st` before returning, so `values` outlives the
            // copy, and the next plane's copy is ordered after this
            // plane's unpack on the same stream.
            unsafe { result::memcpy_htod_async(buf, plane, st.cu_stream()) }
                .map_err(cuda_err("copying a field to the device"))?;
            let c = FaceCopy::plane(i, self.dims);
            launch(
                st,
                &self.k.unpack,
                launch::flat(c.len),
                &face_args(next, buf, &c, &self.layout),
                "launching a face kernel",
            )?;
        }
        Ok(())
    }

    /// Queues the copy of `p` of a padded layout into a host array in the
    /// exact layout's order on `st`, an i-plane at a time (packed into the
    /// plane buffer, then copied), and waits for it.
    fn planes_to_host(&self, st: &CudaStream) -> Result<Vec<f32>> {
        let buf = self.plane_buffer(st)?;
        let p = self.origin(self.cur, st);
        let len = self.dims[1] * self.dims[2];
        let mut host = vec![0.0f32; self.dims[0] * len];
        for (i, plane) in host.chunks_exact_mut(len).enumerate() {
            let c = FaceCopy::plane(i, self.dims);
            launch(
                st,
                &self.k.pack,
                launch::flat(c.len),
                &face_args(p, buf, &c, &self.layout),
                "launching a face kernel",
            )?;
            // SAFETY: the plane buffer holds `len` values; `host` lives
            // until the wait below, and the next plane's pack is ordered
            // after this copy on the same stream.
            unsafe { result::memcpy_dtoh_async(plane, buf, st.cu_stream()) }
                .map_err(cuda_err("copying p to the host"))?;
        }
        st.synchronize()
            .map_err(cuda_err("copying p to the host"))?;
        Ok(host)
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
        // Padding included: every value from the origin on is set.
        let cells = self.layout.len();
        let plane_len = self.layout.plane();
        let table = addr(&self.plane_values, st);
        for f in 0..self.bufs.len() {
            let args = fill_planes_args(self.origin(f, st), table, plane_len, cells);
            launch(
                st,
                &self.k.fill_planes,
                launch::flat(cells),
                &args,
                "initialising p",
            )?;
        }
        for (c, v) in coefficient_values().into_iter().enumerate() {
            let args = fill_args(self.origin(2 + c, st), cells, v);
            launch(
                st,
                &self.k.fill,
                launch::flat(cells),
                &args,
                "initialising coefficients",
            )?;
        }
        st.synchronize()
            .map_err(cuda_err("initialising the fields"))
    }
}

impl Backend for GpuBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            host_traffic: self.steady.most(),
            ..self.info.clone()
        }
    }

    fn device_halo(&mut self) -> Option<&mut dyn DeviceHalo> {
        if self.transport.is_some() {
            Some(self)
        } else {
            None
        }
    }

    fn reset(&mut self) -> Result<()> {
        self.cur = 0;
        self.pending = None;
        if self.transport.is_some() {
            // The last exchange's unpacks may still be queued on `halo`.
            self.halo
                .synchronize()
                .map_err(cuda_err("finishing the halo exchange"))?;
        }
        self.swept_fresh = false;
        self.fill_all()?;
        self.steady.restart();
        Ok(())
    }

    fn sweeps_start(&mut self, sweeps: usize) -> Result<()> {
        let _nvtx = nvtx::range(Phase::Compute.name());
        Capabilities::of(BackendKind::Gpu).check_sweeps(sweeps)?;
        if let Some(c) = &self.counter {
            self.steady.sweep_starts(c.now());
        }
        self.trace_sweep()?;
        let direct = self.transport.is_some();
        if self.overlap {
            let halo = self.halo.clone();
            // The last sweep's interior (on `main`) may still run: the
            // boundary reads its field and shares its ticket.
            halo.wait(&self.main_done)
                .map_err(cuda_err("ordering the streams"))?;
            let boundary = !self.plan.boundary.is_empty();
            self.traced_sweeps(&halo, true, boundary, |b| &b.plan.boundary)?;
            let main = self.main.clone();
            if direct {
                // The device paths: the gosa copy waits for the boundary,
                // the interior for the last exchange's unpacks, and the
                // packs follow the boundary on `halo`; the host goes on.
                self.boundary_done
                    .record(&halo)
                    .map_err(cuda_err("recording an event"))?;
                main.wait(&self.halo_done)
                    .map_err(cuda_err("ordering the streams"))?;
            }
            self.traced_sweeps(&main, false, true, |b| &b.plan.interior)?;
            // The planes the exchange sends are final; the interior runs on.
            if !self.plan.boundary.is_empty() && !direct {
                halo.synchronize()
                    .map_err(cuda_err("sweeping the boundary"))?;
            }
        } else {
            let main = self.main.clone();
            self.traced_sweeps(&main, false, true, |b| &b.plan.whole)?;
            // The exchange packs `next` next: wait here so that its time is
            // the sweep's, not the packing's. Without neighbours nothing
            // waits before sweeps_finish reads gosa. The device paths
            // pack on `main` after the sweep, in stream order.
            if self.neighbours && !direct {
                main.synchronize().map_err(cuda_err("sweeping"))?;
            }
        }
        self.swept_fresh = self.swept.is_some();
        Ok(())
    }

    fn sweeps_finish(&mut self, gosa: &mut [f64]) -> Result<()> {
        let _nvtx = nvtx::range(Phase::Compute.name());
        // A gosa still pending is superseded: nobody asked for it.
        self.pending = None;
        let slot = self.queue_gosa()?;
        gosa[0] = self.read_gosa(slot)?;
        self.trace_sweep_done()
    }

    fn defers_gosa(&self) -> bool {
        true
    }

    fn sweeps_finish_late(&mut self) -> Result<Option<f64>> {
        let _nvtx = nvtx::range(Phase::Compute.name());
        let slot = self.queue_gosa()?;
        self.trace_sweep_done()?;
        let previous = self.pending.replace(slot);
        previous.map(|s| self.read_gosa(s)).transpose()
    }

    fn gosa_pending(&mut self) -> Result<Option<f64>> {
        self.pending.take().map(|s| self.read_gosa(s)).transpose()
    }

    fn pack(&mut self, faces: &mut [(Face, &mut dyn HostBuffer)]) -> Result<f64> {
        let _nvtx = nvtx::range(Phase::Pack.name());
        let st = self.halo_stream();
        // Checked before anything is queued, so that an error leaves no
        // work behind.
        for (face, buf) in faces.iter() {
            let c = self.face_copy(*face, buf.as_slice().len(), true)?;
            self.face_device(&st, *face, &c)?;
        }
        let queued = self.queue_pack(&st, faces);
        // Waited for even when queuing failed part-way: no copy may still
        // be writing a host buffer once this returns.
        let waited = {
            let _copies = nvtx::range(Phase::Transfer.name());
            st.synchronize().map_err(cuda_err("packing faces"))
        };
        queued.and(waited)?;
        if let Some(t) = &self.trace {
            let packed = faces
                .iter()
                .map(|(f, _)| *f)
                .filter(|&f| !self.swept_face(f));
            let kernels = self.any_kernel(packed);
            let track = device_trace::halo_track(self.overlap);
            t.pack_done(track, kernels, [&self.ev[0], &self.ev[1]])?;
        }
        self.faces_packed(faces.iter().map(|(f, _)| *f));
        self.event_seconds()
    }

    fn unpack(&mut self, faces: &[(Face, &dyn HostBuffer)]) -> Result<f64> {
        let _nvtx = nvtx::range(Phase::Unpack.name());
        let st = self.halo_stream();
        for (face, buf) in faces {
            let c = self.face_copy(*face, buf.as_slice().len(), false)?;
            self.face_device(&st, *face, &c)?;
        }
        let queued = self.queue_unpack(&st, faces);
        // As in pack: no copy may still be reading a host buffer once this
        // returns.
        let waited = {
            let _copies = nvtx::range(Phase::Transfer.name());
            st.synchronize().map_err(cuda_err("unpacking faces"))
        };
        queued.and(waited)?;
        if let Some(t) = &self.trace {
            let kernels = self.any_kernel(faces.iter().map(|(f, _)| *f));
            let track = device_trace::halo_track(self.overlap);
            t.unpack_done(track, kernels, [&self.ev[0], &self.ev[1]])?;
        }
        self.event_seconds()
    }

    fn swap(&mut self) {
        self.cur = 1 - self.cur;
        self.swept_fresh = false;
    }

    fn staging(&mut self, len: usize) -> Result<Box<dyn HostBuffer>> {
        if self.staging == Staging::Pinned && len > 0 {
            match PinnedBuffer::new(&self.dev.ctx, len) {
                Ok(b) => return Ok(Box::new(b)),
                // A driver that refuses to lock host memory (a sandbox):
                // this rank stages in pageable memory, said and recorded.
                Err(e) => {
                    staging::pinned_refused(len * 4, &e);
                    self.staging = Staging::Pageable;
                    if let Some(d) = self.info.detail.as_mut() {
                        d.push_str(", pinned staging refused: pageable");
                    }
                }
            }
        }
        Ok(Box::new(vec![0.0f32; len]))
    }

    fn load_next(&mut self, field: &Array3<f32>) -> Result<()> {
        let st = self.main.clone();
        let values = field
            .as_slice()
            .filter(|v| v.len() == self.dims.iter().product::<usize>())
            .ok_or_else(|| {
                Error::runtime(format!(
                    "a field of {:?} values for a block of {:?}",
                    field.dim(),
                    self.dims
                ))
            })?;
        self.swept_fresh = false;
        if self.layout.padded() {
            self.planes_to_device(&st, values)?;
        } else {
            st.memcpy_htod(values, &mut *self.bufs[1 - self.cur])
                .map_err(cuda_err("copying a field to the device"))?;
        }
        st.synchronize()
            .map_err(cuda_err("copying a field to the device"))
    }

    fn field(&mut self) -> Result<Array3<f32>> {
        let st = self.main.clone();
        if self.transport.is_some() {
            st.wait(&self.halo_done)
                .map_err(cuda_err("ordering the streams"))?;
        }
        let host = if self.layout.padded() {
            self.planes_to_host(&st)?
        } else {
            st.clone_dtoh(&*self.bufs[self.cur])
                .map_err(cuda_err("copying p to the host"))?
        };
        st.synchronize()
            .map_err(cuda_err("copying p to the host"))?;
        let [d0, d1, d2] = self.dims;
        Array3::from_shape_vec((d0, d1, d2), host)
            .map_err(|e| Error::runtime(format!("device field has the wrong shape: {e}")))
    }
}

impl GpuBackend {
    /// Where the face received from `face`'s neighbour goes on the device
    /// paths: its ghost plane of `next` when contiguous, else its receive
    /// buffer.
    fn recv_device(&self, st: &CudaStream, face: Face, c: &FaceCopy) -> Result<u64> {
        match c.contiguous {
            Some(off) => Ok(self.origin(1 - self.cur, st) + off as u64 * 4),
            None => self.recv_faces[face.dim][face.side]
                .as_ref()
                .map(|b| addr(b, st))
                .ok_or_else(|| {
                    Error::runtime(format!(
                        "no device receive buffer for {face:?}, which has no neighbour"
                    ))
                }),
        }
    }

    /// The faces of `step` with a neighbour.
    fn step_faces(step: HaloStep) -> impl Iterator<Item = Face> {
        (0..2)
            .filter(move |&side| step.peers[side].is_some())
            .map(move |side| Face {
                dim: step.dim,
                side,
            })
    }
}

impl DeviceHalo for GpuBackend {
    fn pack_step(&mut self, step: HaloStep) -> Result<()> {
        let _nvtx = nvtx::range(Phase::Pack.name());
        let st = self.halo_stream();
        for face in Self::step_faces(step).filter(|&f| !self.swept_face(f)) {
            let c = FaceCopy::of(face, &self.layout, true);
            self.launch_face(&st, &self.k.pack, face, &c)?;
        }
        self.faces_packed(Self::step_faces(step));
        Ok(())
    }

    fn transfer_step(&mut self, step: HaloStep, comm: &dyn Comm) -> Result<()> {
        let st = self.halo_stream();
        let mut send = [None, None];
        let mut recv = [None, None];
        for face in Self::step_faces(step) {
            let out = FaceCopy::of(face, &self.layout, true);
            let back = FaceCopy::of(face, &self.layout, false);
            send[face.side] = Some(DeviceFace {
                addr: self.face_device(&st, face, &out)?,
                len: out.len,
            });
            recv[face.side] = Some(DeviceFace {
                addr: self.recv_device(&st, face, &back)?,
                len: back.len,
            });
        }
        let device_step = DeviceStep {
            dim: step.dim,
            peers: step.peers,
            send,
            recv,
            stream: &st,
        };
        let transport = self
            .transport
            .as_mut()
            .ok_or_else(|| Error::runtime("a device halo step without a device transport"))?;
        transport.exchange(&device_step, comm)
    }

    fn unpack_step(&mut self, step: HaloStep) -> Result<()> {
        let _nvtx = nvtx::range(Phase::Unpack.name());
        let st = self.halo_stream();
        for face in Self::step_faces(step) {
            let c = FaceCopy::of(face, &self.layout, false);
            if c.contiguous.is_none() {
                let buf = self.recv_device(&st, face, &c)?;
                self.launch_face_at(&st, &self.k.unpack, &c, buf)?;
            }
        }
        self.halo_done
            .record(&st)
            .map_err(cuda_err("recording an event"))
    }
}

impl Drop for GpuBackend {
    fn drop(&mut self) {
        // Nothing may be pending on a buffer when it is freed.
        let _ = self.main.synchronize();
        let _ = self.halo.synchronize();
    }
}
