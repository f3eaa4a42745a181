//! The `himeno` command: everything happens in [`himeno::main_entry`].

fn main() -> std::process::ExitCode {
    himeno::main_entry()
}
