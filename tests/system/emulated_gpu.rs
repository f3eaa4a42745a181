//! The GPU path executed end to end without a GPU, against the emulated CUDA
//! driver (`scripts/cuda-emu.sh`: a stand-in `libcuda.so.1` that runs the
//! real `kernels.cu` on the host, runs stream work late and in a seeded
//! order, and poisons what a missing synchronisation would expose). The
//! unchanged `cuda` binary runs `--backend gpu` under it: every run must be
//! VALID with the CPU's field fingerprint, on one rank and many, in-process
//! and under `mpirun`, pinned and pageable, with and without `--overlap`,
//! for five seeds (even seeds with two worker threads per device, odd ones
//! with work run only when the host synchronises). The emulator's times
//! are the host's; these tests never look at them as performance.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The interleavings every matrix runs under.
const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

/// Relative gosa tolerance of a GPU run against the CPU (the order of the
/// double-precision sum differs; the field is bitwise equal).
pub(crate) const GOSA_TOLERANCE: f64 = 1e-9;

/// What a test needs to run against the emulator.
pub(crate) struct Emulator {
    /// The folder holding the stand-in `libcuda.so.1`.
    lib: PathBuf,
    /// The NVRTC 13 library the runs compile with.
    pub(crate) nvrtc: PathBuf,
}

/// Builds the emulated driver once per test run (`scripts/cuda-emu.sh
/// build` into this test binary's folder).
fn build() -> Result<PathBuf, String> {
    static LIB: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuda-emu");
        let o = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/cuda-emu.sh"))
            .arg("build")
            .env("HIMENO_EMU_DIR", &dir)
            .output()
            .map_err(|e| format!("scripts/cuda-emu.sh: {e}"))?;
        if o.status.success() {
            Ok(dir)
        } else {
            Err(format!(
                "scripts/cuda-emu.sh build failed:\n{}",
                String::from_utf8_lossy(&o.stderr)
            ))
        }
    })
    .clone()
}

/// The emulator, or `None` after saying why `test` skips: a build without
/// the `cuda` feature, or no NVRTC 13 outside CI (in CI that fails).
pub(crate) fn emulator(test: &str) -> Option<Emulator> {
    if !cfg!(feature = "cuda") {
        eprintln!("SKIPPED {test}: this build has no CUDA support");
        return None;
    }
    let nvrtc = match nvrtc_wheel_dir(13) {
        Ok(d) => d.join("libnvrtc.so.13"),
        Err(e) if std::env::var_os("CI").is_some() => panic!("CI needs NVRTC 13: {e}"),
        Err(e) => {
            eprintln!("SKIPPED {test}: {e}");
            return None;
        }
    };
    let lib = build().unwrap_or_else(|e| panic!("{e}"));
    Some(Emulator { lib, nvrtc })
}

