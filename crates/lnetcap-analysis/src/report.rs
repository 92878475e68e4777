//! The analysis result: one owned model that every renderer reads (terminal summary,
//! JSON, tables, HTML). Nothing here computes; `build` fills it.

use std::collections::BTreeMap;

use lnetcap_lnet::pipeline::FrameAccounting;
use lnetcap_model::{Advice, Bound, Limit, ModelInput, ShareLost};
use lnetcap_rpc::tcp::{IntervalRtt, RttReport, TcpPeerReport};
use lnetcap_rpc::{PeerReport, Side};
use serde::Serialize;

/// Schema version of the analyze JSON report (docs/analyze-json.md). 2: `fits.points`
/// are objects (were 5-element arrays).
pub const REPORT_SCHEMA_VERSION: u32 = 2;

/// The verdict of a peer pair: the bound that binds, or no throughput verdict for a pair
/// that moved no bulk data (metadata, pings; see its `rate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingLimit {
    /// The smallest bound.
    Bound(Limit),
    /// No bulk traffic: no throughput verdict, no advice.
    NoBulk,
}

impl BindingLimit {
    /// Every value, as the JSON writes them (the field registry's words).
    pub const ALL: [Self; 7] = [
        Self::Bound(Limit::ALL[0]),
        Self::Bound(Limit::ALL[1]),
        Self::Bound(Limit::ALL[2]),
        Self::Bound(Limit::ALL[3]),
        Self::Bound(Limit::ALL[4]),
        Self::Bound(Limit::ALL[5]),
        Self::NoBulk,
    ];

    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bound(l) => l.as_str(),
            Self::NoBulk => "none (no bulk traffic)",
        }
    }

    /// The bound, when there is one.
    pub fn limit(self) -> Option<Limit> {
        match self {
            Self::Bound(l) => Some(l),
            Self::NoBulk => None,
        }
    }
}

impl Serialize for BindingLimit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for BindingLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One analysed capture.
#[derive(Debug, Serialize)]
pub struct FileReport {
    /// File name as given.
    pub file: String,
    /// The file was read to its end.
    pub complete: bool,
    /// Frame accounting.
    pub frames: FrameAccounting,
    /// Capture time of the first and last frame with LNet traffic (ns).
    pub span_ns: Option<[i64; 2]>,
    /// LNet messages that belong to no RPC, by reason.
    pub unmatched_messages: BTreeMap<&'static str, u64>,
    /// A live capture (`lnetcap live`): the interface, how it was read and what the
    /// kernel dropped. Absent for capture files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveCapture>,
    /// A run stopped by a signal (`"interrupted": true` on the report): the last frame
    /// analysed and its offset. Absent when the file was read to its end or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted_at: Option<ReadPoint>,
    /// Named limits this source reached and what each cost (README "Named limits").
    /// Absent when none was reached.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<LimitHit>,
    /// The interval of this source's time series (its peers' and connections' series and
    /// per-interval models), ns, when coarser than the report's `interval_ns`: a capture
    /// spanning more than `MAX_SERIES_INTERVALS` intervals has them doubled until it fits.
    /// Absent when it is the report's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series_interval_ns: Option<i64>,
}

/// A named limit reached while analysing a source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitHit {
    /// The limit's name in the source (`MAX_OPEN_CONNECTIONS`, ...).
    pub limit: &'static str,
    /// Its value.
    pub value: u64,
    /// Times it acted (connections retired, RPCs evicted, ...).
    pub count: u64,
    /// What it cost the report.
    pub effect: &'static str,
}

/// Where reading stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReadPoint {
    /// The last frame analysed (1-based; 0: none).
    pub frame: u64,
    /// Its byte offset in the (decompressed) capture stream.
    pub offset: u64,
}

/// How a live capture was taken, and what it missed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LiveCapture {
    /// The interface (or, for `--replay`, the file replayed).
    pub interface: String,
    /// The BPF filter.
    pub filter: String,
    /// Bytes kept per packet.
    pub snaplen: u32,
    /// Packets the kernel passed to lnetcap (libpcap's `ps_recv`).
    pub received: u64,
    /// Packets dropped because lnetcap's buffer was full (`ps_drop`): the analysis did
    /// not see them, and says so.
    pub dropped: u64,
    /// Packets the interface or driver dropped (`ps_ifdrop`).
    pub dropped_interface: u64,
    /// Wall-clock seconds the capture ran.
    pub duration_s: f64,
    /// What ended it: `duration`, `signal`, `key`, or `error`.
    pub stopped_by: String,
}

