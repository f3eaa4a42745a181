//! The NVRTC library, loaded by the backend itself rather than through
//! cudarc, so that any NVRTC 12 or 13 can be used whatever cudarc was built
//! against (see `locate`). The calls used here (create, compile, fetch the
//! PTX or CUBIN and the log, destroy, version, supported architectures)
//! have kept their C signatures since CUDA 11.2.
//!
//! A library is opened once per process ([`Nvrtc::get`]) and kept for its
//! life; tests open specific files with [`Nvrtc::open`].

use super::locate::{self, NVRTC_ENV, Search, Target};
use libloading::Library;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::Path;
use std::sync::OnceLock;

/// `nvrtcResult`.
type Status = c_int;
/// `nvrtcProgram`.
type Program = *mut c_void;

/// The entry points used, resolved once.
struct Fns {
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    num_archs: unsafe extern "C" fn(*mut c_int) -> Status,
    archs: unsafe extern "C" fn(*mut c_int) -> Status,
    create: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Status,
    destroy: unsafe extern "C" fn(*mut Program) -> Status,
    compile: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> Status,
    ptx_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    ptx: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    cubin_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    cubin: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    log_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    log: unsafe extern "C" fn(Program, *mut c_char) -> Status,
}

/// A loaded NVRTC.
pub struct Nvrtc {
    fns: Fns,
    /// The file loaded (as the loader resolved it when known).
    pub path: String,
    /// NVRTC's version (major, minor).
    pub version: (i32, i32),
    /// Keeps the library (and the function pointers) alive.
    _lib: Library,
    /// The built-in function library loaded beside it, if any.
    _builtins: Vec<Library>,
}

/// What NVRTC hands back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// PTX text, JIT-compiled by the driver when loaded.
    Ptx,
    /// A CUBIN for exactly the named architecture.
    Cubin,
}

/// A successful compilation: the image and NVRTC's log (warnings, and
/// the assembler's resource report when asked for).
#[derive(Debug, Clone)]
pub struct Built {
    /// PTX text without its trailing NUL, or CUBIN bytes.
    pub image: Vec<u8>,
    /// The program log.
    pub log: String,
}

