//! How the GPU kernels are launched, in every build: the launch constants
//! (passed to NVRTC as `-D` definitions, so `kernels.cu` has no copy of
//! them), the sweep's launch plan over a block, the face copies' geometry
//! and each kernel's argument list.
//!
//! Everything here is plain arithmetic on numbers and device addresses,
//! with no CUDA call, so that the `gpu_emu_*` tests can check the launch
//! plan's coverage on the host in every build: the backend launches exactly
//! the configurations and arguments these functions return.

use super::layout::FieldLayout;
use super::regions::{self, Region};
use crate::error::{Error, Result};
use crate::grid::decomp::{Block, Face};
use crate::grid::fields::{COEFFICIENTS, NAMES, OMEGA};

/// The CUDA C source of every kernel.
pub const SOURCE: &str = include_str!("kernels.cu");

/// Threads per warp.
pub const WARP: u32 = 32;
/// Threads per sweep thread block (its tile shape varies, its size not).
pub const SWEEP_THREADS: u32 = 256;
/// i-planes each sweep thread marches through.
pub const PLANES: usize = 16;
/// Most warps a block reduction handles (the size of its shared array).
pub const MAX_WARPS: u32 = 32;
/// Threads of the reduction of the sweep's per-block sums: gosa is summed
/// in the order of a one-block reduction over this many threads (that of
/// the separate `reduce_partials` kernel before the sum moved into the
/// sweep's last block), whichever block runs it (`fixed_sum` in
/// kernels.cu).
pub const REDUCE_THREADS: u32 = 1024;
/// Threads per block of the element-wise kernels (pack, unpack, fill).
pub const FLAT_THREADS: u32 = 256;
/// Most blocks of an element-wise kernel (each thread then strides).
pub const FLAT_MAX_BLOCKS: u32 = 65_535;

/// Names of the kernels the module holds: the sweep variants
/// ([`SweepVariant::kernel`], of which the backend loads the one it runs),
/// their twins that also store the first halo step's faces
/// ([`FACES_SUFFIX`], loaded with it), then the others, which it loads
/// all.
pub const KERNELS: [&str; 12] = [
    "sweep",
    "sweep_pipelined",
    "sweep_slab",
    "sweep_pipelined_slab",
    "sweep_faces",
    "sweep_pipelined_faces",
    "sweep_slab_faces",
    "sweep_pipelined_slab_faces",
    "pack_face",
    "unpack_face",
    "fill",
    "fill_planes",
];

/// What a sweep kernel's name takes for its twin that stores faces
/// ([`FaceStores`]): the same sweep, and only the launches that store
/// faces run it, so that the others keep the sweep's own registers.
pub const FACES_SUFFIX: &str = "_faces";

pub use crate::config::{Occupancy, SweepVariant};

/// The `-D` definitions `kernels.cu` needs (it refuses to compile
/// without them), for the sweep variant `occ`.
pub fn defines(occ: Occupancy) -> Vec<String> {
    [
        ("HIMENO_WARP", WARP),
        ("HIMENO_SWEEP_THREADS", SWEEP_THREADS),
        ("HIMENO_SWEEP_MIN_BLOCKS", occ.min_blocks()),
        ("HIMENO_MAX_WARPS", MAX_WARPS),
        ("HIMENO_REDUCE_THREADS", REDUCE_THREADS),
    ]
    .iter()
    .map(|(k, v)| format!("-D{k}={v}"))
    .collect()
}

/// A launch shape: blocks of the grid and threads of a block, per axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// `gridDim`.
    pub grid: [u32; 3],
    /// `blockDim`.
    pub block: [u32; 3],
}

/// The thread tile of a sweep launch over a box of extents `n`: `[x, y]`
/// threads along k and j, `x * y = SWEEP_THREADS`. A warp spans k (one
/// coalesced row) where the box is at least a warp wide; a box narrower
/// than a warp in k (the one-wide k slab of `--overlap`) puts the spare
/// lanes on j, and a box thinner than the default tile in j (the one-wide
/// j slab) puts them on k, so that lanes are not left idle.
pub fn tile(n: [usize; 3]) -> [u32; 2] {
    let t = SWEEP_THREADS as usize;
    let w = WARP as usize;
    let [x, y] = if n[2] < w {
        let x = n[2].max(1).next_power_of_two();
        [x, t / x]
    } else if n[1] < t / w {
        let y = n[1].max(1).next_power_of_two();
        [t / y, y]
    } else {
        [w, t / w]
    };
    [x as u32, y as u32]
}

