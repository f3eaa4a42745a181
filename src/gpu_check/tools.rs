//! The last step of `himeno gpu-check`: what NVIDIA's own tools say about
//! the sweep, where the machine has them. Each is optional: a tool that
//! is not found skips its part with one line.
//!
//! - `cuobjdump` on the CUBINs the check's runs left in its NVRTC cache:
//!   each kernel's registers (`-res-usage`), and for the sweep its global
//!   loads (`LDG`) and how many of them are issued before its first
//!   floating-point instruction (loads hoisted ahead of the arithmetic
//!   keep more memory requests in flight).
//! - `ncu` (Nsight Compute) on one sweep launch of a short L run: the
//!   DRAM throughput as a share of peak, and the sectors per global load
//!   request (4 is fully coalesced 4-byte loads).

use super::child::{Ran, Runner};
use crate::environment;
use std::path::{Path, PathBuf};

/// How a tool's part ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Result {
    /// The tool is not on this machine.
    Absent,
    /// It ran and gave what was asked.
    Ok,
    /// It ran but gave nothing usable (why).
    Failed(String),
}

/// A tool's report lines and outcome.
pub struct Said {
    pub lines: Vec<String>,
    pub result: Result,
}

/// The metrics of the Nsight Compute pass.
const DRAM: &str = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
const SECTORS: &str = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum";
const REQUESTS: &str = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum";

/// The program `name` on `PATH`, else in the CUDA toolkit's usual
/// folder.
pub fn find(name: &str) -> Option<PathBuf> {
    let path = environment::get_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/local/cuda/bin")])
        .map(|d| d.join(name))
        .find(|f| {
            use std::os::unix::fs::PermissionsExt;
            f.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Registers per kernel from `cuobjdump -res-usage` output (`Function
/// NAME:` followed by a line with `REG:N`).
pub fn registers(text: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("Function ") {
            current = Some(name.trim_end_matches(':').trim().to_string());
            continue;
        }
        if let Some(name) = current.take() {
            let reg = t
                .split_whitespace()
                .find_map(|w| w.strip_prefix("REG:"))
                .and_then(|n| n.parse().ok());
            match reg {
                Some(n) => out.push((name, n)),
                None => current = Some(name),
            }
        }
    }
    out
}

/// The global loads of `kernel` in `cuobjdump -sass` output, and how many
/// of them come before its first floating-point instruction.
pub fn loads(text: &str, kernel: &str) -> Option<(usize, usize)> {
    let mut inside = false;
    let mut found = false;
    let (mut total, mut ahead, mut arithmetic) = (0, 0, false);
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("Function : ") {
            inside = name.trim() == kernel;
            found |= inside;
            continue;
        }
        if !inside {
            continue;
        }
        // `/*0080*/  LDG.E.CONSTANT R2, desc[UR4][R2.64] ;`
        let Some(op) = t
            .split("*/")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().find(|w| !w.starts_with('@')))
        else {
            continue;
        };
        if op.starts_with("LDG") {
            total += 1;
            ahead += usize::from(!arithmetic);
        } else if ["FADD", "FMUL", "FFMA", "DADD", "DMUL", "DFMA"]
            .iter()
            .any(|f| op.starts_with(f))
        {
            arithmetic = true;
        }
    }
    found.then_some((total, ahead))
}

/// The SASS summary of every CUBIN in the NVRTC cache folder `cache`.
pub fn sass(runner: &mut Runner, cache: &Path) -> Said {
    let Some(tool) = find("cuobjdump") else {
        return Said {
            lines: vec!["sass: skipped, no cuobjdump on PATH or in /usr/local/cuda/bin".into()],
            result: Result::Absent,
        };
    };
    let mut cubins: Vec<PathBuf> = std::fs::read_dir(cache)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "cubin"))
                .collect()
        })
        .unwrap_or_default();
    cubins.sort();
    if cubins.is_empty() {
        return Said {
            lines: vec!["sass: no CUBIN in the NVRTC cache (PTX only, or no run compiled)".into()],
            result: Result::Failed("no CUBIN in the NVRTC cache".into()),
        };
    }
    let mut lines = Vec::new();
    let mut any = false;
    for (n, cubin) in cubins.iter().enumerate() {
        let file = cubin.to_string_lossy().into_owned();
        let variant = describe(cubin).unwrap_or_else(|| file.clone());
        let res = runner.run_tool(
            &format!("cuobjdump-res-{n}"),
            &tool,
            &["-res-usage".into(), file.clone()],
        );
        let sass = runner.run_tool(
            &format!("cuobjdump-sass-{n}"),
            &tool,
            &["-sass".into(), file],
        );
        if !res.ok() || !sass.ok() {
            lines.push(format!("  sass {variant}: cuobjdump failed"));
            continue;
        }
        let regs: Vec<String> = registers(&res.stdout)
            .iter()
            .map(|(k, r)| format!("{k} {r}"))
            .collect();
        let ld = loads(&sass.stdout, "sweep")
            .map_or("no sweep in the SASS".to_string(), |(t, a)| {
                format!("sweep: {t} global loads, {a} issued before its first arithmetic")
            });
        any |= !regs.is_empty();
        lines.push(format!(
            "  sass {variant}: registers {}; {ld}",
            regs.join(", ")
        ));
    }
    Said {
        lines,
        result: if any {
            Result::Ok
        } else {
            Result::Failed("cuobjdump gave no register report".into())
        },
    }
}

