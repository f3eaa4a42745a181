//! The files and folders a command writes, by one set of rules for every
//! command:
//!
//! - two outputs of one command, or an output and an input, never name the
//!   same file: a symlink, a hard link, `./x` or `dir/../x` alias of it is
//!   the same file ([`distinct`]), refused before anything is written;
//! - a whole-file output (a plot, a timeline, a report) is written under a
//!   new name in its folder and renamed into place ([`write_whole`]): a
//!   reader sees the old file or the new one, never a cut one, and a link
//!   planted at the name is replaced, never written through;
//! - a file of a folder the command made is created new, without following
//!   a link ([`create_new`]);
//! - whether an output can be written is found before any work by one
//!   probe ([`check_output`], [`probe_dir`]), which never blocks and never
//!   creates or removes the output itself;
//! - a folder the user did not name is a fresh private one, as `mktemp -d`
//!   makes it ([`private_dir`]), and a folder the user named is created
//!   without its parents and used only when empty ([`empty_dir`]): nothing
//!   is created outside what the user named, and nothing the user had is
//!   removed or emptied.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// A path a command reads or writes, with the option that named it (for
/// the message: `--trace`, `--plot DIR's picture`, ...).
#[derive(Debug, Clone)]
pub struct Named {
    /// How the command line named it.
    pub what: String,
    /// The path.
    pub path: PathBuf,
    /// Whether it is written whole and renamed into place
    /// ([`write_whole`]): a link at its name is then replaced, not
    /// followed, so two such outputs collide only at the same name.
    pub whole: bool,
}

impl Named {
    /// `path`, named by `what`: an input, or an output opened where it
    /// leads (appended to, through links).
    pub fn new(what: impl Into<String>, path: impl Into<PathBuf>) -> Named {
        Named {
            what: what.into(),
            path: path.into(),
            whole: false,
        }
    }

    /// The output `path`, named by `what`, written by [`write_whole`].
    pub fn whole(what: impl Into<String>, path: impl Into<PathBuf>) -> Named {
        Named {
            whole: true,
            ..Named::new(what, path)
        }
    }
}

/// Where a path leads: the file it reaches when there is one, else the
/// absolute path at which it would be created.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// An existing file or folder: its device and inode, which every alias
    /// (symlink, hard link, `..`) shares.
    Inode(u64, u64),
    /// A file yet to be created, its folder resolved.
    Path(PathBuf),
}

/// Most symlinks followed to resolve one path (as the kernel's limit).
const MAX_LINKS: u32 = 40;

/// Where `path` leads (see [`Place`]).
fn place(path: &Path) -> Place {
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        if let Ok(m) = std::fs::metadata(&path) {
            return Place::Inode(m.dev(), m.ino());
        }
        // A dangling symlink: the file would be created at its target.
        match std::fs::read_link(&path) {
            Ok(target) => {
                path = match path.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                };
            }
            Err(_) => break,
        }
    }
    Place::Path(resolved(&path))
}

/// The directory entry `path` names: its folder resolved, its own name
/// kept (a link there is the entry, not what it leads to).
fn entry(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            resolved(dir).join(name)
        }
        _ => resolved(path),
    }
}

/// Whether the outputs `a` and `b` would write the same file: the same
/// name when both replace theirs whole, else the same file by any alias.
fn collide(a: &Named, pa: &Place, b: &Named, pb: &Place) -> bool {
    if a.whole && b.whole {
        entry(&a.path) == entry(&b.path)
    } else {
        pa == pb
    }
}

/// `path` made absolute with its folder's symlinks and `..` resolved as
/// far as the folder exists (the rest kept as written, `.` dropped).
fn resolved(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut done = PathBuf::from("/");
    let mut rest = Vec::new();
    for c in absolute.components() {
        match c {
            Component::Normal(n) => rest.push(n.to_os_string()),
            Component::ParentDir => rest.push("..".into()),
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
        }
    }
    // The longest existing prefix is canonicalized; the names after it
    // cannot be links (they do not exist), so `..` among them is plain.
    let mut split = rest.len();
    while split > 0 {
        let prefix: PathBuf = rest[..split].iter().collect();
        if let Ok(c) = done.join(&prefix).canonicalize() {
            done = c;
            break;
        }
        split -= 1;
    }
    for n in &rest[split..] {
        if n == ".." {
            done.pop();
        } else {
            done.push(n);
        }
    }
    done
}

