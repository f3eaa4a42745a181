//! The module structure stays a one-way graph: every `src/` file's
//! references to other files of the crate (`use` trees and inline
//! `crate::`/`super::`/child-module paths, tests included) form a graph with
//! no cycle, and every file imports only from its top-level module's layer
//! or those below, as `src/lib.rs` lists them (a submodule such as
//! `run/args.rs` is held to its top-level module's layer).
//!
//! The scan is a small tokenizer, not a Rust parser: comments and literals
//! are dropped, `mod` declarations and inline `mod name { .. }` blocks are
//! tracked so that `super::` resolves as the compiler resolves it, and a
//! path is followed through modules as far as they exist (its last module
//! is the file it depends on). A `mod` declaration alone is not a
//! dependency: a parent that only declares and re-exports its children is
//! drawn above them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Path, // `::`
    Punct(char),
}

/// Source text without comments, string and char literals.
fn strip(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&b, i) {
            // Raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

fn tokens(src: &str) -> Vec<Tok> {
    let b: Vec<char> = strip(src).chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(b[start..i].iter().collect()));
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push(Tok::Path);
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    out
}

/// The module path of a source file (`src/a/b.rs` and `src/a/b/mod.rs` are
/// `a::b`; `src/lib.rs` is the root).
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("file name");
    match last.as_str() {
        "lib.rs" | "mod.rs" => {}
        other => parts.push(other.trim_end_matches(".rs").to_string()),
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable src dir") {
        let p = entry.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Expands one `use` tree starting at `toks[*i]` (after `use`) into full
/// paths (with `self` resolved to its prefix) and their bound names.
fn use_tree(toks: &[Tok], i: &mut usize, prefix: &ModPath, out: &mut Vec<(ModPath, String)>) {
    let mut path = prefix.clone();
    loop {
        match toks.get(*i) {
            Some(Tok::Ident(s)) if s == "as" => {
                *i += 1;
                if let Some(Tok::Ident(alias)) = toks.get(*i) {
                    *i += 1;
                    out.push((path.clone(), alias.clone()));
                }
                return;
            }
            Some(Tok::Ident(s))
                if s == "self" && !path.is_empty() && path.len() == prefix.len() =>
            {
                *i += 1;
                let name = path.last().cloned().unwrap_or_default();
                if let Some(Tok::Ident(a)) = toks
                    .get(*i + 1)
                    .filter(|_| matches!(toks.get(*i), Some(Tok::Ident(x)) if x == "as"))
                {
                    out.push((path.clone(), a.clone()));
                    *i += 2;
                } else {
                    out.push((path.clone(), name));
                }
                return;
            }
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *i += 1;
                if toks.get(*i) == Some(&Tok::Path) {
                    *i += 1;
                    continue;
                }
                let name = path.last().cloned().unwrap_or_default();
                if matches!(toks.get(*i), Some(Tok::Ident(x)) if x == "as") {
                    continue;
                }
                out.push((path, name));
                return;
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push((path, String::new()));
                return;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                loop {
                    match toks.get(*i) {
                        Some(Tok::Punct('}')) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        None => return,
                        _ => {
                            // A token no tree starts with (a macro's `$x`):
                            // skipped, so the scan always moves on.
                            let at = *i;
                            use_tree(toks, i, &path, out);
                            if *i == at {
                                *i += 1;
                            }
                        }
                    }
                }
            }
            _ => return,
        }
    }
}

/// The crate's module tree and each file's dependencies on other files.
struct Graph {
    files: BTreeMap<ModPath, PathBuf>,
    edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

impl Graph {
    fn build(src: &Path) -> Graph {
        let mut list = Vec::new();
        rust_files(src, &mut list);
        list.retain(|f| f.file_name().is_none_or(|n| n != "main.rs") || f.parent() != Some(src));
        let files: BTreeMap<ModPath, PathBuf> = list
            .iter()
            .map(|f| (module_of(src, f), f.clone()))
            .collect();
        let mut g = Graph {
            files,
            edges: BTreeMap::new(),
        };
        for f in &list {
            let text = std::fs::read_to_string(f).expect("readable source");
            assert!(
                !text.contains("#[path"),
                "{}: #[path] hides the module tree; declare modules by name",
                f.display()
            );
            let deps = g.deps_of(&module_of(src, f), &text);
            let deps = deps.into_iter().filter(|d| d != f).collect();
            g.edges.insert(f.clone(), deps);
        }
        g
    }