/// A metric's value in `ncu --csv` output: the last quoted field of the
/// line naming it (thousands separated by commas inside the quotes).
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.contains(&format!("\"{name}\"")))
        .filter_map(|l| l.trim_end().trim_end_matches('"').rsplit("\",\"").next())
        .map(|v| v.replace(',', ""))
        .find_map(|v| v.trim().parse().ok())
}

/// What a cached CUBIN was compiled for, from its entry's JSON (the
/// backend's `disk_cache`): the architecture and the `-D` definitions.
fn describe(cubin: &Path) -> Option<String> {
    let text = crate::files::read_text(&cubin.with_extension("json"), 16 << 20).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let key = v.get("key")?;
    let defines: Vec<&str> = key
        .get("options")?
        .as_array()?
        .iter()
        .filter_map(|o| o.as_str())
        .filter(|o| o.starts_with("-D"))
        .collect();
    Some(format!(
        "{} {}",
        key.get("arch")?.as_str()?,
        defines.join(" ")
    ))
}

/// One Nsight Compute pass of a sweep launch of a short L run.
pub fn ncu(runner: &mut Runner, quick: bool) -> Said {
    let Some(tool) = find("ncu") else {
        return Said {
            lines: vec![
                "ncu: skipped, no ncu (Nsight Compute) on PATH or in /usr/local/cuda/bin".into(),
            ],
            result: Result::Absent,
        };
    };
    let mut args: Vec<String> = [
        "--csv",
        "--kernel-name",
        "sweep",
        "--launch-skip",
        "2",
        "--launch-count",
        "1",
        "--metrics",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push([DRAM, SECTORS, REQUESTS].join(","));
    args.push(runner.bin.to_string_lossy().into_owned());
    args.extend(super::matrix::ncu_target(quick));
    let ran: Ran = runner.run_tool("ncu", &tool, &args);
    let dram = metric(&ran.stdout, DRAM);
    let sectors = metric(&ran.stdout, SECTORS);
    let requests = metric(&ran.stdout, REQUESTS).filter(|&r| r > 0.0);
    match (ran.ok(), dram) {
        (true, Some(d)) => Said {
            lines: vec![format!(
                "  ncu: one L sweep: DRAM throughput {d:.1}% of peak, {} sectors per global \
                 load request",
                sectors
                    .zip(requests)
                    .map_or("-".into(), |(s, r)| format!("{:.2}", s / r))
            )],
            result: Result::Ok,
        },
        _ => {
            let why = format!("ncu gave no {DRAM} ({})", ran.why(runner.limit));
            Said {
                lines: vec![format!("  ncu: {why}; see details/runs/ncu.err")],
                result: Result::Failed(why),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuobjdump_output_gives_registers_and_hoisted_loads() {
        let res = "Resource usage:\n Common:\n  GLOBAL:0\n Function sweep:\n  REG:72 STACK:0 \
                   SHARED:0 LOCAL:0\n Function fill:\n  REG:16 STACK:0\n";
        assert_eq!(
            registers(res),
            [("sweep".to_string(), 72), ("fill".to_string(), 16)]
        );
        let sass = "\tFunction : fill\n /*0000*/ LDG.E R1, [R2.64] ;\n\
                    \tFunction : sweep\n /*0000*/ MOV R1, c[0x0][0x28] ;\n\
                    /*0010*/ LDG.E.CONSTANT R2, desc[UR4][R2.64] ;\n\
                    /*0020*/ @P0 LDG.E R3, desc[UR4][R4.64] ;\n\
                    /*0030*/ FMUL R5, R2, R3 ;\n\
                    /*0040*/ LDG.E R6, desc[UR4][R8.64] ;\n";
        assert_eq!(loads(sass, "sweep"), Some((3, 2)));
        assert_eq!(loads(sass, "fill"), Some((1, 1)));
        assert_eq!(loads(sass, "reduce"), None);
    }

    #[test]
    fn ncu_csv_metrics_are_read_by_name() {
        let csv = "==PROF== Connected\n\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\
                   \"Metric Value\"\n\"0\",\"sweep\",\"dram__throughput.avg.pct_of_peak_sustained_elapsed\",\
                   \"%\",\"78.52\"\n\"0\",\"sweep\",\"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum\",\
                   \"sector\",\"1,200\"\n";
        assert_eq!(metric(csv, DRAM), Some(78.52));
        assert_eq!(metric(csv, SECTORS), Some(1200.0));
        assert_eq!(metric(csv, REQUESTS), None);
    }
}
