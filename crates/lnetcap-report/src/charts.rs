//! The report's charts, drawn with plotters on any backend: inline SVG for the HTML
//! report, PNG for `--png`. Text is laid out with ab_glyph and the embedded font
//! (assets/lnetcap-sans.ttf), so no system font is needed; the HTML page embeds the same
//! font for the SVG text.
//!
//! Every chart reads the report model only. Times are seconds since the peer's first
//! interval, rates MB/s (10^6 bytes), sizes MB, RTT ms, as the axis titles say.

use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use lnetcap_analysis::report::{DirectionEntry, PeerEntry, Report};
use lnetcap_model::Limit;

/// The family name the charts and the HTML page use for the embedded font.
pub const FONT: &str = "lnetcap-sans";

/// The embedded font (a DejaVu Sans subset; assets/README.md).
pub static FONT_TTF: &[u8] = include_bytes!("../assets/lnetcap-sans.ttf");

/// Chart size in pixels.
pub const WIDTH: u32 = 960;
/// Chart height in pixels.
pub const HEIGHT: u32 = 380;

/// Most per-connection TCP charts per peer (the busiest bulk directions are drawn).
pub const MAX_TCP_CHARTS: usize = 4;

pub(crate) fn register_font() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, FONT_TTF)
            .map_err(|_| "the embedded chart font does not load".to_string())
    })
    .clone()
}

/// A chart of the report.
#[derive(Debug, Clone)]
pub struct Chart {
    /// File stem for `--png` and HTML anchor: `p1-throughput`, `rif`, ...
    pub id: String,
    /// Title (drawn in the chart).
    pub title: String,
    /// One sentence on how to read it (HTML only).
    pub note: String,
    /// Peer index in `Report::peers`, for charts of one peer.
    pub peer: Option<usize>,
    kind: Kind,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Throughput(usize),
    InFlight(usize),
    Tcp { peer: usize, conn: usize, dir: usize },
    Latency(usize),
    Phases,
    Rif,
}

/// Limit colours, shared by the charts and the page.
pub fn limit_color(limit: Option<Limit>) -> RGBColor {
    match limit {
        Some(Limit::RpcWindow) => RGBColor(0x1f, 0x77, 0xb4),
        Some(Limit::LnetCredits) => RGBColor(0xe6, 0x7e, 0x00),
        Some(Limit::TcpCongestion) => RGBColor(0xd6, 0x27, 0x28),
        Some(Limit::ReceiveWindow) => RGBColor(0x94, 0x67, 0xbd),
        Some(Limit::Server) => RGBColor(0x8c, 0x56, 0x4b),
        Some(Limit::Link) => RGBColor(0x2c, 0xa0, 0x2c),
        None => RGBColor(0x7f, 0x7f, 0x7f),
    }
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xe6, 0x7e, 0x00),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];
const INK: RGBColor = RGBColor(0x20, 0x20, 0x20);
const GREY: RGBColor = RGBColor(0x99, 0x99, 0x99);

/// "client ↔ server" of a peer.
pub fn peer_label(p: &PeerEntry) -> String {
    format!("{} ↔ {}", p.peer.client_nid, p.peer.server_nid)
}

