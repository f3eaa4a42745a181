//! `--halo`: the device-direct halo paths are refused where they cannot
//! run (CPU ranks; `peer` without in-process ranks) with one line and exit
//! 2, an unknown path is a usage error, and `staged` (the default) is
//! accepted on CPU ranks, whose records name no halo path.

use crate::common::*;

/// Whether this test binary's `himeno` was built with the `cuda` feature.
const CUDA: bool = cfg!(feature = "cuda");

#[test]
fn device_halo_paths_on_cpu_ranks_are_refused_with_one_line() {
    for path in ["peer", "nccl", "mpi-device"] {
        for backend in [&[][..], &["--backend", "cpu"][..]] {
            let mut args = vec!["--grid", "9x9x9", "--iterations", "1", "--halo", path];
            args.extend(backend);
            let o = run(himeno(&args));
            assert_clean_error(
                &o,
                &[&format!("--halo {path} moves halo faces between GPUs")],
            );
        }
    }
}

#[test]
fn peer_without_in_process_ranks_is_refused_with_one_line() {
    let o = run(himeno(&[
        "--backend",
        "gpu",
        "--grid",
        "9x9x9",
        "--iterations",
        "1",
        "--halo",
        "peer",
    ]));
    // A build without `cuda` refuses the GPU backend itself first.
    let words: &[&str] = if CUDA {
        &["--halo peer copies faces between the GPUs of in-process ranks"]
    } else {
        &["--features cuda", "--halo peer"]
    };
    assert_clean_error(&o, words);
}

#[test]
fn an_unknown_halo_path_is_a_usage_error_naming_the_paths() {
    let o = run(himeno(&[
        "--grid",
        "9x9x9",
        "--iterations",
        "1",
        "--halo",
        "host",
    ]));
    assert_clean_error(&o, &["staged, peer, nccl, mpi-device"]);
}

#[test]
fn staged_on_cpu_ranks_runs_and_its_record_names_no_halo_path() {
    let r = json_ok(&run(himeno(&[
        "--grid",
        "9x9x9",
        "--iterations",
        "1",
        "--local-ranks",
        "2",
        "--halo",
        "staged",
        "--format",
        "json",
    ])));
    assert_eq!(r["backend"], "cpu", "{r}");
    assert!(r.get("halo_path").is_none(), "{r}");
    for rank in r["per_rank"].as_array().unwrap() {
        assert!(rank.get("host_waits_per_iteration").is_none(), "{rank}");
        assert!(
            rank.get("host_device_bytes_per_iteration").is_none(),
            "{rank}"
        );
    }
}
