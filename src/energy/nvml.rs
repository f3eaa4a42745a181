//! NVML's total energy counter of one GPU (`nvmlDeviceGetTotalEnergyConsumption`,
//! millijoules since the driver loaded; on a GH200 it covers the whole
//! module, CPU and memory included). The library is opened at run time,
//! as the CUDA driver is, so that a build with GPU support still runs
//! where no NVIDIA driver is installed; four symbols are all it needs,
//! which is why no NVML crate is used. The project's emulated CUDA driver
//! answers these calls too (`tests/cuda_emu/nvml.cpp`), with a counter
//! that advances with the kernels it runs, and says so by exporting its
//! description: its energy is labelled emulated.

use libloading::Library;
use std::ffi::{CStr, CString, c_char, c_uint, c_ulonglong, c_void};

/// The library file opened, by its soname (the driver installs it).
pub const LIBRARY: &str = "libnvidia-ml.so.1";

/// NVML's success code.
const NVML_SUCCESS: c_uint = 0;

/// An NVML device handle.
type Handle = *mut c_void;

/// One GPU's energy counter, NVML open for as long as it lives.
pub struct Gpu {
    /// The library; the handle below is valid while it is loaded.
    lib: Library,
    /// The device.
    device: Handle,
    /// The emulator's description, when the library is the emulated one.
    pub emulated: Option<String>,
}

impl Gpu {
    /// Opens NVML and finds the device whose UUID is `uuid`
    /// (`GPU-xxxxxxxx-...`, as the CUDA driver reports it): the same
    /// device whatever order CUDA and NVML number the devices in.
    pub fn open(uuid: &str) -> Result<Gpu, String> {
        // SAFETY: loading NVML runs its initialisers, which have no
        // preconditions; the symbols below are NVML's documented C API.
        let lib = unsafe { Library::new(LIBRARY) }
            .map_err(|e| format!("{LIBRARY} cannot be loaded ({e})"))?;
        let emulated = describe(&lib);
        // SAFETY: `nvmlInit_v2(void)` returns an nvmlReturn_t.
        let code = unsafe {
            let init = lib
                .get::<unsafe extern "C" fn() -> c_uint>(b"nvmlInit_v2")
                .map_err(|e| format!("{LIBRARY} has no nvmlInit_v2 ({e})"))?;
            init()
        };
        if code != NVML_SUCCESS {
            return Err(format!("nvmlInit_v2 failed with NVML error {code}"));
        }
        let mut gpu = Gpu {
            lib,
            device: std::ptr::null_mut(),
            emulated,
        };
        let id = CString::new(uuid).map_err(|_| "the device's UUID has a NUL byte".to_string())?;
        // SAFETY: `nvmlDeviceGetHandleByUUID(const char *, nvmlDevice_t *)`
        // with a NUL-terminated string and a place for the handle.
        let code = unsafe {
            let by_uuid = gpu
                .lib
                .get::<unsafe extern "C" fn(*const c_char, *mut Handle) -> c_uint>(
                    b"nvmlDeviceGetHandleByUUID",
                )
                .map_err(|e| format!("{LIBRARY} has no nvmlDeviceGetHandleByUUID ({e})"))?;
            by_uuid(id.as_ptr(), &mut gpu.device)
        };
        if code != NVML_SUCCESS {
            return Err(format!(
                "NVML does not know the device {uuid} (NVML error {code})"
            ));
        }
        Ok(gpu)
    }

    /// The counter now, in microjoules.
    pub fn read(&self) -> Result<u64, String> {
        let mut mj: c_ulonglong = 0;
        // SAFETY: `nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t,
        // unsigned long long *)` on a handle of this loaded library.
        let code = unsafe {
            let get = self
                .lib
                .get::<unsafe extern "C" fn(Handle, *mut c_ulonglong) -> c_uint>(
                    b"nvmlDeviceGetTotalEnergyConsumption",
                )
                .map_err(|e| format!("{LIBRARY} has no energy counter ({e})"))?;
            get(self.device, &mut mj)
        };
        match code {
            NVML_SUCCESS => mj
                .checked_mul(1000)
                .ok_or_else(|| "NVML's energy counter is out of range".to_string()),
            // NVML_ERROR_NOT_SUPPORTED: GPUs before Volta have no counter.
            3 => Err("this GPU has no energy counter (NVML: not supported)".into()),
            c => Err(format!(
                "nvmlDeviceGetTotalEnergyConsumption failed with NVML error {c}"
            )),
        }
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: `nvmlShutdown(void)` balances the successful init that
        // every `Gpu` holds (a failed init returns before one exists).
        unsafe {
            if let Ok(shut) = self
                .lib
                .get::<unsafe extern "C" fn() -> c_uint>(b"nvmlShutdown")
            {
                shut();
            }
        }
    }
}

/// The emulator's description when `lib` is the project's emulated
/// driver (which exports `himeno_emu_describe`), else `None`.
fn describe(lib: &Library) -> Option<String> {
    // SAFETY: only the emulator exports this symbol, with this signature,
    // returning a static C string or null.
    unsafe {
        let f = lib
            .get::<unsafe extern "C" fn() -> *const c_char>(b"himeno_emu_describe")
            .ok()?;
        let p = f();
        Some(if p.is_null() {
            "an emulated CUDA driver".to_string()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        })
    }
}
