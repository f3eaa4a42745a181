//! Compiling the kernels (`kernels.cu`, kept in the repository) with NVRTC
//! for the device's own architecture, once at start, outside the timed loop.
//!
//! `--fmad=false` keeps every multiply and add separate, as the CPU kernel
//! evaluates them, so the GPU's new `p` is bitwise equal to the CPU's.
//!
//! For an architecture NVRTC knows, the module is a CUBIN (machine code),
//! not PTX: the driver JIT-compiles PTX only when it is at least as new as
//! the NVRTC that wrote it (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION` otherwise,
//! e.g. NVRTC 12.9 from pip on a 12.4 driver), while a CUBIN loads on any
//! driver of the same major version.

use crate::error::{Error, Result};
use cudarc::nvrtc::{CompileOptions, Ptx, result, sys};
use std::ffi::{CStr, CString};
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
    /// The module: a CUBIN for `sm_XY`, PTX for `compute_XY`.
    pub ptx: Ptx,
    /// The `--gpu-architecture` value used.
    pub arch: String,
    /// Seconds NVRTC took.
    pub seconds: f64,
}

/// Architectures this NVRTC can compile for, as numbers like 90 for sm_90
/// (empty when NVRTC cannot say).
pub fn supported_archs() -> Vec<i32> {
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

/// What NVRTC hands back: machine code for a real architecture (`sm_XY`),
/// PTX for a virtual one (`compute_XY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// PTX text, JIT-compiled by the driver when loaded.
    Ptx,
    /// A CUBIN for exactly the named architecture.
    Cubin,
}

/// The output NVRTC can give for `arch`.
pub fn output_for(arch: &str) -> Output {
    if arch.starts_with("sm_") {
        Output::Cubin
    } else {
        Output::Ptx
    }
}

/// Compiles [`SOURCE`] with the NVRTC command line `flags` and returns the
/// `out` image (PTX text without its trailing NUL, or CUBIN bytes), or the
/// compiler's log on one line.
pub fn nvrtc(flags: &[String], out: Output) -> std::result::Result<Vec<u8>, String> {
    let src = CString::new(SOURCE).map_err(|e| e.to_string())?;
    let prog =
        result::create_program(&src, Some(c"himeno_kernels.cu")).map_err(|e| format!("{e:?}"))?;
    // SAFETY: `prog` was just created and is destroyed once, below; the
    // size queries come before the buffers they size.
    let image = unsafe {
        let built = match result::compile_program(prog, flags) {
            Ok(()) => {
                let mut size = 0usize;
                let mut buf = Vec::new();
                let got = match out {
                    Output::Ptx => sys::nvrtcGetPTXSize(prog, &mut size),
                    Output::Cubin => sys::nvrtcGetCUBINSize(prog, &mut size),
                };
                if got != sys::nvrtcResult::NVRTC_SUCCESS {
                    Err(format!("NVRTC gave no {out:?} ({got:?})"))
                } else {
                    buf.resize(size, 0u8);
                    let got = match out {
                        Output::Ptx => sys::nvrtcGetPTX(prog, buf.as_mut_ptr().cast()),
                        Output::Cubin => sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast()),
                    };
                    if got != sys::nvrtcResult::NVRTC_SUCCESS {
                        Err(format!("NVRTC gave no {out:?} ({got:?})"))
                    } else {
                        if out == Output::Ptx {
                            while buf.last() == Some(&0) {
                                buf.pop();
                            }
                        }
                        Ok(buf)
                    }
                }
            }
            Err(e) => Err(match result::get_program_log(prog) {
                Ok(log) => CStr::from_ptr(log.as_ptr())
                    .to_string_lossy()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
                Err(_) => format!("{e:?}"),
            }),
        };
        let _ = result::destroy_program(prog);
        built
    }?;
    Ok(image)
}

/// The NVRTC command line for `arch`, as [`options`] spells it.
pub fn flags(arch: &str) -> Vec<String> {
    let o = options(arch);
    let mut f = Vec::new();
    let on = |b: Option<bool>| b.map(|v| v.to_string());
    if let Some(v) = on(o.ftz) {
        f.push(format!("--ftz={v}"));
    }
    if let Some(v) = on(o.prec_sqrt) {
        f.push(format!("--prec-sqrt={v}"));
    }
    if let Some(v) = on(o.prec_div) {
        f.push(format!("--prec-div={v}"));
    }
    if let Some(v) = on(o.fmad) {
        f.push(format!("--fmad={v}"));
    }
    f.extend(o.options);
    f
}

/// Compiles [`SOURCE`] for compute capability `cc` (NVRTC must have been
/// found by `driver::probe`).
pub fn compile(cc: (i32, i32)) -> Result<Compiled> {
    let arch = arch_for(cc, &supported_archs());
    let start = Instant::now();
    let out = output_for(&arch);
    let image = nvrtc(&flags(&arch), out).map_err(|log| {
        Error::runtime(format!(
            "NVRTC could not compile the kernels for {arch}: {log}"
        ))
    })?;
    let ptx = match out {
        Output::Cubin => Ptx::from_binary(image),
        Output::Ptx => Ptx::from_src(String::from_utf8_lossy(&image).into_owned()),
    };
    let seconds = start.elapsed().as_secs_f64();
    tracing::info!(arch = %arch, seconds, output = ?out, "NVRTC compiled the GPU kernels");
    Ok(Compiled { ptx, arch, seconds })
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
        let f = flags("sm_90");
        for want in ["--fmad=false", "--ftz=false", "--gpu-architecture=sm_90"] {
            assert!(f.iter().any(|x| x == want), "{want} missing from {f:?}");
        }
        assert_eq!(output_for("sm_90"), Output::Cubin);
        assert_eq!(output_for("compute_90"), Output::Ptx);
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
            assert_eq!(output_for(&arch), Output::Cubin);
            let cubin = nvrtc(&flags(&arch), Output::Cubin).unwrap_or_else(|e| panic!("{e}"));
            assert!(cubin.starts_with(b"\x7fELF"), "{arch}: not a CUBIN");
            let ptx = nvrtc(&flags(&arch), Output::Ptx).unwrap_or_else(|e| panic!("{e}"));
            let ptx = String::from_utf8(ptx).expect("PTX is text");
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
        let fused: Vec<String> = flags("sm_90")
            .into_iter()
            .map(|f| f.replace("--fmad=false", "--fmad=true"))
            .collect();
        let ptx = String::from_utf8(nvrtc(&fused, Output::Ptx).expect("compiles")).unwrap();
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
