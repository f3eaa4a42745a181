//! CSV rendering of a record: a header with units in the column names and
//! one row, for spreadsheets and quick plotting.

use super::Record;
use crate::output::csv_field as field;
use crate::timing::Phase;

/// The header line.
pub fn header() -> String {
    let mut cols: Vec<String> = [
        "timestamp",
        "label",
        "size",
        "ni",
        "nj",
        "nk",
        "pi",
        "pj",
        "pk",
        "ranks",
        "threads_per_rank",
        "backend",
        "temporal",
        "iterations",
        "complete",
        "gosa",
        "mflops",
        "score",
        "wall_s",
        "gbytes_per_s",
        "compute_share",
        "comm_share",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for p in Phase::ALL {
        cols.push(format!("{}_max_s", p.name()));
    }
    cols.extend(
        [
            "halo_messages_per_iteration",
            "halo_bytes_per_iteration",
            "p_fingerprint",
            "verified",
        ]
        .map(String::from),
    );
    cols.join(",")
}

/// The data row of `r`.
pub fn row(r: &Record) -> String {
    let mut v: Vec<String> = vec![
        r.timestamp.clone(),
        field(r.label.as_deref().unwrap_or("")),
        field(&r.size.to_string()),
    ];
    v.extend(r.grid.iter().map(|x| x.to_string()));
    v.extend(r.procs.iter().map(|x| x.to_string()));
    v.extend([
        r.ranks.to_string(),
        r.threads_per_rank.to_string(),
        r.backend.name().to_string(),
        r.temporal.to_string(),
        r.iterations.to_string(),
        r.complete.to_string(),
        format!("{:e}", r.gosa),
        format!("{:.3}", r.mflops),
        format!("{:.4}", r.score),
        format!("{:.6}", r.wall_s),
        format!("{:.4}", r.gbytes_per_s),
        format!("{:.4}", r.compute_share),
        format!("{:.4}", r.comm_share),
    ]);
    for p in Phase::ALL {
        v.push(format!("{:.6}", r.phases[p].max_s));
    }
    v.push(format!("{}", r.halo_messages_per_iteration));
    v.push(r.halo_bytes_per_iteration.to_string());
    v.push(r.p_fingerprint.clone());
    v.push(r.verified().map_or("".to_string(), |b| b.to_string()));
    v.join(",")
}