impl Emulator {
    /// `cmd` set to run against the emulated driver with interleaving
    /// `seed` (two worker threads per device for even seeds) and the
    /// extra variables `env`.
    pub(crate) fn wrap(&self, mut cmd: Command, seed: u64, env: &[(&str, &str)]) -> Command {
        let path = match std::env::var_os("LD_LIBRARY_PATH") {
            Some(p) if !p.is_empty() => {
                let mut v = self.lib.clone().into_os_string();
                v.push(":");
                v.push(p);
                v
            }
            _ => self.lib.clone().into_os_string(),
        };
        let state = temp_file("emu-state", &format!("seed{seed}-{}", unique()));
        std::fs::create_dir_all(&state).unwrap();
        cmd.env("LD_LIBRARY_PATH", path)
            .env("HIMENO_NVRTC_LIB", &self.nvrtc)
            .env("HIMENO_EMU_SEED", seed.to_string())
            .env(
                "HIMENO_EMU_WORKERS",
                if seed.is_multiple_of(2) { "2" } else { "0" },
            )
            .env("HIMENO_EMU_STATE_DIR", state);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `args` on the emulated GPU in one process.
    pub(crate) fn himeno(&self, seed: u64, env: &[(&str, &str)], args: &[&str]) -> Output {
        run(self.wrap(himeno(args), seed, env))
    }
}

/// A number unique within this test process (for scratch folders).
fn unique() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The CPU's verified JSON report for `grid` and `iterations`.
pub(crate) fn cpu_reference(grid: &str, iterations: &str) -> serde_json::Value {
    let r = json_ok(&run(himeno(&[
        "--backend",
        "cpu",
        "--grid",
        grid,
        "--iterations",
        iterations,
        "--verify",
        "--format",
        "json",
    ])));
    assert_eq!(r["verified"], true, "{r}");
    r
}

/// Asserts that the report of an emulated GPU run is VALID with the CPU's
/// fingerprint and gosa and that each rank says its device is emulated;
/// returns the record.
pub(crate) fn assert_answer_like_cpu(
    o: &Output,
    cpu: &serde_json::Value,
    what: &str,
) -> serde_json::Value {
    let r = json_ok(o);
    assert_eq!(r["backend"], "gpu", "{what}: {r}");
    assert_eq!(r["verified"], true, "{what}: {}", r["verification"]);
    assert_eq!(r["p_fingerprint"], cpu["p_fingerprint"], "{what}");
    let (a, b) = (cpu["gosa"].as_f64().unwrap(), r["gosa"].as_f64().unwrap());
    assert!(
        (a - b).abs() <= GOSA_TOLERANCE * a.abs(),
        "{what}: gosa {b} vs the CPU's {a}"
    );
    for rank in r["per_rank"].as_array().expect("per_rank") {
        assert_eq!(rank["emulated"], true, "{what}: {rank}");
    }
    r
}

/// As [`assert_answer_like_cpu`], and, for a run with neighbours, that the
/// halo went through host transfers (the staged path).
pub(crate) fn assert_like_cpu(o: &Output, cpu: &serde_json::Value, what: &str) {
    let r = assert_answer_like_cpu(o, cpu, what);
    if r["halo_messages_per_iteration"].as_f64().unwrap_or(0.0) > 0.0 {
        let t = r["phases"]["transfer"]["max_s"].as_f64().unwrap();
        assert!(t > 0.0, "{what}: a staged run shows no transfer phase: {r}");
    }
}

/// A verified GPU run of `grid` for `iters` iterations with a JSON report.
pub(crate) fn gpu_args<'a>(grid: &'a str, iters: &'a str) -> Vec<&'a str> {
    vec![
        "--backend",
        "gpu",
        "--grid",
        grid,
        "--iterations",
        iters,
        "--verify",
        "--format",
        "json",
    ]
}

/// The run options of variant `n` of a matrix: staging, overlap and the
/// rehearsal's length in turn, so that every process grid meets each of
/// them across the seeds.
fn variant(n: usize) -> Vec<&'static str> {
    let mut v = vec!["--staging", ["pinned", "pageable"][n % 2]];
    if n / 2 % 2 == 1 {
        v.push("--overlap");
    }
    // An even rehearsal too: then the last exchange before the reset
    // wrote the ghosts of the field the timed loop starts from, so halo
    // work still queued at the reset would change the answer.
    if n / 4 % 2 == 1 {
        v.extend(["--warmup", "2"]);
    }
    v
}

#[test]
fn emulated_gpu_on_one_rank_is_bitwise_the_cpu() {
    let Some(emu) = emulator("emulated_gpu_on_one_rank_is_bitwise_the_cpu") else {
        return;
    };
    let (grid, iters) = ("29x31x37", "4");
    let cpu = cpu_reference(grid, iters);
    for seed in SEEDS {
        for n in 0..4 {
            let mut args = gpu_args(grid, iters);
            args.extend(variant(n));
            let o = emu.himeno(seed, &[], &args);
            assert_like_cpu(&o, &cpu, &format!("seed {seed} {:?}", variant(n)));
        }
    }
}

