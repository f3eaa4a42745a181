//! The environment has one home: `src/environment.rs` lists every variable
//! himeno reads, the table of `docs/environment.md` is that list, and no other module of
//! `src/` reads or sets a variable (its unit tests aside, which read the
//! test machine's setup).

use himeno::environment::VARIABLES;
use std::path::{Path, PathBuf};

/// The `.rs` files under `dir`, recursively.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The file's code before its unit tests, without line comments.
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn only_the_environment_module_reads_or_sets_the_environment() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let home = src.join("environment.rs");
    let readers = [
        "env::var",
        "var_os(",
        "set_var(",
        "remove_var(",
        "env::vars",
        "from_default_env",
        // clap's `#[arg(env = "NAME")]` reads a variable too (the generic
        // `OUT` came in that way): name one of environment.rs's constants.
        "env = \"",
    ];
    let mut found = Vec::new();
    for file in sources(&src).into_iter().filter(|f| *f != home) {
        let code = code_of(&std::fs::read_to_string(&file).expect("a source file"));
        for reader in readers {
            if code.contains(reader) {
                found.push(format!("{} uses {reader}", file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "read the environment through himeno::environment:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_documented_table_is_the_list_of_variables_read() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/environment.md");
    let text = std::fs::read_to_string(&page).expect("docs/environment.md");
    let section = text
        .split("\n## What himeno reads\n")
        .nth(1)
        .expect("docs/environment.md has a section '## What himeno reads'");
    let section = section.split("\n## ").next().unwrap_or(section);
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| `")).collect();
    let want: Vec<String> = VARIABLES
        .iter()
        .map(|v| {
            let names: Vec<String> = v.name.split(", ").map(|n| format!("`{n}`")).collect();
            format!("| {} | {} |", names.join(", "), v.meaning)
        })
        .collect();
    assert_eq!(
        rows,
        want,
        "the rows of docs/environment.md should be, in this order:\n{}",
        want.join("\n")
    );
}
