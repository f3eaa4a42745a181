//! `himeno bench transfer`: host<->device copy bandwidth and latency with
//! page-locked ("pinned") and ordinary ("pageable") host memory, plus the
//! device-to-device copy bandwidth the GPU sweep is judged against.
//!
//! The measurement itself lives in the GPU backend (`backend::gpu`), which
//! returns raw samples; builds without the `cuda` feature answer with a
//! usage error. This module holds the options, the size list, the
//! summaries and the rendering.

use crate::backend::gpu::transfer_samples::{SERIES, Sample};
use crate::error::{Error, Result};
use crate::output::{self, Format};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::process::ExitCode;

/// Options of `himeno bench transfer`.
#[derive(Debug, Clone, clap::Args)]
pub struct TransferArgs {
    /// GPU ordinal to measure.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Smallest copy in bytes (sizes double from here).
    #[arg(long, default_value_t = 8)]
    pub min_bytes: usize,
    /// Largest copy in bytes (default 256 MiB).
    #[arg(long, default_value_t = 256 << 20)]
    pub max_bytes: usize,
    /// Report format on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Largest accepted copy: 16 GiB.
const MAX_BYTES: usize = 16 << 30;

impl TransferArgs {
    /// Copy sizes to measure: powers of two from `min_bytes` to
    /// `max_bytes`, and `max_bytes` itself.
    pub fn sizes(&self) -> Result<Vec<usize>> {
        if self.min_bytes == 0 || self.min_bytes > self.max_bytes || self.max_bytes > MAX_BYTES {
            return Err(Error::usage(format!(
                "--min-bytes {} and --max-bytes {} must satisfy 1 <= min <= max <= {MAX_BYTES}",
                self.min_bytes, self.max_bytes
            )));
        }
        let mut sizes = Vec::new();
        let mut s = self.min_bytes;
        while s < self.max_bytes {
            sizes.push(s);
            s *= 2;
        }
        sizes.push(self.max_bytes);
        Ok(sizes)
    }
}

/// The whole measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferReport {
    /// Host the measurement ran on.
    pub host: String,
    /// The device measured.
    pub device: String,
    /// Every sample.
    pub samples: Vec<Sample>,
    /// Per `direction/memory`: time of the smallest copy in microseconds.
    pub latency_us: BTreeMap<String, f64>,
    /// Per `direction/memory`: the best bandwidth in GB/s.
    pub peak_gbytes_per_s: BTreeMap<String, f64>,
    /// Whether the device is an emulated one (its times are the host's,
    /// not GPU performance); absent for a real GPU.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub emulated: bool,
    /// The emulated driver's description, when emulated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<String>,
}

impl TransferReport {
    /// Builds the report and its summaries from the samples.
    pub fn new(
        host: String,
        device: String,
        samples: Vec<Sample>,
        emulator: Option<String>,
    ) -> TransferReport {
        let mut latency_us = BTreeMap::new();
        let mut peak = BTreeMap::new();
        for (dir, mem) in SERIES {
            let key = format!("{dir}/{mem}");
            let series: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.direction == dir && s.memory == mem)
                .collect();
            if let Some(first) = series.iter().min_by_key(|s| s.bytes) {
                latency_us.insert(key.clone(), first.seconds_per_copy * 1e6);
            }
            if let Some(best) = series
                .iter()
                .map(|s| s.gbytes_per_s)
                .max_by(|a, b| a.total_cmp(b))
            {
                peak.insert(key, best);
            }
        }
        TransferReport {
            host,
            device,
            samples,
            latency_us,
            peak_gbytes_per_s: peak,
            emulated: emulator.is_some(),
            emulator,
        }
    }

    /// The text table: GB/s per size and series, then latency and peaks.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "host<->device transfers on {} ({})",
            self.device, self.host
        );
        if let Some(e) = &self.emulator {
            let _ = writeln!(
                s,
                "EMULATED device ({e}): these are host memory copies, not GPU performance"
            );
        }
        let _ = writeln!(
            s,
            "GB/s per copy size (each copy waited for; d2d counts read + write)"
        );
        let _ = write!(s, "{:>12}", "bytes");
        for (dir, mem) in SERIES {
            let _ = write!(s, " {:>13}", format!("{dir} {mem}"));
        }
        let _ = writeln!(s);
        let mut sizes: Vec<usize> = self.samples.iter().map(|x| x.bytes).collect();
        sizes.sort_unstable();
        sizes.dedup();
        for b in sizes {
            let _ = write!(s, "{b:>12}");
            for (dir, mem) in SERIES {
                let x = self
                    .samples
                    .iter()
                    .find(|x| x.bytes == b && x.direction == dir && x.memory == mem);
                cell(&mut s, x.map(|x| x.gbytes_per_s), 3);
            }
            let _ = writeln!(s);
        }
        let _ = write!(s, "{:>12}", "latency us");
        for (dir, mem) in SERIES {
            cell(
                &mut s,
                self.latency_us.get(&format!("{dir}/{mem}")).copied(),
                2,
            );
        }
        let _ = writeln!(s);
        let _ = write!(s, "{:>12}", "peak GB/s");
        for (dir, mem) in SERIES {
            let peak = self.peak_gbytes_per_s.get(&format!("{dir}/{mem}")).copied();
            cell(&mut s, peak, 3);
        }
        let _ = writeln!(s);
        s
    }
}

