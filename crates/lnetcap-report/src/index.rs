//! The index page of a batch dataset (`DIR/index.html`): every capture with its time
//! span, peers and binding limits and a link to its report, then a fleet view per peer
//! pair across captures (throughput against the model bound, coloured by the limit that
//! binds), then every input with its status. Self-contained like report.html.

use std::collections::BTreeMap;
use std::io::{Result, Write};

use base64::Engine as _;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::charts::{self, limit_color, FONT, HEIGHT, WIDTH};
use crate::fmt::bytes;
use crate::html::esc;
use lnetcap_model::Limit;

/// Most peer pairs drawn in the fleet view (the rest are listed in the table).
pub const MAX_FLEET_CHARTS: usize = 40;

/// A peer pair of one capture, as the index and the fleet view show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetPeer {
    /// Client NID.
    pub client: String,
    /// Server NID.
    pub server: String,
    /// RPCs reconstructed.
    pub rpcs: u64,
    /// Bulk throughput over the steady window (bytes/s).
    pub throughput_bytes_per_s: Option<f64>,
    /// The model's smallest bound (bytes/s).
    pub t_model_bytes_per_s: Option<f64>,
    /// Observed / bound.
    pub efficiency: Option<f64>,
    /// The limit that binds, as the report names it.
    pub binding_limit: String,
    /// Median RTT (µs).
    pub rtt_us: Option<f64>,
}

/// A capture of the dataset.
#[derive(Debug, Clone)]
pub struct IndexCapture {
    /// Its partition and directory name.
    pub id: String,
    /// Its name (a file, a ring's pattern, an archive member).
    pub name: String,
    /// Pieces it was read from (several for a rotated set).
    pub pieces: usize,
    /// How it was grouped.
    pub grouping: String,
    /// First and last LNet frame (ns).
    pub span_ns: Option<[i64; 2]>,
    /// Read to its end.
    pub complete: bool,
    /// report.html was written beside report.json.
    pub has_html: bool,
    /// Its peers.
    pub peers: Vec<FleetPeer>,
}

/// An input and what became of it.
#[derive(Debug, Clone)]
pub struct IndexInput {
    /// Path.
    pub path: String,
    /// `ok`, `failed` or `skipped`.
    pub status: String,
    /// Why, when not ok.
    pub error: Option<String>,
}

fn limit_of(name: &str) -> Option<Limit> {
    Limit::ALL.iter().copied().find(|l| l.as_str() == name)
}

fn time(ns: i64) -> String {
    let s = ns.div_euclid(1_000_000_000);
    let (days, rem) = (s.div_euclid(86_400), s.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem / 60 % 60, rem % 60)
}

fn rate(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite()).map_or("-".into(), |v| format!("{}/s", bytes(v)))
}

/// Writes the page; captures in the order given (the caller sorts them by time).
pub fn write_index(out: &mut impl Write, captures: &[IndexCapture], inputs: &[IndexInput]) -> Result<()> {
    writeln!(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">")?;
    writeln!(out, "<title>lnetcap batch: {} captures</title>", captures.len())?;
    writeln!(
        out,
        "<style>\n@font-face {{ font-family: \"{FONT}\"; src: url(data:font/ttf;base64,{}) format(\"truetype\"); }}{}</style>\n</head>\n<body>",
        base64::engine::general_purpose::STANDARD.encode(charts::FONT_TTF),
        crate::html::STYLE
    )?;
    let failed = inputs.iter().filter(|i| i.status == "failed").count();
    let skipped = inputs.iter().filter(|i| i.status == "skipped").count();
    writeln!(out, "<h1>lnetcap batch</h1>")?;
    writeln!(
        out,
        "<div class=\"sub\">{} captures from {} inputs · {failed} failed · {skipped} skipped · MB = 10<sup>6</sup> bytes · tables: peers/, rpcs/, connections/, timeseries/, inputs/ (Parquet, partitioned by capture)</div>",
        captures.len(),
        inputs.len()
    )?;
    captures_table(out, captures)?;
    fleet(out, captures)?;
    inputs_table(out, inputs)?;
    writeln!(out, "</body>\n</html>")
}

fn captures_table(out: &mut impl Write, captures: &[IndexCapture]) -> Result<()> {
    writeln!(out, "<h2 id=\"captures\">Captures</h2>")?;
    writeln!(
        out,
        "<table><tr><th>capture</th><th>from</th><th>to (UTC)</th><th>pieces</th><th>peer pairs: binding limit, observed / bound</th><th>report</th></tr>"
    )?;
    for c in captures {
        let (from, to) = c.span_ns.map_or(("-".into(), "-".into()), |[a, b]| (time(a), time(b)));
        let mut peers = String::new();
        for p in &c.peers {
            let color = limit_color(limit_of(&p.binding_limit));
            peers.push_str(&format!(
                "<div>{} ↔ {}: <span class=\"limit\" style=\"background:#{:02x}{:02x}{:02x}\">{}</span> {} / {}</div>",
                esc(&p.client),
                esc(&p.server),
                color.0,
                color.1,
                color.2,
                esc(&p.binding_limit),
                rate(p.throughput_bytes_per_s),
                rate(p.t_model_bytes_per_s)
            ));
        }
        if c.peers.is_empty() {
            peers.push_str("<span class=\"warn\">no LNet peer pair</span>");
        }
        let mut links = format!("<a href=\"captures/{0}/report.json\">json</a>", esc(&c.id));
        if c.has_html {
            links.push_str(&format!(" · <a href=\"captures/{0}/report.html\">html</a>", esc(&c.id)));
        }
        let incomplete = if c.complete { "" } else { " <span class=\"warn\">(incomplete)</span>" };
        writeln!(
            out,
            "<tr><td>{}{incomplete}<div class=\"sub\">{}</div></td><td>{from}</td><td>{to}</td><td class=\"n\">{}</td><td>{peers}</td><td>{links}</td></tr>",
            esc(&c.name),
            esc(&c.grouping),
            c.pieces
        )?;
    }
    writeln!(out, "</table>")
}

