//! The GPU sweep's variants (`--gpu-sweep`) and its late gosa read, on the
//! emulated device (see `emulated_gpu.rs`): every variant gives the CPU's
//! field and, with the fused reduction, the same gosa bits as every other
//! on each process grid of the rank tests up to four ranks, with and
//! without `--overlap`; and every iteration's gosa, which the backend hands
//! back one round late, is that iteration's (the CPU's, to the summation
//! order's tolerance), not its neighbour's.

use super::emulated_gpu::{
    Emulator, GOSA_TOLERANCE, assert_like_cpu, cpu_reference, emulator, gpu_args,
};
use crate::common::*;
use std::collections::BTreeMap;

/// Every `--gpu-sweep` name, the classic kernel first.
pub(crate) const VARIANTS: [&str; 4] = ["classic", "pipelined", "slab", "pipelined-slab"];

/// The bits of a report's gosa and its field fingerprint.
fn answer(r: &serde_json::Value) -> (u64, String) {
    (
        r["gosa"].as_f64().expect("gosa").to_bits(),
        r["p_fingerprint"].to_string(),
    )
}

/// An emulated GPU run of `grid` for `iters` iterations on `procs` (`np`
/// in-process ranks) with field `layout`, sweep `variant` and `--overlap`
/// when `overlap`, checked against the CPU's answer `cpu`, each rank
/// naming its sweep and layout; returns the record.
pub(crate) fn variant_run(
    emu: &Emulator,
    cpu: &serde_json::Value,
    (grid, iters): (&str, &str),
    (np, procs): (usize, &str),
    (layout, variant, overlap): (&str, &str, bool),
    seed: u64,
) -> serde_json::Value {
    let ranks = np.to_string();
    let mut args = [
        gpu_args(grid, iters),
        vec![
            "--local-ranks",
            &ranks,
            "--procs",
            procs,
            "--warmup",
            "2",
            "--gpu-sweep",
            variant,
            "--gpu-layout",
            layout,
        ],
    ]
    .concat();
    if overlap {
        args.push("--overlap");
    }
    let what = format!("{grid} on {procs}, {layout}, {variant}, overlap {overlap}, seed {seed}");
    let o = emu.himeno(seed, &[], &args);
    assert_like_cpu(&o, cpu, &what);
    let r = json_ok(&o);
    for rank in r["per_rank"].as_array().unwrap() {
        assert_eq!(rank["gpu_sweep"], variant, "{what}: {rank}");
        assert_eq!(rank["gpu_layout"], layout, "{what}: {rank}");
    }
    r
}

#[test]
fn gpu_emu_variants_are_bitwise_the_classic_sweep_on_every_process_grid() {
    let Some(emu) =
        emulator("gpu_emu_variants_are_bitwise_the_classic_sweep_on_every_process_grid")
    else {
        return;
    };
    // Odd extents: uneven blocks on every split, k slabs narrower than a
    // warp. Every process grid up to four ranks runs with and without
    // overlap, the variant rotating so that each meets both modes and
    // several grids: the field must be the CPU's (bitwise) and gosa within
    // the summation order's tolerance of it.
    let size = ("11x13x17", "3");
    let cpu = cpu_reference(size.0, size.1);
    for (g, grid) in PROCESS_GRIDS.into_iter().filter(|p| p.0 <= 4).enumerate() {
        for overlap in [false, true] {
            let variant = VARIANTS[(g + 2 * usize::from(overlap)) % VARIANTS.len()];
            answer(&variant_run(
                &emu,
                &cpu,
                size,
                grid,
                ("exact", variant, overlap),
                g as u64 + 1,
            ));
        }
    }
    // Where every variant runs the same launches, gosa's bits are the
    // same: the sum's order does not depend on the kernel.
    for (grid, overlap) in [((1, "1x1x1"), false), ((4, "1x2x2"), true)] {
        let answers: Vec<(u64, String)> = VARIANTS
            .iter()
            .enumerate()
            .map(|(n, v)| {
                answer(&variant_run(
                    &emu,
                    &cpu,
                    size,
                    grid,
                    ("exact", v, overlap),
                    n as u64 + 1,
                ))
            })
            .collect();
        for (v, a) in VARIANTS.iter().zip(&answers) {
            assert_eq!(
                a, &answers[0],
                "{v} vs classic on {grid:?}, overlap {overlap}"
            );
        }
    }
}

/// Each iteration's gosa in the `RUST_LOG=himeno::solver=debug` log of a
/// run, by iteration (every rank's line must agree).
fn gosa_by_iteration(o: &std::process::Output) -> BTreeMap<u64, f64> {
    let mut out = BTreeMap::new();
    for line in stderr(o).lines().filter(|l| l.contains(" gosa iteration=")) {
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name} in {line}"))
                .to_string()
        };
        let it: u64 = field("iteration=").parse().unwrap();
        let g: f64 = field("gosa=").parse().unwrap();
        if let Some(old) = out.insert(it, g) {
            assert_eq!(
                old.to_bits(),
                g.to_bits(),
                "ranks disagree on iteration {it}"
            );
        }
    }
    out
}

#[test]
fn gpu_emu_late_gosa_is_each_iterations_own() {
    let Some(emu) = emulator("gpu_emu_late_gosa_is_each_iterations_own") else {
        return;
    };
    let (grid, iters) = ("13x11x15", "5");
    let log = [("RUST_LOG", "himeno::solver=debug")];
    let timed = ["--grid", grid, "--iterations", iters, "--warmup", "2"];
    let mut cpu = himeno(&[&["--backend", "cpu"][..], &timed].concat());
    cpu.env(log[0].0, log[0].1);
    let want = gosa_by_iteration(&run(cpu));
    assert_eq!(want.len(), 5, "{want:?}");
    // One rank: nothing waits for the sweep but gosa, so the read is
    // truly late; two with overlap: the streams meet through events.
    for (seed, extra) in [
        (1, &[][..]),
        (2, &[][..]),
        (
            1,
            &["--local-ranks", "2", "--procs", "2x1x1", "--overlap"][..],
        ),
    ] {
        let args = [&["--backend", "gpu"][..], &timed, extra].concat();
        let o = emu.himeno(seed, &log, &args);
        assert!(o.status.success(), "{}", stderr(&o));
        let got = gosa_by_iteration(&o);
        let what = format!("seed {seed} {extra:?}");
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{what}"
        );
        for (it, w) in &want {
            let g = got[it];
            assert!(
                (g - w).abs() <= GOSA_TOLERANCE * w.abs(),
                "{what}: iteration {it}: gosa {g} on the GPU, {w} on the CPU: {got:?}"
            );
        }
    }
}
