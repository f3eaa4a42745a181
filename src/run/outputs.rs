//! The files a benchmark run writes (`--output`, `--trace`) and the folder
//! its checkpoints own (`--checkpoint-dir`), checked before the run: no
//! two of them the same file by any alias, neither file inside the
//! checkpoint folder nor the `--restart` manifest the run reads (the
//! rules are `crate::files`').

use super::args::RunArgs;
use crate::error::Result;
use crate::files::{self, Named};

/// Refuses outputs of the run `args` asks for that would replace one
/// another, its checkpoints or its input (exit 2, one line).
pub fn check(args: &RunArgs) -> Result<()> {
    let mut outputs = Vec::new();
    if let Some(p) = &args.output {
        outputs.push(Named::new("--output", p));
    }
    if let Some(p) = &args.trace.trace {
        outputs.push(Named::new("--trace", p));
    }
    let restart = args
        .checkpoint
        .restart
        .as_ref()
        .filter(|p| p.as_os_str() != "latest")
        .map(|p| Named::new("--restart", p));
    files::distinct(&outputs, restart.as_slice())?;
    if let Some(dir) = &args.checkpoint.checkpoint_dir {
        let dir = Named::new("--checkpoint-dir", dir);
        for o in &outputs {
            files::outside(o, &dir)?;
        }
    }
    Ok(())
}
