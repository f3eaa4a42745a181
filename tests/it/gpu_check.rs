//! `himeno gpu-check` against a stub `himeno` and a stub `nvidia-smi` (no
//! GPU, no MPI): the check must find NVRTC in the layouts machines have
//! (the CUDA 12 and 13 wheels, `/usr/local/cuda-13.0`, under a fake root),
//! run every part of the matrix (1, 2 and 4 in-process ranks, pinned,
//! pageable, overlap, the occupancy variants, the timing runs), leave at
//! most 8 files, and say PASS only when every part ran and passed: PARTIAL
//! (exit 3) when in-process ranks are missing, the binary's own NVRTC
//! search fails or a run passes its time limit, FAIL (exit 1) when one GPU
//! result differs or is missing, a setup error (exit 2) without NVRTC or a
//! binary. An emulated device is said so in the header and the verdict.
//! The binary's quick check of itself passes where a GPU (or the emulated
//! device) is, and stops at the setup elsewhere. A stop signal kills the
//! run going and ends the check without a verdict (exit 2), its details
//! kept. A build without `cuda` refuses the command.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Whether this test binary's `himeno` was built with the `cuda` feature.
const CUDA: bool = cfg!(feature = "cuda");

/// The stub `himeno`: answers every command the check runs with a record
/// shaped like the real one. Its field fingerprint depends only on the
/// grid and iteration count (as the real one's must), except where the
/// command line contains `$STUB_BAD`; a command line containing
/// `$STUB_GARBLE` prints no JSON, one containing `$STUB_HANG` never ends,
/// one containing `$STUB_WRONG` fails its own verification (exit 1).
/// `$STUB_EMULATED` marks every rank emulated, `$STUB_NO_DRIVER` fails
/// every GPU run as a machine without a driver does. `$STUB_LOG` collects
/// the command lines. A command line containing `$STUB_TREE` starts a
/// grandchild that never ends (its pid appended to `$STUB_PIDS`) and
/// waits for it, as a wrapper script does.
const STUB_HIMENO: &str = r#"#!/usr/bin/env bash
set -euo pipefail
all=" $* "
echo "$*" >> "$STUB_LOG"
if [ "${1:-}" = --version ]; then echo "himeno 0.1.0 (stub)"; exit 0; fi
if [ -n "${STUB_TREE:-}" ] && [[ "$all" == *"$STUB_TREE"* ]]; then
    sleep 300 &
    echo $! >> "$STUB_PIDS"
    wait
fi
for v in STUB_HANG STUB_GARBLE STUB_WRONG; do
    pat=${!v:-}
    if [ -n "$pat" ] && [[ "$all" == *"$pat"* ]]; then
        [ "$v" = STUB_HANG ] && exec sleep 30
        if [ "$v" = STUB_WRONG ]; then
            echo "himeno: verification FAILED: p fingerprint differs" >&2; exit 1
        fi
        echo "not a record"; exit 0
    fi
done
grid=M iters=3 ranks=1 backend=cpu verbose=0 mode=run verified=null
if [[ "$all" == *" --verify "* ]]; then verified=true; fi
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
    if [ -n "${STUB_NO_DRIVER:-}" ]; then
        echo "himeno: error: no CUDA driver found (tried libcuda.so.1 (loader search): not found): run on a machine with an NVIDIA driver, or use --backend cpu" >&2
        exit 2
    fi
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
emu=""
if [ "$backend" = gpu ] && [ -n "${STUB_EMULATED:-}" ]; then emu=',"emulated":true'; fi
rank="{\"rank\":0,\"phases_s\":{\"compute\":0.5,\"pack\":0.01,\"transfer\":0.02,\"comm\":0.03,\"unpack\":0.01,\"allreduce\":0.001},\"placement\":\"gpu x1 threads, device GPU 0: Stub H200\"$emu}"
per_rank=$rank
for ((r = 1; r < ranks; r++)); do per_rank="$per_rank,$rank"; done
echo "{\"schema\":1,\"grid\":[5,5,5],\"procs\":[$ranks,1,1],\"ranks\":$ranks,\"wall_s\":1.0,\"iterations\":$iters,\"gosa\":0.00123,\"p_fingerprint\":\"$fp\",\"verified\":$verified,\"mflops\":1500000.0,\"gbytes_per_s\":2500.0,\"compute_share\":0.95,\"slowest_rank\":0,\"per_rank\":[$per_rank],\"provenance\":{\"version\":\"0.1.0\",\"git_commit\":\"stub\",\"features\":[],\"mpi_library\":null,\"hosts\":[\"h\"],\"devices\":[],\"command\":[],\"gpu_software\":[{\"cuda_driver\":\"13.0\",\"nvrtc\":\"13.0\",\"nvrtc_library\":\"stub\"}]}}"
"#;