    fn is_module(&self, m: &ModPath) -> bool {
        self.files.contains_key(m)
    }

    /// Follows `segs` from module `start` through existing modules.
    fn walk(&self, start: ModPath, segs: &[String]) -> (ModPath, bool) {
        let mut cur = start;
        for (n, s) in segs.iter().enumerate() {
            let mut next = cur.clone();
            next.push(s.clone());
            if self.is_module(&next) {
                cur = next;
            } else {
                return (cur, n == segs.len());
            }
        }
        (cur, true)
    }

    /// Resolves a path written in module `here` (a file module plus inline
    /// modules) to the deepest crate module it names, and whether the whole
    /// path is that module.
    fn resolve(
        &self,
        file_mod: &ModPath,
        inline: usize,
        aliases: &BTreeMap<String, ModPath>,
        segs: &[String],
    ) -> Option<(ModPath, bool)> {
        let first = segs.first()?;
        let (start, rest) = match first.as_str() {
            "crate" => (Vec::new(), &segs[1..]),
            "self" => (file_mod.clone(), &segs[1..]),
            "super" => {
                let mut ups = segs.iter().take_while(|s| *s == "super").count();
                // Inside an inline module, the first supers leave it first.
                let inside = ups.min(inline);
                ups -= inside;
                let mut m = file_mod.clone();
                for _ in 0..ups {
                    m.pop()?;
                }
                (m, &segs[ups + inside..])
            }
            name => {
                let mut child = file_mod.clone();
                child.push(name.to_string());
                if inline == 0 && self.is_module(&child) {
                    (child, &segs[1..])
                } else if let Some(m) = aliases.get(name) {
                    (m.clone(), &segs[1..])
                } else {
                    return None;
                }
            }
        };
        Some(self.walk(start, rest))
    }

    fn deps_of(&self, file_mod: &ModPath, text: &str) -> BTreeSet<PathBuf> {
        let toks = tokens(text);
        let mut deps = BTreeSet::new();
        let mut aliases: BTreeMap<String, ModPath> = BTreeMap::new();
        // Brace depths at which inline modules were opened.
        let mut inline: Vec<usize> = Vec::new();
        let mut depth = 0usize;
        let add = |m: ModPath, deps: &mut BTreeSet<PathBuf>| {
            if let Some(f) = self.files.get(&m) {
                deps.insert(f.clone());
            }
        };
        let mut i = 0;
        while i < toks.len() {
            match &toks[i] {
                Tok::Punct('{') => {
                    depth += 1;
                    i += 1;
                }
                Tok::Punct('}') => {
                    if inline.last() == Some(&depth) {
                        inline.pop();
                    }
                    depth = depth.saturating_sub(1);
                    i += 1;
                }
                Tok::Ident(k) if k == "mod" => {
                    // `mod name {`, or `mod $name {` in a macro that
                    // defines an inline module.
                    let name = usize::from(toks.get(i + 1) == Some(&Tok::Punct('$')));
                    if let (Some(Tok::Ident(_)), Some(Tok::Punct('{'))) =
                        (toks.get(i + 1 + name), toks.get(i + 2 + name))
                    {
                        inline.push(depth + 1);
                    }
                    i += 2 + name;
                }
                Tok::Ident(k) if k == "use" => {
                    i += 1;
                    let mut paths = Vec::new();
                    use_tree(&toks, &mut i, &Vec::new(), &mut paths);
                    for (segs, name) in paths {
                        if let Some((m, whole)) =
                            self.resolve(file_mod, inline.len(), &aliases, &segs)
                        {
                            if whole && !name.is_empty() {
                                aliases.insert(name, m.clone());
                            }
                            add(m, &mut deps);
                        }
                    }
                }
                Tok::Ident(first) if toks.get(i + 1) == Some(&Tok::Path) => {
                    let after_path = i > 0 && toks[i - 1] == Tok::Path;
                    let mut segs = vec![first.clone()];
                    let mut j = i + 1;
                    while toks.get(j) == Some(&Tok::Path) {
                        match toks.get(j + 1) {
                            Some(Tok::Ident(s)) => {
                                segs.push(s.clone());
                                j += 2;
                            }
                            _ => break,
                        }
                    }
                    if !after_path
                        && let Some((m, _)) = self.resolve(file_mod, inline.len(), &aliases, &segs)
                    {
                        add(m, &mut deps);
                    }
                    i = j;
                }
                _ => i += 1,
            }
        }
        deps
    }

