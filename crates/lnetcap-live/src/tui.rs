//! The terminal view: one row per peer pair, refreshed as views are published, sortable,
//! with a detail pane (sparklines of throughput and RPCs in flight). The terminal is
//! restored when the view ends for any reason: a stop, an error, or a panic (ratatui's
//! hook), before the run writes its report.

use std::cmp::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Sparkline, Table, TableState};
use ratatui::Frame;

use crate::control::{Stop, StopReason};
use crate::lines::{rate, size};
use crate::view::{Board, LiveView, PeerRow};

/// How often the view is redrawn and keys are read.
const FRAME: Duration = Duration::from_millis(250);

/// The keys, as the footer and the README list them.
pub const KEYS: &str = "q/Esc/Ctrl-C stop  ↑/↓ select  Enter detail  s sort  r reverse";

/// Columns one can sort by (`s` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    /// Throughput now.
    Now,
    /// Throughput over the run.
    Run,
    /// RPCs in flight.
    Rif,
    /// RTT.
    Rtt,
    /// Retransmits.
    Retransmits,
    /// Client then server NID.
    Pair,
}

impl SortBy {
    fn next(self) -> Self {
        match self {
            Self::Now => Self::Run,
            Self::Run => Self::Rif,
            Self::Rif => Self::Rtt,
            Self::Rtt => Self::Retransmits,
            Self::Retransmits => Self::Pair,
            Self::Pair => Self::Now,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Now => "now",
            Self::Run => "run",
            Self::Rif => "RIF",
            Self::Rtt => "RTT",
            Self::Retransmits => "retr",
            Self::Pair => "pair",
        }
    }

    /// Descending for numbers (largest first), ascending for names.
    fn cmp(self, a: &PeerRow, b: &PeerRow) -> Ordering {
        let f = |x: f64, y: f64| y.total_cmp(&x);
        match self {
            Self::Now => f(a.now_bytes_per_s, b.now_bytes_per_s),
            Self::Run => f(a.run_bytes_per_s, b.run_bytes_per_s),
            Self::Rif => f(a.rpcs_in_flight, b.rpcs_in_flight),
            Self::Rtt => f(a.rtt_us.unwrap_or(0.0), b.rtt_us.unwrap_or(0.0)),
            Self::Retransmits => b.retransmits.cmp(&a.retransmits),
            Self::Pair => (&a.client, &a.server).cmp(&(&b.client, &b.server)),
        }
    }
}

/// What the user chose.
#[derive(Debug)]
struct UiState {
    sort: SortBy,
    reverse: bool,
    detail: bool,
    table: TableState,
}

/// Runs the view on a thread of its own until `stop` is set (or a stop key is pressed).
pub fn spawn(board: Board, stop: Stop) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("tui".into()).spawn(move || {
        let mut term = ratatui::init();
        let mut ui = UiState { sort: SortBy::Now, reverse: false, detail: false, table: TableState::default() };
        ui.table.select(Some(0));
        while !stop.is_set() {
            let v = board.latest();
            if term.draw(|f| draw(f, &v, &mut ui)).is_err() {
                break;
            }
            match event::poll(FRAME) {
                Ok(true) => {
                    if let Ok(Event::Key(k)) = event::read() {
                        if k.kind == KeyEventKind::Press && key(&mut ui, k.code, k.modifiers, v.peers.len()) {
                            stop.set(StopReason::Key);
                        }
                    }
                }
                Ok(false) => {}
                Err(_) => break,
            }
        }
        ratatui::restore();
    })
}

/// A key; true when it stops the run.
fn key(ui: &mut UiState, code: KeyCode, mods: KeyModifiers, rows: usize) -> bool {
    let sel = ui.table.selected().unwrap_or(0);
    match code {
        KeyCode::Char('q') | KeyCode::Esc => return true,
        KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => return true,
        KeyCode::Down | KeyCode::Char('j') => ui.table.select(Some((sel + 1).min(rows.saturating_sub(1)))),
        KeyCode::Up | KeyCode::Char('k') => ui.table.select(Some(sel.saturating_sub(1))),
        KeyCode::Enter => ui.detail = !ui.detail,
        KeyCode::Char('s') => ui.sort = ui.sort.next(),
        KeyCode::Char('r') => ui.reverse = !ui.reverse,
        _ => {}
    }
    false
}

/// The rows in the order chosen.
fn sorted<'a>(v: &'a LiveView, ui: &UiState) -> Vec<&'a PeerRow> {
    let mut rows: Vec<&PeerRow> = v.peers.iter().collect();
    rows.sort_by(|a, b| {
        let o = ui.sort.cmp(a, b).then_with(|| SortBy::Pair.cmp(a, b));
        if ui.reverse {
            o.reverse()
        } else {
            o
        }
    });
    rows
}

