//! The crate's error type, how a command ended ([`Outcome`]), and the
//! one mapping of both to process exit codes ([`Outcome::code`]).
//!
//! Exit codes are part of the product's contract with batch scripts:
//! 0 success, 1 verification failed (the numbers are wrong), 2 usage or
//! runtime error (the run could not be done as asked).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Write;
use std::process::ExitCode;

/// Everything that can stop a run (serialisable: ranks that decide
/// together send rank 0's error to every rank, `crate::comm::decide`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Error {
    /// Bad input detected identically on every rank (sizes, grids, options).
    /// Every rank returns it; only rank 0 prints it.
    Usage(String),
    /// Something failed at run time (I/O, device, MPI); may be rank-local.
    Runtime(String),
    /// The computed answer is wrong (known answer, reference or NaN guard).
    Verification(String),
}

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Shorthand for a usage error.
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }

    /// Shorthand for a runtime error.
    pub fn runtime(msg: impl Into<String>) -> Self {
        Error::Runtime(msg.into())
    }

    /// The message alone, without the kind's prefix (for wrapping it in
    /// another message).
    pub fn message(&self) -> &str {
        match self {
            Error::Usage(m) | Error::Runtime(m) | Error::Verification(m) => m,
        }
    }

    /// How a command that ends with this error ended.
    pub fn outcome(&self) -> Outcome {
        match self {
            Error::Usage(_) => Outcome::BadInput,
            Error::Runtime(_) => Outcome::Failed,
            Error::Verification(_) => Outcome::Wrong,
        }
    }

    /// The exit code this error maps to (1 for verification, 2 otherwise).
    pub fn exit_code(&self) -> u8 {
        self.outcome().code()
    }

    /// The process exit code for this error.
    pub fn to_exit_code(&self) -> ExitCode {
        self.outcome().exit_code()
    }
}

/// How a command ended, as its process tells it: every command's ending,
/// and every error's ([`Error::outcome`]), maps to the exit code through
/// [`Outcome::code`] alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Done as asked, checked where it could be, every report written:
    /// exit 0.
    Done,
    /// The computed answer is wrong: exit 1.
    Wrong,
    /// Bad input (options, environment, a standard output closed at
    /// start), found before the work: exit 2.
    BadInput,
    /// Something failed at run time (I/O, device, MPI): exit 2.
    Failed,
    /// A stop signal ended the run before it was complete or verified:
    /// exit 2.
    Stopped,
    /// The measurement stands but something beside it failed (the report
    /// on standard output, the results file, a side write the record
    /// lists, the quick stream): exit 2.
    Warned,
}

impl Outcome {
    /// The process exit code: the one place outcomes become numbers.
    pub fn code(self) -> u8 {
        match self {
            Outcome::Done => 0,
            Outcome::Wrong => 1,
            Outcome::BadInput | Outcome::Failed | Outcome::Stopped | Outcome::Warned => 2,
        }
    }

    /// [`Outcome::code`] as the process's exit code.
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(self.code())
    }

    /// The ending of a run of which `self` and `then` are two parts: a
    /// wrong answer outranks everything (a lost report keeps its 1), any
    /// other failure outranks done, and of two failures the first stays.
    pub fn and(self, then: Outcome) -> Outcome {
        match (self, then) {
            (Outcome::Wrong, _) | (_, Outcome::Wrong) => Outcome::Wrong,
            (Outcome::Done, other) => other,
            (first, _) => first,
        }
    }
}

