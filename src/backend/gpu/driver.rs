//! Finding the CUDA libraries and a device: probes that never panic, the
//! device choice per rank, the device's description for the report, and the
//! memory preflight.
//!
//! cudarc loads `libcuda` and `libnvrtc` on first use and *panics* when
//! they are missing, so every entry point of the GPU backend calls
//! [`probe`] first and turns a missing library into a one-line error.

use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, result, sys};
use std::sync::{Arc, OnceLock};

/// Environment variable naming the NVRTC library file to use, e.g. the
/// `libnvrtc.so.12` of the `nvidia-cuda-nvrtc-cu12` Python wheel.
pub const NVRTC_ENV: &str = "HIMENO_NVRTC_LIB";

/// Loads the library named by [`NVRTC_ENV`], if set, and keeps it loaded.
fn preload_nvrtc() -> std::result::Result<(), String> {
    static PRELOADED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    PRELOADED
        .get_or_init(|| match std::env::var_os(NVRTC_ENV) {
            Some(path) => load_nvrtc_from(std::path::Path::new(&path))
                .map_err(|e| format!("{NVRTC_ENV}: {e}")),
            None => Ok(()),
        })
        .clone()
}

/// Loads the NVRTC library file at `path` and keeps it loaded for the life
/// of the process. The dynamic loader then resolves cudarc's later load of
/// `libnvrtc.so.12` by its soname to this copy.
pub fn load_nvrtc_from(path: &std::path::Path) -> std::result::Result<(), String> {
    // SAFETY: loading NVRTC runs only its library initialisers.
    match unsafe { libloading::Library::new(path) } {
        Ok(lib) => {
            std::mem::forget(lib);
            Ok(())
        }
        Err(e) => Err(format!(
            "{} cannot be loaded ({e}): point it at libnvrtc.so.12",
            path.display()
        )),
    }
}

/// Checks that the CUDA driver and NVRTC libraries can be loaded, that the
/// driver initialises and that it sees at least one device. Returns the
/// number of devices, or a one-line explanation with the fix.
pub fn probe() -> std::result::Result<usize, String> {
    preload_nvrtc()?;
    // SAFETY: these only try to dlopen candidate file names.
    if !unsafe { sys::is_culib_present() } {
        return Err(
            "no CUDA driver found (libcuda.so cannot be loaded): run on a machine \
                    with an NVIDIA driver, or use --backend cpu"
                .into(),
        );
    }
    // SAFETY: as above.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(format!(
            "the NVRTC library (libnvrtc.so.12) cannot be loaded: install the CUDA toolkit \
             or `pip install nvidia-cuda-nvrtc-cu12`, then add its lib directory to \
             LD_LIBRARY_PATH or set {NVRTC_ENV}=/path/to/libnvrtc.so.12"
        ));
    }
    result::init().map_err(|e| {
        format!("the CUDA driver failed to initialise ({e:?}): check the driver installation")
    })?;
    let count =
        result::device::get_count().map_err(|e| format!("cannot count CUDA devices ({e:?})"))?;
    if count <= 0 {
        return Err(
            "the CUDA driver sees no device (check CUDA_VISIBLE_DEVICES), or use \
                    --backend cpu"
                .into(),
        );
    }
    Ok(count as usize)
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
    /// The device's primary context, current on this thread.
    pub ctx: Arc<CudaContext>,
    /// Compute capability (major, minor).
    pub cc: (i32, i32),
    /// One-line description: ordinal, name, PCI bus id, UUID.
    pub description: String,
}

/// Maps a driver error to a runtime error saying what was being done.
pub fn cuda_err(what: &str) -> impl Fn(result::DriverError) -> Error + '_ {
    move |e| Error::runtime(format!("CUDA error while {what}: {e:?}"))
}

impl Device {
    /// Opens device `ordinal` (after a successful [`probe`]).
    pub fn open(ordinal: usize) -> Result<Device> {
        let ctx = CudaContext::new(ordinal).map_err(cuda_err("opening the device"))?;
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
            .unwrap_or_else(|_| "uuid unknown".into());
        let total = ctx.total_mem().unwrap_or(0) as f64 / (1u64 << 30) as f64;
        let description = format!(
            "GPU {ordinal}: {name} (sm_{}{}, {total:.0} GiB, PCI {bus}, {uuid})",
            cc.0, cc.1
        );
        Ok(Device {
            ctx,
            cc,
            description,
        })
    }

    /// Refuses to start when the device has less free memory than `need`
    /// bytes; `what` names the request in the message.
    pub fn check_memory(&self, need: u64, what: &str) -> Result<()> {
        let (free, _total) = self
            .ctx
            .mem_get_info()
            .map_err(cuda_err("reading free memory"))?;
        if (free as u64) < need {
            let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
            return Err(Error::usage(format!(
                "{what} needs {:.2} GiB of device memory but {} has {:.2} GiB free: \
                 use more ranks (smaller blocks) or a smaller grid",
                gib(need),
                self.description,
                gib(free as u64)
            )));
        }
        Ok(())
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
    fn uuid_formats_like_nvidia_smi() {
        let b: [u8; 16] = std::array::from_fn(|i| i as u8 * 17);
        assert_eq!(format_uuid(&b), "GPU-00112233-4455-6677-8899-aabbccddeeff");
    }
}
