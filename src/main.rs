//! The `himeno` command: everything happens in [`himeno::main_entry`].

/// Looks at standard output before Rust's runtime reopens a closed one on
/// `/dev/null` (see `himeno::output::note_closed_stdout`). A constructor in
/// `.init_array` runs before `main` and before the runtime's own set-up.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static NOTE_CLOSED_STDOUT: extern "C" fn() = himeno::output::note_closed_stdout;

fn main() -> std::process::ExitCode {
    himeno::main_entry()
}
