//! The page of `himeno report --html` in a real headless browser (Debian's
//! `chromium`, which `scripts/install-deps.sh` installs; `HIMENO_CHROMIUM`
//! names another): from the records and trace of a real run and a stored
//! run on the emulated GPU, the page renders with no console message (a
//! script error, an SVG attribute the browser refuses), every picture is
//! laid out with a size, and a screenshot of it is not blank.
//!
//! The sizes are read by a copy of the page with a probe script added at
//! the top of its head (the page itself has no script): on load it writes
//! each `<svg>`'s laid-out width and height and any error into the DOM,
//! which `--dump-dom` prints.

use crate::common::{himeno, run, run_with_limit, scratch, stderr, stdout_ok};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The browser, or `None` (the test then says why it skips).
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HIMENO_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    ["chromium", "chromium-browser"]
        .into_iter()
        .find_map(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|_| PathBuf::from(name))
        })
}

/// A headless browser command on `url` with a fresh profile in `dir`, no
/// network use of its own, console messages on stderr.
fn browser(exe: &Path, dir: &Path, args: &[&str], url: &str) -> Command {
    let profile = dir.join(format!("profile-{}", args.len()));
    let mut c = Command::new(exe);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .arg(url);
    c
}

/// The console messages the browser logged (`...:CONSOLE...`).
fn console_lines(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// The probe put at the top of the copy's head.
const PROBE: &str = "<script>window.__errors=[];\
window.addEventListener('error',function(e){window.__errors.push(String(e.message));});\
window.addEventListener('load',function(){var out=[];\
document.querySelectorAll('svg').forEach(function(s){var r=s.getBoundingClientRect();\
out.push([r.width,r.height]);});var p=document.createElement('pre');p.id='probe';\
p.textContent=JSON.stringify({svgs:out,errors:window.__errors});\
document.body.appendChild(p);});</script>";

#[test]
fn the_html_report_renders_in_a_headless_browser() {
    let Some(exe) = chromium() else {
        eprintln!(
            "SKIPPED the_html_report_renders_in_a_headless_browser: no chromium found \
             (scripts/install-deps.sh installs it; HIMENO_CHROMIUM names another)"
        );
        return;
    };
    let dir = scratch("html");
    let results = dir.join("r.jsonl");
    let trace = dir.join("t.trace");
    let r = results.display().to_string();
    let t = trace.display().to_string();
    for ranks in ["1", "2"] {
        let mut args = vec![
            "--size",
            "XS",
            "--local-ranks",
            ranks,
            "--threads",
            "1",
            "--iterations",
            "5",
            "--stream",
            "quick",
            "--label",
            "page",
            "--output",
            &r,
        ];
        if ranks == "2" {
            args.extend(["--trace", &t]);
        }
        stdout_ok(&run(himeno(&args)));
    }
    let emulated = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/records/gpu-emu.jsonl");
    let page = dir.join("report.html");
    let plots = dir.join("plots");
    let o = run(himeno(&[
        "report",
        &r,
        emulated.to_str().unwrap(),
        "--roofline",
        "--plot",
        plots.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
        "--html-trace",
        &t,
    ]));
    stdout_ok(&o);
    let html = std::fs::read_to_string(&page).unwrap();
    // Two groups of three pictures, the emulated one's three, the
    // roofline and the timeline.
    let pictures = html.matches("<svg ").count();
    assert_eq!(pictures, 3 + 3 + 1 + 1, "{}", stderr(&o));

    // Laid out: every picture with a size, no error.
    let probe = dir.join("probe.html");
    std::fs::write(
        &probe,
        html.replacen("<head>", &format!("<head>{PROBE}"), 1),
    )
    .unwrap();
    let url = format!("file://{}", probe.display());
    let out = run_with_limit(
        browser(
            &exe,
            &dir,
            &["--virtual-time-budget=5000", "--dump-dom"],
            &url,
        ),
        Duration::from_secs(90),
    );
    let dom = stdout_ok(&out);
    let err = stderr(&out);
    assert!(console_lines(&err).is_empty(), "console:\n{err}");
    let start = dom.find("<pre id=\"probe\">").expect("the probe ran") + 16;
    let end = start + dom[start..].find("</pre>").unwrap();
    let seen: serde_json::Value =
        serde_json::from_str(&dom[start..end].replace("&quot;", "\"")).unwrap();
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    let sizes = seen["svgs"].as_array().unwrap();
    assert_eq!(sizes.len(), pictures, "{seen}");
    for s in sizes {
        assert!(
            s[0].as_f64().unwrap() > 100.0 && s[1].as_f64().unwrap() > 100.0,
            "{seen}"
        );
    }

    // The page itself, as a person opens it: no console message, and a
    // screenshot that is not one colour.
    let shot = dir.join("shot.png");
    let out = run_with_limit(
        browser(
            &exe,
            &dir,
            &[
                "--window-size=1300,1600",
                &format!("--screenshot={}", shot.display()),
            ],
            &format!("file://{}", page.display()),
        ),
        Duration::from_secs(90),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(console_lines(&err).is_empty(), "console:\n{err}");
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&shot).expect("a screenshot"),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bytes = &buf[..info.buffer_size()];
    let px = info.color_type.samples();
    let mut colours: Vec<&[u8]> = bytes.chunks(px).collect();
    colours.sort_unstable();
    colours.dedup();
    assert!(
        colours.len() > 16,
        "a blank screenshot: {} colour(s)",
        colours.len()
    );
}
