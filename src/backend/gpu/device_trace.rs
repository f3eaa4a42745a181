//! The GPU streams' own timeline for `--trace`: CUDA events recorded
//! around the sweep kernels and around the halo's pack, copies and unpack,
//! read back as spans on the host's clock and handed to the rank's
//! timeline recorder (`crate::timeline`) on one track per stream.
//!
//! Only a backend whose thread records a timeline creates one, so a run
//! without `--trace` records no event and pays one thread-local look-up
//! per sweep and per face step.
//!
//! Placing device times on the host clock: the first anchor event is
//! recorded on the idle compute stream between two host instants and
//! waited for, so its device time lies between them (the midpoint is
//! taken: off by at most half the gap). The device may be busy with other
//! ranks' work meanwhile (ranks share a GPU), which widens the gap, so
//! the narrowest of [`ANCHOR_TRIES`] records is kept: a few microseconds
//! on an idle device. Every later
//! iteration records a fresh anchor on the compute stream before its
//! sweep, placed once it has run by its device-measured distance from the
//! previous anchor; spans are read against the latest placed anchor. The
//! driver gives event distances as `f32` milliseconds, so reading against
//! an anchor at most an iteration old keeps the rounding to nanoseconds
//! however long the run; one device-clock reading per iteration chained
//! this way drifts from the host clock only as far as the two clocks do.
//! Every event is read after the host synchronised its stream, so no read
//! waits.

use super::driver::cuda_err;
use crate::error::Result;
use crate::timeline::{self, GPU_COMPUTE_TRACK, GPU_HALO_TRACK, GpuWork, What};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, result, sys};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Records of the first anchor, of which the one the host saw run in the
/// shortest time is kept.
const ANCHOR_TRIES: usize = 8;

/// A start and an end event around some work of one stream.
struct Pair {
    start: CudaEvent,
    end: CudaEvent,
}

/// The device events of one GPU rank's trace.
pub struct DeviceTrace {
    /// Anchors, alternately recorded: `anchors[placed]` is the last one
    /// whose host instant is known.
    anchors: [CudaEvent; 2],
    placed: usize,
    placed_at: Instant,
    /// Whether `anchors[1 - placed]` is recorded and not yet placed.
    pending: bool,
    /// Around the sweep kernels on the compute stream ...
    sweep: Pair,
    /// ... and around the boundary slabs' sweep on the halo stream
    /// (`--overlap`).
    boundary: Pair,
    /// Before the pack kernels and after the unpack kernels of a face
    /// step (the backend's own timing events mark the copies).
    pack_start: CudaEvent,
    unpack_end: CudaEvent,
    /// What the current sweep recorded: the compute stream's span, and
    /// the halo stream's too.
    sweep_recorded: Option<bool>,
}

/// A timing event of `ctx`.
fn event(ctx: &Arc<CudaContext>) -> Result<CudaEvent> {
    ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(cuda_err("creating a trace event"))
}

/// Milliseconds from `a` to `b`, both already complete.
fn elapsed_ms(a: &CudaEvent, b: &CudaEvent) -> Result<f32> {
    // SAFETY: both events are alive (borrowed) and belong to one context;
    // the caller synchronised the streams they were recorded on, so the
    // call does not wait (cudarc's `elapsed_ms` would synchronise both
    // first, two more driver calls per read).
    unsafe { result::event::elapsed(a.cu_event(), b.cu_event()) }
        .map_err(cuda_err("reading a trace event"))
}

/// `at` moved by `ms` milliseconds, either way.
fn shifted(at: Instant, ms: f32) -> Instant {
    let d = Duration::from_secs_f64(f64::from(ms.abs()) / 1e3);
    if ms >= 0.0 {
        at + d
    } else {
        at.checked_sub(d).unwrap_or(at)
    }
}

impl DeviceTrace {
    /// Creates the events and places the first anchor, recorded on
    /// `compute`, which must be idle.
    pub fn start(ctx: &Arc<CudaContext>, compute: &CudaStream) -> Result<DeviceTrace> {
        let pair = || -> Result<Pair> {
            Ok(Pair {
                start: event(ctx)?,
                end: event(ctx)?,
            })
        };
        let mut best: Option<(Duration, Instant, CudaEvent)> = None;
        for _ in 0..ANCHOR_TRIES {
            let e = event(ctx)?;
            let before = Instant::now();
            e.record(compute)
                .map_err(cuda_err("recording a trace event"))?;
            e.synchronize()
                .map_err(cuda_err("waiting for a trace event"))?;
            let gap = before.elapsed();
            if best.as_ref().is_none_or(|b| gap < b.0) {
                best = Some((gap, before + gap / 2, e));
            }
        }
        let (gap, placed_at, first) = best.expect("at least one try");
        tracing::debug!(
            gap_us = gap.as_secs_f64() * 1e6,
            "device trace anchored (off by at most half the gap)"
        );
        Ok(DeviceTrace {
            anchors: [first, event(ctx)?],
            placed: 0,
            placed_at,
            pending: false,
            sweep: pair()?,
            boundary: pair()?,
            pack_start: event(ctx)?,
            unpack_end: event(ctx)?,
            sweep_recorded: None,
        })
    }

