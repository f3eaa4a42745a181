//! NCCL, loaded at run time by the backend itself, for `--halo nccl`:
//! a communicator per rank, grouped sends and receives of device buffers
//! on a stream, and a sum all-reduce.
//!
//! Not cudarc's `nccl` feature: with `dynamic-loading` cudarc opens
//! `libnccl.so` on first use and panics when it or a symbol is missing
//! (without it, the build links NCCL and every machine needs it). Here a
//! machine without NCCL gets an error the caller turns into one `himeno:`
//! line and exit 2, and [`NCCL_ENV`] may name the file to open, as for
//! NVRTC. The calls used have kept their C signatures since NCCL 2.7.
//!
//! A communicator's rank must have its device's context current on the
//! calling thread when it is made ([`Comm::init_rank`]); its work runs on
//! the stream each call names, in that stream's order.

use super::nvrtc::load_error;
use crate::environment;
use libloading::Library;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::Path;
use std::sync::OnceLock;

/// Environment variable naming the NCCL library file to open instead of
/// the loader's `libnccl.so.2`.
pub const NCCL_ENV: &str = environment::NCCL_LIB;

/// `ncclResult_t`.
type Status = c_int;
/// `ncclComm_t`.
type RawComm = *mut c_void;
/// `cudaStream_t`, the same handle as the driver's `CUstream`.
pub type Stream = cudarc::driver::sys::CUstream;
/// A device address (`CUdeviceptr`).
pub type DevicePtr = u64;

/// `ncclInt8`: faces travel as bytes.
const BYTES: c_int = 0;
/// `ncclFloat64`.
const FLOAT64: c_int = 8;
/// `ncclSum`.
const SUM: c_int = 0;

