//! `scripts/gpu-check.sh --dry-run` with a stub `himeno` and a stub
//! `nvidia-smi` (no GPU, no MPI): the script must find NVRTC in the layouts
//! machines have (the CUDA 12 and 13 wheels, `/usr/local/cuda-13.0`, under
//! a fake root), run every part of the matrix (1, 2 and 4 in-process ranks,
//! pinned, pageable, overlap, the occupancy variants, the timing runs),
//! leave at most 8 files, and say PASS only when every part ran and passed:
//! PARTIAL (exit 3) when in-process ranks are missing or the binary's own
//! NVRTC search fails, FAIL (exit 1) when one GPU result differs, a setup
//! error (exit 2) without NVRTC.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The stub `himeno`: answers every command the script runs with a record
/// shaped like the real one. Its field fingerprint depends only on the
/// grid and iteration count (as the real one's must), except where the
/// command line contains `$STUB_BAD`. `$STUB_LOG` collects the command
/// lines.
const STUB_HIMENO: &str = r#"#!/usr/bin/env bash
set -euo pipefail
all=" $* "
echo "$*" >> "$STUB_LOG"
if [ "${1:-}" = --version ]; then echo "himeno 0.1.0 (stub)"; exit 0; fi
grid=M iters=3 ranks=1 backend=cpu verbose=0 mode=run
while [ $# -gt 0 ]; do
    case "$1" in
        --grid|--size) grid=$2; shift ;;
        --iterations) iters=$2; shift ;;
        --local-ranks)
            if [ -n "${STUB_NO_LOCAL_RANKS:-}" ]; then
                echo "himeno: error: unexpected argument '--local-ranks' found" >&2
                exit 2
            fi
            ranks=$2; shift ;;
        --backend) backend=$2; shift ;;
        -v) verbose=1 ;;
        bench) mode=bench ;;
    esac
    shift
done
if [ "$backend" = gpu ] || [ "$mode" = bench ]; then
    lib=${HIMENO_NVRTC_LIB:-${STUB_NVRTC_FOUND:-}}
    if [ -z "$lib" ]; then
        echo "himeno: error: the NVRTC library cannot be loaded; tried libnvrtc.so.13 (loader search): No such file or directory" >&2
        exit 2
    fi
    if [ "$verbose" = 1 ]; then
        echo "2026-01-01T00:00:00Z  INFO himeno::backend::gpu::nvrtc: NVRTC 13.0 loaded from $lib" >&2
    fi
fi
if [ "$mode" = bench ]; then
    echo '{"host":"h","device":"GPU 0: Stub","samples":[],"latency_us":{"h2d/pinned":9.5},"peak_gbytes_per_s":{"d2d/device":4200.0,"h2d/pinned":52.0,"h2d/pageable":21.0,"d2h/pinned":51.0,"d2h/pageable":14.0}}'
    exit 0
fi
fp=$(printf '%s %s' "$grid" "$iters" | cksum | awk '{printf "%016x", $1}')
case "${STUB_BAD:-}" in
    "") ;;
    *) case "$all" in *"$STUB_BAD"*) fp=0000000000000bad ;; esac ;;
esac
rank='{"rank":0,"phases_s":{"compute":0.5,"pack":0.01,"transfer":0.02,"comm":0.03,"unpack":0.01,"allreduce":0.001},"placement":"gpu x1 threads, device GPU 0: Stub H200"}'
per_rank=$rank
for ((r = 1; r < ranks; r++)); do per_rank="$per_rank,$rank"; done
echo "{\"schema\":1,\"iterations\":$iters,\"gosa\":0.00123,\"p_fingerprint\":\"$fp\",\"verified\":null,\"mflops\":1500000.0,\"gbytes_per_s\":2500.0,\"compute_share\":0.95,\"slowest_rank\":0,\"per_rank\":[$per_rank],\"provenance\":{\"gpu_software\":[{\"cuda_driver\":\"13.0\",\"nvrtc\":\"13.0\",\"nvrtc_library\":\"stub\"}]}}"
"#;

/// The stub `nvidia-smi` of a CUDA 13 driver.
const STUB_SMI: &str = r#"#!/usr/bin/env bash
case "$*" in
    *--query-gpu*) echo "NVIDIA H200 (stub), 00000000:00:05.0, 580.00, 143771 MiB" ;;
    *) echo "| NVIDIA-SMI 580.00    Driver Version: 580.00    CUDA Version: 13.0 |" ;;
