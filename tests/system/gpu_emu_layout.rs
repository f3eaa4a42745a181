//! The padded device layout (`--gpu-layout padded`) on the emulated device
//! (see `emulated_gpu.rs`), which runs the real kernels on fields whose
//! rows are padded to a pitch of an odd number of 128-byte lines: every
//! sweep variant, with and without `--overlap`, on odd grids and every
//! process grid up to four in-process ranks and under `mpirun`, gives the
//! CPU's field (bitwise, VALID) and the exact layout's gosa bits; the
//! field comes back through the plane-at-a-time copies for the
//! fingerprint and a checkpoint, and goes in through them on a restart.
//! The emulator's allocations end at a guard page, so a kernel or copy
//! that strays past a padded field faults.

use super::emulated_gpu::{Emulator, assert_like_cpu, cpu_reference, emulator, gpu_args};
use super::gpu_emu_variants::{VARIANTS, variant_run};
use crate::common::*;

/// One emulated GPU run (`variant_run`) with `layout`, sweep `variant`
/// and `--overlap` when `overlap`; returns its gosa bits.
fn layout_run(
    emu: &Emulator,
    cpu: &serde_json::Value,
    size: (&str, &str),
    grid: (usize, &str),
    case: (&str, &str, bool),
    seed: u64,
) -> u64 {
    let r = variant_run(emu, cpu, size, grid, case, seed);
    r["gosa"].as_f64().unwrap().to_bits()
}

#[test]
fn gpu_emu_padded_layout_is_bitwise_the_exact_one() {
    let Some(emu) = emulator("gpu_emu_padded_layout_is_bitwise_the_exact_one") else {
        return;
    };
    // Four ranks split j and k: every face kind, the k slab narrower than
    // a warp. Every variant, with and without overlap, against the exact
    // layout's classic sweep: the same launches, so the same gosa bits.
    let size = ("11x13x17", "3");
    let cpu = cpu_reference(size.0, size.1);
    let grid = (4, "1x2x2");
    for overlap in [false, true] {
        let exact = layout_run(&emu, &cpu, size, grid, ("exact", "classic", overlap), 1);
        for (n, v) in VARIANTS.iter().enumerate() {
            let seed = n as u64 + 2;
            let padded = layout_run(&emu, &cpu, size, grid, ("padded", v, overlap), seed);
            assert_eq!(padded, exact, "{v}, overlap {overlap}: padded vs exact");
        }
    }
    // Every process grid up to four ranks, the variant rotating so that
    // each meets both modes, on a grid whose rows are longer than a line
    // (k blocks of two and more lines, k slabs a warp wide) and whose
    // i-planes split unevenly.
    let size = ("9x11x75", "2");
    let cpu = cpu_reference(size.0, size.1);
    for (g, grid) in PROCESS_GRIDS.into_iter().filter(|p| p.0 <= 4).enumerate() {
        let overlap = g % 2 == 1;
        let variant = VARIANTS[g % VARIANTS.len()];
        layout_run(
            &emu,
            &cpu,
            size,
            grid,
            ("padded", variant, overlap),
            g as u64 + 1,
        );
    }
}

#[test]
fn gpu_emu_padded_layout_under_mpirun_and_across_a_restart() {
    let Some(emu) = emulator("gpu_emu_padded_layout_under_mpirun_and_across_a_restart") else {
        return;
    };
    let (grid, iters) = ("17x17x33", "6");
    let cpu = cpu_reference(grid, iters);
    if mpi_or_skip("gpu_emu_padded_layout_under_mpirun_and_across_a_restart") {
        let mut args = gpu_args(grid, iters);
        args.extend([
            "--procs",
            "2x1x2",
            "--gpu-layout",
            "padded",
            "--gpu-sweep",
            "pipelined-slab",
            "--overlap",
        ]);
        let o = run(emu.wrap(mpirun(4, &args), 2, &[]));
        assert_like_cpu(&o, &cpu, "mpirun -np 4, padded");
        for rank in json_ok(&o)["per_rank"].as_array().unwrap() {
            assert_eq!(rank["gpu_layout"], "padded", "{rank}");
        }
    }
    // A checkpoint reads the padded field back a plane at a time; the
    // restart loads it the same way.
    let dir = temp_file("emu-padded-ckpt", "restart");
    let mut args = gpu_args(grid, iters);
    args.extend([
        "--local-ranks",
        "2",
        "--gpu-layout",
        "padded",
        "--checkpoint-dir",
        dir.to_str().unwrap(),
    ]);
    let o = emu.himeno(3, &[("HIMENO_FAULT", "0:3:term")], &args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    args.extend(["--restart", "latest"]);
    let o = emu.himeno(3, &[], &args);
    assert_like_cpu(&o, &cpu, "padded, restarted");
    assert_eq!(json_ok(&o)["restarted_from"]["iteration"], 3);
    std::fs::remove_dir_all(&dir).unwrap();
}
