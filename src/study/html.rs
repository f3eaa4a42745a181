//! `himeno report ... --html FILE`: the whole study as one self-contained
//! page. It holds the tables the text report prints (one per scaling
//! group, the runs set aside, the skipped lines, the roofline), every
//! picture inline as SVG (per group speed-up, efficiency and phases, the
//! roofline, and the timeline of `--html-trace`), the provenance of each
//! group's runs, and the EMULATED and cache-resident marks.
//!
//! The pictures are drawn by the same functions, on the same SVG backend,
//! as the `.svg` files of `--plot DIR`, so the page shows exactly those
//! pictures. The page loads nothing: no script, no style sheet, font or
//! image from elsewhere; its style is inline and its text uses the
//! browser's own sans-serif font.

use super::cells::{Cells, Shape, triple};
use super::group::{Group, Study};
use super::records::{Malformed, RunRecord};
use super::roofline::{self, Roofline};
use crate::error::Result;
use std::collections::HashMap;
use std::fmt::Write;

/// The timeline section: the text summary and the picture.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// The trace's name, as given.
    pub trace: String,
    /// The per-rank summary the text report prints.
    pub summary: String,
    /// The Gantt chart, SVG text.
    pub svg: String,
}

/// What the page shows.
pub struct Page<'a> {
    /// The results files, as given.
    pub files: &'a [String],
    /// The records read (for the provenance of each group's rows).
    pub records: &'a [RunRecord],
    /// The grouped study.
    pub study: &'a Study,
    /// Lines skipped when reading.
    pub malformed: &'a [Malformed],
    /// The roofline of the records.
    pub roofline: &'a Roofline,
    /// The timeline, when a trace was given.
    pub timeline: Option<Timeline>,
}

