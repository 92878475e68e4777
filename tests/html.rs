//! `lnetcap analyze --out DIR [--png]`: report.html is one self-contained page (no script,
//! no network, the font embedded) whose charts all have axis titles with units, whose
//! headline names each peer's binding limit and whose advice carries the commands of the
//! JSON report; the PNG charts decode; and headless Chromium renders the page to a
//! screenshot that shows the charts and the limit badge in their colours.
//!
//! The Chromium test prints why and passes when no browser is installed, unless
//! LNETCAP_REQUIRE_ORACLES=1 (set by .ci/run, which installs Debian's chromium).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn tmpdir(name: &str) -> PathBuf {
    common::scratch(&format!("html-{name}"))
}

/// Runs `analyze FILE --out DIR --png --json DIR/report.json`; returns (html, json).
fn analyze(file: &Path, dir: &Path) -> (String, Value) {
    let json = dir.join("report.json");
    let o = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .arg("analyze")
        .arg(file)
        .args(["--quiet", "--png", "--out"])
        .arg(dir)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    (html, serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap())
}

/// The axis titles (with their units) each kind of chart must carry.
fn axis_titles(id: &str) -> &'static [&'static str] {
    if id.ends_with("-throughput") {
        &["time since the first interval (s)", "throughput (MB/s)"]
    } else if id.ends_with("-in-flight") {
        &["time since the first interval (s)", "in flight (count)"]
    } else if id.contains("-tcp-") {
        &["time since the first interval (s)", "bytes (MB)", "RTT (ms)"]
    } else if id.ends_with("-latency") {
        &["RPC latency, client&apos;s view (log2 bins, labelled by their upper bound)", "RPCs (count)", "≤"]
    } else if id == "phases" {
        &["mean time per RPC (ms)", "peer (client NID)"]
    } else if id == "rif" {
        &["RPCs in flight (mean per interval)", "throughput (MB/s)"]
    } else {
        panic!("unknown chart {id}")
    }
}

/// The `<figure id=...>` blocks of the page: (id, content).
fn figures(html: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find("<figure id=\"") {
        let after = &rest[i + 12..];
        let id_end = after.find('"').unwrap();
        let end = after.find("</figure>").expect("figure closed");
        out.push((after[..id_end].to_string(), after[..end].to_string()));
        rest = &after[end..];
    }
    out
}

fn check_page(name: &str, dir: &Path, html: &str, report: &Value) {
    // Self-contained: no script, no external stylesheet, image or font; the only URLs are
    // the SVG and XLink namespace names (identifiers, never fetched).
    for bad in ["<script", "<link", "<iframe", "<img", "src=\"http", "url(http", "@import"] {
        assert!(!html.contains(bad), "{name}: report.html contains {bad}");
    }
    for (i, _) in html.match_indices("http") {
        let tail = &html[i..(i + 40).min(html.len())];
        assert!(tail.starts_with("http://www.w3.org/"), "{name}: a URL in report.html: {tail}");
    }
    assert!(html.contains("@font-face") && html.contains("src: url(data:font/ttf;base64,"), "{name}: font embedded");
    assert!(html.trim_end().ends_with("</html>"), "{name}: page complete");

    // Every chart is there, drawn (no error in its place), with titled axes and units.
    let figs = figures(html);
    let peers = report["peers"].as_array().unwrap();
    let per_peer = figs.iter().filter(|f| f.0.starts_with('p') && f.0 != "phases").count();
    assert!(per_peer >= 3 * peers.len(), "{name}: {per_peer} peer charts for {} peers", peers.len());
    if !peers.is_empty() {
        assert!(
            figs.iter().any(|f| f.0 == "phases") && figs.iter().any(|f| f.0 == "rif"),
            "{name}: charts across peers"
        );
    }
    for (id, body) in &figs {
        assert!(body.contains("<svg") && body.contains("</svg>"), "{name}: chart {id} is an inline SVG");
        assert!(!body.contains("class=\"warn\""), "{name}: chart {id} failed: {body}");
        if body.contains("no RPC traffic")
            || body.contains("no complete RPC")
            || body.contains("no steady interval")
            || body.contains("no TCP samples")
        {
            continue;
        }
        for t in axis_titles(id) {
            assert!(body.contains(t), "{name}: chart {id} lacks the axis title {t:?}");
        }
        let png = dir.join(format!("{id}.png"));
        let (w, h, px) = common::decode_png(&png);
        assert_eq!((w, h), (960, 380), "{name}: {id}.png size");
        let white = common::count_color(&px, [255, 255, 255]);
        assert!(white < px.len() * 99 / 100, "{name}: {id}.png is blank");
        assert!(common::count_color(&px, [0x20, 0x20, 0x20]) > 200, "{name}: {id}.png has no text or axes");
    }

    // The headline names each peer's binding limit; every advice command is on the page.
    for (i, p) in peers.iter().enumerate() {
        let limit = p["binding_limit"].as_str().unwrap();
        let head = format!("<h2 id=\"peer{}\">", i + 1);
        let section = &html[html.find(&head).unwrap_or_else(|| panic!("{name}: section of peer {}", i + 1))..];
        let headline = &section[section.find("Binding limit: ").unwrap()..];
        assert!(
            headline[..400.min(headline.len())].contains(&format!(">{limit}</span>")),
            "{name}: peer {} limit {limit}",
            i + 1
        );
        for a in p["advice"].as_array().unwrap() {
            let cmd = lnetcap_report::html::esc(a["command"].as_str().unwrap());
            assert!(section.contains(&cmd), "{name}: advice command {cmd}");
        }
    }
}