/// A peer pair in the report.
#[derive(Debug, Serialize)]
pub struct PeerEntry {
    /// The capture it comes from.
    pub file: String,
    #[serde(flatten)]
    pub peer: PeerReport,
    /// RTT from TCP (µs).
    pub rtt_us: RttReport,
    /// TCP behaviour.
    pub tcp: TcpPeerReport,
    /// The throughput model.
    pub model: ModelReport,
    /// The smallest bound: `rpc_window`, `lnet_credits`, `tcp_congestion`,
    /// `receive_window`, `server`, `link`; or `none (no bulk traffic)`.
    pub binding_limit: BindingLimit,
    /// What to change.
    pub advice: Vec<Advice>,
    /// The model per interval of the time series (intervals with bulk traffic).
    pub intervals: Vec<IntervalModel>,
    /// Pairs without bulk data: the RPC rate against RIF / (RTT + service).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateReport>,
}

/// The RPC rate model of a pair without bulk data (lnetcap_model::rate).
#[derive(Debug, Clone, Serialize)]
pub struct RateReport {
    /// Its inputs.
    pub inputs: lnetcap_model::rate::RateInput,
    /// Its verdict.
    #[serde(flatten)]
    pub out: lnetcap_model::rate::RateOutput,
}

impl PeerEntry {
    /// Who sends the bulk data: the server for reads, the client for writes (the larger).
    pub fn bulk_sender(&self) -> Side {
        if self.peer.bytes_read >= self.peer.bytes_written {
            Side::Server
        } else {
            Side::Client
        }
    }

    /// Whether a connection of the report is one of this peer pair's.
    pub fn owns(&self, c: &ConnectionEntry) -> bool {
        c.file == self.file && self.peer.connections.iter().any(|pc| pc.id == c.id)
    }
}

/// The model evaluated on one interval.
#[derive(Debug, Clone, Serialize)]
pub struct IntervalModel {
    /// Interval start, ns.
    pub t_ns: i64,
    /// RTT in the interval (`min_us`, `mean_us`), when TCP gave samples.
    pub rtt_us: Option<IntervalRtt>,
    /// RTT the interval's model uses, µs: the peer's median RTT plus the rise of the
    /// interval's smallest RTT over the capture's (a standing queue).
    pub model_rtt_us: f64,
    /// Bulk bytes per second in the interval.
    pub observed_bytes_per_s: f64,
    /// T_rpc with the interval's mean RPCs in flight.
    pub t_rpc_bytes_per_s: f64,
    /// The smallest bound.
    pub t_model_bytes_per_s: f64,
    /// The binding limit of the interval.
    pub binding_limit: Limit,
    /// Congestion-window estimate in the interval, bytes.
    pub cwnd_estimate: Option<u64>,
}

/// The model's numbers for a peer.
#[derive(Debug, Serialize)]
pub struct ModelReport {
    /// T_rpc = RIF × BS / (2 × RTT), bytes/s.
    pub t_rpc_bytes_per_s: f64,
    /// The smallest bound, bytes/s.
    pub t_model_bytes_per_s: f64,
    /// RPCs in flight needed to fill the link (`--link-rate`), or to reach the next bound.
    pub needed_rif: Option<u64>,
    /// Observed / T_model.
    pub efficiency: f64,
    /// Every bound, ascending: limit and bytes/s.
    pub bounds: Vec<Bound>,
    /// The waterfall from the reference (link, else T_rpc) to the observed rate.
    pub shares_lost: Vec<ShareLost>,
    /// The inputs.
    pub inputs: ModelInput,
    /// Best rate seen over a 1 s window (or a third of the active period, if shorter),
    /// bytes/s: the link carries at least this.
    pub best_sustained_bytes_per_s: f64,
    /// Where the link rate comes from: `--link-rate` or `not given`.
    pub link_source: &'static str,
    /// The steady window spans at least 10 round trips (shorter captures are dominated by
    /// TCP slow start and the first RPCs; their verdict is flagged).
    pub steady_state: bool,
}

/// The JSON report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub tool: String,
    /// The run was stopped by a signal: the report covers what was read (see each file's
    /// `interrupted_at`). Absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The time-series interval (`--interval-ms`), ns.
    pub interval_ns: i64,
    pub files: Vec<FileReport>,
    pub peers: Vec<PeerEntry>,
    /// Every TCP connection with LNet traffic.
    pub connections: Vec<ConnectionEntry>,
    /// Fits across the captures (with two or more peers in all).
    pub fits: Option<Fits>,
}

impl Report {
    /// The interval of the time series of the source named `file`, ns: the report's
    /// `interval_ns` unless that source's series were coarsened (`series_interval_ns`).
    pub fn interval_of(&self, file: &str) -> i64 {
        self.files.iter().find(|f| f.file == file).and_then(|f| f.series_interval_ns).unwrap_or(self.interval_ns)
    }
}

