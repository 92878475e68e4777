//! The HTML report: one self-contained page (inline SVG charts, the font embedded as a
//! data URL, no script, no network), readable in any browser and printable.
//!
//! Order, top to bottom: what binds per peer (the headline), then per peer the advice,
//! the bounds, key numbers and its charts; then the charts across peers, the connections
//! and the decode accounting of every file.

use std::io::{Result, Write};

use base64::Engine as _;

use crate::charts::{self, limit_color, peer_label, Chart};
use crate::fmt::{bytes, ms};
use lnetcap_analysis::report::{BindingLimit, PeerEntry, Report};
use lnetcap_model::{Limit, LostTo};

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn hex(c: plotters::style::RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// Human name of a limit.
pub fn limit_name(l: BindingLimit) -> &'static str {
    l.limit().map_or("no bulk traffic: no throughput verdict", Limit::describe)
}

fn rate(b: f64) -> String {
    if b.is_finite() {
        format!("{}/s", bytes(b))
    } else {
        "-".into()
    }
}

pub(crate) const STYLE: &str = r#"
body { font-family: lnetcap-sans, sans-serif; color: #202020; margin: 24px auto; max-width: 1000px; padding: 0 16px; line-height: 1.4; }
h1 { font-size: 26px; margin-bottom: 4px; } h2 { font-size: 21px; margin-top: 36px; border-bottom: 2px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 22px 0 4px; } .sub { color: #666; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 14px; } th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.limit { display: inline-block; color: #fff; border-radius: 4px; padding: 1px 8px; font-weight: bold; }
.headline { font-size: 17px; margin: 10px 0; padding: 10px 14px; border-left: 6px solid #999; background: #fafafa; }
.advice { border: 1px solid #e0c080; background: #fffaf0; padding: 8px 12px; margin: 8px 0; border-radius: 4px; }
.advice pre, pre { background: #272822; color: #f8f8f2; padding: 6px 10px; border-radius: 4px; overflow-x: auto; font-size: 12.5px; white-space: pre-wrap; }
figure { margin: 10px 0 18px; } figcaption { font-size: 13px; color: #555; margin-top: 2px; } svg { max-width: 100%; height: auto; }
.warn { color: #a04000; }
"#;

/// The sources whose series were coarsened to stay within MAX_SERIES_INTERVALS, with
/// their interval: " (a.pcap: 3200 ms, a long capture)", or nothing.
fn coarsened(r: &Report) -> String {
    let v: Vec<String> = r
        .files
        .iter()
        .filter_map(|f| f.series_interval_ns.map(|ns| format!("{}: {} ms", esc(&f.file), ns / 1_000_000)))
        .collect();
    if v.is_empty() {
        String::new()
    } else {
        format!(" ({}; a long capture: MAX_SERIES_INTERVALS)", v.join(", "))
    }
}

/// Writes the page.
pub fn write_html(out: &mut impl Write, r: &Report) -> Result<()> {
    let interval_ns = r.interval_ns;
    let all = charts::charts(r);
    writeln!(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">")?;
    writeln!(out, "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")?;
    let files: Vec<&str> = r.files.iter().map(|f| f.file.as_str()).collect();
    writeln!(out, "<title>lnetcap: {}</title>", esc(&files.join(", ")))?;
    writeln!(
        out,
        "<style>\n@font-face {{ font-family: \"{}\"; src: url(data:font/ttf;base64,{}) format(\"truetype\"); }}{STYLE}</style>\n</head>\n<body>",
        charts::FONT,
        base64::engine::general_purpose::STANDARD.encode(charts::FONT_TTF)
    )?;
    writeln!(out, "<h1>lnetcap report</h1>")?;
    writeln!(
        out,
        "<div class=\"sub\">{} · {} · interval {} ms{} · MB = 10<sup>6</sup> bytes · schema {}</div>",
        esc(&r.tool),
        esc(&files.join(", ")),
        interval_ns / 1_000_000,
        coarsened(r),
        r.schema_version
    )?;

    // Headline: what binds, per peer.
    writeln!(out, "<h2 id=\"limits\">What limits throughput</h2>")?;
    if r.peers.is_empty() {
        writeln!(out, "<p class=\"warn\">No LNet peer pair with RPC traffic was found in the capture.</p>")?;
    } else {
        writeln!(
            out,
            "<table><tr><th>#</th><th>peer (client ↔ server)</th><th>file</th><th>observed</th><th>model bound</th><th>efficiency</th><th>binding limit</th><th>first advice</th></tr>"
        )?;
        for (i, p) in r.peers.iter().enumerate() {
            let advice = p.advice.first().map_or("-".to_string(), |a| format!("{} = {}", a.setting, a.value));
            writeln!(
                out,
                "<tr><td><a href=\"#peer{n}\">{n}</a></td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.0} %</td><td>{}</td><td>{}</td></tr>",
                esc(&peer_label(p)),
                esc(&p.file),
                rate(p.model.inputs.observed),
                rate(p.model.t_model_bytes_per_s),
                p.model.efficiency * 100.0,
                badge(p.binding_limit),
                esc(&advice),
                n = i + 1
            )?;
        }
        writeln!(out, "</table>")?;
    }

    for (i, p) in r.peers.iter().enumerate() {
        peer_section(out, r, &all, i, p)?;
    }

    let across: Vec<&Chart> = all.iter().filter(|c| c.peer.is_none()).collect();
    if !across.is_empty() {
        writeln!(out, "<h2 id=\"across\">Across peers</h2>")?;
        for c in across {
            figure(out, r, c)?;
        }
    }
    if let Some(f) = &r.fits {
        writeln!(out, "<h3>Fits across captures</h3><table><tr><th>file</th><th>RTT</th><th>RPC size</th><th>RIF</th><th>throughput</th></tr>")?;
        for p in &f.points {
            writeln!(
                out,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1}</td><td class=\"n\">{}</td></tr>",
                esc(&p.file),
                ms(Some(p.rtt_s * 1e6)),
                bytes(p.rpc_bytes),
                p.rif,
                rate(p.throughput_bytes_per_s)
            )?;
        }
        writeln!(out, "</table><p>")?;
        if let (Some(b), Some(e)) = (f.buffer_bytes, f.buffer_fit_error) {
            writeln!(
                out,
                "Buffer-limited profile Θ(τ) = B/τ (seed 002): B = {}, fit error {:.1} %. ",
                bytes(b),
                e * 100.0
            )?;
        }
        if let (Some(k), Some(e)) = (f.k, f.k_fit_error) {
            writeln!(out, "Seed 003 equation 4: k = {k:.3}, fit error {:.1} %.", e * 100.0)?;
        }
        writeln!(out, "</p>")?;
    }

    connections(out, r)?;
    accounting(out, r)?;
    writeln!(
        out,
        "<p class=\"sub\">Tables of the same run: rpcs, messages, connections, peers, timeseries (Parquet or CSV, docs/tables.md); JSON: docs/analyze-json.md.</p>\n</body>\n</html>"
    )?;
    Ok(())
}

fn badge(limit: BindingLimit) -> String {
    format!(
        "<span class=\"limit\" style=\"background:{}\">{}</span>",
        hex(limit_color(limit.limit())),
        esc(limit.as_str())
    )
}

fn figure(out: &mut impl Write, r: &Report, c: &Chart) -> Result<()> {
    writeln!(out, "<figure id=\"{}\">", esc(&c.id))?;
    match charts::svg(r, c) {
        Ok(svg) => {
            // The SVG's own XML declaration is not valid inside HTML.
            let body = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
            out.write_all(body.as_bytes())?;
        }
        Err(e) => writeln!(out, "<p class=\"warn\">{}</p>", esc(&e.to_string()))?,
    }
    writeln!(out, "<figcaption>{}</figcaption></figure>", esc(&c.note))
}

/// A peer's heading, verdict, advice and bounds.
fn verdict_block(out: &mut impl Write, i: usize, p: &PeerEntry) -> Result<()> {
    let m = &p.model;
    writeln!(out, "<h2 id=\"peer{}\">{}. {}</h2>", i + 1, i + 1, esc(&peer_label(p)))?;
    writeln!(out, "<div class=\"sub\">{}</div>", esc(&p.file))?;
    writeln!(
        out,
        "<div class=\"headline\" style=\"border-left-color:{}\">Binding limit: {} <b>{}</b>. Observed {} = {:.0} % of the model bound {}; T_rpc = {:.1} RPCs in flight × {} / (2 × {}) = {}.{}</div>",
        hex(limit_color(p.binding_limit.limit())),
        badge(p.binding_limit),
        esc(limit_name(p.binding_limit)),
        rate(m.inputs.observed),
        m.efficiency * 100.0,
        rate(m.t_model_bytes_per_s),
        m.inputs.rif,
        bytes(m.inputs.bs_bytes),
        ms(Some(m.inputs.rtt_s * 1e6)),
        rate(m.t_rpc_bytes_per_s),
        if m.steady_state {
            ""
        } else {
            " <span class=\"warn\">Caution: the steady window is shorter than 10 round trips; slow start and ramp-up weigh on every number.</span>"
        }
    )?;
    for a in &p.advice {
        writeln!(
            out,
            "<div class=\"advice\"><b>{} = {}</b>: {}<pre>$ {}</pre></div>",
            esc(&a.setting),
            esc(&a.value),
            esc(&a.reason),
            esc(&a.command)
        )?;
    }
    writeln!(out, "<table><tr><th>bound</th><th>rate</th><th>share of T_rpc lost</th></tr>")?;
    for b in &m.bounds {
        let lost = m.shares_lost.iter().find(|s| s.limit == LostTo::Limit(b.limit)).map(|s| s.share);
        writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            badge(BindingLimit::Bound(b.limit)),
            rate(b.bytes_per_s),
            lost.map_or("-".into(), |s| format!("{:.1} %", s * 100.0))
        )?;
    }
    writeln!(
        out,
        "<tr><td>link</td><td colspan=\"2\">{} (best 1 s rate seen {})</td></tr></table>",
        esc(m.link_source),
        rate(m.best_sustained_bytes_per_s)
    )?;
    Ok(())
}

fn peer_section(out: &mut impl Write, r: &Report, all: &[Chart], i: usize, p: &PeerEntry) -> Result<()> {
    verdict_block(out, i, p)?;
    let pr = &p.peer;
    let rows: Vec<(&str, String)> = vec![
        ("RPCs", format!("{} complete, {} partial; {}", pr.rpcs, pr.rpcs_partial, {
            let v: Vec<String> = pr.rpcs_by_opcode.iter().map(|(k, v)| format!("{k} {v}")).collect();
            v.join(", ")
        })),
        ("bulk", format!("read {}, written {}; throughput {}", bytes(pr.bytes_read as f64), bytes(pr.bytes_written as f64), rate(pr.throughput_bytes_per_s))),
        (
            "latency (client)",
            format!(
                "p50 {}, p95 {}, p99 {}, max {}",
                ms(pr.latency_us.p50),
                ms(pr.latency_us.p95),
                ms(pr.latency_us.p99),
                ms(pr.latency_us.max)
            ),
        ),
        (
            "RPCs in flight",
            format!("mean {:.1} (steady {:.1}), max {}", pr.rpcs_in_flight.mean, pr.rpcs_in_flight.steady_mean, pr.rpcs_in_flight.max),
        ),
        (
            "LNet messages in flight",
            format!(
                "max {}{}",
                pr.messages_in_flight.max,
                pr.messages_in_flight
                    .inferred_peer_credits
                    .map_or(String::new(), |c| format!("; peer_credits binds at {c}: {}", pr.messages_in_flight.evidence))
            ),
        ),
        (
            "RTT",
            format!(
                "p50 {}, min {}; capture point near the {} (client loop {}, server loop {})",
                ms(p.rtt_us.p50),
                ms(p.rtt_us.min),
                p.rtt_us.capture_side.map_or("?", |s| s.as_str()),
                ms(p.rtt_us.client_loop_us),
                ms(p.rtt_us.server_loop_us)
            ),
        ),
        (
            "TCP",
            format!(
                "{} retransmits ({} fast, {} timeout, {} spurious; {:.2} % of bulk bytes); bytes in flight max {}; cwnd estimate {} (max {}); receive window {}",
                p.tcp.retransmits,
                p.tcp.retransmits_fast,
                p.tcp.retransmits_timeout,
                p.tcp.retransmits_spurious,
                p.tcp.retransmitted_share * 100.0,
                bytes(p.tcp.bytes_in_flight_max as f64),
                bytes(p.tcp.cwnd_estimate_p50 as f64),
                bytes(p.tcp.cwnd_estimate_max as f64),
                p.tcp.rwnd_p50.map_or("unknown (no SYN)".into(), |w| bytes(w as f64))
            ),
        ),
    ];
    writeln!(out, "<table>")?;
    for (k, v) in rows {
        writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&v))?;
    }
    writeln!(out, "</table>")?;
    for c in all.iter().filter(|c| c.peer == Some(i)) {
        figure(out, r, c)?;
    }
    let bulk = charts::bulk_directions(r, p);
    if bulk.len() > charts::MAX_TCP_CHARTS {
        writeln!(
            out,
            "<p class=\"sub\">{} more bulk directions are not drawn (see the timeseries table, scope = connection).</p>",
            bulk.len() - charts::MAX_TCP_CHARTS
        )?;
    }
    Ok(())
}

fn connections(out: &mut impl Write, r: &Report) -> Result<()> {
    if r.connections.is_empty() {
        return Ok(());
    }
    let multi = r.files.len() > 1;
    writeln!(out, "<h2 id=\"connections\">Connections</h2>")?;
    writeln!(
        out,
        "<table><tr>{}<th>id</th><th>type</th><th>direction</th><th>sender</th><th>segments</th><th>stream</th><th>messages</th><th>retransmits</th><th>loop p50</th><th>flight max</th><th>cwnd est. max</th></tr>",
        if multi { "<th>file</th>" } else { "" }
    )?;
    for c in &r.connections {
        for d in &c.directions {
            writeln!(
                out,
                "<tr>{}<td class=\"n\">c{}</td><td>{}{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                if multi { format!("<td>{}</td>", esc(&c.file)) } else { String::new() },
                c.id,
                c.conn_type.unwrap_or("-"),
                if c.type_inferred { " (inferred)" } else { "" },
                esc(&d.stream.tcp),
                d.sender.map_or("-", |s| s.as_str()),
                d.stream.segments,
                bytes(d.stream.stream_bytes as f64),
                d.stream.messages,
                d.tcp_perf.retransmits,
                ms(d.tcp_perf.loop_p50_us),
                bytes(d.tcp_perf.bytes_in_flight_max as f64),
                bytes(d.tcp_perf.cwnd_estimate_max as f64)
            )?;
        }
    }
    writeln!(out, "</table>")
}

fn accounting(out: &mut impl Write, r: &Report) -> Result<()> {
    writeln!(out, "<h2 id=\"files\">What was read</h2>")?;
    writeln!(
        out,
        "<table><tr><th>file</th><th>read to the end</th><th>frames</th><th>LNet data</th><th>TCP control</th><th>other</th><th>undecodable</th><th>LNet messages not in any RPC</th></tr>"
    )?;
    for f in &r.files {
        let und: Vec<String> = f.frames.undecodable.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let um: Vec<String> = f.unmatched_messages.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&f.file),
            if f.complete { "yes" } else { "<span class=\"warn\">no</span>" },
            f.frames.frames,
            f.frames.lnet_data,
            f.frames.tcp_control,
            f.frames.other_traffic,
            if und.is_empty() { "0".into() } else { esc(&und.join(", ")) },
            if um.is_empty() { "none".into() } else { esc(&um.join(", ")) }
        )?;
    }
    writeln!(out, "</table>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn esc_escapes_markup() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}
