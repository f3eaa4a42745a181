//! The lines and tables of the `himeno gpu-check` report, from the runs'
//! records read through their types ([`Record`], [`TransferReport`]): a
//! field the record lacks (a fingerprint, a transfer direction) prints as
//! `-`, and the phases are the record's own ([`Phase`]).

use crate::bench::transfer::TransferReport;
use crate::report::Record;
use crate::timing::Phase;

/// A fingerprint as the report shows it: `-` when the record has none.
fn fingerprint(r: &Record) -> &str {
    if r.p_fingerprint.is_empty() {
        "-"
    } else {
        &r.p_fingerprint
    }
}

/// A number as the record writes it (JSON's shortest form), so that the
/// report's figures are the results file's.
fn as_written(x: f64) -> String {
    serde_json::to_string(&x).unwrap_or_else(|_| "-".into())
}

/// `x` with `digits` decimals, `-` when absent.
fn fixed(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The line of a GPU run compared with its CPU reference.
pub fn comparison(name: &str, ok: bool, gpu: &Record, cpu: &Record) -> String {
    let (fp, gosa) = (fingerprint(gpu), as_written(gpu.gosa));
    if ok {
        format!("  ok    {name:<44} fingerprint {fp} gosa {gosa}")
    } else {
        format!(
            "  FAIL  {name:<44} fingerprint {fp} vs {}, gosa {gosa} vs {}, verified {}",
            fingerprint(cpu),
            as_written(cpu.gosa),
            gpu.verified().map_or("null".to_string(), |v| v.to_string()),
        )
    }
}

/// The line of a run that failed (`why` from [`super::child::Ran::why`]).
pub fn failed(name: &str, why: &str) -> String {
    format!("  FAILED {name:<40} {why}")
}

/// The `bench transfer` summary line; the device copy bandwidth in GB/s
/// (the XL table's yardstick) if the record has it.
pub fn transfer(record: &TransferReport) -> (String, Option<f64>) {
    let peak = |k: &str| record.peak_gbytes_per_s.get(k).copied();
    let d2d = peak("d2d/device");
    let line = format!(
        "bench transfer (peak GB/s): device copy {} (read + write); h2d pinned {}, pageable {}; \
         d2h pinned {}, pageable {}; h2d pinned latency {} us",
        fixed(d2d, 0),
        fixed(peak("h2d/pinned"), 1),
        fixed(peak("h2d/pageable"), 1),
        fixed(peak("d2h/pinned"), 1),
        fixed(peak("d2h/pageable"), 1),
        fixed(record.latency_us.get("h2d/pinned").copied(), 1),
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
pub fn xl_row(occ: &str, r: &Record, d2d: Option<f64>) -> String {
    let gb = r.gbytes_per_s;
    let of_copy = match d2d {
        Some(d) if d > 0.0 => format!("{:.1}%", 100.0 * gb / d),
        _ => "-".into(),
    };
    format!(
        "  {occ:<9} {:>8} {:>10} {:>12} {:>14} {:>14}",
        r.iterations,
        fixed(Some(r.mflops / 1000.0), 1),
        fixed(Some(gb), 1),
        of_copy,
        format!("{:.1}%", 100.0 * r.compute_share),
    )
}

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
            Phase::Compute.name(),
            Phase::Pack.name(),
            Phase::Transfer.name(),
            Phase::Comm.name(),
            Phase::Unpack.name(),
            Phase::Allreduce.name(),
            "GFLOPS"
        ),
    ]
}

/// The phase-split row of one run: the slowest rank's phases in ms per
/// iteration.
pub fn split_row(ranks: usize, procs: &str, staging: &str, overlap: bool, r: &Record) -> String {
    let iters = Some(r.iterations as f64).filter(|&n| n > 0.0);
    let slowest = r.per_rank.iter().find(|x| x.rank == r.slowest_rank);
    let ms: Vec<String> = Phase::ALL
        .iter()
        .map(|&p| {
            let s = slowest.map(|x| x.phases_s.get(p));
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
        fixed(Some(r.mflops / 1000.0), 1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record read from `json` (the fields a run always writes, and
    /// `more`).
    fn record(more: &str) -> Record {
        let json = format!(
            r#"{{"schema":1,"grid":[5,5,5],"procs":[1,1,1],"ranks":1,"iterations":100,
                "mflops":1.5e6,"wall_s":1.0{more}}}"#
        );
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn absent_fields_print_a_dash_and_numbers_print_as_written() {
        let a = record(r#","p_fingerprint":"ab","gosa":1e-20"#);
        let b = record("");
        let line = comparison("x", false, &a, &b);
        assert!(
            line.contains("fingerprint ab vs -, gosa 1e-20 vs 0.0, verified null"),
            "{line}"
        );
        assert!(comparison("x", true, &b, &b).contains("fingerprint - gosa 0.0"));
    }

    #[test]
    fn rows_divide_by_the_iterations_and_the_copy_bandwidth() {
        let r = record(
            r#","gbytes_per_s":2100.0,"compute_share":0.95,"slowest_rank":1,
               "per_rank":[{"rank":0},{"rank":1,"phases_s":{"compute":0.5,"pack":0.01,
               "transfer":0.02,"comm":0.03,"unpack":0.01,"allreduce":0.001}}]"#,
        );
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
        let t: TransferReport = serde_json::from_str(
            r#"{"host":"h","device":"d","samples":[],"latency_us":{},
                "peak_gbytes_per_s":{"d2d/device":4200.0}}"#,
        )
        .unwrap();
        let (line, d2d) = transfer(&t);
        assert_eq!(d2d, Some(4200.0));
        assert!(
            line.contains("device copy 4200") && line.contains("pageable -"),
            "{line}"
        );
    }
}
