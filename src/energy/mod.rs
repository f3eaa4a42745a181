//! Energy per run (`--energy auto|off`): every energy counter a node
//! offers, read at the start and at the end of the timed loop only, by
//! one rank per node (its node-local leader) and, for a GPU, by the rank
//! that drives it; rank 0 sums them per node and over the job
//! ([`summary`]). Sources: Linux powercap's RAPL zones ([`powercap`]),
//! HPE Cray EX's `pm_counters` ([`cray`]) and, on GPU ranks, NVML's total
//! energy counter (`nvml`, opened at run time like the CUDA driver).
//!
//! Energy never fails a run: a counter that is missing, unreadable (RAPL
//! is root-only since Linux 5.10), that went backwards, or a timed loop
//! shorter than the counters' update period leaves the figure out and
//! says why, in one line of the report.
//!
//! `HIMENO_ENERGY_ROOT` names a folder laid out like `/sys` to read
//! instead (`class/powercap`, `cray/pm_counters`): the tests build one.
//! Each counter file is read exactly once at the start and once at the
//! end, so a test that rewrites it in between knows the delta; a run that
//! read such a tree is labelled so in its record and report.

mod counters;
pub mod cray;
#[cfg(feature = "cuda")]
mod nvml;
pub mod powercap;
pub mod summary;
mod view;

use crate::comm::Comm;
use crate::environment;
pub use counters::Role;
use counters::{Delta, FileCounter};
use std::path::PathBuf;
use std::time::Instant;
pub use summary::{EnergyRecord, NodeEnergy, SourceEnergy, summarise};
pub use view::{NodeView, RankView, SourceView};

/// `--energy`: whether the run reads the energy counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Every source the node offers; one line says when there is none.
    #[default]
    Auto,
    /// No counter is read; the record and report say nothing of energy.
    Off,
}

/// Where the node's counters are: `/sys`, or a test tree.
#[derive(Debug, Clone)]
pub struct Tree {
    /// The folder laid out like `/sys`.
    pub sys: PathBuf,
    /// Whether it is a test tree (`HIMENO_ENERGY_ROOT`).
    pub test: bool,
}

impl Tree {
    /// The tree this process reads: `HIMENO_ENERGY_ROOT`'s, else `/sys`.
    pub fn here() -> Tree {
        match environment::get_os(environment::ENERGY_ROOT) {
            Some(root) => Tree {
                sys: PathBuf::from(root),
                test: true,
            },
            None => Tree {
                sys: PathBuf::from("/sys"),
                test: false,
            },
        }
    }
}

/// A counter read at the start of the timed loop.
enum Started {
    /// A file, and its first value or why it has none.
    File(FileCounter, Result<u64, String>),
    /// A GPU, and its first value.
    #[cfg(feature = "cuda")]
    Gpu(Box<nvml::Gpu>, String, Result<u64, String>),
    /// A counter that could not be opened: name, role and why.
    Broken(String, Role, String),
}

/// The readings of one rank, started at the top of the timed loop.
pub struct Meter {
    /// Off, or a rank with nothing to read.
    host: Option<String>,
    /// Whether this rank leads its node.
    leader: bool,
    /// The tree read, when a test tree.
    test_tree: Option<String>,
    /// The counters, with their first values.
    started: Vec<Started>,
    /// The sources that did not apply.
    absent: Vec<String>,
    /// When the first reading was taken.
    at: Instant,
}

impl Meter {
    /// Reads every counter this rank is to read (`mode` auto): its node's
    /// when it is the node-local leader, its GPU's when `gpu_uuid` names
    /// the device it drives (`gpu`: the GPU backend's description of it,
    /// which names its UUID). Reads nothing with `mode` off.
    pub fn start(mode: Mode, comm: &dyn Comm, gpu: Option<&str>) -> Meter {
        let leader = comm.node_rank() == 0;
        let mut meter = Meter {
            host: (mode == Mode::Auto).then(|| comm.host()),
            leader,
            test_tree: None,
            started: Vec::new(),
            absent: Vec::new(),
            at: Instant::now(),
        };
        if mode == Mode::Off {
            return meter;
        }
        if leader {
            let tree = Tree::here();
            meter.test_tree = tree.test.then(|| tree.sys.display().to_string());
            for found in [powercap::find(&tree.sys), cray::find(&tree.sys)] {
                meter.absent.extend(found.absent);
                for (name, role, why) in found.broken {
                    meter.started.push(Started::Broken(name, role, why));
                }
                for c in found.counters {
                    let first = c.read();
                    meter.started.push(Started::File(c, first));
                }
            }
        }
        if let Some(device) = gpu {
            meter.started.push(match uuid_in(device) {
                Some(uuid) => gpu_start(uuid),
                None => Started::Broken(
                    format!("NVML ({device})"),
                    Role::Part,
                    "the CUDA driver did not give the device's UUID".into(),
                ),
            });
        }
        meter.at = Instant::now();
        meter
    }