/// Refuses (exit 2, one line) two of `outputs`, or an output and one of
/// `inputs`, that are the same file by any alias: the later write would
/// replace the earlier output, or the input the command reads. (An output
/// and an input compare by file whatever the output's kind: a picture
/// that would stand in for the results file it was drawn from, even by a
/// hard link, is refused.)
pub fn distinct(outputs: &[Named], inputs: &[Named]) -> Result<()> {
    let places: Vec<Place> = outputs.iter().map(|o| place(&o.path)).collect();
    for (i, (a, pa)) in outputs.iter().zip(&places).enumerate() {
        for (b, pb) in outputs[..i].iter().zip(&places) {
            if collide(a, pa, b, pb) {
                return Err(Error::usage(format!(
                    "{} {} and {} {} are the same file, and one would replace the other: \
                     give each output a file of its own",
                    b.what,
                    b.path.display(),
                    a.what,
                    a.path.display()
                )));
            }
        }
        for b in inputs {
            if *pa == place(&b.path) {
                return Err(Error::usage(format!(
                    "{} {} is the same file as the input {} {}, which it would replace: \
                     write it elsewhere",
                    a.what,
                    a.path.display(),
                    b.what,
                    b.path.display()
                )));
            }
        }
    }
    Ok(())
}

/// Refuses (exit 2, one line) an output that lies inside `folder` (or is
/// it): a folder a run owns (its checkpoints) is written by that run alone.
pub fn outside(output: &Named, folder: &Named) -> Result<()> {
    let dir = resolved(&folder.path);
    let file = match place(&output.path) {
        Place::Path(p) => p,
        Place::Inode(..) => resolved(&output.path),
    };
    let same = place(&output.path) == place(&folder.path);
    if same || file.starts_with(&dir) {
        return Err(Error::usage(format!(
            "{} {} lies in {} {}, which the run's checkpoints own: write it elsewhere",
            output.what,
            output.path.display(),
            folder.what,
            folder.path.display()
        )));
    }
    Ok(())
}

/// A name in `dir` for a file on its way to `base`: hidden, and unlikely
/// to be taken (the process id, the time and `attempt`).
fn temporary(dir: &Path, base: &std::ffi::OsStr, attempt: u32) -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // The base name is cut so that the temporary one stays a valid name.
    let base = base.as_bytes();
    let base = String::from_utf8_lossy(&base[..base.len().min(120)]).into_owned();
    dir.join(format!(
        ".{base}.himeno-{}-{stamp:x}-{attempt}",
        std::process::id()
    ))
}

/// Creates the file `path` new (`O_CREAT|O_EXCL|O_NOFOLLOW`, readable by
/// all as the umask allows): an existing file or a link planted at the
/// name is an error, never opened.
pub fn create_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o644)
        .open(path)
}