#[test]
fn emulated_gpu_in_process_ranks_on_one_shared_device_and_on_four() {
    let Some(emu) = emulator("emulated_gpu_in_process_ranks_on_one_shared_device_and_on_four")
    else {
        return;
    };
    let (grid, iters) = ("27x30x33", "4");
    let cpu = cpu_reference(grid, iters);
    for devices in ["1", "4"] {
        for (n, seed) in SEEDS.into_iter().enumerate() {
            let mut args = [gpu_args(grid, iters), vec!["--local-ranks", "4"]].concat();
            args.extend(variant(n));
            let o = emu.himeno(seed, &[("HIMENO_EMU_DEVICES", devices)], &args);
            assert_like_cpu(&o, &cpu, &format!("{devices} device(s), seed {seed}"));
            let r = json_ok(&o);
            let mut used: Vec<String> = r["per_rank"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["placement"].as_str().unwrap_or("").to_string())
                .map(|p| p.split(", kernels").next().unwrap_or("").to_string())
                .collect();
            used.sort();
            used.dedup();
            assert_eq!(used.len(), devices.parse::<usize>().unwrap(), "{used:?}");
        }
    }
}

#[test]
fn emulated_gpu_every_process_grid_matches_one_rank() {
    let Some(emu) = emulator("emulated_gpu_every_process_grid_matches_one_rank") else {
        return;
    };
    // Uneven blocks along every axis; the second grid has blocks one point
    // wide (thin slabs) wherever it is split. Each process grid runs twice:
    // under a seed that runs stream work at synchronisation (odd) and one
    // with worker threads (even), the two with opposite staging and overlap,
    // the seeds and the rehearsal's length taking turns over the grids (the
    // one-rank and shared-device tests take every seed).
    for (grid, iters) in [("23x19x29", "3"), ("8x5x8", "3")] {
        let cpu = cpu_reference(grid, iters);
        for (g, (np, procs)) in PROCESS_GRIDS.into_iter().enumerate() {
            let runs = [([1, 3, 5][g % 3], 2 * g), ([2, 4][g % 2], 2 * g + 3)];
            for (seed, v) in runs {
                let n = np.to_string();
                let mut args = [
                    gpu_args(grid, iters),
                    vec!["--local-ranks", &n, "--procs", procs],
                ]
                .concat();
                args.extend(variant(v));
                let o = emu.himeno(seed, &[], &args);
                assert_like_cpu(&o, &cpu, &format!("{grid} on {procs}, seed {seed}"));
            }
        }
    }
}

#[test]
fn emulated_gpu_under_mpirun_on_two_and_four_ranks() {
    if !mpi_or_skip("emulated_gpu_under_mpirun_on_two_and_four_ranks") {
        return;
    }
    let Some(emu) = emulator("emulated_gpu_under_mpirun_on_two_and_four_ranks") else {
        return;
    };
    let (grid, iters) = ("26x28x31", "4");
    let cpu = cpu_reference(grid, iters);
    for np in [2, 4] {
        for (n, seed) in SEEDS.into_iter().enumerate() {
            let mut args = gpu_args(grid, iters);
            args.extend(variant(n));
            let o = run(emu.wrap(mpirun(np, &args), seed, &[]));
            assert_like_cpu(&o, &cpu, &format!("mpirun -np {np}, seed {seed}"));
        }
    }
}

