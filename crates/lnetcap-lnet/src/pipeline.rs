//! The decode pipeline: packet records → TCP streams → socklnd framing → [`LnetEvent`]s,
//! with the accounting that says where every frame and every stream byte went.

use std::collections::BTreeMap;

use lnetcap_capture::{NotTcp, Packet};
use lnetcap_tcp::limits::MAX_SERIES_INTERVALS;
use lnetcap_tcp::{ConnId, Connection, Dir, FlowTable, GapReason, Stamp, StreamEvent, StreamSink, SweepClock, Verdict};
use serde::Serialize;

use crate::framer::{looks_like_lnet, Framer, FramerStats};
use crate::limits::{MAX_CLOCK_BACKWARD_NS, MAX_CLOCK_FORWARD_NS, MAX_LISTED_SETUP_ONLY};
use crate::message::{Body, LnetEvent, Proto};
use crate::wire::conn_type;

mod split;
pub use split::Front;

/// Decoder options.
#[derive(Debug, Clone)]
pub struct DecodeConfig {
    /// TCP ports of LNet acceptors (988 by default).
    pub ports: Vec<u16>,
    /// Also follow connections on other ports whose first bytes look like socklnd.
    pub detect: bool,
    /// Interval of the per-connection RTT series, ns (analyze's `--interval-ms`).
    pub series_interval_ns: i64,
    /// Analyse TCP behaviour per connection (RTT, bytes in flight, retransmissions) for
    /// `Pipeline::tcp_perf`; `decode` turns it off.
    pub tcp_perf: bool,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self {
            ports: vec![crate::wire::consts::ACCEPTOR_PORT],
            detect: true,
            series_interval_ns: lnetcap_tcp::perf::DEFAULT_SERIES_NS,
            tcp_perf: true,
        }
    }
}

/// Whether a connection carries LNet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// One end is a configured LNet port.
    LnetPort,
    /// Recognised by content.
    LnetContent,
    /// Not yet decided (no payload seen).
    Unknown,
    /// Not LNet.
    NotLnet,
}

impl Class {
    /// True for LNet connections.
    pub fn is_lnet(self) -> bool {
        matches!(self, Self::LnetPort | Self::LnetContent)
    }
}

#[derive(Debug, Default, Clone)]
struct DirAcct {
    anomalies: BTreeMap<&'static str, u64>,
    /// Stream gaps by reason (`GAP_REASONS` order): a header-only capture has one per
    /// data segment, too many for a map keyed by name.
    gaps: [u64; 3],
}

/// Every gap reason, in the order of `DirAcct::gaps`.
const GAP_REASONS: [GapReason; 3] = [GapReason::Snaplen, GapReason::CaptureLoss, GapReason::BufferLimit];

impl DirAcct {
    fn gap(&mut self, reason: GapReason) {
        let i = match reason {
            GapReason::Snaplen => 0,
            GapReason::CaptureLoss => 1,
            GapReason::BufferLimit => 2,
        };
        self.gaps[i] += 1;
    }

    /// The gaps by reason's name, the reasons that occurred.
    fn gaps_by_name(&self) -> BTreeMap<&'static str, u64> {
        GAP_REASONS.iter().zip(self.gaps).filter(|(_, n)| *n > 0).map(|(r, n)| (r.as_str(), n)).collect()
    }
}

impl ConnState {
    /// Carried nothing but connection setup (connreq, HELLO): no other message, nothing
    /// skipped, nothing in progress.
    fn setup_only(&self) -> bool {
        let clean = |f: &Option<Box<Framer>>| {
            f.as_deref()
                .is_none_or(|f| f.stats.bytes_skipped == 0 && f.stats.desyncs == 0 && f.in_progress_bytes() == 0)
        };
        self.other_messages == 0 && self.framers.iter().all(clean)
    }
}

struct ConnState {
    class: Class,
    framers: [Option<Box<Framer>>; 2],
    /// Messages that set a connection up (connreq, HELLO) and all others.
    setup_messages: u32,
    other_messages: u32,
    acct: [DirAcct; 2],
    hello_ctype: [Option<u32>; 2],
    frames_data: u64,
    frames_control: u64,
}