#[test]
fn report_html_is_self_contained_with_labelled_charts_for_every_fixture() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(common::root().join("fixtures/synth"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".pcap"))
        .collect();
    files.sort();
    for lab in ["lst_write_rtt20_c8_pc8", "ptlrpc_read_rtt20_c8_pc8", "lst_read_rtt50_c32_pc8"] {
        files.push(common::lab_dir().join(lab).join("trace.pcap.zst"));
    }
    assert!(files.len() >= 18, "fixtures: {files:?}");
    for (i, f) in files.iter().enumerate() {
        let dir = tmpdir(&format!("fx{i}"));
        let (html, report) = analyze(f, &dir);
        check_page(&f.display().to_string(), &dir, &html, &report);
    }
}

#[test]
fn report_html_without_lnet_traffic_says_so() {
    let dir = tmpdir("empty");
    // A capture of TCP traffic on another port: no peers, no charts, a clear sentence.
    let pcap = dir.join("other.pcap");
    std::fs::write(&pcap, common::http_capture(3).finish()).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .args(["analyze", "-q", "--out"])
        .arg(&dir)
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("No LNet peer pair with RPC traffic was found"), "{html}");
    assert!(!html.contains("<svg"), "no charts without peers");
}

#[test]
fn report_html_renders_in_headless_chromium() {
    let require = std::env::var("LNETCAP_REQUIRE_ORACLES").is_ok_and(|v| v == "1");
    let Some(browser) = common::chromium() else {
        assert!(!require, "LNETCAP_REQUIRE_ORACLES=1 but no chromium (apt-get install chromium)");
        eprintln!("SKIPPED: no chromium (apt-get install chromium, or set CHROMIUM)");
        return;
    };
    let dir = tmpdir("chromium");
    let (html, report) = analyze(&common::root().join("fixtures/synth/credits.pcap.zst"), &dir);
    assert_eq!(report["peers"][0]["binding_limit"], "lnet_credits");
    let shot = common::root().join("target/lnetcap-report-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    let profile = dir.join("chromium-profile");
    common::screenshot(&browser, &dir.join("report.html"), &shot, (1100, 5200), &profile)
        .unwrap_or_else(|e| panic!("chromium wrote no screenshot: {e}"));
    eprintln!("screenshot: {}", shot.display());
    let (w, h, px) = common::decode_png(&shot);
    assert_eq!((w, h), (1100, 5200));
    // The limit badge and the model bound in the lnet_credits colour, the observed
    // throughput and RPC lines in theirs, and text.
    let credits = common::count_color(&px, [0xe6, 0x7e, 0x00]);
    assert!(credits > 2000, "lnet_credits orange: {credits} pixels");
    let blue = common::count_color(&px, [0x1f, 0x77, 0xb4]);
    assert!(blue > 2000, "RPCs in flight / bytes in flight blue: {blue} pixels");
    let ink = common::count_color(&px, [0x20, 0x20, 0x20]);
    assert!(ink > 5000, "text and axes: {ink} pixels");
    // Every chart is on the page the browser laid out (no broken SVG stops rendering).
    assert_eq!(figures(&html).len(), html.matches("<svg").count());
}
