//! Finding the CUDA libraries and a device: probes that never panic, the
//! device choice per rank, and the device's description for the report.
//!
//! cudarc loads `libcuda` on first use and *panics* when it is missing, so
//! every entry point of the GPU backend calls [`probe`] first and turns a
//! missing library into a one-line error. NVRTC is loaded by `nvrtc`, not
//! by cudarc (see `locate`).

use super::alloc::Allocator;
use super::locate::Search;
use super::nvrtc::{Nvrtc, load_error};
use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, result, sys};
use std::sync::{Arc, OnceLock};

/// What a successful probe found.
#[derive(Clone, Copy)]
pub struct Probe {
    /// CUDA devices the driver sees.
    pub devices: usize,
    /// The CUDA version the driver supports, e.g. (13, 0).
    pub driver: (i32, i32),
    /// The NVRTC library in use.
    pub nvrtc: &'static Nvrtc,
}

impl Probe {
    /// `CUDA driver 13.0, NVRTC 13.0 (/path/libnvrtc.so.13)`.
    pub fn describe(&self) -> String {
        format!(
            "CUDA driver {}.{}, NVRTC {} ({})",
            self.driver.0,
            self.driver.1,
            self.nvrtc.version_string(),
            self.nvrtc.path
        )
    }
}

/// Makes the driver library loadable for cudarc: through the loader's
/// search by its names (cudarc's own check), else from the folders where
/// drivers live outside that search, loaded by path and kept, so that
/// cudarc's later load of `libcuda.so.1` by name finds it. The error lists
/// what was tried.
fn find_driver() -> std::result::Result<(), String> {
    static FOUND: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            // SAFETY: these only try to dlopen candidate file names.
            if unsafe { sys::is_culib_present() } {
                return Ok(());
            }
            let mut tried = vec!["libcuda.so, libcuda.so.1 (loader search): not found".to_string()];
            for f in Search::here().driver_files() {
                // SAFETY: loading the driver runs only its initialisers.
                match unsafe { libloading::Library::new(&f) } {
                    Ok(lib) => {
                        std::mem::forget(lib);
                        // SAFETY: as above.
                        if unsafe { sys::is_culib_present() } {
                            return Ok(());
                        }
                        tried.push(format!("{}: loaded, but not under its name", f.display()));
                    }
                    Err(e) => tried.push(format!("{}: {}", f.display(), load_error(&e))),
                }
            }
            Err(format!(
                "no CUDA driver found (tried {}): run on a machine with an NVIDIA driver, or \
                 use --backend cpu",
                tried.join("; ")
            ))
        })
        .clone()
}

/// Checks that the CUDA driver and NVRTC libraries can be loaded, that the
/// driver initialises and that it sees at least one device. Returns what
/// it found, or a one-line explanation with the fix.
pub fn probe() -> std::result::Result<Probe, String> {
    find_driver()?;
    let mut version = 0;
    // SAFETY: one out-parameter; needs no initialised driver.
    let driver = match unsafe { sys::cuDriverGetVersion(&mut version) } {
        sys::CUresult::CUDA_SUCCESS => (version / 1000, version % 1000 / 10),
        e => {
            return Err(format!(
                "the CUDA driver does not report its version ({e:?})"
            ));
        }
    };
    let nvrtc = Nvrtc::get(u32::try_from(driver.0).ok())?;
    let no_device = || {
        "the CUDA driver sees no device (check CUDA_VISIBLE_DEVICES), or use --backend cpu"
            .to_string()
    };
    // A driver without devices (or with CUDA_VISIBLE_DEVICES hiding them
    // all) fails cuInit itself with CUDA_ERROR_NO_DEVICE: that is no
    // broken installation.
    result::init().map_err(|e| match e.0 {
        sys::CUresult::CUDA_ERROR_NO_DEVICE => no_device(),
        _ => format!("the CUDA driver failed to initialise ({e:?}): check the driver installation"),
    })?;
    let count =
        result::device::get_count().map_err(|e| format!("cannot count CUDA devices ({e:?})"))?;
    if count <= 0 {
        return Err(no_device());
    }
    Ok(Probe {
        devices: count as usize,
        driver,
        nvrtc,
    })
}

/// The name an emulated CUDA driver exports its description under.
pub const EMULATOR_SYMBOL: &str = "himeno_emu_describe";

