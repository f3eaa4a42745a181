//! Where a rank's fields lie in device memory (`--gpu-layout`), in every
//! build: the row pitch of each field, where its first value sits in its
//! allocation, and how long that allocation is.
//!
//! A field's values are addressed from its *origin* (the device address
//! of local point (0, 0, 0)) as `(i * d1 + j) * pitch + k`, where `d1` is
//! the block's local j extent and `pitch` the row pitch in values. The
//! kernels take `pitch` where they took the k extent (their `d2`), so one
//! index formula serves both layouts:
//!
//! - `exact`: `pitch` is the local k extent and the origin is the
//!   allocation's start: the host's layout, value for value.
//! - `padded`: `pitch` is the smallest odd number of 128-byte lines, at
//!   least 3, that holds a row ([`padded_pitch`]), and the origin is placed
//!   so that local k = 1 (the first owned k, after the one ghost layer) of
//!   every row starts a 128-byte line: a warp's 32 loads of a row then
//!   touch 4 sectors, not 5. An odd pitch in lines sends consecutive rows
//!   (a block's j-neighbours) to lines of every parity instead of one set
//!   of L2 sets and DRAM channels, and makes no row, plane or field size
//!   a power of two. Each field's origin is further staggered by its
//!   number of lines ([`FieldLayout::front`]), so that the fourteen
//!   fields, whose allocations all start on the allocator's 2 MiB
//!   granules, do not put the same index at the same offset in a granule.
//!
//! Values in the padding are never read as points: the sweep reads only
//! `k` in `0..dims[2]` of a row.

use crate::config::GpuLayout;

/// Values of a 128-byte line (`f32`).
pub const LINE: usize = 32;

/// Ghost layers the GPU backend keeps (its `Capabilities`): the first
/// owned k of a row is local k = `GHOST`.
pub const GHOST: usize = 1;

/// The padded row pitch for rows of `d2` values: the smallest odd number
/// of [`LINE`]s, at least 3, that holds `d2` values. Odd and at least 3,
/// so never a power of two, nor is any multiple of it by a row or plane
/// count.
pub fn padded_pitch(d2: usize) -> usize {
    let lines = d2.div_ceil(LINE).max(3);
    (lines | 1) * LINE
}

/// The device layout of the fields of a block with local extents `dims`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLayout {
    /// Which layout.
    pub kind: GpuLayout,
    /// The block's local extents (ghosts included), k fastest.
    pub dims: [usize; 3],
    /// Values from one row's start to the next one's.
    pub pitch: usize,
}

impl FieldLayout {
    /// The layout `kind` of a block with local extents `dims`.
    pub fn of(kind: GpuLayout, dims: [usize; 3]) -> FieldLayout {
        let pitch = match kind {
            GpuLayout::Exact => dims[2],
            GpuLayout::Padded => padded_pitch(dims[2]),
        };
        FieldLayout { kind, dims, pitch }
    }

    /// The exact layout of `dims` (the host's).
    pub fn exact(dims: [usize; 3]) -> FieldLayout {
        FieldLayout::of(GpuLayout::Exact, dims)
    }

    /// Whether the rows are padded (a field is then not one contiguous
    /// run of the host's values).
    pub fn padded(&self) -> bool {
        self.kind == GpuLayout::Padded
    }

    /// Values from one i-plane's origin to the next one's.
    pub fn plane(&self) -> usize {
        self.dims[1] * self.pitch
    }

    /// Values from a field's origin to the end of its last row's pitch.
    pub fn len(&self) -> usize {
        self.dims[0] * self.plane()
    }

    /// Whether a field holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offset in values of local point `p` from the origin.
    pub fn index(&self, p: [usize; 3]) -> usize {
        (p[0] * self.dims[1] + p[1]) * self.pitch + p[2]
    }

    /// Values to allocate for field number `field` (its place in
    /// `grid::fields::NAMES`): its [`len`](Self::len) and, when padded,
    /// room for the largest [`front`](Self::front) it can have.
    pub fn alloc_len(&self, field: usize) -> usize {
        if self.padded() {
            self.len() + LINE - 1 + field * LINE
        } else {
            self.len()
        }
    }