/// The charts of a report, in page order: per peer throughput, in flight, TCP per bulk
/// direction, latency; then the phases of all peers and throughput against RPCs in flight.
pub fn charts(r: &Report) -> Vec<Chart> {
    let mut out = Vec::new();
    for (i, p) in r.peers.iter().enumerate() {
        let who = peer_label(p);
        let n = i + 1;
        out.push(Chart {
            id: format!("p{n}-throughput"),
            title: format!("Throughput and model bound: {who}"),
            note: "Bulk throughput per interval (black) against the smallest bound of the model in that interval, coloured by the limit that binds; T_rpc (grey, dashed) is what the RPCs in flight alone would allow.".into(),
            peer: Some(i),
            kind: Kind::Throughput(i),
        });
        out.push(Chart {
            id: format!("p{n}-in-flight"),
            title: format!("RPCs and LNet messages in flight: {who}"),
            note: "RPCs in flight (client's time) and LNet messages in flight per direction (sender's time); a plateau of messages below the RPCs in flight at the inferred credit limit (red, dashed) means messages wait for peer credits.".into(),
            peer: Some(i),
            kind: Kind::InFlight(i),
        });
        for (conn, dir) in bulk_directions(r, p).into_iter().take(MAX_TCP_CHARTS) {
            let c = &r.connections[conn];
            let d = &c.directions[dir];
            out.push(Chart {
                id: format!("p{n}-tcp-c{}-{}", c.id, if dir == 0 { "a" } else { "p" }),
                title: format!("TCP: {} {}", c.conn_type.unwrap_or("?"), d.stream.tcp),
                note: "Bytes in flight (sender's view, outside loss recovery) and the congestion-window estimate per interval, with the pair's RTT on the right axis; red triangles mark intervals with retransmissions.".into(),
                peer: Some(i),
                kind: Kind::Tcp { peer: i, conn, dir },
            });
        }
        out.push(Chart {
            id: format!("p{n}-latency"),
            title: format!("RPC latency: {who}"),
            note: "RPCs per latency bin (client's time; bins as Lustre's rpc_stats, powers of two, labelled by their upper bound).".into(),
            peer: Some(i),
            kind: Kind::Latency(i),
        });
    }
    if !r.peers.is_empty() {
        out.push(Chart {
            id: "phases".into(),
            title: "Where an RPC's time goes (means at the capture point)".into(),
            note: "Mean phase durations per peer: request, server wait (request to bulk start), bulk, server (bulk end to reply), reply.".into(),
            peer: None,
            kind: Kind::Phases,
        });
        out.push(Chart {
            id: "rif".into(),
            title: "Throughput against RPCs in flight".into(),
            note: "One point per steady interval (seed 000's single-client figure); the lines are T_rpc = RIF × RPC size / (2 × RTT) of each peer, the flat dashed lines its credit and link bounds.".into(),
            peer: None,
            kind: Kind::Rif,
        });
    }
    out
}

/// The bulk directions of a peer: the bulk sender's directions that carried at least a
/// tenth of the busiest one's payload (so the control connection's replies are not one),
/// busiest first: (connection index, direction index).
pub fn bulk_directions(r: &Report, p: &PeerEntry) -> Vec<(usize, usize)> {
    let sender = p.bulk_sender();
    let mut v: Vec<(usize, usize, u64)> = Vec::new();
    for (ci, c) in r.connections.iter().enumerate() {
        if !p.owns(c) {
            continue;
        }
        for (di, d) in c.directions.iter().enumerate() {
            if d.sender == Some(sender) && d.tcp_perf.payload_bytes > 0 {
                v.push((ci, di, d.tcp_perf.payload_bytes));
            }
        }
    }
    let busiest = v.iter().map(|e| e.2).max().unwrap_or(0);
    v.retain(|e| e.2 * 10 >= busiest && e.2 >= 64 * 1024);
    v.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
    v.into_iter().map(|(c, d, _)| (c, d)).collect()
}

/// Error drawing a chart.
#[derive(Debug)]
pub struct ChartError(pub String);

impl std::fmt::Display for ChartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ChartError {}

/// The chart as an SVG document.
pub fn svg(r: &Report, c: &Chart) -> Result<String, ChartError> {
    register_font().map_err(ChartError)?;
    let mut s = String::new();
    {
        let area = SVGBackend::with_string(&mut s, (WIDTH, HEIGHT)).into_drawing_area();
        draw(r, c, &area).map_err(|e| ChartError(format!("chart {}: {e}", c.id)))?;
        area.present().map_err(|e| ChartError(format!("chart {}: {e}", c.id)))?;
    }
    Ok(s)
}

/// The chart as a PNG file.
pub fn png(r: &Report, c: &Chart, path: &std::path::Path) -> Result<(), ChartError> {
    register_font().map_err(ChartError)?;
    let area = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    draw(r, c, &area).map_err(|e| ChartError(format!("chart {}: {e}", c.id)))?;
    area.present().map_err(|e| ChartError(format!("{}: {e}", path.display())))
}