/// One launch of the sweep kernel over a box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepLaunch {
    /// The box of owned points (local indices).
    pub region: Region,
    /// Threads along k and j of each block ([`tile`]).
    pub tile: [u32; 2],
    /// k-tiles and j-tiles per i-chunk.
    pub tiles: [u32; 2],
    /// Thread blocks in all (k-tiles x j-tiles x i-chunks of [`PLANES`]).
    pub blocks: u32,
    /// Index of this launch's first per-block partial sum.
    pub first_partial: usize,
}

impl SweepLaunch {
    /// Plans launches over the non-empty boxes of `regions`, numbering
    /// their partial sums from `first`. Returns the launches and the next
    /// free partial index.
    pub fn plan(regions: &[Region], mut first: usize) -> Result<(Vec<SweepLaunch>, usize)> {
        let mut out = Vec::new();
        for r in regions.iter().filter(|r| !r.is_empty()) {
            let tile = tile(r.n);
            let nkb = r.n[2].div_ceil(tile[0] as usize);
            let njb = r.n[1].div_ceil(tile[1] as usize);
            let nib = r.n[0].div_ceil(PLANES);
            let too_large = || {
                Error::usage(format!(
                    "a block of {}x{}x{} points is too large for one GPU launch: use more ranks",
                    r.n[0], r.n[1], r.n[2]
                ))
            };
            // The kernel indexes with 32-bit ints within a plane and its
            // grid is one-dimensional (at most 2^31 - 1 blocks).
            let fits = |v: usize| i32::try_from(v).is_ok();
            if !(0..3).all(|d| fits(r.lo[d] + r.n[d] + 1)) {
                return Err(too_large());
            }
            let blocks = nkb
                .checked_mul(njb)
                .and_then(|b| b.checked_mul(nib))
                .and_then(|b| u32::try_from(b).ok())
                .filter(|&b| b < i32::MAX as u32)
                .ok_or_else(too_large)?;
            out.push(SweepLaunch {
                region: *r,
                tile,
                tiles: [nkb as u32, njb as u32],
                blocks,
                first_partial: first,
            });
            first += blocks as usize;
        }
        Ok((out, first))
    }

    /// The launch shape: a one-dimensional grid of [`SweepLaunch::blocks`].
    pub fn shape(&self) -> Shape {
        Shape {
            grid: [self.blocks, 1, 1],
            block: [self.tile[0], self.tile[1], 1],
        }
    }

    /// The partial-sum slot just past this launch's.
    pub fn end_partial(&self) -> usize {
        self.first_partial + self.blocks as usize
    }
}

/// Every sweep launch of a block: the whole block in one go, or, with
/// `--overlap`, the boundary slabs (what the halo exchange sends) before
/// the interior. The two sets share one partial-sum buffer of
/// [`SweepPlan::partials`] slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepPlan {
    /// Without overlap: the whole block.
    pub whole: Vec<SweepLaunch>,
    /// With overlap: the boundary slabs first ...
    pub boundary: Vec<SweepLaunch>,
    /// ... then the interior.
    pub interior: Vec<SweepLaunch>,
    /// Partial-sum slots the larger of the two sets needs (at least 1).
    pub partials: usize,
}

impl SweepPlan {
    /// Plans the launches of `block`.
    pub fn of(block: &Block) -> Result<SweepPlan> {
        let (whole, n_whole) = SweepLaunch::plan(&[regions::whole(block)], 0)?;
        let (slabs, inner) = regions::boundary_and_interior(block);
        let (boundary, next) = SweepLaunch::plan(&slabs, 0)?;
        let (interior, n_overlap) = SweepLaunch::plan(&[inner], next)?;
        Ok(SweepPlan {
            whole,
            boundary,
            interior,
            partials: n_whole.max(n_overlap).max(1),
        })
    }

    /// The partial-sum slots one sweep writes, `0..used(overlap)`.
    pub fn used(&self, overlap: bool) -> usize {
        let launches: Vec<&SweepLaunch> = if overlap {
            self.boundary.iter().chain(&self.interior).collect()
        } else {
            self.whole.iter().collect()
        };
        launches.iter().map(|l| l.end_partial()).max().unwrap_or(0)
    }
}

