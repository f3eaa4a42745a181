//! Memory preflight: before any rank allocates its fields, estimate the host
//! memory every rank needs and refuse the run when the ranks of a node
//! together need more than the node has available.
//!
//! Without this, a too-large grid dies in the allocator (an abort with a
//! backtrace on one rank, or the OOM killer taking the node down) instead of
//! a clear message. Two limits are checked: what the ranks of a node need
//! together against the node's available memory (`MemAvailable`, the
//! cgroup), and what each rank needs against its own process limits
//! (`ulimit -v`/`-d`), which refuse an allocation long before the node runs
//! out. The check is collective: every rank sends its need, its node's
//! available memory and its own room to rank 0, which decides for the whole
//! job and broadcasts the decision, so no rank is left waiting. The buffers
//! themselves are then allocated fallibly (`crate::machine::alloc`), so a
//! refusal the estimate missed is still an error, not an abort.

use crate::backend::Kind;
use crate::comm::Comm;
use crate::config::RunConfig;
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::grid::decomp::Block;
use crate::grid::fields::FIELDS;
use crate::machine::alloc::process_room;
use crate::machine::huge::SLACK_BYTES;
use std::collections::BTreeMap;
use std::path::Path;

/// Bytes in a GiB, for messages.
const GIB: f64 = (1u64 << 30) as f64;

/// Address space a process maps beyond the buffers counted, compared with
/// its own limits only: thread stacks, libraries loaded later, the huge-page
/// slack of each field (`SLACK_BYTES` each), the allocator's own overhead.
const PROCESS_MARGIN: u128 = (128 << 20) + FIELDS as u128 * SLACK_BYTES as u128;

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

/// A figure with where it came from.
type Sourced = (u128, String);

/// One rank's report to rank 0: its host, its need in bytes, the available
/// memory of its node and the room its own limits leave, each with its
/// source.
#[derive(Debug, Clone, PartialEq)]
struct RankReport {
    host: String,
    need: u128,
    available: Option<Sourced>,
    room: Option<Sourced>,
}

/// One node's demand and supply.
#[derive(Debug, Default, Clone, PartialEq)]
struct Node {
    ranks: usize,
    need: u128,
    available: Option<Sourced>,
}

