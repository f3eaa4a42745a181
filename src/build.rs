//! What this binary is and when something was stamped: the build's
//! identity (version, git commit, features) and UTC time stamps, which the
//! record's provenance, checkpoints (whose build a restart must match) and
//! their locks all write. Kept in the lowest layer so that each of them can
//! use it without reaching up to the report.

use std::time::{SystemTime, UNIX_EPOCH};

/// The crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit the binary was built from (`unknown` outside a checkout).
pub const GIT_COMMIT: &str = env!("HIMENO_GIT_COMMIT");

/// Cargo features compiled into this binary.
pub fn features() -> Vec<String> {
    let mut f = Vec::new();
    if cfg!(feature = "mpi") {
        f.push("mpi".to_string());
    }
    if cfg!(feature = "cuda") {
        f.push("cuda".to_string());
    }
    f
}

/// The current UTC time as RFC 3339 (`2026-11-30T01:40:32Z`).
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_from_unix(secs)
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC.
pub fn utc_from_unix(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting() {
        assert_eq!(utc_from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_from_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_from_unix(1_796_003_232), "2026-11-30T01:47:12Z");
    }
}