#[test]
fn emulated_gpu_stopped_and_restarted_is_bitwise_the_cpu() {
    let Some(emu) = emulator("emulated_gpu_stopped_and_restarted_is_bitwise_the_cpu") else {
        return;
    };
    let cpu = cpu_reference("17x17x33", "10");
    for (seed, ranks) in [(1, "1"), (2, "2"), (3, "2")] {
        let what = format!("seed {seed}, {ranks} rank(s)");
        let dir = temp_file("emu-ckpt", &format!("seed{seed}-{}", unique()));
        let mut args = gpu_args("17x17x33", "10");
        args.extend(variant(seed as usize));
        args.extend([
            "--local-ranks",
            ranks,
            "--checkpoint-dir",
            dir.to_str().unwrap(),
        ]);
        // SIGTERM before iteration 5: the checkpoint goes device -> host
        // (the staging of `field`) -> file at the end of that block.
        let o = emu.himeno(seed, &[("HIMENO_FAULT", "0:5:term")], &args);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", stderr(&o));
        let first: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(
            (&first["complete"], &first["iterations"]),
            (&false.into(), &5.into()),
            "{what}"
        );
        args.extend(["--restart", "latest"]);
        let o = emu.himeno(seed, &[], &args);
        assert_like_cpu(&o, &cpu, &what);
        assert_eq!(json_ok(&o)["restarted_from"]["iteration"], 5, "{what}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn emulated_gpu_self_test_and_transfer_bench_run() {
    let Some(emu) = emulator("emulated_gpu_self_test_and_transfer_bench_run") else {
        return;
    };
    // The halo self-test through each rank's device buffers, pack and
    // unpack kernels and staging, on every process grid: under one seed of
    // each kind (see emulated_gpu_every_process_grid_matches_one_rank),
    // with opposite staging.
    for (g, (np, procs)) in PROCESS_GRIDS.into_iter().enumerate() {
        for seed in [[1, 3, 5][g % 3], [2, 4][g % 2]] {
            let n = np.to_string();
            let staging = ["pinned", "pageable"][(g + seed as usize) % 2];
            let o = emu.himeno(
                seed,
                &[],
                &[
                    "selftest",
                    "--backend",
                    "gpu",
                    "--staging",
                    staging,
                    "--local-ranks",
                    &n,
                    "--procs",
                    procs,
                    "--grid",
                    "9x8x7",
                ],
            );
            assert!(
                stdout(&o).starts_with("halo self-test passed"),
                "selftest on {procs}, seed {seed}: {}",
                stderr(&o)
            );
        }
    }
    for seed in SEEDS {
        let r = json_ok(&emu.himeno(seed, &[], &TRANSFER_64K));
        assert_eq!(r["emulated"], true, "{r}");
        assert_transfer_report(&r);
    }
}

#[test]
fn emulated_device_faults_end_every_rank_with_one_line() {
    let Some(emu) = emulator("emulated_device_faults_end_every_rank_with_one_line") else {
        return;
    };
    let base = [
        "--backend",
        "gpu",
        "--local-ranks",
        "2",
        "--grid",
        "20x20x20",
        "--iterations",
        "5",
    ];
    // The third device allocation (one rank's) runs out of memory.
    let o = emu.himeno(1, &[("HIMENO_EMU_FAIL_ALLOC", "3")], &base);
    assert_clean_error(&o, &["out of memory", "OUT_OF_MEMORY"]);
    // A kernel on device 1 fails late (sticky): both ranks stop, no hang.
    for seed in [1, 2] {
        let o = emu.himeno(
            seed,
            &[
                ("HIMENO_EMU_DEVICES", "2"),
                ("HIMENO_EMU_FAIL_LAUNCH", "30@1"),
            ],
            &base,
        );
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("LAUNCH_FAILED"), "{}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
    // A device too small for the two ranks that share it: refused before
    // anything is allocated, by the collective device memory check.
    let o = emu.himeno(1, &[("HIMENO_EMU_MEMORY", "30M")], &base);
    assert_clean_error(&o, &["device memory"]);
    // No device at all.
    let o = emu.himeno(1, &[("HIMENO_EMU_DEVICES", "0")], &base[..2]);
    assert_clean_error(&o, &["no device", "sees no"]);
}

#[test]
fn emulated_device_answers_change_nothing_in_the_answer() {
    let Some(emu) = emulator("emulated_device_answers_change_nothing_in_the_answer") else {
        return;
    };
    let (grid, iters) = ("21x22x23", "3");
    let cpu = cpu_reference(grid, iters);
    let args = [gpu_args(grid, iters), vec!["--local-ranks", "2"]].concat();
    for env in [
        [("HIMENO_EMU_CC", "8.0"), ("HIMENO_EMU_SMS", "108")],
        [("HIMENO_EMU_POOLS", "off"), ("HIMENO_EMU_MEMORY", "1G")],
        [
            ("HIMENO_EMU_NAME", "NVIDIA H200"),
            ("HIMENO_EMU_EAGER", "0"),
        ],
    ] {
        for seed in [1, 2] {
            let o = emu.himeno(seed, &env, &args);
            assert_like_cpu(&o, &cpu, &format!("{env:?} seed {seed}"));
        }
    }
}

#[test]
fn emulated_exclusive_process_device_refuses_a_second_process() {
    if !mpi_or_skip("emulated_exclusive_process_device_refuses_a_second_process") {
        return;
    }
    let Some(emu) = emulator("emulated_exclusive_process_device_refuses_a_second_process") else {
        return;
    };
    let env = [("HIMENO_EMU_COMPUTE_MODE", "exclusive-process")];
    let args = [
        "--backend",
        "gpu",
        "--grid",
        "12x12x12",
        "--iterations",
        "2",
    ];
    let o = run(emu.wrap(mpirun(2, &args), 1, &env));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("EXCLUSIVE_PROCESS"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // In-process ranks share the one process's context: allowed.
    let mut local = args.to_vec();
    local.extend(["--local-ranks", "2"]);
    let o = emu.himeno(1, &env, &local);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The emulator's own checks, by a small C++ program of test kernels that
/// misbehave on purpose: a thread that never reaches a barrier, an access
/// past an allocation, shuffles, launch limits and argument mismatches
/// (`scripts/cuda-emu.sh selftest`).
#[test]
fn emulator_reports_what_a_device_punishes() {
    if emulator("emulator_reports_what_a_device_punishes").is_none() {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuda-emu");
    let o = run(selftest(&dir));
    assert!(
        o.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        stdout(&o),
        stderr(&o)
    );
    assert!(
        stdout(&o).contains("selftest: all checks passed"),
        "{}",
        stdout(&o)
    );
}

/// The emulator's self-test command.
fn selftest(dir: &Path) -> Command {
    let mut c = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/cuda-emu.sh"));
    c.arg("selftest").env("HIMENO_EMU_DIR", dir);
    c
}

#[test]
fn emulated_gpu_check_passes_and_says_emulated() {
    let Some(emu) = emulator("emulated_gpu_check_passes_and_says_emulated") else {
        return;
    };
    // NVRTC where the binary's own search finds it (a virtual
    // environment's site-packages), as on a machine with the wheel.
    let venv = temp_file("emu-check", "venv");
    let site = venv.join("lib/python3.12/site-packages/nvidia/cu13");
    std::fs::create_dir_all(&site).unwrap();
    let _ = std::fs::remove_file(site.join("lib"));
    std::os::unix::fs::symlink(emu.nvrtc.parent().unwrap(), site.join("lib")).unwrap();
    let out = temp_file("emu-check", "out");
    let out_s = out.display().to_string();
    // The whole budgeted check, end to end, well within its budget, under
    // one seed of each kind (its runs are the cases the other tests here
    // take under every seed).
    let budget = 400;
    for seed in [1, 2] {
        let _ = std::fs::remove_dir_all(&out);
        let venv_s = venv.display().to_string();
        let started = std::time::Instant::now();
        let o = run(emu.wrap(
            himeno(&[
                "gpu-check",
                "--quick",
                "--budget",
                &budget.to_string(),
                "--out",
                &out_s,
            ]),
            seed,
            &[("VIRTUAL_ENV", &venv_s)],
        ));
        let took = started.elapsed().as_secs();
        let text = stdout(&o);
        assert_eq!(
            o.status.code(),
            Some(0),
            "seed {seed}:\n{text}\n{}",
            stderr(&o)
        );
        assert!(took < budget, "seed {seed}: took {took} s");
        assert!(
            text.lines()
                .any(|l| l.starts_with("gpu-check: PASS (emulated device")),
            "{text}"
        );
        assert!(out.join("gpu-check.txt").is_file() && out.join("results.jsonl").is_file());
        assert_budgeted_check(&text, &out);
    }
}

/// Asserts that a quick gpu-check's report `text` ran every step (known
/// answers, the variants at both sizes, each variant a row, the
/// recommendation, the phase split; the tools the machine lacks skipped
/// in one line each), and that its runs shared one NVRTC cache: one CUBIN
/// per variant for the dozens of runs.
fn assert_budgeted_check(text: &str, out: &Path) {
    for part in [
        "known_answers          ok",
        "xl_timing              ok",
        "l_timing               ok",
        "phase_split            ok",
        "occupancy              ok",
    ] {
        assert!(text.contains(part), "{part}:\n{text}");
    }
    // Every pair a run accepts has an exact row at both sizes; a
    // pipelined sweep at occupancy 5 (it would spill) has none. Every
    // sweep has a padded row at occupancy 4 at both sizes.
    let mut variants = 0;
    for sweep in himeno::config::SweepVariant::ALL {
        for occ in himeno::config::Occupancy::ALL {
            let row = format!("  {:<14} {:<9} exact  ", sweep.name(), occ.name());
            let want = if sweep.fits(occ) { 2 } else { 0 };
            assert_eq!(text.matches(&row).count(), want, "{row}:\n{text}");
            variants += usize::from(sweep.fits(occ));
            let row = format!("  {:<14} {:<9} padded ", sweep.name(), occ.name());
            let want = if occ == himeno::config::Occupancy::Blocks4 {
                2
            } else {
                0
            };
            assert_eq!(text.matches(&row).count(), want, "{row}:\n{text}");
        }
    }
    assert!(
        text.contains("[EMULATED device: host times, not GPU performance]"),
        "{text}"
    );
    assert!(text.contains("fastest on this EMULATED device"), "{text}");
    assert!(!text.contains("skipped from here"), "{text}");
    let listed = Command::new("tar")
        .arg("-tzf")
        .arg(out.join("details.tar.gz"))
        .output()
        .expect("tar");
    let listing = String::from_utf8_lossy(&listed.stdout);
    let cubins = listing
        .lines()
        .filter(|l| l.contains("nvrtc-cache/") && l.ends_with(".cubin"))
        .count();
    assert_eq!(cubins, himeno::config::Occupancy::ALL.len(), "{listing}");
    let runs = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    assert!(runs.lines().count() > 3 * variants);
}

#[test]
fn an_emulated_gpu_run_traces_its_transfers() {
    let Some(emu) = emulator("an_emulated_gpu_run_traces_its_transfers") else {
        return;
    };
    let (grid, iters) = ("29x31x37", "4");
    let cpu = cpu_reference(grid, iters);
    let path = temp_file("emu-trace", "t.json");
    let mut args = gpu_args(grid, iters);
    args.extend(["--local-ranks", "2", "--trace", path.to_str().unwrap()]);
    let o = emu.himeno(1, &[], &args);
    assert_like_cpu(&o, &cpu, "traced");
    let t = crate::common::trace::load(&path);
    crate::common::trace::assert_perfetto_shape(&t, 2);
    crate::common::trace::assert_sums_match(&json_ok(&o), &t);
    // The device-timed halo copies are on the timeline beside the pack.
    let transfers = crate::common::trace::complete(&t)
        .into_iter()
        .filter(|e| e["name"] == "transfer" && e["cat"] == "timed")
        .count();
    assert!(transfers > 0, "no transfer on the GPU ranks' timeline");
}

/// How far a device event may lie outside the host span that launched and
/// waited for its work: the first anchor's placement (half the host gap
/// around one event record and wait, microseconds, more when the shared
/// machine deschedules the rank then); 7 us was the largest seen.
const ANCHOR_MARGIN_US: f64 = 1000.0;

/// The complete events of rank `pid` in a trace, by track.
fn rank_events(t: &serde_json::Value, pid: u64) -> Vec<&serde_json::Value> {
    crate::common::trace::complete(t)
        .into_iter()
        .filter(|e| e["pid"] == pid)
        .collect()
}

/// Start and end of an event, in microseconds.
fn span_us(e: &serde_json::Value) -> (f64, f64) {
    let ts = e["ts"].as_f64().unwrap();
    (ts, ts + e["dur"].as_f64().unwrap())
}

/// Asserts the GPU streams' tracks of a traced emulated run of `np`
/// ranks: device events on the compute stream's track (and on the halo
/// stream's under `overlap`, else none there), inside the run's span (its
/// recorded barriers) and, in the timed loop, inside the host's span of
/// their own iteration from its first phase to the end of its compute; and
/// without `overlap`, each sweep inside the compute event that launched and
/// waited for it, so that the device sweep time adds up to at most the
/// report's compute phase, and to a good part of it.
fn assert_device_tracks(report: &serde_json::Value, t: &serde_json::Value, np: u64, overlap: bool) {
    use crate::common::trace::GPU_TRACKS;
    let (compute_track, halo_track) = (GPU_TRACKS, GPU_TRACKS + 1);
    for pid in 0..np {
        let ev = rank_events(t, pid);
        let tracks: std::collections::BTreeSet<u64> = ev
            .iter()
            .map(|e| e["tid"].as_u64().unwrap())
            .filter(|&tid| tid >= GPU_TRACKS)
            .collect();
        let want: Vec<u64> = if overlap {
            vec![compute_track, halo_track]
        } else {
            vec![compute_track]
        };
        assert_eq!(tracks.into_iter().collect::<Vec<_>>(), want, "rank {pid}");
        let device: Vec<_> = ev
            .iter()
            .filter(|e| e["tid"].as_u64().unwrap() >= GPU_TRACKS)
            .collect();
        for name in ["gpu sweep", "gpu copy to host", "gpu copy to device"] {
            assert!(
                device
                    .iter()
                    .any(|e| e["name"] == name && e["cat"] == "timed"),
                "rank {pid}: no timed {name}"
            );
        }
        // The sweep stores the first dimension step's faces itself (the
        // steps go k, j, i) and the exact layout sends faces normal to i
        // in place: a pack kernel, and its span, runs only for a later
        // step normal to j.
        let procs: Vec<u64> = report["procs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect();
        let packs = procs[2] > 1 && procs[1] > 1;
        assert_eq!(
            device.iter().any(|e| e["name"] == "gpu pack"),
            packs,
            "rank {pid}: gpu pack spans on procs {procs:?}"
        );
        let barriers: Vec<(f64, f64)> = ev
            .iter()
            .filter(|e| e["name"] == "barrier")
            .map(|e| span_us(e))
            .collect();
        let run_from = barriers.iter().map(|b| b.0).fold(f64::MAX, f64::min);
        let run_to = barriers.iter().map(|b| b.1).fold(f64::MIN, f64::max);
        for e in &device {
            let (a, b) = span_us(e);
            assert!(
                a >= run_from - ANCHOR_MARGIN_US && b <= run_to + ANCHOR_MARGIN_US,
                "rank {pid}: {e} outside the run [{run_from}, {run_to}]"
            );
        }
        let host = |it: &serde_json::Value, name: Option<&str>| -> Vec<(f64, f64)> {
            ev.iter()
                .filter(|h| h["tid"] == 1 && h["cat"] == "timed" && h["args"]["iteration"] == *it)
                .filter(|h| name.is_none_or(|n| h["name"] == n))
                .map(|h| span_us(h))
                .collect()
        };
        let mut sweep_s = 0.0;
        for e in device.iter().filter(|e| e["cat"] == "timed") {
            let (a, b) = span_us(e);
            let computes = host(&e["args"]["iteration"], Some("compute"));
            let from = host(&e["args"]["iteration"], None)
                .iter()
                .map(|h| h.0)
                .fold(f64::MAX, f64::min);
            let to = computes.iter().map(|h| h.1).fold(f64::MIN, f64::max);
            assert!(
                a >= from - ANCHOR_MARGIN_US && b <= to + ANCHOR_MARGIN_US,
                "rank {pid}: {e} outside its iteration [{from}, {to}]"
            );
            if !overlap && e["name"] == "gpu sweep" {
                // Launched and waited for in sweeps_start: the iteration's
                // first compute event.
                let first = computes[0];
                assert!(
                    a >= first.0 - ANCHOR_MARGIN_US && b <= first.1 + ANCHOR_MARGIN_US,
                    "rank {pid}: {e} outside its compute event {first:?}"
                );
                sweep_s += e["dur"].as_f64().unwrap() * 1e-6;
            }
        }
        if !overlap {
            let compute = report["per_rank"][pid as usize]["phases_s"]["compute"]
                .as_f64()
                .unwrap();
            // At most the compute phase: every sweep lies in a compute
            // event, and device and host read one clock in the emulator
            // (1 % for the rounding of the trace's microseconds). No lower
            // bound: on a loaded machine the host thread is descheduled
            // around the sweeps and its compute phase grows (a quarter
            // failed with two ranks at cpu_share 0.57); instead every timed
            // iteration has its sweep on the device.
            assert!(
                sweep_s <= compute * 1.01 + 1e-6,
                "rank {pid}: device sweeps {sweep_s} s, compute phase {compute} s: {report}"
            );
            let iterations = report["iterations"].as_u64().unwrap();
            for it in 1..=iterations {
                assert!(
                    device.iter().any(|e| e["cat"] == "timed"
                        && e["name"] == "gpu sweep"
                        && e["args"]["iteration"] == it),
                    "rank {pid}: no device sweep in timed iteration {it}"
                );
            }
        }
        // One stream's work never overlaps itself (also in
        // assert_perfetto_shape); spans keep the stream's order.
        for track in want {
            let mut spans: Vec<(f64, f64)> = device
                .iter()
                .filter(|e| e["tid"] == track)
                .map(|e| span_us(e))
                .collect();
            spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
            for w in spans.windows(2) {
                assert!(w[1].0 >= w[0].1 - 1e-3, "rank {pid} track {track}: {w:?}");
            }
        }
    }
}

#[test]
fn an_emulated_gpu_trace_has_its_streams_tracks_from_device_events() {
    let Some(emu) = emulator("an_emulated_gpu_trace_has_its_streams_tracks_from_device_events")
    else {
        return;
    };
    let (grid, iters) = ("29x31x37", "10");
    let cpu = cpu_reference(grid, iters);
    let mpi = mpi_or_skip("an_emulated_gpu_trace_has_its_streams_tracks_from_device_events");
    // Seed 1 runs stream work only when the host waits, seed 2 on two
    // worker threads with seeded pauses.
    for (seed, overlap) in [(1, false), (2, false), (1, true), (2, true)] {
        for in_process in [true, false] {
            if !in_process && !mpi {
                continue;
            }
            let what = format!("seed {seed}, overlap {overlap}, in-process {in_process}");
            let path = temp_file(
                "emu-gpu-trace",
                &format!("{seed}-{overlap}-{in_process}.json"),
            );
            let mut args = gpu_args(grid, iters);
            args.extend(["--trace", path.to_str().unwrap()]);
            if overlap {
                args.push("--overlap");
            }
            let o = if in_process {
                args.extend(["--local-ranks", "2"]);
                emu.himeno(seed, &[], &args)
            } else {
                run(emu.wrap(mpirun(2, &args), seed, &[]))
            };
            assert_like_cpu(&o, &cpu, &what);
            let report = json_ok(&o);
            let t = crate::common::trace::load(&path);
            crate::common::trace::assert_perfetto_shape(&t, 2);
            crate::common::trace::assert_sums_match(&report, &t);
            assert_device_tracks(&report, &t, 2, overlap);
        }
    }
}
