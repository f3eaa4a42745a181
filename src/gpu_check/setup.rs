//! Part 0 of `himeno gpu-check`: the binary and its libraries (`ldd`),
//! the GPU and its driver (`nvidia-smi`), the NVRTC libraries on the
//! machine, the binary's own NVRTC search and a first GPU run (with the
//! NVRTC found here when the binary's search fails), and whether the
//! binary runs in-process ranks.

use super::child::Runner;
use super::child::run_limited;
use super::matrix;
use super::nvrtc;
use crate::backend::gpu::env::NVRTC_ENV;
use crate::report::Record;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Time limit of the helper tools (`ldd`, `nvidia-smi`).
const TOOL_LIMIT: Duration = Duration::from_secs(60);

/// What part 0 works with.
pub struct Setup<'a> {
    /// The runner of the binary under test; when the binary does not find
    /// NVRTC by itself, the one found here is set in its environment.
    pub runner: &'a mut Runner,
    /// The scratch folder of the details.
    pub work: &'a Path,
    /// Prefix of the system folders searched for NVRTC.
    pub search_root: &'a Path,
}

/// What part 0 found.
pub struct Found {
    /// Whether the binary found NVRTC by itself.
    pub nvrtc_search: bool,
    /// Whether the first GPU run was on an emulated device.
    pub emulated: bool,
    /// Whether the binary runs in-process ranks (why not).
    pub local: Result<(), String>,
}

/// Runs part 0, its report lines into `lines`. `Err` is a setup error:
/// nothing else can run.
pub fn setup(ck: &mut Setup, lines: &mut Vec<String>) -> Result<Found, String> {
    let bin = ck.runner.bin.clone();
    if !is_executable(&bin) {
        return Err(format!(
            "no himeno binary at {} (build: cargo build --release --features cuda)",
            bin.display()
        ));
    }
    let version = ck.runner.run("version", &["--version".into()], &[]);
    lines.push(format!(
        "binary: {} ({})",
        bin.display(),
        version
            .stdout
            .lines()
            .next()
            .unwrap_or("no --version")
            .trim()
    ));
    lines.push(String::new());
    lines.push("== 0. setup".into());
    libraries(ck, &bin, lines)?;
    let driver = nvidia_smi(ck, lines);
    let found = nvrtc::libraries(ck.search_root, driver).map_err(|e| e.message().to_string())?;
    lines.push("  NVRTC libraries on this machine:".into());
    if found.is_empty() {
        lines.push("    none found".into());
    }
    for (major, path) in &found {
        lines.push(format!("    NVRTC {major}: {}", path.display()));
    }
    let chosen = found.first().map(|(_, p)| p.clone());
    lines.push(format!(
        "  NVRTC gpu-check would choose: {}",
        chosen
            .as_ref()
            .map_or("none".into(), |p| p.display().to_string())
    ));
    let (nvrtc_search, emulated) = first_gpu_run(ck, chosen.as_deref(), lines)?;
    let local = ck.runner.run(
        "local-ranks-probe",
        &with_json(matrix::local_ranks_probe()),
        &[],
    );
    if !local.ok() {
        let why = format!(
            "this binary cannot run in-process ranks: {}",
            local.why(ck.runner.limit)
        );
        lines.push(format!("  NOTE: {why}"));
        return Ok(Found {
            nvrtc_search,
            emulated,
            local: Err(why),
        });
    }
    Ok(Found {
        nvrtc_search,
        emulated,
        local: Ok(()),
    })
}

/// Runs the helper tool `cmd` within its limit, its output kept in the
/// details as `NAME.txt` and `NAME.err`.
fn tool(ck: &Setup, cmd: Command, name: &str) -> super::child::Ran {
    run_limited(
        cmd,
        TOOL_LIMIT,
        &ck.runner.stop,
        &ck.work.join(format!("{name}.txt")),
        &ck.work.join(format!("{name}.err")),
    )
}

/// `ldd` of the binary: a library it needs and this machine lacks is a
/// setup error; a binary `ldd` cannot read (a script, a static binary)
/// is noted, and the runs decide.
fn libraries(ck: &Setup, bin: &Path, lines: &mut Vec<String>) -> Result<(), String> {
    let mut ldd = Command::new("ldd");
    ldd.arg(bin);
    let r = tool(ck, ldd, "ldd");
    let said = format!("{}{}", r.stdout, r.stderr);
    lines.extend(said.lines().map(|l| format!("  ldd: {}", l.trim())));
    if said.contains("not found") {
        return Err(
            "the binary needs libraries this machine lacks (see ldd above); build it with \
             --features cuda alone (no MPI) for a machine without MPI"
                .into(),
        );
    }
    if !r.ok() {
        lines.push(format!(
            "  note: ldd cannot list the binary's libraries ({}); the runs below decide",
            r.why(TOOL_LIMIT)
        ));
    }
    if said.contains("libmpi") {
        lines.push(
            "  note: the binary links MPI; the checks below run ranks in one process all the \
             same"
                .into(),
        );
    }
    Ok(())
}