/// The stub `nvidia-smi` of a CUDA 13 driver.
const STUB_SMI: &str = r#"#!/usr/bin/env bash
case "$*" in
    *--query-gpu*) echo "NVIDIA H200 (stub), 00000000:00:05.0, 580.00, 143771 MiB" ;;
    *) echo "| NVIDIA-SMI 580.00    Driver Version: 580.00    CUDA Version: 13.0 |" ;;
esac
"#;

/// A setting of stubs: the binary, `nvidia-smi`, a fake root and a results
/// folder.
struct Stubs {
    dir: PathBuf,
}

impl Stubs {
    /// A fresh setting named `name` whose fake root holds `files`.
    fn new(name: &str, files: &[&str]) -> Stubs {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("himeno-gpu-check-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["bin", "out", "root", "home", "tmp"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        for (file, text) in [("bin/himeno", STUB_HIMENO), ("bin/nvidia-smi", STUB_SMI)] {
            write_executable(&dir.join(file), text);
        }
        for f in files {
            let p = dir.join("root").join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        }
        Stubs { dir }
    }

    /// The fake root's path of `f`.
    fn root(&self, f: &str) -> PathBuf {
        self.dir.join("root").join(f)
    }

    /// Runs `himeno gpu-check` on the stub with `extra` options and `env`
    /// set (the search of NVRTC confined to the fake root).
    fn run(&self, extra: &[&str], env: &[(&str, String)]) -> Output {
        let out = self.dir.join("out");
        let mut with_out = vec!["--out", out.to_str().unwrap()];
        with_out.extend_from_slice(extra);
        run_with_limit(self.command(&with_out, env), Duration::from_secs(120))
    }