    /// Strongly connected components with more than one file (Tarjan).
    fn cycles(&self) -> Vec<Vec<PathBuf>> {
        struct T<'a> {
            g: &'a Graph,
            index: BTreeMap<&'a PathBuf, usize>,
            low: BTreeMap<&'a PathBuf, usize>,
            stack: Vec<&'a PathBuf>,
            on: BTreeSet<&'a PathBuf>,
            next: usize,
            out: Vec<Vec<PathBuf>>,
        }
        fn visit<'a>(t: &mut T<'a>, v: &'a PathBuf) {
            t.index.insert(v, t.next);
            t.low.insert(v, t.next);
            t.next += 1;
            t.stack.push(v);
            t.on.insert(v);
            for w in &t.g.edges[v] {
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let lw = t.low[w];
                    let lv = t.low[v];
                    t.low.insert(v, lv.min(lw));
                } else if t.on.contains(w) {
                    let iw = t.index[w];
                    let lv = t.low[v];
                    t.low.insert(v, lv.min(iw));
                }
            }
            if t.low[v] == t.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = t.stack.pop() {
                    t.on.remove(w);
                    comp.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    t.out.push(comp);
                }
            }
        }
        let mut t = T {
            g: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on: BTreeSet::new(),
            next: 0,
            out: Vec::new(),
        };
        for v in self.edges.keys() {
            if !t.index.contains_key(v) {
                visit(&mut t, v);
            }
        }
        t.out
    }
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn top(src: &Path, f: &Path) -> String {
    module_of(src, f).first().cloned().unwrap_or_default()
}

