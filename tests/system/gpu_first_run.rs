//! What a first run on a GPU machine may meet, on the emulated device: a
//! driver that reports memory pools but refuses the stream-ordered
//! allocator (the run falls back to `cuMemAlloc` and says so in one line)
//! or refuses to lock large host buffers (pageable staging, said once),
//! MPI processes that share one GPU without MPS (warned; in-process ranks
//! and a host with MPS are not), NVTX ranges named as the trace's phases
//! (through a stand-in NVTX library). `himeno gpu-check`'s whole budgeted
//! check is `emulated_gpu::emulated_gpu_check_passes_and_says_emulated`.

use super::emulated_gpu::{assert_like_cpu, cpu_reference, emulator, gpu_args};
use crate::common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// The allocator every rank's record names.
fn allocators(r: &serde_json::Value) -> Vec<String> {
    r["provenance"]["gpu_software"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|g| g["allocator"].as_str().unwrap_or("-").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_driver_refusing_memory_pools_falls_back_to_cu_mem_alloc() {
    let Some(emu) = emulator("a_driver_refusing_memory_pools_falls_back_to_cu_mem_alloc") else {
        return;
    };
    let (grid, iters) = ("12x13x14", "3");
    let cpu = cpu_reference(grid, iters);
    let mut args = gpu_args(grid, iters);
    args.extend(["--local-ranks", "2", "--overlap"]);
    for seed in [1, 2] {
        let o = emu.himeno(seed, &[("HIMENO_EMU_POOLS", "broken")], &args);
        assert_like_cpu(&o, &cpu, &format!("broken pools, seed {seed}"));
        assert_eq!(allocators(&json_ok(&o)), ["cuMemAlloc"]);
        // One line for the process's device, not one per rank.
        let err = stderr(&o);
        let said: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("device memory from cuMemAlloc"))
            .collect();
        assert_eq!(said.len(), 1, "{err}");
        assert!(said[0].contains("refuses cuMemAllocAsync"), "{err}");
    }
    // The transfer benchmark allocates through the same path.
    let o = emu.himeno(
        1,
        &[("HIMENO_EMU_POOLS", "broken")],
        &[
            "bench",
            "transfer",
            "--max-bytes",
            "65536",
            "--format",
            "json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // Working pools: the stream-ordered allocator, said at -v.
    let mut verbose = gpu_args(grid, iters);
    verbose.push("-v");
    let o = emu.himeno(1, &[], &verbose);
    assert_like_cpu(&o, &cpu, "working pools");
    assert_eq!(allocators(&json_ok(&o)), ["cuMemAllocAsync"]);
    assert!(
        stderr(&o).contains("device memory from the stream-ordered allocator (cuMemAllocAsync)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn refused_page_locked_staging_falls_back_to_pageable() {
    let Some(emu) = emulator("refused_page_locked_staging_falls_back_to_pageable") else {
        return;
    };
    let (grid, iters) = ("12x13x14", "3");
    let cpu = cpu_reference(grid, iters);
    let mut args = gpu_args(grid, iters);
    args.extend(["--local-ranks", "2", "--staging", "pinned"]);
    // Faces of 12x13 values and more: every staging buffer is refused.
    let o = emu.himeno(1, &[("HIMENO_EMU_PINNED_MAX", "256")], &args);
    assert_like_cpu(&o, &cpu, "pinned refused");
    let err = stderr(&o);
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("page-locked staging refused"))
            .count(),
        1,
        "{err}"
    );
    let r = json_ok(&o);
    for rank in r["per_rank"].as_array().unwrap() {
        let placement = rank["placement"].as_str().unwrap();
        assert!(
            placement.contains("pinned staging refused: pageable"),
            "{placement}"
        );
    }
}

/// The time-slicing warnings in a run's standard error.
fn time_slicing(o: &std::process::Output) -> usize {
    stderr(o)
        .lines()
        .filter(|l| l.contains("without MPS"))
        .count()
}

#[test]
fn processes_sharing_a_gpu_without_mps_are_warned_threads_are_not() {
    if !mpi_or_skip("processes_sharing_a_gpu_without_mps_are_warned_threads_are_not") {
        return;
    }
    let Some(emu) = emulator("processes_sharing_a_gpu_without_mps_are_warned_threads_are_not")
    else {
        return;
    };
    let (grid, iters) = ("12x12x12", "2");
    let cpu = cpu_reference(grid, iters);
    let args = gpu_args(grid, iters);
    // No MPS pipe folder anywhere the ranks look.
    let none = temp_file("mps", "none");
    std::fs::create_dir_all(&none).unwrap();
    let none_s = none.display().to_string();
    let mps_env = [("CUDA_MPS_PIPE_DIRECTORY", none_s.as_str())];
    let o = run(emu.wrap(mpirun(2, &args), 1, &mps_env));
    assert_like_cpu(&o, &cpu, "mpirun -np 2 on one device");
    assert_eq!(time_slicing(&o), 1, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("--local-ranks 2") && err.contains("ranks 0, 1"),
        "{err}"
    );
    // The same ranks as threads of one process share one context.
    let mut local = args.clone();
    local.extend(["--local-ranks", "2"]);
    let o = emu.himeno(1, &mps_env, &local);
    assert_like_cpu(&o, &cpu, "--local-ranks 2");
    assert_eq!(time_slicing(&o), 0, "{}", stderr(&o));
    // An MPS control daemon's pipe: no warning.
    let mps = temp_file("mps", "daemon");
    std::fs::create_dir_all(&mps).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(mps.join("control"))
        .status()
        .expect("mkfifo");
    assert!(fifo.success());
    let mps_s = mps.display().to_string();
    let o = run(emu.wrap(
        mpirun(2, &args),
        1,
        &[("CUDA_MPS_PIPE_DIRECTORY", mps_s.as_str())],
    ));
    assert_like_cpu(&o, &cpu, "mpirun -np 2 with MPS");
    assert_eq!(time_slicing(&o), 0, "{}", stderr(&o));
}

#[test]
fn nvtx_ranges_carry_the_trace_phase_names() {
    let Some(emu) = emulator("nvtx_ranges_carry_the_trace_phase_names") else {
        return;
    };
    let lib = compile_c(
        "tests/system/nvtx_stub.c",
        "nvtx-stub.so",
        &["-shared", "-fPIC", "-O1", "-pthread"],
    );
    let log = temp_file("nvtx", "ranges.log");
    let _ = std::fs::remove_file(&log);
    let trace = temp_file("nvtx", "trace.json");
    let (grid, iters) = ("14x15x16", "3");
    let cpu = cpu_reference(grid, iters);
    let mut args = gpu_args(grid, iters);
    args.extend(["--local-ranks", "2", "--trace", trace.to_str().unwrap()]);
    let (lib_s, log_s) = (lib.display().to_string(), log.display().to_string());
    let o = emu.himeno(
        1,
        &[("HIMENO_NVTX_LIB", &lib_s), ("NVTX_STUB_LOG", &log_s)],
        &args,
    );
    assert_like_cpu(&o, &cpu, "with NVTX");
    let text = std::fs::read_to_string(&log).expect("the stand-in NVTX library was used");
    // Per thread, every push is popped, in order.
    let mut depth: BTreeMap<&str, i64> = BTreeMap::new();
    let mut pushed = BTreeSet::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        let d = depth.entry(w[0]).or_default();
        if w[1] == "push" {
            *d += 1;
            pushed.insert(w[2].to_string());
        } else {
            *d -= 1;
        }
        assert!(*d >= 0, "a pop without a push: {line}");
    }
    assert!(depth.values().all(|&d| d == 0), "unbalanced: {depth:?}");
    // The names are the trace's phases, all of them.
    let t = crate::common::trace::load(&trace);
    let phases: BTreeSet<String> = crate::common::trace::complete(&t)
        .into_iter()
        .filter(|e| e["tid"] == himeno::timeline::MAIN_TRACK as u64 && e["name"] != "barrier")
        .filter_map(|e| e["name"].as_str().map(str::to_string))
        .collect();
    assert!(phases.len() >= 5, "{phases:?}");
    assert_eq!(pushed, phases);
    // Without the library the run is the same, and opens no range.
    let _ = std::fs::remove_file(&log);
    let o = emu.himeno(
        1,
        &[
            ("HIMENO_NVTX_LIB", "/nonexistent/libnvToolsExt.so.1"),
            ("NVTX_STUB_LOG", &log_s),
        ],
        &gpu_args(grid, iters),
    );
    assert_like_cpu(&o, &cpu, "without NVTX");
    assert!(!log.exists());
}
