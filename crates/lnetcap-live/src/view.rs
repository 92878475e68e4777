//! What the live views show: one row per peer pair, built from the report of the packets
//! so far (the same numbers `analyze` prints at the end), "now" being the last complete
//! interval of the time series.

use std::sync::{Arc, Mutex};

use lnetcap_analysis::{BindingLimit, PeerEntry, Report};

use crate::source::Counters;

/// Intervals kept for the sparklines of the detail pane.
pub const HISTORY: usize = 120;

/// One snapshot of a live run.
#[derive(Debug, Clone, Default)]
pub struct LiveView {
    /// What is captured (interface or replayed file).
    pub source: String,
    /// Wall-clock seconds since the run started.
    pub elapsed_s: f64,
    /// Packets read and their bytes on the wire.
    pub packets: u64,
    /// Bytes on the wire.
    pub bytes: u64,
    /// libpcap's counters: received, dropped (buffer full), dropped by the interface.
    pub received: u64,
    /// Dropped because the capture buffer was full.
    pub dropped: u64,
    /// Dropped by the interface or driver.
    pub dropped_interface: u64,
    /// TCP connections carrying LNet.
    pub lnet_connections: u64,
    /// The time-series interval, s.
    pub interval_s: f64,
    /// One row per peer pair.
    pub peers: Vec<PeerRow>,
}

/// A peer pair as the live views show it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeerRow {
    /// Client NID.
    pub client: String,
    /// Server NID.
    pub server: String,
    /// Bulk bytes per second in the last complete interval.
    pub now_bytes_per_s: f64,
    /// Bulk throughput of the run so far (the report's steady window), bytes/s.
    pub run_bytes_per_s: f64,
    /// Complete RPCs.
    pub rpcs: u64,
    /// Mean RPCs in flight in the last complete interval.
    pub rpcs_in_flight: f64,
    /// Most LNet messages in flight (either direction) in the last complete interval.
    pub messages_in_flight: i64,
    /// Peer credits the plateau of messages in flight shows, when it binds.
    pub credits: Option<i64>,
    /// RTT the model uses, µs.
    pub rtt_us: Option<f64>,
    /// Bytes in flight of the bulk sender in the last complete interval.
    pub bytes_in_flight: Option<u64>,
    /// Its congestion-window estimate.
    pub cwnd: Option<u64>,
    /// Retransmitted segments so far.
    pub retransmits: u64,
    /// The binding limit of the last complete interval with bulk traffic.
    pub limit_now: Option<&'static str>,
    /// The binding limit of the run so far.
    pub limit_run: &'static str,
    /// Bulk bytes per second per interval, oldest first (at most [`HISTORY`]).
    pub throughput_history: Vec<f64>,
    /// Mean RPCs in flight per interval.
    pub rif_history: Vec<f64>,
}

impl LiveView {
    /// The view of `report` (a snapshot of one live source) whose last packet came at
    /// `last_ns`; `counters` and `elapsed_s` from the source.
    pub fn new(source: &str, report: &Report, last_ns: Option<i64>, counters: &Counters, elapsed_s: f64) -> Self {
        let interval = report.interval_of(source).max(1);
        // Intervals that ended before the last packet are complete.
        let complete_before = last_ns.map_or(i64::MIN, |t| t.div_euclid(interval) * interval);
        let peers = report.peers.iter().map(|p| row(p, report, interval, complete_before)).collect();
        Self {
            source: source.to_string(),
            elapsed_s,
            packets: Counters::get(&counters.packets),
            bytes: Counters::get(&counters.bytes),
            received: Counters::get(&counters.received),
            dropped: Counters::get(&counters.dropped),
            dropped_interface: Counters::get(&counters.dropped_interface),
            lnet_connections: report.connections.len() as u64,
            interval_s: interval as f64 / 1e9,
            peers,
        }
    }
}

/// The row of one peer; intervals starting at or after `complete_before` are not over.
fn row(p: &PeerEntry, report: &Report, interval: i64, complete_before: i64) -> PeerRow {
    let series: Vec<_> = p.peer.timeseries.iter().filter(|r| r.t_ns < complete_before).collect();
    let last_t = complete_before - interval;
    let now = series.last().filter(|r| r.t_ns == last_t);
    let model_now = p.intervals.iter().rev().find(|m| m.t_ns < complete_before);
    let bulk_from = p.bulk_sender();
    let (mut in_flight, mut cwnd) = (None, None);
    for c in report.connections.iter().filter(|c| p.owns(c)) {
        for d in c.directions.iter().filter(|d| d.sender == Some(bulk_from)) {
            if let Some(s) = d.series.iter().find(|s| s.t_ns == last_t) {
                in_flight = max_opt(in_flight, s.bytes_in_flight_max);
                cwnd = max_opt(cwnd, s.cwnd_estimate);
            }
        }
    }
    let start = series.len().saturating_sub(HISTORY);
    // Sparklines over consecutive intervals: an interval without a row moved nothing.
    let first_t = series.get(start).map_or(last_t, |r| r.t_ns);
    let slots = (((last_t - first_t) / interval).max(0) as usize + 1).min(HISTORY);
    let mut tp = vec![0.0; slots];
    let mut rif = vec![0.0; slots];
    for r in &series[start..] {
        let k = ((r.t_ns - first_t) / interval) as usize;
        if k < slots {
            tp[k] = r.read_bytes_per_s + r.write_bytes_per_s;
            rif[k] = r.rpcs_in_flight_mean;
        }
    }
    PeerRow {
        client: p.peer.client_nid.clone(),
        server: p.peer.server_nid.clone(),
        now_bytes_per_s: now.map_or(0.0, |r| r.read_bytes_per_s + r.write_bytes_per_s),
        run_bytes_per_s: p.peer.throughput_bytes_per_s,
        rpcs: p.peer.rpcs,
        rpcs_in_flight: now.map_or(0.0, |r| r.rpcs_in_flight_mean),
        messages_in_flight: now.map_or(0, |r| r.messages_in_flight_max_c2s.max(r.messages_in_flight_max_s2c)),
        credits: p.peer.messages_in_flight.inferred_peer_credits,
        rtt_us: (p.model.inputs.rtt_s > 0.0).then_some(p.model.inputs.rtt_s * 1e6),
        bytes_in_flight: in_flight,
        cwnd,
        retransmits: p.tcp.retransmits,
        limit_now: model_now.filter(|m| m.t_ns == last_t).map(|m| m.binding_limit.as_str()),
        limit_run: limit_name(p.binding_limit),
        throughput_history: tp,
        rif_history: rif,
    }
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

fn limit_name(b: BindingLimit) -> &'static str {
    match b {
        BindingLimit::Bound(l) => l.as_str(),
        BindingLimit::NoBulk => "none",
    }
}

/// The latest view, shared between the analysis thread (which publishes) and the views
/// (terminal, metrics) that read it.
#[derive(Debug, Clone, Default)]
pub struct Board(Arc<Mutex<Arc<LiveView>>>);

impl Board {
    /// Publishes a new view.
    pub fn publish(&self, v: LiveView) {
        if let Ok(mut g) = self.0.lock() {
            *g = Arc::new(v);
        }
    }

    /// The latest view.
    pub fn latest(&self) -> Arc<LiveView> {
        self.0.lock().map(|g| Arc::clone(&g)).unwrap_or_default()
    }
}
