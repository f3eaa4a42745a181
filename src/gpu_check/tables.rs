//! The lines and tables of the `himeno gpu-check` report, from the runs'
//! JSON records (read loosely: a missing field prints as `-`, so a record
//! of another version still gives a readable line).

use serde_json::Value;

/// The number at the dotted `path` of `v` (list indices as numbers).
pub fn num(v: &Value, path: &str) -> Option<f64> {
    at(v, path).as_f64()
}

/// The value at the dotted `path` of `v`, `Null` when absent.
pub fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| match v {
        Value::Array(a) => k
            .parse::<usize>()
            .ok()
            .and_then(|i| a.get(i))
            .unwrap_or(&Value::Null),
        _ => &v[k],
    })
}

/// A value as the report shows it: strings bare, `-` when absent.
pub fn show(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// `x` with `digits` decimals, `-` when absent.
fn fixed(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The line of a GPU run compared with its CPU reference.
pub fn comparison(name: &str, ok: bool, gpu: &Value, cpu: &Value) -> String {
    let (fp, gosa) = (show(&gpu["p_fingerprint"]), show(&gpu["gosa"]));
    if ok {
        format!("  ok    {name:<44} fingerprint {fp} gosa {gosa}")
    } else {
        format!(
            "  FAIL  {name:<44} fingerprint {fp} vs {}, gosa {gosa} vs {}, verified {}",
            show(&cpu["p_fingerprint"]),
            show(&cpu["gosa"]),
            show(&gpu["verified"]),
        )
    }
}

/// The line of a run that failed (`why` from [`super::child::Ran::why`]).
pub fn failed(name: &str, why: &str) -> String {
    format!("  FAILED {name:<40} {why}")
}

/// The `bench transfer` summary line; the device copy bandwidth in GB/s
/// (the XL table's yardstick) if the record has it.
pub fn transfer(record: &Value) -> (String, Option<f64>) {
    let peak = |k: &str| record["peak_gbytes_per_s"][k].as_f64();
    let d2d = peak("d2d/device");
    let line = format!(
        "bench transfer (peak GB/s): device copy {} (read + write); h2d pinned {}, pageable {}; \
         d2h pinned {}, pageable {}; h2d pinned latency {} us",
        fixed(d2d, 0),
        fixed(peak("h2d/pinned"), 1),
        fixed(peak("h2d/pageable"), 1),
        fixed(peak("d2h/pinned"), 1),
        fixed(peak("d2h/pageable"), 1),
        fixed(record["latency_us"]["h2d/pinned"].as_f64(), 1),
    );
    (line, d2d)
}

/// What a timing table's title adds on an emulated device.
fn emulated_note(emulated: bool) -> &'static str {
    if emulated {
        " [EMULATED device: host times, not GPU performance]"
    } else {
        ""
    }
}

/// The XL table's title and column heads.
pub fn xl_head(iterations: u64, emulated: bool) -> [String; 2] {
    [
        format!(
            "XL (512x512x1024) on one rank, {iterations} iterations, per --gpu-occupancy \
             variant:{}",
            emulated_note(emulated)
        ),
        format!(
            "  {:<9} {:>8} {:>10} {:>12} {:>14} {:>14}",
            "occupancy", "iters", "GFLOPS", "eff. GB/s", "% of d2d copy", "compute share"
        ),
    ]
}

/// The XL table's row of variant `occ`, against the device copy
/// bandwidth `d2d`.
pub fn xl_row(occ: &str, r: &Value, d2d: Option<f64>) -> String {
    let gb = num(r, "gbytes_per_s");
    let of_copy = match (gb, d2d) {
        (Some(g), Some(d)) if d > 0.0 => format!("{:.1}%", 100.0 * g / d),
        _ => "-".into(),
    };
    format!(
        "  {occ:<9} {:>8} {:>10} {:>12} {:>14} {:>14}",
        show(&r["iterations"]),
        fixed(num(r, "mflops").map(|m| m / 1000.0), 1),
        fixed(gb, 1),
        of_copy,
        num(r, "compute_share").map_or("-".into(), |s| format!("{:.1}%", 100.0 * s)),
    )
}

/// The phases of the split table, as the record names them.
const PHASES: [&str; 6] = ["compute", "pack", "transfer", "comm", "unpack", "allreduce"];

/// The phase-split table's title and column heads.
pub fn split_head(iterations: u64, emulated: bool) -> [String; 2] {
    [
        format!(
            "L (256x256x512), {iterations} iterations, ranks sharing the GPU: ms per \
             iteration, slowest rank{}",
            emulated_note(emulated)
        ),
        format!(
            "  {:<5} {:<7} {:<9} {:<7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}",
            "ranks",
            "procs",
            "staging",
            "overlap",
            "compute",
            "pack",
            "transfer",
            "comm",
            "unpack",
            "allreduce",
            "GFLOPS"
        ),
    ]
}

/// The phase-split row of one run: the slowest rank's phases in ms per
/// iteration.
pub fn split_row(ranks: usize, procs: &str, staging: &str, overlap: bool, r: &Value) -> String {
    let iters = num(r, "iterations").filter(|&n| n > 0.0);
    let slow = r["slowest_rank"].as_u64().unwrap_or(0);
    let ms: Vec<String> = PHASES
        .iter()
        .map(|p| {
            let s = num(r, &format!("per_rank.{slow}.phases_s.{p}"));
            fixed(s.zip(iters).map(|(s, n)| s * 1000.0 / n), 3)
        })
        .collect();
    format!(
        "  {ranks:<5} {procs:<7} {staging:<9} {:<7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}",
        if overlap { "on" } else { "off" },
        ms[0],
        ms[1],
        ms[2],
        ms[3],
        ms[4],
        ms[5],
        fixed(num(r, "mflops").map(|m| m / 1000.0), 1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_reach_into_lists_and_absent_fields_print_a_dash() {
        let r = json!({"per_rank": [{"phases_s": {"compute": 0.5}}], "x": "a"});
        assert_eq!(num(&r, "per_rank.0.phases_s.compute"), Some(0.5));
        assert_eq!(num(&r, "per_rank.1.phases_s.compute"), None);
        assert_eq!(show(at(&r, "x")), "a");
        assert_eq!(show(at(&r, "y.z")), "-");
    }

    #[test]
    fn rows_divide_by_the_iterations_and_the_copy_bandwidth() {
        let r = json!({
            "iterations": 100, "mflops": 1.5e6, "gbytes_per_s": 2100.0,
            "compute_share": 0.95, "slowest_rank": 1,
            "per_rank": [{}, {"phases_s": {"compute": 0.5, "pack": 0.01, "transfer": 0.02,
                "comm": 0.03, "unpack": 0.01, "allreduce": 0.001}}]
        });
        let row = xl_row("auto", &r, Some(4200.0));
        assert!(
            row.contains("1500.0") && row.contains("50.0%") && row.contains("95.0%"),
            "{row}"
        );
        let row = split_row(2, "2x1x1", "pinned", true, &r);
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "2", "2x1x1", "pinned", "on", "5.000", "0.100", "0.200", "0.300", "0.100", "0.010",
                "1500.0"
            ]
        );
        let (line, d2d) = transfer(&json!({"peak_gbytes_per_s": {"d2d/device": 4200.0}}));
        assert_eq!(d2d, Some(4200.0));
        assert!(
            line.contains("device copy 4200") && line.contains("pageable -"),
            "{line}"
        );
    }
}