    /// The `himeno gpu-check` command of [`Stubs::run`], without a
    /// results folder unless `extra` names one.
    fn command(&self, extra: &[&str], env: &[(&str, String)]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("gpu-check")
            .arg("--himeno")
            .arg(self.dir.join("bin/himeno"))
            .arg("--search-root")
            .arg(self.dir.join("root"))
            .args(extra)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", self.dir.join("bin").display()),
            )
            .env("HOME", self.dir.join("home"))
            .env("TMPDIR", self.dir.join("tmp"))
            .env("VIRTUAL_ENV", self.root("venv"))
            .env("STUB_LOG", self.dir.join("calls.log"))
            .env("STUB_PIDS", self.dir.join("pids"));
        for k in [
            "HIMENO_NVRTC_LIB",
            "CUDA_HOME",
            "CUDA_PATH",
            "CUDA_ROOT",
            "CUDA_TOOLKIT_ROOT_DIR",
            "CONDA_PREFIX",
            "PYTHONPATH",
            "OUT",
            "HIMENO_GPU_CHECK_DIR",
        ] {
            c.env_remove(k);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    /// The pids `$STUB_TREE` runs left in `$STUB_PIDS`.
    fn grandchildren(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("pids"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
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

    /// The report file.
    fn report(&self) -> String {
        std::fs::read_to_string(self.dir.join("out/gpu-check.txt")).unwrap_or_default()
    }
}

impl Drop for Stubs {
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
/// (white space compared loosely: the report pads its columns), and that
/// the report file holds what stdout showed.
fn assert_says(s: &Stubs, o: &Output, code: i32, want: &[&str]) {
    let out = stdout(o);
    assert_eq!(o.status.code(), Some(code), "{out}\n{}", stderr(o));
    let flat = squeeze(&out);
    for w in want {
        assert!(flat.contains(&squeeze(w)), "no `{w}` in:\n{out}");
    }
    assert_eq!(s.report(), out);
    assert!(s.results().len() <= 8, "{:?}", s.results());
}

/// Whether the `gpu-check` tests can run here (a `cuda` build); says why
/// not otherwise.
fn cuda_or_skip(test: &str) -> bool {
    if !CUDA {
        eprintln!("SKIPPED {test}: this build has no `cuda` feature");
    }
    CUDA
}

#[test]
fn gpu_check_passes_only_when_every_part_ran() {
    if !cuda_or_skip("gpu_check_passes_only_when_every_part_ran") {
        return;
    }
    let s = Stubs::new("pass", &LAYOUTS);
    let toolkit = s.root(LAYOUTS[2]);
    let o = s.run(&[], &[("STUB_NVRTC_FOUND", toolkit.display().to_string())]);
    assert_says(
        &s,
        &o,
        0,
        &[
            &format!("NVRTC 13: {}", s.root(LAYOUTS[0]).display()),
            &format!("NVRTC 12: {}", s.root(LAYOUTS[1]).display()),
            &format!("NVRTC gpu-check would choose: {}", toolkit.display()),
            "the binary's own NVRTC search found: NVRTC 13.0",
            "driver's CUDA version: 13.0",
            "GPU: NVIDIA H200 (stub)",
            "XL (512x512x1024) on one rank, 200 iterations",
            "auto exact 200 1500.0 2500.0 59.5% 95.0%",
            "slab 4 padded 200 1500.0 2500.0 59.5% 95.0%",
            "2 2x1x1 pinned off 5.000 0.100 0.200 0.300 0.100 0.010 1500.0",
        ],
    );
    let out = stdout(&o);
    assert!(!out.contains("FAIL") && !out.contains("EMULATED"), "{out}");
    assert_eq!(
        s.results(),
        [
            "details.tar.gz",
            "gpu-check.txt",
            "results.jsonl",
            "transfer.json"
        ],
        "{out}"
    );
    assert!(
        out.ends_with("gpu-check: PASS (every part ran; every GPU result equals the CPU's)\n"),
        "{out}"
    );
    // Every part of the matrix ran, on in-process ranks, without mpirun.
    let calls = s.calls();
    for want in [
        "--local-ranks 2 --grid 64x64x128 --iterations 20 --warmup 2 --procs 1x1x2 --staging pinned",
        "--local-ranks 4 --grid 33x35x37 --iterations 20 --warmup 2 --procs 2x2x1 --staging pageable",
        "--local-ranks 4 --grid 33x35x37 --iterations 20 --warmup 2 --procs 1x2x2 --overlap",
        "--local-ranks 2 --grid 9x10x5 --iterations 20 --warmup 2 --procs 1x1x2 --overlap",
        "--gpu-occupancy 5",
        "bench transfer --max-bytes 1073741824",
        "--size XL --iterations 200 --warmup 5 --gpu-sweep classic --gpu-occupancy 4",
        "--size L --iterations 100 --warmup 5 --gpu-sweep classic --gpu-occupancy 5",
        "--backend gpu --size L --iterations 60 --warmup 0 --verify",
        "--backend gpu --size XL --iterations 3 --warmup 0 --verify",
        "--local-ranks 4 --procs 1x2x2 --size L --iterations 100 --warmup 5 --staging pageable --overlap",
    ] {
        assert!(calls.contains(want), "no run with `{want}`:\n{calls}");
    }
    assert!(!calls.contains("mpirun"));
    let jsonl = std::fs::read_to_string(s.dir.join("out/results.jsonl")).unwrap();
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
    let transfer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.dir.join("out/transfer.json")).unwrap())
            .unwrap();
    assert_eq!(transfer["peak_gbytes_per_s"]["d2d/device"], 4200.0);
    // The details archive holds every run's command line and logs.
    let tar = Command::new("tar")
        .arg("-tzf")
        .arg(s.dir.join("out/details.tar.gz"))
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&tar.stdout);
    for want in [
        "ldd.txt",
        "nvidia-smi.txt",
        "runs/probe.err",
        "runs/gpu-64x64x128-r1.cmd",
        "runs/gpu-64x64x128-r1.err",
        "runs/gpu-64x64x128-r1.out",
    ] {
        assert!(listing.contains(want), "no {want} in:\n{listing}");
    }
    // The scratch folder is gone.
    assert_eq!(std::fs::read_dir(s.dir.join("tmp")).unwrap().count(), 0);
}

#[test]
fn gpu_check_without_local_ranks_is_partial() {
    if !cuda_or_skip("gpu_check_without_local_ranks_is_partial") {
        return;
    }
    let s = Stubs::new("partial", &LAYOUTS);
    let o = s.run(
        &[],
        &[
            ("STUB_NVRTC_FOUND", s.root(LAYOUTS[0]).display().to_string()),
            ("STUB_NO_LOCAL_RANKS", "1".into()),
        ],
    );
    assert_says(
        &s,
        &o,
        3,
        &[
            "gpu-check: PARTIAL",
            "correctness_2_ranks     not run: this binary cannot run in-process ranks",
            "phase_split             not run: this binary cannot run in-process ranks",
            "correctness_1_rank      ok",
        ],
    );
}

#[test]
fn gpu_check_fails_on_one_wrong_fingerprint() {
    if !cuda_or_skip("gpu_check_fails_on_one_wrong_fingerprint") {
        return;
    }
    let s = Stubs::new("fail", &LAYOUTS);
    let o = s.run(
        &[],
        &[
            ("STUB_NVRTC_FOUND", s.root(LAYOUTS[0]).display().to_string()),
            ("STUB_BAD", "--local-ranks 4 --grid 33x35x37 --iterations 20 --warmup 2 --procs 1x2x2 --staging pageable".into()),
        ],
    );
    assert_says(
        &s,
        &o,
        1,
        &[
            "FAIL  gpu-33x35x37-r4-1x2x2-pageable fingerprint 0000000000000bad vs",
            "staging                fail",
            "correctness_1_rank     ok",
            "gpu-check: FAIL",
        ],
    );
}

#[test]
fn gpu_check_falls_back_to_the_nvrtc_it_finds_and_says_so() {
    if !cuda_or_skip("gpu_check_falls_back_to_the_nvrtc_it_finds_and_says_so") {
        return;
    }
    // Only the CUDA 12 wheel; the binary's own search fails.
    let s = Stubs::new("fallback", &LAYOUTS[1..2]);
    let wheel = s.root(LAYOUTS[1]);
    let o = s.run(&["--quick"], &[]);
    assert_says(
        &s,
        &o,
        3,
        &[
            "the binary's own NVRTC search FAILED: exit 2: himeno: error: the NVRTC library",
            &format!(
                "using HIMENO_NVRTC_LIB={} for the runs below",
                wheel.display()
            ),
            "nvrtc_search            fail",
            "correctness_4_ranks     ok",
            "gpu-check: PARTIAL",
        ],
    );
    // With no NVRTC at all, nothing runs: a setup error.
    let s = Stubs::new("none", &[]);
    let o = s.run(&[], &[]);
    assert_says(
        &s,
        &o,
        2,
        &[
            "NVRTC libraries on this machine: none found",
            "NVRTC gpu-check would choose: none",
            "gpu-check: SETUP ERROR: no GPU run works: exit 2: himeno: error: the NVRTC library",
        ],
    );
    assert!(!s.calls().contains("--grid 64x64x128"));
    // Without a driver no NVRTC helps: a setup error, no fallback run.
    let s = Stubs::new("nodriver", &LAYOUTS);
    let o = s.run(&[], &[("STUB_NO_DRIVER", "1".into())]);
    assert_says(
        &s,
        &o,
        2,
        &["gpu-check: SETUP ERROR: no GPU run works: exit 2: himeno: error: no CUDA driver found"],
    );
    assert!(!stdout(&o).contains("HIMENO_NVRTC_LIB="), "{}", stdout(&o));
    // Nor without a binary.
    let s = Stubs::new("nobinary", &[]);
    std::fs::remove_file(s.dir.join("bin/himeno")).unwrap();
    let o = s.run(&[], &[]);
    assert_says(&s, &o, 2, &["gpu-check: SETUP ERROR: no himeno binary at"]);
}

#[test]
fn gpu_check_quick_on_an_emulated_device_says_so_and_times_small_grids() {
    if !cuda_or_skip("gpu_check_quick_on_an_emulated_device_says_so") {
        return;
    }
    let s = Stubs::new("emulated", &LAYOUTS);
    let t = Instant::now();
    let o = s.run(
        &["--quick"],
        &[
            ("STUB_NVRTC_FOUND", s.root(LAYOUTS[0]).display().to_string()),
            ("STUB_EMULATED", "1".into()),
        ],
    );
    assert_says(
        &s,
        &o,
        0,
        &[
            "== himeno GPU check (EMULATED device: correctness only) (quick)",
            "== 2. timing (EMULATED device: host times, not GPU performance)",
            "bench transfer (peak GB/s): device copy 4200",
            "21x21x41 standing in for XL (--quick) on one rank, 3 iterations",
            "  classic   5         exact         3     1500.0",
            "  pipelined-slab 4         padded        3     1500.0",
            "fastest on this EMULATED device (host times: no recommendation for a GPU): \
             --gpu-sweep classic",
            "known_answers          ok",
            "xl_timing              ok",
            "l_timing               ok",
            "phase_split            ok",
            "sass                   skipped (the tool is not on this machine)",
            "gpu-check: PASS (emulated device: correctness only, times are not GPU performance; \
             every part ran, on --quick's small grids",
        ],
    );
    let calls = s.calls();
    assert!(
        calls.contains("bench transfer --max-bytes 1048576"),
        "{calls}"
    );
    assert!(calls.contains("--grid 13x11x9 --iterations 4"), "{calls}");
    for want in [
        "--grid 32x32x64 --iterations 3 --warmup 0 --verify",
        "--grid 21x21x41 --iterations 3 --warmup 1 --gpu-sweep classic --gpu-occupancy auto",
        "--procs 1x2x2 --grid 17x17x33 --iterations 3 --warmup 1 --staging pinned --overlap",
    ] {
        assert!(calls.contains(want), "no run with `{want}`:\n{calls}");
    }
    assert!(
        !calls.contains("--size XL") && !calls.contains("--size L"),
        "{calls}"
    );
    assert!(t.elapsed() < Duration::from_secs(60));
}

#[test]
fn gpu_check_never_passes_a_run_that_hangs_or_says_nothing() {
    if !cuda_or_skip("gpu_check_never_passes_a_run_that_hangs_or_says_nothing") {
        return;
    }
    let nvrtc = ("STUB_NVRTC_FOUND", String::from("/x/libnvrtc.so.13"));
    // A timing run that hangs is killed at its limit: PARTIAL, in seconds.
    let s = Stubs::new("hang", &[]);
    let t = Instant::now();
    let o = s.run(
        &["--quick", "--run-limit", "1"],
        &[nvrtc.clone(), ("STUB_HANG", "bench transfer".into())],
    );
    assert_says(
        &s,
        &o,
        3,
        &[
            "FAILED transfer no result after 1 s",
            "transfer                fail",
            "gpu-check: PARTIAL",
        ],
    );
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    // A GPU run that exits 0 without a record is a failed correctness check.
    let s = Stubs::new("garble", &[]);
    let o = s.run(
        &["--quick"],
        &[
            nvrtc.clone(),
            (
                "STUB_GARBLE",
                "--grid 13x11x9 --iterations 4 --warmup 2 --gpu-occupancy 4".into(),
            ),
        ],
    );
    assert_says(
        &s,
        &o,
        1,
        &[
            "FAILED gpu-13x11x9-r1-occ4 exit 0, but no JSON record on stdout",
            "occupancy              fail",
            "gpu-check: FAIL",
        ],
    );
    // A timing run whose own verification fails is a wrong answer, not a
    // part that could not run.
    let s = Stubs::new("wrong", &[]);
    let o = s.run(
        &[],
        &[
            nvrtc,
            (
                "STUB_WRONG",
                "--size XL --iterations 200 --warmup 5 --gpu-sweep classic --gpu-occupancy 5"
                    .into(),
            ),
        ],
    );
    assert_says(
        &s,
        &o,
        1,
        &[
            "FAILED time-XL-classic-occ5 exit 1: himeno: verification FAILED",
            "occupancy              fail",
            "xl_timing              fail",
            "gpu-check: FAIL",
        ],
    );
}

#[test]
fn gpu_check_quick_of_this_binary_passes_where_a_gpu_is_and_is_a_setup_error_elsewhere() {
    if !cuda_or_skip("gpu_check_quick_of_this_binary") {
        return;
    }
    // The real binary checks itself: on a GPU (or the emulated device) the
    // quick check must pass; without one, it must stop at the setup with
    // one of the "no GPU here" errors.
    let s = Stubs::new("self", &[]);
    let mut c = Command::new(BIN);
    c.args(["gpu-check", "--quick", "--out"])
        .arg(s.dir.join("out"))
        .env("TMPDIR", s.dir.join("tmp"))
        .env_remove("OUT");
    let o = run_with_limit(c, Duration::from_secs(600));
    let out = stdout(&o);
    match o.status.code() {
        Some(0) => assert!(out.contains("gpu-check: PASS"), "{out}"),
        Some(2) if NO_GPU_HERE.iter().any(|w| out.contains(w)) => {
            assert!(
                out.contains("gpu-check: SETUP ERROR: no GPU run works"),
                "{out}"
            );
            eprintln!("SKIPPED the quick check of this binary on a GPU: there is none here");
        }
        code => panic!("gpu-check --quick exited {code:?}:\n{out}\n{}", stderr(&o)),
    }
}

#[test]
fn gpu_check_stopped_by_a_signal_kills_its_run_and_keeps_the_details() {
    if !cuda_or_skip("gpu_check_stopped_by_a_signal_kills_its_run_and_keeps_the_details") {
        return;
    }
    let s = Stubs::new("signal", &[]);
    let hang = "--grid 33x35x37 --iterations 20 --warmup 2 --backend cpu";
    let mut c = Command::new(BIN);
    c.args(["gpu-check", "--himeno"])
        .arg(s.dir.join("bin/himeno"))
        .arg("--out")
        .arg(s.dir.join("out"))
        .args(["--search-root", "/nonexistent"])
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", s.dir.join("bin").display()),
        )
        .env("TMPDIR", s.dir.join("tmp"))
        .env("STUB_LOG", s.dir.join("calls.log"))
        .env("STUB_NVRTC_FOUND", "/x/libnvrtc.so.13")
        .env("STUB_HANG", hang)
        .env_remove("OUT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let t = Instant::now();
    let child = c.spawn().unwrap();
    let _guard = KillOnPanic(child.id());
    // Once the hanging run has started, stop the check.
    while !s.calls().contains(hang) {
        assert!(t.elapsed() < Duration::from_secs(60), "{}", s.calls());
        std::thread::sleep(Duration::from_millis(20));
    }
    crate::common::signals::kill("TERM", child.id());
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(t.elapsed() < Duration::from_secs(25), "{:?}", t.elapsed());
    assert!(out.contains("FAILED cpu-33x35x37"), "{out}");
    assert!(out.ends_with("gpu-check: STOPPED by a signal before the end: no verdict (the report and the details hold the runs that ended)\n"), "{out}");
    assert!(!out.contains("== 2. timing"), "{out}");
    assert_eq!(
        s.results(),
        ["details.tar.gz", "gpu-check.txt", "results.jsonl"]
    );
    assert!(
        !s.calls().contains("--grid 9x10x5"),
        "no run starts after the stop"
    );
}

#[test]
fn gpu_check_in_a_build_without_cuda_says_how_to_get_one() {
    if CUDA {
        eprintln!("SKIPPED the no-cuda refusal of gpu-check: this build has `cuda`");
        return;
    }
    let s = Stubs::new("nocuda", &[]);
    let o = s.run(&[], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("rebuild with `cargo build --release --features cuda`"));
    assert!(stdout(&o).is_empty());
    assert!(s.results().is_empty(), "{:?}", s.results());
    assert!(s.calls().is_empty());
}

/// Whether process `pid` is still alive 5 s from now (a zombie is not).
fn survives(pid: &str) -> bool {
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|st| st.rsplit(") ").next().is_some_and(|r| !r.starts_with('Z')))
    };
    let t = Instant::now();
    while alive() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = alive();
    if left {
        // Not left behind for the rest of the suite.
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    left
}