/// Models fitted across captures of one workload (seeds 002 and 003).
#[derive(Debug, Serialize)]
pub struct Fits {
    /// The peers fitted.
    pub points: Vec<FitPoint>,
    /// Seed 002: Θ(τ) = B / τ; B in bytes, and the largest relative error.
    pub buffer_bytes: Option<f64>,
    /// Largest relative error of the B / τ fit.
    pub buffer_fit_error: Option<f64>,
    /// Seed 003 equation 4's k against the first point, and its largest relative error.
    pub k: Option<f64>,
    /// Largest relative error of the k fit.
    pub k_fit_error: Option<f64>,
}

/// One peer pair in the fits.
#[derive(Debug, Clone, Serialize)]
pub struct FitPoint {
    /// The capture.
    pub file: String,
    /// The model's RTT, s.
    pub rtt_s: f64,
    /// Bulk bytes per RPC.
    pub rpc_bytes: f64,
    /// RPCs in flight.
    pub rif: f64,
    /// Observed throughput, bytes/s.
    pub throughput_bytes_per_s: f64,
}

/// One TCP connection with LNet traffic, from the decode accounting and the TCP analysis.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectionEntry {
    /// The capture it comes from.
    pub file: String,
    /// Connection id (order of first packet, as in `decode`).
    pub id: u32,
    /// Client and server NIDs of the peer pair it belongs to (none when no RPC used it).
    pub client_nid: Option<String>,
    /// Server NID.
    pub server_nid: Option<String>,
    /// Type from the active side's point of view, and whether it was inferred.
    pub conn_type: Option<&'static str>,
    /// The type was inferred from the traffic.
    pub type_inferred: bool,
    /// `active ip:port`, `passive ip:port`.
    pub active: String,
    /// Passive endpoint.
    pub passive: String,
    /// How the active side was decided (`syn`, `acceptor_port`, ...).
    pub active_rule: &'static str,
    /// First and last frame.
    pub first_frame: u64,
    /// Last frame.
    pub last_frame: u64,
    /// [from the active side, from the passive side].
    pub directions: [DirectionEntry; 2],
}

/// One direction of a connection.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionEntry {
    /// `client` or `server` (the sender), when the connection belongs to a peer pair.
    pub sender: Option<Side>,
    /// Decode accounting of the stream (as `decode`'s summary; `tcp` is
    /// `src:port->dst:port`).
    pub stream: lnetcap_lnet::pipeline::DirSummary,
    /// TCP behaviour of the direction's data.
    pub tcp_perf: DirectionTcp,
    /// Per series interval (in the tables, not the JSON).
    #[serde(skip)]
    pub series: Vec<DirectionInterval>,
}

/// TCP behaviour of one direction's data.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DirectionTcp {
    /// Payload bytes (retransmissions included) and segments.
    pub payload_bytes: u64,
    /// Payload segments.
    pub data_segments: u64,
    /// Retransmitted segments, and by cause.
    pub retransmits: u64,
    /// ... after ≥ 3 duplicate ACKs.
    pub retransmits_fast: u64,
    /// ... after a silence (timeout).
    pub retransmits_timeout: u64,
    /// ... of data already acknowledged.
    pub retransmits_spurious: u64,
    /// Segments that filled a hole the capture had not seen.
    pub out_of_order: u64,
    /// Duplicate ACKs from the receiver.
    pub dup_acks: u64,
    /// Zero-window ACKs from the receiver.
    pub zero_windows: u64,
    /// Loop capture → receiver → capture, µs: min, median, p95.
    pub loop_min_us: Option<f64>,
    /// Median loop.
    pub loop_p50_us: Option<f64>,
    /// 95th percentile loop.
    pub loop_p95_us: Option<f64>,
    /// Loop samples.
    pub loop_samples: u64,
    /// Largest bytes in flight (sender's view).
    pub bytes_in_flight_max: u64,
    /// Largest congestion-window estimate.
    pub cwnd_estimate_max: u64,
    /// Receiver's window scale (from its SYN), and whether it was not seen.
    pub rcv_wscale: Option<u8>,
    /// The scale was not seen.
    pub wscale_inferred: bool,
    /// Idle time (nothing outstanding, nothing sent for more than a loop), ms.
    pub idle_ms: f64,
}

/// One direction in one series interval.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct DirectionInterval {
    /// Interval start, ns.
    pub t_ns: i64,
    /// Payload bytes per second (retransmissions included).
    pub payload_bytes_per_s: f64,
    /// Retransmitted segments.
    pub retransmits: u32,
    /// Largest bytes in flight outside loss recovery (None: no ACK in the interval).
    pub bytes_in_flight_max: Option<u64>,
    /// Congestion-window estimate.
    pub cwnd_estimate: Option<u64>,
    /// Last receive window advertised.
    pub rwnd: Option<u64>,
    /// Smallest and mean loop, µs.
    pub loop_min_us: Option<f64>,
    /// Mean loop.
    pub loop_mean_us: Option<f64>,
}
