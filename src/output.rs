//! One output policy for every command: the report goes to standard output
//! as text, JSON or CSV (`--format`), written in one piece; logs and errors
//! go to standard error (`crate::error::print_line`, which never panics).
//!
//! A standard output that cannot take the report (a closed pipe, as in
//! `himeno | true`, or a full disk) is an error like any other: one
//! `himeno:` line on stderr and exit code 2, never a panic. A closed pipe
//! is not passed over in silence as some Unix filters do: a batch script
//! must be able to tell a delivered report from a lost one by the exit code.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether standard output was closed when the process started.
static STDOUT_CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

/// Notes whether standard output is closed; to be run before Rust's
/// runtime starts (the binary calls it from `.init_array`).
///
/// The runtime reopens a closed stdin, stdout or stderr on `/dev/null`
/// before `main`, so `himeno >&-` would write its report into
/// `/dev/null` and exit 0: a lost report that looks delivered. Only a
/// constructor that runs first can tell that from a chosen `>/dev/null`.
/// It makes one system call and an atomic store, nothing that needs the
/// runtime.
pub extern "C" fn note_closed_stdout() {
    // SAFETY: F_GETFD only reads the descriptor's flags; -1 means closed.
    let closed = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1;
    STDOUT_CLOSED_AT_START.store(closed, Ordering::SeqCst);
}

/// An error when standard output was closed at start (see
/// [`note_closed_stdout`]): every command prints a report there, and a
/// report that cannot be written is exit 2. Checked before any work.
pub fn check_stdout_open() -> Result<()> {
    if STDOUT_CLOSED_AT_START.load(Ordering::SeqCst) {
        return Err(Error::usage(
            "standard output is closed (as with '>&-'), so the report would be lost: give \
             the run a standard output ('>/dev/null' if the report is not wanted)",
        ));
    }
    Ok(())
}

/// How a command's report is printed on standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// A table or the original's familiar lines, for people.
    Text,
    /// One JSON object.
    Json,
    /// A CSV header and rows, with units in the column names.
    Csv,
}

/// `value` as pretty JSON with a final newline.
pub fn json<T: Serialize>(value: &T) -> Result<String> {
    let mut s = serde_json::to_string_pretty(value)
        .map_err(|e| Error::runtime(format!("cannot encode the report: {e}")))?;
    s.push('\n');
    Ok(s)
}

/// A CSV field, quoted when it holds a comma, quote or line break.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `v` as a message shows a number the user gave: as written for everyday
/// magnitudes, in exponent form for the tiny and huge (`1e-320`, not three
/// hundred zeros).
pub fn number(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() || a == 0.0 || (1e-4..1e15).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Writes `text` to standard output and flushes it.
pub fn print_report(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Error::runtime(format!("cannot write the report to standard output: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_messages_stay_short() {
        assert_eq!(number(60.0), "60");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(-5.0), "-5");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(1e-320), "1e-320");
        assert_eq!(number(1e300), "1e300");
    }

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