/// `inner` (the himeno binary, its arguments and environment) run by
/// `sh -c script`, where `"$0" "$@"` is the himeno command line.
fn in_shell(script: &str, inner: &Command) -> Command {
    let mut c = Command::new("sh");
    c.args(["-c", script, BIN]).args(inner.get_args());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c
}

/// The `himeno:` lines of standard error.
fn told(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| l.starts_with("himeno:"))
        .map(String::from)
        .collect()
}

/// Every file under `dir` with its contents (links as `-> target`).
fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_symlink() {
            let to = std::fs::read_link(&p).unwrap();
            all.push((p, format!("-> {}", to.display())));
        } else if m.is_dir() {
            all.push((p.clone(), "dir".into()));
            all.extend(snapshot(&p));
        } else {
            all.push((p.clone(), std::fs::read_to_string(&p).unwrap_or_default()));
        }
    }
    all.sort();
    all
}

#[test]
fn gpu_check_never_replaces_or_removes_what_a_results_folder_holds() {
    if !cuda_or_skip("gpu_check_never_replaces_or_removes_what_a_results_folder_holds") {
        return;
    }
    let s = Stubs::new("kept", &LAYOUTS);
    let nvrtc = ("STUB_NVRTC_FOUND", s.root(LAYOUTS[0]).display().to_string());
    let out = s.dir.join("out");
    std::fs::write(out.join("results.jsonl"), "{\"earlier\":1}\n").unwrap();
    std::fs::create_dir(out.join("details")).unwrap();
    std::fs::write(out.join("details/notes.txt"), "mine").unwrap();
    let before = snapshot(&out);
    // Named by the option, by HIMENO_GPU_CHECK_DIR, and a folder with only
    // a hidden file: each refused before any run, nothing touched.
    std::fs::create_dir(s.dir.join("hidden")).unwrap();
    std::fs::write(s.dir.join("hidden/.keep"), "k").unwrap();
    let by_env = ("HIMENO_GPU_CHECK_DIR", out.display().to_string());
    let hidden = s.dir.join("hidden");
    for (extra, env) in [
        (vec!["--quick"], vec![nvrtc.clone(), by_env.clone()]),
        (
            vec!["--quick", "--out", out.to_str().unwrap()],
            vec![nvrtc.clone()],
        ),
        (
            vec!["--quick", "--out", hidden.to_str().unwrap()],
            vec![nvrtc.clone()],
        ),
    ] {
        let o = run_with_limit(s.command(&extra, &env), Duration::from_secs(60));
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let lines = told(&o);
        assert_eq!(lines.len(), 1, "{}", stderr(&o));
        assert!(lines[0].contains("not empty"), "{}", lines[0]);
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    }
    assert_eq!(snapshot(&out), before);
    assert!(s.calls().is_empty(), "no run starts: {}", s.calls());
    // The generic OUT is not ours: a check with it set leaves its folder
    // alone and writes a fresh folder of its own.
    let o = run_with_limit(
        s.command(&["--quick"], &[nvrtc, ("OUT", out.display().to_string())]),
        Duration::from_secs(120),
    );
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    assert_eq!(snapshot(&out), before);
    // A folder with no parent is not made, nor is its parent.
    let o = s.run_in(&s.dir.join("no/such"));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(told(&o).len(), 1, "{}", stderr(&o));
    assert!(!s.dir.join("no").exists());
}