type Res = Result<(), String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn draw<DB: DrawingBackend>(r: &Report, c: &Chart, area: &DrawingArea<DB, Shift>) -> Res {
    area.fill(&WHITE).map_err(err)?;
    // A peer's series are at its source's interval (coarser than asked on a long capture).
    let dt = |p: &PeerEntry| r.interval_of(&p.file).max(1) as f64 / 1e9;
    match c.kind {
        Kind::Throughput(i) => throughput(area, &c.title, &r.peers[i], peer_t0(r, &r.peers[i]), dt(&r.peers[i])),
        Kind::InFlight(i) => in_flight(area, &c.title, &r.peers[i], peer_t0(r, &r.peers[i]), dt(&r.peers[i])),
        Kind::Tcp { peer, conn, dir } => {
            let p = &r.peers[peer];
            tcp(area, &c.title, p, &r.connections[conn].directions[dir], peer_t0(r, p), dt(p))
        }
        Kind::Latency(i) => latency(area, &c.title, &r.peers[i]),
        Kind::Phases => phases(area, &c.title, &r.peers),
        Kind::Rif => rif(area, &c.title, &r.peers),
    }
}

fn text_style(size: u32) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).color(&INK)
}

/// The time origin of a peer's charts: its first interval (or its connections').
fn peer_t0(r: &Report, p: &PeerEntry) -> i64 {
    let conns = r.connections.iter().filter(|c| p.owns(c));
    let mut t0 = p.peer.timeseries.first().map(|t| t.t_ns);
    for c in conns {
        for d in &c.directions {
            if let Some(s) = d.series.first() {
                t0 = Some(t0.map_or(s.t_ns, |t| t.min(s.t_ns)));
            }
        }
    }
    t0.unwrap_or(0)
}

fn no_data<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, why: &str) -> Res {
    area.draw(&Text::new(title.to_string(), (20, 14), text_style(18))).map_err(err)?;
    area.draw(&Text::new(why.to_string(), (20, HEIGHT as i32 / 2), text_style(15).color(&GREY))).map_err(err)?;
    Ok(())
}

/// Points of a step line: each value held over its interval.
fn steps(v: impl IntoIterator<Item = (f64, f64)>, dt: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for (x, y) in v {
        out.push((x, y));
        out.push((x + dt, y));
    }
    out
}

/// Step lines of interval values, one per run of consecutive intervals, so a gap (an
/// interval without a value) is not bridged.
fn step_runs(v: impl IntoIterator<Item = (f64, f64)>, dt: f64) -> Vec<Vec<(f64, f64)>> {
    let mut groups: Vec<Vec<(f64, f64)>> = Vec::new();
    for p in v {
        match groups.last_mut() {
            Some(g) if g.last().is_some_and(|l| p.0 - l.0 <= dt * 1.01) => g.push(p),
            _ => groups.push(vec![p]),
        }
    }
    groups.into_iter().map(|g| steps(g, dt)).collect()
}

/// The top of an axis: the largest value with 15 % headroom (1 when nothing is above 0).
fn top(v: impl IntoIterator<Item = f64>) -> f64 {
    headroom(v, 1.15)
}

/// The top of an axis with room above the data for a legend of `lines` lines.
fn top_for_legend(v: impl IntoIterator<Item = f64>, lines: usize) -> f64 {
    headroom(v, 1.15 + 0.09 * lines as f64)
}

fn headroom(v: impl IntoIterator<Item = f64>, factor: f64) -> f64 {
    let m = v.into_iter().filter(|x| x.is_finite()).fold(0.0f64, f64::max);
    if m > 0.0 {
        m * factor
    } else {
        1.0
    }
}

fn legend_line(color: RGBColor, width: u32) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(width))
}

/// The label of a category axis at `v`: the name of category `v` when `v` is a whole
/// index, else nothing (plotters also asks for in-between tick positions).
fn category(names: &[String], v: f64) -> String {
    let i = v.round();
    if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
        names[i as usize].clone()
    } else {
        String::new()
    }
}