/// Per peer pair, its captures in time order.
type Series<'a> = BTreeMap<(&'a str, &'a str), Vec<(i64, &'a FleetPeer)>>;

fn fleet(out: &mut impl Write, captures: &[IndexCapture]) -> Result<()> {
    let mut pairs: Series<'_> = BTreeMap::new();
    for c in captures {
        let Some([t, _]) = c.span_ns else { continue };
        for p in c.peers.iter().filter(|p| p.throughput_bytes_per_s.is_some()) {
            pairs.entry((&p.client, &p.server)).or_default().push((t, p));
        }
    }
    writeln!(out, "<h2 id=\"fleet\">Fleet: each peer pair across captures</h2>")?;
    if pairs.is_empty() {
        return writeln!(out, "<p>No peer pair moved bulk data.</p>");
    }
    writeln!(
        out,
        "<p class=\"sub\">Observed bulk throughput (dots, coloured by the limit that binds) against the model's bound (line) at each capture's start. A drop below the line, or a change of colour, is where to look.</p>"
    )?;
    for (n, ((client, server), points)) in pairs.iter_mut().enumerate() {
        points.sort_by_key(|(t, _)| *t);
        if n >= MAX_FLEET_CHARTS {
            writeln!(out, "<p class=\"sub\">{} more peer pairs not drawn (see peers/).</p>", pairs.len() - n)?;
            break;
        }
        let title = format!("{client} ↔ {server}");
        match fleet_svg(&title, points) {
            Ok(svg) => writeln!(out, "<figure>{svg}<figcaption>{}</figcaption></figure>", esc(&title))?,
            Err(e) => writeln!(out, "<p class=\"warn\">{}: chart not drawn: {}</p>", esc(&title), esc(&e))?,
        }
    }
    Ok(())
}

fn fleet_svg(title: &str, points: &[(i64, &FleetPeer)]) -> std::result::Result<String, String> {
    charts::register_font()?;
    let t0 = points[0].0;
    let days = |t: i64| (t - t0) as f64 / 86_400e9;
    let x_max = days(points[points.len() - 1].0).max(1.0 / 24.0) * 1.05;
    let y_max = points
        .iter()
        .flat_map(|(_, p)| [p.throughput_bytes_per_s, p.t_model_bytes_per_s])
        .flatten()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        / 1e6
        * 1.15;
    let y_max = if y_max > 0.0 { y_max } else { 1.0 };
    let mut s = String::new();
    {
        let area = SVGBackend::with_string(&mut s, (WIDTH, HEIGHT * 3 / 4)).into_drawing_area();
        let e = |e: &dyn std::fmt::Display| e.to_string();
        area.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&area)
            .caption(title, (FONT, 16).into_font())
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-x_max * 0.02..x_max, 0f64..y_max)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc(format!("days since {}", time(t0)))
            .y_desc("MB/s")
            .label_style((FONT, 12).into_font())
            .axis_desc_style((FONT, 13).into_font())
            .draw()
            .map_err(|x| e(&x))?;
        let bound: Vec<(f64, f64)> =
            points.iter().filter_map(|(t, p)| p.t_model_bytes_per_s.map(|b| (days(*t), b / 1e6))).collect();
        chart.draw_series(LineSeries::new(bound, RGBColor(0x99, 0x99, 0x99).stroke_width(2))).map_err(|x| e(&x))?;
        chart
            .draw_series(points.iter().filter_map(|(t, p)| {
                let y = p.throughput_bytes_per_s? / 1e6;
                Some(Circle::new((days(*t), y), 5, limit_color(limit_of(&p.binding_limit)).filled()))
            }))
            .map_err(|x| e(&x))?;
        area.present().map_err(|x| e(&x))?;
    }
    Ok(s)
}

fn inputs_table(out: &mut impl Write, inputs: &[IndexInput]) -> Result<()> {
    writeln!(out, "<h2 id=\"inputs\">Inputs</h2>\n<table><tr><th>input</th><th>status</th><th>why</th></tr>")?;
    for i in inputs {
        let class = if i.status == "failed" { " class=\"warn\"" } else { "" };
        writeln!(
            out,
            "<tr><td>{}</td><td{class}>{}</td><td>{}</td></tr>",
            esc(&i.path),
            esc(&i.status),
            esc(i.error.as_deref().unwrap_or(""))
        )?;
    }
    writeln!(out, "</table>")
}

#[cfg(test)]
mod tests {
    use super::time;

    #[test]
    fn civil_time() {
        assert_eq!(time(0), "1970-01-01 00:00:00");
        // 2026-11-23 14:30:05 UTC = 1795444205 s (date -d '2026-11-23 14:30:05Z' +%s)
        assert_eq!(time(1_795_444_205_000_000_000), "2026-11-23 14:30:05");
        assert_eq!(time(951_782_400_000_000_000), "2000-02-29 00:00:00");
    }
}