/// The launch shape of an element-wise kernel over `n` values.
pub fn flat(n: usize) -> Shape {
    let blocks = n
        .div_ceil(FLAT_THREADS as usize)
        .clamp(1, FLAT_MAX_BLOCKS as usize) as u32;
    Shape {
        grid: [blocks, 1, 1],
        block: [FLAT_THREADS, 1, 1],
    }
}

/// How a face of the new field moves between the device and a host buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaceCopy {
    /// Dimension normal to the face.
    pub dim: usize,
    /// Local index of the plane copied (the sent plane when packing, the
    /// ghost plane when unpacking).
    pub plane: usize,
    /// Values in the face.
    pub len: usize,
    /// Values along the faster of the two dimensions the face spans.
    pub nb: usize,
    /// For faces normal to i in the exact layout, which are contiguous:
    /// the offset of their first value from the field's origin, copied
    /// directly; `None` for the others, which go through a device face
    /// buffer and a pack/unpack kernel.
    pub contiguous: Option<usize>,
}

impl FaceCopy {
    /// The copy of `face` of a field laid out as `layout`: its sent plane
    /// when `send`, its ghost plane otherwise.
    pub fn of(face: Face, layout: &FieldLayout, send: bool) -> FaceCopy {
        let dims = layout.dims;
        let plane = if send {
            face.send_plane(dims)
        } else {
            face.ghost_plane(dims)
        };
        let nb = if face.dim == 2 { dims[1] } else { dims[2] };
        FaceCopy {
            dim: face.dim,
            plane,
            len: face.len(dims),
            nb,
            contiguous: (face.dim == 0 && !layout.padded()).then_some(plane * layout.plane()),
        }
    }

    /// The copy of local i-plane `i` whole (owned points and ghosts),
    /// through a pack/unpack kernel: how a padded field is loaded and
    /// read back, a plane at a time.
    pub fn plane(i: usize, dims: [usize; 3]) -> FaceCopy {
        FaceCopy {
            dim: 0,
            plane: i,
            len: dims[1] * dims[2],
            nb: dims[2],
            contiguous: None,
        }
    }
}

/// Values of the largest face normal to j or k (no device face buffer
/// holds more).
pub fn face_capacity(dims: [usize; 3]) -> usize {
    (dims[0] * dims[2]).max(dims[0] * dims[1])
}

/// Values of the device face buffer of `face` (one layer), or `None` for
/// a face normal to i in the exact layout, which is contiguous and copied
/// in place (padded, its rows are not). The backend keeps one such buffer
/// per face with a neighbour that needs one, so that both faces of a
/// dimension step are packed, copied and unpacked with one wait for the
/// device.
pub fn face_buffer_len(face: Face, layout: &FieldLayout) -> Option<usize> {
    (face.dim != 0 || layout.padded()).then(|| face.len(layout.dims))
}

/// Values of the device buffer a padded field is loaded and read back
/// through, one i-plane at a time ([`FaceCopy::plane`]); none for the
/// exact layout, which is copied whole.
pub fn plane_buffer_len(layout: &FieldLayout) -> Option<usize> {
    layout.padded().then(|| layout.dims[1] * layout.dims[2])
}

/// Granularity of device allocations from the driver's memory pool:
/// each allocation is counted rounded up to it.
pub const ALLOCATION_GRANULE: u64 = 2 << 20;

/// Device memory the backend allocates for a block laid out as `layout`,
/// `partials` partial-sum slots and halo faces `faces`, in bytes: the
/// fourteen fields ([`FieldLayout::alloc_len`]), a face buffer per face
/// that needs one ([`face_buffer_len`]), the plane buffer of a padded
/// layout ([`plane_buffer_len`]), the initial value of each i-plane, the
/// partial sums, and gosa's two slots with the reduction's ticket
/// ([`GOSA_WORDS`] words of 8 bytes), each allocation rounded up to
/// [`ALLOCATION_GRANULE`]. The memory check of all ranks sharing a device
/// relies on it being exact.
pub fn device_bytes(layout: &FieldLayout, partials: usize, faces: &[Face]) -> u64 {
    let dims = layout.dims;
    let round = |b: u64| b.div_ceil(ALLOCATION_GRANULE) * ALLOCATION_GRANULE;
    let face_buffers: u64 = faces
        .iter()
        .filter_map(|&f| face_buffer_len(f, layout))
        .chain(plane_buffer_len(layout))
        .map(|n| round(n as u64 * 4))
        .sum();
    let fields: u64 = (0..NAMES.len())
        .map(|f| round(layout.alloc_len(f) as u64 * 4))
        .sum();
    fields
        + face_buffers
        + round(dims[0] as u64 * 4)
        + round(partials as u64 * 8)
        + round(GOSA_WORDS as u64 * 8)
}

