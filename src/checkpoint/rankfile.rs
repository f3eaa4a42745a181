//! One rank's file of a checkpoint: the owned points of `p`, framed by a
//! header that says whose and when they are, and a CRC-32 of it all.
//!
//! Layout (little-endian): the magic `HIMCKPT1`; eight `u64`: the rank,
//! the iteration, the block's first owned global index and its owned
//! points per dimension; the owned values of `p` as `f32`, `i` slowest and
//! `k` fastest; a `u32` CRC-32 of everything before it. The manifest holds
//! the same CRC, so a file swapped for another rank's or another
//! checkpoint's is refused as surely as a truncated or damaged one.

use crate::error::{Error, Result};
use crate::grid::decomp::Block;
use ndarray::Array3;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

/// The first bytes of every rank file.
const MAGIC: &[u8; 8] = b"HIMCKPT1";

/// Bytes of the magic and the header.
const HEADER_BYTES: u64 = 8 + 8 * 8;

/// Values copied per write (a row of `k` is often too short to be worth a
/// call, a whole field too large for one buffer).
const CHUNK_VALUES: usize = 1 << 16;

/// What a rank file says about itself, checked against what the reader
/// expects.
fn header(rank: usize, iteration: u64, block: &Block) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_BYTES as usize);
    h.extend_from_slice(MAGIC);
    let words = [rank as u64, iteration]
        .into_iter()
        .chain(block.lo.iter().map(|&v| v as u64))
        .chain(block.n.iter().map(|&v| v as u64));
    for w in words {
        h.extend_from_slice(&w.to_le_bytes());
    }
    h
}

/// The size a rank file of `block` has.
pub fn file_bytes(block: &Block) -> u64 {
    HEADER_BYTES + 4 * block.points() + 4
}

/// Writes the owned points of `field` (the block's local extents, ghosts
/// included) to `path` and syncs it to the disk. Returns the CRC-32.
pub fn write(
    path: &Path,
    rank: usize,
    iteration: u64,
    block: &Block,
    field: &Array3<f32>,
) -> Result<u32> {
    let fail = |e: std::io::Error| {
        Error::runtime(format!(
            "cannot write the checkpoint file {}: {e}",
            path.display()
        ))
    };
    let file = File::create(path).map_err(fail)?;
    let mut out = BufWriter::with_capacity(4 * CHUNK_VALUES, file);
    let mut crc = crc32fast::Hasher::new();
    let head = header(rank, iteration, block);
    crc.update(&head);
    out.write_all(&head).map_err(fail)?;
    let mut bytes = Vec::with_capacity(4 * CHUNK_VALUES);
    let mut flush = |bytes: &mut Vec<u8>, out: &mut BufWriter<File>| -> std::io::Result<()> {
        crc.update(bytes);
        out.write_all(bytes)?;
        bytes.clear();
        Ok(())
    };
    for li in block.owned(0) {
        for lj in block.owned(1) {
            for lk in block.owned(2) {
                bytes.extend_from_slice(&field[[li, lj, lk]].to_le_bytes());
            }
            if bytes.len() >= 4 * CHUNK_VALUES {
                flush(&mut bytes, &mut out).map_err(fail)?;
            }
        }
    }
    flush(&mut bytes, &mut out).map_err(fail)?;
    let sum = crc.finalize();
    out.write_all(&sum.to_le_bytes()).map_err(fail)?;
    let file = out.into_inner().map_err(|e| fail(e.into_error()))?;
    // The manifest that commits this checkpoint is written only after
    // every rank's file is on the disk.
    file.sync_all().map_err(fail)?;
    Ok(sum)
}

