//! Memory preflight: before any rank allocates its fields, estimate the host
//! memory every rank needs and refuse the run when the ranks of a node
//! together need more than the node has available.
//!
//! Without this, a too-large grid dies in the allocator (an abort with a
//! backtrace on one rank, or the OOM killer taking the node down) instead of
//! a clear message. The check is collective: every rank sends its need and
//! its node's available memory to rank 0, which decides for the whole job
//! and broadcasts the decision, so no rank is left waiting.

use crate::backend::Kind;
use crate::comm::Comm;
use crate::config::RunConfig;
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::grid::decomp::Block;
use crate::grid::fields::FIELDS;
use std::collections::BTreeMap;
use std::path::Path;

/// Bytes in a GiB, for messages.
const GIB: f64 = (1u64 << 30) as f64;

/// Host bytes `block` needs on this rank: the fields (unless they live on a
/// device), the halo staging buffers (a send and a receive buffer per face
/// with a neighbour), the per-row residuals, the copy of `p` read back for
/// the fingerprint, and on rank 0 with `verify_grid` the reference run's own
/// fields over the whole grid.
pub fn host_bytes(block: &Block, fields_on_host: bool, verify_grid: Option<&Grid>) -> u128 {
    let dims = block.local_dims();
    let local: u128 = dims.iter().map(|&d| d as u128).product();
    let fields = FIELDS as u128;
    let mut bytes = local * 4; // the read-back copy of p
    let depth = block.depth as u128;
    if fields_on_host {
        bytes += fields * local * 4;
        // Residual sums per owned row, and with temporal blocking one set
        // more per sweep between exchanges.
        let sets = if depth > 1 { depth + 1 } else { 1 };
        bytes += (block.n[0] as u128) * (block.n[1] as u128) * 8 * sets;
    }
    for (face, _) in block.halo_faces() {
        bytes += 2 * face.len(dims) as u128 * 4 * depth;
    }
    if let Some(g) = verify_grid {
        let whole: u128 = g.n.iter().map(|&d| d as u128).product();
        bytes += fields * whole * 4;
    }
    bytes
}

/// Memory this process may still use, in bytes, and where that figure came
/// from: the smaller of `MemAvailable` and the cgroup's limit less its
/// usage. `None` when neither can be read (then nothing is refused).
pub fn available() -> Option<(u128, &'static str)> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| meminfo_available(&s))
        .map(|b| (b, "MemAvailable in /proc/meminfo"));
    let cgroup = cgroup_available().map(|b| (b, "the cgroup memory limit"));
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// `MemAvailable` from the text of `/proc/meminfo`, in bytes.
pub fn meminfo_available(text: &str) -> Option<u128> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u128 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => Some(value * 1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// The cgroup limit less current usage, in bytes, for this process's cgroup
/// (v2 `memory.max`, or v1 `memory.limit_in_bytes`); `None` if unlimited or
/// unreadable.
fn cgroup_available() -> Option<u128> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut candidates = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next()?, parts.next()?);
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            candidates.push(cgroup_pair(
                Path::new("/sys/fs/cgroup").join(path),
                "memory.max",
                "memory.current",
            ));
        } else if controllers.split(',').any(|c| c == "memory") {
            candidates.push(cgroup_pair(
                Path::new("/sys/fs/cgroup/memory").join(path),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            ));
        }
    }
    candidates.push(cgroup_pair(
        "/sys/fs/cgroup".into(),
        "memory.max",
        "memory.current",
    ));
    candidates.into_iter().flatten().min()
}

/// Limit less usage from the files `limit` and `usage` in `dir`.
fn cgroup_pair(dir: std::path::PathBuf, limit: &str, usage: &str) -> Option<u128> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let limit: u128 = read(limit)?.trim().parse().ok()?; // "max" -> None
    // cgroup v1 reports "no limit" as a huge page-rounded number.
    if limit >= 1 << 60 {
        return None;
    }
    let used: u128 = read(usage).and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    Some(limit.saturating_sub(used))
}

/// One rank's report to rank 0: its host, its need in bytes, and the
/// available memory it read with the figure's source.
type RankReport = (String, u128, Option<(u128, String)>);

/// One node's demand and supply.
#[derive(Debug, Default, Clone, PartialEq)]
struct Node {
    ranks: usize,
    need: u128,
    available: Option<(u128, String)>,
}

/// Decides, from every rank's `(host, need, available)`, whether the job
/// fits; the error names the first node that does not.
fn decide(grid: &Grid, reports: &[RankReport]) -> Result<()> {
    let mut nodes: BTreeMap<&str, Node> = BTreeMap::new();
    for (host, need, avail) in reports {
        let n = nodes.entry(host).or_default();
        n.ranks += 1;
        n.need += need;
        // Ranks of one node read the same figures a moment apart; the
        // smallest is the safe one.
        if let Some(a) = avail
            && n.available.as_ref().is_none_or(|b| a.0 < b.0)
        {
            n.available = Some(a.clone());
        }
    }
    for (host, n) in &nodes {
        if let Some((avail, source)) = &n.available
            && n.need > *avail
        {
            return Err(Error::usage(format!(
                "grid {grid} needs {:.1} GiB of memory on host {host} ({} rank(s)), but only \
                 {:.1} GiB is available ({source}): use a smaller --grid/--size, or spread \
                 the ranks over more nodes",
                n.need as f64 / GIB,
                n.ranks,
                *avail as f64 / GIB
            )));
        }
    }
    Ok(())
}