esac
"#;

/// A dry-run setting: the stubs, a fake root and a results folder.
struct DryRun {
    dir: PathBuf,
}

impl DryRun {
    /// A fresh setting named `name` whose fake root holds `files`.
    fn new(name: &str, files: &[&str]) -> DryRun {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("himeno-gpu-check-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["bin", "out", "root"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        for (file, text) in [("bin/himeno", STUB_HIMENO), ("bin/nvidia-smi", STUB_SMI)] {
            let p = dir.join(file);
            std::fs::write(&p, text).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        for f in files {
            let p = dir.join("root").join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        }
        DryRun { dir }
    }

    /// The fake root's path of `f`.
    fn root(&self, f: &str) -> PathBuf {
        self.dir.join("root").join(f)
    }

    /// Runs the script with `env` set.
    fn run(&self, env: &[(&str, String)]) -> Output {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-check.sh");
        let mut c = Command::new("bash");
        c.arg(script)
            .arg("--dry-run")
            .arg(self.dir.join("bin/himeno"))
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", self.dir.join("bin").display()),
            )
            .env("OUT", self.dir.join("out"))
            .env("GPU_CHECK_ROOT", self.dir.join("root"))
            .env("VIRTUAL_ENV", self.root("venv"))
            .env("STUB_LOG", self.dir.join("calls.log"))
            .env_remove("HIMENO_NVRTC_LIB")
            .env_remove("CUDA_HOME")
            .env_remove("CONDA_PREFIX");
        for (k, v) in env {
            c.env(k, v);
        }
        run_with_limit(c, Duration::from_secs(300))
    }

    /// The command lines the stub saw.
    fn calls(&self) -> String {
        std::fs::read_to_string(self.dir.join("calls.log")).unwrap_or_default()
    }

    /// The files left in the results folder (asserting there are no
    /// folders).
    fn results(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir.join("out"))
            .unwrap()
            .flatten()
            .map(|e| {
                assert!(e.path().is_file(), "{} is not a file", e.path().display());
                e.file_name().to_string_lossy().into_owned()
            })
            .collect();
        names.sort();
        names
    }
}

impl Drop for DryRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every NVRTC layout: the CUDA 13 and 12 wheels in a virtual environment
/// and a CUDA 13.0 toolkit.
const LAYOUTS: [&str; 3] = [
    "venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
    "venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
    "usr/local/cuda-13.0/lib64/libnvrtc.so.13",
];

/// `s` with every run of white space as one space.
fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Asserts exit code `code` and that stdout contains every one of `want`
/// (white space compared loosely: the report pads its columns).
fn assert_says(o: &Output, code: i32, want: &[&str]) {
    let out = stdout(o);
    assert_eq!(o.status.code(), Some(code), "{out}\n{}", stderr(o));
    let flat = squeeze(&out);
    for w in want {
        assert!(flat.contains(&squeeze(w)), "no `{w}` in:\n{out}");
    }
}