    /// Values from the start of field `field`'s allocation, at device
    /// address `base` (a multiple of 4), to its origin: 0 when exact;
    /// when padded, what puts local k = [`GHOST`] of every row on a
    /// 128-byte boundary, plus `field` lines of stagger. Computed from the
    /// address, so it holds for any allocator's alignment.
    pub fn front(&self, base: u64, field: usize) -> usize {
        if !self.padded() {
            return 0;
        }
        let line = LINE as u64;
        let first = (base / 4 + GHOST as u64) % line;
        ((line - first) % line) as usize + field * LINE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Odd extents and allocation addresses of every 4-byte alignment
    /// within a line, including the allocator's usual 256 bytes.
    fn cases() -> impl Iterator<Item = ([usize; 3], u64)> {
        let extents = [
            3usize, 4, 5, 7, 17, 31, 32, 33, 63, 64, 65, 66, 97, 130, 258, 514, 1026,
        ];
        let bases = [
            0x7f00_0000_0000u64,
            0x7f00_0000_0004,
            0x7f00_0000_0040,
            0x7f00_0000_007c,
        ];
        extents.into_iter().flat_map(move |d2| {
            bases.into_iter().flat_map(move |b| {
                [[3, 4, d2], [5, 9, d2], [66, 130, d2], [514, 514, d2]]
                    .into_iter()
                    .map(move |d| (d, b))
            })
        })
    }

    #[test]
    fn padded_rows_put_the_first_owned_k_on_a_line_and_hold_the_row() {
        for (dims, base) in cases() {
            let l = FieldLayout::of(GpuLayout::Padded, dims);
            assert!(l.pitch >= dims[2], "{dims:?}: pitch {}", l.pitch);
            assert!(!l.pitch.is_power_of_two(), "{dims:?}: pitch {}", l.pitch);
            assert_eq!(l.pitch % LINE, 0, "{dims:?}");
            assert_eq!((l.pitch / LINE) % 2, 1, "{dims:?}: an odd number of lines");
            assert!(!l.plane().is_power_of_two() && !l.len().is_power_of_two());
            for field in 0..14 {
                let front = l.front(base, field);
                let origin = base + 4 * front as u64;
                // The origin and the whole field lie inside the allocation.
                assert!(front + l.len() <= l.alloc_len(field), "{dims:?} {field}");
                for (i, j) in [(0, 0), (1, 2), (dims[0] - 1, dims[1] - 1)] {
                    let first = origin + 4 * l.index([i, j, GHOST]) as u64;
                    assert_eq!(
                        first % 128,
                        0,
                        "{dims:?} base {base:#x} field {field} row {i},{j}"
                    );
                }
                // Fields differ by their stagger.
                assert_eq!(front / LINE, field, "{dims:?} {field}");
            }
        }
    }

    #[test]
    fn exact_is_the_hosts_layout() {
        for (dims, base) in cases() {
            let l = FieldLayout::exact(dims);
            assert_eq!(l.pitch, dims[2]);
            assert_eq!(l.len(), dims.iter().product::<usize>());
            assert_eq!(l.alloc_len(13), l.len());
            assert_eq!(l.front(base, 5), 0);
            assert_eq!(l.index([1, 2, 3]), (dims[1] + 2) * dims[2] + 3);
        }
    }

    #[test]
    fn the_pitch_is_the_smallest_odd_line_count_from_three() {
        assert_eq!(padded_pitch(1), 96);
        assert_eq!(padded_pitch(96), 96);
        assert_eq!(padded_pitch(97), 160);
        assert_eq!(padded_pitch(130), 160);
        assert_eq!(padded_pitch(258), 288);
        // One rank of XL: rows of 1024 values (4 KiB, a power of two)
        // become 33 lines, 3 % more.
        assert_eq!(padded_pitch(1024), 1056);
        assert_eq!(padded_pitch(1026), 1056);
        assert_eq!(padded_pitch(514), 544);
    }
}
