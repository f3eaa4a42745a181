//! Option groups that several commands' grammars flatten (`--local-ranks`;
//! `--size`, `--grid`, `--procs`) and the number parsers their counts use.
//! Each group turns into the plain value the lower layers take
//! ([`LaunchArgs::local_ranks`], [`ProblemArgs::spec`]), so that no layer
//! below the commands knows the command line.

use crate::problem::ProblemSpec;
use clap::Args;

/// How a command's ranks are started, as typed.
#[derive(Debug, Args, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchArgs {
    /// Run N ranks as threads of this process, talking through shared
    /// memory (no MPI library needed); not combinable with several MPI
    /// ranks.
    #[arg(long, value_name = "N")]
    pub local_ranks: Option<usize>,
}

/// `--size`, `--grid` and `--procs`, as typed.
#[derive(Debug, Args, Clone, Default)]
pub struct ProblemArgs {
    /// Size preset: XS, S, M, L or XL [default: M; XS for selftest].
    #[arg(long, conflicts_with = "grid")]
    pub size: Option<String>,
    /// Custom global grid NIxNJxNK (each at least 3), e.g. 130x130x258.
    #[arg(long)]
    pub grid: Option<String>,
    /// Process grid PIxPJxPK (product = number of ranks); default: chosen
    /// to minimise the halo surface (faces normal to k weighed 4x for GPU
    /// ranks and for CPU ranks with --temporal above 1, where the blocks
    /// stay thick enough for T).
    #[arg(long)]
    pub procs: Option<String>,
}

impl ProblemArgs {
    /// The options as the problem resolves them.
    pub fn spec(&self) -> ProblemSpec {
        ProblemSpec {
            size: self.size.clone(),
            grid: self.grid.clone(),
            procs: self.procs.clone(),
        }
    }
}

/// Parses a whole number for a count option (clap adds the option's name
/// and the value to the message).
pub fn whole<T: std::str::FromStr>(s: &str) -> std::result::Result<T, String> {
    let t = s.trim();
    t.parse().map_err(|_| {
        if t.starts_with('-') {
            "must not be negative: give a whole number, e.g. 10".to_string()
        } else if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            "is too large: give a smaller whole number".to_string()
        } else {
            "expected a whole number, e.g. 10".to_string()
        }
    })
}

/// Parses a real number (range checks are done in validation, with the
/// option's own limits).
pub fn number(s: &str) -> std::result::Result<f64, String> {
    s.trim()
        .parse()
        .map_err(|_| "expected a number, e.g. 60 or 0.5".to_string())
}
