//! Writing a thread's rows of the new field with non-temporal stores.
//!
//! An ordinary store to a line that is not in the cache first reads the
//! line from memory (write-allocate), so writing `next` costs 8 bytes of
//! memory traffic per point instead of 4: the sweep moves 60 bytes per
//! point where it needs 56. Non-temporal stores of whole 64-byte lines skip
//! that read. They must be aligned and should fill whole lines (a partial
//! line costs a read-modify-write in the memory controller), while a row
//! of the field starts at any offset modulo 64 B. So the sweep writes each
//! row into a small buffer that stays in L1, and [`LineWriter`] copies the
//! rows, in address order, to the field: the lines a thread's rows cover
//! wholly go out as non-temporal stores, the partial lines at the ends of
//! a run of contiguous rows as ordinary ones.

use std::ops::Range;

/// Values of `f32` per 64-byte cache line.
const LINE: usize = 16;
/// A cache line in bytes.
pub const LINE_BYTES: usize = LINE * std::mem::size_of::<f32>();

/// The L1-resident row a sweep computes into before a [`LineWriter`]
/// copies it out: `nk` values placed so that point `k0`, a row's first
/// owned point, sits on a cache line as it does in the field, and so the
/// row's whole lines are the field's.
pub struct RowBuffer {
    buf: Vec<f32>,
    /// Where the row starts in `buf`.
    start: usize,
    nk: usize,
}

impl RowBuffer {
    /// A buffer for rows of `nk` values whose owned points start at `k0`.
    pub fn new(nk: usize, k0: usize) -> RowBuffer {
        let buf = vec![0.0f32; nk + LINE];
        let skew = (buf[k0..].as_ptr() as usize % LINE_BYTES) / 4;
        RowBuffer {
            buf,
            start: (LINE - skew) % LINE,
            nk,
        }
    }

    /// The row, its values outside `k` (those the sweep does not compute)
    /// taken from `p_row`, `p`'s row: the fixed boundary both fields share,
    /// or ghosts the exchange replaces. So consecutive rows of a plane
    /// reach the writer as one contiguous run of whole lines.
    pub fn with_ends(&mut self, p_row: &[f32], k: &Range<usize>) -> &mut [f32] {
        let row = &mut self.buf[self.start..][..self.nk];
        row[..k.start].copy_from_slice(&p_row[..k.start]);
        row[k.end..].copy_from_slice(&p_row[k.end..self.nk]);
        row
    }
}

/// Copies runs of values into `dst` in increasing order of position,
/// streaming every whole line and holding back the last partial one until
/// the next run completes it or the writer is dropped. Dropping it writes
/// the held values and orders the streaming stores before anything the
/// thread does next (they are weakly ordered on x86).
pub struct LineWriter<'a> {
    dst: &'a mut [f32],
    /// Position in `dst` of the line-aligned start of `held`.
    held_at: usize,
    /// How many values of `held` are set (always less than a line).
    held_len: usize,
    held: [f32; LINE],
}

