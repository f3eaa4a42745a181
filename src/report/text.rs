//! The human report: the original benchmark's familiar lines, then the
//! decomposition, the phase table and the compute/communication split.

use super::Record;
use crate::comm::Launch;
use crate::energy::EnergyRecord;
use crate::temporal::Asked;
use crate::timing::Phase;
use std::fmt::Write;

/// A rank's CPU time share below which the report notes contention.
const CPU_SHARE_WARN: f64 = 0.8;
/// A rank's huge-page coverage below which the report notes it.
const HUGE_WARN: f64 = 0.8;

/// Renders `r` as the text report.
pub fn render(r: &Record) -> String {
    let mut s = String::new();
    let [ni, nj, nk] = r.grid;
    let [pi, pj, pk] = r.procs;
    let _ = writeln!(
        s,
        "himeno {} ({})",
        r.provenance.version, r.provenance.git_commit
    );
    let _ = writeln!(
        s,
        "mimax = {ni} mjmax = {nj} mkmax = {nk}   (size {}, interior {}x{}x{})",
        r.size,
        ni - 2,
        nj - 2,
        nk - 2
    );
    let _ = writeln!(
        s,
        "Process grid {pi}x{pj}x{pk} = {} ranks{}, {} {} thread(s) per rank, hosts: {}",
        r.ranks,
        if r.launch == Launch::Threads {
            " (in-process threads)"
        } else {
            ""
        },
        r.threads_per_rank,
        r.backend.name(),
        r.provenance.hosts.join(",")
    );
    if let Some(st) = r.staging {
        // A device-direct path is named after the staging it replaces;
        // staged runs keep the line they always had.
        let path = r
            .halo_path
            .filter(|h| h.device_direct())
            .map_or(String::new(), |h| format!(", halo path: {}", h.name()));
        let _ = writeln!(
            s,
            "GPU halo staging: {}, overlap: {}{path}",
            st.name(),
            r.overlap
        );
    }
    // An emulated device counts what the host waited for and copied: the
    // most of any rank, per steady-state iteration.
    let counted = |f: fn(&crate::report::record::RankRecord) -> Option<u64>| {
        r.per_rank.iter().filter_map(f).max()
    };
    if let (Some(w), Some(b)) = (
        counted(|x| x.host_waits_per_iteration),
        counted(|x| x.host_device_bytes_per_iteration),
    ) {
        let _ = writeln!(
            s,
            "Host traffic per iteration (EMULATED device's count, most of any rank): {w} host \
             wait(s), {b} host<->device bytes"
        );
    }
    if r.temporal > 1 {
        let _ = writeln!(
            s,
            "Temporal blocking: {} sweeps per halo exchange. The answer is the classic one \
             (bitwise), computed with fewer memory passes: this score is not comparable with \
             classic Himeno scores.",
            r.temporal
        );
    }
    if let Some(c) = &r.temporal_choice {
        let _ = if c.asked == Asked::Auto {
            writeln!(
                s,
                "Temporal auto: {} sweep(s) per halo exchange; {}{}",
                c.sweeps,
                c.reason,
                sampled(c.trials.iter().any(|t| t.sample_scale.is_some()))
            )
        } else {
            writeln!(s, "Warning: {}", c.reason)
        };
    }
    if let Some(c) = &r.kernel_choice {
        let _ = writeln!(
            s,
            "Kernel auto: {}; {}{}",
            c.chosen,
            c.reason,
            sampled(c.trials.iter().any(|t| t.sample_scale.is_some()))
        );
    }
    if r.ranks > 1 {
        let _ = writeln!(
            s,
            "Halo: {:.2} messages and {} bytes per iteration (all ranks)",
            r.halo_messages_per_iteration, r.halo_bytes_per_iteration
        );
    }
    for d in &r.provenance.devices {
        // A rank's placement names its device: an emulated one is said so
        // where a reader looks for the hardware.
        let on = |x: &&crate::report::record::RankRecord| x.placement.device.as_ref() == Some(d);
        let emulated = r.per_rank.iter().filter(on).find(|x| x.emulated);
        // The sweep variant its ranks ran (`--gpu-sweep`) and their field
        // layout (`--gpu-layout`), where recorded.
        let said = |f: fn(&crate::report::record::RankRecord) -> Option<&str>, what: &str| {
            r.per_rank
                .iter()
                .filter(on)
                .find_map(f)
                .map(|v| format!("{what} {v}"))
        };
        let terms: Vec<String> = [
            said(|x| x.gpu_sweep.as_deref(), "sweep"),
            said(|x| x.gpu_layout.as_deref(), "layout"),
        ]
        .into_iter()
        .flatten()
        .collect();
        let sweep = if terms.is_empty() {
            String::new()
        } else {
            format!(" ({})", terms.join(", "))
        };
        match emulated {
            Some(x) => {
                let _ = writeln!(
                    s,
                    "Device: {d}{sweep} -- EMULATED ({}): its times are not GPU performance",
                    x.emulator.as_deref().unwrap_or("an emulated CUDA driver")
                );
            }
            None => {
                let _ = writeln!(s, "Device: {d}{sweep}");
            }
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        " Loop executed for {} times{}",
        r.iterations,
        if r.complete {
            String::new()
        } else {
            format!(
                " (INCOMPLETE: stopped by a signal, {} planned)",
                r.planned_iterations
            )
        }
    );
    if let Some(from) = &r.restarted_from {
        let _ = writeln!(
            s,
            " Restarted from iteration {} ({}): the rates below are of the {} iterations \
             timed here",
            from.iteration,
            from.manifest,
            r.iterations.saturating_sub(from.iteration)
        );
    }
    if let Some(c) = r.checkpoints.as_ref().filter(|c| c.written > 0) {
        let _ = writeln!(
            s,
            " Checkpoints : {} written in {} ({:.3} s, not timed); last {}",
            c.written,
            c.dir,
            c.seconds,
            c.last.as_deref().unwrap_or("-")
        );
    }
    // The original's three lines, byte for byte in their number formats
    // (C's %e and %f, and the space after gosa): scripts parse them.
    let _ = writeln!(s, " Gosa : {} ", c_exp(r.gosa));
    let _ = writeln!(
        s,
        " MFLOPS measured : {:.6}\tcpu : {:.6}",
        r.mflops, r.wall_s
    );
    let _ = writeln!(s, " Score based on Pentium III 600MHz : {:.6}", r.score);
    let _ = write!(
        s,
        " Effective bandwidth : {:.2} GB/s (56 bytes/point)",
        r.gbytes_per_s
    );
    if let (Some(f), Some(t)) = (r.stream_fraction, r.stream_triad_gbytes_per_s) {
        let _ = write!(s, " = {:.1}% of stream triad {t:.2} GB/s", 100.0 * f);
    }
    if let (Some(f), Some(t)) = (r.sum13_fraction, r.stream_sum13_gbytes_per_s) {
        let _ = write!(s, ", {:.1}% of sum13 {t:.2} GB/s", 100.0 * f);
    }
    let _ = writeln!(s);
    if let Some(emu) = r.emulator() {
        let _ = writeln!(
            s,
            " Note: the GPU was EMULATED ({emu}): the rates above measure the host CPU \
             running the emulator, not GPU performance"
        );
    }
    if let Some(e) = &r.energy {
        let _ = writeln!(s, " {}", energy_line(e));
    }
    let _ = writeln!(s, " p fingerprint : {}", r.p_fingerprint);
    let verdict = match r.verified() {
        Some(true) => "VALID",
        Some(false) => "INVALID",
        None => "NOT CHECKED",
    };
    let _ = writeln!(
        s,
        " Verification : {verdict} ({}: {})",
        r.verification.against().name(),
        r.verification.detail()
    );
    // A side write that failed: the numbers above stand, but the run did
    // not do all it was asked.
    for w in &r.warnings {
        let _ = writeln!(s, " Warning : {w}");
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        " {:<10} {:>12} {:>12} {:>12} {:>14}",
        "phase", "min s", "avg s", "max s", "slowest rank s"
    );
    let slow = r.per_rank.iter().find(|x| x.rank == r.slowest_rank);
    for p in Phase::ALL {
        let st = r.phases[p];
        let sl = slow.map_or(0.0, |x| x.phases_s[p]);
        let _ = writeln!(
            s,
            " {:<10} {:>12.6} {:>12.6} {:>12.6} {:>14.6}",
            p.name(),
            st.min_s,
            st.avg_s,
            st.max_s,
            sl
        );
    }
    // Why one run is slower than another is often the machine's, not the
    // solver's: say so where the record shows it.
    for x in &r.per_rank {
        if x.cpu_share < CPU_SHARE_WARN {
            let _ = writeln!(
                s,
                " Note: rank {} ran {:.0}% of its loop time on its CPUs: other processes \
                 (this job's own ranks, when they outnumber the CPUs, or other work) ran \
                 there too",
                x.rank,
                100.0 * x.cpu_share
            );
        }
        if let Some(h) = x.huge_pages.filter(|&h| h < HUGE_WARN) {
            let _ = writeln!(
                s,
                " Note: rank {} has {:.0}% of its memory on huge pages (the kernel found too \
                 few free 2 MiB blocks); its sweep is slower for it",
                x.rank,
                100.0 * h
            );
        }
    }
    let _ = writeln!(
        s,
        " Slowest rank {}: compute {:.1}%, communication {:.1}% of its loop time",
        r.slowest_rank,
        100.0 * r.compute_share,
        100.0 * r.comm_share
    );
    if r.per_rank.len() > 1 {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            " {:>5} {:<12} {:>9} {:>14} {:>10} {:>10} {:>10} {:>5} {:>5}  placement",
            "rank", "host", "coords", "points", "loop s", "compute s", "comm s", "cpu%", "huge%"
        );
        for x in &r.per_rank {
            let comm = x.phases_s.communication();
            let _ = writeln!(
                s,
                " {:>5} {:<12} {:>9} {:>14} {:>10.4} {:>10.4} {:>10.4} {:>5.0} {:>5}  {}",
                x.rank,
                x.host,
                format!("{},{},{}", x.coords[0], x.coords[1], x.coords[2]),
                format!("{}x{}x{}", x.points[0], x.points[1], x.points[2]),
                x.loop_s,
                x.phases_s[Phase::Compute],
                comm,
                100.0 * x.cpu_share,
                x.huge_pages
                    .map_or("-".to_string(), |h| format!("{:.0}", 100.0 * h)),
                x.placement
            );
        }
    }
    s
}

