//! `himeno bench pingpong`: MPI point-to-point latency and bandwidth
//! between rank pairs, for message sizes from a few bytes to tens of MiB.
//!
//! For each pair (rank 0 with every other rank, or neighbours 2i and 2i+1)
//! and each size, the first rank sends, the second sends the message back,
//! repeated; one-way time is half the mean round trip. Pairs run one at a
//! time, so a pair's numbers are not disturbed by other pairs' traffic.
//! Pairs on the same host are marked intra-node; under a launcher spanning
//! nodes the others cross the network.

use crate::args::LaunchArgs;
use crate::comm::{Comm, Launch};
use crate::error::{Error, Result};
use crate::machine::memory::Footprint;
use crate::output::{self, Format};
use crate::timing::{Lap, RESOLUTION_S};
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use std::process::ExitCode;

/// Layout version of the ping-pong JSON report.
pub const PINGPONG_SCHEMA: u32 = 1;

/// Largest accepted message size (1 GiB): every rank holds one buffer.
const MAX_MESSAGE: u64 = 1 << 30;

/// Most in-process ranks a ping-pong takes: pairs run one at a time, each
/// a thousand round trips per size of several microseconds between
/// threads, so 255 pairs of the smallest size take about 5 s on two cores.
const MAX_LOCAL_PINGPONG: usize = 256;

/// Which rank pairs are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pairs {
    /// Rank 0 with each other rank.
    Root,
    /// Ranks 2i and 2i+1 (an odd last rank sits out).
    Adjacent,
}

/// Options of the ping-pong benchmark.
#[derive(Debug, Args, Clone)]
pub struct PingpongArgs {
    /// Rank pairs to measure.
    #[arg(long, value_enum, default_value_t = Pairs::Root)]
    pub pairs: Pairs,
    /// Smallest message, in bytes (suffixes KiB, MiB, GiB accepted).
    #[arg(long, default_value = "8", value_parser = parse_bytes)]
    pub min_bytes: u64,
    /// Largest message, in bytes (suffixes KiB, MiB, GiB accepted).
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes)]
    pub max_bytes: u64,
    /// Output format on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// How the ranks are started.
    #[command(flatten)]
    pub launch: LaunchArgs,
}

/// One message size of one pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    /// Message size in bytes.
    pub bytes: u64,
    /// Round trips timed.
    pub reps: u64,
    /// One-way time (half a round trip) in microseconds.
    pub latency_us: f64,
    /// Bytes over the one-way time, in GB/s (1e9 bytes).
    pub bandwidth_gbytes_per_s: f64,
}

/// One measured pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairResult {
    /// Rank that starts each round trip.
    pub a: usize,
    /// Rank that answers.
    pub b: usize,
    /// Host of `a`.
    pub host_a: String,
    /// Host of `b`.
    pub host_b: String,
    /// Whether both ranks share a host.
    pub intra_node: bool,
    /// Results per message size, smallest first.
    pub sizes: Vec<SizeResult>,
}

/// The ping-pong report (`--format json`), readable by `himeno model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingpongReport {
    /// Layout version ([`PINGPONG_SCHEMA`]).
    pub schema: u32,
    /// Always `pingpong`.
    pub kind: String,
    /// Ranks in the job.
    pub ranks: usize,
    /// Host of each rank.
    pub hosts: Vec<String>,
    /// The pairs measured.
    pub pairs: Vec<PairResult>,
    /// Mean over pairs of the smallest message's one-way time, in us.
    pub latency_us: f64,
    /// Mean over pairs of the best bandwidth of any size, in GB/s.
    pub bandwidth_gbytes_per_s: f64,
}

/// Parses a byte count: a whole number with an optional binary suffix.
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => return Err(format!("'{s}': unknown unit (use B, KiB, MiB or GiB)")),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a byte count such as 4096 or 64MiB"))?;
    n.checked_mul(mult)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("'{s}' must be at least 1 byte"))
}

