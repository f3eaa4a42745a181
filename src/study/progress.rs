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
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} iteration {pos}/{len} [{wide_bar}] {percent}% elapsed {elapsed}, ETA {eta}",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }

    /// Removes the bar (the report follows on stdout).
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