/// The GPUs and the driver's CUDA version as `nvidia-smi` reports them;
/// the driver's major version if known.
fn nvidia_smi(ck: &Setup, lines: &mut Vec<String>) -> Option<u32> {
    let full = tool(ck, Command::new("nvidia-smi"), "nvidia-smi");
    let mut query = Command::new("nvidia-smi");
    query.args([
        "--query-gpu=name,pci.bus_id,driver_version,memory.total",
        "--format=csv,noheader",
    ]);
    let gpus = tool(ck, query, "nvidia-smi-gpus");
    if gpus.ok() && !gpus.stdout.trim().is_empty() {
        lines.extend(gpus.stdout.lines().map(|l| format!("  GPU: {}", l.trim())));
    } else {
        lines.push("  GPU: nvidia-smi not available".into());
    }
    let cuda = cuda_version(&full.stdout);
    lines.push(format!(
        "  driver's CUDA version: {}",
        cuda.as_deref().unwrap_or("unknown")
    ));
    cuda.and_then(|v| v.split('.').next()?.parse().ok())
}

/// The `CUDA Version: X.Y` of `nvidia-smi`'s table.
fn cuda_version(smi: &str) -> Option<String> {
    let rest = smi.split("CUDA Version:").nth(1)?.trim_start();
    let v: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (!v.is_empty()).then_some(v)
}

/// The binary's own NVRTC search (without `HIMENO_NVRTC_LIB`, as users
/// run it) and a first GPU run; returns whether the binary found NVRTC
/// itself and whether its device is emulated. When its search fails, the
/// runs from here on get `HIMENO_NVRTC_LIB`: the caller's, else the one
/// found here. A run that fails before it looks for NVRTC (no driver or
/// device) is a setup error at once.
fn first_gpu_run(
    ck: &mut Setup,
    chosen: Option<&Path>,
    lines: &mut Vec<String>,
) -> Result<(bool, bool), String> {
    let args = with_json(matrix::probe());
    let mut probe = ck.runner.run("probe", &args, &[NVRTC_ENV]);
    let mut found_itself = false;
    if let Some(found) = nvrtc_loaded(&probe.stderr) {
        lines.push(format!(
            "  the binary's own NVRTC search found: NVRTC {found}"
        ));
        found_itself = true;
    } else if !probe.ok() && !probe.stderr.contains("NVRTC") {
        // It failed before looking for NVRTC (no driver, no device): no
        // NVRTC of ours can help.
        return Err(format!("no GPU run works: {}", probe.why(ck.runner.limit)));
    } else {
        lines.push(format!(
            "  the binary's own NVRTC search FAILED: {}",
            probe.why(ck.runner.limit)
        ));
        let given = crate::environment::get_os(NVRTC_ENV);
        if let Some(lib) = given.or_else(|| chosen.map(|p| p.as_os_str().to_owned())) {
            lines.push(format!(
                "  using {NVRTC_ENV}={} for the runs below",
                Path::new(&lib).display()
            ));
            // The loader path too, for an NVRTC whose built-in library
            // lies beside it but is opened by name.
            let mut path = Path::new(&lib)
                .parent()
                .map(|p| p.as_os_str().to_owned())
                .unwrap_or_default();
            if let Some(old) = crate::environment::get_os("LD_LIBRARY_PATH") {
                path.push(":");
                path.push(old);
            }
            ck.runner.set_env(NVRTC_ENV, lib);
            ck.runner.set_env("LD_LIBRARY_PATH", path);
            probe = ck.runner.run("probe-with-nvrtc", &args, &[]);
        }
    }
    if !probe.ok() {
        return Err(format!("no GPU run works: {}", probe.why(ck.runner.limit)));
    }
    let record: Record = serde_json::from_str(&probe.stdout)
        .map_err(|e| format!("the first GPU run printed no JSON record: {e}"))?;
    let emulated = matrix::emulated(&record);
    lines.push(format!(
        "  first GPU run: {}",
        record
            .per_rank
            .first()
            .map_or("-".to_string(), |r| r.placement.to_string())
    ));
    // As the record writes the list: one JSON array, `-` when it has none.
    let software = &record.provenance.gpu_software;
    lines.push(format!(
        "  GPU software in the record: {}",
        if software.is_empty() {
            "-".to_string()
        } else {
            serde_json::to_string(software).unwrap_or_else(|e| e.to_string())
        }
    ));
    if emulated {
        lines.push(
            "  the device is EMULATED: the check proves correctness only; its times are the \
             host's, not a GPU's"
                .into(),
        );
    }
    Ok((found_itself, emulated))
}

/// What the backend's `NVRTC X loaded from PATH` log line says, if any.
fn nvrtc_loaded(stderr: &str) -> Option<String> {
    stderr.lines().find_map(|l| {
        let rest = &l[l.find("NVRTC ")? + "NVRTC ".len()..];
        let (version, path) = rest.split_once(" loaded from ")?;
        Some(format!("{version} from {}", path.trim()))
    })
}

/// `args` with `--format json`.
fn with_json(mut args: Vec<String>) -> Vec<String> {
    args.extend(["--format".into(), "json".into()]);
    args
}

/// Whether `path` is a file someone may execute.
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_version_and_the_nvrtc_log_line_are_read() {
        let smi = "| NVIDIA-SMI 580.00    Driver Version: 580.00    CUDA Version: 13.0 |";
        assert_eq!(cuda_version(smi).as_deref(), Some("13.0"));
        assert_eq!(cuda_version("no table"), None);
        let log = "2026-01-01T00:00:00Z  INFO himeno::backend::gpu::nvrtc: NVRTC 13.0 loaded \
                   from /opt/x/libnvrtc.so.13\n";
        assert_eq!(
            nvrtc_loaded(log).as_deref(),
            Some("13.0 from /opt/x/libnvrtc.so.13")
        );
        assert_eq!(
            nvrtc_loaded("himeno: error: the NVRTC library cannot be loaded"),
            None
        );
    }
}