/// Message sizes: powers of two from `min` up to `max`, and `max` itself.
pub fn sizes(min: u64, max: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = min;
    while s < max {
        v.push(s);
        s = s.saturating_mul(2);
    }
    v.push(max);
    v
}

/// Round trips for a message of `bytes`: about 256 MiB moved each way,
/// between 5 and 1000, so small messages are averaged over many trips and
/// large ones do not take long.
pub fn reps(bytes: u64) -> u64 {
    ((256u64 << 20) / bytes.max(1)).clamp(5, 1000)
}

/// The rank pairs measured for `ranks` ranks.
pub fn pair_list(pairs: Pairs, ranks: usize) -> Vec<(usize, usize)> {
    match pairs {
        Pairs::Root => (1..ranks).map(|r| (0, r)).collect(),
        Pairs::Adjacent => (0..ranks / 2).map(|i| (2 * i, 2 * i + 1)).collect(),
    }
}

/// Runs the benchmark on `comm` and prints the report on rank 0.
pub fn run(args: &PingpongArgs, comm: &dyn Comm) -> Result<ExitCode> {
    crate::comm::agree(comm, validate(args, comm), |()| {
        vec![
            ("command", "bench pingpong".into()),
            ("pairs", format!("{:?}", args.pairs)),
            ("sizes", format!("{} to {}", args.min_bytes, args.max_bytes)),
            ("format", format!("{:?}", args.format)),
        ]
    })?;
    crate::preflight::check_need(
        &format!("ping-pong messages of {} bytes", args.max_bytes),
        Footprint::vec::<u8>(args.max_bytes as usize + crate::machine::memory::PAGE).times(2),
        comm,
    )?;
    let hosts = comm.gather(comm.host().as_bytes());
    let sizes = sizes(args.min_bytes, args.max_bytes);
    let max = args.max_bytes as usize;
    let out = Message::new(max, "the ping-pong send buffer")?;
    let mut back = Message::new(max, "the ping-pong receive buffer")?;
    let mut mine: Vec<PairResult> = Vec::new();
    let pairs = pair_list(args.pairs, comm.size());
    for (n, &(a, b)) in pairs.iter().enumerate() {
        // Pairs run one at a time: a pair's first rank starts when the
        // previous pair's first rank hands it the turn (rank 0 starts every
        // pair of `root` itself). A barrier per pair and size did the same
        // at the cost of waking every rank: 1023 pairs of in-process ranks
        // took 70 s, mostly in barriers.
        let previous = n.checked_sub(1).map(|p| pairs[p].0);
        if comm.rank() == a
            && let Some(prev) = previous.filter(|&p| p != a)
        {
            comm.recv(prev, &mut [0u8; 1]);
        }
        let mut results = Vec::with_capacity(sizes.len());
        for &bytes in &sizes {
            let (send, recv) = (&out[..bytes as usize], &mut back[..bytes as usize]);
            let n = reps(bytes);
            if comm.rank() == a {
                // One untimed round trip sets up the connection and buffers.
                comm.send(b, send);
                comm.recv(b, recv);
                let mut clock = Lap::start();
                for _ in 0..n {
                    comm.send(b, send);
                    comm.recv(b, recv);
                }
                let one_way = clock.lap() / (2 * n) as f64;
                results.push(SizeResult {
                    bytes,
                    reps: n,
                    latency_us: one_way * 1e6,
                    bandwidth_gbytes_per_s: bytes as f64 / one_way.max(RESOLUTION_S) / 1e9,
                });
            } else if comm.rank() == b {
                for _ in 0..=n {
                    comm.recv(a, recv);
                    comm.send(a, send);
                }
            }
        }
        if comm.rank() == a {
            if let Some(&(next, _)) = pairs.get(n + 1).filter(|p| p.0 != a) {
                comm.send(next, &[1u8]);
            }
            mine.push(PairResult {
                a,
                b,
                host_a: String::new(),
                host_b: String::new(),
                intra_node: false,
                sizes: results,
            });
        }
    }
    let encoded = serde_json::to_vec(&mine)
        .map_err(|e| Error::runtime(format!("cannot encode ping-pong results: {e}")))?;
    let gathered = comm.gather(&encoded);
    if let (Some(hosts), Some(all)) = (hosts, gathered) {
        let hosts: Vec<String> = hosts
            .iter()
            .map(|h| String::from_utf8_lossy(h).into_owned())
            .collect();
        let mut pairs: Vec<PairResult> = Vec::new();
        for part in all {
            let v: Vec<PairResult> = serde_json::from_slice(&part)
                .map_err(|e| Error::runtime(format!("bad ping-pong results: {e}")))?;
            pairs.extend(v);
        }
        pairs.sort_by_key(|p| (p.a, p.b));
        for p in &mut pairs {
            p.host_a = hosts[p.a].clone();
            p.host_b = hosts[p.b].clone();
            p.intra_node = p.host_a == p.host_b;
        }
        let report = summarise(comm.size(), hosts, pairs);
        print(&report, args.format)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A message buffer as the Intel MPI Benchmarks keep theirs: one for
/// sending and one for receiving, starting on a page boundary, every page
/// written before the first message. A single buffer fresh from the
/// allocator sent pages the process had never touched (the kernel's shared
/// zero page) and, off the page boundary, one page more per message,
/// which Open MPI's single-copy path pays per page.
struct Message {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl Message {
    /// A written, page-aligned buffer of `len` bytes.
    fn new(len: usize, what: &str) -> Result<Message> {
        let page = crate::machine::memory::PAGE;
        let mut buf: Vec<u8> = crate::machine::alloc::filled(len + page, 1, what)?;
        let start = buf.as_mut_ptr().align_offset(page);
        Ok(Message { buf, start, len })
    }
}

impl std::ops::Deref for Message {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for Message {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// This rank's own check of the options.
fn validate(args: &PingpongArgs, comm: &dyn Comm) -> Result<()> {
    if args.min_bytes > args.max_bytes {
        return Err(Error::usage(format!(
            "--min-bytes {} is larger than --max-bytes {}",
            args.min_bytes, args.max_bytes
        )));
    }
    if args.max_bytes > MAX_MESSAGE {
        return Err(Error::usage(format!(
            "--max-bytes {} is more than 1GiB",
            args.max_bytes
        )));
    }
    if comm.size() < 2 {
        return Err(Error::usage(
            "ping-pong needs at least 2 ranks: start it under a launcher, \
             e.g. `mpirun -np 2 himeno bench pingpong`",
        ));
    }
    if comm.launch() == Launch::Threads && comm.size() > MAX_LOCAL_PINGPONG {
        return Err(Error::usage(format!(
            "ping-pong with --local-ranks {} would run its {} pairs one after another, a \
             thousand round trips per size each: at most {MAX_LOCAL_PINGPONG} in-process \
             ranks (or start the ranks under a launcher)",
            comm.size(),
            pair_list(args.pairs, comm.size()).len()
        )));
    }
    Ok(())
}

/// Builds the report with its summary numbers.
pub fn summarise(ranks: usize, hosts: Vec<String>, pairs: Vec<PairResult>) -> PingpongReport {
    let n = pairs.len().max(1) as f64;
    let latency_us = pairs
        .iter()
        .filter_map(|p| p.sizes.first())
        .map(|s| s.latency_us)
        .fold(0.0, |a, b| a + b)
        / n;
    let bandwidth = pairs
        .iter()
        .map(|p| {
            p.sizes
                .iter()
                .map(|s| s.bandwidth_gbytes_per_s)
                .fold(0.0, f64::max)
        })
        .fold(0.0, |a, b| a + b)
        / n;
    PingpongReport {
        schema: PINGPONG_SCHEMA,
        kind: "pingpong".into(),
        ranks,
        hosts,
        pairs,
        latency_us,
        bandwidth_gbytes_per_s: bandwidth,
    }
}

/// Prints the report in `format`.
fn print(r: &PingpongReport, format: Format) -> Result<()> {
    use std::fmt::Write as _;
    let mut s = String::new();
    match format {
        Format::Json => s = output::json(r)?,
        Format::Csv => {
            s.push_str(
                "a,b,host_a,host_b,intra_node,bytes,reps,latency_us,bandwidth_gbytes_per_s\n",
            );
            for p in &r.pairs {
                for x in &p.sizes {
                    let _ = writeln!(
                        s,
                        "{},{},{},{},{},{},{},{:.4},{:.4}",
                        p.a,
                        p.b,
                        p.host_a,
                        p.host_b,
                        p.intra_node,
                        x.bytes,
                        x.reps,
                        x.latency_us,
                        x.bandwidth_gbytes_per_s
                    );
                }
            }
        }
        Format::Text => {
            let mut distinct = r.hosts.clone();
            distinct.sort();
            distinct.dedup();
            let _ = writeln!(
                s,
                "MPI ping-pong: {} ranks on {} host(s); one-way time = half a round trip, \
                 GB/s = 1e9 bytes/s",
                r.ranks,
                distinct.len()
            );
            for p in &r.pairs {
                let _ = writeln!(
                    s,
                    "\npair {} <-> {}  ({}: {} / {})",
                    p.a,
                    p.b,
                    if p.intra_node {
                        "intra-node"
                    } else {
                        "inter-node"
                    },
                    p.host_a,
                    p.host_b
                );
                let _ = writeln!(
                    s,
                    " {:>12} {:>6} {:>12} {:>10}",
                    "bytes", "reps", "one-way us", "GB/s"
                );
                for x in &p.sizes {
                    let _ = writeln!(
                        s,
                        " {:>12} {:>6} {:>12.3} {:>10.3}",
                        x.bytes, x.reps, x.latency_us, x.bandwidth_gbytes_per_s
                    );
                }
            }
            let _ = writeln!(
                s,
                "\nsummary: latency {:.3} us (smallest message), bandwidth {:.3} GB/s \
                 (best size), means over pairs",
                r.latency_us, r.bandwidth_gbytes_per_s
            );
        }
    }
    output::print_report(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse() {
        assert_eq!(parse_bytes("8"), Ok(8));
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("4 KiB"), Ok(4096));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("-3").is_err());
    }

    #[test]
    fn sizes_reps_and_pairs() {
        assert_eq!(sizes(8, 64), [8, 16, 32, 64]);
        assert_eq!(sizes(8, 100), [8, 16, 32, 64, 100]);
        assert_eq!(sizes(8, 8), [8]);
        assert_eq!(sizes(8, 64 << 20).len(), 24);
        assert_eq!((reps(8), reps(1 << 20), reps(64 << 20)), (1000, 256, 5));
        assert_eq!(pair_list(Pairs::Root, 3), [(0, 1), (0, 2)]);
        assert_eq!(pair_list(Pairs::Adjacent, 5), [(0, 1), (2, 3)]);
    }

    #[test]
    fn summary_means_over_pairs() {
        let pair = |lat: f64, bw: f64| PairResult {
            a: 0,
            b: 1,
            host_a: "h".into(),
            host_b: "h".into(),
            intra_node: true,
            sizes: vec![
                SizeResult {
                    bytes: 8,
                    reps: 1000,
                    latency_us: lat,
                    bandwidth_gbytes_per_s: 0.01,
                },
                SizeResult {
                    bytes: 1 << 20,
                    reps: 256,
                    latency_us: 100.0,
                    bandwidth_gbytes_per_s: bw,
                },
            ],
        };
        let r = summarise(3, vec!["h".into(); 3], vec![pair(1.0, 4.0), pair(3.0, 8.0)]);
        assert_eq!((r.latency_us, r.bandwidth_gbytes_per_s), (2.0, 6.0));
    }
}
