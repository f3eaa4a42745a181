//! What this node offers a rank: its CPUs and how threads are placed on
//! them, the instruction sets its cores run, its last-level cache and huge
//! pages, and how much memory this process may still take (fallibly).
//! Everything here reads the machine; nothing knows about the benchmark.

pub mod alloc;
pub mod cache;
pub mod huge;
pub mod isa;
pub mod memory;
pub mod team;
pub mod threads;