/// Writes `bytes` as the whole file `path`: into a new file of a fresh
/// name in the same folder, synced, then renamed over `path`. A link at
/// `path` is replaced, never followed; a failure leaves whatever `path`
/// was, and no temporary file.
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("it names a folder, not a file"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut attempt = 0;
    let (tmp, mut file) = loop {
        let tmp = temporary(dir, name, attempt);
        match create_new(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => {
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    };
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Checks that a new file can be made in the folder `dir`: a file of a
/// fresh short name is created there (never an existing one, never
/// through a link), `fill` bytes are written and synced, and it is
/// removed. Writing a block (`fill`) finds a full file system, where an
/// empty file would still be created. Nothing else in `dir` is touched: a
/// probe left by a killed process is passed over, not reused or removed.
pub fn probe_dir(dir: &Path, fill: usize) -> std::io::Result<()> {
    // The probe's name is short whatever the output's (a name of 250 bytes
    // is valid; a longer probe name would not be).
    for attempt in 0..16 {
        let probe = temporary(dir, std::ffi::OsStr::new("probe"), attempt);
        let mut file = match create_new(&probe) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        let written = file
            .write_all(&vec![0u8; fill])
            .and_then(|()| file.sync_all());
        let removed = std::fs::remove_file(&probe);
        return written.and(removed);
    }
    Err(std::io::Error::other(
        "no probe file could be created to test the folder",
    ))
}

/// An error of opening a file for writing without blocking, with what
/// ENXIO means there: the file is a FIFO that no process has open for
/// reading.
pub fn unread_fifo(e: std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(libc::ENXIO) => std::io::Error::new(
            e.kind(),
            format!("{e}: it is a FIFO that no process is reading"),
        ),
        _ => e,
    }
}

/// How a command writes an output file, for [`check_output`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Opened where the path leads and appended to (a results file, which
    /// may be a FIFO or `/dev/stdout`).
    Appended,
    /// Written under a new name in its folder and renamed into place (a
    /// trace): the folder must take a new file, and what stands at the
    /// name must be a regular file (or nothing).
    Replaced,
}

/// Checks, before any work and without blocking, that the output file
/// `path` can be written as `how` says. A path that names a folder
/// (`dir`, `dir/`, `dir/.`, even one not made yet) is refused. An existing
/// file appended to is opened for appending (a FIFO without a reader is
/// refused rather than waited on); otherwise the folder takes a probe
/// ([`probe_dir`]). The output itself is never created or removed here:
/// another job may write its first record to it in between, and removing
/// it would lose that record.
pub fn check_output(path: &Path, how: Written) -> std::io::Result<()> {
    let bytes = path.as_os_str().as_bytes();
    if path.file_name().is_none()
        || bytes.ends_with(b"/")
        || bytes.ends_with(b"/.")
        || path.is_dir()
    {
        return Err(std::io::Error::other("it names a directory, not a file"));
    }
    let exists = path.exists();
    match how {
        Written::Appended if exists => {
            return OpenOptions::new()
                .append(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(path)
                .map(drop)
                .map_err(unread_fifo);
        }
        Written::Replaced if exists && !path.is_file() => {
            return Err(std::io::Error::other("it is not a regular file"));
        }
        _ => {}
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    probe_dir(dir, 0)
}

/// A fresh folder `PREFIX.XXXXXX` in `parent`, made as `mktemp -d` makes
/// one (`mkdtemp`: a new name, mode 0700, never an existing folder).
/// `parent` itself must exist: it is never created.
pub fn private_dir(parent: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    let mut template = parent.join(format!("{prefix}.XXXXXX")).into_os_string();
    template.push("\0");
    let mut bytes = template.into_vec();
    // mkdtemp replaces the Xs in place.
    let made = unsafe {
        // SAFETY: `bytes` is a NUL-terminated buffer that outlives the call,
        // which writes only within it.
        libc::mkdtemp(bytes.as_mut_ptr().cast())
    };
    if made.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    bytes.pop();
    Ok(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

/// Makes the folder `dir` the user named ready to be written: created if
/// missing (its parent must exist: nothing above it is created), else it
/// must be an empty folder, so that nothing in it is replaced or removed.
pub fn empty_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::create_dir(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        Err(_) => {}
    }
    let mut entries = std::fs::read_dir(dir)?;
    if entries.next().is_some() {
        return Err(std::io::Error::other(
            "it is not empty, and nothing in it is replaced: name a new or empty folder",
        ));
    }
    Ok(())
}

/// Whether [`open_regular`] opens a path whose last component is a
/// symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Opens what the link names (a results file a user linked in).
    Follow,
    /// Refuses the link.
    Refuse,
}

/// Opens the file a user named at `path` for reading: a regular file of at
/// most `max` bytes, or an error saying what it is instead.
///
/// Only a regular file has an end that reading reaches: a device
/// (`/dev/zero`) never ends, and a FIFO blocks in `open` until some
/// process writes to it, forever if none does. The open is made with
/// `O_NONBLOCK`, so that a FIFO is seen and refused rather than waited
/// on; then `fstat` says what was opened. A regular file larger than `max`
/// is refused before a byte is read. With [`Links::Refuse`] a symbolic
/// link as the last component is refused too (`O_NOFOLLOW`, `ELOOP`): a
/// checkpoint folder holds none, and one there may lead out of it.
pub fn open_regular(path: &Path, max: u64, links: Links) -> std::io::Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(
            libc::O_NONBLOCK
                | libc::O_CLOEXEC
                | match links {
                    Links::Follow => 0,
                    Links::Refuse => libc::O_NOFOLLOW,
                },
        )
        .open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    let what = if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO or pipe, which may never end: save what it carries to a file first")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device")
    } else {
        Some("a socket or other special file")
    };
    if let Some(what) = what {
        return Err(std::io::Error::other(format!(
            "it is not a regular file but {what}"
        )));
    }
    if meta.len() > max {
        return Err(too_big(max));
    }
    // Reads of a regular file do not block anyway; the flag goes so that
    // the file reads as one opened plainly.
    // SAFETY: F_GETFL/F_SETFL on a descriptor this function owns.
    unsafe {
        let fd = file.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags != -1 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

/// The bytes of the regular file at `path` ([`open_regular`]), refused
/// when it holds more than `max` bytes, also if it grows while read, so a
/// wrong file is never read whole into memory.
pub fn read_capped(path: &Path, max: u64, links: Links) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    open_regular(path, max, links)?
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_big(max));
    }
    Ok(bytes)
}