impl TransferReport {
    /// One CSV row per sample.
    pub fn render_csv(&self) -> String {
        let mut s = String::from(
            "host,device,direction,memory,bytes,copies,seconds_per_copy,gbytes_per_s\n",
        );
        // An emulated device says so in every row: its rates are the host's.
        let device = match self.emulator {
            Some(_) => format!("{} (EMULATED)", self.device),
            None => self.device.clone(),
        };
        for x in &self.samples {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{:.6e},{:.4}",
                output::csv_field(&self.host),
                output::csv_field(&device),
                x.direction,
                x.memory,
                x.bytes,
                x.copies,
                x.seconds_per_copy,
                x.gbytes_per_s
            );
        }
        s
    }
}

/// Appends one table cell: `v` with `decimals` digits, or `-` when the
/// series has no value.
fn cell(s: &mut String, v: Option<f64>, decimals: usize) {
    let _ = match v {
        Some(v) => write!(s, " {v:>13.decimals$}"),
        None => write!(s, " {:>13}", "-"),
    };
}

/// Runs the benchmark and prints its report.
pub fn run(args: &TransferArgs) -> Result<ExitCode> {
    let sizes = args.sizes()?;
    // Host side: a page-locked and a pageable buffer of the largest copy.
    crate::preflight::check_local(
        &format!("bench transfer of up to {} bytes", args.max_bytes),
        crate::machine::memory::Footprint::vec::<u8>(args.max_bytes).times(2),
    )?;
    let measured = crate::backend::gpu::measure_transfers(args.device, &sizes)?;
    let report = TransferReport::new(
        crate::comm::hostname(),
        measured.device,
        measured.samples,
        measured.emulator,
    );
    output::print_report(&match args.format {
        Format::Text => report.render_text(),
        Format::Json => output::json(&report)?,
        Format::Csv => report.render_csv(),
    })?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(min: usize, max: usize) -> TransferArgs {
        TransferArgs {
            device: 0,
            min_bytes: min,
            max_bytes: max,
            format: Format::Text,
        }
    }

    #[test]
    fn sizes_double_and_end_at_the_maximum() {
        let s = args(8, 256 << 20).sizes().unwrap();
        assert_eq!(s.first(), Some(&8));
        assert_eq!(s.last(), Some(&(256 << 20)));
        assert_eq!(s.len(), 26);
        assert_eq!(args(8, 100).sizes().unwrap(), vec![8, 16, 32, 64, 100]);
        assert!(args(0, 8).sizes().is_err());
        assert!(args(16, 8).sizes().is_err());
    }

    #[test]
    fn summaries_take_smallest_copy_and_best_bandwidth() {
        let sample = |bytes: usize, t: f64| Sample {
            direction: "h2d".into(),
            memory: "pinned".into(),
            bytes,
            copies: 3,
            seconds_per_copy: t,
            gbytes_per_s: bytes as f64 / t / 1e9,
        };
        let r = TransferReport::new(
            "h".into(),
            "d".into(),
            vec![
                sample(1 << 20, 1e-4),
                sample(8, 5e-6),
                sample(1 << 24, 1e-3),
            ],
            None,
        );
        assert!((r.latency_us["h2d/pinned"] - 5.0).abs() < 1e-9);
        let want = (1u64 << 24) as f64 / 1e-3 / 1e9;
        assert!((r.peak_gbytes_per_s["h2d/pinned"] - want).abs() < 1e-9);
        assert!(!r.latency_us.contains_key("d2h/pinned"));
        let text = r.render_text();
        assert!(text.contains("latency us"), "{text}");
        assert!(text.contains("16777216"), "{text}");
        assert_eq!(r.render_csv().lines().count(), 4);
        let latency = text
            .lines()
            .find(|l| l.starts_with("  latency us"))
            .unwrap();
        assert_eq!(
            latency.split_whitespace().collect::<Vec<_>>(),
            ["latency", "us", "5.00", "-", "-", "-", "-"],
            "{text}"
        );
    }
}
