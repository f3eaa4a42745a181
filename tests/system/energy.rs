//! `--energy` on a GPU rank under the emulated driver: NVML's counter
//! (the emulator's, one microjoule per kernel thread it runs) is read
//! around the timed loop, summed as the node's energy and labelled
//! emulated in the record and the report.

use crate::both::energy::long_run;
use crate::common::*;
use std::path::PathBuf;
use std::process::Command;

/// The emulated driver's folder (`scripts/cuda-emu.sh build`, into the
/// folder the emulated-GPU tests build it in), or `None` after saying why
/// `test` skips.
fn emulator(test: &str) -> Option<(PathBuf, PathBuf)> {
    if !cfg!(feature = "cuda") {
        eprintln!("SKIPPED {test}: this build has no CUDA support");
        return None;
    }
    let nvrtc = match nvrtc_wheel_dir(13) {
        Ok(d) => d.join("libnvrtc.so.13"),
        Err(e) if std::env::var_os("CI").is_some() => panic!("CI needs NVRTC 13: {e}"),
        Err(e) => {
            eprintln!("SKIPPED {test}: {e}");
            return None;
        }
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuda-emu");
    let o = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/cuda-emu.sh"))
        .arg("build")
        .env("HIMENO_EMU_DIR", &dir)
        .output()
        .expect("scripts/cuda-emu.sh");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some((dir, nvrtc))
}

#[test]
fn emulated_gpu_records_the_emulated_nvml_energy() {
    let Some((lib, nvrtc)) = emulator("emulated_gpu_records_the_emulated_nvml_energy") else {
        return;
    };
    let dir = scratch("gpu");
    let out = dir.join("results.jsonl");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    // An empty counter tree: the node's own counters (if any) stay out.
    let (o, _) = long_run(&dir, ["--grid", "33x33x65"], &|_| {}, &|opts| {
        let _ = std::fs::remove_file(&out);
        let mut cmd = himeno(opts);
        cmd.args(["--backend", "gpu", "--output", out.to_str().unwrap()])
            .env("LD_LIBRARY_PATH", &lib)
            .env("HIMENO_NVRTC_LIB", &nvrtc)
            .env("HIMENO_EMU_STATE_DIR", &state);
        cmd
    });
    let text = stdout_ok(&o);
    let r = records(&out).remove(0);
    let e = &r["energy"];
    let sources = e["sources"].as_array().expect("summed sources");
    assert_eq!(sources.len(), 1, "{e:#}");
    assert!(
        sources[0].as_str().unwrap().starts_with("NVML GPU-"),
        "{e:#}"
    );
    assert!(
        e["emulated"].as_str().unwrap().contains("emulator"),
        "{e:#}"
    );
    // The counter advanced with the kernels the timed loop ran (a
    // microjoule per thread; a thread sweeps several points).
    let j = e["energy_j"].as_f64().expect("a figure");
    assert!(j > 0.0, "{e:#}");
    assert_eq!(
        e["j_per_iteration"].as_f64(),
        Some(j / r["iterations"].as_u64().unwrap() as f64)
    );
    let node = &e["nodes"][0]["sources"][0];
    assert_eq!(node["summed"], true, "{e:#}");
    assert!(node["emulated"].is_string(), "{e:#}");
    let line = lines_starting(&text, " Energy : ");
    assert_eq!(line.len(), 1, "{text}");
    assert!(line[0].contains("[EMULATED GPU counter ("), "{}", line[0]);
}
