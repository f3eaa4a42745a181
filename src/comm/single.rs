//! The single-rank communicator: every collective is the identity and a
//! halo exchange has no peers.

use super::api::{Comm, HaloSwap, Launch};
use crate::error::{Error, Result};

/// A job of exactly one rank, with no MPI library involved.
#[derive(Debug, Default)]
pub struct SingleComm;

impl Comm for SingleComm {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn node_rank(&self) -> usize {
        0
    }
    fn node_size(&self) -> usize {
        1
    }
    fn barrier(&self) {}
    fn sum(&self, _x: &mut [f64]) {}
    fn max(&self, x: f64) -> f64 {
        x
    }
    fn broadcast(&self, x: u64) -> u64 {
        x
    }
    fn gather(&self, local: &[u8]) -> Option<Vec<Vec<u8>>> {
        Some(vec![local.to_vec()])
    }
    fn broadcast_bytes(&self, data: &[u8]) -> Vec<u8> {
        data.to_vec()
    }
    fn exchange(&self, step: HaloSwap<'_>) -> Result<()> {
        match step.peers {
            [None, None] => Ok(()),
            _ => Err(Error::runtime(
                "a single-rank job was asked to exchange with a neighbour",
            )),
        }
    }
    fn send(&self, _peer: usize, _buf: &[u8]) {
        unreachable!("a single-rank job has no peer to send to")
    }
    fn recv(&self, _peer: usize, _buf: &mut [u8]) {
        unreachable!("a single-rank job has no peer to receive from")
    }
    fn abort(&self, code: i32) -> ! {
        crate::error::exit_now(code)
    }
    fn host(&self) -> String {
        super::launcher::hostname()
    }
    fn library(&self) -> Option<String> {
        None
    }

    fn launch(&self) -> Launch {
        Launch::Single
    }
}
