//! The halo paths of `--halo` on the emulated GPU: `staged` (device ->
//! host -> mailbox -> host -> device) and `peer` (in-process ranks copy
//! faces device to device) give the CPU's field bitwise on the process
//! grids of 1 to 4 ranks, with and without `--overlap`, in both field
//! layouts (`--gpu-layout`), under a seed that
//! runs stream work only when the host synchronises and one with worker
//! threads; each record names its path. The emulator's counts of host waits
//! and host<->device bytes per iteration are checked at 2x2x1: the staged
//! path waits after the sweep and twice per dimension step, the peer path
//! once (gosa) and copies nothing but gosa's 8 bytes. The emulator's
//! counts of kernel launches (`HIMENO_EMU_LAUNCH_LOG`) show that the sweep
//! stores the first dimension step's faces on every path with device face
//! buffers: no pack kernel gathers them.

use crate::common::*;
use crate::emulated_gpu::{assert_answer_like_cpu, cpu_reference, emulator, gpu_args};
use std::process::Output;

/// A seed that runs stream work only when the host synchronises, and one
/// with two worker threads per device (`Emulator::wrap`).
const SYNC_ONLY: u64 = 1;
const WORKERS: u64 = 2;

/// Asserts that the emulated run `o` is VALID with the CPU's fingerprint
/// and gosa, that its record names `path`, and that every rank reports the
/// emulator's counts; returns the record.
fn assert_path_like_cpu(
    o: &Output,
    cpu: &serde_json::Value,
    path: &str,
    what: &str,
) -> serde_json::Value {
    let r = assert_answer_like_cpu(o, cpu, what);
    assert_eq!(r["halo_path"], path, "{what}");
    for rank in r["per_rank"].as_array().expect("per_rank") {
        assert!(
            rank["host_waits_per_iteration"].is_u64()
                && rank["host_device_bytes_per_iteration"].is_u64(),
            "{what}: no host traffic counted: {rank}"
        );
    }
    r
}

