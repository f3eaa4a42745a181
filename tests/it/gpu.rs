//! The GPU backend and `bench transfer`: clean errors in builds and on
//! machines without CUDA (what CI checks), and, where a GPU is present,
//! agreement with the CPU (bitwise with `--overlap` too). Tests that need a
//! device print why they skip when there is none, and fail when a GPU run
//! fails for any other reason.

use crate::common::*;
use std::process::Output;
use std::sync::OnceLock;

/// Whether this test binary's `himeno` was built with the `cuda` feature.
const CUDA: bool = cfg!(feature = "cuda");

/// Runs `args` and returns the output.
fn go(args: &[&str]) -> Output {
    run(himeno(args))
}

/// `None` when a GPU run works here; why not when there is no GPU (for
/// skip notes). Any other failure panics: a GPU that is present but broken
/// (no NVRTC, kernels that do not load, a crash) must fail these tests,
/// not skip them. Probed once per test binary.
fn no_gpu() -> Option<String> {
    static PROBED: OnceLock<Option<String>> = OnceLock::new();
    PROBED
        .get_or_init(|| {
            let o = go(&["--backend", "gpu", "--size", "XS", "--iterations", "1"]);
            if o.status.success() {
                return None;
            }
            let err = stderr(&o).trim().to_string();
            assert!(
                NO_GPU_HERE.iter().any(|w| err.contains(w)),
                "a GPU run failed, and not because there is no GPU here (exit {:?}):\n{err}",
                o.status.code()
            );
            Some(err)
        })
        .clone()
}

/// Without a usable GPU, `o` must be a clean error naming what is missing:
/// the driver/NVRTC/device in a cuda build, the feature otherwise. With a
/// GPU present the check (`what`) is skipped with a printed reason.
fn assert_no_gpu_error(o: &Output, what: &str) {
    if o.status.success() {
        eprintln!("SKIPPED {what}: a GPU is present");
        return;
    }
    if CUDA {
        assert_clean_error(o, &["CUDA", "NVRTC", "device"]);
    } else {
        assert_clean_error(o, &["--features cuda"]);
    }
}

#[test]
fn gpu_backend_without_a_usable_gpu_is_a_clean_usage_error() {
    let o = go(&["--backend", "gpu", "--size", "XS", "--iterations", "2"]);
    assert_no_gpu_error(&o, "the no-GPU error check");
}

#[test]
fn auto_backend_runs_and_verifies_on_whatever_is_there() {
    let o = go(&[
        "--backend",
        "auto",
        "--grid",
        "17x19x23",
        "--iterations",
        "3",
        "--verify",
        "--format",
        "json",
    ]);
    let r = json_ok(&o);
    assert_eq!(r["verified"], true, "{r}");
    let want = if no_gpu().is_some() { "cpu" } else { "gpu" };
    assert_eq!(r["backend"], want, "{r}");
}

#[test]
fn bench_transfer_without_a_gpu_is_a_clean_error() {
    let o = go(&["bench", "transfer", "--max-bytes", "1024"]);
    assert_no_gpu_error(&o, "the bench-transfer error check");
}

#[test]
fn bench_transfer_rejects_bad_sizes() {
    let o = go(&["bench", "transfer", "--min-bytes", "64", "--max-bytes", "8"]);
    assert_clean_error(&o, &["--min-bytes"]);
}

#[test]
fn gpu_backend_fails_together_on_every_rank() {
    if !mpi_or_skip("gpu_backend_fails_together_on_every_rank") {
        eprintln!("SKIPPED: this build has no MPI");
        return;
    }
    if no_gpu().is_none() {
        eprintln!("SKIPPED the no-GPU error check on 2 ranks: a GPU is present");
        return;
    }
    let o = run(mpirun(
        2,
        &["--backend", "gpu", "--size", "XS", "--iterations", "1"],
    ));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let said = stderr(&o).matches("himeno: error").count();
    assert_eq!(said, 1, "the error must be printed once:\n{}", stderr(&o));
}

#[test]
fn bench_transfer_reports_every_series_on_a_gpu() {
    if let Some(why) = no_gpu() {
        eprintln!("SKIPPED bench transfer measurement: {why}");
        return;
    }
    assert_transfer_report(&json_ok(&go(&TRANSFER_64K)));
}

/// The JSON report of a run with `extra` options.
fn report(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--format", "json"];
    args.extend_from_slice(extra);
    json_ok(&go(&args))
}

#[test]
fn gpu_field_is_bitwise_equal_to_the_cpu() {
    if let Some(why) = no_gpu() {
        eprintln!("SKIPPED GPU vs CPU: {why}");
        return;
    }
    for grid in ["17x19x23", "32x32x64", "40x9x70"] {
        let base = ["--grid", grid, "--iterations", "6"];
        let cpu = report(&[&base[..], &["--backend", "cpu"]].concat());
        for staging in ["pinned", "pageable"] {
            let gpu = report(&[&base[..], &["--backend", "gpu", "--staging", staging]].concat());
            assert_eq!(gpu["backend"], "gpu");
            assert_eq!(cpu["p_fingerprint"], gpu["p_fingerprint"], "{grid}");
            let (a, b) = (cpu["gosa"].as_f64().unwrap(), gpu["gosa"].as_f64().unwrap());
            assert!(gosa_agrees(b, a), "{grid}: gosa {a} vs {b}");
        }
    }
}

#[test]
fn overlap_is_bitwise_equal_on_two_ranks() {
    if !mpi_or_skip("overlap_is_bitwise_equal_on_two_ranks") {
        eprintln!("SKIPPED: this build has no MPI");
        return;
    }
    if let Some(why) = no_gpu() {
        eprintln!("SKIPPED overlap check: {why}");
        return;
    }
    let mut seen = Vec::new();
    for (procs, overlap) in [("2x1x1", false), ("2x1x1", true), ("1x1x2", true)] {
        let mut args = vec![
            "--backend",
            "gpu",
            "--grid",
            "33x35x37",
            "--iterations",
            "5",
            "--procs",
            procs,
            "--verify",
            "--format",
            "json",
        ];
        if overlap {
            args.push("--overlap");
        }
        let r = json_ok(&run(mpirun(2, &args)));
        assert_eq!(r["verified"], true, "{procs} overlap {overlap}: {r}");
        seen.push(r["p_fingerprint"].clone());
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
}

#[test]
fn in_process_gpu_ranks_get_two_hardware_queues_each_unless_the_user_chose() {
    // The variable is set before anything can probe for a GPU, so the log
    // line appears whether or not one is present.
    let queues = "CUDA_DEVICE_MAX_CONNECTIONS=12";
    let gpu = [
        "-v",
        "--backend",
        "gpu",
        "--local-ranks",
        "6",
        "--grid",
        "9x9x9",
    ];
    let o = go(&[&gpu[..], &["--iterations", "1"]].concat());
    assert_eq!(stderr(&o).contains(queues), CUDA, "{}", stderr(&o));
    let mut c = himeno(&[&gpu[..], &["--iterations", "1"]].concat());
    c.env("CUDA_DEVICE_MAX_CONNECTIONS", "3");
    let o = run(c);
    assert!(!stderr(&o).contains("set CUDA_DEVICE"), "{}", stderr(&o));
    let o = go(&[
        "-v",
        "--local-ranks",
        "6",
        "--grid",
        "9x9x9",
        "--iterations",
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("CUDA_DEVICE"), "{}", stderr(&o));
}