impl Nvrtc {
    /// The process's NVRTC: the file `HIMENO_NVRTC_LIB` names when set,
    /// else the first candidate of `locate` that loads, preferring the
    /// driver's major version `driver_major`. Found once; every later call
    /// returns the same library or the same error.
    pub fn get(driver_major: Option<u32>) -> Result<&'static Nvrtc, String> {
        static NVRTC: OnceLock<Result<Nvrtc, String>> = OnceLock::new();
        NVRTC
            .get_or_init(|| {
                let found = match crate::environment::get_os(NVRTC_ENV) {
                    Some(path) => Nvrtc::open(Path::new(&path)).map_err(|e| {
                        format!(
                            "{NVRTC_ENV}={} cannot be used: {e}; point it at a libnvrtc.so.12 \
                             or libnvrtc.so.13, or unset it to search",
                            Path::new(&path).display()
                        )
                    }),
                    None => Nvrtc::find(&Search::here(), driver_major),
                };
                if let Ok(n) = &found {
                    tracing::info!("NVRTC {} loaded from {}", n.version_string(), n.path);
                }
                found
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Searches the candidates of `search` in order; the error lists what
    /// was tried and why each failed.
    pub fn find(search: &Search<'_>, driver_major: Option<u32>) -> Result<Nvrtc, String> {
        let mut tried = Vec::new();
        for target in search.nvrtc_candidates(&locate::majors_for(driver_major)) {
            let opened = match &target {
                Target::Soname(name) => Nvrtc::open_name(name),
                Target::File(path) => Nvrtc::open(path),
            };
            match opened {
                Ok(n) => return Ok(n),
                Err(e) => tried.push(format!("{target}: {}", short(&e))),
            }
        }
        let folders: Vec<String> = search
            .nvrtc_folders()
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        Err(format!(
            "the NVRTC library cannot be loaded; tried {}; folders searched: {}. Install the \
             CUDA toolkit, or `pip install nvidia-cuda-nvrtc` (CUDA 13) or \
             `nvidia-cuda-nvrtc-cu12` (CUDA 12), or set {NVRTC_ENV}=/path/to/libnvrtc.so.N",
            tried.join("; "),
            if folders.is_empty() {
                "none exists ($CUDA_HOME, $CUDA_PATH, the folder above nvcc on PATH, \
                 /usr/local/cuda*, /opt/cuda, and nvidia/cu13/lib, nvidia/cuda_nvrtc/lib in \
                 the Python site-packages of $VIRTUAL_ENV, $CONDA_PREFIX, python3 on PATH, \
                 ~/.local, /usr/local, /usr)"
                    .to_string()
            } else {
                folders.join(", ")
            }
        ))
    }

    /// Opens the NVRTC library file at `path`, whatever its name, with its
    /// built-in function library (see `locate::builtins_beside`), which
    /// NVRTC opens by name only when it compiles.
    pub fn open(path: &Path) -> Result<Nvrtc, String> {
        if !path.exists() {
            return Err("no such file".into());
        }
        // SAFETY: loading NVRTC runs only its library initialisers.
        let lib = unsafe { Library::new(path) }.map_err(|e| load_error(&e))?;
        let mut nv = Nvrtc::from_library(lib, path.display().to_string())?;
        nv.load_builtins(path);
        Ok(nv)
    }

    /// Loads the built-in function library beside `path` (or beside the
    /// file it links to: a renamed copy, a `libnvrtc.so` development link)
    /// and keeps it loaded, so that NVRTC's later load by name finds it
    /// whatever the library path.
    fn load_builtins(&mut self, path: &Path) {
        let major = u32::try_from(self.version.0).unwrap_or(0);
        let mut found = locate::builtins_beside(path, major);
        if found.is_empty()
            && let Ok(real) = std::fs::canonicalize(path)
        {
            found = locate::builtins_beside(&real, major);
        }
        for b in found {
            // SAFETY: the built-ins library has no initialisers of note.
            match unsafe { Library::new(&b) } {
                Ok(lib) => self._builtins.push(lib),
                Err(e) => tracing::debug!(
                    file = %b.display(),
                    "NVRTC built-ins not loaded: {}",
                    load_error(&e)
                ),
            }
        }
    }

    /// Opens NVRTC by library name through the loader's search.
    fn open_name(name: &str) -> Result<Nvrtc, String> {
        // SAFETY: as in `open`.
        let lib = unsafe { Library::new(name) }.map_err(|e| load_error(&e))?;
        let mut nv = Nvrtc::from_library(lib, name.to_string())?;
        let path = std::path::PathBuf::from(&nv.path);
        nv.load_builtins(&path);
        Ok(nv)
    }

    /// Resolves the entry points of `lib` and reads its version.
    fn from_library(lib: Library, name: String) -> Result<Nvrtc, String> {
        /// Copies the function pointer `name` out of `lib`.
        fn sym<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
            // SAFETY: every `T` used below is the C signature of the symbol
            // of that name in nvrtc.h (CUDA 11.2 to 13).
            unsafe { lib.get::<T>(name.as_bytes()) }
                .map(|s| *s)
                .map_err(|e| format!("not an NVRTC library ({name} missing: {})", load_error(&e)))
        }
        let fns = Fns {
            version: sym(&lib, "nvrtcVersion")?,
            error_string: sym(&lib, "nvrtcGetErrorString")?,
            num_archs: sym(&lib, "nvrtcGetNumSupportedArchs")?,
            archs: sym(&lib, "nvrtcGetSupportedArchs")?,
            create: sym(&lib, "nvrtcCreateProgram")?,
            destroy: sym(&lib, "nvrtcDestroyProgram")?,
            compile: sym(&lib, "nvrtcCompileProgram")?,
            ptx_size: sym(&lib, "nvrtcGetPTXSize")?,
            ptx: sym(&lib, "nvrtcGetPTX")?,
            cubin_size: sym(&lib, "nvrtcGetCUBINSize")?,
            cubin: sym(&lib, "nvrtcGetCUBIN")?,
            log_size: sym(&lib, "nvrtcGetProgramLogSize")?,
            log: sym(&lib, "nvrtcGetProgramLog")?,
        };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two out-parameters.
        let st = unsafe { (fns.version)(&mut major, &mut minor) };
        if st != 0 {
            return Err(format!("nvrtcVersion failed ({st})"));
        }
        let path = loaded_from(&lib, "nvrtcVersion").unwrap_or(name);
        Ok(Nvrtc {
            fns,
            path,
            version: (major, minor),
            _lib: lib,
            _builtins: Vec::new(),
        })
    }

    /// `major.minor`.
    pub fn version_string(&self) -> String {
        format!("{}.{}", self.version.0, self.version.1)
    }

    /// NVRTC's text for status `st`.
    fn describe(&self, st: Status) -> String {
        // SAFETY: returns a static string for any status.
        let p = unsafe { (self.fns.error_string)(st) };
        if p.is_null() {
            format!("NVRTC status {st}")
        } else {
            // SAFETY: a NUL-terminated static string.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    }

    /// Architectures this NVRTC compiles for, as numbers like 90 for
    /// sm_90 (empty when it cannot say).
    pub fn supported_archs(&self) -> Vec<i32> {
        let mut n = 0;
        // SAFETY: an out-parameter, then a buffer of the size it gave.
        unsafe {
            if (self.fns.num_archs)(&mut n) != 0 || n <= 0 {
                return Vec::new();
            }
            let mut archs = vec![0i32; n as usize];
            if (self.fns.archs)(archs.as_mut_ptr()) != 0 {
                return Vec::new();
            }
            archs
        }
    }

    /// Compiles `source` (named `name` in messages) with the command line
    /// `options` and returns the `out` image and the log, or the log (or
    /// status) of the failure on one line.
    pub fn compile(
        &self,
        source: &str,
        name: &str,
        options: &[String],
        out: Output,
    ) -> Result<Built, String> {
        let src = CString::new(source).map_err(|e| e.to_string())?;
        let cname = CString::new(name).map_err(|e| e.to_string())?;
        let opts: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: `src` and `cname` are NUL-terminated; no headers.
        let st = unsafe {
            (self.fns.create)(
                &mut prog,
                src.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        if st != 0 {
            return Err(format!("creating the program: {}", self.describe(st)));
        }
        // SAFETY: `prog` is valid until destroyed below; `ptrs` point into
        // `opts`, alive for the call.
        let built = unsafe {
            let st = (self.fns.compile)(prog, ptrs.len() as c_int, ptrs.as_ptr());
            let log = self.program_log(prog);
            if st != 0 {
                Err(if log.trim().is_empty() {
                    self.describe(st)
                } else {
                    log.split_whitespace().collect::<Vec<_>>().join(" ")
                })
            } else {
                self.image(prog, out).map(|image| Built { image, log })
            }
        };
        // SAFETY: destroyed once.
        unsafe { (self.fns.destroy)(&mut prog) };
        built
    }

    /// The log of `prog`.
    ///
    /// # Safety
    /// `prog` must be a live program of this library.
    unsafe fn program_log(&self, prog: Program) -> String {
        let mut size = 0usize;
        // SAFETY: the caller's promise; the buffer has the reported size.
        unsafe {
            if (self.fns.log_size)(prog, &mut size) != 0 || size == 0 {
                return String::new();
            }
            let mut buf = vec![0u8; size];
            if (self.fns.log)(prog, buf.as_mut_ptr().cast()) != 0 {
                return String::new();
            }
            CStr::from_bytes_until_nul(&buf)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default()
        }
    }

    /// The compiled image of `prog`.
    ///
    /// # Safety
    /// `prog` must be a live, successfully compiled program of this library.
    unsafe fn image(&self, prog: Program, out: Output) -> Result<Vec<u8>, String> {
        let (size_fn, get_fn) = match out {
            Output::Ptx => (self.fns.ptx_size, self.fns.ptx),
            Output::Cubin => (self.fns.cubin_size, self.fns.cubin),
        };
        let mut size = 0usize;
        // SAFETY: the caller's promise; the buffer has the reported size.
        unsafe {
            let st = size_fn(prog, &mut size);
            if st != 0 {
                return Err(format!("NVRTC gave no {out:?}: {}", self.describe(st)));
            }
            let mut buf = vec![0u8; size];
            let st = get_fn(prog, buf.as_mut_ptr().cast());
            if st != 0 {
                return Err(format!("NVRTC gave no {out:?}: {}", self.describe(st)));
            }
            if out == Output::Ptx {
                while buf.last() == Some(&0) {
                    buf.pop();
                }
            }
            Ok(buf)
        }
    }
}

/// The file `lib` was loaded from, found through one of its symbols.
fn loaded_from(lib: &Library, symbol: &str) -> Option<String> {
    // SAFETY: only the symbol's address is used.
    let addr = unsafe { lib.get::<*const c_void>(symbol.as_bytes()) }.ok()?;
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr fills `info` for an address inside a loaded object.
    if unsafe { libc::dladdr(*addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated path owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(name.to_string_lossy().into_owned())
}

/// The loader's own message for a failed load (libloading's error says
/// only "dlopen failed" and keeps the reason as its source).
pub fn load_error(e: &libloading::Error) -> String {
    use std::error::Error as _;
    match e.source() {
        Some(s) => s.to_string(),
        None => e.to_string(),
    }
}

/// The first line of a loader error, without the file name it repeats.
fn short(e: &str) -> String {
    let line = e.lines().next().unwrap_or(e);
    match line.rsplit_once(": ") {
        Some((_, why)) if !why.is_empty() => why.to_string(),
        _ => line.to_string(),
    }
}