/// Words of 8 bytes of the allocation that holds gosa's two slots (words
/// 0 and 1: a sweep writes one, the host reads the other, one iteration
/// late) and the fused reduction's ticket (the low 4 bytes of word 2).
pub const GOSA_WORDS: usize = 3;

/// One kernel argument's value, as the kernel's parameter type holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A device address (any pointer parameter).
    Ptr(u64),
    /// `int`.
    I32(i32),
    /// `long long`.
    I64(i64),
    /// `float`.
    F32(f32),
}

/// The high half of the slot of a 4-byte argument (`int`, `float`): a
/// parameter read as 8 bytes shows it, so a width mismatch is caught.
pub const CANARY: u64 = 0xA5A5_A5A5;

/// The value of the extra parameter every launch passes after the declared
/// ones (`"HIMENO.."` as ASCII). The real driver reads only the parameters
/// a kernel declares and ignores it; the emulated driver checks the count
/// and widths with it: a slot whose declared width is 8 with its high half
/// equal to [`CANARY`] was given a 4-byte value, a slot declared 4 wide
/// whose high half is not the canary was given 8 bytes, and the parameter
/// array must hold exactly the declared count of slots before the pointer
/// to this value.
pub const ARGS_END: u64 = 0x4849_4D45_4E4F_2E2E;

impl Value {
    /// The value's 8-byte parameter slot: its bytes little-endian in the
    /// low bytes and, for 4-byte values, [`CANARY`] in the high 4 bytes.
    /// A kernel reads the parameter from the slot's start with its declared
    /// width, so on a little-endian host a 4-byte parameter reads exactly
    /// the value.
    pub fn slot(self) -> u64 {
        let narrow = |bits: u32| (CANARY << 32) | u64::from(bits);
        match self {
            Value::Ptr(v) => v,
            Value::I64(v) => u64::from_le_bytes(v.to_le_bytes()),
            Value::I32(v) => narrow(u32::from_le_bytes(v.to_le_bytes())),
            Value::F32(v) => narrow(v.to_bits()),
        }
    }
}

/// The parameter slots of `args`, in order (see [`Value::slot`]).
pub fn slots(args: &[Arg]) -> Vec<u64> {
    args.iter().map(|a| a.value.slot()).collect()
}

/// One kernel argument: the parameter's name in `kernels.cu` and its value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arg {
    /// Parameter name.
    pub name: &'static str,
    /// Value.
    pub value: Value,
}

/// Shorthand for an argument.
fn arg(name: &'static str, value: Value) -> Arg {
    Arg { name, value }
}

/// A local extent or index as the kernels' 64-bit `long long`.
fn i64_of(v: usize) -> i64 {
    i64::try_from(v).expect("extents fit 64 bits")
}

/// A local extent or index as a kernel `int` (checked by the plan).
fn i32_of(v: usize) -> i32 {
    i32::try_from(v).expect("the launch plan checked that indices fit 32 bits")
}

/// Device addresses of a sweep's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepBuffers {
    /// The current field, read.
    pub p: u64,
    /// The new field, written.
    pub out: u64,
    /// The coefficients in [`crate::grid::fields::coef`] order.
    pub coef: [u64; COEFFICIENTS],
    /// The partial-sum buffer's first slot.
    pub partial: u64,
    /// The ticket counter of the fused reduction (one `unsigned`, 0
    /// between sweeps).
    pub ticket: u64,
    /// Where this sweep's gosa goes (one `double`).
    pub gosa: u64,
}