/// What a calibration line adds when its times came from samples of the
/// blocks, scaled to the whole (`Backend::sample`): nothing otherwise.
fn sampled(sample: bool) -> &'static str {
    if sample {
        " (timed on samples of the blocks, scaled to the whole)"
    } else {
        ""
    }
}

/// The report's one line on energy: the job's joules, power, GFLOPS per
/// watt and joules per iteration with the counters summed, or why there
/// is no figure; a test tree's or an emulated GPU's joules say so.
pub fn energy_line(e: &EnergyRecord) -> String {
    let mut s = String::from("Energy : ");
    match (e.figures.energy_j, e.window_s) {
        (Some(j), Some(w)) => {
            let _ = write!(s, "{j:.6} J in {w:.3} s");
            if let Some(p) = e.figures.avg_power_w {
                let _ = write!(s, " = {p:.3} W");
            }
            if let Some(g) = e.figures.gflops_per_w {
                let _ = write!(s, ", {g:.6} GFLOPS/W");
            }
            if let Some(i) = e.figures.j_per_iteration {
                let _ = write!(s, ", {i:.6} J/iteration");
            }
            let _ = write!(
                s,
                " ({} node{}: {})",
                e.nodes.len(),
                if e.nodes.len() == 1 { "" } else { "s" },
                e.sources.join(" + ")
            );
        }
        _ => s.push_str("no figure"),
    }
    if !e.notes.is_empty() {
        let _ = write!(s, "; {}", e.notes.join("; "));
    }
    if let Some(t) = &e.test_tree {
        let _ = write!(s, " [TEST TREE {t}: not this machine's energy]");
    }
    if let Some(emu) = &e.emulated {
        let _ = write!(s, " [EMULATED GPU counter ({emu}): not a GPU's energy]");
    }
    s
}

