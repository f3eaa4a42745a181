//! The lines and tables of the `himeno gpu-check` report, from the runs'
//! records read through their types ([`Record`], [`TransferReport`]): a
//! field the record lacks (a fingerprint, a transfer direction) prints as
//! `-`, and the phases are the record's own ([`Phase`]).

use super::matrix::TimedSize;
use crate::bench::transfer::TransferReport;
use crate::config::{GpuLayout, Occupancy, SweepVariant};
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

/// The grid a timing table is on: `XL (512x512x1024)`, or the small grid
/// standing in for it in the quick mode.
fn size_title(size: TimedSize) -> String {
    match size.how {
        "--size" => match size.grid {
            "XL" => "XL (512x512x1024)".into(),
            "L" => "L (256x256x512)".into(),
            g => g.into(),
        },
        _ => format!("{} standing in for {} (--quick)", size.grid, size.label),
    }
}

/// A variants table's title and column heads.
pub fn variants_head(size: TimedSize, iterations: u64, emulated: bool) -> [String; 2] {
    [
        format!(
            "{} on one rank, {iterations} iterations, per --gpu-sweep and --gpu-occupancy \
             variant, exact rows, and padded rows (--gpu-layout) at occupancy {}:{}",
            size_title(size),
            crate::gpu_check::matrix::PADDED_OCCUPANCY.name(),
            emulated_note(emulated)
        ),
        format!(
            "  {:<14} {:<9} {:<6} {:>8} {:>10} {:>12} {:>14} {:>14}",
            "sweep",
            "occupancy",
            "layout",
            "iters",
            "GFLOPS",
            "eff. GB/s",
            "% of d2d copy",
            "compute share"
        ),
    ]
}

/// A variants table's row of sweep `sweep` with occupancy `occ` and
/// layout `layout`, against the device copy bandwidth `d2d`.
pub fn variant_row(
    (sweep, occ, layout): (SweepVariant, Occupancy, GpuLayout),
    r: &Record,
    d2d: Option<f64>,
) -> String {
    let gb = r.gbytes_per_s;
    let of_copy = match d2d {
        Some(d) if d > 0.0 => format!("{:.1}%", 100.0 * gb / d),
        _ => "-".into(),
    };
    // 14: the longest variant name, `pipelined-slab`.
    format!(
        "  {:<14} {:<9} {:<6} {:>8} {:>10} {:>12} {:>14} {:>14}",
        sweep.name(),
        occ.name(),
        layout.name(),
        r.iterations,
        fixed(Some(r.mflops / 1000.0), 1),
        fixed(Some(gb), 1),
        of_copy,
        format!("{:.1}%", 100.0 * r.compute_share),
    )
}

/// One timed variant, for the recommendation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VariantRow {
    /// `XL` or `L`.
    pub size: &'static str,
    /// The sweep variant.
    pub sweep: SweepVariant,
    /// The occupancy variant.
    pub occ: Occupancy,
    /// Its rate.
    pub gflops: f64,
    /// The field layout.
    pub layout: GpuLayout,
}

/// The options that select `r`'s variant: its sweep and occupancy, and its
/// layout when not the default.
fn options(r: &VariantRow) -> String {
    let layout = if r.layout == GpuLayout::default() {
        String::new()
    } else {
        format!(" --gpu-layout {}", r.layout.name())
    };
    format!(
        "--gpu-sweep {} --gpu-occupancy {}{layout}",
        r.sweep.name(),
        r.occ.name()
    )
}