/// Whether the loaded CUDA driver is an emulator, and its own description
/// if so (`const char *himeno_emu_describe(void)`, which only the
/// project's stand-in `libcuda.so.1` exports): a record made on one must
/// not pass for GPU performance. Call after a successful [`probe`], which
/// loaded the driver; the library is looked up among the loaded ones only.
pub fn emulator() -> Option<String> {
    for name in ["libcuda.so.1", "libcuda.so"] {
        // SAFETY: RTLD_NOLOAD loads nothing: it only returns a handle to a
        // library already loaded (the driver, loaded by the probe), so no
        // initialiser runs; dropping the handle releases that reference
        // only, and cudarc keeps its own.
        let lib = unsafe {
            libloading::os::unix::Library::open(Some(name), libc::RTLD_LAZY | libc::RTLD_NOLOAD)
        };
        let Ok(lib) = lib else { continue };
        // SAFETY: an emulator exports the symbol with this C signature; a
        // real driver does not export it at all.
        let describe = unsafe {
            lib.get::<unsafe extern "C" fn() -> *const std::ffi::c_char>(EMULATOR_SYMBOL)
        };
        let Ok(describe) = describe else {
            return None;
        };
        // SAFETY: the function takes nothing and returns a static C string
        // (or null); the string is copied before the handle is dropped.
        let text = unsafe {
            let p = describe();
            (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned())
        };
        return Some(
            text.filter(|t| !t.trim().is_empty())
                .unwrap_or_else(|| "an emulated CUDA driver (no description)".into()),
        );
    }
    None
}

/// The device ordinal this rank uses: `--device` if given, otherwise the
/// node-local rank modulo the number of devices (one GPU per rank).
pub fn choose(requested: Option<usize>, node_rank: usize, count: usize) -> Result<usize> {
    match requested {
        Some(d) if d >= count => Err(Error::usage(format!(
            "--device {d} does not exist: this node has {count} visible CUDA device(s), \
             numbered 0..{}",
            count - 1
        ))),
        Some(d) => Ok(d),
        None => Ok(node_rank % count),
    }
}

/// Formats a device UUID as `nvidia-smi` does (`GPU-xxxxxxxx-xxxx-...`).
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex[0..4].concat(),
        hex[4..6].concat(),
        hex[6..8].concat(),
        hex[8..10].concat(),
        hex[10..16].concat()
    )
}

/// A device with its context and what the report says about it.
pub struct Device {
    /// The device's ordinal among the visible ones.
    pub ordinal: usize,
    /// How its memory is allocated: the stream-ordered allocator, or
    /// `cuMemAlloc` where the device has no pools or refuses them.
    pub allocator: Allocator,
    /// The device's primary context, current on this thread.
    pub ctx: Arc<CudaContext>,
    /// Compute capability (major, minor).
    pub cc: (i32, i32),
    /// One-line description: ordinal, name, PCI bus id, UUID.
    pub description: String,
    /// The device's identity across processes: its UUID, or its PCI bus id
    /// when the driver gives no UUID (ranks of one host sharing it share
    /// its memory).
    pub identity: String,
}

/// Maps a driver error to a runtime error saying what was being done.
pub fn cuda_err(what: &str) -> impl Fn(result::DriverError) -> Error + '_ {
    move |e| Error::runtime(format!("CUDA error while {what}: {e:?}"))
}

/// The device's compute mode, the `CU_COMPUTEMODE_*` value, or `None`
/// when the driver does not say.
fn compute_mode(ordinal: usize) -> Option<i32> {
    let dev = result::device::get(i32::try_from(ordinal).ok()?).ok()?;
    // SAFETY: `dev` is a valid device handle of the initialised driver.
    unsafe {
        result::device::get_attribute(
            dev,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_MODE,
        )
    }
    .ok()
}

/// The device's name for an error message, `GPU 0 (NVIDIA H200)`, from the
/// driver without a context.
fn name_for_error(ordinal: usize) -> String {
    let name = i32::try_from(ordinal)
        .ok()
        .and_then(|o| result::device::get(o).ok())
        .and_then(|d| result::device::get_name(d).ok());
    match name {
        Some(n) => format!("GPU {ordinal} ({n})"),
        None => format!("GPU {ordinal}"),
    }
}

/// The one-line error for a device whose context could not be made
/// because the device is unavailable, by its compute mode `mode`.
pub fn unavailable_message(device: &str, mode: Option<i32>) -> String {
    const EXCLUSIVE_PROCESS: i32 = sys::CUcomputemode::CU_COMPUTEMODE_EXCLUSIVE_PROCESS as i32;
    const PROHIBITED: i32 = sys::CUcomputemode::CU_COMPUTEMODE_PROHIBITED as i32;
    match mode {
        Some(EXCLUSIVE_PROCESS) => format!(
            "{device} is in EXCLUSIVE_PROCESS compute mode and another process already uses \
             it: run one process per GPU (e.g. a different CUDA_VISIBLE_DEVICES for each \
             rank), or run the ranks that share it as threads of one process with \
             --local-ranks N, or ask for DEFAULT mode (nvidia-smi -c DEFAULT)"
        ),
        Some(PROHIBITED) => format!(
            "{device} is in PROHIBITED compute mode, which lets no process use it: choose \
             another with --device or CUDA_VISIBLE_DEVICES, or ask for DEFAULT mode \
             (nvidia-smi -c DEFAULT)"
        ),
        _ => format!(
            "{device} is unavailable (CUDA_ERROR_DEVICE_UNAVAILABLE): another process may \
             hold it exclusively; run one process per GPU, or the ranks as threads of one \
             process with --local-ranks N"
        ),
    }
}

