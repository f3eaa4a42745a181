//! Known answers in `inputs/known_answers.json`: produced by the reference
//! kernel, reproduced by it here, and matched by the fast solver.
//!
//! `HIMENO_BLESS=1 cargo test --release known_answers` rewrites the file from
//! the reference kernel (review the diff: the numbers must never move).

use crate::common::*;
use himeno::grid::Grid;
use himeno::verify::{KnownAnswer, fingerprint_hex, known_answers, reference_run};

/// The cases kept: the presets the issues name, at fixed iteration counts
/// (M and L at 60 for the temporal-blocking benchmark runs).
const CASES: [([usize; 3], u64); 6] = [
    ([32, 32, 64], 100),
    ([64, 64, 128], 100),
    ([128, 128, 256], 20),
    ([9, 10, 11], 50),
    ([128, 128, 256], 60),
    ([256, 256, 512], 60),
];

fn path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("inputs/known_answers.json")
}

#[test]
fn reference_kernel_reproduces_the_stored_answers() {
    let computed: Vec<KnownAnswer> = CASES
        .iter()
        .map(|&(n, it)| {
            let a = reference_run(&Grid::new(n).unwrap(), it);
            KnownAnswer {
                grid: n,
                iterations: it,
                gosa: a.gosa,
                p_fingerprint: fingerprint_hex(a.p_fingerprint),
            }
        })
        .collect();
    if std::env::var_os("HIMENO_BLESS").is_some() {
        let text = serde_json::to_string_pretty(&computed).unwrap();
        std::fs::write(path(), text + "\n").unwrap();
    }
    assert_eq!(
        known_answers(),
        computed,
        "stored known answers differ from the reference kernel"
    );
}

#[test]
fn solver_matches_the_stored_answers() {
    for k in known_answers() {
        let grid = format!("{}x{}x{}", k.grid[0], k.grid[1], k.grid[2]);
        let it = k.iterations.to_string();
        let o = run(himeno(&[
            "--grid",
            &grid,
            "--iterations",
            &it,
            "--format",
            "json",
        ]));
        let r = json_ok(&o);
        assert_eq!(r["verification"]["against"], "known-answer", "{grid}");
        assert_eq!(
            r["verified"], true,
            "{grid}: {}",
            r["verification"]["detail"]
        );
        assert_eq!(r["p_fingerprint"], k.p_fingerprint.as_str());
    }
}

#[test]
fn known_gosa_values_are_plausible() {
    // Independent sanity check on the stored numbers: gosa falls as the
    // iteration proceeds from p = (i/(NI-1))^2 towards the steady state,
    // and stays positive.
    for k in known_answers() {
        assert!(k.gosa > 0.0 && k.gosa < 1e3, "{k:?}");
    }
}
