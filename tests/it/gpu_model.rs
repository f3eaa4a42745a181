//! `himeno model --gpu`: the GPU sweep's model (docs/gpu.md) printed per
//! sweep variant and occupancy beside each device's copy-bandwidth
//! ceiling, with the layouts' sectors per request, and refused beside the
//! options of the network model.

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