#[test]
fn the_module_graph_has_no_cycle() {
    let src = src_dir();
    let g = Graph::build(&src);
    let cycles = g.cycles();
    let show = |c: &Vec<PathBuf>| {
        c.iter()
            .map(|f| f.strip_prefix(&src).unwrap_or(f).display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    assert!(
        cycles.is_empty(),
        "files that import each other (directly or in a ring):\n{}",
        cycles.iter().map(show).collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_top_level_modules_form_layers_too() {
    // Files grouped by top-level module (`backend/cpu/mod.rs` is `backend`):
    // the picture in ARCHITECTURE.md's layer map must be a DAG as well.
    let src = src_dir();
    let g = Graph::build(&src);
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (file, deps) in &g.edges {
        let from = PathBuf::from(top(&src, file));
        let entry = edges.entry(from.clone()).or_default();
        for d in deps {
            let to = PathBuf::from(top(&src, d));
            if to != from {
                entry.insert(to);
            }
        }
    }
    for to in edges.values().flatten().cloned().collect::<Vec<_>>() {
        edges.entry(to).or_default();
    }
    let modules = Graph {
        files: BTreeMap::new(),
        edges,
    };
    let cycles: Vec<String> = modules
        .cycles()
        .iter()
        .map(|c| {
            c.iter()
                .map(|m| m.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "top-level modules that import each other:\n{}",
        cycles.join("\n")
    );
}

/// The layer of each top-level module, read from the one place that
/// writes the map down: the comment at the top of `src/lib.rs`, one
/// `// N. name, name, ...;` line per layer, lowest first. The map is read
/// strictly: layers are numbered 1, 2, 3, ..., each name is a module of
/// `src/` and appears once, so the map cannot go stale silently.
fn layer_map(src: &Path) -> BTreeMap<String, usize> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut map = BTreeMap::new();
    let mut last = 0;
    for line in lib.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("// ") else {
            continue;
        };
        let Some((n, names)) = rest.split_once(". ") else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else {
            continue;
        };
        assert_eq!(n, last + 1, "src/lib.rs: layer {n} follows layer {last}");
        last = n;
        let names = names
            .strip_suffix(';')
            .unwrap_or_else(|| panic!("src/lib.rs: layer {n} does not end with `;`: {line}"));
        for word in names.split(", ") {
            let module =
                src.join(format!("{word}.rs")).exists() || src.join(word).join("mod.rs").exists();
            assert!(
                module,
                "src/lib.rs: layer {n} names `{word}`, which is no module of src/"
            );
            if let Some(before) = map.insert(word.to_string(), n) {
                panic!("src/lib.rs: `{word}` is in layer {before} and again in layer {n}");
            }
        }
    }
    assert!(last > 1, "src/lib.rs holds no layer map");
    map
}

#[test]
fn every_module_imports_only_from_its_layer_or_below() {
    let src = src_dir();
    let layers = layer_map(&src);
    // Every top-level module has a layer (a new one must be placed).
    for m in std::fs::read_dir(&src).unwrap().flatten() {
        let name = m
            .file_name()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if !["lib", "main"].contains(&name.as_str()) {
            assert!(
                layers.contains_key(&name),
                "`{name}` has no layer in src/lib.rs"
            );
        }
    }
    let g = Graph::build(&src);
    let layer = |f: &Path| -> Option<usize> {
        let m = top(&src, f);
        // lib.rs and main.rs are the entry point, above every layer.
        if m.is_empty() || m == "lib" || m == "main" {
            return None;
        }
        Some(*layers.get(&m).unwrap_or_else(|| {
            panic!("top-level module `{m}` is missing from the layer map in src/lib.rs")
        }))
    };
    let mut bad = Vec::new();
    for (file, deps) in &g.edges {
        let Some(from) = layer(file) else { continue };
        for d in deps {
            if let Some(to) = layer(d)
                && to > from
            {
                bad.push(format!(
                    "{} (layer {from}) -> {} (layer {to})",
                    file.strip_prefix(&src).unwrap_or(file).display(),
                    d.strip_prefix(&src).unwrap_or(d).display()
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "imports that reach up a layer (src/lib.rs lists the layers):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_scanner_resolves_paths_as_the_compiler_does() {
    // A ring through a use tree, an inline path and `super` from a child,
    // while `super` inside an inline test module stays in its file.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("himeno-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "pub mod a; pub mod b;\n").unwrap();
    std::fs::write(
        dir.join("a/mod.rs"),
        "//! use crate::b; in a comment\npub mod c;\npub fn f() { c::g(); let s = \"crate::b::x\"; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("a/c.rs"),
        "use crate::{b::{self, X}};\npub fn g() {}\n#[cfg(test)]\nmod tests { use super::*; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "pub struct X; fn h() { crate::a::f(); }\n",
    )
    .unwrap();
    let g = Graph::build(&dir);
    let names = |f: &Path| -> BTreeSet<String> {
        g.edges[f]
            .iter()
            .map(|d| d.strip_prefix(&dir).unwrap().display().to_string())
            .collect()
    };
    assert_eq!(
        names(&dir.join("a/mod.rs")),
        BTreeSet::from(["a/c.rs".to_string()])
    );
    assert_eq!(
        names(&dir.join("a/c.rs")),
        BTreeSet::from(["b.rs".to_string()])
    );
    assert_eq!(
        names(&dir.join("b.rs")),
        BTreeSet::from(["a/mod.rs".to_string()])
    );
    assert_eq!(g.cycles().len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