/// The lines that say which variant should be the default on this
/// device: the fastest at XL (the size the default matters most for),
/// else at L, with its lead over the default variant. On an emulated
/// device the winner is named but not recommended: its times are the
/// host's.
pub fn recommendation(rows: &[VariantRow], emulated: bool) -> Vec<String> {
    // The first of equals (rows come default variant first): a variant
    // that is no faster never displaces the default.
    let best_of = |size: &str| {
        rows.iter()
            .filter(|r| r.size == size && r.gflops.is_finite())
            .reduce(|a, b| if b.gflops > a.gflops { b } else { a })
    };
    let Some((best, size)) = best_of("XL")
        .map(|b| (b, "XL"))
        .or_else(|| best_of("L").map(|b| (b, "L")))
    else {
        return vec!["recommended default: none (no variant was timed)".into()];
    };
    let default = rows.iter().find(|r| {
        r.size == size
            && r.sweep == SweepVariant::default()
            && r.occ == Occupancy::default()
            && r.layout == GpuLayout::default()
    });
    let lead = default
        .filter(|d| d.gflops > 0.0)
        .map_or(String::new(), |d| {
            format!(
                ", {:+.1}% against {}",
                100.0 * (best.gflops / d.gflops - 1.0),
                options(d)
            )
        });
    let at_l = if size == "XL" {
        best_of("L").map_or(String::new(), |l| {
            format!("; at L the fastest is {}", options(l))
        })
    } else {
        String::new()
    };
    let head = if emulated {
        "fastest on this EMULATED device (host times: no recommendation for a GPU)"
    } else {
        "recommended default on this device"
    };
    vec![format!(
        "{head}: {} ({:.1} GFLOPS at {size}{lead}){at_l}",
        options(best),
        best.gflops
    )]
}

/// The phase-split table's title and column heads.
pub fn split_head(size: TimedSize, iterations: u64, emulated: bool) -> [String; 2] {
    [
        format!(
            "{}, {iterations} iterations, ranks sharing the GPU: ms per iteration, slowest \
             rank{}",
            size_title(size),
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
        let row = variant_row(
            (SweepVariant::Classic, Occupancy::Auto, GpuLayout::Exact),
            &r,
            Some(4200.0),
        );
        assert!(
            row.starts_with("  classic        auto      exact "),
            "{row}"
        );
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

    #[test]
    fn the_recommendation_is_the_fastest_at_xl_beside_the_default() {
        let row = |size, occ, gflops| VariantRow {
            size,
            sweep: SweepVariant::Classic,
            occ,
            gflops,
            layout: GpuLayout::Exact,
        };
        let rows = [
            row("XL", Occupancy::Auto, 1000.0),
            row("XL", Occupancy::Blocks4, 1100.0),
            row("L", Occupancy::Blocks5, 900.0),
            row("L", Occupancy::Auto, 800.0),
        ];
        let said = recommendation(&rows, false).join("\n");
        assert!(
            said.starts_with(
                "recommended default on this device: --gpu-sweep classic \
                              --gpu-occupancy 4 (1100.0 GFLOPS at XL, +10.0% against \
                              --gpu-sweep classic --gpu-occupancy auto); at L the fastest is \
                              --gpu-sweep classic --gpu-occupancy 5"
            ),
            "{said}"
        );
        // Only L timed: L decides. Emulated: named, not recommended.
        let said = recommendation(&rows[2..], true).join("\n");
        assert!(
            said.contains("EMULATED") && said.contains("occupancy 5 (900.0 GFLOPS at L"),
            "{said}"
        );
        assert!(recommendation(&[], false)[0].contains("none"));
        // A variant only as fast as the default does not displace it.
        let tied = [
            row("XL", Occupancy::Auto, 1000.0),
            row("XL", Occupancy::Blocks4, 1000.0),
        ];
        let said = recommendation(&tied, false).join("\n");
        assert!(said.contains("--gpu-occupancy auto (1000.0"), "{said}");
        // A padded winner is named with its layout, against the exact
        // default.
        let padded = VariantRow {
            layout: GpuLayout::Padded,
            ..row("XL", Occupancy::Blocks4, 1050.0)
        };
        let said = recommendation(&[tied[0], padded], false).join("\n");
        assert!(
            said.contains(
                "--gpu-occupancy 4 --gpu-layout padded (1050.0 GFLOPS at XL, +5.0% against \
                 --gpu-sweep classic --gpu-occupancy auto)"
            ),
            "{said}"
        );
    }
}