    /// Reads every counter again and says what each did.
    pub fn finish(self) -> RankView {
        let window_s = self.at.elapsed().as_secs_f64();
        let Some(host) = self.host else {
            return RankView::default();
        };
        let mut node = Vec::new();
        let mut gpu = None;
        for s in self.started {
            match s {
                Started::File(c, first) => {
                    let end = first.and_then(|a| c.read().map(|b| (a, b)));
                    node.push(outcome(c.name, c.role, end, c.wrap_uj, None));
                }
                #[cfg(feature = "cuda")]
                Started::Gpu(g, name, first) => {
                    let end = first.and_then(|a| g.read().map(|b| (a, b)));
                    gpu = Some(outcome(name, Role::Part, end, None, g.emulated.clone()));
                }
                Started::Broken(name, role, why) => {
                    let view = outcome(name, role, Err(why), None, None);
                    if view.name.starts_with("NVML") {
                        gpu = Some(view);
                    } else {
                        node.push(view);
                    }
                }
            }
        }
        RankView {
            host,
            node: self.leader.then_some(NodeView {
                window_s,
                test_tree: self.test_tree,
                sources: node,
                absent: self.absent,
            }),
            gpu,
        }
    }
}

/// A GPU's counter opened and read, or why not.
fn gpu_start(uuid: &str) -> Started {
    let name = format!("NVML {uuid}");
    #[cfg(feature = "cuda")]
    {
        match nvml::Gpu::open(uuid) {
            Ok(g) => {
                let first = g.read();
                Started::Gpu(Box::new(g), name, first)
            }
            Err(why) => Started::Broken(name, Role::Part, why),
        }
    }
    #[cfg(not(feature = "cuda"))]
    Started::Broken(name, Role::Part, "this build has no GPU support".into())
}

/// One counter's view from its two readings.
fn outcome(
    name: String,
    role: Role,
    read: Result<(u64, u64), String>,
    wrap_uj: Option<u64>,
    emulated: Option<String>,
) -> SourceView {
    let (delta_uj, wrapped, problem) = match read {
        Ok((a, b)) => match counters::delta(a, b, wrap_uj) {
            Delta::Advanced(d) => (Some(d), false, None),
            Delta::Wrapped(d) => (Some(d), true, None),
            Delta::Backwards => (
                None,
                false,
                Some(format!(
                    "it went backwards ({a} to {b} uJ{}): reset during the run?",
                    if wrap_uj.is_some() {
                        ""
                    } else {
                        ", and it has no wrap value"
                    }
                )),
            ),
        },
        Err(why) => (None, false, Some(why)),
    };
    SourceView {
        name,
        role,
        delta_uj,
        wrapped,
        problem,
        emulated,
    }
}

/// The UUID (`GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`) in a GPU
/// backend's device description, which names it.
pub fn uuid_in(device: &str) -> Option<&str> {
    let at = device.find("GPU-")?;
    let rest = &device[at..];
    let len = 4 + rest[4..]
        .find(|c: char| !(c.is_ascii_hexdigit() || c == '-'))
        .unwrap_or(rest.len() - 4);
    (len == 40).then(|| &rest[..len])
}

/// Every rank's view on rank 0 (`None` elsewhere). Collective: one
/// gather, on every rank whatever its `--energy`, so that ranks never
/// disagree on the collectives they run.
pub fn gather(comm: &dyn Comm, mine: &RankView) -> Option<Vec<RankView>> {
    let bytes = serde_json::to_vec(mine).expect("a view encodes as JSON");
    comm.gather(&bytes).map(|all| {
        all.iter()
            .filter_map(|b| serde_json::from_slice(b).ok())
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uuid_is_found_in_a_device_description() {
        let d = "GPU 0: H100 (sm_90, 80 GiB, PCI 0000:10:00.0, GPU-00112233-4455-6677-8899-aabbccddeeff)";
        assert_eq!(uuid_in(d), Some("GPU-00112233-4455-6677-8899-aabbccddeeff"));
        assert_eq!(uuid_in("GPU 0: X (uuid unknown)"), None);
    }
}