/// The counts of every rank of `r`: (waits, bytes) per iteration.
fn counts(r: &serde_json::Value) -> Vec<(u64, u64)> {
    r["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["host_waits_per_iteration"].as_u64().unwrap(),
                p["host_device_bytes_per_iteration"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn gpu_halo_staged_and_peer_on_every_grid_of_up_to_four_ranks_are_bitwise_the_cpu() {
    let Some(emu) =
        emulator("gpu_halo_staged_and_peer_on_every_grid_of_up_to_four_ranks_are_bitwise_the_cpu")
    else {
        return;
    };
    let (grid, iters) = ("23x19x29", "3");
    let cpu = cpu_reference(grid, iters);
    let grids = PROCESS_GRIDS.into_iter().filter(|(np, _)| *np <= 4);
    for (g, (np, procs)) in grids.enumerate() {
        // Most grids on a device per rank (peer copies between devices),
        // every third on one shared device (device copies within it).
        let devices = if g % 3 == 2 { "1" } else { "4" };
        let n = np.to_string();
        // Peer with and without overlap, one under each kind of seed
        // (which one, in turn over the grids); staged (which
        // `emulated_gpu` runs on every grid) on every other grid, its
        // overlap and seed in turn.
        let runs = [
            ("peer", false, [SYNC_ONLY, WORKERS][g % 2]),
            ("peer", true, [WORKERS, SYNC_ONLY][g % 2]),
            ("staged", g % 4 == 2, [SYNC_ONLY, WORKERS][g / 2 % 2]),
        ];
        let staged_here = g % 2 == 0;
        // Every third grid lays its fields out padded (`--gpu-layout`),
        // where the i-faces go through face buffers too.
        let layout = if g % 3 == 1 { "padded" } else { "exact" };
        for (path, overlap, seed) in runs.into_iter().filter(|r| r.0 == "peer" || staged_here) {
            let mut args = [
                gpu_args(grid, iters),
                vec!["--local-ranks", &n, "--procs", procs, "--halo", path],
                vec!["--gpu-layout", layout],
            ]
            .concat();
            if overlap {
                args.push("--overlap");
            }
            let what = format!(
                "--halo {path} on {procs}, overlap {overlap}, layout {layout}, {devices} \
                 device(s), seed {seed}"
            );
            let o = emu.himeno(seed, &[("HIMENO_EMU_DEVICES", devices)], &args);
            assert_path_like_cpu(&o, &cpu, path, &what);
        }
    }
}

#[test]
fn gpu_halo_peer_waits_once_per_iteration_and_copies_only_gosa_to_the_host() {
    let Some(emu) =
        emulator("gpu_halo_peer_waits_once_per_iteration_and_copies_only_gosa_to_the_host")
    else {
        return;
    };
    let (grid, iters) = ("23x19x29", "4");
    let cpu = cpu_reference(grid, iters);
    for overlap in [false, true] {
        let run = |path: &str| {
            let mut args = [
                gpu_args(grid, iters),
                vec!["--local-ranks", "4", "--procs", "2x2x1", "--halo", path],
            ]
            .concat();
            if overlap {
                args.push("--overlap");
            }
            let o = emu.himeno(SYNC_ONLY, &[("HIMENO_EMU_DEVICES", "4")], &args);
            let what = format!("--halo {path} on 2x2x1, overlap {overlap}");
            let r = assert_path_like_cpu(&o, &cpu, path, &what);
            (r, what)
        };
        // Staged, as before the device paths: a wait after the sweep and
        // two per dimension step (each rank of 2x2x1 has one neighbour in
        // i and one in j; gosa's copy was done by the sweep's wait), and
        // every face down and back up besides gosa's 8 bytes.
        let (staged, what) = run("staged");
        let c = counts(&staged);
        assert!(c.iter().all(|&(w, _)| w == 1 + 2 * 2), "{what}: {c:?}");
        let faces: u64 = c.iter().map(|&(_, b)| b - 8).sum();
        let sent = staged["halo_bytes_per_iteration"].as_u64().unwrap();
        assert_eq!(faces, 2 * sent, "{what}: {c:?}");
        // Peer: at most one wait (gosa, read an iteration late) and no
        // host<->device bytes but gosa's.
        let (peer, what) = run("peer");
        let c = counts(&peer);
        assert!(c.iter().all(|&(w, b)| w <= 1 && b == 8), "{what}: {c:?}");
        assert_eq!(
            peer["halo_bytes_per_iteration"], staged["halo_bytes_per_iteration"],
            "{what}: the same faces move"
        );
    }
}

/// Kernel launches by name, summed over the processes that appended to
/// `log` (`HIMENO_EMU_LAUNCH_LOG`: one line `launches NAME=COUNT ...` per
/// process).
fn launches(log: &std::path::Path) -> std::collections::BTreeMap<String, u64> {
    let text = std::fs::read_to_string(log)
        .unwrap_or_else(|e| panic!("no launch log at {}: {e}", log.display()));
    let mut counts = std::collections::BTreeMap::new();
    for line in text.lines() {
        let words = line
            .strip_prefix("launches")
            .unwrap_or_else(|| panic!("{line}"));
        for w in words.split_whitespace() {
            let (name, n) = w.split_once('=').unwrap_or_else(|| panic!("{line}"));
            *counts.entry(name.to_string()).or_insert(0) += n.parse::<u64>().unwrap();
        }
    }
    counts
}

#[test]
fn gpu_halo_the_sweep_stores_the_first_steps_faces_so_no_pack_kernel_gathers_them() {
    let Some(emu) =
        emulator("gpu_halo_the_sweep_stores_the_first_steps_faces_so_no_pack_kernel_gathers_them")
    else {
        return;
    };
    let (grid, iters) = ("23x19x29", "3");
    let cpu = cpu_reference(grid, iters);
    // One NVRTC cache for these runs: the kernels compile once.
    let cache = temp_file("nvrtc-cache", "gpu_halo");
    std::fs::create_dir_all(&cache).unwrap();
    let cache = ("HIMENO_NVRTC_CACHE", cache.to_str().unwrap());
    // Every face normal to j or k is unpacked by a kernel (the exact
    // layout's i-faces are copied in place). On 2x2x1 (no neighbour in k)
    // those are all the first step's (j), which the sweep stores: no pack
    // at all. On 1x2x2 the first step is k's: the j-faces are packed, as
    // many as the k-faces, so half as many packs as unpacks. Every path
    // that has device face buffers, with and without overlap in turn.
    let in_process = [
        ("staged", "2x2x1", false, SYNC_ONLY),
        ("peer", "2x2x1", true, WORKERS),
        ("nccl", "2x2x1", false, WORKERS),
        ("staged", "1x2x2", true, WORKERS),
        ("peer", "1x2x2", false, SYNC_ONLY),
        ("nccl", "1x2x2", true, SYNC_ONLY),
    ];
    let check = |o: &Output, log: &std::path::Path, path: &str, procs: &str, what: &str| {
        assert_path_like_cpu(o, &cpu, path, what);
        let l = launches(log);
        let packs = l.get("pack_face").copied().unwrap_or(0);
        let unpacks = l.get("unpack_face").copied().unwrap_or(0);
        // The launches that store faces run the sweep's `_faces` twin
        // (the others keep the plain sweep's registers).
        assert!(
            unpacks > 0 && l.contains_key("sweep_faces"),
            "{what}: {l:?}"
        );
        let want = if procs == "2x2x1" { 0 } else { unpacks / 2 };
        assert_eq!(packs, want, "{what}: pack launches ({l:?})");
    };
    for (i, (path, procs, overlap, seed)) in in_process.into_iter().enumerate() {
        let log = temp_file("launch-log", &format!("in-process-{i}"));
        let log_var = log.to_str().unwrap();
        let mut args = [
            gpu_args(grid, iters),
            vec!["--local-ranks", "4", "--procs", procs, "--halo", path],
        ]
        .concat();
        if overlap {
            args.push("--overlap");
        }
        let env = [
            ("HIMENO_EMU_DEVICES", "2"),
            ("HIMENO_EMU_LAUNCH_LOG", log_var),
            cache,
        ];
        let o = emu.himeno(seed, &env, &args);
        let what = format!("--halo {path} on {procs}, overlap {overlap}, seed {seed}");
        check(&o, &log, path, procs, &what);
        // On 2x2x1 (faces normal to j first) the interior's launch under
        // --overlap stores no face: it runs the plain sweep; every other
        // launch stores some.
        if procs == "2x2x1" {
            assert_eq!(
                launches(&log).contains_key("sweep"),
                overlap,
                "{what}: plain sweep launches"
            );
        }
    }
    // mpi-device under mpirun (device memory the plain MPI can read), its
    // four processes appending to one log.
    if !mpi_or_skip("gpu_halo_the_sweep_stores_the_first_steps_faces (mpi-device)") {
        return;
    }
    let log = temp_file("launch-log", "mpi-device");
    let env = [
        ("HIMENO_EMU_HOST_ADDRESSABLE", "1"),
        ("HIMENO_MPI_CUDA_AWARE", "1"),
        ("HIMENO_EMU_LAUNCH_LOG", log.to_str().unwrap()),
        cache,
    ];
    let args = [
        gpu_args(grid, iters),
        vec!["--procs", "2x2x1", "--halo", "mpi-device", "--overlap"],
    ]
    .concat();
    let o = run(emu.wrap(mpirun(4, &args), WORKERS, &env));
    check(
        &o,
        &log,
        "mpi-device",
        "2x2x1",
        "--halo mpi-device on 2x2x1 under mpirun, overlap",
    );
}
