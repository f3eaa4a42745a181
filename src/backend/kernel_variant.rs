//! The name of a kernel variant a backend offers the driver
//! (`crate::kernel_choice`), typed: which of the classic sweep's axes the
//! offer varied and where each stood, or the wavefront's tile height.
//!
//! The record has always written it as words (`prefetch`, `no prefetch,
//! cached stores`, `tiles of 16 rows`): the type reads and writes exactly
//! those, so records keep their bytes, and gives the short code the
//! benchmark tables print (`nopf+ca`, `r16`) from the type rather than
//! from the words.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// One kernel a backend may sweep with, as far as an offer varied it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelVariant {
    /// The classic sweep. Each axis is `None` when the offer did not vary
    /// it (so the name does not mention it).
    Classic {
        /// Whether the row kernel prefetches its input rows.
        prefetch: Option<bool>,
        /// Whether the new field is written with streaming stores
        /// (`false`: cached stores).
        streaming: Option<bool>,
    },
    /// The temporal wavefront with tiles of this many rows.
    Tiles(usize),
}

impl KernelVariant {
    /// The short code benchmark tables print: `pf`/`nopf` and `nt`
    /// (streaming) or `ca` (cached) joined by `+`, `r16` for tiles of 16
    /// rows.
    pub fn code(self) -> String {
        match self {
            KernelVariant::Classic {
                prefetch,
                streaming,
            } => {
                let parts: Vec<&str> = [
                    prefetch.map(|p| if p { "pf" } else { "nopf" }),
                    streaming.map(|s| if s { "nt" } else { "ca" }),
                ]
                .into_iter()
                .flatten()
                .collect();
                parts.join("+")
            }
            KernelVariant::Tiles(rows) => format!("r{rows}"),
        }
    }
}

impl fmt::Display for KernelVariant {
    /// The name the record writes: `prefetch`, `no prefetch, streaming
    /// stores`, `tiles of 16 rows`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KernelVariant::Classic {
                prefetch,
                streaming,
            } => {
                let parts: Vec<&str> = [
                    prefetch.map(|p| if p { "prefetch" } else { "no prefetch" }),
                    streaming.map(|s| {
                        if s {
                            "streaming stores"
                        } else {
                            "cached stores"
                        }
                    }),
                ]
                .into_iter()
                .flatten()
                .collect();
                f.write_str(&parts.join(", "))
            }
            KernelVariant::Tiles(rows) => write!(f, "tiles of {rows} rows"),
        }
    }
}

impl std::str::FromStr for KernelVariant {
    type Err = String;

    /// Reads a name [`fmt::Display`] writes.
    fn from_str(s: &str) -> Result<KernelVariant, String> {
        if let Some(rows) = s
            .strip_prefix("tiles of ")
            .and_then(|r| r.strip_suffix(" rows"))
        {
            return match rows.parse::<usize>() {
                Ok(n) if n > 0 => Ok(KernelVariant::Tiles(n)),
                _ => Err(format!("kernel variant '{s}': no tile height")),
            };
        }
        let (mut prefetch, mut streaming) = (None, None);
        for part in s.split(", ") {
            let (axis, value) = match part {
                "prefetch" => (&mut prefetch, true),
                "no prefetch" => (&mut prefetch, false),
                "streaming stores" => (&mut streaming, true),
                "cached stores" => (&mut streaming, false),
                _ => return Err(format!("kernel variant '{s}' is not one himeno names")),
            };
            if axis.replace(value).is_some() {
                return Err(format!("kernel variant '{s}' names an axis twice"));
            }
        }
        if streaming.is_some() && prefetch.is_some() && !s.starts_with('p') && !s.starts_with('n') {
            return Err(format!("kernel variant '{s}': prefetch comes first"));
        }
        Ok(KernelVariant::Classic {
            prefetch,
            streaming,
        })
    }
}

impl PartialEq<&str> for KernelVariant {
    /// Whether `other` names this variant.
    fn eq(&self, other: &&str) -> bool {
        other.parse::<KernelVariant>().is_ok_and(|o| o == *self)
    }
}

impl Serialize for KernelVariant {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KernelVariant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<KernelVariant, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_and_gives_its_code() {
        for (name, code) in [
            ("prefetch", "pf"),
            ("no prefetch", "nopf"),
            ("streaming stores", "nt"),
            ("cached stores", "ca"),
            ("prefetch, streaming stores", "pf+nt"),
            ("no prefetch, cached stores", "nopf+ca"),
            ("tiles of 16 rows", "r16"),
        ] {
            let v: KernelVariant = name.parse().unwrap();
            assert_eq!(v.to_string(), name);
            assert_eq!(v.code(), code, "{name}");
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<KernelVariant>(&json).unwrap(), v);
        }
    }

    #[test]
    fn other_words_are_refused() {
        for bad in [
            "",
            "prefetch, prefetch",
            "cached stores, prefetch",
            "tiles of 0 rows",
            "tiles of x rows",
            "fast",
        ] {
            assert!(bad.parse::<KernelVariant>().is_err(), "{bad:?}");
        }
    }
}