    /// The host instant of the complete event `e`.
    fn at(&self, e: &CudaEvent) -> Result<Instant> {
        Ok(shifted(
            self.placed_at,
            elapsed_ms(&self.anchors[self.placed], e)?,
        ))
    }

    /// Records the span from `a` to `b` (complete) as `work` on `track`.
    fn span(&self, work: GpuWork, track: u32, a: &CudaEvent, b: &CudaEvent) -> Result<()> {
        let start = self.at(a)?;
        let end = self.at(b)?;
        timeline::record_on(What::Gpu(work), track, start, end);
        Ok(())
    }

    /// Records a fresh anchor on `compute`, before a sweep's work (unless
    /// one is still unplaced).
    pub fn anchor(&mut self, compute: &CudaStream) -> Result<()> {
        if !self.pending {
            self.anchors[1 - self.placed]
                .record(compute)
                .map_err(cuda_err("recording a trace event"))?;
            self.pending = true;
        }
        Ok(())
    }

    /// Places the pending anchor, once the compute stream is synchronised.
    fn place(&mut self) -> Result<()> {
        if self.pending {
            let next = 1 - self.placed;
            self.placed_at = self.at(&self.anchors[next])?;
            self.placed = next;
            self.pending = false;
        }
        Ok(())
    }

    /// Marks the start of the sweep kernels on the compute stream (`halo`
    /// false) or of the boundary slabs on the halo stream.
    pub fn sweep_begins(&mut self, st: &CudaStream, halo: bool) -> Result<()> {
        let pair = if halo { &self.boundary } else { &self.sweep };
        pair.start
            .record(st)
            .map_err(cuda_err("recording a trace event"))?;
        self.sweep_recorded = Some(halo || self.sweep_recorded.unwrap_or(false));
        Ok(())
    }

    /// Marks the end of what [`DeviceTrace::sweep_begins`] began.
    pub fn sweep_ends(&self, st: &CudaStream, halo: bool) -> Result<()> {
        let pair = if halo { &self.boundary } else { &self.sweep };
        pair.end
            .record(st)
            .map_err(cuda_err("recording a trace event"))
    }

    /// Hands the sweep's spans to the timeline, once both streams are
    /// synchronised after it: the compute stream's, and the halo
    /// stream's under `--overlap`.
    pub fn sweep_done(&mut self) -> Result<()> {
        self.place()?;
        if let Some(halo) = self.sweep_recorded.take() {
            let s = &self.sweep;
            self.span(GpuWork::Sweep, GPU_COMPUTE_TRACK, &s.start, &s.end)?;
            if halo {
                let b = &self.boundary;
                self.span(GpuWork::Sweep, GPU_HALO_TRACK, &b.start, &b.end)?;
            }
        }
        Ok(())
    }

    /// Marks the start of a face step's pack kernels on `st`.
    pub fn pack_begins(&self, st: &CudaStream) -> Result<()> {
        self.pack_start
            .record(st)
            .map_err(cuda_err("recording a trace event"))
    }

    /// Hands a pack's spans to the timeline once `st`'s work is done:
    /// the pack kernels (when the step had any) up to `copies.start`, and
    /// the copies to the host between the backend's timing events.
    pub fn pack_done(&self, track: u32, kernels: bool, copies: [&CudaEvent; 2]) -> Result<()> {
        if kernels {
            self.span(GpuWork::Pack, track, &self.pack_start, copies[0])?;
        }
        self.span(GpuWork::ToHost, track, copies[0], copies[1])
    }

    /// Marks the end of a face step's unpack kernels on `st`.
    pub fn unpack_ends(&self, st: &CudaStream) -> Result<()> {
        self.unpack_end
            .record(st)
            .map_err(cuda_err("recording a trace event"))
    }

    /// Hands an unpack's spans to the timeline once `st`'s work is done:
    /// the copies to the device between the backend's timing events, then
    /// the unpack kernels (when the step had any).
    pub fn unpack_done(&self, track: u32, kernels: bool, copies: [&CudaEvent; 2]) -> Result<()> {
        self.span(GpuWork::ToDevice, track, copies[0], copies[1])?;
        if kernels {
            self.span(GpuWork::Unpack, track, copies[1], &self.unpack_end)?;
        }
        Ok(())
    }
}

/// The track of the halo work: its own stream's under `--overlap`, else
/// the compute stream's, which then runs it.
pub fn halo_track(overlap: bool) -> u32 {
    if overlap {
        GPU_HALO_TRACK
    } else {
        GPU_COMPUTE_TRACK
    }
}