/// Writes `line` and a line break on standard error in one write.
///
/// A failure is ignored: `eprintln!` panics when stderr is closed or full
/// (`2>/dev/full`), which would turn a clear error into a panic, or under
/// MPI into an abort of the whole job. There is nowhere left to report it.
pub fn print_line(line: &str) {
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Waits until the pipe behind file descriptor `fd` holds no unread bytes,
/// at most `limit`; returns at once when `fd` is no pipe. Whoever reads the
/// other end (an MPI launcher forwarding a rank's stderr) has then taken
/// what was written.
pub fn wait_until_read(fd: i32, limit: std::time::Duration) {
    // SAFETY: fstat writes only the struct it is given.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return;
    }
    let started = std::time::Instant::now();
    loop {
        let mut unread: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int, the bytes the pipe holds (Linux
        // answers it on either end).
        let asked = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut unread) };
        if asked != 0 || unread == 0 || started.elapsed() >= limit {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Ends the process at once with `code`, from any thread: what ends a job
/// that cannot return through `main` (a rank's abort, the first of several
/// in-process ranks to fail). The caller has told what happened.
pub fn exit_now(code: i32) -> ! {
    // Whatever is buffered on stdout was the report's, written whole by
    // `output::print_report` already; nothing else needs flushing.
    std::process::exit(code)
}

/// The exit code of a command's outcome: its own code on success, the
/// error's otherwise. The error is printed on stderr as one `himeno:` line
/// when `speak` is set (the one rank, of several that fail alike, that
/// tells the user).
pub fn exit(outcome: Result<ExitCode>, speak: bool) -> ExitCode {
    match outcome {
        Ok(code) => code,
        Err(e) => {
            if speak {
                print_line(&format!("himeno: {e}"));
            }
            e.to_exit_code()
        }
    }
}

impl fmt::Display for Error {
    /// One line whatever the message holds: control characters (from user
    /// input quoted in a message, say) are written escaped, so a batch log
    /// or a script reading stderr always sees one line per error.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (head, m) = match self {
            Error::Usage(m) | Error::Runtime(m) => ("error", m),
            Error::Verification(m) => ("verification FAILED", m),
        };
        write!(f, "{head}: ")?;
        for c in m.chars() {
            if c.is_control() || invisible(c) {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// Whether `c` prints as nothing although it is there: a byte order mark,
/// zero-width spaces and joiners, direction marks and overrides, the soft
/// hyphen. In a message quoting user input (`unknown key 'NAME'` where the
/// key starts with a byte order mark) it would hide what is wrong.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00ad}'
        | '\u{034f}'
        | '\u{061c}'
        | '\u{180e}'
        | '\u{200b}'..='\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}'
        | '\u{feff}'
        | '\u{fe00}'..='\u{fe0f}'
        | '\u{fff9}'..='\u{fffb}')
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Runtime(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A pipe as `[read, write]` file descriptors.
    fn pipe() -> [i32; 2] {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two descriptors into the array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        fds
    }

    /// The wait ends when the reader has taken the bytes, not before, and
    /// at the limit when nobody reads; an empty pipe or a file is no wait.
    #[test]
    fn the_wait_for_a_reader_ends_when_the_pipe_is_read() {
        let [read, write] = pipe();
        let line = b"himeno: rank 1: error\n";
        // SAFETY: writes from a live buffer of that length.
        let wrote = unsafe { libc::write(write, line.as_ptr().cast(), line.len()) };
        assert_eq!(wrote, line.len() as isize);
        let started = Instant::now();
        wait_until_read(write, Duration::from_millis(150));
        let unread = started.elapsed();
        assert!(unread >= Duration::from_millis(150), "{unread:?}");
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let mut buf = [0u8; 64];
            // SAFETY: reads into a live buffer of that length.
            unsafe { libc::read(read, buf.as_mut_ptr().cast(), buf.len()) }
        });
        let started = Instant::now();
        wait_until_read(write, Duration::from_secs(20));
        let waited = started.elapsed();
        assert_eq!(reader.join().unwrap(), line.len() as isize);
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(waited < Duration::from_secs(20), "{waited:?}");
        let started = Instant::now();
        wait_until_read(write, Duration::from_secs(20));
        let file = std::fs::File::open("Cargo.toml").unwrap();
        wait_until_read(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            Duration::from_secs(20),
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        // SAFETY: closes the two descriptors this test opened.
        unsafe {
            libc::close(read);
            libc::close(write);
        }
    }

    #[test]
    fn display_is_one_line_whatever_the_message() {
        let e = Error::usage("unknown size '\n\r\t'");
        assert_eq!(e.to_string(), "error: unknown size '\\n\\r\\t'");
        assert_eq!(
            Error::Verification("x".into()).to_string(),
            "verification FAILED: x"
        );
        assert_eq!(e.exit_code(), 2);
    }

    /// The exit codes of the contract, and how two parts of a run combine.
    #[test]
    fn outcomes_map_to_the_contracts_exit_codes() {
        assert_eq!(Outcome::Done.code(), 0);
        assert_eq!(Outcome::Wrong.code(), 1);
        for o in [
            Outcome::BadInput,
            Outcome::Failed,
            Outcome::Stopped,
            Outcome::Warned,
        ] {
            assert_eq!(o.code(), 2, "{o:?}");
            assert_eq!(Outcome::Done.and(o), o);
            assert_eq!(o.and(Outcome::Done), o);
            assert_eq!(o.and(Outcome::Wrong), Outcome::Wrong);
            assert_eq!(Outcome::Wrong.and(o), Outcome::Wrong);
        }
        assert_eq!(Outcome::Stopped.and(Outcome::Warned), Outcome::Stopped);
        assert_eq!(Error::Verification("x".into()).outcome(), Outcome::Wrong);
        assert_eq!(Error::runtime("x").exit_code(), 2);
    }

    #[test]
    fn invisible_characters_are_shown_escaped() {
        let e = Error::usage("unknown key '\u{feff}NAME' or 'a\u{200b}b', caf\u{e9}");
        assert_eq!(
            e.to_string(),
            "error: unknown key '\\u{feff}NAME' or 'a\\u{200b}b', caf\u{e9}"
        );
    }
}
