//! Bounded property tests (proptest, a few hundred cases each, well under
//! a second apiece): the command line and its validation never panic and
//! only ever fail with a usage error on one line; reading a results-file
//! line never panics, whatever the line holds.

use crate::common::*;
use clap::Parser;
use himeno::cli::{Cli, Command};
use himeno::config::BackendKind;
use himeno::error::Error;
use himeno::report::Record;
use himeno::run::args::RunArgs;
use proptest::prelude::*;

/// Every option of the run and of the self-test, plus strays.
const OPTIONS: &[&str] = &[
    "--size",
    "--grid",
    "--procs",
    "--threads",
    "--iterations",
    "--seconds",
    "--warmup",
    "--backend",
    "--format",
    "--output",
    "--verify",
    "--bind",
    "--staging",
    "--device",
    "--overlap",
    "--stream-gbs",
    "--label",
    "-v",
    "--",
    "run",
    "selftest",
];

/// Values near the edges of what options accept.
const VALUES: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "1.5",
    "1e9",
    "1e-300",
    "NaN",
    "inf",
    "-inf",
    "4096",
    "4097",
    "1000000000",
    "1000000001",
    "18446744073709551616",
    "XS",
    "s",
    "XL",
    "XXL",
    "3x3x3",
    "2x3x3",
    "1048577x3x3",
    "0x1x1",
    "2x2x1",
    "1x1x1x1",
    "x",
    "",
    " ",
    "cpu",
    "gpu",
    "auto",
    "json",
    "text",
    "csv",
    "cores",
    "pinned",
    "/dev/null",
    "/nonexistent/x",
    "\u{0}",
    "é",
];

/// An argument: an option, an edge value, or arbitrary text.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(OPTIONS).prop_map(str::to_string),
        4 => proptest::sample::select(VALUES).prop_map(str::to_string),
        1 => proptest::collection::vec(any::<char>(), 0..12).prop_map(|v| v.into_iter().collect()),
    ]
}

/// Where a run's ranks sweep when no rank has a GPU.
fn without_probe(a: &RunArgs) -> BackendKind {
    a.backend
        .fixed(a.temporal.fixed())
        .unwrap_or(BackendKind::Cpu)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn parsing_and_validation_fail_only_with_usage_errors(
        argv in proptest::collection::vec(token(), 0..8),
        ranks in 1usize..9,
    ) {
        let full = std::iter::once("himeno".to_string()).chain(argv.iter().cloned());
        match Cli::try_parse_from(full) {
            Err(e) => {
                let line = himeno::cli::one_line(&e);
                prop_assert!(!line.contains('\n'), "{line}");
            }
            Ok(cli) => {
                let outcome = match cli.command {
                    // `auto` as the job resolves it without a GPU.
                    None => cli.run.validate(ranks, 1, without_probe(&cli.run)).map(drop),
                    Some(Command::Run(a)) => a.validate(ranks, ranks, without_probe(&a)).map(drop),
                    Some(Command::Selftest(a)) => a.resolve(ranks).map(drop),
                    Some(Command::GpuCheck(a)) => a.settings().map(drop),
                    // These validate while they run (files, ranks): their
                    // bad input is covered by the bad-input table.
                    Some(
                        Command::Report(_) | Command::Model(_) | Command::Bench(_) | Command::Plan(_),
                    ) => Ok(()),
                };
                if let Err(e) = outcome {
                    prop_assert!(matches!(e, Error::Usage(_)), "{argv:?}: {e}");
                    prop_assert!(!e.to_string().contains('\n'), "{e}");
                }
            }
        }
    }

    #[test]
    fn grids_and_triples_never_panic(s in proptest::collection::vec(
        prop_oneof![Just('x'), Just('X'), Just('-'), Just(' '), proptest::char::range('0', '9'),
                    any::<char>()],
        0..24,
    )) {
        let s: String = s.into_iter().collect();
        if let Err(e) = s.parse::<himeno::grid::Grid>() {
            prop_assert!(matches!(e, Error::Usage(_)));
        }
        let _ = himeno::grid::parse_triple(&s, "grid", "NIxNJxNK");
        let _ = s.parse::<himeno::grid::Preset>();
    }
}

/// One real record line, from a real run.
fn real_line() -> String {
    let o = run(himeno(&TINY_RUN));
    json_ok(&o);
    let rec: Record = serde_json::from_str(&stdout(&o)).expect("the report is a Record");
    serde_json::to_string(&rec).unwrap()
}

/// A mutation of a results-file line.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, char),
    Delete(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<char>()).prop_map(|(i, c)| Mutation::Insert(i, c)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
    ]
}

fn apply(line: &str, ms: &[Mutation]) -> Vec<u8> {
    let mut b = line.as_bytes().to_vec();
    for m in ms {
        let len = b.len().max(1);
        match *m {
            Mutation::Truncate(i) => b.truncate(i % len),
            Mutation::Flip(i, x) => {
                if !b.is_empty() {
                    let i = i % b.len();
                    b[i] ^= x;
                }
            }
            Mutation::Insert(i, c) => {
                let mut buf = [0u8; 4];
                let at = i % (b.len() + 1);
                b.splice(at..at, c.encode_utf8(&mut buf).bytes());
            }
            Mutation::Delete(i, n) => {
                let at = i % len;
                let end = (at + n).min(b.len());
                if at < end {
                    b.drain(at..end);
                }
            }
        }
    }
    b
}

#[test]
fn record_lines_parse_or_fail_without_panicking() {
    let line = real_line();
    let rec: Record = serde_json::from_str(&line).expect("a real line parses");
    assert_eq!(
        serde_json::to_string(&rec).unwrap(),
        line,
        "records round-trip"
    );
    assert!(!line.contains('\n'), "a record is one line");
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(400));
    runner
        .run(&proptest::collection::vec(mutation(), 1..4), |ms| {
            let bytes = apply(&line, &ms);
            let text = String::from_utf8_lossy(&bytes);
            if let Ok(r) = serde_json::from_str::<Record>(&text) {
                // Whatever parses must survive a round trip.
                let again = serde_json::to_string(&r).unwrap();
                prop_assert_eq!(serde_json::from_str::<Record>(&again).ok(), Some(r));
            }
            // A strict prefix of a record (a torn line) never parses.
            let cut = bytes.len() % line.len();
            if cut > 0 {
                prop_assert!(serde_json::from_slice::<Record>(&line.as_bytes()[..cut]).is_err());
            }
            Ok(())
        })
        .unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(300));
    runner
        .run(&proptest::collection::vec(any::<u8>(), 0..256), |b| {
            let _ = serde_json::from_slice::<Record>(&b);
            Ok(())
        })
        .unwrap();
}