/// Bytes of `ncclUniqueId`.
pub const UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`: what rank 0 makes and every rank passes to
/// [`Comm::init_rank`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId(pub [u8; UNIQUE_ID_BYTES]);

/// The entry points used, resolved once.
struct Fns {
    version: unsafe extern "C" fn(*mut c_int) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    unique_id: unsafe extern "C" fn(*mut UniqueId) -> Status,
    init_rank: unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int) -> Status,
    init_all: unsafe extern "C" fn(*mut RawComm, c_int, *const c_int) -> Status,
    destroy: unsafe extern "C" fn(RawComm) -> Status,
    group_start: unsafe extern "C" fn() -> Status,
    group_end: unsafe extern "C" fn() -> Status,
    send: unsafe extern "C" fn(*const c_void, usize, c_int, c_int, RawComm, Stream) -> Status,
    recv: unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, RawComm, Stream) -> Status,
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        RawComm,
        Stream,
    ) -> Status,
}

/// A loaded NCCL.
pub struct Nccl {
    fns: Fns,
    /// The file or name loaded.
    pub path: String,
    /// NCCL's version as `ncclGetVersion` encodes it (2.23.4: 22304).
    pub version: i32,
    /// Keeps the library (and the function pointers) alive.
    _lib: Library,
}

/// One transfer of a grouped exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// `bytes` at `ptr` to rank `peer`.
    Send {
        /// The device buffer read.
        ptr: DevicePtr,
        /// Its length.
        bytes: usize,
        /// The receiving rank.
        peer: usize,
    },
    /// `bytes` from rank `peer` into `ptr`.
    Recv {
        /// The device buffer written.
        ptr: DevicePtr,
        /// Its length.
        bytes: usize,
        /// The sending rank.
        peer: usize,
    },
}

impl Nccl {
    /// The process's NCCL: the file [`NCCL_ENV`] names when set, else
    /// `libnccl.so.2` as the loader finds it. Loaded once; every later call
    /// returns the same library or the same error.
    pub fn get() -> Result<&'static Nccl, String> {
        static NCCL: OnceLock<Result<Nccl, String>> = OnceLock::new();
        NCCL.get_or_init(|| {
            let found = match environment::get_os(NCCL_ENV) {
                Some(path) => Nccl::open(Path::new(&path)).map_err(|e| {
                    format!(
                        "{NCCL_ENV}={} cannot be used: {e}; point it at a libnccl.so.2, or unset it",
                        Path::new(&path).display()
                    )
                }),
                None => Nccl::open(Path::new("libnccl.so.2")).map_err(|e| {
                    format!(
                        "--halo nccl needs NCCL, and libnccl.so.2 cannot be loaded ({e}); install \
                         NCCL (e.g. `pip install nvidia-nccl-cu12`) and put its lib folder on \
                         LD_LIBRARY_PATH, or set {NCCL_ENV}=/path/to/libnccl.so.2"
                    )
                }),
            };
            if let Ok(n) = &found {
                tracing::info!("NCCL {} loaded from {}", n.version_string(), n.path);
            }
            found
        })
        .as_ref()
        .map_err(Clone::clone)
    }

    /// Opens NCCL from `path` (a file, or a bare name the loader searches
    /// for) and resolves every entry point used.
    pub fn open(path: &Path) -> Result<Nccl, String> {
        // SAFETY: loading a library runs its initialisers; NCCL's are sound.
        let lib = unsafe { Library::new(path) }.map_err(|e| short(&load_error(&e)))?;
        // SAFETY: each symbol is declared with NCCL's C signature.
        let fns = unsafe {
            Fns {
                version: *sym(&lib, b"ncclGetVersion\0")?,
                error_string: *sym(&lib, b"ncclGetErrorString\0")?,
                unique_id: *sym(&lib, b"ncclGetUniqueId\0")?,
                init_rank: *sym(&lib, b"ncclCommInitRank\0")?,
                init_all: *sym(&lib, b"ncclCommInitAll\0")?,
                destroy: *sym(&lib, b"ncclCommDestroy\0")?,
                group_start: *sym(&lib, b"ncclGroupStart\0")?,
                group_end: *sym(&lib, b"ncclGroupEnd\0")?,
                send: *sym(&lib, b"ncclSend\0")?,
                recv: *sym(&lib, b"ncclRecv\0")?,
                all_reduce: *sym(&lib, b"ncclAllReduce\0")?,
            }
        };
        let mut version = 0;
        // SAFETY: `version` is a valid out-pointer.
        let s = unsafe { (fns.version)(&mut version) };
        let n = Nccl {
            fns,
            path: path.display().to_string(),
            version,
            _lib: lib,
        };
        n.check(s, "ncclGetVersion")?;
        // 2.7.0 is 2700 in the code before 2.9 (then 20900 and up).
        if version < 2700 {
            return Err(format!(
                "NCCL {} is older than 2.7, which added point-to-point sends",
                n.version_string()
            ));
        }
        Ok(n)
    }

    /// `2.23.4`.
    pub fn version_string(&self) -> String {
        format_version(self.version)
    }

    /// Whether this library is the emulator's stand-in (it exports the
    /// emulator's identification, as the driver does).
    pub fn is_emulated(&self) -> bool {
        // SAFETY: only whether the symbol exists is asked.
        unsafe {
            self._lib
                .get::<unsafe extern "C" fn()>(b"himeno_emu_describe\0")
        }
        .is_ok()
    }

    /// A fresh unique id (rank 0 makes it; the others receive its bytes).
    pub fn unique_id(&self) -> Result<UniqueId, String> {
        let mut id = UniqueId([0; UNIQUE_ID_BYTES]);
        // SAFETY: `id` is a valid out-pointer of the declared layout.
        let s = unsafe { (self.fns.unique_id)(&mut id) };
        self.check(s, "ncclGetUniqueId")?;
        Ok(id)
    }

    /// Ok, or `what` failed with NCCL's own words.
    fn check(&self, s: Status, what: &str) -> Result<(), String> {
        if s == 0 {
            return Ok(());
        }
        // SAFETY: NCCL returns a static NUL-terminated string for any code.
        let text = unsafe { (self.fns.error_string)(s) };
        let text = if text.is_null() {
            "unknown error".to_string()
        } else {
            // SAFETY: non-null, NUL-terminated (above).
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        };
        Err(format!("{what} failed: NCCL error {s} ({text})"))
    }
}

impl UniqueId {
    /// The id from the bytes rank 0 broadcast.
    pub fn from_bytes(b: &[u8]) -> Result<UniqueId, String> {
        let a: [u8; UNIQUE_ID_BYTES] = b.try_into().map_err(|_| {
            format!(
                "an NCCL unique id of {} bytes, not {UNIQUE_ID_BYTES}",
                b.len()
            )
        })?;
        Ok(UniqueId(a))
    }
}

/// One rank's NCCL communicator, destroyed when dropped.
pub struct Comm {
    raw: RawComm,
    nccl: &'static Nccl,
    rank: usize,
    size: usize,
}

// SAFETY: a communicator may be used from any one thread at a time, which
// `&mut self` on every call that issues work ensures.
unsafe impl Send for Comm {}

impl Comm {
    /// Rank `rank` of `size` joins the communicator `id` names, on the
    /// device whose context is current on this thread. Blocks until every
    /// rank has joined (collective over the `size` ranks).
    pub fn init_rank(
        nccl: &'static Nccl,
        size: usize,
        id: &UniqueId,
        rank: usize,
    ) -> Result<Comm, String> {
        let mut raw: RawComm = std::ptr::null_mut();
        let (n, r) = (int(size)?, int(rank)?);
        // SAFETY: `raw` is a valid out-pointer; the id is passed by value.
        let s = unsafe { (nccl.fns.init_rank)(&mut raw, n, *id, r) };
        nccl.check(s, "ncclCommInitRank")?;
        Ok(Comm {
            raw,
            nccl,
            rank,
            size,
        })
    }

    /// One communicator per device of `devices` (their ordinals), rank `i`
    /// on `devices[i]`: every rank of one process at once.
    pub fn init_all(nccl: &'static Nccl, devices: &[i32]) -> Result<Vec<Comm>, String> {
        let mut raw: Vec<RawComm> = vec![std::ptr::null_mut(); devices.len()];
        // SAFETY: `raw` has room for one handle per device.
        let s =
            unsafe { (nccl.fns.init_all)(raw.as_mut_ptr(), int(devices.len())?, devices.as_ptr()) };
        nccl.check(s, "ncclCommInitAll")?;
        let size = devices.len();
        Ok(raw
            .into_iter()
            .enumerate()
            .map(|(rank, raw)| Comm {
                raw,
                nccl,
                rank,
                size,
            })
            .collect())
    }

    /// This rank's number.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The communicator's rank count.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Queues `transfers` as one group on `stream`: they start together
    /// once the stream reaches them, and work queued after them on the
    /// stream waits for all of them. No host wait.
    ///
    /// # Safety
    /// Every buffer must be device memory of this communicator's device,
    /// live until the stream has run the group.
    pub unsafe fn exchange(
        &mut self,
        transfers: &[Transfer],
        stream: Stream,
    ) -> Result<(), String> {
        let f = &self.nccl.fns;
        // SAFETY: group calls take no arguments.
        self.nccl
            .check(unsafe { (f.group_start)() }, "ncclGroupStart")?;
        let mut first = Ok(());
        for t in transfers {
            let s = match *t {
                Transfer::Send { ptr, bytes, peer } => {
                    // SAFETY: the caller's contract on the buffer; the
                    // peer is checked by NCCL.
                    unsafe {
                        (f.send)(
                            ptr as *const c_void,
                            bytes,
                            BYTES,
                            peer as c_int,
                            self.raw,
                            stream,
                        )
                    }
                }
                Transfer::Recv { ptr, bytes, peer } => {
                    // SAFETY: as above.
                    unsafe {
                        (f.recv)(
                            ptr as *mut c_void,
                            bytes,
                            BYTES,
                            peer as c_int,
                            self.raw,
                            stream,
                        )
                    }
                }
            };
            if first.is_ok() {
                first = self.nccl.check(s, "ncclSend/ncclRecv");
            }
        }
        // The group is always closed, even after a refused call, so the
        // thread's group state stays balanced.
        // SAFETY: as above.
        let end = self.nccl.check(unsafe { (f.group_end)() }, "ncclGroupEnd");
        first.and(end)
    }

    /// Queues the element-wise sum of `count` doubles at `send` over all
    /// ranks into `recv` (which may be `send`) on `stream`.
    ///
    /// # Safety
    /// As [`Comm::exchange`].
    pub unsafe fn sum_f64(
        &mut self,
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        stream: Stream,
    ) -> Result<(), String> {
        // SAFETY: the caller's contract on the buffers.
        let s = unsafe {
            (self.nccl.fns.all_reduce)(
                send as *const c_void,
                recv as *mut c_void,
                count,
                FLOAT64,
                SUM,
                self.raw,
                stream,
            )
        };
        self.nccl.check(s, "ncclAllReduce")
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // SAFETY: the handle came from NCCL and is destroyed once.
        let s = unsafe { (self.nccl.fns.destroy)(self.raw) };
        if let Err(e) = self.nccl.check(s, "ncclCommDestroy") {
            tracing::warn!("{e}");
        }
    }
}

/// NCCL's version code as `2.23.4`: since 2.9 the code is
/// major*10000 + minor*100 + patch; before, major*1000 + minor*100 + patch.
fn format_version(v: i32) -> String {
    if v >= 20900 {
        format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
    } else {
        format!("{}.{}.{}", v / 1000, v / 100 % 10, v % 100)
    }
}

/// `v` as a C int, or an error when it does not fit.
fn int(v: usize) -> Result<c_int, String> {
    c_int::try_from(v).map_err(|_| format!("{v} ranks are more than NCCL counts"))
}

/// Resolves `name` in `lib`.
///
/// # Safety
/// `T` must be the symbol's type.
unsafe fn sym<'l, T>(lib: &'l Library, name: &[u8]) -> Result<libloading::Symbol<'l, T>, String> {
    // SAFETY: the caller's contract on `T`.
    unsafe { lib.get::<T>(name) }.map_err(|e| {
        format!(
            "it has no {} ({})",
            String::from_utf8_lossy(&name[..name.len() - 1]),
            short(&load_error(&e))
        )
    })
}

/// The first line of a loader error, without the file name it repeats.
fn short(e: &str) -> String {
    let line = e.lines().next().unwrap_or(e);
    match line.rsplit_once(": ") {
        Some((_, why)) if !why.is_empty() => why.to_string(),
        _ => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_an_error_naming_why() {
        let e = Nccl::open(Path::new("/nonexistent/libnccl.so.2"))
            .err()
            .expect("no such file");
        assert!(e.contains("No such file"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_library_without_nccl_is_refused_by_symbol() {
        // libc loads, and has no NCCL entry point.
        let e = Nccl::open(Path::new("libc.so.6")).err().expect("not NCCL");
        assert!(e.contains("ncclGetVersion"), "{e}");
    }

    #[test]
    fn versions_read_as_nccl_encodes_them() {
        let v = |version| format_version(version);
        assert_eq!(v(22304), "2.23.4");
        assert_eq!(v(2708), "2.7.8");
    }
}
