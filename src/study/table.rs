//! Rendering a grouped study as text tables, CSV or JSON.

use super::cells::{Cells, Shape, triple};
use super::group::{Group, Study};
use super::records::Scaling;
use super::records::{Malformed, RunRecord};
use crate::timing::Phase;
use serde::Serialize;
use std::fmt::Write;

/// The human tables: one per group, then the records set aside.
pub fn text(study: &Study) -> String {
    let mut s = String::new();
    for g in &study.groups {
        group_text(&mut s, g);
    }
    if !study.flagged.is_empty() {
        let _ = writeln!(s, "== set aside (not in any table) ==");
        for (r, why) in &study.flagged {
            let _ = writeln!(
                s,
                " {}  {}  grid {}  procs {}  {:.2} MFLOPS  {why}",
                r.source,
                r.label.as_deref().unwrap_or("-"),
                triple(r.grid),
                triple(r.procs),
                r.mflops
            );
        }
        let _ = writeln!(s);
    }
    s
}

fn group_text(s: &mut String, g: &Group) {
    let shape = Shape::of(g);
    let _ = writeln!(s, "== {} ==", g.title());
    text_line(s, &shape.headings());
    for r in &g.rows {
        text_line(s, &shape.row(r));
    }
    let _ = writeln!(
        s,
        " (speed-up and efficiency vs the best run at {} rank(s); phase columns: slowest rank, ms per iteration)",
        g.base_ranks
    );
    let _ = writeln!(s);
}

/// One line of a group's text table: the headings or a row, right-aligned
/// to the columns' widths.
fn text_line(s: &mut String, c: &Cells) {
    const PLACEMENT: [usize; 4] = [5, 5, 9, 14];
    const FIGURES: [usize; 7] = [4, 10, 9, 8, 6, 6, 6];
    for (cell, width) in c.placement.iter().zip(PLACEMENT) {
        let _ = write!(s, " {cell:>width$}");
    }
    for (cell, width) in c.figures.iter().zip(FIGURES) {
        let _ = write!(s, " {cell:>width$}");
    }
    s.push_str(" |");
    for cell in &c.phases {
        let _ = write!(s, " {cell:>9}");
    }
    if let Some([total, comm]) = &c.model {
        let _ = write!(s, " | {total:>11} {comm:>11}");
    }
    let _ = writeln!(s);
}

/// CSV: one line per row, with the group's columns repeated.
pub fn csv(study: &Study) -> String {
    let mut s = String::from(
        "kind,label,backend,threads_per_rank,temporal,ranks,hosts,pi,pj,pk,ni,nj,nk,runs,mflops,\
         seconds_per_iteration,speedup,efficiency,compute_share,comm_share",
    );
    for p in Phase::ALL {
        let _ = write!(s, ",slowest_{}_s_per_iteration", p.name());
    }
    s.push_str(",model_seconds_per_iteration,model_comm_share,source\n");
    for g in &study.groups {
        for r in &g.rows {
            let kind = match g.kind {
                Scaling::Strong => "strong",
                Scaling::Weak => "weak",
            };
            let _ = write!(
                s,
                "{kind},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                csv_field(&g.label),
                csv_field(&g.backend),
                g.threads_per_rank,
                g.temporal,
                r.ranks,
                r.hosts,
                r.procs[0],
                r.procs[1],
                r.procs[2],
                r.grid[0],
                r.grid[1],
                r.grid[2],
                r.runs,
                r.mflops,
                r.seconds_per_iteration,
                r.speedup,
                r.efficiency,
                r.compute_share,
                r.comm_share
            );
            for v in r.slowest_phases.values() {
                let _ = write!(s, ",{v}");
            }
            match &r.model {
                Some(m) => {
                    let _ = write!(s, ",{},{}", m.total_s, m.comm_share);
                }
                None => s.push_str(",,"),
            }
            let _ = writeln!(s, ",{}", csv_field(&r.source.to_string()));
        }
    }
    s
}

/// Quotes a CSV field when it holds a separator, quote or line break.
fn csv_field(v: &str) -> String {
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

/// A record set aside, as JSON.
#[derive(Serialize)]
struct FlaggedJson<'a> {
    source: String,
    reason: &'a str,
    label: Option<&'a str>,
    grid: [usize; 3],
    procs: [usize; 3],
    mflops: f64,
}

/// The whole study as one JSON object: groups, records set aside and
/// skipped lines.
pub fn json(study: &Study, malformed: &[Malformed]) -> serde_json::Result<String> {
    #[derive(Serialize)]
    struct Out<'a> {
        groups: &'a [Group],
        flagged: Vec<FlaggedJson<'a>>,
        malformed: &'a [Malformed],
    }
    let flagged = study
        .flagged
        .iter()
        .map(|(r, why): &(RunRecord, &'static str)| FlaggedJson {
            source: r.source.to_string(),
            reason: why,
            label: r.label.as_deref(),
            grid: r.grid,
            procs: r.procs,
            mflops: r.mflops,
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&Out {
        groups: &study.groups,
        flagged,
        malformed,
    })?;
    s.push('\n');
    Ok(s)
}
