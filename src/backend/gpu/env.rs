//! The environment variables the GPU backend reads, named in every build:
//! `himeno gpu-check` sets them for the binary it checks, whatever its own
//! features.

/// Environment variable naming the NVRTC library file to use (see
/// `locate`).
pub const NVRTC_ENV: &str = crate::environment::NVRTC_LIB;