/// Connections the flow table retired that only set up (or carried no LNet), folded
/// into counts instead of a record each.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct FoldedConnections {
    /// Connections folded.
    pub connections: u64,
    /// Their frames with payload.
    pub frames_data: u64,
    /// Their frames without payload.
    pub frames_control: u64,
}

impl FoldedConnections {
    /// None folded.
    pub fn is_empty(&self) -> bool {
        self.connections == 0
    }

    fn add(&mut self, st: &ConnState) {
        self.connections += 1;
        self.frames_data += st.frames_data;
        self.frames_control += st.frames_control;
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The stream sink that frames LNet traffic.
pub struct Decoder {
    cfg: DecodeConfig,
    /// Per connection id; `None` once folded.
    conns: Vec<Option<Box<ConnState>>>,
    out: Vec<LnetEvent>,
    /// Folded LNet connections (others count as other traffic).
    folded: FoldedConnections,
    /// Frames of folded connections that were not LNet.
    folded_other_frames: u64,
    /// Ids of the folded connections, in the order they were folded (4 bytes each), so
    /// that later layers can forget them too.
    folded_ids: Vec<u32>,
}

impl Decoder {
    fn new(cfg: DecodeConfig) -> Self {
        Self {
            cfg,
            conns: Vec::new(),
            out: Vec::new(),
            folded: FoldedConnections::default(),
            folded_other_frames: 0,
            folded_ids: Vec::new(),
        }
    }

    fn state(&mut self, id: ConnId) -> &mut ConnState {
        match self.conns.get_mut(id.0 as usize) {
            Some(Some(st)) => st,
            _ => unreachable!("connection {} is not followed", id.0),
        }
    }
}

fn anomaly_name(a: &lnetcap_tcp::Anomaly) -> &'static str {
    match a {
        lnetcap_tcp::Anomaly::OverlapConflict { .. } => "overlap_conflict",
        lnetcap_tcp::Anomaly::BeforeStreamStart { .. } => "before_stream_start",
        lnetcap_tcp::Anomaly::DataAfterFin { .. } => "data_after_fin",
        lnetcap_tcp::Anomaly::HistoryUnreadable { .. } => "history_unreadable",
    }
}

impl StreamSink for Decoder {
    fn on_open(&mut self, conn: &Connection) -> Verdict {
        let port = conn.endpoints.iter().any(|e| self.cfg.ports.contains(&e.port));
        let class = if port {
            Class::LnetPort
        } else if self.cfg.detect {
            Class::Unknown
        } else {
            Class::NotLnet
        };
        debug_assert_eq!(conn.id.0 as usize, self.conns.len());
        self.conns.push(Some(Box::new(ConnState {
            class,
            framers: [None, None],
            setup_messages: 0,
            other_messages: 0,
            acct: Default::default(),
            hello_ctype: [None, None],
            frames_data: 0,
            frames_control: 0,
        })));
        if class == Class::NotLnet {
            Verdict::Ignore
        } else {
            Verdict::Follow
        }
    }

