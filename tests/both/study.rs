//! `bench pingpong` between two ranks, on this tier's launcher.

use crate::common::{himeno, json_ok, launchers, ranks, run, scratch};

#[test]
fn pingpong_on_two_ranks_measures_small_sizes() {
    let args = [
        "bench",
        "pingpong",
        "--max-bytes",
        "1KiB",
        "--format",
        "json",
    ];
    let mut last = None;
    for launcher in launchers() {
        let v = json_ok(&run(ranks(launcher, 2, &args)));
        assert_eq!(v["kind"], "pingpong");
        let pair = &v["pairs"][0];
        assert_eq!((pair["a"].as_u64(), pair["b"].as_u64()), (Some(0), Some(1)));
        assert_eq!(pair["intra_node"], true);
        let sizes: Vec<u64> = pair["sizes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["bytes"].as_u64().unwrap())
            .collect();
        assert_eq!(sizes, [8, 16, 32, 64, 128, 256, 512, 1024], "{launcher:?}");
        assert!(v["latency_us"].as_f64().unwrap() > 0.0);
        assert!(v["bandwidth_gbytes_per_s"].as_f64().unwrap() > 0.0);
        last = Some(v);
    }
    // The report feeds the model (when this tier's build has a launcher).
    let Some(v) = last else {
        return;
    };
    let dir = scratch("pingpong");
    let file = dir.join("pp.json");
    std::fs::write(&file, v.to_string()).unwrap();
    json_ok(&run(himeno(&[
        "model",
        "--size",
        "XS",
        "--ranks",
        "2",
        "--rate-mflops",
        "1000",
        "--pingpong",
        file.to_str().unwrap(),
        "--format",
        "json",
    ])));
}