#[test]
fn gpu_emu_check_passes_only_when_every_part_ran() {
    let d = DryRun::new("pass", &LAYOUTS);
    let toolkit = d.root(LAYOUTS[2]);
    let o = d.run(&[("STUB_NVRTC_FOUND", toolkit.display().to_string())]);
    assert_says(
        &o,
        0,
        &[
            "gpu-check: PASS",
            &format!("NVRTC 13: {}", d.root(LAYOUTS[0]).display()),
            &format!("NVRTC 12: {}", d.root(LAYOUTS[1]).display()),
            &format!("NVRTC this script would choose: {}", toolkit.display()),
            "the binary's own NVRTC search found: NVRTC 13.0",
            "driver's CUDA version: 13.0",
        ],
    );
    let out = stdout(&o);
    assert!(!out.contains("FAIL"), "{out}");
    // At most 8 files come back from a device call, none in folders.
    let files = d.results();
    assert_eq!(
        files,
        [
            "details.tar.gz",
            "gpu-check.txt",
            "results.jsonl",
            "transfer.json"
        ],
        "{out}"
    );
    let report = std::fs::read_to_string(d.dir.join("out/gpu-check.txt")).unwrap();
    assert!(
        report.ends_with("gpu-check: PASS (every part ran; every GPU result equals the CPU's)\n")
    );
    // Every part of the matrix ran, on in-process ranks, without mpirun.
    let calls = d.calls();
    for want in [
        "--local-ranks 2 --grid 64x64x128 --iterations 20 --warmup 2 --procs 1x1x2 --staging pinned",
        "--local-ranks 4 --grid 33x35x37 --iterations 20 --warmup 2 --procs 2x2x1 --staging pageable",
        "--local-ranks 4 --grid 33x35x37 --iterations 20 --warmup 2 --procs 1x2x2 --overlap",
        "--local-ranks 2 --grid 9x10x5 --iterations 20 --warmup 2 --procs 1x1x2 --overlap",
        "--gpu-occupancy 5",
        "bench transfer --max-bytes 1073741824",
        "--size XL --iterations 200 --warmup 5 --gpu-occupancy 4",
        "--local-ranks 4 --procs 1x2x2 --size L --iterations 100 --warmup 5 --staging pageable --overlap",
    ] {
        assert!(calls.contains(want), "no run with `{want}`:\n{calls}");
    }
    assert!(!calls.contains("mpirun"));
    let jsonl = std::fs::read_to_string(d.dir.join("out/results.jsonl")).unwrap();
    let labels: Vec<String> = jsonl
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            v["check"].as_str().expect("a check label").to_string()
        })
        .collect();
    assert!(labels.len() > 40, "{labels:?}");
    assert!(
        labels.contains(&"gpu-33x35x37-r4-1x2x2-pageable".to_string()),
        "{labels:?}"
    );
    // The details archive holds every run's command line and logs.
    let tar = Command::new("tar")
        .arg("-tzf")
        .arg(d.dir.join("out/details.tar.gz"))
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&tar.stdout);
    for want in [
        "ldd.txt",
        "runs/gpu-64x64x128-r1.cmd",
        "runs/gpu-64x64x128-r1.err",
    ] {
        assert!(listing.contains(want), "no {want} in:\n{listing}");
    }
}

#[test]
fn gpu_emu_check_without_local_ranks_is_partial() {
    let d = DryRun::new("partial", &LAYOUTS);
    let o = d.run(&[
        ("STUB_NVRTC_FOUND", d.root(LAYOUTS[0]).display().to_string()),
        ("STUB_NO_LOCAL_RANKS", "1".into()),
    ]);
    assert_says(
        &o,
        3,
        &[
            "gpu-check: PARTIAL",
            "correctness_2_ranks     not run: this binary cannot run in-process ranks",
            "phase_split             not run",
            "correctness_1_rank      ok",
        ],
    );
    assert!(d.results().len() <= 8);
}

#[test]
fn gpu_emu_check_fails_on_one_wrong_fingerprint() {
    let d = DryRun::new("fail", &LAYOUTS);
    let o = d.run(&[
        ("STUB_NVRTC_FOUND", d.root(LAYOUTS[0]).display().to_string()),
        ("STUB_BAD", "--local-ranks 4 --grid 33x35x37 --iterations 20 --warmup 2 --procs 1x2x2 --staging pageable".into()),
    ]);
    assert_says(
        &o,
        1,
        &[
            "FAIL  gpu-33x35x37-r4-1x2x2-pageable",
            "staging                fail",
            "gpu-check: FAIL",
        ],
    );
}

#[test]
fn gpu_emu_check_falls_back_to_the_nvrtc_it_finds_and_says_so() {
    // Only the CUDA 12 wheel; the binary's own search fails.
    let d = DryRun::new("fallback", &LAYOUTS[1..2]);
    let wheel = d.root(LAYOUTS[1]);
    let o = d.run(&[]);
    assert_says(
        &o,
        3,
        &[
            "the binary's own NVRTC search FAILED",
            &format!(
                "using HIMENO_NVRTC_LIB={} for the runs below",
                wheel.display()
            ),
            "nvrtc_search            fail",
            "gpu-check: PARTIAL",
        ],
    );
    // With no NVRTC at all, nothing runs: a setup error.
    let d = DryRun::new("none", &[]);
    let o = d.run(&[]);
    assert_says(
        &o,
        2,
        &[
            "NVRTC this script would choose: none",
            "gpu-check: SETUP ERROR: no GPU run works",
        ],
    );
    assert!(d.results().len() <= 8);
}