fn draw(f: &mut Frame<'_>, v: &LiveView, ui: &mut UiState) {
    let detail_h = if ui.detail { 9 } else { 0 };
    let [head, body, detail, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(detail_h),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let drops = v.dropped + v.dropped_interface;
    let mut title = format!(
        " lnetcap live  {}  {:.0} s  {} packets  {}  {} LNet connections  ",
        v.source,
        v.elapsed_s,
        v.packets,
        size(v.bytes),
        v.lnet_connections
    );
    title.push_str(&if drops > 0 { format!("DROPPED {drops} ") } else { "dropped 0 ".into() });
    let style = if drops > 0 { Style::new().red().bold() } else { Style::new().bold() };
    f.render_widget(Paragraph::new(Line::from(title)).style(style), head);
    let rows = sorted(v, ui);
    table(f, body, &rows, ui);
    if ui.detail {
        if let Some(p) = ui.table.selected().and_then(|i| rows.get(i)) {
            pane(f, detail, p, v.interval_s);
        }
    }
    let foot_text = format!(" {KEYS}   sorted by {}{}", ui.sort.name(), if ui.reverse { " (reversed)" } else { "" });
    f.render_widget(Paragraph::new(foot_text).style(Style::new().add_modifier(Modifier::DIM)), foot);
}

fn table(f: &mut Frame<'_>, area: Rect, rows: &[&PeerRow], ui: &mut UiState) {
    let header =
        ["client -> server", "now", "run", "RPCs", "RIF", "msgs/cred", "RTT", "inflight/cwnd", "retr", "limit now"];
    let dash = || "-".to_string();
    let body: Vec<Row> = rows
        .iter()
        .map(|p| {
            Row::new(vec![
                Cell::from(format!("{} -> {}", p.client, p.server)),
                Cell::from(rate(p.now_bytes_per_s)),
                Cell::from(rate(p.run_bytes_per_s)),
                Cell::from(p.rpcs.to_string()),
                Cell::from(format!("{:.1}", p.rpcs_in_flight)),
                Cell::from(format!("{}/{}", p.messages_in_flight, p.credits.map_or_else(dash, |c| c.to_string()))),
                Cell::from(p.rtt_us.map_or_else(dash, |r| format!("{:.2} ms", r / 1e3))),
                Cell::from(format!("{}/{}", p.bytes_in_flight.map_or_else(dash, size), p.cwnd.map_or_else(dash, size))),
                Cell::from(p.retransmits.to_string()),
                Cell::from(p.limit_now.unwrap_or(p.limit_run).to_string()),
            ])
        })
        .collect();
    let widths = [
        Constraint::Min(30),
        Constraint::Length(14),
        Constraint::Length(14),
        Constraint::Length(8),
        Constraint::Length(6),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(20),
        Constraint::Length(6),
        Constraint::Length(15),
    ];
    let t = Table::new(body, widths)
        .header(Row::new(header).style(Style::new().bold().underlined()))
        .row_highlight_style(Style::new().reversed())
        .block(Block::default().borders(Borders::TOP).title(format!(" {} peer pairs ", rows.len())));
    f.render_stateful_widget(t, area, &mut ui.table);
}

fn pane(f: &mut Frame<'_>, area: Rect, p: &PeerRow, interval_s: f64) {
    let [text, spark] = Layout::horizontal([Constraint::Length(46), Constraint::Min(20)]).areas(area);
    let info = vec![
        Line::from(format!("{} -> {}", p.client, p.server)).bold(),
        Line::from(format!("now {}   run {}", rate(p.now_bytes_per_s), rate(p.run_bytes_per_s))),
        Line::from(format!("RPCs {}   RIF {:.1}", p.rpcs, p.rpcs_in_flight)),
        Line::from(format!(
            "messages in flight {}   credits {}",
            p.messages_in_flight,
            p.credits.map_or("not inferred".into(), |c| c.to_string())
        )),
        Line::from(format!("limit now {}   run {}", p.limit_now.unwrap_or("-"), p.limit_run)),
        Line::from(format!("retransmits {}", p.retransmits)),
    ];
    f.render_widget(Paragraph::new(info).block(Block::default().borders(Borders::TOP).title(" detail ")), text);
    let [a, b] = Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(spark);
    let scale = |v: &[f64], k: f64| v.iter().map(|x| (x * k).max(0.0) as u64).collect::<Vec<u64>>();
    let tp = scale(&p.throughput_history, 8e-6);
    let rif = scale(&p.rif_history, 10.0);
    let t1 = format!(" throughput, Mbit/s per {interval_s:.1} s interval ");
    f.render_widget(Sparkline::default().data(&tp).block(Block::default().borders(Borders::TOP).title(t1)), a);
    let t2 = " RPCs in flight (mean per interval) ";
    f.render_widget(Sparkline::default().data(&rif).block(Block::default().borders(Borders::TOP).title(t2)), b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    #[test]
    fn rows_show_each_pair_and_sort() {
        let v = LiveView {
            source: "veth1".into(),
            peers: vec![
                PeerRow {
                    client: "10.0.0.2@tcp".into(),
                    server: "10.0.0.1@tcp".into(),
                    now_bytes_per_s: 1e6,
                    limit_run: "rpc_window",
                    ..PeerRow::default()
                },
                PeerRow {
                    client: "10.0.0.3@tcp".into(),
                    server: "10.0.0.1@tcp".into(),
                    now_bytes_per_s: 5e6,
                    limit_run: "none",
                    ..PeerRow::default()
                },
            ],
            ..LiveView::default()
        };
        let mut ui = UiState { sort: SortBy::Now, reverse: false, detail: true, table: TableState::default() };
        ui.table.select(Some(0));
        let mut term = Terminal::new(TestBackend::new(160, 20)).unwrap();
        term.draw(|f| draw(f, &v, &mut ui)).unwrap();
        let text: String = term.backend().buffer().content().iter().map(|c| c.symbol()).collect();
        let first = text.find("10.0.0.3@tcp -> 10.0.0.1@tcp").unwrap();
        let second = text.find("10.0.0.2@tcp -> 10.0.0.1@tcp").unwrap();
        assert!(first < second, "largest now first");
        assert!(text.contains("40.00 Mbit/s") && text.contains("detail"));
        assert!(!key(&mut ui, KeyCode::Char('s'), KeyModifiers::NONE, 2) && ui.sort == SortBy::Run);
        assert!(key(&mut ui, KeyCode::Char('c'), KeyModifiers::CONTROL, 2));
    }
}