    fn on_event(&mut self, conn: &Connection, dir: Dir, stamp: Stamp, ev: StreamEvent<'_>) -> Verdict {
        let Some(Some(st)) = self.conns.get_mut(conn.id.0 as usize) else { return Verdict::Ignore };
        if st.class == Class::Unknown {
            if let StreamEvent::Data { offset, bytes, .. } = &ev {
                let at_start = *offset == 0 && conn.syn_seen[dir.index()];
                st.class = if looks_like_lnet(bytes, at_start) { Class::LnetContent } else { Class::NotLnet };
            }
        }
        if st.class == Class::NotLnet {
            return Verdict::Ignore;
        }
        let d = dir.index();
        if st.framers[d].is_none() {
            let mut f = Framer::new(conn.id, dir, conn.syn_seen[d]);
            if let Some(p) = st.framers[1 - d].as_deref().and_then(Framer::proto) {
                f.hint_proto(p);
            }
            st.framers[d] = Some(Box::new(f));
        }
        let Some(framer) = st.framers[d].as_mut() else {
            return Verdict::Follow;
        };
        let before = self.out.len();
        // A gap, of its own or the snaplen cut a data event carries after its bytes.
        let cut = ev.cut_gap().map(|(offset, len)| (offset, len, GapReason::Snaplen));
        let gap = match ev {
            StreamEvent::Data { offset, bytes, .. } => {
                framer.on_data(offset, bytes, stamp, &mut self.out);
                cut
            }
            StreamEvent::Gap { offset, len, reason } => Some((offset, len, reason)),
            StreamEvent::Fin { offset } => {
                framer.end(offset, &mut self.out);
                None
            }
            StreamEvent::Rst => None,
            StreamEvent::Anomaly(a) => {
                *st.acct[d].anomalies.entry(anomaly_name(&a)).or_default() += 1;
                None
            }
        };
        if let Some((offset, len, reason)) = gap {
            st.acct[d].gap(reason);
            framer.on_gap(offset, len, stamp, &mut self.out);
        }
        // A HELLO fixes the framing of the other direction too when it has none yet.
        for ev in &self.out[before..] {
            if let LnetEvent::Message(m) = ev {
                if matches!(m.body, Body::Hello(_) | Body::Connreq(_)) {
                    st.setup_messages += 1;
                } else {
                    st.other_messages += 1;
                }
                if let Body::Hello(h) = &m.body {
                    st.hello_ctype[d] = Some(h.conn_type);
                    if let (Some(p), Some(other)) = (Proto::from_version(h.version), st.framers[1 - d].as_mut()) {
                        other.hint_proto(p);
                    }
                }
            }
        }
        Verdict::Follow
    }

    fn on_retire(&mut self, conn: &Connection) -> bool {
        let Some(Some(st)) = self.conns.get(conn.id.0 as usize) else { return true };
        if st.class.is_lnet() || st.class == Class::Unknown {
            if !st.setup_only() {
                // Kept: its record stays, its framers' buffers go.
                if let Some(Some(st)) = self.conns.get_mut(conn.id.0 as usize) {
                    for f in st.framers.iter_mut().flatten() {
                        f.release();
                    }
                }
                return false;
            }
            self.folded.add(st);
        } else {
            self.folded_other_frames += st.frames_data + st.frames_control;
        }
        self.conns[conn.id.0 as usize] = None;
        self.folded_ids.push(conn.id.0);
        true
    }
}

/// Frame accounting: every frame lands in exactly one category.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct FrameAccounting {
    /// Frames read.
    pub frames: u64,
    /// TCP segments with payload on LNet connections.
    pub lnet_data: u64,
    /// TCP segments without payload (ACKs, SYN, FIN, RST) on LNet connections.
    pub tcp_control: u64,
    /// Frames of other traffic (not IP, not TCP, TCP that is not LNet).
    pub other_traffic: u64,
    /// Frames that could not be decoded, by reason.
    pub undecodable: BTreeMap<String, u64>,
    /// Times the capture clock stepped (a timestamp more than `MAX_CLOCK_BACKWARD_NS`
    /// before, or `MAX_CLOCK_FORWARD_NS` after, the frame before it): later frames were
    /// shifted to carry on from the frame before the step.
    #[serde(skip_serializing_if = "is_zero")]
    pub clock_steps: u64,
}

impl FrameAccounting {
    /// Sum of all categories (equals `frames`).
    pub fn total(&self) -> u64 {
        self.lnet_data + self.tcp_control + self.other_traffic + self.undecodable.values().sum::<u64>()
    }
}