/// Whether the fields at `addrs` (device addresses of their origins,
/// `cells` values from each: [`FieldLayout::len`]) lie within 2^32 values of the lowest of them, as the slab
/// variants of the sweep need (one base and a 32-bit offset per field,
/// 32-bit indices).
pub fn slab_fits(addrs: &[u64], cells: usize) -> bool {
    let Some(&lo) = addrs.iter().min() else {
        return true;
    };
    let span = 4u64 << 32;
    addrs.iter().all(|&a| {
        (a - lo).is_multiple_of(4)
            && (a - lo)
                .checked_add(cells as u64 * 4)
                .is_some_and(|end| end <= span)
    })
}

/// The device face buffers a sweep launch also stores its new p into
/// (the kernels' `store_faces`): the faces normal to `dim`, the halo's
/// first dimension step, whose every value is final once the sweep has
/// run, so that the step launches no pack kernel. `lo` and `hi` are the
/// buffers of the low and high face, 0 where the launch stores none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaceStores {
    /// The dimension normal to the faces.
    pub dim: usize,
    /// The low face's buffer, or 0.
    pub lo: u64,
    /// The high face's buffer, or 0.
    pub hi: u64,
}

impl FaceStores {
    /// What launch `l` of a block of local extents `dims` stores of the
    /// faces normal to `dim` whose device buffers are `bufs` (per side,
    /// `None` without a neighbour): a face's buffer where the launch's box
    /// holds owned points of the plane next to it (the first or last owned
    /// plane; the ghost layer is one deep), so that every value of the
    /// plane is stored once over a sweep's launches and a launch that
    /// does not reach the plane (the interior under `--overlap`) is handed
    /// none.
    pub fn of(dim: usize, bufs: [Option<u64>; 2], l: &SweepLaunch, dims: [usize; 3]) -> FaceStores {
        let r = &l.region;
        let touches =
            |plane: usize| !r.is_empty() && (r.lo[dim]..r.lo[dim] + r.n[dim]).contains(&plane);
        FaceStores {
            dim,
            lo: bufs[0].filter(|_| touches(1)).unwrap_or(0),
            hi: bufs[1].filter(|_| touches(dims[dim] - 2)).unwrap_or(0),
        }
    }

    /// Whether the launch stores any face (and so runs the sweep's
    /// [`FACES_SUFFIX`] twin).
    pub fn any(&self) -> bool {
        self.lo != 0 || self.hi != 0
    }
}

/// The arguments of `sweep` (and of every variant, which share its
/// parameters) for launch `l` of a block laid out as `layout` (`b` holds
/// the fields' origins), one of the launches of a sweep that writes
/// `total` partial sums in all, storing no face. The kernels' `d2` is the
/// row pitch.
pub fn sweep_args(
    b: &SweepBuffers,
    layout: &FieldLayout,
    l: &SweepLaunch,
    total: usize,
) -> Vec<Arg> {
    sweep_args_storing(b, layout, l, total, FaceStores::default())
}

/// As [`sweep_args`], the launch also storing the faces of `faces`.
pub fn sweep_args_storing(
    b: &SweepBuffers,
    layout: &FieldLayout,
    l: &SweepLaunch,
    total: usize,
    faces: FaceStores,
) -> Vec<Arg> {
    let dims = layout.dims;
    let r = &l.region;
    let mut a = vec![arg("p", Value::Ptr(b.p)), arg("out", Value::Ptr(b.out))];
    for (c, &addr) in b.coef.iter().enumerate() {
        a.push(arg(NAMES[2 + c], Value::Ptr(addr)));
    }
    a.extend([
        arg("omega", Value::F32(OMEGA)),
        arg("d1", Value::I64(i64_of(dims[1]))),
        arg("d2", Value::I64(i64_of(layout.pitch))),
        arg("i0", Value::I32(i32_of(r.lo[0]))),
        arg("j0", Value::I32(i32_of(r.lo[1]))),
        arg("k0", Value::I32(i32_of(r.lo[2]))),
        arg("ni", Value::I32(i32_of(r.n[0]))),
        arg("nj", Value::I32(i32_of(r.n[1]))),
        arg("nk", Value::I32(i32_of(r.n[2]))),
        arg("planes", Value::I32(i32_of(PLANES))),
        arg("nkb", Value::I32(i32_of(l.tiles[0] as usize))),
        arg("njb", Value::I32(i32_of(l.tiles[1] as usize))),
        arg(
            "partial",
            Value::Ptr(b.partial + 8 * l.first_partial as u64),
        ),
        arg("all", Value::Ptr(b.partial)),
        arg("total", Value::I64(i64_of(total))),
        arg("ticket", Value::Ptr(b.ticket)),
        arg("gosa", Value::Ptr(b.gosa)),
        arg("face_lo", Value::Ptr(faces.lo)),
        arg("face_hi", Value::Ptr(faces.hi)),
        arg("face_dim", Value::I32(i32_of(faces.dim))),
        arg("e0", Value::I32(i32_of(dims[0]))),
        arg("e2", Value::I32(i32_of(dims[2]))),
    ]);
    a
}