impl Device {
    /// Opens device `ordinal` (after a successful [`probe`]).
    pub fn open(ordinal: usize) -> Result<Device> {
        let ctx = CudaContext::new(ordinal).map_err(|e| {
            if e.0 == sys::CUresult::CUDA_ERROR_DEVICE_UNAVAILABLE {
                Error::runtime(unavailable_message(
                    &name_for_error(ordinal),
                    compute_mode(ordinal),
                ))
            } else {
                cuda_err("opening the device")(e)
            }
        })?;
        // SAFETY: the backend orders all work itself: one stream per role,
        // host synchronisation at every hand-over between streams, and no
        // buffer is freed while work on it may be pending (the backend
        // synchronises before it drops). cudarc's per-buffer events would
        // add an event record/wait to every launch and copy.
        unsafe { ctx.disable_event_tracking() };
        let cc = ctx
            .compute_capability()
            .map_err(cuda_err("reading the compute capability"))?;
        let name = ctx.name().map_err(cuda_err("reading the device name"))?;
        let attr = |a| ctx.attribute(a).unwrap_or(0);
        use sys::CUdevice_attribute as A;
        let bus = format!(
            "{:04x}:{:02x}:{:02x}.0",
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)
        );
        let uuid = ctx
            .uuid()
            .map(|u| format_uuid(&u.bytes.map(|b| b as u8)))
            .ok();
        let identity = uuid.clone().unwrap_or_else(|| format!("PCI {bus}"));
        let uuid = uuid.unwrap_or_else(|| "uuid unknown".into());
        let pools = attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) > 0;
        let allocator = Allocator::probe(&ctx, pools);
        allocator.say_once(ordinal, &format!("GPU {ordinal} ({name})"));
        let total = ctx.total_mem().unwrap_or(0) as f64 / (1u64 << 30) as f64;
        let description = format!(
            "GPU {ordinal}: {name} (sm_{}{}, {total:.0} GiB, PCI {bus}, {uuid})",
            cc.0, cc.1
        );
        Ok(Device {
            ordinal,
            allocator,
            ctx,
            cc,
            description,
            identity,
        })
    }

    /// Free and total device memory in bytes.
    pub fn memory(&self) -> Result<(u64, u64)> {
        let (free, total) = self
            .ctx
            .mem_get_info()
            .map_err(cuda_err("reading free memory"))?;
        Ok((free as u64, total as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_choice_wraps_by_node_rank_and_checks_requests() {
        assert_eq!(choose(None, 5, 4).unwrap(), 1);
        assert_eq!(choose(None, 0, 1).unwrap(), 0);
        assert_eq!(choose(Some(2), 7, 4).unwrap(), 2);
        assert!(matches!(choose(Some(4), 0, 4), Err(Error::Usage(_))));
    }

    #[test]
    fn unavailable_devices_are_explained_by_their_compute_mode() {
        let exclusive = unavailable_message("GPU 1 (X)", Some(3));
        for w in [
            "GPU 1 (X)",
            "EXCLUSIVE_PROCESS",
            "CUDA_VISIBLE_DEVICES",
            "--local-ranks",
            "DEFAULT",
        ] {
            assert!(exclusive.contains(w), "{w}: {exclusive}");
        }
        assert!(unavailable_message("GPU 0", Some(2)).contains("PROHIBITED"));
        assert!(unavailable_message("GPU 0", None).contains("CUDA_ERROR_DEVICE_UNAVAILABLE"));
        assert!(unavailable_message("GPU 0", Some(0)).contains("CUDA_ERROR_DEVICE_UNAVAILABLE"));
        assert!(!exclusive.contains('\n'), "one line: {exclusive}");
    }

    #[test]
    fn uuid_formats_like_nvidia_smi() {
        let b: [u8; 16] = std::array::from_fn(|i| i as u8 * 17);
        assert_eq!(format_uuid(&b), "GPU-00112233-4455-6677-8899-aabbccddeeff");
    }
}
