//! The documentation holds together: every relative link in `README.md`,
//! `ARCHITECTURE.md` and `docs/*.md` names a file or folder of the
//! repository, and every `#anchor` into a markdown page names one of its
//! headings (as GitHub makes anchors of them); every page of `docs/` can be
//! reached from the README; and the README stays a front door, not a
//! manual. Pages move and headings get renamed; a link left behind is
//! found here, not by a reader.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The README's length limit (issue 39: "the front door, at most ~300 lines").
const README_MAX_LINES: usize = 300;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The pages checked, relative to the root: the README, ARCHITECTURE.md and
/// every markdown page of `docs/`.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md"), PathBuf::from("ARCHITECTURE.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("an entry of docs/").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| {
            p.strip_prefix(root())
                .expect("under the root")
                .to_path_buf()
        })
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn read(page: &Path) -> String {
    std::fs::read_to_string(root().join(page)).unwrap_or_else(|e| panic!("{}: {e}", page.display()))
}

/// The lines of `text` outside fenced code blocks, with their line numbers
/// (a `# comment` in a shell block is no heading, a `[x](y)` in one no link).
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((n + 1, line));
        }
    }
    out
}

/// GitHub's anchor for a heading's text: lower case, everything but letters,
/// digits, `-`, `_` and spaces dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings, a repeated one numbered as GitHub
/// numbers it (`x`, `x-1`, `x-2`).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in prose(text) {
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        let title = rest.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let base = slug(title.trim_end_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.insert(anchor);
    }
    out
}

/// The link targets of one line: inline links `[text](target "title")` and
/// reference definitions `[name]: target`, code spans left out.
fn targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(rest) = line.trim_start().strip_prefix('[')
        && let Some((_, def)) = rest.split_once("]:")
        && let Some(t) = def.split_whitespace().next()
    {
        out.push(t.to_string());
    }
    // Code spans are the odd pieces between backticks; a link's text may
    // hold one (`[`x`](y)`), its `](target)` stays in the even pieces.
    let plain: String = line.split('`').step_by(2).collect();
    let mut rest = plain.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        out.push(
            target
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string(),
        );
        rest = &rest[end..];
    }
    out
}

/// `path` with `.` and `..` taken out, or None where it leaves the root.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// What is wrong with the relative links of `page` (its path relative to
/// the root, its text given), one `page:line: target: why` each. External
/// links (`https:`, `mailto:`) are not followed.
fn broken_links(page: &Path, text: &str) -> Vec<String> {
    let dir = page.parent().unwrap_or(Path::new(""));
    let own = anchors(text);
    let mut out = Vec::new();
    for (n, line) in prose(text) {
        for target in targets(line) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let at = format!("{}:{n}: {target}", page.display());
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            if path.is_empty() && anchor.is_none() {
                out.push(format!("{at}: an empty link"));
                continue;
            }
            let file = if path.is_empty() {
                page.to_path_buf()
            } else {
                match normalise(&dir.join(path)) {
                    Some(f) => f,
                    None => {
                        out.push(format!("{at}: leaves the repository"));
                        continue;
                    }
                }
            };
            if !path.is_empty() && !root().join(&file).exists() {
                out.push(format!("{at}: no such file or folder ({})", file.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            // Anchors are checked where GitHub makes them: markdown pages.
            if file.extension().is_none_or(|x| x != "md") {
                continue;
            }
            let theirs;
            let known = if path.is_empty() {
                &own
            } else {
                theirs = anchors(&read(&file));
                &theirs
            };
            if !known.contains(anchor) {
                out.push(format!("{at}: {} has no heading #{anchor}", file.display()));
            }
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_documentation_resolves() {
    let broken: Vec<String> = pages()
        .iter()
        .flat_map(|p| broken_links(p, &read(p)))
        .collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_check_finds_what_is_broken() {
    // A page of its own, checked as if it were docs/example.md: each bad
    // link is reported, each good one is not.
    let text = "# A page\n\n## Second part\n\n\
                [ok](../README.md#quick-start) [ok](#second-part) [ok](gpu.md)\n\
                [gone](missing.md) [bad anchor](../README.md#no-such-heading)\n\
                [own](#no-such-part) [out](../../outside.md) [web](https://example.org/x#y)\n\
                ```sh\n[in code](missing-too.md)\n# not a heading\n```\n\
                [`code` text](errors.md#errors-and-exit-codes) `[a span](nowhere.md)`\n\
                [ref]: missing-ref.md\n";
    let found = broken_links(Path::new("docs/example.md"), text);
    let targets: Vec<&str> = found
        .iter()
        .map(|l| l.split(": ").nth(1).unwrap_or(""))
        .collect();
    assert_eq!(
        targets,
        [
            "missing.md",
            "../README.md#no-such-heading",
            "#no-such-part",
            "../../outside.md",
            "missing-ref.md",
        ],
        "reported: {found:#?}"
    );
}

#[test]
fn headings_make_the_anchors_github_makes() {
    let page = "# The emulated GPU (`scripts/cuda-emu.sh`)\n## Timelines (`--trace FILE`)\n\
                ## Notes\n## Notes\n    # indented code\n#hashtag\n";
    let got: Vec<String> = anchors(page).into_iter().collect();
    assert_eq!(
        got,
        [
            "notes",
            "notes-1",
            "the-emulated-gpu-scriptscuda-emush",
            "timelines---trace-file"
        ]
    );
}

#[test]
fn every_page_of_docs_is_reached_from_the_readme() {
    // From the README itself or from the index of docs/ that it links.
    let mut linked = BTreeSet::new();
    for from in [Path::new("README.md"), Path::new("docs/README.md")] {
        let dir = from.parent().unwrap_or(Path::new(""));
        for (_, line) in prose(&read(from)) {
            for t in targets(line) {
                let path = t.split('#').next().unwrap_or("");
                if let Some(p) = normalise(&dir.join(path)) {
                    linked.insert(p);
                }
            }
        }
    }
    let orphans: Vec<String> = pages()
        .into_iter()
        .filter(|p| p.starts_with("docs") && !linked.contains(p))
        .map(|p| p.display().to_string())
        .collect();
    assert!(orphans.is_empty(), "pages no link leads to: {orphans:?}");
}

#[test]
fn the_readme_stays_a_front_door() {
    let lines = read(Path::new("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines: the manual belongs in docs/ (at most {README_MAX_LINES})"
    );
}