/// [`read_capped`] as text, following links (invalid UTF-8 is an error).
pub fn read_text(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read_capped(path, max, Links::Follow)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

/// The error of a file over the `max` bytes read from it.
pub fn too_big(max: u64) -> std::io::Error {
    let size = if max >= 1 << 30 {
        format!("{} GiB", max >> 30)
    } else if max >= 1 << 20 {
        format!("{} MiB", max >> 20)
    } else {
        format!("{max} bytes")
    };
    std::io::Error::other(format!("it holds more than {size}, the most read from it"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of one test, removed with everything in it when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let d =
                std::env::temp_dir().join(format!("himeno-files-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Scratch(d)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn every_alias_of_one_file_is_the_same_file() {
        let s = Scratch::new("alias");
        let d = &s.0;
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("r.jsonl"), "").unwrap();
        std::fs::hard_link(d.join("r.jsonl"), d.join("hard")).unwrap();
        std::os::unix::fs::symlink(d.join("r.jsonl"), d.join("soft")).unwrap();
        std::os::unix::fs::symlink("new.json", d.join("dangling")).unwrap();
        std::os::unix::fs::symlink(d.join("sub"), d.join("linkdir")).unwrap();
        let same = [
            ("r.jsonl", "r.jsonl"),
            ("r.jsonl", "hard"),
            ("r.jsonl", "soft"),
            ("r.jsonl", "sub/../r.jsonl"),
            ("dangling", "new.json"),
            ("sub/t.json", "linkdir/t.json"),
            ("sub/t.json", "sub/./x/../t.json"),
        ];
        for (a, b) in same {
            let outs = [Named::new("--a", d.join(a)), Named::new("--b", d.join(b))];
            let e = distinct(&outs, &[]).expect_err(&format!("{a} and {b}"));
            assert_eq!(e.exit_code(), 2);
            assert!(e.message().contains("are the same file"), "{}", e.message());
            let e = distinct(&outs[..1], &outs[1..]).expect_err(&format!("{a} as input {b}"));
            assert!(e.message().contains("the input --b"), "{}", e.message());
        }
        for (a, b) in [("r.jsonl", "t.json"), ("sub/t.json", "t.json")] {
            let outs = [Named::new("--a", d.join(a)), Named::new("--b", d.join(b))];
            distinct(&outs, &[]).unwrap();
        }
        // Outputs that replace their names whole collide only by name: a
        // link at one name is replaced, not written through.
        let whole = |a: &str, b: &str| {
            distinct(
                &[
                    Named::whole("--a", d.join(a)),
                    Named::whole("--b", d.join(b)),
                ],
                &[],
            )
        };
        whole("r.jsonl", "soft").unwrap();
        whole("r.jsonl", "hard").unwrap();
        assert!(whole("sub/t.svg", "linkdir/t.svg").is_err());
        assert!(whole("r.jsonl", "sub/../r.jsonl").is_err());
        let mixed = [
            Named::whole("--a", d.join("soft")),
            Named::new("--b", d.join("r.jsonl")),
        ];
        assert!(
            distinct(&mixed, &[]).is_err(),
            "an appended output follows the link"
        );
    }

    #[test]
    fn an_output_inside_an_owned_folder_is_refused() {
        let s = Scratch::new("inside");
        let ck = Named::new("--checkpoint-dir", s.0.join("ck"));
        for bad in ["ck", "ck/trace.json", "ck/./sub/../r.jsonl"] {
            let e = outside(&Named::new("--trace", s.0.join(bad)), &ck).unwrap_err();
            assert!(e.message().contains("checkpoints own"), "{}", e.message());
        }
        outside(&Named::new("--trace", s.0.join("ck2")), &ck).unwrap();
    }

    #[test]
    fn a_whole_file_replaces_a_link_instead_of_writing_through_it() {
        let s = Scratch::new("whole");
        let victim = s.0.join("victim");
        std::fs::write(&victim, "kept").unwrap();
        let out = s.0.join("plot.svg");
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        write_whole(&out, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "kept");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        assert!(!out.symlink_metadata().unwrap().is_symlink());
        assert_eq!(
            std::fs::read_dir(&s.0).unwrap().count(),
            2,
            "no temporary left"
        );
        assert!(
            create_new(&out).is_err(),
            "an existing file is not reopened"
        );
    }

    #[test]
    fn the_probe_finds_what_cannot_be_written_and_leaves_nothing() {
        let s = Scratch::new("probe");
        let d = &s.0;
        probe_dir(d, 4096).unwrap();
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 0, "no probe left");
        assert!(probe_dir(&d.join("missing"), 0).is_err());
        for how in [Written::Appended, Written::Replaced] {
            check_output(&d.join("new.json"), how).unwrap();
            assert!(!d.join("new.json").exists(), "the output is not created");
            for folder in [d.clone(), d.join("sub/"), d.join("x/.")] {
                let e = check_output(&folder, how).unwrap_err();
                assert!(e.to_string().contains("names a directory"), "{e}");
            }
            assert!(check_output(&d.join("missing/r.jsonl"), how).is_err());
        }
        std::fs::write(d.join("r.jsonl"), "{}\n").unwrap();
        check_output(&d.join("r.jsonl"), Written::Appended).unwrap();
        check_output(&d.join("r.jsonl"), Written::Replaced).unwrap();
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = check_output(&fifo, Written::Appended).unwrap_err();
        assert!(e.to_string().contains("no process is reading"), "{e}");
        let e = check_output(&fifo, Written::Replaced).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert_eq!(std::fs::read_to_string(d.join("r.jsonl")).unwrap(), "{}\n");
    }

    #[test]
    fn a_capped_read_takes_only_a_regular_file_within_its_cap() {
        let s = Scratch::new("capped");
        let f = s.0.join("ten");
        std::fs::write(&f, "0123456789").unwrap();
        assert_eq!(read_capped(&f, 10, Links::Refuse).unwrap().len(), 10);
        let e = read_capped(&f, 9, Links::Follow).unwrap_err();
        assert!(e.to_string().contains("more than 9 bytes"), "{e}");
        let e = read_capped(Path::new("/dev/zero"), 10, Links::Follow).unwrap_err();
        assert!(e.to_string().contains("a device"), "{e}");
        assert!(read_capped(&s.0, 10, Links::Follow).is_err(), "a folder");
        let link = s.0.join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert_eq!(read_text(&link, 10).unwrap(), "0123456789");
        let e = read_capped(&link, 10, Links::Refuse).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert!(read_text(&f, 10).is_err(), "not UTF-8");
    }

    #[test]
    fn private_folders_are_fresh_and_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let s = Scratch::new("private");
        let a = private_dir(&s.0, "himeno-x").unwrap();
        let b = private_dir(&s.0, "himeno-x").unwrap();
        assert_ne!(a, b);
        let mode = std::fs::metadata(&a).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(private_dir(&s.0.join("missing"), "x").is_err());
        assert!(!s.0.join("missing").exists(), "a parent is never created");
        empty_dir(&s.0.join("fresh")).unwrap();
        empty_dir(&s.0.join("fresh")).unwrap();
        assert!(empty_dir(&s.0).is_err(), "a folder with files is refused");
        assert!(empty_dir(&s.0.join("no/such")).is_err());
    }
}
