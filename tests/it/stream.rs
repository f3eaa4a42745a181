//! `himeno bench stream`, the run's `--stream quick` measurement, thread
//! pinning and its placement report, and `scripts/bench-cpu.sh`
//! (thread-count invariance of the fast sweep is in `run`). No timing is
//! asserted: only fields, validation, exact answers and the tables'
//! arithmetic.

use crate::both::stream::SMALL;
use crate::common::*;

#[test]
fn stream_json_has_every_kernel_validated() {
    let mut args = vec!["bench", "stream", "--format", "json"];
    args.extend_from_slice(&SMALL);
    let r = json_ok(&run(himeno(&args)));
    assert_eq!(r["benchmark"], "stream");
    assert_eq!(r["validated"], true);
    assert_eq!(r["write_allocate_counted"], false);
    assert_eq!(r["elements_per_rank"], 200003);
    assert_eq!(r["timed_repeats"], 2);
    assert_eq!(r["threads_per_rank"], 2);
    let kernels = r["kernels"].as_array().expect("kernels");
    let names: Vec<&str> = kernels
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["copy", "scale", "add", "triad", "sum13"]);
    for (k, bytes) in kernels.iter().zip([16.0, 16.0, 24.0, 24.0, 56.0]) {
        assert_eq!(k["bytes_per_element"].as_f64(), Some(bytes), "{k}");
        let (min, avg, max) = (
            k["min_s"].as_f64().unwrap(),
            k["avg_s"].as_f64().unwrap(),
            k["max_s"].as_f64().unwrap(),
        );
        assert!(min > 0.0 && min <= avg && avg <= max, "{k}");
        assert!(k["best_gbytes_per_s"].as_f64().unwrap() > 0.0, "{k}");
        let together = k["threads_together"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&together), "{k}");
    }
    assert_eq!(r["triad_gbytes_per_s"], kernels[3]["best_gbytes_per_s"]);
    assert_eq!(r["sum13_gbytes_per_s"], kernels[4]["best_gbytes_per_s"]);
    // The 14 f32 arrays of Sum13 hold the bytes of STREAM's three f64 ones.
    assert_eq!(r["sum13_elements_per_rank"], 3 * 8 * 200003 / 56);
    assert_eq!(r["per_rank"].as_array().unwrap().len(), 1);
    assert!(r["llc_bytes"].as_u64().unwrap() > 0);
    // STREAM's pages unless huge ones are asked for.
    assert_eq!(r["huge_pages"], false);
    args.push("--huge-pages");
    let huge = json_ok(&run(himeno(&args)));
    assert_eq!(huge["huge_pages"], true);
    assert_eq!(huge["validated"], true);
}

#[test]
fn stream_text_names_the_kernels_and_the_validation() {
    let mut args = vec!["bench", "stream", "--bind", "cores"];
    args.extend_from_slice(&SMALL);
    let o = run(himeno(&args));
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    for word in [
        "copy",
        "scale",
        "add",
        "triad",
        "sum13",
        "% of triad",
        "Solution Validates",
        "bind cores",
    ] {
        assert!(s.contains(word), "no {word} in:\n{s}");
    }
}

#[test]
fn stream_csv_has_a_row_per_kernel_and_scope() {
    let mut args = vec!["bench", "stream", "--format", "csv"];
    args.extend_from_slice(&SMALL);
    let out = stdout_ok(&run(himeno(&args)));
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("rank,host,threads,bind,kernel,"),
        "{out}"
    );
    // One rank: its five kernels, then the aggregate's five.
    assert_eq!(lines.len(), 1 + 2 * 5, "{out}");
    assert!(
        lines[4].starts_with("0,") && lines[4].contains(",triad,24,200003,"),
        "{out}"
    );
    assert!(lines[10].starts_with(",all,2,none,sum13,56,"), "{out}");
}

#[test]
fn stream_usage_errors_exit_2() {
    for bad in [
        &["--repeats", "1"][..],
        &["--elements", "0"],
        &["--threads", "0"],
        &["--format", "yaml"],
    ] {
        let mut args = vec!["bench", "stream"];
        args.extend_from_slice(bad);
        let o = run(himeno(&args));
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{bad:?}: {}", stderr(&o));
    }
}

#[test]
fn quick_stream_fills_the_fraction_in_the_report() {
    let o = run(himeno(&[
        "--size",
        "XS",
        "--iterations",
        "3",
        "--stream",
        "quick",
        "--format",
        "json",
    ]));
    let r = json_ok(&o);
    let gbs = r["gbytes_per_s"].as_f64().unwrap();
    for (ceiling, fraction) in [
        ("stream_triad_gbytes_per_s", "stream_fraction"),
        ("stream_sum13_gbytes_per_s", "sum13_fraction"),
    ] {
        let c = r[ceiling].as_f64().expect("measured");
        let frac = r[fraction].as_f64().expect("fraction");
        assert!(c > 0.0, "{r}");
        assert!((frac - gbs / c).abs() <= 1e-12 * frac.abs().max(1.0), "{r}");
    }
    // Without the option nothing is measured.
    let r = json_ok(&run(himeno(&[
        "--size",
        "XS",
        "--iterations",
        "3",
        "--format",
        "json",
    ])));
    assert!(r["stream_triad_gbytes_per_s"].is_null(), "{r}");
    assert!(r["stream_sum13_gbytes_per_s"].is_null(), "{r}");
    let o = run(himeno(&["--stream", "quick", "--stream-gbs", "10"]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// A stated cache size that is not one is refused by the run and by
/// `bench stream` before anything is sized from it.
#[test]
fn a_stated_cache_size_that_is_not_one_is_refused() {
    for bad in [
        "abc",
        "32 M",
        "1K",
        "65G",
        "-5M",
        "12X",
        "99999999999999999999G",
    ] {
        for args in [
            &["--size", "XS", "--iterations", "1"][..],
            &["bench", "stream", "--elements", "1000"],
        ] {
            let mut cmd = himeno(args);
            cmd.env("HIMENO_LLC_BYTES", bad);
            assert_clean_error(&run(cmd), &["HIMENO_LLC_BYTES", "cache size"]);
        }
    }
}

/// The JSON report of a small 2-thread run with `--bind bind`.
fn bound_run(bind: &str) -> serde_json::Value {
    json_ok(&run(himeno(&[
        "--size",
        "XS",
        "--iterations",
        "3",
        "--threads",
        "2",
        "--bind",
        bind,
        "--format",
        "json",
    ])))
}

#[test]
fn bind_cores_pins_threads_and_reports_where() {
    let r = bound_run("cores");
    assert_eq!(r["bind"], "cores");
    let placement = r["per_rank"][0]["placement"].as_str().unwrap();
    assert!(
        placement.contains("bind cores: threads on cpus") && placement.contains("kernel "),
        "{placement}"
    );
    let r = bound_run("none");
    let placement = r["per_rank"][0]["placement"].as_str().unwrap();
    assert!(
        placement.contains("bind none: threads seen on cpus"),
        "{placement}"
    );
}