/// Per-direction accounting of one connection.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct DirSummary {
    /// `src:port->dst:port`.
    pub tcp: String,
    /// socklnd version framing this direction.
    pub proto: Option<u8>,
    /// Connection type the sender named in its HELLO.
    pub hello_conn_type: Option<&'static str>,
    /// Segments (any flags).
    pub segments: u64,
    /// Payload bytes on the wire, all copies (sum of segment payload lengths).
    pub bytes_on_wire: u64,
    /// Stream length reached (bytes in stream order, first copies).
    pub stream_bytes: u64,
    /// Stream bytes captured.
    pub bytes_captured: u64,
    /// Stream bytes cut by the snaplen.
    pub bytes_snaplen: u64,
    /// Stream bytes no captured segment carried.
    pub bytes_lost: u64,
    /// Bytes of repeated copies (retransmissions, overlaps).
    pub bytes_retransmitted: u64,
    /// Bytes outside the stream (before the first byte seen, after the FIN).
    pub bytes_outside_stream: u64,
    /// Messages decoded.
    pub messages: u64,
    /// Stream bytes inside decoded messages.
    pub bytes_in_messages: u64,
    /// Stream bytes skipped while framing was lost (not decoded, not inferred).
    pub bytes_skipped: u64,
    /// Messages inferred in skipped runs (not decoded; see `Message::inferred`).
    pub messages_inferred: u64,
    /// Stream bytes of the inferred messages.
    pub bytes_inferred: u64,
    /// Stream bytes of a message cut by the end of the capture.
    pub bytes_in_partial_message: u64,
    /// Messages whose header was only partly captured.
    pub headers_partial: u64,
    /// Headers lost to uncaptured bytes (framing lost).
    pub headers_lost: u64,
    /// Framing lost.
    pub desyncs: u64,
    /// Framing found again.
    pub resyncs: u64,
    /// Headers that did not parse as the expected structure.
    pub invalid_headers: u64,
    /// Stream gaps by reason.
    pub gaps: BTreeMap<&'static str, u64>,
    /// Stream anomalies by kind.
    pub anomalies: BTreeMap<&'static str, u64>,
}

/// Accounting of one connection.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ConnSummary {
    /// Connection id (order of first packet).
    pub id: u32,
    /// LNet or not, and how it was decided.
    pub class: Class,
    /// Active side's endpoint.
    pub active: String,
    /// Passive side's endpoint.
    pub passive: String,
    /// How the active side was determined.
    pub active_rule: &'static str,
    /// First frame.
    pub first_frame: u64,
    /// Last frame.
    pub last_frame: u64,
    /// Frames with payload.
    pub frames_data: u64,
    /// Frames without payload.
    pub frames_control: u64,
    /// From the active side, then from the passive side.
    pub dirs: [DirSummary; 2],
}

/// The whole accounting of a decode run.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DecodeSummary {
    /// Frames by category.
    pub frames: FrameAccounting,
    /// LNet connections (those not LNet are counted in `frames.other_traffic` only).
    pub connections: Vec<ConnSummary>,
    /// Messages by kind over all connections.
    pub messages_by_kind: BTreeMap<&'static str, u64>,
    /// Connections retired to stay within `lnetcap_tcp::limits::MAX_OPEN_CONNECTIONS`.
    #[serde(skip_serializing_if = "is_zero")]
    pub retired: u64,
    /// Connections that only set up, counted here instead of in `connections` (retired
    /// ones, and those past `limits::MAX_LISTED_SETUP_ONLY`).
    #[serde(skip_serializing_if = "FoldedConnections::is_empty")]
    pub folded: FoldedConnections,
}

