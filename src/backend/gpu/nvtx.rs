//! NVTX ranges named after the phases of `--trace` (compute, pack,
//! transfer, comm, unpack, allreduce), so that an `nsys` timeline of a GPU
//! run shows the same phases as himeno's own trace.
//!
//! NVTX is loaded at run time, never linked: `HIMENO_NVTX_LIB` if set,
//! else `libnvToolsExt.so.1` (CUDA 12's toolkit, or the `nvidia-nvtx-cu12`
//! wheel) through the loader's search. When none loads, a range costs one
//! atomic load and does nothing. The library is looked for once, by the
//! first GPU backend of the process (`init`); code that runs before it
//! (or in CPU runs) opens no range.

use crate::environment;
use std::ffi::{CString, c_char, c_int};
use std::sync::OnceLock;

/// The NVTX entry points used.
struct Nvtx {
    push: unsafe extern "C" fn(*const c_char) -> c_int,
    pop: unsafe extern "C" fn() -> c_int,
}

/// The loaded library's entry points, or `None` once none loaded.
static NVTX: OnceLock<Option<Nvtx>> = OnceLock::new();

/// The library names tried when `HIMENO_NVTX_LIB` is unset.
const NAMES: [&str; 2] = ["libnvToolsExt.so.1", "libnvToolsExt.so"];

/// Looks for the NVTX library (once per process) and says in one line
/// whether ranges will be recorded.
pub fn init() {
    NVTX.get_or_init(|| {
        let named = environment::get_os(environment::NVTX_LIB);
        let candidates: Vec<std::ffi::OsString> = match named {
            Some(f) => vec![f],
            None => NAMES.iter().map(Into::into).collect(),
        };
        for c in &candidates {
            // SAFETY: loading an NVTX library runs only its initialisers.
            let Ok(lib) = (unsafe { libloading::Library::new(c) }) else {
                continue;
            };
            // SAFETY: NVTX declares these C signatures.
            let found = unsafe {
                let push =
                    lib.get::<unsafe extern "C" fn(*const c_char) -> c_int>(b"nvtxRangePushA\0");
                let pop = lib.get::<unsafe extern "C" fn() -> c_int>(b"nvtxRangePop\0");
                match (push, pop) {
                    (Ok(push), Ok(pop)) => Some(Nvtx {
                        push: *push,
                        pop: *pop,
                    }),
                    _ => None,
                }
            };
            if let Some(n) = found {
                // The library stays loaded for the process: the entry
                // points are used until it ends.
                std::mem::forget(lib);
                tracing::info!(
                    library = %c.to_string_lossy(),
                    "NVTX ranges for the phases (nsys shows them)"
                );
                return Some(n);
            }
        }
        tracing::debug!("no NVTX library: no NVTX ranges");
        None
    });
}

/// An open NVTX range, closed when dropped (a no-op without NVTX).
#[must_use = "the range closes when this is dropped"]
pub struct Range {
    open: bool,
}

/// Opens the range `name` (a phase's name) on this thread.
pub fn range(name: &'static str) -> Range {
    let Some(Some(n)) = NVTX.get() else {
        return Range { open: false };
    };
    // Phase names are static and NUL-free; one allocation per range is
    // far below a kernel launch's cost.
    let Ok(c) = CString::new(name) else {
        return Range { open: false };
    };
    // SAFETY: a valid NUL-terminated string, copied by NVTX.
    unsafe { (n.push)(c.as_ptr()) };
    Range { open: true }
}

impl Drop for Range {
    fn drop(&mut self) {
        if self.open
            && let Some(Some(n)) = NVTX.get()
        {
            // SAFETY: pops the range this guard pushed on this thread
            // (guards are dropped in reverse order of their creation).
            unsafe { (n.pop)() };
        }
    }
}