/// Decides, from every rank's report, whether `what` (e.g. "grid 9x9x9")
/// fits; the error names the first rank or node that does not.
fn decide(what: &str, reports: &[RankReport]) -> Result<()> {
    let gib = |b: u128| b as f64 / GIB;
    for (rank, r) in reports.iter().enumerate() {
        if let Some((room, source)) = &r.room
            && r.need + PROCESS_MARGIN > *room
        {
            return Err(Error::usage(format!(
                "{what} needs {:.2} GiB of memory on rank {rank} (host {}), but its process \
                 limits leave only {:.2} GiB ({source}): raise the limit (e.g. `ulimit -v \
                 unlimited` in the job script), use a smaller problem, or spread it over \
                 more ranks",
                gib(r.need + PROCESS_MARGIN),
                r.host,
                gib(*room)
            )));
        }
    }
    let mut nodes: BTreeMap<&str, Node> = BTreeMap::new();
    for r in reports {
        let n = nodes.entry(&r.host).or_default();
        n.ranks += 1;
        n.need += r.need;
        // Ranks of one node read the same figures a moment apart; the
        // smallest is the safe one.
        if let Some(a) = &r.available
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
                "{what} needs {:.1} GiB of memory on host {host} ({} rank(s)), but only \
                 {:.1} GiB is available ({source}): use a smaller problem (--grid/--size), or \
                 spread the ranks over more nodes",
                gib(n.need),
                n.ranks,
                gib(*avail)
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
    let mut need = host_bytes(block, kind == Kind::Cpu, verify_grid).max(before.unwrap_or(0));
    if let Some(c) = &cfg.checkpoint {
        // A restart holds its owned points of `p` from the check of its
        // file until the timed loop starts.
        if c.restart.is_some() {
            need += 4 * u128::from(block.points());
        }
        check_checkpoint_dir(&c.dir, comm)?;
    }
    check_need(&format!("grid {grid}"), need, comm)
}

/// Checks, collectively, that every rank can write its files into the
/// checkpoint folder `dir`, so that a folder that cannot take them is
/// found now rather than at the first checkpoint, an hour into the run.
pub fn check_checkpoint_dir(dir: &Path, comm: &dyn Comm) -> Result<()> {
    let local = crate::checkpoint::store::check_writable(dir, comm.rank());
    crate::comm::agree(comm, local, |()| Vec::new())
}

/// Checks, collectively, that every node has `need` bytes (this rank's
/// need) for each of its ranks doing `what`, and that each rank's own
/// limits allow it.
pub fn check_need(what: &str, need: u128, comm: &dyn Comm) -> Result<()> {
    // Absent figures are two empty fields, so every line has six.
    let encode = |s: &Option<Sourced>| {
        s.as_ref()
            .map_or("\t".to_string(), |(b, src)| format!("{b}\t{src}"))
    };
    let line = format!(
        "{}\t{need}\t{}\t{}",
        comm.host(),
        encode(&available().map(|(b, s)| (b, s.to_string()))),
        encode(&process_room())
    );
    let verdict = match comm.gather(line.as_bytes()) {
        Some(all) => {
            let reports: Vec<_> = all.iter().filter_map(|b| parse_line(b)).collect();
            decide(what, &reports)
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

/// Checks `need` bytes for `what` in this process alone (a tool that runs
/// outside the job's communicator).
pub fn check_local(what: &str, need: u128) -> Result<()> {
    decide(
        what,
        &[RankReport {
            host: crate::comm::hostname(),
            need,
            available: available().map(|(b, s)| (b, s.to_string())),
            room: process_room(),
        }],
    )
}

/// Parses one rank's `host \t need \t available \t source \t room \t
/// source` line (an absent figure is two empty fields).
fn parse_line(b: &[u8]) -> Option<RankReport> {
    let s = std::str::from_utf8(b).ok()?;
    let f: Vec<&str> = s.split('\t').collect();
    let [host, need, avail, avail_src, room, room_src] = f[..] else {
        return None;
    };
    let sourced = |bytes: &str, src: &str| -> Option<Option<Sourced>> {
        if bytes.is_empty() {
            Some(None)
        } else {
            Some(Some((bytes.parse().ok()?, src.to_string())))
        }
    };
    Some(RankReport {
        host: host.to_string(),
        need: need.parse().ok()?,
        available: sourced(avail, avail_src)?,
        room: sourced(room, room_src)?,
    })
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

    fn report(host: &str, need: u128, avail: Option<u128>, room: Option<u128>) -> RankReport {
        RankReport {
            host: host.to_string(),
            need,
            available: avail.map(|b| (b, "test".to_string())),
            room: room.map(|b| (b, "ulimit".to_string())),
        }
    }

    #[test]
    fn nodes_are_summed_and_compared_with_their_memory() {
        let fits = [
            report("a", 40, Some(100), None),
            report("a", 40, Some(90), None),
            report("b", 80, Some(100), None),
        ];
        assert!(decide("grid 3x3x3", &fits).is_ok());
        let too_much = [
            report("a", 60, Some(100), None),
            report("a", 60, Some(100), None),
            report("b", 1, None, None),
        ];
        let err = decide("grid 3x3x3", &too_much).unwrap_err();
        assert!(
            matches!(&err, Error::Usage(m) if m.contains("grid 3x3x3 needs")
                && m.contains("host a (2 rank(s))")),
            "{err}"
        );
    }

    #[test]
    fn each_rank_is_held_to_its_own_process_limits() {
        let gib = 1u128 << 30;
        let fine = [report("a", gib, Some(100 * gib), Some(2 * gib))];
        assert!(decide("x", &fine).is_ok());
        // The node has room, the second rank's ulimit does not.
        let limited = [
            report("a", gib, Some(100 * gib), None),
            report("a", 2 * gib, Some(100 * gib), Some(2 * gib)),
        ];
        let err = decide("grid 9x9x9", &limited).unwrap_err();
        assert!(
            matches!(&err, Error::Usage(m) if m.contains("rank 1") && m.contains("ulimit")),
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
            parse_line(b"n1\t42\t7\tsrc\t\t"),
            Some(RankReport {
                host: "n1".into(),
                need: 42,
                available: Some((7, "src".into())),
                room: None
            })
        );
        assert_eq!(
            parse_line(b"n1\t42\t\t\t9\tlim"),
            Some(report("n1", 42, None, None)).map(|r| RankReport {
                room: Some((9, "lim".into())),
                ..r
            })
        );
        assert_eq!(parse_line(b"garbage"), None);
        assert_eq!(parse_line(b"n1\t42\tx\tsrc\t\t"), None);
    }
}