/// Checks, collectively, that every node has the memory its ranks need for
/// `block` under `cfg` with a backend of `kind`, and for `before` bytes
/// used and freed before the backend allocates (the quick stream's arrays).
/// Call it before the backend allocates.
pub fn check(
    cfg: &RunConfig,
    kind: Kind,
    block: &Block,
    before: Option<u128>,
    comm: &dyn Comm,
) -> Result<()> {
    let grid = cfg.grid();
    // Rank 0 runs the reference kernel over the whole grid when asked to
    // verify and no known answer exists; counting it always (when asked)
    // keeps the check independent of the iteration count.
    let verify_grid = (cfg.verify && comm.rank() == 0).then_some(&grid);
    let need = host_bytes(block, kind == Kind::Cpu, verify_grid).max(before.unwrap_or(0));
    check_need(&grid, need, comm)
}

/// Checks, collectively, that every node has `need` bytes (this rank's
/// need) for each of its ranks working on `grid`.
pub fn check_need(grid: &Grid, need: u128, comm: &dyn Comm) -> Result<()> {
    let avail = available();
    let line = format!(
        "{}\t{need}\t{}",
        comm.host(),
        avail.map_or(String::new(), |(b, s)| format!("{b}\t{s}"))
    );
    let verdict = match comm.gather(line.as_bytes()) {
        Some(all) => {
            let reports: Vec<_> = all.iter().filter_map(|b| parse_line(b)).collect();
            decide(grid, &reports)
        }
        None => Ok(()),
    };
    if comm.broadcast(u64::from(verdict.is_err())) != 0 {
        return Err(verdict.err().unwrap_or_else(|| {
            Error::usage("the job does not fit in memory (see rank 0's message)")
        }));
    }
    tracing::info!(need_gib = need as f64 / GIB, "memory preflight passed");
    Ok(())
}

/// Parses one rank's `host \t need [\t available \t source]` line.
fn parse_line(b: &[u8]) -> Option<RankReport> {
    let s = std::str::from_utf8(b).ok()?;
    let mut f = s.split('\t');
    let host = f.next()?.to_string();
    let need = f.next()?.parse().ok()?;
    let avail = match (f.next(), f.next()) {
        (Some(a), Some(src)) => Some((a.parse().ok()?, src.to_string())),
        _ => None,
    };
    Some((host, need, avail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::decomp::ProcGrid;

    #[test]
    fn fields_dominate_the_estimate() {
        let g = Grid::new([130, 130, 258]).unwrap();
        let b = Block::of(&g, &ProcGrid { p: [1, 1, 1] }, 0);
        let fields = 14 * 130 * 130 * 258 * 4;
        let got = host_bytes(&b, true, None);
        assert!(
            got > fields && got < fields + fields / 10,
            "{got} vs {fields}"
        );
        // A device rank keeps only staging and the read-back copy.
        assert!(host_bytes(&b, false, None) < fields / 10);
        // Verification on rank 0 doubles the need of a one-rank job.
        assert!(host_bytes(&b, true, Some(&g)) > 2 * fields);
    }

    #[test]
    fn halo_staging_is_counted_per_neighbour() {
        let g = Grid::new([12, 12, 12]).unwrap();
        let pg = ProcGrid { p: [2, 1, 1] };
        let alone = host_bytes(&Block::of(&g, &ProcGrid { p: [1, 1, 1] }, 0), false, None);
        let b = Block::of(&g, &pg, 0);
        let face = (12 * 12 * 4) as u128;
        assert_eq!(host_bytes(&b, false, None), 7 * 12 * 12 * 4 + 2 * face);
        assert_eq!(alone, 12 * 12 * 12 * 4);
    }

    #[test]
    fn huge_grids_do_not_overflow() {
        let g = Grid::new([1 << 20, 1 << 20, 1 << 20]).unwrap();
        let b = Block::of(&g, &ProcGrid { p: [1, 1, 1] }, 0);
        assert!(host_bytes(&b, true, Some(&g)) > 1u128 << 64);
    }

    #[test]
    fn nodes_are_summed_and_compared_with_their_memory() {
        let g = Grid::new([3, 3, 3]).unwrap();
        let avail = |b: u128| Some((b, "test".to_string()));
        let fits = [
            ("a".to_string(), 40, avail(100)),
            ("a".to_string(), 40, avail(90)),
            ("b".to_string(), 80, avail(100)),
        ];
        assert!(decide(&g, &fits).is_ok());
        let too_much = [
            ("a".to_string(), 60, avail(100)),
            ("a".to_string(), 60, avail(100)),
            ("b".to_string(), 1, None),
        ];
        let err = decide(&g, &too_much).unwrap_err();
        assert!(
            matches!(&err, Error::Usage(m) if m.contains("host a (2 rank(s))")),
            "{err}"
        );
    }

    #[test]
    fn meminfo_is_read_in_kibibytes() {
        let text = "MemTotal:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(meminfo_available(text), Some(2048 * 1024));
        assert_eq!(meminfo_available("MemFree: 1 kB\n"), None);
        assert!(available().is_some(), "this Linux host reports its memory");
    }

    #[test]
    fn report_lines_round_trip() {
        assert_eq!(
            parse_line(b"n1\t42\t7\tsrc"),
            Some(("n1".into(), 42, Some((7, "src".into()))))
        );
        assert_eq!(parse_line(b"n1\t42\t"), Some(("n1".into(), 42, None)));
        assert_eq!(parse_line(b"garbage"), None);
    }
}