/// Axis numbers without trailing zeros: `150`, `2.5`, `0.25`.
fn num(v: &f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

macro_rules! mesh {
    ($chart:expr, $x:expr, $y:expr) => {
        $chart
            .configure_mesh()
            .x_desc($x)
            .y_desc($y)
            .x_label_formatter(&num)
            .y_label_formatter(&num)
            .label_style(text_style(13))
            .axis_desc_style(text_style(14))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .draw()
            .map_err(err)?
    };
}

macro_rules! legend {
    ($chart:expr, $pos:expr) => {
        $chart
            .configure_series_labels()
            .position($pos)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(0xbb, 0xbb, 0xbb))
            .label_font(text_style(13))
            .draw()
            .map_err(err)?
    };
}

fn throughput<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, p: &PeerEntry, t0: i64, dt: f64) -> Res {
    let ts = &p.peer.timeseries;
    if ts.is_empty() {
        return no_data(area, title, "no RPC traffic in this peer's intervals");
    }
    let x = |t: i64| (t - t0) as f64 / 1e9;
    let x_max = ts.iter().map(|r| x(r.t_ns) + dt).fold(dt, f64::max);
    let observed: Vec<(f64, f64)> =
        ts.iter().map(|r| (x(r.t_ns), (r.read_bytes_per_s + r.write_bytes_per_s) / 1e6)).collect();
    let mut limits: Vec<Limit> = p.intervals.iter().map(|m| m.binding_limit).collect();
    limits.sort_unstable();
    limits.dedup();
    let base =
        observed.iter().map(|o| o.1).chain(p.intervals.iter().map(|m| m.t_model_bytes_per_s / 1e6)).fold(0.0, f64::max);
    let trpc_max = p.intervals.iter().map(|m| m.t_rpc_bytes_per_s / 1e6).fold(0.0, f64::max);
    // T_rpc far above everything else would flatten the chart: it is then left out where
    // it is off the axis, and the legend says so.
    let with_trpc = if trpc_max <= 2.5 * base { trpc_max } else { 0.0 };
    let y_max = top_for_legend([base, with_trpc], 2 + limits.len());
    let mut chart = ChartBuilder::on(area)
        .caption(title, text_style(17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(err)?;
    mesh!(chart, "time since the first interval (s)", "throughput (MB/s)");
    let clip = |v: f64| v.min(y_max);
    // T_rpc, grey dashed, per interval.
    let trpc_label = if trpc_max > y_max {
        format!("T_rpc (RPCs in flight × size / 2·RTT; up to {trpc_max:.0} MB/s, off the axis)")
    } else {
        "T_rpc (RPCs in flight × size / 2·RTT)".to_string()
    };
    let trpc = p.intervals.iter().map(|m| (x(m.t_ns), m.t_rpc_bytes_per_s / 1e6)).filter(|v| v.1 <= y_max);
    let mut labelled = false;
    for run in step_runs(trpc, dt) {
        let s = chart.draw_series(DashedLineSeries::new(run, 6, 4, GREY.stroke_width(1))).map_err(err)?;
        if !std::mem::replace(&mut labelled, true) {
            s.label(trpc_label.clone()).legend(legend_line(GREY, 1));
        }
    }
    if !labelled && !p.intervals.is_empty() {
        chart
            .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())
            .map_err(err)?
            .label(trpc_label)
            .legend(legend_line(GREY, 1));
    }
    // The model bound, coloured by the binding limit of each interval.
    let mut seen: Vec<Limit> = Vec::new();
    for m in &p.intervals {
        let color = limit_color(Some(m.binding_limit));
        let y = clip(m.t_model_bytes_per_s / 1e6);
        let s = chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x(m.t_ns), y), (x(m.t_ns) + dt, y)],
                color.stroke_width(3),
            )))
            .map_err(err)?;
        if !seen.contains(&m.binding_limit) {
            seen.push(m.binding_limit);
            s.label(format!("model bound: {}", m.binding_limit.as_str())).legend(legend_line(color, 3));
        }
    }
    chart
        .draw_series(LineSeries::new(steps(observed, dt), INK.stroke_width(2)))
        .map_err(err)?
        .label("observed bulk throughput")
        .legend(legend_line(INK, 2));
    legend!(chart, SeriesLabelPosition::UpperRight);
    Ok(())
}