impl Stubs {
    /// Runs a quick check into `out`.
    fn run_in(&self, out: &Path) -> Output {
        let nvrtc = (
            "STUB_NVRTC_FOUND",
            self.root(LAYOUTS[0]).display().to_string(),
        );
        run_with_limit(
            self.command(&["--quick", "--out", out.to_str().unwrap()], &[nvrtc]),
            Duration::from_secs(120),
        )
    }
}

#[test]
fn gpu_check_by_default_writes_a_fresh_private_folder_and_never_follows_a_planted_one() {
    if !cuda_or_skip("gpu_check_by_default_writes_a_fresh_private_folder") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let s = Stubs::new("private", &LAYOUTS);
    let nvrtc = ("STUB_NVRTC_FOUND", s.root(LAYOUTS[0]).display().to_string());
    let tmp = s.dir.join("tmp");
    // What someone else left at the old fixed name: a folder of links to
    // a file that must stay as it is.
    let victim = s.dir.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let planted = tmp.join("himeno-gpu-check");
    std::fs::create_dir(&planted).unwrap();
    for f in [
        "gpu-check.txt",
        "results.jsonl",
        "transfer.json",
        "details.tar.gz",
    ] {
        std::os::unix::fs::symlink(&victim, planted.join(f)).unwrap();
    }
    let before = snapshot(&planted);
    let mut folders = Vec::new();
    for _ in 0..2 {
        let o = run_with_limit(
            s.command(&["--quick"], std::slice::from_ref(&nvrtc)),
            Duration::from_secs(120),
        );
        assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
        let out = stdout(&o);
        let last = out
            .lines()
            .rev()
            .find(|l| l.starts_with("results: "))
            .unwrap();
        let folder = PathBuf::from(last["results: ".len()..].split(" (").next().unwrap());
        assert!(
            out.lines()
                .next()
                .unwrap()
                .contains(&folder.display().to_string())
        );
        assert_eq!(folder.parent(), Some(tmp.as_path()), "{last}");
        let name = folder.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("himeno-gpu-check."), "{name}");
        let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", folder.display());
        let report = std::fs::read_to_string(folder.join("gpu-check.txt")).unwrap();
        assert_eq!(report, out);
        folders.push(folder);
    }
    assert_ne!(folders[0], folders[1], "a fresh folder per check");
    assert_eq!(snapshot(&planted), before);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // A TMPDIR that does not exist is not created: one line, exit 2.
    let missing = s.dir.join("nonexistent");
    let o = run_with_limit(
        s.command(
            &["--quick"],
            &[nvrtc, ("TMPDIR", missing.display().to_string())],
        ),
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let lines = told(&o);
    assert_eq!(lines.len(), 1, "{}", stderr(&o));
    assert!(lines[0].contains("TMPDIR"), "{}", lines[0]);
    assert!(!missing.exists());
}