/// The arguments of `pack_face` (field `f`, its origin, to buffer `buf`)
/// or `unpack_face` (the reverse), which share their parameter list, for
/// a field laid out as `layout`: the kernels' `d2` is the row pitch.
pub fn face_args(f: u64, buf: u64, c: &FaceCopy, layout: &FieldLayout) -> Vec<Arg> {
    let dims = layout.dims;
    vec![
        arg("f", Value::Ptr(f)),
        arg("buf", Value::Ptr(buf)),
        arg("dim", Value::I32(i32_of(c.dim))),
        arg("plane", Value::I64(i64_of(c.plane))),
        arg("nb", Value::I64(i64_of(c.nb))),
        arg("n", Value::I64(i64_of(c.len))),
        arg("d1", Value::I64(i64_of(dims[1]))),
        arg("d2", Value::I64(i64_of(layout.pitch))),
    ]
}

/// The arguments of `fill`: `n` values of `f` set to `v`.
pub fn fill_args(f: u64, n: usize, v: f32) -> Vec<Arg> {
    vec![
        arg("f", Value::Ptr(f)),
        arg("n", Value::I64(i64_of(n))),
        arg("v", Value::F32(v)),
    ]
}

/// The arguments of `fill_planes`: every i-plane of `f` (of `plane_len`
/// values, `n` in all) set to its entry of `by_plane`.
pub fn fill_planes_args(f: u64, by_plane: u64, plane_len: usize, n: usize) -> Vec<Arg> {
    vec![
        arg("f", Value::Ptr(f)),
        arg("by_plane", Value::Ptr(by_plane)),
        arg("plane_len", Value::I64(i64_of(plane_len))),
        arg("n", Value::I64(i64_of(n))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_keep_their_size_and_fill_thin_boxes() {
        for n in [
            [40, 40, 40],
            [1, 300, 1],
            [5, 1, 300],
            [7, 3, 20],
            [1, 1, 1],
        ] {
            let t = tile(n);
            assert_eq!(t[0] * t[1], SWEEP_THREADS, "{n:?}");
            assert!(t[0].is_power_of_two() && t[1].is_power_of_two());
        }
        assert_eq!(tile([40, 40, 40]), [32, 8]);
        // The one-wide k slab: every lane on its own j.
        assert_eq!(tile([9, 100, 1]), [1, 256]);
        // The one-wide j slab: whole warps along k.
        assert_eq!(tile([9, 1, 100]), [256, 1]);
    }

    #[test]
    fn the_first_steps_faces_are_stored_once_by_the_launches_that_reach_their_planes() {
        use crate::grid::decomp::ProcGrid;
        let g = crate::grid::Grid::new([20, 21, 200]).unwrap();
        // The middle of three ranks in k: both k faces have neighbours.
        let block = Block::of(&g, &ProcGrid { p: [1, 1, 3] }, 1);
        let dims = block.local_dims();
        let plan = SweepPlan::of(&block).unwrap();
        let bufs = [Some(0x1000), Some(0x2000)];
        let whole = FaceStores::of(2, bufs, &plan.whole[0], dims);
        assert_eq!((whole.lo, whole.hi), (0x1000, 0x2000));
        // Overlap: the two k slabs store a face each, the interior none.
        let stores: Vec<(u64, u64)> = plan
            .boundary
            .iter()
            .chain(&plan.interior)
            .map(|l| FaceStores::of(2, bufs, l, dims))
            .map(|f| (f.lo, f.hi))
            .collect();
        assert_eq!(stores, [(0x1000, 0), (0, 0x2000), (0, 0)]);
        // Without a neighbour below, no low face.
        let top = FaceStores::of(2, [None, Some(0x2000)], &plan.whole[0], dims);
        assert_eq!((top.lo, top.hi), (0, 0x2000));
        let b = SweepBuffers {
            p: 0,
            out: 0,
            coef: [0; COEFFICIENTS],
            partial: 0,
            ticket: 0,
            gosa: 0,
        };
        let args = sweep_args_storing(&b, &FieldLayout::exact(dims), &plan.whole[0], 1, whole);
        let names: Vec<&str> = args.iter().rev().take(5).map(|a| a.name).collect();
        assert_eq!(names, ["e2", "e0", "face_dim", "face_hi", "face_lo"]);
    }

    #[test]
    fn k_slabs_are_a_warp_wide() {
        assert_eq!(regions::K_SLAB, WARP as usize);
        assert_eq!(tile([9, 100, regions::K_SLAB]), [32, 8]);
    }

    #[test]
    fn slab_variants_need_fields_within_2_pow_32_values() {
        let gib = 1u64 << 30;
        assert!(slab_fits(&[0x1000, 0x1000 + 4 * gib, 0x800], gib as usize));
        // The field farthest up ends exactly at 2^32 values.
        assert!(slab_fits(&[0, 12 * gib], gib as usize));
        assert!(!slab_fits(&[0, 12 * gib + 4], gib as usize));
        assert!(!slab_fits(&[0, 2], 1));
    }

    #[test]
    fn defines_carry_every_constant() {
        let d = defines(Occupancy::Blocks4);
        assert!(
            d.contains(&"-DHIMENO_SWEEP_THREADS=256".to_string()),
            "{d:?}"
        );
        assert!(
            d.contains(&"-DHIMENO_SWEEP_MIN_BLOCKS=4".to_string()),
            "{d:?}"
        );
        for name in ["HIMENO_WARP", "HIMENO_MAX_WARPS"] {
            assert!(d.iter().any(|x| x.starts_with(&format!("-D{name}="))));
            assert!(SOURCE.contains(name), "kernels.cu does not use {name}");
        }
        // Threads of any block fit the block reduction's shared array.
        assert!(SWEEP_THREADS.div_ceil(WARP) <= MAX_WARPS);
        assert!(REDUCE_THREADS.div_ceil(WARP) <= MAX_WARPS);
    }

    #[test]
    fn device_bytes_count_every_allocation_rounded() {
        // 14 fields of 1000 cells, a face buffer, planes, partials, gosa:
        // 18 allocations of at most one granule each.
        let k_high = Face { dim: 2, side: 1 };
        assert_eq!(
            device_bytes(&FieldLayout::exact([10, 10, 10]), 5, &[k_high]),
            18 * ALLOCATION_GRANULE
        );
        // Faces normal to i need no buffer; each other face has its own.
        let i_low = Face { dim: 0, side: 0 };
        assert_eq!(
            device_bytes(&FieldLayout::exact([10, 10, 10]), 5, &[i_low]),
            17 * ALLOCATION_GRANULE
        );
        let all: Vec<Face> = (0..3)
            .flat_map(|dim| (0..2).map(move |side| Face { dim, side }))
            .collect();
        assert_eq!(
            device_bytes(&FieldLayout::exact([10, 10, 10]), 5, &all),
            21 * ALLOCATION_GRANULE
        );
        let xl = device_bytes(&FieldLayout::exact([514, 514, 1026]), 1, &[k_high]);
        let fields = 14 * 514 * 514 * 1026 * 4u64;
        assert!(xl > fields && xl < fields + 20 * ALLOCATION_GRANULE, "{xl}");
        // A face normal to j (514 x 1026 values, just over 2 MiB) takes
        // two granules, one normal to k (514 x 514) one.
        let faces = device_bytes(&FieldLayout::exact([514, 514, 1026]), 1, &all)
            - device_bytes(&FieldLayout::exact([514, 514, 1026]), 1, &[]);
        assert_eq!(faces, 2 * 2 * ALLOCATION_GRANULE + 2 * ALLOCATION_GRANULE);
    }

    #[test]
    fn face_buffers_hold_one_layer_of_faces_normal_to_j_and_k() {
        let dims = [5, 7, 11];
        let exact = FieldLayout::exact(dims);
        assert_eq!(face_buffer_len(Face { dim: 0, side: 1 }, &exact), None);
        assert_eq!(face_buffer_len(Face { dim: 1, side: 0 }, &exact), Some(55));
        assert_eq!(face_buffer_len(Face { dim: 2, side: 1 }, &exact), Some(35));
        assert!(55 <= face_capacity(dims));
        assert_eq!(plane_buffer_len(&exact), None);
        // Padded, a face normal to i is not contiguous: it has a buffer.
        let padded = FieldLayout::of(crate::config::GpuLayout::Padded, dims);
        assert_eq!(face_buffer_len(Face { dim: 0, side: 1 }, &padded), Some(77));
        assert_eq!(face_buffer_len(Face { dim: 2, side: 1 }, &padded), Some(35));
        assert_eq!(plane_buffer_len(&padded), Some(77));
        let c = FaceCopy::of(Face { dim: 0, side: 1 }, &padded, true);
        assert_eq!((c.contiguous, c.nb, c.len), (None, 11, 77));
        let c = FaceCopy::of(Face { dim: 0, side: 1 }, &exact, true);
        assert_eq!(c.contiguous, Some(3 * 77));
    }

    #[test]
    fn padded_layouts_pass_the_pitch_and_count_their_extra_buffers() {
        let dims = [514, 514, 1026];
        let padded = FieldLayout::of(crate::config::GpuLayout::Padded, dims);
        let exact = FieldLayout::exact(dims);
        let k_high = Face { dim: 2, side: 1 };
        let i_low = Face { dim: 0, side: 0 };
        // Each field a 1056-value pitch (3 % more), the i face and the
        // plane buffer one granule each (514 x 1026 values, just over
        // 2 MiB: two).
        let more = device_bytes(&padded, 1, &[k_high, i_low]) - device_bytes(&exact, 1, &[k_high]);
        let fields: u64 = (0..14)
            .map(|f| {
                let r = |v: usize| (v as u64 * 4).div_ceil(ALLOCATION_GRANULE);
                r(padded.alloc_len(f)) - r(exact.alloc_len(f))
            })
            .sum();
        assert_eq!(more, (fields + 2 + 2) * ALLOCATION_GRANULE);
        let c = FaceCopy::of(Face { dim: 1, side: 0 }, &padded, true);
        let args = face_args(0x1000, 0x2000, &c, &padded);
        let d2 = args.iter().find(|a| a.name == "d2").unwrap();
        assert_eq!(d2.value, Value::I64(1056));
        let args = face_args(0x1000, 0x2000, &c, &exact);
        let d2 = args.iter().find(|a| a.name == "d2").unwrap();
        assert_eq!(d2.value, Value::I64(1026));
    }

    #[test]
    fn slots_hold_the_value_low_and_mark_narrow_values() {
        assert_eq!(Value::Ptr(0x1234_5678_9abc).slot(), 0x1234_5678_9abc);
        assert_eq!(Value::I64(-2).slot(), u64::MAX - 1);
        assert_eq!(Value::I64(7).slot(), 7);
        assert_eq!(Value::I32(7).slot(), 0xA5A5_A5A5_0000_0007);
        assert_eq!(Value::I32(-1).slot(), 0xA5A5_A5A5_FFFF_FFFF);
        assert_eq!(Value::F32(1.0).slot(), 0xA5A5_A5A5_3F80_0000);
        // A 4-byte read of the slot's first bytes gives the value back.
        let low = |s: u64| -> [u8; 4] { s.to_le_bytes()[..4].try_into().unwrap() };
        assert_eq!(i32::from_le_bytes(low(Value::I32(-5).slot())), -5);
        assert_eq!(f32::from_le_bytes(low(Value::F32(OMEGA).slot())), OMEGA);
        assert_eq!(ARGS_END.to_be_bytes(), *b"HIMENO..");
        let args = fill_args(8, 3, 0.5);
        assert_eq!(
            slots(&args),
            vec![8, 3, (CANARY << 32) | u64::from(0.5f32.to_bits())]
        );
    }

    #[test]
    fn too_large_boxes_are_a_usage_error() {
        let r = Region {
            lo: [1, 1, 1],
            n: [1 << 31, 4, 4],
        };
        assert!(matches!(SweepLaunch::plan(&[r], 0), Err(Error::Usage(_))));
    }
}
