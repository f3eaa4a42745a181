//! `--prefetch auto|on|off`: the CPU classic sweep with or without software
//! prefetch. Beyond half the last-level cache `auto` times both kernels
//! before the rehearsal and every rank keeps the one chosen; whatever the
//! kernel, the answer is bitwise the same. Which kernel wins is the
//! machine's business, so these tests check what was timed and recorded,
//! never which one won.

use crate::common::*;

/// Each rank's placement line (`backend.detail` and threads, as printed).
fn placements(r: &serde_json::Value) -> Vec<String> {
    r["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rank| rank["placement"].as_str().unwrap().to_string())
        .collect()
}

/// Two in-process ranks of size M, 2 x 14 fields of 2.2 M points (235
/// MiB, beyond half of any last-level cache): `auto` times both kernels,
/// records the choice with its calibration, says it in one line of the
/// text report, and both ranks sweep with the kernel chosen; `on` and
/// `off` time nothing and sweep as asked; all three give the same answer.
#[test]
fn auto_times_both_kernels_beyond_the_cache_and_every_answer_is_the_same() {
    let base = [&TWO_RANKS_OF_M[..], &["--iterations", "3"]].concat();
    let json = |extra: &[&str]| {
        json_ok(&run(himeno(
            &[&base[..], extra, &["--format", "json"]].concat(),
        )))
    };
    let auto = json(&[]);
    // The default is not recorded, as before the option existed.
    assert!(auto.get("prefetch").is_none(), "{auto}");
    let choice = &auto["kernel_choice"];
    let chosen = choice["chosen"].as_str().unwrap();
    let trials = choice["trials"].as_array().unwrap();
    let timed: Vec<&str> = trials
        .iter()
        .map(|t| t["kernel"].as_str().unwrap())
        .collect();
    assert_eq!(timed, ["prefetch", "no prefetch"], "{choice}");
    assert!(
        trials.iter().all(|t| t["sweep_s"].as_f64().unwrap() > 0.0),
        "{choice}"
    );
    let reason = choice["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("{chosen} calibrated")),
        "{reason}"
    );
    for placement in placements(&auto) {
        assert_eq!(
            placement.contains("(no prefetch)"),
            chosen == "no prefetch",
            "{chosen}: {placement}"
        );
    }
    for (asked, without) in [("on", false), ("off", true)] {
        let fixed = json(&["--prefetch", asked]);
        assert_eq!(fixed["prefetch"], asked, "{fixed}");
        assert!(fixed.get("kernel_choice").is_none(), "{fixed}");
        for placement in placements(&fixed) {
            assert_eq!(placement.contains("(no prefetch)"), without, "{placement}");
        }
        assert_eq!(fixed["p_fingerprint"], auto["p_fingerprint"], "{asked}");
        assert_eq!(fixed["gosa"], auto["gosa"], "{asked}");
        assert_eq!(fixed["verified"], true, "{fixed}");
    }
    assert_eq!(auto["verified"], true, "{auto}");
    let text = stdout_ok(&run(himeno(&base)));
    let lines = lines_starting(&text, "Prefetch auto:");
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains(" calibrated"), "{text}");
}

/// Fields well inside the cache sweep without prefetch and time nothing;
/// nor does a wavefront run, which prefetches its first level anyway.
#[test]
fn auto_times_nothing_inside_the_cache_or_for_the_wavefront() {
    for extra in [&[][..], &["--prefetch", "on", "--temporal", "1"][..]] {
        let small = json_ok(&run(himeno(
            &[&IN_CACHE[..], &["--format", "json"], extra].concat(),
        )));
        assert!(small.get("kernel_choice").is_none(), "{small}");
        assert_eq!(
            placements(&small)[0].contains("(no prefetch)"),
            extra.is_empty(),
            "{small}"
        );
    }
    let blocked = json_ok(&run(himeno(&[
        "--size",
        "M",
        "--threads",
        "1",
        "--iterations",
        "4",
        "--temporal",
        "2",
        "--format",
        "json",
    ])));
    assert_eq!(blocked["temporal"], 2, "{blocked}");
    assert!(blocked.get("kernel_choice").is_none(), "{blocked}");
}
