//! The GPU backend and `bench transfer`: clean errors in builds and on
//! machines without CUDA (what CI checks), and, where a GPU is present,
//! agreement with the CPU (bitwise with `--overlap` too). Tests that need a
//! device print why they skip when there is none, and fail when a GPU run
//! fails for any other reason.

use crate::both::gpu::{go, no_gpu};
use crate::common::*;
use std::process::Output;

/// Whether this test binary's `himeno` was built with the `cuda` feature.
const CUDA: bool = cfg!(feature = "cuda");

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
