//! The global problem: size presets, grid dimensions, the block decomposition
//! over a Cartesian process grid, and the initial field values.

pub mod decomp;
pub mod fields;

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Number of floating-point operations per interior point and iteration, as
/// counted by the original benchmark.
pub const FLOPS_PER_POINT: f64 = 34.0;

/// Minimum bytes moved per interior point and iteration: 13 arrays read and
/// `wrk2` written, 4 bytes each.
pub const BYTES_PER_POINT: f64 = 56.0;

/// MFLOPS of the original's reference machine ("Pentium III 600MHz").
pub const PENTIUM3_MFLOPS: f64 = 82.84;

/// A size preset, as in the original MPI and dynamic-allocation versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Preset {
    /// 32 x 32 x 64
    XS,
    /// 64 x 64 x 128
    S,
    /// 128 x 128 x 256
    M,
    /// 256 x 256 x 512
    L,
    /// 512 x 512 x 1024
    XL,
}

impl Preset {
    /// All presets, smallest first.
    pub const ALL: [Preset; 5] = [Preset::XS, Preset::S, Preset::M, Preset::L, Preset::XL];

    /// The global grid of this preset.
    pub fn grid(self) -> Grid {
        let n = match self {
            Preset::XS => [32, 32, 64],
            Preset::S => [64, 64, 128],
            Preset::M => [128, 128, 256],
            Preset::L => [256, 256, 512],
            Preset::XL => [512, 512, 1024],
        };
        Grid { n }
    }
}

impl FromStr for Preset {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_uppercase().as_str() {
            "XS" => Ok(Preset::XS),
            "S" | "SMALL" => Ok(Preset::S),
            "M" | "MIDDLE" => Ok(Preset::M),
            "L" | "LARGE" => Ok(Preset::L),
            "XL" | "ELARGE" => Ok(Preset::XL),
            _ => Err(Error::usage(format!(
                "unknown size '{s}': use one of XS, S, M, L, XL, or --grid NIxNJxNK"
            ))),
        }
    }
}

/// A run's size as records name it: a preset, or a grid given by its
/// dimensions (`--grid`, JSON `custom`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Size {
    /// One of the presets (JSON: its name, `XS` to `XL`).
    Preset(Preset),
    /// Dimensions given with `--grid`.
    #[default]
    Custom,
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Size::Preset(p) => write!(f, "{p:?}"),
            Size::Custom => f.write_str("custom"),
        }
    }
}

impl Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        if name == "custom" {
            return Ok(Size::Custom);
        }
        Preset::ALL
            .into_iter()
            .find(|p| format!("{p:?}") == name)
            .map(Size::Preset)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "size '{name}' is neither a preset (XS, S, M, L, XL) nor custom"
                ))
            })
    }
}

/// The global grid: `n = [NI, NJ, NK]` points including the fixed boundary;
/// k varies fastest in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grid {
    /// Points per dimension, boundary included.
    pub n: [usize; 3],
}

/// Most points a grid may have along one dimension: a single rank's index
/// arithmetic cannot overflow.
pub const MAX_POINTS: usize = 1 << 20;

impl Grid {
    /// Builds a grid, checking that every dimension has an interior point and
    /// that a single rank's index arithmetic cannot overflow.
    pub fn new(n: [usize; 3]) -> Result<Self> {
        for (d, &v) in n.iter().enumerate() {
            if v < 3 {
                return Err(Error::usage(format!(
                    "grid dimension {} is {v}: each of NI, NJ, NK must be at least 3",
                    ["NI", "NJ", "NK"][d]
                )));
            }
            if v > MAX_POINTS {
                return Err(Error::usage(format!(
                    "grid dimension {} is {v}: at most {MAX_POINTS} points per dimension are \
                     supported",
                    ["NI", "NJ", "NK"][d],
                )));
            }
        }
        Ok(Grid { n })
    }

    /// Number of interior (updated) points.
    pub fn interior_points(&self) -> u64 {
        self.n.iter().map(|&v| (v - 2) as u64).product()
    }

    /// Interior extent per dimension.
    pub fn interior(&self) -> [usize; 3] {
        [self.n[0] - 2, self.n[1] - 2, self.n[2] - 2]
    }
}

impl FromStr for Grid {
    type Err = Error;
    /// Parses `NIxNJxNK`, e.g. `130x130x258`.
    fn from_str(s: &str) -> Result<Self> {
        let n = parse_triple(s, "grid", "NIxNJxNK, e.g. 130x130x258")?;
        Grid::new(n)
    }
}

impl fmt::Display for Grid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.n[0], self.n[1], self.n[2])
    }
}

/// The grid that `--size`/`--grid` name, and its label for reports (the
/// preset's name, or `custom`). A `--grid` wins over the size preset.
pub fn resolve(size: &str, grid: Option<&str>) -> Result<(Grid, String)> {
    match grid {
        Some(g) => Ok((g.parse()?, "custom".to_string())),
        None => {
            let preset: Preset = size.parse()?;
            Ok((preset.grid(), format!("{preset:?}")))
        }
    }
}

/// Parses `AxBxC` into three positive integers; `what` and `hint` name the
/// option in the error message.
pub fn parse_triple(s: &str, what: &str, hint: &str) -> Result<[usize; 3]> {
    let parts: Vec<&str> = s.trim().split(['x', 'X']).collect();
    if parts.len() != 3 {
        return Err(Error::usage(format!(
            "invalid {what} '{s}': expected {hint}"
        )));
    }
    let mut out = [0usize; 3];
    for (o, p) in out.iter_mut().zip(&parts) {
        *o = p.trim().parse::<usize>().map_err(|_| {
            Error::usage(format!(
                "invalid {what} '{s}': '{p}' is not a positive whole number (expected {hint})"
            ))
        })?;
        if *o == 0 {
            return Err(Error::usage(format!(
                "invalid {what} '{s}': every factor must be at least 1 (expected {hint})"
            )));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_case_insensitively() {
        assert_eq!("xs".parse::<Preset>().unwrap(), Preset::XS);
        assert_eq!("L".parse::<Preset>().unwrap().grid().n, [256, 256, 512]);
        assert!("XXL".parse::<Preset>().is_err());
    }

    #[test]
    fn grid_parsing_rejects_bad_input() {
        assert_eq!("257x257x513".parse::<Grid>().unwrap().n, [257, 257, 513]);
        for bad in ["2x3x3", "3x3", "axbxc", "3x3x3x3", "0x5x5", "-4x5x5", ""] {
            assert!(bad.parse::<Grid>().is_err(), "{bad} accepted");
        }
        assert_eq!("3x3x3".parse::<Grid>().unwrap().interior_points(), 1);
    }
}
