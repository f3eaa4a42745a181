//! `--prefetch auto|on|off` and `--stores auto|streaming|cached`: the CPU
//! classic sweep with or without software prefetch, writing the new field
//! with streaming or cached stores. Beyond half the last-level cache
//! `--prefetch auto` times both kernels before the rehearsal, beyond the
//! whole of it `--stores auto` both stores, and every rank keeps the
//! variant chosen; whatever the variant, the answer is bitwise the same.
//! The temporal wavefront times its tile heights the same way. Which one
//! wins is the machine's business, so these tests check what was timed and
//! recorded, never which one won.

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

/// What run `r` timed for its `kernel_choice`, in order, and what it
/// chose (every trial timed, the reason naming the choice).
fn timed(r: &serde_json::Value) -> (Vec<String>, String) {
    let choice = &r["kernel_choice"];
    let trials = choice["trials"].as_array().unwrap();
    assert!(
        trials.iter().all(|t| t["sweep_s"].as_f64().unwrap() > 0.0),
        "{choice}"
    );
    let chosen = choice["chosen"].as_str().unwrap().to_string();
    let reason = choice["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("{chosen} calibrated")),
        "{reason}"
    );
    let names = trials
        .iter()
        .map(|t| t["kernel"].as_str().unwrap().to_string());
    (names.collect(), chosen)
}

/// Two in-process ranks of size M, 2 x 14 fields of 2.2 M points (235
/// MiB, beyond any last-level cache): `auto` times the four variants
/// (prefetch or not, streaming or cached stores), records the choice with
/// its calibration, says it in one line of the text report, and both ranks
/// sweep with the variant chosen; a fixed `--prefetch` leaves only the
/// stores to time, fixed stores and prefetch time nothing and sweep as
/// asked; every run gives the same answer.
#[test]
fn auto_times_every_variant_beyond_the_cache_and_every_answer_is_the_same() {
    let base = [&TWO_RANKS_OF_M[..], &["--iterations", "3"]].concat();
    let json = |extra: &[&str]| {
        json_ok(&run(himeno(
            &[&base[..], extra, &["--format", "json"]].concat(),
        )))
    };
    let auto = json(&[]);
    // The defaults are not recorded, as before the options existed.
    assert!(auto.get("prefetch").is_none(), "{auto}");
    let (names, chosen) = timed(&auto);
    assert_eq!(
        names,
        [
            "prefetch, streaming stores",
            "no prefetch, streaming stores",
            "prefetch, cached stores",
            "no prefetch, cached stores"
        ],
        "{auto}"
    );
    for placement in placements(&auto) {
        assert_eq!(
            placement.contains("(no prefetch)"),
            chosen.starts_with("no prefetch"),
            "{chosen}: {placement}"
        );
        assert_eq!(
            placement.contains("cached stores"),
            chosen.ends_with("cached stores"),
            "{chosen}: {placement}"
        );
    }
    assert_eq!(auto["verified"], true, "{auto}");
    let stores_only = json(&["--prefetch", "on"]);
    let (names, chosen) = timed(&stores_only);
    assert_eq!(
        names,
        ["streaming stores", "cached stores"],
        "{stores_only}"
    );
    for placement in placements(&stores_only) {
        assert!(!placement.contains("prefetch"), "{placement}");
        assert!(
            placement.contains(&format!("; {chosen};")),
            "{chosen}: {placement}"
        );
    }
    for (asked, without) in [("on", false), ("off", true)] {
        let fixed = json(&["--prefetch", asked, "--stores", "streaming"]);
        assert_eq!(fixed["prefetch"], asked, "{fixed}");
        assert!(fixed.get("kernel_choice").is_none(), "{fixed}");
        for placement in placements(&fixed) {
            assert_eq!(placement.contains("(no prefetch)"), without, "{placement}");
            assert!(placement.contains("streaming stores"), "{placement}");
        }
        assert_eq!(fixed["verified"], true, "{fixed}");
    }
    for other in [
        &stores_only,
        &json(&["--prefetch", "off", "--stores", "cached"]),
    ] {
        assert_eq!(other["p_fingerprint"], auto["p_fingerprint"], "{other}");
        assert_eq!(other["gosa"], auto["gosa"], "{other}");
    }
    let text = stdout_ok(&run(himeno(&base)));
    let lines = lines_starting(&text, "Kernel auto:");
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains(" calibrated"), "{text}");
}

/// Fields well inside the cache sweep without prefetch and time nothing.
/// A wavefront run, which prefetches its first level anyway, times its
/// tile heights instead (unless `--tile-rows` gives one), sweeps with the
/// one chosen and gives the classic answer.
#[test]
fn auto_times_nothing_inside_the_cache_and_tile_heights_for_the_wavefront() {
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
    let m = [
        "--size",
        "M",
        "--threads",
        "2",
        "--iterations",
        "4",
        "--format",
        "json",
    ];
    let json = |extra: &[&str]| json_ok(&run(himeno(&[&m[..], extra].concat())));
    let classic = json(&["--temporal", "1", "--stores", "cached"]);
    let blocked = json(&["--temporal", "2"]);
    assert_eq!(blocked["temporal"], 2, "{blocked}");
    let (names, chosen) = timed(&blocked);
    // The model's height for this machine's caches first, then up to
    // three others (half, twice, the last level's share), 4 to 32 rows.
    let heights: Vec<usize> = names
        .iter()
        .map(|n| {
            let rows = n
                .strip_prefix("tiles of ")
                .and_then(|n| n.strip_suffix(" rows"));
            rows.and_then(|r| r.parse().ok()).expect("a tile height")
        })
        .collect();
    assert!((2..=4).contains(&heights.len()), "{blocked}");
    assert!(heights.iter().all(|h| (4..=32).contains(h)), "{blocked}");
    let mut distinct = heights.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), heights.len(), "{blocked}");
    assert!(
        placements(&blocked)[0].contains(&format!(", {chosen};")),
        "{blocked}"
    );
    let given = json(&["--temporal", "2", "--tile-rows", "16"]);
    assert!(given.get("kernel_choice").is_none(), "{given}");
    assert!(
        placements(&given)[0].contains(", tiles of 16 rows;"),
        "{given}"
    );
    for r in [&blocked, &given] {
        assert_eq!(r["p_fingerprint"], classic["p_fingerprint"], "{r}");
        assert_eq!(r["gosa"], classic["gosa"], "{r}");
    }
}