#[test]
fn gpu_check_whose_report_cannot_be_written_ends_with_exit_2_and_one_line() {
    if !cuda_or_skip("gpu_check_whose_report_cannot_be_written_ends_with_exit_2") {
        return;
    }
    let s = Stubs::new("full", &LAYOUTS);
    let nvrtc = ("STUB_NVRTC_FOUND", s.root(LAYOUTS[0]).display().to_string());
    // A full standard output.
    let inner = s.command(
        &["--quick", "--out", s.dir.join("out").to_str().unwrap()],
        std::slice::from_ref(&nvrtc),
    );
    let o = run_with_limit(
        in_shell("exec \"$0\" \"$@\" >/dev/full", &inner),
        Duration::from_secs(120),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let lines = told(&o);
    assert_eq!(lines.len(), 1, "{}", stderr(&o));
    assert!(
        lines[0].contains("cannot write the report to standard output"),
        "{}",
        lines[0]
    );
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert!(
        !s.calls().contains("--grid 9x10x5"),
        "the check stops at the failed write: {}",
        s.calls()
    );
    // Its own files on a disk that takes no more (a file size limit of
    // 4 KiB, the signal it sends ignored so that writes fail instead).
    let out2 = s.dir.join("out2");
    let inner = s.command(&["--quick", "--out", out2.to_str().unwrap()], &[nvrtc]);
    let c = in_shell("trap '' XFSZ; ulimit -f 8; exec \"$0\" \"$@\"", &inner);
    let o = run_with_limit(c, Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(2), "{}\n{}", stdout(&o), stderr(&o));
    let lines = told(&o);
    assert_eq!(lines.len(), 1, "{}", stderr(&o));
    assert!(lines[0].contains("cannot write"), "{}", lines[0]);
    assert!(!stdout(&o).contains("gpu-check: PASS"), "{}", stdout(&o));
}

#[test]
fn gpu_check_at_its_run_limit_ends_the_whole_process_group() {
    if !cuda_or_skip("gpu_check_at_its_run_limit_ends_the_whole_process_group") {
        return;
    }
    let s = Stubs::new("group", &[]);
    let t = Instant::now();
    let o = s.run(
        &["--quick", "--run-limit", "1"],
        &[
            ("STUB_NVRTC_FOUND", "/x/libnvrtc.so.13".into()),
            ("STUB_TREE", "bench transfer".into()),
        ],
    );
    assert_says(
        &s,
        &o,
        3,
        &["FAILED transfer no result after 1 s", "gpu-check: PARTIAL"],
    );
    assert!(t.elapsed() < Duration::from_secs(40), "{:?}", t.elapsed());
    let left = s.grandchildren();
    assert_eq!(left.len(), 1, "{left:?}");
    for pid in left {
        assert!(
            !survives(&pid),
            "the wrapper's child {pid} outlived the run limit"
        );
    }
}

#[test]
fn gpu_check_stopped_by_sighup_ends_its_run_group_and_reports() {
    if !cuda_or_skip("gpu_check_stopped_by_sighup_ends_its_run_group_and_reports") {
        return;
    }
    let s = Stubs::new("hup", &[]);
    let hang = "--grid 33x35x37 --iterations 20 --warmup 2 --backend cpu";
    let mut c = s.command(
        &["--out", s.dir.join("out").to_str().unwrap()],
        &[
            ("STUB_NVRTC_FOUND", "/x/libnvrtc.so.13".into()),
            ("STUB_TREE", hang.into()),
        ],
    );
    c.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let t = Instant::now();
    let child = c.spawn().unwrap();
    let _guard = KillOnPanic(child.id());
    while s.grandchildren().is_empty() {
        assert!(t.elapsed() < Duration::from_secs(60), "{}", s.calls());
        std::thread::sleep(Duration::from_millis(20));
    }
    crate::common::signals::kill("HUP", child.id());
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{}", stderr(&o));
    assert!(out.contains("FAILED cpu-33x35x37"), "{out}");
    assert!(out.contains("gpu-check: STOPPED by a signal"), "{out}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    for pid in s.grandchildren() {
        assert!(!survives(&pid), "the run's child {pid} outlived the stop");
    }
    assert_eq!(
        s.results(),
        ["details.tar.gz", "gpu-check.txt", "results.jsonl"]
    );
}

#[test]
fn gpu_check_fail_says_what_happened_when_no_result_came_back() {
    if !cuda_or_skip("gpu_check_fail_says_what_happened_when_no_result_came_back") {
        return;
    }
    let nvrtc = ("STUB_NVRTC_FOUND", String::from("/x/libnvrtc.so.13"));
    let occ4 = "--grid 13x11x9 --iterations 4 --warmup 2 --gpu-occupancy 4";
    for (var, said) in [
        ("STUB_HANG", "no result from 1 run: 1 timed out"),
        ("STUB_GARBLE", "no result from 1 run: 1 printed no record"),
        (
            "STUB_WRONG",
            "no result from 1 run: 1 failed its own verification",
        ),
    ] {
        let s = Stubs::new(&format!("nores-{var}"), &[]);
        let o = s.run(
            &["--quick", "--run-limit", "2"],
            &[nvrtc.clone(), (var, occ4.into())],
        );
        assert_says(&s, &o, 1, &["occupancy              fail", said]);
        let verdict = stdout(&o).lines().last().unwrap_or_default().to_string();
        assert!(verdict.starts_with("gpu-check: FAIL ("), "{verdict}");
        assert!(!verdict.contains("differs"), "{verdict}");
    }
}

#[test]
fn gpu_check_stops_at_its_budget_and_says_which_steps_it_skipped() {
    if !cuda_or_skip("gpu_check_stops_at_its_budget_and_says_which_steps_it_skipped") {
        return;
    }
    let nvrtc = ("STUB_NVRTC_FOUND", String::from("/x/libnvrtc.so.13"));
    // The transfer benchmark hangs: the budget, not its run limit, ends it.
    let s = Stubs::new("budget", &[]);
    let t = Instant::now();
    let o = s.run(
        &["--quick", "--budget", "6", "--run-limit", "100"],
        &[nvrtc, ("STUB_HANG", "bench transfer".into())],
    );
    assert_says(
        &s,
        &o,
        3,
        &[
            "budget 6 s",
            "budget transfer",
            "stopped: the check's --budget is spent",
            "2. timing: skipped from here, the --budget of 6 s is spent",
            "3. tools: skipped from here, the --budget of 6 s is spent",
            "correctness_1_rank     ok",
            "xl_timing              skipped (the --budget was spent)",
            "ncu                    skipped (the --budget was spent)",
            "gpu-check: PARTIAL (every check that ran passed, but the --budget of 6 s was spent \
             before: 2. timing, 3. tools)",
        ],
    );
    let out = stdout(&o);
    assert!(!out.contains("FAILED"), "{out}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    // A budget out of range is refused like the other options.
    let o = s.run(&["--budget", "0"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--budget 0 must be from 1 to"),
        "{}",
        stderr(&o)
    );
}
