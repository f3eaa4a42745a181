//! Compiling the kernels (`kernels.cu`, kept in the repository) with NVRTC
//! for the device's own architecture, once per process and variant,
//! outside the timed loop.
//!
//! `--fmad=false` keeps every multiply and add separate, as the CPU kernel
//! evaluates them, so the GPU's new `p` is bitwise equal to the CPU's. The
//! launch constants are `-D` definitions from `launch`.
//!
//! For an architecture NVRTC knows, the module is a CUBIN (machine code),
//! not PTX: the driver JIT-compiles PTX only when it is at least as new as
//! the NVRTC that wrote it (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION` otherwise,
//! e.g. NVRTC 12.9 from pip on a 12.4 driver), while a CUBIN loads on any
//! driver of the same major version. A CUBIN comes with the assembler's
//! resource report (registers, spills), which goes into the record.
//!
//! `--generate-line-info` maps the machine code back to `kernels.cu`'s
//! lines (it changes no instruction), so that `compute-sanitizer` or a
//! fault's report names a line. With `HIMENO_NVRTC_CACHE` set, the output
//! is kept in that folder and reused by later processes (`disk_cache`).

use super::disk_cache;
use super::launch::{self, Occupancy, SOURCE};
use super::nvrtc::{Nvrtc, Output};
use crate::config::SweepVariant;
use crate::error::{Error, Result};
use cudarc::nvrtc::Ptx;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The name NVRTC gives the source in messages.
const NAME: &str = "himeno_kernels.cu";

/// What the assembler reports about one kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of stack frame.
    pub stack: u64,
    /// Bytes of register spill stores.
    pub spill_stores: u64,
    /// Bytes of register spill loads.
    pub spill_loads: u64,
}

impl Resources {
    /// Whether the kernel keeps everything in registers.
    pub fn spills(&self) -> bool {
        self.stack > 0 || self.spill_stores > 0 || self.spill_loads > 0
    }
}

/// Compiled kernels and how they were made.
pub struct Compiled {
    /// The module: a CUBIN for `sm_XY`, PTX for `compute_XY`.
    pub ptx: Ptx,
    /// The `--gpu-architecture` value used.
    pub arch: String,
    /// The sweep variant compiled.
    pub occupancy: Occupancy,
    /// The sweep kernel variant compiled.
    pub sweep: SweepVariant,
    /// Whether the module came from the NVRTC cache folder.
    pub cached: bool,
    /// Seconds NVRTC took.
    pub seconds: f64,
    /// NVRTC's version, `major.minor`.
    pub nvrtc_version: String,
    /// The NVRTC library file used.
    pub nvrtc_path: String,
    /// The assembler's report per kernel (empty for PTX).
    pub resources: BTreeMap<String, Resources>,
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

/// The output NVRTC can give for `arch`.
pub fn output_for(arch: &str) -> Output {
    if arch.starts_with("sm_") {
        Output::Cubin
    } else {
        Output::Ptx
    }
}

/// The NVRTC command line for `arch` and sweep variant `occ`: exact IEEE
/// arithmetic without contraction, the launch constants, and for a CUBIN
/// the assembler's resource report.
pub fn flags(arch: &str, occ: Occupancy) -> Vec<String> {
    let mut f: Vec<String> = [
        "--fmad=false",
        "--ftz=false",
        "--prec-div=true",
        "--prec-sqrt=true",
        "--generate-line-info",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    f.push(format!("--gpu-architecture={arch}"));
    f.extend(launch::defines(occ));
    if output_for(arch) == Output::Cubin {
        f.push("--ptxas-options=-v".into());
    }
    f
}

/// The assembler's per-kernel report in an NVRTC log (`ptxas info :
/// Function properties for K`, the stack and spill line, then `Used N
/// registers`).
pub fn resources(log: &str) -> BTreeMap<String, Resources> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    let number_before = |line: &str, word: &str| -> Option<u64> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| w.trim_end_matches(',') == word)?;
        words.get(at.checked_sub(1)?)?.parse().ok()
    };
    for line in log.lines() {
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            let name = rest.trim().to_string();
            out.insert(name.clone(), Resources::default());
            current = Some(name);
            continue;
        }
        let Some(r) = current.as_ref().and_then(|k| out.get_mut(k)) else {
            continue;
        };
        if line.contains("stack frame") {
            // "N bytes stack frame, N bytes spill stores, N bytes spill loads"
            let parts: Vec<&str> = line.split(',').collect();
            for p in parts {
                let n = p
                    .split_whitespace()
                    .find_map(|w| w.parse::<u64>().ok())
                    .unwrap_or(0);
                if p.contains("stack frame") {
                    r.stack = n;
                } else if p.contains("spill stores") {
                    r.spill_stores = n;
                } else if p.contains("spill loads") {
                    r.spill_loads = n;
                }
            }
        } else if let Some(n) = number_before(line, "registers") {
            r.registers = n as u32;
        }
    }
    out
}