fn in_flight<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, p: &PeerEntry, t0: i64, dt: f64) -> Res {
    let ts = &p.peer.timeseries;
    if ts.is_empty() {
        return no_data(area, title, "no RPC traffic in this peer's intervals");
    }
    let x = |t: i64| (t - t0) as f64 / 1e9;
    let x_max = ts.iter().map(|r| x(r.t_ns) + dt).fold(dt, f64::max);
    let credits = p.peer.messages_in_flight.inferred_peer_credits;
    let y_max = top_for_legend(
        ts.iter()
            .flat_map(|r| {
                [r.rpcs_in_flight_max as f64, r.messages_in_flight_max_c2s as f64, r.messages_in_flight_max_s2c as f64]
            })
            .chain(credits.map(|c| c as f64))
            .chain(std::iter::once(2.0)),
        5,
    );
    let mut chart = ChartBuilder::on(area)
        .caption(title, text_style(17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(err)?;
    mesh!(chart, "time since the first interval (s)", "in flight (count)");
    let blue = PALETTE[0];
    let light = RGBColor(0x9e, 0xc5, 0xe8);
    chart
        .draw_series(LineSeries::new(
            steps(ts.iter().map(|r| (x(r.t_ns), r.rpcs_in_flight_max as f64)), dt),
            light.stroke_width(1),
        ))
        .map_err(err)?
        .label("RPCs in flight, most per interval")
        .legend(legend_line(light, 1));
    chart
        .draw_series(LineSeries::new(
            steps(ts.iter().map(|r| (x(r.t_ns), r.rpcs_in_flight_mean)), dt),
            blue.stroke_width(2),
        ))
        .map_err(err)?
        .label("RPCs in flight, mean")
        .legend(legend_line(blue, 2));
    let dirs = &p.peer.messages_in_flight.directions;
    let name = |i: usize, fallback: &str| {
        dirs.get(i).map_or_else(|| fallback.to_string(), |d| format!("{} → {}", d.from, d.to))
    };
    let (c2s, s2c) = (PALETTE[2], PALETTE[1]);
    chart
        .draw_series(LineSeries::new(
            steps(ts.iter().map(|r| (x(r.t_ns), r.messages_in_flight_max_c2s as f64)), dt),
            c2s.stroke_width(2),
        ))
        .map_err(err)?
        .label(format!("LNet messages in flight {}, most", name(0, "client → server")))
        .legend(legend_line(c2s, 2));
    chart
        .draw_series(LineSeries::new(
            steps(ts.iter().map(|r| (x(r.t_ns), r.messages_in_flight_max_s2c as f64)), dt),
            s2c.stroke_width(2),
        ))
        .map_err(err)?
        .label(format!("LNet messages in flight {}, most", name(1, "server → client")))
        .legend(legend_line(s2c, 2));
    if let Some(c) = credits {
        let red = limit_color(Some(Limit::TcpCongestion));
        chart
            .draw_series(DashedLineSeries::new(vec![(0.0, c as f64), (x_max, c as f64)], 8, 5, red.stroke_width(2)))
            .map_err(err)?
            .label(format!("peer_credits (inferred): {c}"))
            .legend(legend_line(red, 2));
    }
    legend!(chart, SeriesLabelPosition::UpperRight);
    Ok(())
}

fn tcp<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    p: &PeerEntry,
    d: &DirectionEntry,
    t0: i64,
    dt: f64,
) -> Res {
    if d.series.is_empty() {
        return no_data(area, title, "no TCP samples in this direction");
    }
    let x = |t: i64| (t - t0) as f64 / 1e9;
    let x_max = d.series.iter().map(|s| x(s.t_ns) + dt).fold(dt, f64::max);
    let flight: Vec<(f64, f64)> =
        d.series.iter().filter_map(|s| Some((x(s.t_ns), s.bytes_in_flight_max? as f64 / 1e6))).collect();
    let cwnd: Vec<(f64, f64)> =
        d.series.iter().filter_map(|s| Some((x(s.t_ns), s.cwnd_estimate? as f64 / 1e6))).collect();
    let y_top = top(flight.iter().chain(&cwnd).map(|v| v.1));
    let rwnd_all: Vec<(f64, f64)> = d.series.iter().filter_map(|s| Some((x(s.t_ns), s.rwnd? as f64 / 1e6))).collect();
    // A receive window far above the flight would flatten the chart: it is capped at the
    // axis top, and the legend says so.
    let y_max = top_for_legend(
        flight.iter().chain(&cwnd).map(|v| v.1).chain(rwnd_all.iter().map(|v| v.1).filter(|v| *v <= y_top * 1.5)),
        5,
    );
    let rwnd_capped = rwnd_all.iter().any(|v| v.1 > y_max);
    let rwnd: Vec<(f64, f64)> = rwnd_all.into_iter().map(|(t, v)| (t, v.min(y_max))).collect();
    let rtt: Vec<(f64, f64)> = p.intervals.iter().filter_map(|m| Some((x(m.t_ns), m.rtt_us?.mean_us / 1e3))).collect();
    let rtt_max = top_for_legend(rtt.iter().map(|v| v.1), 5);
    let mut chart = ChartBuilder::on(area)
        .caption(title, text_style(17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .right_y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(err)?
        .set_secondary_coord(0f64..x_max, 0f64..rtt_max);
    mesh!(chart, "time since the first interval (s)", "bytes (MB)");
    chart
        .configure_secondary_axes()
        .y_desc("RTT (ms)")
        .label_style(text_style(13))
        .axis_desc_style(text_style(14))
        .draw()
        .map_err(err)?;
    let (cf, cc, cr, ct) = (PALETTE[0], PALETTE[4], RGBColor(0xbb, 0xbb, 0xbb), PALETTE[2]);
    if !rwnd.is_empty() {
        chart
            .draw_series(LineSeries::new(steps(rwnd, dt), cr.stroke_width(1)))
            .map_err(err)?
            .label(if rwnd_capped { "receive window (capped at the axis top)" } else { "receive window" })
            .legend(legend_line(cr, 1));
    }
    let mut first = true;
    for run in step_runs(cwnd, dt) {
        let s = chart.draw_series(DashedLineSeries::new(run, 7, 4, cc.stroke_width(2))).map_err(err)?;
        if std::mem::take(&mut first) {
            s.label("congestion-window estimate").legend(legend_line(cc, 2));
        }
    }
    let mut first = true;
    for run in step_runs(flight, dt) {
        let s = chart.draw_series(LineSeries::new(run, cf.stroke_width(2))).map_err(err)?;
        if std::mem::take(&mut first) {
            s.label("bytes in flight, most per interval").legend(legend_line(cf, 2));
        }
    }
    let mut first = true;
    for run in step_runs(rtt, dt) {
        let s = chart.draw_secondary_series(LineSeries::new(run, ct.stroke_width(1))).map_err(err)?;
        if std::mem::take(&mut first) {
            s.label("RTT, mean per interval (right axis)").legend(legend_line(ct, 1));
        }
    }
    let red = limit_color(Some(Limit::TcpCongestion));
    let marks: Vec<(f64, f64)> = d
        .series
        .iter()
        .filter(|s| s.retransmits > 0)
        .map(|s| (x(s.t_ns) + dt / 2.0, s.bytes_in_flight_max.map_or(0.0, |b| b as f64 / 1e6).min(y_max)))
        .collect();
    if !marks.is_empty() {
        let n: u64 = d.series.iter().map(|s| u64::from(s.retransmits)).sum();
        chart
            .draw_series(marks.into_iter().map(|m| TriangleMarker::new(m, 7, red.filled())))
            .map_err(err)?
            .label(format!("interval with retransmissions ({n} in all)"))
            .legend(move |(x, y)| TriangleMarker::new((x + 11, y), 6, red.filled()));
    }
    legend!(chart, SeriesLabelPosition::UpperRight);
    Ok(())
}

/// `µs` as a short duration label with three significant digits: `512 µs`, `262 ms`,
/// `1.05 s`.
pub fn dur_label(us: f64) -> String {
    let (v, unit) = if us < 1000.0 {
        (us, "µs")
    } else if us < 1e6 {
        (us / 1e3, "ms")
    } else {
        (us / 1e6, "s")
    };
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    let s = format!("{v:.digits$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    format!("{s} {unit}")
}

fn latency<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, p: &PeerEntry) -> Res {
    let h = &p.peer.latency_us.histogram.0;
    if h.is_empty() {
        return no_data(area, title, "no complete RPC");
    }
    // Every power-of-two row from the first to the last occupied one, empty rows too.
    let (lo, hi) = (*h.keys().next().unwrap_or(&1), *h.keys().next_back().unwrap_or(&1));
    let mut bins: Vec<(u64, u64)> = Vec::new();
    let mut row = lo;
    while row <= hi && bins.len() < 64 {
        bins.push((row, h.get(&row).copied().unwrap_or(0)));
        row = if row == 0 { 1 } else { row * 2 };
    }
    let n = bins.len();
    let y_max = top(bins.iter().map(|b| b.1 as f64));
    let l = &p.peer.latency_us;
    let caption = match (l.p50, l.p95, l.p99) {
        (Some(a), Some(b), Some(c)) => {
            format!(
                "{title}  (p50 {}, p95 {}, p99 {})",
                crate::fmt::ms(Some(a)),
                crate::fmt::ms(Some(b)),
                crate::fmt::ms(Some(c))
            )
        }
        _ => title.to_string(),
    };
    let labels: Vec<String> = bins.iter().map(|b| format!("≤{}", dur_label(b.0 as f64))).collect();
    let mut chart = ChartBuilder::on(area)
        .caption(caption, text_style(17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("RPC latency, client's view (log2 bins, labelled by their upper bound)")
        .y_desc("RPCs (count)")
        .y_label_formatter(&num)
        .x_labels(n.min(24))
        .x_label_formatter(&|v| category(&labels, *v))
        .label_style(text_style(12))
        .axis_desc_style(text_style(14))
        .disable_x_mesh()
        .light_line_style(RGBColor(0xee, 0xee, 0xee))
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(bins.iter().enumerate().map(|(i, b)| {
            Rectangle::new([(i as f64 - 0.38, 0.0), (i as f64 + 0.38, b.1 as f64)], PALETTE[0].mix(0.85).filled())
        }))
        .map_err(err)?;
    chart
        .draw_series(
            bins.iter()
                .enumerate()
                .map(|(i, b)| Text::new(b.1.to_string(), (i as f64 - 0.2, b.1 as f64 + y_max * 0.05), text_style(12))),
        )
        .map_err(err)?;
    Ok(())
}

const PHASES: [(&str, RGBColor); 5] = [
    ("request", RGBColor(0x9e, 0xc5, 0xe8)),
    ("server wait", RGBColor(0xe6, 0x7e, 0x00)),
    ("bulk", RGBColor(0x1f, 0x77, 0xb4)),
    ("server", RGBColor(0x8c, 0x56, 0x4b)),
    ("reply", RGBColor(0x2c, 0xa0, 0x2c)),
];

fn phases<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, peers: &[PeerEntry]) -> Res {
    let rows: Vec<(String, [f64; 5])> = peers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let ph = &p.peer.phases;
            let v = [ph.request_us, ph.server_wait_us, ph.bulk_us, ph.server_us, ph.reply_us]
                .map(|v| v.unwrap_or(0.0) / 1e3);
            (format!("{}: {}", i + 1, p.peer.client_nid), v)
        })
        .collect();
    let x_max = headroom(rows.iter().map(|r| r.1.iter().sum::<f64>()), 1.35);
    let n = rows.len();
    let mut chart = ChartBuilder::on(area)
        .caption(title, text_style(17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(170)
        .build_cartesian_2d(0f64..x_max, -0.5f64..(n as f64 - 0.5))
        .map_err(err)?;
    let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    chart
        .configure_mesh()
        .x_desc("mean time per RPC (ms)")
        .y_desc("peer (client NID)")
        .x_label_formatter(&num)
        .y_labels(n.min(20))
        .y_label_formatter(&|v| category(&names, *v))
        .label_style(text_style(12))
        .axis_desc_style(text_style(14))
        .disable_y_mesh()
        .light_line_style(RGBColor(0xee, 0xee, 0xee))
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .draw()
        .map_err(err)?;
    let h = if n > 1 { 0.35 } else { 0.2 };
    for (k, (name, color)) in PHASES.iter().enumerate() {
        let s = chart
            .draw_series(rows.iter().enumerate().map(|(i, r)| {
                let x0: f64 = r.1[..k].iter().sum();
                let y = i as f64;
                Rectangle::new([(x0, y - h), (x0 + r.1[k], y + h)], color.filled())
            }))
            .map_err(err)?;
        let c = *color;
        s.label(*name).legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], c.filled()));
    }
    legend!(chart, SeriesLabelPosition::UpperRight);
    Ok(())
}

fn rif<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, peers: &[PeerEntry]) -> Res {
    struct Pts {
        label: String,
        points: Vec<(f64, f64)>,
        slope: Option<f64>,
        flat: Vec<(&'static str, f64)>,
    }
    let mut series = Vec::new();
    for (i, p) in peers.iter().enumerate() {
        let [w0, w1] = p.peer.steady_window_ns.unwrap_or([i64::MIN, i64::MAX]);
        let points: Vec<(f64, f64)> = p
            .peer
            .timeseries
            .iter()
            .filter(|r| r.t_ns >= w0 && r.t_ns < w1 && r.rpcs_completed > 0)
            .filter(|r| p.intervals.iter().any(|m| m.t_ns == r.t_ns))
            .map(|r| (r.rpcs_in_flight_mean, (r.read_bytes_per_s + r.write_bytes_per_s) / 1e6))
            .collect();
        // T_rpc against RPCs in flight (with the round trips the model used), and the
        // bounds that do not grow with them, as the model computed them.
        let per_rif = p.model.inputs.t_rpc_per_rif();
        let slope = (per_rif > 0.0).then_some(per_rif / 1e6);
        let flat: Vec<(&'static str, f64)> = p
            .model
            .bounds
            .iter()
            .filter(|b| matches!(b.limit, Limit::LnetCredits | Limit::Link))
            .map(|b| (b.limit.as_str(), b.bytes_per_s / 1e6))
            .collect();
        series.push(Pts { label: format!("{}: {}", i + 1, p.peer.client_nid), points, slope, flat });
    }
    if series.iter().all(|s| s.points.is_empty()) {
        return no_data(area, title, "no steady interval with completed RPCs");
    }
    let x_max = top(series.iter().flat_map(|s| s.points.iter().map(|p| p.0))).max(2.0);
    let y_obs = top(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let y_max = top(series
        .iter()
        .flat_map(|s| s.flat.iter().map(|f| f.1))
        .chain(std::iter::once(y_obs))
        .filter(|v| *v <= y_obs * 3.0));
    let mut chart = ChartBuilder::on(area)
        .caption(title, text_style(17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(err)?;
    mesh!(chart, "RPCs in flight (mean per interval)", "throughput (MB/s)");
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        if let Some(k) = s.slope {
            let x_end = x_max.min(y_max / k);
            chart
                .draw_series(LineSeries::new(vec![(0.0, 0.0), (x_end, k * x_end)], color.mix(0.6).stroke_width(1)))
                .map_err(err)?;
        }
        for (limit, y) in &s.flat {
            if *y <= y_max {
                chart
                    .draw_series(DashedLineSeries::new(
                        vec![(0.0, *y), (x_max, *y)],
                        8,
                        5,
                        color.mix(0.6).stroke_width(1),
                    ))
                    .map_err(err)?;
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("{limit} bound"),
                        (x_max * 0.02, *y + y_max * 0.01),
                        text_style(12).color(&color),
                    )))
                    .map_err(err)?;
            }
        }
        chart
            .draw_series(s.points.iter().map(|p| Circle::new(*p, 4, color.filled())))
            .map_err(err)?
            .label(format!("{} (line: T_rpc)", s.label))
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
    }
    legend!(chart, SeriesLabelPosition::LowerRight);
    Ok(())
}