impl<'a> LineWriter<'a> {
    /// A writer into `dst`, which must be aligned to its element type.
    pub fn new(dst: &'a mut [f32]) -> LineWriter<'a> {
        LineWriter {
            dst,
            held_at: 0,
            held_len: 0,
            held: [0.0; LINE],
        }
    }

    /// Writes `src` to `dst[at..at + src.len()]`. Runs must come in
    /// increasing, non-overlapping order of `at`.
    ///
    /// # Panics
    /// If the run does not fit in `dst` or starts before the previous
    /// run's end.
    pub fn write(&mut self, at: usize, src: &[f32]) {
        assert!(at + src.len() <= self.dst.len(), "run beyond the field");
        assert!(at >= self.held_at + self.held_len, "runs out of order");
        let (mut at, mut src) = (at, src);
        if self.held_len > 0 {
            if at == self.held_at + self.held_len {
                // This run continues the held line.
                let take = src.len().min(LINE - self.held_len);
                self.held[self.held_len..self.held_len + take].copy_from_slice(&src[..take]);
                self.held_len += take;
                (at, src) = (at + take, &src[take..]);
                if self.held_len < LINE {
                    return;
                }
                let held = self.held;
                self.stream_line(self.held_at, &held);
                self.held_len = 0;
            } else {
                self.flush_held();
            }
        }
        // The part of a line whose start this writer did not see.
        let into_line = (self.dst[at..].as_ptr() as usize % LINE_BYTES) / 4;
        if into_line > 0 {
            let head = src.len().min(LINE - into_line);
            self.dst[at..at + head].copy_from_slice(&src[..head]);
            (at, src) = (at + head, &src[head..]);
        }
        let mut lines = src.chunks_exact(LINE);
        for line in &mut lines {
            self.stream_line(at, line);
            at += LINE;
        }
        let rest = lines.remainder();
        self.held[..rest.len()].copy_from_slice(rest);
        (self.held_at, self.held_len) = (at, rest.len());
    }

    /// Writes the held values with ordinary stores.
    fn flush_held(&mut self) {
        let (at, n) = (self.held_at, self.held_len);
        self.dst[at..at + n].copy_from_slice(&self.held[..n]);
        self.held_len = 0;
    }

    /// Stores one whole line of values at `dst[at..]`, line-aligned,
    /// bypassing the caches.
    #[inline(always)]
    fn stream_line(&mut self, at: usize, line: &[f32]) {
        let to = &mut self.dst[at..at + LINE];
        debug_assert_eq!(to.as_ptr() as usize % LINE_BYTES, 0);
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_loadu_ps, _mm_stream_ps};
            let from = &line[..LINE];
            for q in 0..LINE / 4 {
                // SAFETY: both slices hold LINE values (checked above),
                // SSE is part of x86-64, and `to` is 64-byte aligned
                // because only whole lines reach here.
                unsafe {
                    _mm_stream_ps(
                        to.as_mut_ptr().add(4 * q),
                        _mm_loadu_ps(from.as_ptr().add(4 * q)),
                    )
                };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        to.copy_from_slice(&line[..LINE]);
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        self.flush_held();
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a store fence has no operands.
        unsafe {
            std::arch::x86_64::_mm_sfence()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_buffers_put_the_first_owned_point_on_a_line_and_take_the_ends_from_p() {
        let p_row: Vec<f32> = (0..37).map(|v| v as f32).collect();
        for k0 in 1..20 {
            let k = k0..30;
            let mut b = RowBuffer::new(37, k0);
            let row = b.with_ends(&p_row, &k);
            assert_eq!(row.len(), 37);
            assert_eq!(row[k0..].as_ptr() as usize % LINE_BYTES, 0, "k0 {k0}");
            assert_eq!(row[..k0], p_row[..k0]);
            assert_eq!(row[30..], p_row[30..]);
        }
    }

    /// Runs of every length, contiguous and with gaps, land exactly where
    /// they are written and nowhere else, from every start offset.
    #[test]
    fn runs_land_exactly() {
        let mut store = vec![-1.0f32; 400];
        for shift in 0..LINE {
            for len in [1, 3, 15, 16, 17, 31, 33, 40] {
                store.fill(-1.0);
                let dst = &mut store[shift..shift + 300];
                let mut want = vec![-1.0f32; 300];
                {
                    let mut w = LineWriter::new(dst);
                    let mut at = 2;
                    let mut n = 0;
                    while at + len <= 300 {
                        let run: Vec<f32> = (0..len).map(|x| (1000 * n + x) as f32).collect();
                        w.write(at, &run);
                        want[at..at + len].copy_from_slice(&run);
                        n += 1;
                        // Every third run leaves a gap of 5 values.
                        at += len + if n % 3 == 0 { 5 } else { 0 };
                    }
                }
                assert_eq!(
                    &store[shift..shift + 300],
                    &want[..],
                    "shift {shift} len {len}"
                );
                assert!(store[..shift].iter().all(|&x| x == -1.0));
                assert!(store[shift + 300..].iter().all(|&x| x == -1.0));
            }
        }
    }

    #[test]
    #[should_panic(expected = "out of order")]
    fn runs_out_of_order_panic() {
        let mut store = vec![0.0f32; 64];
        let mut w = LineWriter::new(&mut store);
        w.write(10, &[1.0; 5]);
        w.write(12, &[1.0; 5]);
    }
}