/// Compiles [`SOURCE`] for compute capability `cc`, occupancy variant
/// `occ` and sweep variant `sweep` with `nv`. Ranks of one process share
/// the result: the first compiles, the others wait for it. With a cache
/// folder (`HIMENO_NVRTC_CACHE`), an image compiled before by any process
/// from the same source, options, architecture and NVRTC is loaded
/// instead, and a new one is stored there.
pub fn compile(
    nv: &Nvrtc,
    cc: (i32, i32),
    occ: Occupancy,
    sweep: SweepVariant,
) -> Result<Arc<Compiled>> {
    type Cache = Mutex<BTreeMap<(String, String, String), Arc<Compiled>>>;
    static CACHE: Cache = Mutex::new(BTreeMap::new());
    let arch = arch_for(cc, &nv.supported_archs());
    let key = (
        arch.clone(),
        occ.name().to_string(),
        sweep.name().to_string(),
    );
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = cache.get(&key) {
        return Ok(c.clone());
    }
    let start = Instant::now();
    let out = output_for(&arch);
    let options = flags(&arch, occ);
    let folder = disk_cache::folder();
    let entry = disk_cache::Key::new(SOURCE, &options, &arch, &nv.version_string(), out);
    let found = folder.as_deref().and_then(|f| disk_cache::load(f, &entry));
    let cached = found.is_some();
    let built = match found {
        Some(b) => b,
        None => {
            let b = nv.compile(SOURCE, NAME, &options, out).map_err(|log| {
                Error::runtime(format!(
                    "NVRTC {} ({}) could not compile the kernels for {arch}: {log}",
                    nv.version_string(),
                    nv.path
                ))
            })?;
            if let Some(f) = folder.as_deref()
                && let Err(e) = disk_cache::store(f, &entry, &b)
            {
                tracing::warn!(
                    "cannot keep the compiled kernels in {} ({e}): later processes compile \
                     again",
                    f.display()
                );
            }
            b
        }
    };
    let ptx = match out {
        Output::Cubin => Ptx::from_binary(built.image),
        Output::Ptx => Ptx::from_src(String::from_utf8_lossy(&built.image).into_owned()),
    };
    let res = resources(&built.log);
    let seconds = start.elapsed().as_secs_f64();
    // Every variant is in the module; the one this run launches is the one
    // whose registers matter.
    if let Some(s) = res.get(sweep.kernel()) {
        if s.spills() {
            tracing::warn!(
                arch = %arch,
                occupancy = occ.name(),
                "the sweep kernel spills registers ({} bytes of stack): expect it slower; \
                 try another --gpu-occupancy",
                s.stack
            );
        }
        tracing::info!(
            arch = %arch,
            seconds,
            registers = s.registers,
            spills = s.spills(),
            occupancy = occ.name(),
            sweep = sweep.name(),
            cached,
            "NVRTC {} compiled the GPU kernels",
            nv.version_string()
        );
    }
    let compiled = Arc::new(Compiled {
        ptx,
        arch,
        occupancy: occ,
        sweep,
        cached,
        seconds,
        nvrtc_version: nv.version_string(),
        nvrtc_path: nv.path.clone(),
        resources: res,
    });
    cache.insert(key, compiled.clone());
    Ok(compiled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::gpu::launch::KERNELS;
    use std::io::Write;
    use std::path::PathBuf;

    #[test]
    fn arch_is_the_devices_own_unless_nvrtc_is_older() {
        assert_eq!(arch_for((9, 0), &[75, 80, 86, 89, 90]), "sm_90");
        assert_eq!(arch_for((12, 0), &[75, 80, 90]), "compute_90");
        assert_eq!(arch_for((8, 6), &[]), "sm_86");
    }

    #[test]
    fn flags_turn_contraction_off_and_carry_the_constants() {
        let f = flags("sm_90", Occupancy::Auto);
        for want in [
            "--fmad=false",
            "--ftz=false",
            "--gpu-architecture=sm_90",
            "--generate-line-info",
            "-DHIMENO_SWEEP_THREADS=256",
            "--ptxas-options=-v",
        ] {
            assert!(f.iter().any(|x| x == want), "{want} missing from {f:?}");
        }
        assert!(!flags("compute_90", Occupancy::Auto).contains(&"--ptxas-options=-v".into()));
        assert_eq!(output_for("sm_90"), Output::Cubin);
        assert_eq!(output_for("compute_90"), Output::Ptx);
    }

    #[test]
    fn the_assembler_report_is_parsed_per_kernel() {
        let log = "ptxas info    : 0 bytes gmem\n\
            ptxas info    : Compiling entry function 'fill' for 'sm_90'\n\
            ptxas info    : Function properties for fill\n\
            ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
            ptxas info    : Used 24 registers, used 0 barriers\n\
            ptxas info    : Function properties for sweep\n\
            ptxas         .     48 bytes stack frame, 44 bytes spill stores, 40 bytes spill loads\n\
            ptxas info    : Used 40 registers, used 1 barriers, 48 bytes cumulative stack size, 256 bytes smem\n";
        let r = resources(log);
        assert_eq!(
            r["fill"],
            Resources {
                registers: 24,
                ..Default::default()
            }
        );
        assert_eq!(
            r["sweep"],
            Resources {
                registers: 40,
                stack: 48,
                spill_stores: 44,
                spill_loads: 40
            }
        );
        assert!(r["sweep"].spills() && !r["fill"].spills());
    }

    /// Writes a line to the real stderr, past the test harness's capture,
    /// so that CI logs show it for passing tests too.
    fn say(line: &str) {
        let _ = writeln!(std::io::stderr(), "{line}");
    }

    /// The NVRTC library of major version `major` for the compile checks:
    /// `HIMENO_NVRTC<major>_LIB`, else the wheel `scripts/install-nvrtc.sh`
    /// installed. `Err` says why there is none.
    fn nvrtc_file(major: u32) -> std::result::Result<PathBuf, String> {
        let var = format!("HIMENO_NVRTC{major}_LIB");
        if let Some(p) = std::env::var_os(&var).filter(|v| !v.is_empty()) {
            return Ok(p.into());
        }
        let dir = std::env::var_os("HIMENO_NVRTC_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("himeno-nvrtc"))
            })
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/himeno-nvrtc"))
            })
            .ok_or("no HOME")?;
        let lib = match major {
            12 => dir.join("cu12/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"),
            _ => dir.join(format!(
                "cu{major}/nvidia/cu{major}/lib/libnvrtc.so.{major}"
            )),
        };
        if lib.is_file() {
            Ok(lib)
        } else {
            Err(format!(
                "no {} (run scripts/install-nvrtc.sh, or set {var})",
                lib.display()
            ))
        }
    }

    /// The floating-point arithmetic instructions of `ptx` in order, by
    /// opcode (register names and address arithmetic left out): what
    /// decides the results' bits.
    fn float_ops(ptx: &str) -> Vec<String> {
        ptx.lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|op| {
                let arith = ["add.", "sub.", "mul.", "fma.", "div.", "neg.", "cvt."]
                    .iter()
                    .any(|p| op.starts_with(p));
                arith && (op.contains("f32") || op.contains("f64"))
            })
            .map(str::to_string)
            .collect()
    }

    /// Compiles the kernels with the NVRTC of `major` for sm_80 and sm_90
    /// and every sweep variant: each kernel defined, no contracted
    /// multiply-add, no spill, the variants' arithmetic the same. Prints
    /// the register counts.
    fn compile_with(major: u32) {
        let file = match nvrtc_file(major) {
            Ok(f) => f,
            Err(why) if std::env::var_os("CI").is_some() => {
                panic!("CI needs NVRTC {major} for the kernel compile check: {why}")
            }
            Err(why) => {
                say(&format!("SKIPPED the NVRTC {major} compile check: {why}"));
                return;
            }
        };
        let nv = Nvrtc::open(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(nv.version.0 as u32, major, "{}", nv.path);
        let archs = nv.supported_archs();
        assert!(
            archs.contains(&80) && archs.contains(&90),
            "NVRTC supports {archs:?}"
        );
        for cc in [(8, 0), (9, 0)] {
            let arch = arch_for(cc, &archs);
            let mut ptx_of = Vec::new();
            for occ in Occupancy::ALL {
                let f = flags(&arch, occ);
                let cubin = nv
                    .compile(SOURCE, NAME, &f, Output::Cubin)
                    .unwrap_or_else(|e| panic!("NVRTC {major} {arch}: {e}"));
                assert!(cubin.image.starts_with(b"\x7fELF"), "{arch}: not a CUBIN");
                let res = resources(&cubin.log);
                // The 5-block variant is meant for Hopper: on sm_80 its 48
                // registers spill (28 bytes with NVRTC 12.9 and 13.0).
                let may_spill = occ == Occupancy::Blocks5 && cc != (9, 0);
                for k in KERNELS {
                    // The pipelined sweeps spill in 48 registers; a run
                    // refuses them with --gpu-occupancy 5.
                    let may_spill = may_spill
                        || (occ == Occupancy::Blocks5 && k.starts_with("sweep_pipelined"));
                    let r = res
                        .get(k)
                        .unwrap_or_else(|| panic!("{arch}: no report for {k}:\n{}", cubin.log));
                    assert!(r.registers > 0, "{arch} {k}: {r:?}");
                    assert!(
                        may_spill || !r.spills(),
                        "NVRTC {major} {arch} {k} ({}): spills {r:?}",
                        occ.name()
                    );
                }
                let sweep = res["sweep"].registers;
                if occ.min_blocks() > 0 {
                    let cap = 65_536 / (launch::SWEEP_THREADS * occ.min_blocks());
                    assert!(
                        sweep <= cap,
                        "{arch} occupancy {}: {sweep} registers",
                        occ.name()
                    );
                }
                say(&format!(
                    "NVRTC {} {arch} occupancy {:>4}: registers {}{}",
                    nv.version_string(),
                    occ.name(),
                    KERNELS
                        .iter()
                        .map(|k| format!("{k} {}", res[*k].registers))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if res["sweep"].spills() {
                        format!(" (sweep spills {:?})", res["sweep"])
                    } else {
                        String::new()
                    }
                ));
                let ptx = nv
                    .compile(SOURCE, NAME, &f, Output::Ptx)
                    .unwrap_or_else(|e| panic!("{e}"));
                let ptx = String::from_utf8(ptx.image).expect("PTX is text");
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
                // --generate-line-info: the code names its source lines.
                assert!(
                    ptx.contains(".loc") && ptx.contains(".file"),
                    "{arch}: no line info"
                );
                ptx_of.push(float_ops(&ptx));
            }
            // The variants differ in register budget and index arithmetic
            // only: the same floating-point instructions in the same order.
            assert!(ptx_of[0].len() > 40, "{arch}: {:?}", ptx_of[0]);
            assert!(
                ptx_of.windows(2).all(|w| w[0] == w[1]),
                "{arch}: the variants' arithmetic differs"
            );
        }
        // With contraction allowed the same source does fuse: the check
        // above can fail.
        let fused: Vec<String> = flags("sm_90", Occupancy::Auto)
            .into_iter()
            .map(|f| f.replace("--fmad=false", "--fmad=true"))
            .collect();
        let ptx = nv
            .compile(SOURCE, NAME, &fused, Output::Ptx)
            .expect("compiles");
        assert!(String::from_utf8(ptx.image).unwrap().contains("fma.rn.f32"));
        // Without the launch constants the source refuses to compile.
        let bare: Vec<String> = flags("sm_90", Occupancy::Auto)
            .into_iter()
            .filter(|f| !f.starts_with("-D"))
            .collect();
        let err = nv.compile(SOURCE, NAME, &bare, Output::Ptx).unwrap_err();
        assert!(err.contains("launch::defines"), "{err}");
    }

    #[test]
    fn nvrtc_12_compiles_the_kernels_exactly_without_spills() {
        compile_with(12);
    }

    #[test]
    fn nvrtc_13_compiles_the_kernels_exactly_without_spills() {
        compile_with(13);
    }
}