/// Messages decoded per kind: a handful of names, each a `&'static str` of one table,
/// found by address before by text (a B-tree of the names compared their bytes for
/// every message).
#[derive(Debug, Default)]
pub(crate) struct KindCounts(Vec<(&'static str, u64)>);

impl KindCounts {
    pub(crate) fn add(&mut self, kind: &'static str, n: u64) {
        let at = self
            .0
            .iter()
            .position(|(k, _)| std::ptr::eq(*k, kind))
            .or_else(|| self.0.iter().position(|(k, _)| *k == kind));
        match at {
            Some(i) => self.0[i].1 += n,
            None => self.0.push((kind, n)),
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.0.iter().copied()
    }

    fn map(&self) -> BTreeMap<&'static str, u64> {
        self.iter().collect()
    }
}

/// Packet records in, LNet events out.
pub struct Pipeline {
    table: FlowTable,
    dec: Decoder,
    other_frames: u64,
    undecodable: BTreeMap<String, u64>,
    frames: u64,
    last: Stamp,
    kinds: KindCounts,
    /// Added to every timestamp since the last clock step (see `FrameAccounting::clock_steps`).
    clock_offset: i64,
    clock_steps: u64,
    /// The latest step, for the caller to report: (frame, raw timestamp, jump, shift).
    clock_step: Option<(u64, i64, i64, i64)>,
    /// Earliest and latest timestamp seen (after clock steps), for the series' span.
    ts_range: Option<(i64, i64)>,
    /// (interval, end): with the series at that interval, a timestamp from the range's
    /// start up to (not including) this end leaves the span within bounds.
    series_room: (i64, i64),
    /// Times the series interval was doubled (`MAX_SERIES_INTERVALS`).
    series_doublings: u32,
    /// When the flow table ages waiting holes: on the frame (any frame) at or after it.
    sweeps: SweepClock,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline").field("frames", &self.frames).finish_non_exhaustive()
    }
}

/// Short, stable reason text for a frame that is not a decodable TCP segment.
fn undecodable_reason(e: &NotTcp) -> String {
    match e {
        NotTcp::IpFragment => "ip_fragment".into(),
        NotTcp::UnknownLinkType { linktype } => format!("unsupported_linktype_{linktype}"),
        NotTcp::Malformed { layer, .. } => format!("malformed_{}", layer.replace(' ', "_")),
        NotTcp::NotIp { .. } | NotTcp::OtherIpProtocol { .. } => "other".into(),
    }
}

impl Pipeline {
    /// A pipeline with the given options.
    pub fn new(cfg: DecodeConfig) -> Self {
        Self {
            table: {
                // Sweeps by frame, told here: a parallel run's reader keeps the same clock.
                let t = FlowTable::new(&cfg.ports).with_series_interval(cfg.series_interval_ns).with_told_sweeps();
                if cfg.tcp_perf {
                    t
                } else {
                    t.without_perf()
                }
            },
            dec: Decoder::new(cfg),
            other_frames: 0,
            undecodable: BTreeMap::new(),
            frames: 0,
            last: Stamp::default(),
            kinds: KindCounts::default(),
            clock_offset: 0,
            clock_steps: 0,
            clock_step: None,
            ts_range: None,
            series_room: (0, i64::MIN),
            series_doublings: 0,
            sweeps: SweepClock::default(),
        }
    }

    /// The options it runs with.
    pub fn config(&self) -> &DecodeConfig {
        &self.dec.cfg
    }

    /// Processes one packet record; events are appended to `out`. Returns the reason when
    /// the frame could not be decoded (the caller may report it with the frame number).
    pub fn push(&mut self, pkt: &Packet<'_>, out: &mut Vec<LnetEvent>) -> Option<NotTcp> {
        let (stamp, sweep) = self.take_frame(pkt);
        if sweep {
            self.table.sweep_at(stamp.ts_ns, &mut self.dec);
        }
        let res = self.decode_and_process(pkt, stamp);
        self.drain(out);
        res
    }

    /// What every frame does first, here and in a parallel run's reader: counted, its
    /// clock corrected, the series bound kept; returns its stamp and whether the flow
    /// tables sweep before it. Inlined into both callers (a call, its saved registers and
    /// its result through memory were a fifth of its instructions).
    #[inline(always)]
    fn take_frame(&mut self, pkt: &Packet<'_>) -> (Stamp, bool) {
        self.frames += 1;
        let stamp = Stamp { frame: pkt.frame, ts_ns: self.clock(pkt.frame, pkt.ts_ns) };
        self.last = stamp;
        self.bound_series(stamp.ts_ns);
        (stamp, self.sweeps.tick(stamp.ts_ns))
    }

    /// The timestamp the analysis uses for a frame: a clock that steps (a timestamp far
    /// before or after the frame before it, a lie or a clock set by hand) is shifted so
    /// that the capture carries on from the frame before; time series then never span
    /// the years between.
    fn clock(&mut self, frame: u64, raw: i64) -> i64 {
        let ts = raw.saturating_add(self.clock_offset);
        if self.frames > 1 {
            let d = ts.saturating_sub(self.last.ts_ns);
            if !(-MAX_CLOCK_BACKWARD_NS..=MAX_CLOCK_FORWARD_NS).contains(&d) {
                self.clock_offset = self.last.ts_ns.saturating_sub(raw);
                self.clock_steps += 1;
                self.clock_step = Some((frame, raw, d, self.clock_offset));
                return self.last.ts_ns;
            }
        }
        ts
    }

    /// Keeps every time series within `MAX_SERIES_INTERVALS` intervals: when the capture's
    /// span reaches that many, the interval doubles (as often as needed) and the series
    /// kept so far are merged into the coarser buckets.
    #[inline(always)]
    fn bound_series(&mut self, ts: i64) {
        // The usual frame: no earlier than the first, within the room the interval leaves
        // (no multiplication, no saturation checks).
        if let Some((lo, hi)) = &mut self.ts_range {
            if ts >= *lo && ts < self.series_room.1 && self.series_room.0 == self.table.series_interval() {
                *hi = (*hi).max(ts);
                return;
            }
        }
        self.bound_series_slow(ts);
    }

    /// [`Pipeline::bound_series`] past its usual frame: the first frame, one earlier than
    /// the first, or one beyond the room the interval leaves.
    #[inline(never)]
    fn bound_series_slow(&mut self, ts: i64) {
        let mut ns = self.table.series_interval();
        let (lo, hi) = self.ts_range.map_or((ts, ts), |(lo, hi)| (lo.min(ts), hi.max(ts)));
        self.ts_range = Some((lo, hi));
        let span = hi.saturating_sub(lo);
        if span >= ns.saturating_mul(MAX_SERIES_INTERVALS) {
            while span / ns >= MAX_SERIES_INTERVALS {
                ns = ns.saturating_mul(2);
                self.series_doublings += 1;
            }
            self.table.coarsen_series(ns);
        }
        // From `lo`, a timestamp `t` keeps the span under ns * MAX while t - lo < ns * MAX
        // (neither side overflows: see the tests).
        self.series_room = (ns, lo.saturating_add(ns.saturating_mul(MAX_SERIES_INTERVALS)));
    }

    /// The interval of the time series, ns: the one asked for, doubled as often as the
    /// capture's span required (`series_doublings`).
    pub fn series_interval_ns(&self) -> i64 {
        self.table.series_interval()
    }

    /// Times the series interval was doubled to stay within `MAX_SERIES_INTERVALS`.
    pub fn series_doublings(&self) -> u32 {
        self.series_doublings
    }

    /// The latest clock step since asked: (frame, its raw timestamp, its jump from the
    /// frame before, the shift applied from it on), for a notice.
    #[inline]
    pub fn take_clock_step(&mut self) -> Option<(u64, i64, i64, i64)> {
        self.clock_step.take()
    }

    /// Whether a clock step waits to be taken ([`Pipeline::take_clock_step`]).
    #[inline]
    pub fn clock_stepped(&self) -> bool {
        self.clock_step.is_some()
    }

    /// Counts a frame the capture reader could not parse (a malformed record).
    pub fn count_unreadable_frame(&mut self) {
        self.frames += 1;
        *self.undecodable.entry("malformed_record".into()).or_default() += 1;
    }

    fn drain(&mut self, out: &mut Vec<LnetEvent>) {
        // Most packets finish no message.
        if self.dec.out.is_empty() {
            return;
        }
        for ev in &self.dec.out {
            if let LnetEvent::Message(m) = ev {
                self.kinds.add(m.kind(), 1);
            }
        }
        out.append(&mut self.dec.out);
    }

    /// End of input: flushes all streams.
    pub fn finish(&mut self, out: &mut Vec<LnetEvent>) {
        self.table.finish(self.last, &mut self.dec);
        self.drain(out);
    }

    /// Connection description.
    pub fn connection(&self, id: ConnId) -> Option<&Connection> {
        self.table.connection(id)
    }

    /// TCP behaviour of a connection's two directions.
    pub fn tcp_perf(&self, id: ConnId) -> Option<[&lnetcap_tcp::perf::DirPerf; 2]> {
        self.table.perf(id)
    }

    /// The connection type named in the HELLO of the given direction, if captured.
    pub fn hello_conn_type(&self, id: ConnId, dir: Dir) -> Option<u32> {
        self.dec.conns.get(id.0 as usize).and_then(|c| c.as_ref()?.hello_ctype[dir.index()])
    }

    /// Whether any connection carried LNet traffic so far (cheaper than `summary`).
    pub fn has_lnet_connections(&self) -> bool {
        self.dec.folded.connections > 0 || self.dec.conns.iter().flatten().any(|st| st.class.is_lnet())
    }

    /// Connections folded after the flow table retired them, in order: a later layer
    /// that keeps state per connection forgets `folded_connections()[seen..]`.
    pub fn folded_connections(&self) -> &[u32] {
        &self.dec.folded_ids
    }

    /// Frames read so far.
    pub fn frames_seen(&self) -> u64 {
        self.frames
    }

    /// The accounting so far.
    pub fn summary(&self) -> DecodeSummary {
        let folded = &self.dec.folded;
        let mut frames = FrameAccounting {
            frames: self.frames,
            clock_steps: self.clock_steps,
            other_traffic: self.other_frames + self.dec.folded_other_frames,
            lnet_data: folded.frames_data,
            tcp_control: folded.frames_control,
            undecodable: self.undecodable.clone(),
        };
        let mut connections = Vec::new();
        let mut folded = self.dec.folded.clone();
        let mut setup_listed = 0usize;
        for (i, st) in self.dec.conns.iter().enumerate() {
            let (Some(st), Some(conn)) = (st, self.table.connection(ConnId(i as u32))) else { continue };
            if st.class.is_lnet() && st.setup_only() {
                setup_listed += 1;
                if setup_listed > MAX_LISTED_SETUP_ONLY {
                    folded.add(st);
                    frames.lnet_data += st.frames_data;
                    frames.tcp_control += st.frames_control;
                    continue;
                }
            }
            if !st.class.is_lnet() {
                frames.other_traffic += st.frames_data + st.frames_control;
                continue;
            }
            frames.lnet_data += st.frames_data;
            frames.tcp_control += st.frames_control;
            let dirs = [Dir::FromActive, Dir::FromPassive].map(|dir| {
                let d = dir.index();
                let h = self.table.half_stats(conn.id, dir).cloned().unwrap_or_default();
                let fs = st.framers[d].as_deref().map(|f| f.stats.clone()).unwrap_or_default();
                let FramerStats {
                    messages,
                    headers_partial,
                    headers_lost,
                    desyncs,
                    resyncs,
                    bytes_skipped,
                    bytes_in_messages,
                    invalid_headers,
                    messages_inferred,
                    bytes_inferred,
                    ..
                } = fs;
                let partial = st.framers[d].as_deref().map_or(0, Framer::in_progress_bytes);
                DirSummary {
                    tcp: conn.tuple(dir),
                    proto: st.framers[d].as_deref().and_then(Framer::proto).map(Proto::version),
                    hello_conn_type: st.hello_ctype[d].map(conn_type::name),
                    segments: h.segments,
                    bytes_on_wire: h.bytes_delivered
                        + h.bytes_snaplen
                        + h.bytes_retransmitted
                        + h.bytes_before_start
                        + h.bytes_after_fin,
                    stream_bytes: h.bytes_delivered + h.bytes_snaplen + h.bytes_lost,
                    bytes_captured: h.bytes_delivered,
                    bytes_snaplen: h.bytes_snaplen,
                    bytes_lost: h.bytes_lost,
                    bytes_retransmitted: h.bytes_retransmitted,
                    bytes_outside_stream: h.bytes_before_start + h.bytes_after_fin,
                    messages,
                    bytes_in_messages,
                    bytes_skipped,
                    messages_inferred,
                    bytes_inferred,
                    bytes_in_partial_message: partial,
                    headers_partial,
                    headers_lost,
                    desyncs,
                    resyncs,
                    invalid_headers,
                    gaps: st.acct[d].gaps_by_name(),
                    anomalies: st.acct[d].anomalies.clone(),
                }
            });
            connections.push(ConnSummary {
                id: conn.id.0,
                class: st.class,
                active: conn.endpoints[0].to_string(),
                passive: conn.endpoints[1].to_string(),
                active_rule: match conn.active_rule {
                    lnetcap_tcp::ActiveRule::Handshake => "handshake",
                    lnetcap_tcp::ActiveRule::AcceptorPort => "acceptor_port",
                    lnetcap_tcp::ActiveRule::FirstPacket => "first_packet",
                },
                first_frame: conn.first.frame,
                last_frame: conn.last.frame,
                frames_data: st.frames_data,
                frames_control: st.frames_control,
                dirs,
            });
        }
        DecodeSummary {
            frames,
            connections,
            messages_by_kind: self.kinds.map(),
            retired: self.table.retirements().retired,
            folded,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn test_kind_counts_one_name_at_two_addresses() {
        // The same text at another address (not the name table's) counts with it.
        let elsewhere: &'static str = Box::leak(String::from("PUT").into_boxed_str());
        let mut k = KindCounts::default();
        k.add(crate::wire::lnet_type_name(crate::wire::consts::LNET_PUT), 1);
        k.add("ACK", 2);
        k.add(elsewhere, 3);
        assert_eq!(k.map(), BTreeMap::from([("ACK", 2), ("PUT", 4)]));
    }

    /// The series bound as first written: a range, a multiplication and saturation
    /// checks on every frame. Returns (interval, doublings) after each timestamp.
    fn reference(ns0: i64, ts: &[i64]) -> Vec<(i64, u32)> {
        let (mut range, mut ns, mut doublings) = (None::<(i64, i64)>, ns0, 0u32);
        let mut out = Vec::new();
        for &t in ts {
            let (lo, hi) = range.map_or((t, t), |(lo, hi): (i64, i64)| (lo.min(t), hi.max(t)));
            range = Some((lo, hi));
            let span = hi.saturating_sub(lo);
            if span >= ns.saturating_mul(MAX_SERIES_INTERVALS) {
                while span / ns >= MAX_SERIES_INTERVALS {
                    ns = ns.saturating_mul(2);
                    doublings += 1;
                }
            }
            out.push((ns, doublings));
        }
        out
    }

    /// Timestamps that creep forward, step back a little, jump by years, or sit at the
    /// ends of the range.
    fn stamps() -> impl Strategy<Value = Vec<i64>> {
        let step = prop_oneof![
            4 => 0i64..2_000_000,
            1 => -1_000_000i64..0,
            1 => 0i64..(1i64 << 50),
            1 => any::<i64>(),
        ];
        (any::<i64>(), prop::collection::vec(step, 1..300)).prop_map(|(start, steps)| {
            let mut t = start;
            steps
                .into_iter()
                .map(|s| {
                    t = if (-(1 << 52)..=1 << 52).contains(&s) { t.saturating_add(s) } else { s };
                    t
                })
                .collect()
        })
    }

    #[test]
    fn series_bound_at_the_edge_of_the_room() {
        let mut p = Pipeline::new(DecodeConfig { series_interval_ns: 1000, ..DecodeConfig::default() });
        let ns = p.series_interval_ns();
        let room = ns * MAX_SERIES_INTERVALS;
        let ts = [5, 5 + room - 1, 5 + room, 4, i64::MAX, i64::MIN];
        let want = reference(ns, &ts);
        assert_eq!(want[1], (ns, 0), "one below the room: no doubling");
        assert_eq!(want[2], (2 * ns, 1), "at the room: doubled");
        for (i, &t) in ts.iter().enumerate() {
            p.bound_series(t);
            assert_eq!((p.series_interval_ns(), p.series_doublings()), want[i], "frame {i}");
        }
    }

    proptest! {
        /// The fast path (a timestamp within the room the interval leaves) changes
        /// nothing: the interval and the doublings follow the reference frame by frame.
        #[test]
        fn series_bound_matches_the_reference(ns0 in prop_oneof![Just(1i64), 1i64..1_000_000_000, Just(i64::MAX / 3)], ts in stamps()) {
            let mut p = Pipeline::new(DecodeConfig { series_interval_ns: ns0, ..DecodeConfig::default() });
            let ns0 = p.series_interval_ns();
            let want = reference(ns0, &ts);
            for (i, &t) in ts.iter().enumerate() {
                p.bound_series(t);
                prop_assert_eq!((p.series_interval_ns(), p.series_doublings()), want[i], "frame {}", i);
            }
        }
    }
}
