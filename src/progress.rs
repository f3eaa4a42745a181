//! Progress of a long run on rank 0: iterations done and the time left,
//! drawn on stderr only when stderr is a terminal, so batch logs get
//! nothing extra. The bar appears after a second, so short runs never
//! flash one.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Delay before a bar is shown.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// A progress display for the timed loop; inert unless enabled.
pub struct Progress {
    enabled: bool,
    start: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A display for `rank`: active on rank 0 when stderr is a terminal.
    pub fn for_rank(rank: usize) -> Progress {
        Progress::new(rank == 0 && std::io::stderr().is_terminal())
    }

    /// A display that draws only when `enabled`.
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            start: Instant::now(),
            bar: None,
        }
    }

    /// Records that `done` of `planned` timed iterations are complete.
    pub fn update(&mut self, done: u64, planned: u64) {
        if !self.enabled {
            return;
        }
        if done <= 1 && self.bar.is_none() {
            // The timed loop has just started: count the delay from here,
            // not from the rehearsal.
            self.start = Instant::now();
        }
        if self.bar.is_none() && self.start.elapsed() >= SHOW_AFTER && done < planned {
            // Starting at `done` keeps the rate estimate (and so the ETA) from
            // counting the iterations before the bar as instantaneous.
            let bar = ProgressBar::with_draw_target(Some(planned), ProgressDrawTarget::stderr())
                .with_position(done);
            if let Ok(style) =
                ProgressStyle::with_template("iteration {pos}/{len} [{wide_bar}] {percent}% {msg}")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            // The time left from the loop's own mean rate: steady for a
            // Jacobi loop, whose iterations all cost the same.
            let elapsed = self.start.elapsed();
            let left = elapsed.mul_f64((planned - done.min(planned)) as f64 / done.max(1) as f64);
            bar.set_message(format!("elapsed {}, ETA {}", clock(elapsed), clock(left)));
        }
    }

    /// Removes the bar (the report follows on stdout).
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// `h:mm:ss` or `m:ss`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_format() {
        assert_eq!(clock(Duration::from_secs(75)), "1:15");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
    }

    #[test]
    fn disabled_progress_never_draws() {
        let mut p = Progress::new(false);
        p.start -= Duration::from_secs(5);
        p.update(5, 10);
        assert!(p.bar.is_none());
    }

    #[test]
    fn enabled_progress_appears_after_the_delay() {
        let mut p = Progress::new(true);
        p.update(2, 10);
        assert!(p.bar.is_none(), "no bar before the delay");
        p.start -= Duration::from_secs(2);
        p.update(3, 10);
        assert_eq!(p.bar.as_ref().map(|b| b.position()), Some(3));
        p.finish();
        assert!(p.bar.is_none());
    }
}
