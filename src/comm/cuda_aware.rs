//! Whether the MPI library takes device buffers (`--halo mpi-device`),
//! as the library itself says: Open MPI's and MPICH's
//! `MPIX_Query_cuda_support()`, else MPICH's `MPIX_GPU_query_support`,
//! both looked up by name in the running process so that a library
//! without them still links; where neither exists, the switch a user sets
//! to make Cray MPICH or MVAPICH2 accept device buffers
//! (`MPICH_GPU_SUPPORT_ENABLED=1`, `MV2_USE_CUDA=1`: without it those
//! libraries crash on a device pointer, so its absence is a "no").
//!
//! A library that does not say yes is refused, one line and exit 2, unless
//! the user insists with `HIMENO_MPI_CUDA_AWARE=1` (a library that is not
//! CUDA-aware then reads device addresses as host memory and crashes).
//! The ranks decide together: one rank whose library says no refuses the
//! job for all.

use super::api::{Comm, Launch};
use super::decide::decide;
use crate::environment;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::ffi::{CStr, c_int};

/// What one rank's MPI library says about device buffers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Support {
    /// It takes them; how that is known.
    Yes(String),
    /// It does not, or does not say so; why.
    No(String),
}

/// `MPIX_GPU_SUPPORT_CUDA` of MPICH's `mpi.h`.
const MPIX_GPU_SUPPORT_CUDA: c_int = 0;

/// This process's MPI library's answer (MPI must be initialised).
pub fn query() -> Support {
    // SAFETY: the symbol, when present, has Open MPI's and MPICH's
    // signature `int MPIX_Query_cuda_support(void)`; MPI is initialised.
    if let Some(f) =
        unsafe { lookup::<unsafe extern "C" fn() -> c_int>(c"MPIX_Query_cuda_support") }
    {
        // SAFETY: as above.
        return match unsafe { f() } {
            0 => Support::No(
                "MPIX_Query_cuda_support() says the MPI library is not CUDA-aware".into(),
            ),
            _ => Support::Yes("MPIX_Query_cuda_support() = 1".into()),
        };
    }
    // SAFETY: MPICH 4's `int MPIX_GPU_query_support(int, int *)`.
    if let Some(f) = unsafe {
        lookup::<unsafe extern "C" fn(c_int, *mut c_int) -> c_int>(c"MPIX_GPU_query_support")
    } {
        let mut yes: c_int = 0;
        // SAFETY: `yes` is a valid out-pointer.
        let rc = unsafe { f(MPIX_GPU_SUPPORT_CUDA, &mut yes) };
        return if rc == 0 && yes != 0 {
            Support::Yes("MPIX_GPU_query_support(CUDA) = 1".into())
        } else {
            Support::No(
                "MPIX_GPU_query_support(CUDA) says the MPI library is not CUDA-aware".into(),
            )
        };
    }
    from_switches(|name| environment::get_os(name).map(|v| v.to_string_lossy().into_owned()))
}

/// The answer of a library without a query, from the switches that make
/// Cray MPICH or MVAPICH2 take device buffers (`get` reads a variable).
pub fn from_switches(get: impl Fn(&str) -> Option<String>) -> Support {
    for name in environment::MPI_GPU_SWITCHES {
        if get(name).as_deref() == Some("1") {
            return Support::Yes(format!("{name}=1"));
        }
    }
    Support::No(format!(
        "the MPI library has no MPIX_Query_cuda_support and neither {} is 1",
        environment::MPI_GPU_SWITCHES.join(" nor ")
    ))
}

/// Whether the user insists on device buffers whatever the library says
/// (`HIMENO_MPI_CUDA_AWARE=1`); any other value is refused.
pub fn insisted() -> Result<bool> {
    let name = environment::MPI_CUDA_AWARE;
    match environment::get_os(name) {
        None => Ok(false),
        Some(v) if v == "1" => Ok(true),
        Some(v) if v == "0" => Ok(false),
        Some(v) => Err(Error::usage(format!(
            "{name}={}: use 1 to insist on device buffers, 0 or unset to ask the MPI library",
            v.to_string_lossy()
        ))),
    }
}

/// The job's decision on `--halo mpi-device` (collective): Ok with how it
/// is known when every rank's library says yes or the user insists, else
/// the one refusal every rank returns (exit 2).
pub fn require(comm: &dyn Comm) -> Result<String> {
    let mine: std::result::Result<Support, String> = if comm.launch() != Launch::Mpi {
        Err("--halo mpi-device hands device buffers to MPI, and this run has no MPI ranks (start it with \
             mpirun, or use --halo peer or nccl for in-process ranks)"
            .to_string())
    } else {
        insisted()
            .map_err(|e| e.message().to_string())
            .map(|insist| {
                if insist {
                    Support::Yes(format!("{}=1 (insisted)", environment::MPI_CUDA_AWARE))
                } else {
                    query()
                }
            })
    };
    decide(comm, "the MPI library's CUDA support", &mine, |views| {
        let mut how = None;
        for (rank, v) in views.into_iter().enumerate() {
            match v {
                Err(e) => return Err(Error::usage(e)),
                Ok(Support::No(why)) => {
                    return Err(Error::usage(format!(
                        "--halo mpi-device needs a CUDA-aware MPI, and rank {rank}'s says no: {why}; \
                         use --halo staged or nccl, or set {}=1 to insist",
                        environment::MPI_CUDA_AWARE
                    )));
                }
                Ok(Support::Yes(h)) => {
                    how.get_or_insert(h);
                }
            }
        }
        how.ok_or_else(|| Error::runtime("no rank took part in the CUDA-aware decision"))
    })
}

/// The symbol `name` in the running process, or `None`.
///
/// # Safety
/// `T` must be the symbol's function type.
unsafe fn lookup<T: Copy>(name: &CStr) -> Option<T> {
    // SAFETY: dlsym with RTLD_DEFAULT only searches the loaded objects.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if p.is_null() {
        None
    } else {
        // SAFETY: a function pointer of the caller's type `T`.
        Some(unsafe { std::mem::transmute_copy::<*mut libc::c_void, T>(&p) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_set_to_one_says_yes_and_none_says_no() {
        let yes = from_switches(|n| (n == "MV2_USE_CUDA").then(|| "1".to_string()));
        assert_eq!(yes, Support::Yes("MV2_USE_CUDA=1".into()));
        let no = from_switches(|n| (n == "MPICH_GPU_SUPPORT_ENABLED").then(|| "0".to_string()));
        assert!(
            matches!(no, Support::No(ref why) if why.contains("MPICH_GPU_SUPPORT_ENABLED")),
            "{no:?}"
        );
        assert!(matches!(from_switches(|_| None), Support::No(_)));
    }
}
