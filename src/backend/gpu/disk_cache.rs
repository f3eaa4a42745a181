//! NVRTC's output kept in a folder that several processes share
//! (`HIMENO_NVRTC_CACHE`; `himeno gpu-check` sets it to a folder of its
//! own for the many runs it starts), so the kernels are compiled once per
//! source, options, architecture and NVRTC version, not once per process.
//!
//! An entry is two files named by the key's hash: the image
//! (`<hash>.cubin` or `.ptx`) and `<hash>.json` (the whole key and NVRTC's
//! log, which carries the assembler's register report). Each is written
//! under a fresh name and renamed into place (`files::write_whole`), the
//! image first, so a reader that finds the JSON finds the whole image, and
//! concurrent writers of one entry each leave a complete one. A read
//! checks the whole key, not only its hash: an entry of another key is a
//! miss, never a wrong module.

use super::nvrtc::{Built, Output};
use crate::environment;
use crate::files::{self, Links};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Largest image or log read back (a CUBIN of these kernels is ~100 KB).
const MAX_BYTES: u64 = 64 << 20;

/// What decides NVRTC's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    /// FNV-1a of the source, hexadecimal.
    pub source: String,
    /// The NVRTC options, in order.
    pub options: Vec<String>,
    /// The `--gpu-architecture` value.
    pub arch: String,
    /// NVRTC's version, `major.minor`.
    pub nvrtc: String,
    /// `cubin` or `ptx`.
    pub output: String,
}

/// An entry's JSON file: its key and NVRTC's log.
#[derive(Serialize, Deserialize)]
struct Entry {
    key: Key,
    log: String,
}

impl Key {
    /// The key of compiling `source` with `options` for `arch` by NVRTC
    /// `nvrtc` into `out`.
    pub fn new(source: &str, options: &[String], arch: &str, nvrtc: &str, out: Output) -> Key {
        Key {
            source: format!("{:016x}", crate::hash::fnv1a(source)),
            options: options.to_vec(),
            arch: arch.into(),
            nvrtc: nvrtc.into(),
            output: match out {
                Output::Cubin => "cubin",
                Output::Ptx => "ptx",
            }
            .into(),
        }
    }

    /// The entry's file stem: the hash of the whole key.
    pub fn stem(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        format!("nvrtc-{:016x}", crate::hash::fnv1a(&text))
    }

    /// The image file's path in `dir`.
    pub fn image_path(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.{}", self.stem(), self.output))
    }

    /// The JSON file's path in `dir`.
    fn entry_path(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.json", self.stem()))
    }
}

/// The cache folder `HIMENO_NVRTC_CACHE` names, if any.
pub fn folder() -> Option<PathBuf> {
    environment::get_os(environment::NVRTC_CACHE).map(PathBuf::from)
}

/// The entry of `key` in `dir`, if a complete one of that very key is
/// there; anything else (no entry, another key, a file that cannot be
/// read) is a miss.
pub fn load(dir: &Path, key: &Key) -> Option<Built> {
    let text = files::read_capped(&key.entry_path(dir), MAX_BYTES, Links::Refuse).ok()?;
    let entry: Entry = serde_json::from_slice(&text).ok()?;
    if entry.key != *key {
        return None;
    }
    let image = files::read_capped(&key.image_path(dir), MAX_BYTES, Links::Refuse).ok()?;
    (!image.is_empty()).then_some(Built {
        image,
        log: entry.log,
    })
}

/// Keeps `built` as the entry of `key` in `dir`: the image, then the JSON
/// that makes the entry visible.
pub fn store(dir: &Path, key: &Key, built: &Built) -> std::io::Result<()> {
    files::write_whole(&key.image_path(dir), &built.image)?;
    let entry = Entry {
        key: key.clone(),
        log: built.log.clone(),
    };
    let text = serde_json::to_vec(&entry).map_err(std::io::Error::other)?;
    files::write_whole(&key.entry_path(dir), &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(opt: &str) -> Key {
        Key::new(
            "src",
            &["--fmad=false".into(), opt.into()],
            "sm_90",
            "13.0",
            Output::Cubin,
        )
    }

    #[test]
    fn an_entry_is_found_by_its_whole_key_only() {
        let dir = std::env::temp_dir().join(format!("himeno-nvrtc-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let built = Built {
            image: b"\x7fELF image".to_vec(),
            log: "ptxas info    : Used 72 registers".into(),
        };
        let a = key("-DA");
        assert!(load(&dir, &a).is_none(), "empty folder: a miss");
        store(&dir, &a, &built).unwrap();
        let got = load(&dir, &a).expect("stored");
        assert_eq!(
            (got.image, got.log),
            (built.image.clone(), built.log.clone())
        );
        // Another option, architecture, NVRTC or source is another entry.
        for other in [
            key("-DB"),
            Key::new("src", &a.options, "sm_80", "13.0", Output::Cubin),
            Key::new("src", &a.options, "sm_90", "12.9", Output::Cubin),
            Key::new("src2", &a.options, "sm_90", "13.0", Output::Cubin),
        ] {
            assert_ne!(other.stem(), a.stem());
            assert!(load(&dir, &other).is_none(), "{other:?}");
        }
        // An entry whose JSON names another key (a hash collision) is a
        // miss, not that key's module.
        let b = key("-DB");
        std::fs::copy(a.entry_path(&dir), b.entry_path(&dir)).unwrap();
        std::fs::copy(a.image_path(&dir), b.image_path(&dir)).unwrap();
        assert!(load(&dir, &b).is_none());
        // Storing again (a concurrent writer) leaves one complete entry.
        store(&dir, &a, &built).unwrap();
        assert_eq!(load(&dir, &a).unwrap().image, built.image);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
