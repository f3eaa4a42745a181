//! `himeno model --gpu`: the GPU sweep's model (docs/gpu.md) printed per
//! sweep variant and occupancy beside each device's copy-bandwidth
//! ceiling, with the layouts' sectors per request, and refused beside a
//! single-rank compute rate; with several ranks, each `--halo` path's
//! iteration and strong scaling (`study::gpu_halo_model`).

use crate::common::*;

#[test]
fn model_gpu_prints_every_variant_beside_the_ceilings() {
    let out = stdout_ok(&run(himeno(&["model", "--gpu", "--size", "XL"])));
    for sweep in himeno::config::SweepVariant::ALL {
        for occ in himeno::config::Occupancy::ALL {
            let row = format!("  H200      {:<14} {:<9} ", sweep.name(), occ.name());
            assert_eq!(
                out.matches(&row).count(),
                usize::from(sweep.fits(occ)),
                "{row}:\n{out}"
            );
        }
    }
    assert!(
        out.contains("copy-bandwidth ceiling on the H100 SXM: 1.80 TFLOPS"),
        "{out}"
    );
    assert!(
        out.contains("copy-bandwidth ceiling on the H200: 2.58 TFLOPS"),
        "{out}"
    );
    assert!(out.contains("exact 4.83, padded 4.34"), "{out}");
    let json: serde_json::Value = serde_json::from_str(&stdout_ok(&run(himeno(&[
        "model", "--gpu", "--size", "L", "--format", "json",
    ]))))
    .unwrap();
    assert_eq!(json["predictions"].as_array().unwrap().len(), 20, "{json}");
    let o = run(himeno(&["model", "--gpu", "--rate-mflops", "5"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("himeno:"), "{}", stderr(&o));
}

#[test]
fn model_gpu_on_several_ranks_predicts_every_halo_path_with_and_without_overlap() {
    let out = stdout_ok(&run(himeno(&[
        "model", "--gpu", "--size", "L", "--procs", "2x2x1",
    ])));
    assert!(out.contains("GPU halo model"), "{out}");
    for path in himeno::config::HaloPath::ALL {
        for overlap in ["off", "on"] {
            let row = format!("  H100 SXM  {:<10} {overlap:<7} ", path.name());
            assert_eq!(out.matches(&row).count(), 1, "{row}:\n{out}");
        }
    }
    // One rank has no halo to model.
    let one = stdout_ok(&run(himeno(&["model", "--gpu", "--size", "L"])));
    assert!(!one.contains("GPU halo model"), "{one}");
    // In JSON the paths sit in the one object; the staged path waits
    // twice per dimension step beside the sweep's and gosa's waits, the
    // device-direct peer and nccl once.
    let json: serde_json::Value = serde_json::from_str(&stdout_ok(&run(himeno(&[
        "model", "--gpu", "--size", "L", "--procs", "2x2x1", "--format", "json",
    ]))))
    .unwrap();
    let paths = json["halo_model"]["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2 * 4 * 2, "{json}");
    for p in paths {
        let waits = match p["path"].as_str().unwrap() {
            "staged" => 6.0,
            "mpi-device" => 3.0,
            _ => 1.0,
        };
        assert_eq!(p["host_waits"], waits, "{p}");
        let speedup = p["speedup"].as_f64().unwrap();
        assert!(speedup > 1.0 && speedup <= 4.0, "{p}");
    }
    // The staged path's host link from a transfer report, and a file that
    // is not one.
    let dir = scratch("gpu-model-transfer");
    let good = dir.join("transfer.json");
    std::fs::write(
        &good,
        r#"{"host":"h","device":"d","samples":[],
            "latency_us":{"h2d/pinned":20.0,"d2h/pinned":20.0},
            "peak_gbytes_per_s":{"h2d/pinned":10.0,"d2h/pinned":10.0}}"#,
    )
    .unwrap();
    // The L model on 2x2x1 with the host link of `transfer`.
    let with_transfer = |transfer: &std::path::Path, json: bool| {
        let mut args = vec!["model", "--gpu", "--size", "L", "--procs", "2x2x1"];
        if json {
            args.extend(["--format", "json"]);
        }
        args.extend(["--transfer", transfer.to_str().unwrap()]);
        run(himeno(&args))
    };
    let slow = stdout_ok(&with_transfer(&good, true));
    let slow: serde_json::Value = serde_json::from_str(&slow).unwrap();
    let staged =
        |j: &serde_json::Value| j["halo_model"]["paths"][0]["exchange_s"].as_f64().unwrap();
    assert!(
        staged(&slow) > staged(&json),
        "a slower host link moves faces slower"
    );
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{}").unwrap();
    let o = with_transfer(&bad, false);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("himeno:"), "{}", stderr(&o));
}