/// Reads the owned points of `block` at `iteration` for `rank` from
/// `path`, checking its size, header and CRC-32 (which must be
/// `expected`, the manifest's). Returns the values in the order they were
/// written.
pub fn read(
    path: &Path,
    rank: usize,
    iteration: u64,
    block: &Block,
    expected: u32,
) -> Result<Vec<f32>> {
    let shown = path.display();
    let fail =
        |e: std::io::Error| Error::usage(format!("cannot read the checkpoint file {shown}: {e}"));
    let corrupt = |why: &str| {
        Error::usage(format!(
            "the checkpoint file {shown} is damaged ({why}): restart from another \
             checkpoint (--restart PATH), or from the initial state"
        ))
    };
    let file = super::store::open_regular(path, "checkpoint file")?;
    let len = file.metadata().map_err(fail)?.len();
    if len != file_bytes(block) {
        return Err(corrupt(&format!(
            "{len} bytes where rank {rank}'s block needs {}",
            file_bytes(block)
        )));
    }
    let mut input = BufReader::with_capacity(4 * CHUNK_VALUES, file);
    let mut crc = crc32fast::Hasher::new();
    let mut head = vec![0u8; HEADER_BYTES as usize];
    input.read_exact(&mut head).map_err(fail)?;
    crc.update(&head);
    if head != header(rank, iteration, block) {
        return Err(corrupt(&format!(
            "its header is not that of rank {rank}'s block at iteration {iteration}"
        )));
    }
    let points = block.points() as usize;
    let mut values = crate::machine::alloc::zeroed::<f32>(points, "a checkpoint's values")?;
    let mut bytes = vec![0u8; 4 * CHUNK_VALUES];
    for chunk in values.chunks_mut(CHUNK_VALUES) {
        let b = &mut bytes[..4 * chunk.len()];
        input.read_exact(b).map_err(fail)?;
        crc.update(b);
        for (v, w) in chunk.iter_mut().zip(b.chunks_exact(4)) {
            *v = f32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        }
    }
    let mut trailer = [0u8; 4];
    input.read_exact(&mut trailer).map_err(fail)?;
    let sum = crc.finalize();
    if sum != u32::from_le_bytes(trailer) {
        return Err(corrupt("its checksum does not match its contents"));
    }
    if sum != expected {
        return Err(corrupt("its checksum is not the one the manifest holds"));
    }
    Ok(values)
}

/// Writes `values` (as [`read`] returns them) into the owned points of
/// `field`.
pub fn place(values: &[f32], block: &Block, field: &mut Array3<f32>) {
    let mut it = values.iter();
    for li in block.owned(0) {
        for lj in block.owned(1) {
            for lk in block.owned(2) {
                if let Some(&v) = it.next() {
                    field[[li, lj, lk]] = v;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::Grid;
    use crate::grid::decomp::ProcGrid;

    #[test]
    fn a_file_reads_back_and_damage_is_found() {
        let grid = Grid { n: [7, 6, 9] };
        let procs = ProcGrid { p: [2, 1, 2] };
        let block = Block::of(&grid, &procs, 3).with_depth(2);
        let d = block.local_dims();
        let field = Array3::from_shape_fn((d[0], d[1], d[2]), |(i, j, k)| {
            (i * 100 + j * 10 + k) as f32
        });
        let dir = std::env::temp_dir().join(format!("himeno-rankfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rank.bin");
        let crc = write(&path, 3, 12, &block, &field).unwrap();
        let values = read(&path, 3, 12, &block, crc).unwrap();
        let mut back = Array3::zeros((d[0], d[1], d[2]));
        place(&values, &block, &mut back);
        for li in block.owned(0) {
            for lj in block.owned(1) {
                for lk in block.owned(2) {
                    assert_eq!(back[[li, lj, lk]], field[[li, lj, lk]]);
                }
            }
        }
        assert!(read(&path, 2, 12, &block, crc).is_err(), "another rank's");
        assert!(
            read(&path, 3, 13, &block, crc).is_err(),
            "another iteration's"
        );
        assert!(
            read(&path, 3, 12, &block, crc ^ 1).is_err(),
            "not the manifest's"
        );
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER_BYTES as usize + 5] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let e = read(&path, 3, 12, &block, crc).unwrap_err();
        assert!(e.message().contains("checksum"), "{e}");
        std::fs::write(&path, &bytes[..bytes.len() - 9]).unwrap();
        let e = read(&path, 3, 12, &block, crc).unwrap_err();
        assert!(e.message().contains("bytes"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
