//! Compiling the kernels (`kernels.cu`, kept in the repository) with NVRTC
//! for the device's own architecture, once at start, outside the timed loop.
//!
//! `--fmad=false` keeps every multiply and add separate, as the CPU kernel
//! evaluates them, so the GPU's new `p` is bitwise equal to the CPU's.

use crate::error::{Error, Result};
use cudarc::nvrtc::{CompileOptions, Ptx, compile_ptx_with_opts};
use std::time::Instant;

/// The CUDA C source of every kernel.
pub const SOURCE: &str = include_str!("kernels.cu");

/// Names of the kernels the backend loads.
pub const KERNELS: [&str; 6] = [
    "sweep",
    "reduce_partials",
    "pack_face",
    "unpack_face",
    "fill",
    "fill_planes",
];

/// Compiled kernels and how they were made.
pub struct Compiled {
    /// The PTX module.
    pub ptx: Ptx,
    /// The `--gpu-architecture` value used.
    pub arch: String,
    /// Seconds NVRTC took.
    pub seconds: f64,
}

/// Architectures this NVRTC can compile for, as numbers like 90 for sm_90
/// (empty when NVRTC cannot say).
pub fn supported_archs() -> Vec<i32> {
    use cudarc::nvrtc::sys;
    let mut n = 0;
    // SAFETY: plain out-parameter calls; the second gets a buffer of the
    // size the first reported.
    unsafe {
        if sys::nvrtcGetNumSupportedArchs(&mut n) != sys::nvrtcResult::NVRTC_SUCCESS || n <= 0 {
            return Vec::new();
        }
        let mut archs = vec![0i32; n as usize];
        if sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) != sys::nvrtcResult::NVRTC_SUCCESS {
            return Vec::new();
        }
        archs
    }
}

/// The `--gpu-architecture` for compute capability `cc`: the device's own
/// `sm_XY` when NVRTC knows it; for a device newer than this NVRTC, PTX for
/// the newest virtual architecture it knows, which the driver compiles for
/// the device when loading it.
pub fn arch_for(cc: (i32, i32), supported: &[i32]) -> String {
    let want = cc.0 * 10 + cc.1;
    match supported.iter().max() {
        Some(&newest) if !supported.contains(&want) && want > newest => {
            format!("compute_{newest}")
        }
        _ => format!("sm_{want}"),
    }
}

/// NVRTC options for `arch`: exact IEEE arithmetic without contraction.
pub fn options(arch: &str) -> CompileOptions {
    CompileOptions {
        fmad: Some(false),
        ftz: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        options: vec![format!("--gpu-architecture={arch}")],
        name: Some("himeno_kernels.cu".into()),
        ..Default::default()
    }
}

/// Compiles [`SOURCE`] for compute capability `cc` (NVRTC must have been
/// found by `driver::probe`).
pub fn compile(cc: (i32, i32)) -> Result<Compiled> {
    let arch = arch_for(cc, &supported_archs());
    let start = Instant::now();
    let ptx = compile_ptx_with_opts(SOURCE, options(&arch)).map_err(|e| {
        Error::runtime(format!(
            "NVRTC could not compile the kernels for {arch}: {}",
            compile_log(&e)
        ))
    })?;
    let seconds = start.elapsed().as_secs_f64();
    tracing::info!(arch = %arch, seconds, "NVRTC compiled the GPU kernels");
    Ok(Compiled { ptx, arch, seconds })
}

/// The compiler's log, on one line.
fn compile_log(e: &cudarc::nvrtc::CompileError) -> String {
    match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => log
            .to_string_lossy()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_is_the_devices_own_unless_nvrtc_is_older() {
        assert_eq!(arch_for((9, 0), &[75, 80, 86, 89, 90]), "sm_90");
        assert_eq!(arch_for((12, 0), &[75, 80, 90]), "compute_90");
        assert_eq!(arch_for((8, 6), &[]), "sm_86");
    }

    #[test]
    fn options_turn_contraction_off() {
        let o = options("sm_90");
        assert_eq!(o.fmad, Some(false));
        assert_eq!(o.options, vec!["--gpu-architecture=sm_90".to_string()]);
    }

    /// The NVRTC library: `HIMENO_NVRTC_LIB`, else the one of the
    /// `nvidia-cuda-nvrtc-cu12` Python wheel if python3 can find it.
    fn find_nvrtc() -> Option<std::path::PathBuf> {
        if let Some(p) = std::env::var_os(super::super::driver::NVRTC_ENV) {
            return Some(p.into());
        }
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                "import nvidia.cuda_nvrtc as m; print(list(m.__path__)[0])",
            ])
            .output()
            .ok()?;
        let dir = String::from_utf8(out.stdout).ok()?;
        let lib = std::path::Path::new(dir.trim()).join("lib/libnvrtc.so.12");
        lib.exists().then_some(lib)
    }

    #[test]
    fn nvrtc_compiles_the_kernels_without_contraction() {
        if let Some(lib) = find_nvrtc() {
            super::super::driver::load_nvrtc_from(&lib).expect("NVRTC loads");
        }
        // SAFETY: only tries to dlopen candidate names.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!(
                "SKIPPED nvrtc_compiles_the_kernels_without_contraction: no libnvrtc.so.12 \
                 (pip install nvidia-cuda-nvrtc-cu12, or set HIMENO_NVRTC_LIB)"
            );
            return;
        }
        let archs = supported_archs();
        assert!(archs.contains(&80), "NVRTC supports {archs:?}");
        for cc in [(8, 0), (9, 0)] {
            let arch = arch_for(cc, &archs);
            let ptx = compile_ptx_with_opts(SOURCE, options(&arch))
                .unwrap_or_else(|e| panic!("{arch}: {}", compile_log(&e)))
                .to_src();
            for k in KERNELS {
                assert!(
                    ptx.contains(&format!(".entry {k}(")),
                    "{arch}: no entry {k}"
                );
            }
            // --fmad=false: no single-precision multiply-add may appear.
            assert!(
                !ptx.contains("fma.rn.f32"),
                "{arch}: contracted multiply-add"
            );
            assert!(
                ptx.contains("mul.rn.f32"),
                "{arch}: multiplies not kept exact"
            );
        }
        // With contraction allowed the same source does fuse: the check
        // above can fail.
        let mut fused = options("sm_90");
        fused.fmad = Some(true);
        let ptx = compile_ptx_with_opts(SOURCE, fused)
            .expect("compiles")
            .to_src();
        assert!(ptx.contains("fma.rn.f32"));
    }

    #[test]
    fn source_defines_every_kernel() {
        for k in KERNELS {
            assert!(
                SOURCE.contains(&format!("__global__ void {k}(")),
                "kernel {k} missing"
            );
        }
    }
}