/// `v` as C's `printf("%e")` writes it: six decimals and an exponent of at
/// least two digits with its sign (`6.782626e-04`; Rust's `{:.6e}` writes
/// `6.782626e-4`).
pub fn c_exp(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}").to_lowercase();
    }
    let rust = format!("{v:.6e}");
    let (mantissa, exp) = rust.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e}'s exponent is an integer");
    format!(
        "{mantissa}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Record;

    /// A record of a one-rank GPU run on `device`, its rank's GPU
    /// emulated by `emulator` when given.
    fn gpu_record(device: &str, emulator: Option<&str>) -> Record {
        let phases: serde_json::Value = Phase::ALL
            .iter()
            .map(|p| (p.name().to_string(), serde_json::json!(0.25)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        let stats: serde_json::Value = Phase::ALL
            .iter()
            .map(|p| {
                let st = serde_json::json!({"min_s": 0.25, "avg_s": 0.25, "max_s": 0.25});
                (p.name().to_string(), st)
            })
            .collect::<serde_json::Map<_, _>>()
            .into();
        let mut rank = serde_json::json!({
            "rank": 0, "host": "h", "coords": [0, 0, 0], "points": [30, 30, 62],
            "loop_s": 1.0, "phases_s": phases,
            "placement": format!("gpu x1 threads, device {device}, kernels sm_90"),
            "cpu_share": 1.0
        });
        if let Some(e) = emulator {
            rank["emulated"] = true.into();
            rank["emulator"] = e.into();
        }
        serde_json::from_value(serde_json::json!({
            "schema": 1, "timestamp": "t", "label": null, "size": "XS",
            "grid": [32, 32, 64], "procs": [1, 1, 1], "ranks": 1, "threads_per_rank": 1,
            "backend": "gpu", "iterations": 10, "planned_iterations": 10, "complete": true,
            "gosa": 1e-3, "mflops": 12.5, "score": 0.15, "wall_s": 1.0, "warmup_s": 0.3,
            "gbytes_per_s": 0.02, "stream_triad_gbytes_per_s": null, "stream_fraction": null,
            "phases": stats, "slowest_rank": 0, "compute_share": 0.5, "comm_share": 0.1,
            "halo_bytes_per_iteration": 0, "p_fingerprint": "00",
            "verified": true,
            "verification": {"verified": true, "against": "known-answer", "detail": "ok"},
            "staging": "pinned", "overlap": false, "bind": "none",
            "per_rank": [rank],
            "provenance": {"version": "0", "git_commit": "c", "features": ["cuda"],
                           "mpi_library": null, "hosts": ["h"], "devices": [device],
                           "command": ["himeno"]}
        }))
        .expect("a record")
    }

    #[test]
    fn the_device_line_names_the_sweep_variant_where_recorded() {
        let dev = "GPU 0: H100 (sm_90, 80 GiB)";
        let mut r = gpu_record(dev, None);
        r.per_rank[0].gpu_sweep = Some("pipelined".into());
        let text = render(&r);
        assert!(
            text.contains(&format!("Device: {dev} (sweep pipelined)\n")),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["per_rank"][0]["gpu_sweep"], "pipelined");
        // Records before it was recorded read back without it.
        let old = serde_json::to_value(gpu_record(dev, None)).unwrap();
        assert!(old["per_rank"][0].get("gpu_sweep").is_none());
    }

    #[test]
    fn a_device_halo_path_and_the_emulated_host_traffic_are_said_staged_unchanged() {
        let dev = "GPU 0: Emulated (sm_90, 1 GiB)";
        let staged = render(&gpu_record(dev, Some("emu")));
        assert!(
            staged.contains("GPU halo staging: pinned, overlap: false\n"),
            "{staged}"
        );
        assert!(!staged.contains("Host traffic"), "{staged}");
        let mut r = gpu_record(dev, Some("emu"));
        r.halo_path = Some(crate::config::HaloPath::Peer);
        r.per_rank[0].host_waits_per_iteration = Some(1);
        r.per_rank[0].host_device_bytes_per_iteration = Some(8);
        let text = render(&r);
        assert!(
            text.contains("GPU halo staging: pinned, overlap: false, halo path: peer\n")
                && text.contains(
                    "Host traffic per iteration (EMULATED device's count, most of any rank): 1 \
                     host wait(s), 8 host<->device bytes\n"
                ),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["halo_path"], "peer");
        assert_eq!(json["per_rank"][0]["host_waits_per_iteration"], 1);
        // Records before them read back without them.
        let old = serde_json::to_value(gpu_record(dev, None)).unwrap();
        assert!(old.get("halo_path").is_none());
        assert!(old["per_rank"][0].get("host_waits_per_iteration").is_none());
    }

    #[test]
    fn the_device_line_names_the_field_layout_where_recorded() {
        let dev = "GPU 0: H100 (sm_90, 80 GiB)";
        let mut r = gpu_record(dev, None);
        r.per_rank[0].gpu_sweep = Some("slab".into());
        r.per_rank[0].gpu_layout = Some("padded".into());
        let text = render(&r);
        assert!(
            text.contains(&format!("Device: {dev} (sweep slab, layout padded)\n")),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["per_rank"][0]["gpu_layout"], "padded");
        let back: crate::report::record::Record = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
        // Records before it was recorded read back without it.
        let old = serde_json::to_value(gpu_record(dev, None)).unwrap();
        assert!(old["per_rank"][0].get("gpu_layout").is_none());
    }

    #[test]
    fn an_emulated_device_is_said_so_on_its_line_and_by_the_rates() {
        let dev = "GPU 0: Emulated (sm_90, 1 GiB)";
        let emu = "himeno CUDA emulator (host CPU, seed 7, lazy streams)";
        let text = render(&gpu_record(dev, Some(emu)));
        assert!(
            text.contains(&format!(
                "Device: {dev} -- EMULATED ({emu}): its times are not GPU performance\n"
            )),
            "{text}"
        );
        let rates = text.find(" MFLOPS measured").unwrap();
        let note = text
            .find(" Note: the GPU was EMULATED")
            .expect("a note by the rates");
        assert!(
            note > rates && note < text.find(" p fingerprint").unwrap(),
            "{text}"
        );
        // The original's lines keep their exact form.
        assert!(text.contains(" MFLOPS measured : 12.500000\tcpu : 1.000000\n"));
        let real = render(&gpu_record(dev, None));
        assert!(real.contains(&format!("Device: {dev}\n")), "{real}");
        assert!(!real.contains("EMULATED"), "{real}");
        // The JSON carries the flag and the description on the rank only
        // when emulated.
        let json = serde_json::to_value(gpu_record(dev, Some(emu))).unwrap();
        assert_eq!(json["per_rank"][0]["emulated"], true);
        assert_eq!(json["per_rank"][0]["emulator"], emu);
        let json = serde_json::to_value(gpu_record(dev, None)).unwrap();
        assert!(json["per_rank"][0].get("emulated").is_none());
        assert!(json["per_rank"][0].get("emulator").is_none());
    }

    #[test]
    fn exponents_are_written_as_c_writes_them() {
        assert_eq!(c_exp(6.782626e-4), "6.782626e-04");
        assert_eq!(c_exp(0.0), "0.000000e+00");
        assert_eq!(c_exp(1.0), "1.000000e+00");
        assert_eq!(c_exp(-2.5e123), "-2.500000e+123");
        assert_eq!(c_exp(1.23456789e-300), "1.234568e-300");
        assert_eq!(c_exp(f64::NAN), "nan");
        assert_eq!(c_exp(f64::NEG_INFINITY), "-inf");
    }
}