/// `s` with the characters HTML gives a meaning escaped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page's style: inline, nothing fetched.
const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1300px}\
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:0.6em 0;font-size:0.9em}\
th,td{border:1px solid #ccc;padding:0.2em 0.5em;text-align:right}\
th{background:#f0f0f0}td.l,th.l{text-align:left}\
.mark{display:inline-block;padding:0.05em 0.5em;border-radius:0.3em;font-weight:bold;\
font-size:0.85em;margin-right:0.4em}\
.emulated{background:#ffe0b3;color:#7a3e00;border:1px solid #e09a3e}\
.cache{background:#dbeafe;color:#1e3a8a;border:1px solid #93c5fd}\
.prov{font-size:0.85em;color:#444;margin:0.3em 0}\
figure{display:inline-block;vertical-align:top;width:48%;margin:0.5em 0.5%}\
figure svg{width:100%;height:auto;border:1px solid #ddd}figure.wide{width:98%}\
figcaption{font-size:0.85em;color:#555}pre{background:#f7f7f7;padding:0.6em;overflow-x:auto}";

/// The EMULATED mark.
const EMULATED: &str = "<span class=\"mark emulated\">EMULATED GPU: not GPU performance</span>";

/// The cache-resident mark.
const CACHE: &str = "<span class=\"mark cache\">cache-resident</span>";

/// The page.
pub fn render(page: &Page<'_>) -> Result<String> {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>himeno study report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>himeno study report</h1>\n<p>From {}: {} run record(s) in {} scaling group(s), \
         {} set aside, {} line(s) skipped.</p>\n",
        page.files
            .iter()
            .map(|f| format!("<code>{}</code>", escape(f)))
            .collect::<Vec<_>>()
            .join(", "),
        page.records.len(),
        page.study.groups.len(),
        page.study.flagged.len(),
        page.malformed.len()
    );
    let by_source: HashMap<String, &RunRecord> = page
        .records
        .iter()
        .map(|r| (r.source.to_string(), r))
        .collect();
    let resident: HashMap<&str, bool> = page
        .roofline
        .points
        .iter()
        .map(|p| (p.source.as_str(), p.residence.cache_resident()))
        .collect();
    contents(&mut s, page);
    if page.study.groups.is_empty() {
        s.push_str("<p>No usable results: nothing to tabulate.</p>\n");
    }
    for (i, g) in page.study.groups.iter().enumerate() {
        group(&mut s, i, g, &by_source, &resident)?;
    }
    flagged(&mut s, page.study);
    skipped(&mut s, page.malformed);
    roofline_section(&mut s, page.roofline)?;
    if let Some(t) = &page.timeline {
        let _ = write!(
            s,
            "<h2 id=\"timeline\">Timeline of {}</h2>\n<pre>{}</pre>\n<figure class=\"wide\">{}\
             <figcaption>timeline (the same picture as --timeline's SVG)</figcaption></figure>\n",
            escape(&t.trace),
            escape(&t.summary),
            t.svg
        );
    }
    s.push_str("</body>\n</html>\n");
    Ok(s)
}

/// Links to the page's sections (within the page).
fn contents(s: &mut String, page: &Page<'_>) {
    s.push_str("<ul>\n");
    for (i, g) in page.study.groups.iter().enumerate() {
        let _ = writeln!(
            s,
            "<li><a href=\"#group-{i}\">{}</a>{}</li>",
            escape(&g.title()),
            if g.emulated { " (EMULATED)" } else { "" }
        );
    }
    if !page.study.flagged.is_empty() {
        s.push_str("<li><a href=\"#set-aside\">set aside</a></li>\n");
    }
    if !page.malformed.is_empty() {
        s.push_str("<li><a href=\"#skipped\">skipped lines</a></li>\n");
    }
    s.push_str("<li><a href=\"#roofline\">roofline</a></li>\n");
    if page.timeline.is_some() {
        s.push_str("<li><a href=\"#timeline\">timeline</a></li>\n");
    }
    s.push_str("</ul>\n");
}

/// The cells of one line of a group's table, each in a `tag` element; a
/// phase's heading gets `unit` after its name, and a row without a model
/// prediction gets empty model cells where the table has them.
fn html_cells(s: &mut String, tag: &str, c: &Cells, unit: &str, model: bool) {
    for cell in c.placement.iter().chain(&c.figures) {
        let _ = write!(s, "<{tag}>{cell}</{tag}>");
    }
    for cell in &c.phases {
        let _ = write!(s, "<{tag}>{cell}{unit}</{tag}>");
    }
    match &c.model {
        Some(cells) => {
            for cell in cells {
                let _ = write!(s, "<{tag}>{cell}</{tag}>");
            }
        }
        None if model => {
            let _ = write!(s, "<{tag}></{tag}><{tag}></{tag}>");
        }
        None => {}
    }
}

/// One scaling group: its title and marks, provenance, table and pictures.
fn group(
    s: &mut String,
    index: usize,
    g: &Group,
    by_source: &HashMap<String, &RunRecord>,
    resident: &HashMap<&str, bool>,
) -> Result<()> {
    let _ = writeln!(
        s,
        "<h2 id=\"group-{index}\">{}{}</h2>",
        if g.emulated { EMULATED } else { "" },
        escape(&g.title())
    );
    provenance(s, g, by_source);
    let shape = Shape::of(g);
    s.push_str("<table>\n<tr>");
    html_cells(s, "th", &shape.headings(), " ms", shape.model);
    s.push_str("<th class=\"l\">memory</th><th class=\"l\">source</th></tr>\n");
    for r in &g.rows {
        s.push_str("<tr>");
        html_cells(s, "td", &shape.row(r), "", shape.model);
        let source = r.source.to_string();
        let memory = if resident.get(source.as_str()).copied().unwrap_or(false) {
            CACHE
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "<td class=\"l\">{memory}</td><td class=\"l\">{}</td></tr>",
            escape(&source)
        );
    }
    let _ = writeln!(
        s,
        "</table>\n<p class=\"prov\">Speed-up and efficiency against the best run at {} \
         rank(s); phase columns: slowest rank, ms per iteration.</p>",
        g.base_ranks
    );
    for (name, svg) in super::plot::svg_pictures(g)? {
        let _ = writeln!(
            s,
            "<figure>{svg}<figcaption>{name} (the same picture as --plot's SVG)</figcaption>\
             </figure>"
        );
    }
    Ok(())
}

/// The provenance of a group's rows: each distinct build, MPI library,
/// hosts and devices, and the command lines.
fn provenance(s: &mut String, g: &Group, by_source: &HashMap<String, &RunRecord>) {
    let mut seen: Vec<String> = Vec::new();
    let mut commands: Vec<String> = Vec::new();
    for row in &g.rows {
        let Some(r) = by_source.get(&row.source.to_string()) else {
            continue;
        };
        let p = &r.provenance;
        let mut line = format!(
            "himeno {} (commit {}), features [{}]",
            p.version,
            p.git_commit,
            p.features.join(", ")
        );
        if let Some(m) = &p.mpi_library {
            let _ = write!(line, ", MPI {}", m.lines().next().unwrap_or_default());
        }
        let _ = write!(line, "; hosts {}", p.hosts.join(", "));
        if !p.devices.is_empty() {
            let _ = write!(line, "; devices {}", p.devices.join(", "));
        }
        if let Some(e) = r.emulator() {
            let _ = write!(line, "; emulated by {e}");
        }
        if !seen.contains(&line) {
            seen.push(line);
        }
        commands.push(format!("{}: {}", row.source, p.command.join(" ")));
    }
    for line in &seen {
        let _ = writeln!(
            s,
            "<p class=\"prov\"><b>Provenance:</b> {}</p>",
            escape(line)
        );
    }
    if !commands.is_empty() {
        let _ = writeln!(
            s,
            "<details class=\"prov\"><summary>command lines</summary><pre>{}</pre></details>",
            escape(&commands.join("\n"))
        );
    }
}

/// The runs set aside.
fn flagged(s: &mut String, study: &Study) {
    if study.flagged.is_empty() {
        return;
    }
    s.push_str(
        "<h2 id=\"set-aside\">Set aside (not in any table)</h2>\n<table>\n<tr>\
         <th class=\"l\">source</th><th class=\"l\">label</th><th>grid</th><th>procs</th>\
         <th>MFLOPS</th><th class=\"l\">why</th></tr>\n",
    );
    for (r, why) in &study.flagged {
        let _ = writeln!(
            s,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>\
             <td>{:.2}</td><td class=\"l\">{}</td></tr>",
            escape(&r.source.to_string()),
            escape(r.label.as_deref().unwrap_or("-")),
            triple(r.grid),
            triple(r.procs),
            r.mflops,
            escape(why)
        );
    }
    s.push_str("</table>\n");
}

/// The lines skipped when reading.
fn skipped(s: &mut String, malformed: &[Malformed]) {
    if malformed.is_empty() {
        return;
    }
    s.push_str("<h2 id=\"skipped\">Skipped lines</h2>\n<ul>\n");
    for m in malformed {
        let _ = writeln!(
            s,
            "<li><code>{}</code>: {}</li>",
            escape(&m.source.to_string()),
            escape(&m.why)
        );
    }
    s.push_str("</ul>\n");
}

/// The roofline: ceilings, points and the picture.
fn roofline_section(s: &mut String, r: &Roofline) -> Result<()> {
    let _ = writeln!(
        s,
        "<h2 id=\"roofline\">Roofline</h2>\n<p>{:.3} flop/byte (34 flops per 56 bytes a \
         point); CPU runs against the {}.</p>",
        r.intensity,
        escape(&r.llc)
    );
    if r.ceilings.is_empty() {
        s.push_str(
            "<p>No bandwidth ceiling: run with <code>--stream quick</code>, or pass \
             <code>--ceiling FILE</code> with <code>himeno bench stream --format json</code> \
             or <code>bench transfer --format json</code>.</p>\n",
        );
    } else {
        s.push_str("<table>\n<tr><th>GB/s</th><th>GFLOPS at this intensity</th><th class=\"l\">ceiling</th></tr>\n");
        for c in &r.ceilings {
            let _ = writeln!(
                s,
                "<tr><td>{:.2}</td><td>{:.2}</td><td class=\"l\">{}{}</td></tr>",
                c.gbytes_per_s,
                c.gbytes_per_s * r.intensity,
                if c.emulated { EMULATED } else { "" },
                escape(&c.name)
            );
        }
        s.push_str("</table>\n");
    }
    s.push_str(
        "<table>\n<tr><th>#</th><th class=\"l\">run</th><th>GFLOPS</th><th>GB/s</th>\
         <th>fields MB</th><th>ceiling GB/s</th><th class=\"l\">of memory ceiling</th><th class=\"l\">source</th></tr>\n",
    );
    for (i, p) in r.points.iter().enumerate() {
        let marks = format!(
            "{}{}",
            if p.emulated { EMULATED } else { "" },
            if p.residence.cache_resident() {
                CACHE
            } else {
                ""
            }
        );
        let [gflops, gbs, mb, ceiling, fraction] = roofline::figures(p);
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"l\">{marks}{}</td><td>{gflops}</td><td>{gbs}</td>\
             <td>{mb}</td><td>{ceiling}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            i + 1,
            escape(&p.label),
            escape(&fraction),
            escape(&p.source)
        );
    }
    s.push_str("</table>\n");
    let _ = writeln!(
        s,
        "<figure class=\"wide\">{}<figcaption>roofline (the same picture as --plot's roofline.svg)\
         </figcaption></figure>",
        roofline::svg(r)?
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::group::group as make_groups;
    use crate::study::records::tests::line;
    use crate::study::records::{Loaded, parse};

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            escape("<script>a&b</script>\"'"),
            "&lt;script&gt;a&amp;b&lt;/script&gt;&quot;&#39;"
        );
    }

    #[test]
    fn the_page_holds_tables_marks_provenance_and_the_plots_inline() {
        let emulated = {
            let mut v: serde_json::Value =
                serde_json::from_str(&line("<b>gpu</b>", [65, 65, 129], [1, 1, 1], 50.0)).unwrap();
            v["backend"] = "gpu".into();
            v["per_rank"][0]["emulated"] = true.into();
            v["provenance"] = serde_json::json!({"version": "9.9", "git_commit": "abc",
                "features": ["cuda"], "mpi_library": null, "hosts": ["h1"], "devices": [],
                "command": ["himeno", "--backend", "gpu"]});
            v.to_string()
        };
        let text = [
            line("cpu", [34, 34, 34], [1, 1, 1], 100.0),
            line("cpu", [34, 34, 34], [2, 1, 1], 180.0),
            emulated,
        ]
        .join("\n");
        let mut l = Loaded::default();
        parse("r.jsonl", &text, &mut l);
        let study = make_groups(&l.records);
        let roof = roofline::build(&l.records, &roofline::Measured::default());
        let files = ["r.jsonl".to_string()];
        let page = render(&Page {
            files: &files,
            records: &l.records,
            study: &study,
            malformed: &l.malformed,
            roofline: &roof,
            timeline: None,
        })
        .unwrap();
        // Two groups x three pictures, and the roofline.
        assert_eq!(page.matches("<svg ").count(), 7, "{page}");
        assert!(page.contains("EMULATED GPU: not GPU performance"));
        assert!(page.contains("cache-resident"));
        assert!(page.contains("himeno 9.9 (commit abc), features [cuda]"));
        assert!(page.contains("&lt;b&gt;gpu&lt;/b&gt;") && !page.contains("<b>gpu</b>"));
        assert!(page.contains("<td>180.0</td>"), "{page}");
        // Self-contained: nothing is loaded from anywhere.
        for outside in [
            "<script", "<link", "src=", "url(", "@import", "<img", "<iframe",
        ] {
            assert!(!page.contains(outside), "{outside}");
        }
        // Links only within the page.
        assert_eq!(
            page.matches("href=\"").count(),
            page.matches("href=\"#").count()
        );
        assert!(page.contains("<a href=\"#roofline\">"));
        // The inline pictures are the files' pictures.
        let svgs = crate::study::plot::svg_pictures(&study.groups[0]).unwrap();
        assert!(page.contains(&svgs[0].1));
    }
}
