//! Sources in, a [`Report`] out.

use lnetcap_lnet::message::Message;
use lnetcap_lnet::pipeline::{DecodeConfig, Pipeline};
use lnetcap_lnet::{FramingEvent, LnetEvent};
use lnetcap_rpc::{RpcConfig, RpcRecord, Tracker};
use lnetcap_tcp::Connection;

use crate::build::{connection_entries, fits, peer_entry};
use crate::defaults;
use crate::drive::{drive_piece, Observer};
use crate::report::{FileReport, Report, REPORT_SCHEMA_VERSION};
use crate::source::PacketSource;

/// How to analyse.
#[derive(Debug, Clone)]
pub struct AnalysisConfig {
    /// LNet acceptor ports followed.
    pub ports: Vec<u16>,
    /// Also follow connections on other ports whose first bytes look like socklnd.
    pub detect: bool,
    /// Interval of the time series and the per-interval model, ns.
    pub interval_ns: i64,
    /// The link rate given for the model, bytes/s.
    pub link_rate: Option<f64>,
    /// Worker threads for one capture file read to its end ([`FileAnalysis::read`]): 1
    /// reads on the calling thread; more run the flow tables, TCP behaviour and framing
    /// on that many workers beside a reading thread, with the same output
    /// (`crate::parallel`).
    pub threads: usize,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        Self {
            ports: vec![defaults::ACCEPTOR_PORT],
            detect: true,
            interval_ns: defaults::INTERVAL_NS,
            link_rate: None,
            threads: 1,
        }
    }
}

impl AnalysisConfig {
    /// The decode pipeline's options for this analysis.
    pub fn decode(&self) -> DecodeConfig {
        DecodeConfig {
            ports: self.ports.clone(),
            detect: self.detect,
            series_interval_ns: self.interval_ns,
            tcp_perf: true,
        }
    }
}

/// Where what streams out of an analysis goes: finished RPCs and (when asked for) every
/// decoded message, in capture order per source. Both default to dropping them.
pub trait Sink {
    /// Whether [`Sink::message`] is wanted.
    fn wants_messages(&self) -> bool {
        false
    }
    /// A decoded message of `file`, with its connection.
    fn message(&mut self, _file: &str, _m: &Message, _conn: Option<&Connection>) -> anyhow::Result<()> {
        Ok(())
    }
    /// A finished RPC of `file`.
    fn rpc(&mut self, _file: &str, _r: &mut RpcRecord) -> anyhow::Result<()> {
        Ok(())
    }
}

/// A sink that keeps nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSink;

impl Sink for NoSink {}

/// One source's analysis, packet by packet: the decode pipeline and the RPC tracker. Feed
/// it with [`FileAnalysis::push`] (live capture) or let [`Analysis::add`] drive it.
#[derive(Debug)]
pub struct FileAnalysis {
    name: String,
    pipe: Pipeline,
    state: Rpcs,
    /// The pipeline was flushed at the source's end (by [`FileAnalysis::read`]).
    flushed: bool,
    /// Worker threads for [`FileAnalysis::read`].
    threads: usize,
}

/// The RPC side of a source's analysis.
#[derive(Debug)]
pub(crate) struct Rpcs {
    tracker: Tracker,
    done: Vec<RpcRecord>,
    span: Option<[i64; 2]>,
}

/// What one source added to the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileOutcome {
    /// The source was read to its end.
    pub complete: bool,
    /// Peer pairs it added.
    pub peers: usize,
}

impl FileAnalysis {
    /// A new analysis of the source named `name`.
    pub fn new(name: &str, cfg: &AnalysisConfig) -> Self {
        Self {
            name: name.to_string(),
            pipe: Pipeline::new(cfg.decode()),
            state: Rpcs {
                tracker: Tracker::new(RpcConfig { interval_ns: cfg.interval_ns }),
                done: Vec::new(),
                span: None,
            },
            flushed: false,
            threads: cfg.threads.max(1),
        }
    }

    /// One packet; returns why it is not decodable, if it is not.
    pub fn push(
        &mut self,
        pkt: &lnetcap_capture::Packet<'_>,
        events: &mut Vec<LnetEvent>,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<Option<lnetcap_capture::NotTcp>> {
        let why = self.pipe.push(pkt, events);
        self.state.on_events(&self.name, &self.pipe, events, sink)?;
        Ok(why)
    }

    /// Live entries of each of the RPC tracker's indexes, with its limit.
    pub fn index_sizes(&self) -> Vec<(&'static str, usize, usize)> {
        self.state.tracker.index_sizes()
    }

    /// The pipeline (accounting, connections, TCP behaviour so far).
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipe
    }

    /// Reads `source` to its end into this analysis; returns whether it was complete.
    pub fn read<S: PacketSource + ?Sized>(
        &mut self,
        source: &mut S,
        sink: &mut dyn Sink,
        obs: &mut dyn Observer,
    ) -> anyhow::Result<bool> {
        if self.threads > 1 && self.pipe.frames_seen() == 0 {
            let Self { name, pipe, state, flushed, threads } = self;
            let complete = crate::parallel::read(name, source, pipe, state, sink, obs, *threads)?;
            *flushed = true;
            return Ok(complete);
        }
        self.read_piece(source, sink, obs, true)
    }

    /// Reads one piece of a capture cut in pieces (a rotated ring, in time order) into
    /// this analysis: connections and RPCs carry on into the next piece; the `last` one
    /// ends the source as [`FileAnalysis::read`] does. Returns whether the piece was read
    /// to its end.
    pub fn read_piece<S: PacketSource + ?Sized>(
        &mut self,
        source: &mut S,
        sink: &mut dyn Sink,
        obs: &mut dyn Observer,
        last: bool,
    ) -> anyhow::Result<bool> {
        let Self { name, pipe, state, flushed, .. } = self;
        let complete =
            drive_piece(name, source, pipe, obs, |pipe, events| state.on_events(name, pipe, events, sink), last)?;
        *flushed = last;
        Ok(complete)
    }

    /// Reads a live `source` to its end (it ends on a signal, a key or a duration):
    /// like [`FileAnalysis::read`], and every `every` of wall-clock time (on a packet
    /// that finished messages, or on the source's tick) `look` is given a [`Snapshot`]
    /// of the analysis so far.
    pub fn read_live<S: PacketSource + ?Sized>(
        &mut self,
        source: &mut S,
        sink: &mut dyn Sink,
        obs: &mut dyn Observer,
        cfg: &AnalysisConfig,
        every: std::time::Duration,
        look: &mut dyn FnMut(Snapshot<'_>),
    ) -> anyhow::Result<bool> {
        let Self { name, pipe, state, flushed, .. } = self;
        let mut due = std::time::Instant::now() + every;
        let complete = drive_piece(
            name,
            source,
            pipe,
            obs,
            |pipe, events| {
                state.on_events(name, pipe, events, sink)?;
                let now = std::time::Instant::now();
                if now >= due {
                    due = now + every;
                    look(Snapshot { name, pipe, state, cfg });
                }
                Ok(())
            },
            true,
        )?;
        *flushed = true;
        Ok(complete)
    }

    /// Ends the source: flushes the RPCs still open to `sink` and adds its file, peers and
    /// connections to `report`.
    pub fn finish(
        mut self,
        complete: bool,
        cfg: &AnalysisConfig,
        report: &mut Report,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<FileOutcome> {
        if !self.flushed {
            let mut events = Vec::new();
            self.pipe.finish(&mut events);
            self.state.on_events(&self.name, &self.pipe, &mut events, sink)?;
        }
        let st = &mut self.state;
        st.emit(&self.name, sink)?;
        let name = &self.name;
        st.tracker.finish_each(|done| done.drain(..).try_for_each(|mut r| sink.rpc(name, &mut r)))?;
        let snap = Snapshot { name: &self.name, pipe: &self.pipe, state: &self.state, cfg };
        let peers = snap.add_to(report, complete);
        Ok(FileOutcome { complete, peers })
    }
}

/// The analysis of a source as it stands: what a live view shows between packets.
#[derive(Clone, Copy)]
pub struct Snapshot<'a> {
    name: &'a str,
    pipe: &'a Pipeline,
    state: &'a Rpcs,
    cfg: &'a AnalysisConfig,
}

impl Snapshot<'_> {
    /// The report of the source as if it ended now (one file, `complete: false`; no
    /// fits): a copy of the RPC tracker is finished, so RPCs waiting out the emit delay
    /// and in-flight steps waiting out the reorder horizon count, and RPCs still open
    /// count as unanswered. Costs a copy of the tracker's state.
    pub fn report(&self) -> Report {
        let mut report = Analysis::new(self.cfg.clone()).report;
        let mut tracker = self.state.tracker.clone();
        tracker.finish(&mut Vec::new());
        let state = Rpcs { tracker, done: Vec::new(), span: self.state.span };
        Snapshot { state: &state, ..*self }.add_to(&mut report, false);
        report
    }

    /// The pipeline (accounting, connections, TCP behaviour so far).
    pub fn pipeline(&self) -> &Pipeline {
        self.pipe
    }

    /// Capture time of the last packet seen, ns.
    pub fn last_ns(&self) -> Option<i64> {
        self.state.span.map(|s| s[1])
    }

    /// Adds the source's file, peers and connections to `report`; returns the peers added.
    fn add_to(&self, report: &mut Report, complete: bool) -> usize {
        let (st, pipe, name) = (self.state, self.pipe, self.name);
        // The series' interval as it ended (coarser than asked on a long capture).
        let interval_ns = st.tracker.interval_ns();
        let cfg = &AnalysisConfig { interval_ns, ..self.cfg.clone() };
        let summary = pipe.summary();
        report.files.push(FileReport {
            file: name.to_string(),
            complete,
            frames: summary.frames.clone(),
            span_ns: st.span,
            unmatched_messages: st.tracker.unmatched.clone(),
            live: None,
            interrupted_at: None,
            limits: limit_hits(&summary, &st.tracker, pipe.series_doublings()),
            series_interval_ns: (interval_ns != self.cfg.interval_ns).then_some(interval_ns),
        });
        let reports = st.tracker.reports();
        report.connections.extend(connection_entries(pipe, &summary, &reports, name, cfg.interval_ns));
        // Peers per server, counted once (a scan per peer is quadratic in peers).
        let mut per_server: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
        for p in &reports {
            *per_server.entry(p.server_nid.as_str()).or_default() += 1;
        }
        for peer in &reports {
            let n = per_server.get(peer.server_nid.as_str()).copied().unwrap_or(1);
            report.peers.push(peer_entry(pipe, peer.clone(), n, cfg, name));
        }
        reports.len()
    }
}

/// The named limits a source reached: from the flow table's retirements, the summary's
/// folding and the RPC tracker's indexes.
fn limit_hits(
    summary: &lnetcap_lnet::DecodeSummary,
    tracker: &Tracker,
    series_doublings: u32,
) -> Vec<crate::report::LimitHit> {
    use crate::report::LimitHit;
    let unmatched = |k: &str| tracker.unmatched.get(k).copied().unwrap_or(0);
    let hits = [
        LimitHit {
            limit: "MAX_OPEN_CONNECTIONS",
            value: lnetcap_tcp::limits::MAX_OPEN_CONNECTIONS as u64,
            count: summary.retired,
            effect: "connections retired while idle (the limit is kept per 64th of the connections, by their 4-tuple's hash: 512 each): streams flushed as at the end (a message in progress ends partial); a later packet opens a new connection",
        },
        LimitHit {
            limit: "MAX_LISTED_SETUP_ONLY",
            value: lnetcap_lnet::limits::MAX_LISTED_SETUP_ONLY as u64,
            count: summary.folded.connections,
            effect: "connections that only set up (handshake, connreq, HELLO) counted in frames but not listed under connections",
        },
        LimitHit {
            limit: "MAX_OPEN_RPCS",
            value: lnetcap_rpc::limits::MAX_OPEN_RPCS as u64,
            count: tracker.evicted(),
            effect: "open RPCs reported as partial (missing: evicted) to make room; a reply after that is unmatched",
        },
        LimitHit {
            limit: "MAX_FINISHED_RPCS",
            value: lnetcap_rpc::limits::MAX_FINISHED_RPCS as u64,
            count: tracker.emitted_early(),
            effect: "finished RPCs reported, complete, before their 10 s wait (EMIT_DELAY_NS) for a late inferred request was over, as more were held (or the open RPC index was full): such a request (after lost headers) starts an RPC of its own, reported partial",
        },
        LimitHit {
            limit: "MAX_PENDING_STEPS",
            value: lnetcap_rpc::limits::MAX_PENDING_STEPS as u64,
            count: tracker.steps_applied_early(),
            effect: "steps of a pair's series of LNet messages (and of RPCs: MAX_PENDING_RPC_STEPS) in flight applied before their 30 s reorder horizon (REORDER_HORIZON_NS) had passed, as more were held: a step that came later for an earlier time counted at the time reached",
        },
        LimitHit {
            limit: "MAX_PEERS",
            value: lnetcap_rpc::limits::MAX_PEERS as u64,
            count: tracker.overflow_uses(),
            effect: "messages and RPCs of peer pairs beyond the limit: in the totals, not reported per pair",
        },
        LimitHit {
            limit: "MAX_GET_HANDLES",
            value: lnetcap_rpc::limits::MAX_GET_HANDLES as u64,
            count: unmatched("get_index_full"),
            effect: "GETs not indexed: their REPLYs count as unmatched",
        },
        LimitHit {
            limit: "MAX_ACK_HANDLES",
            value: lnetcap_rpc::limits::MAX_ACK_HANDLES as u64,
            count: unmatched("ack_index_full"),
            effect: "PUTs whose ACK handle was not indexed: their ACKs count as unmatched",
        },
        LimitHit {
            limit: "MAX_ZC_PENDING",
            value: lnetcap_rpc::limits::MAX_ZC_PENDING as u64,
            count: unmatched("zc_index_full"),
            effect: "zero-copy messages not indexed: their ZC-ACKs count as unmatched",
        },
        LimitHit {
            limit: "MAX_SERIES_INTERVALS",
            value: lnetcap_tcp::limits::MAX_SERIES_INTERVALS as u64,
            count: u64::from(series_doublings),
            effect: "the capture spans more intervals than a series keeps: the interval was doubled this many times (files[].series_interval_ns), neighbouring intervals merged",
        },
    ];
    hits.into_iter().filter(|h| h.count > 0).collect()
}

impl std::fmt::Debug for Snapshot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Rpcs {
    /// A batch of pipeline events: messages to the sink and the tracker, framing losses
    /// to the tracker; RPCs the tracker finished go to the sink.
    fn on_events(
        &mut self,
        name: &str,
        pipe: &Pipeline,
        events: &mut Vec<LnetEvent>,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<()> {
        self.tracker.forget_folded(pipe.folded_connections());
        // The pipeline doubled its series interval (MAX_SERIES_INTERVALS): the RPC
        // series follow before these messages count.
        self.tracker.coarsen(pipe.series_interval_ns());
        for ev in events.drain(..) {
            let id = match &ev {
                LnetEvent::Message(m) => m.conn,
                LnetEvent::Framing { conn, .. } => *conn,
            };
            let loops = || pipe.tcp_perf(id).and_then(lnetcap_rpc::tcp::capture_point_from_loops);
            self.on_event(name, &ev, pipe.connection(id), loops, sink)?;
        }
        self.emit(name, sink)
    }

    /// One event: a message to the sink and the tracker, a framing loss to the tracker.
    /// `conn` is the event's connection as the pipeline has it after the packet, `loops`
    /// the capture point the TCP loops give it (asked only while neither the handshake
    /// nor an earlier message gave one).
    pub(crate) fn on_event(
        &mut self,
        name: &str,
        ev: &LnetEvent,
        conn: Option<&Connection>,
        loops: impl FnOnce() -> Option<lnetcap_tcp::CapturePoint>,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<()> {
        match ev {
            LnetEvent::Message(m) => {
                if sink.wants_messages() {
                    sink.message(name, m, conn)?;
                }
                let Some(conn) = conn else { return Ok(()) };
                self.span = Some(match self.span {
                    Some([s, e]) => [s.min(m.first.ts_ns), e.max(m.last.ts_ns)],
                    None => [m.first.ts_ns, m.last.ts_ns],
                });
                // A capture started mid-stream has no handshake to place the capture
                // point: the TCP loops give it once they have grown.
                if conn.capture_point().is_none() && !self.tracker.knows_capture_point(m.conn.0) {
                    if let Some(cp) = loops() {
                        self.tracker.note_capture_point(m.conn.0, cp);
                    }
                }
                self.tracker.on_message(m, conn, &mut self.done);
            }
            LnetEvent::Framing { conn, dir, stamp, event } => {
                let lost = matches!(event, FramingEvent::Desync { .. });
                self.tracker.on_framing(conn.0, dir.index(), stamp.ts_ns, lost);
            }
        }
        Ok(())
    }

    pub(crate) fn emit(&mut self, name: &str, sink: &mut dyn Sink) -> anyhow::Result<()> {
        for r in &mut self.done {
            sink.rpc(name, r)?;
        }
        self.done.clear();
        Ok(())
    }
}

/// A parallel run's merge feeds the tracker as the single loop does, in capture order.
impl crate::parallel::Consumer for Rpcs {
    fn on_event(
        &mut self,
        name: &str,
        ev: &LnetEvent,
        conn: Option<&Connection>,
        cp: Option<lnetcap_tcp::CapturePoint>,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<()> {
        Rpcs::on_event(self, name, ev, conn, || cp, sink)
    }

    fn emit(&mut self, name: &str, sink: &mut dyn Sink) -> anyhow::Result<()> {
        Rpcs::emit(self, name, sink)
    }

    fn coarsen(&mut self, ns: i64) {
        self.tracker.coarsen(ns);
    }

    fn forget_one_folded(&mut self, id: u32) {
        self.tracker.forget_one_folded(id);
    }
}

/// Sources in, one [`Report`] out: add each source, then [`Analysis::finish`].
#[derive(Debug)]
pub struct Analysis {
    cfg: AnalysisConfig,
    report: Report,
}

impl Analysis {
    /// An empty analysis.
    pub fn new(cfg: AnalysisConfig) -> Self {
        let report = Report {
            schema_version: REPORT_SCHEMA_VERSION,
            tool: format!("lnetcap {}", env!("CARGO_PKG_VERSION")),
            interrupted: false,
            interval_ns: cfg.interval_ns,
            files: Vec::new(),
            peers: Vec::new(),
            connections: Vec::new(),
            fits: None,
        };
        Self { cfg, report }
    }

    /// Its options.
    pub fn config(&self) -> &AnalysisConfig {
        &self.cfg
    }

    /// Reads one source (named `name` in the report and notices) to its end and adds its
    /// file, peers and connections; RPCs and messages stream to `sink` as they finish.
    pub fn add<S: PacketSource + ?Sized>(
        &mut self,
        name: &str,
        source: &mut S,
        sink: &mut dyn Sink,
        obs: &mut dyn Observer,
    ) -> anyhow::Result<FileOutcome> {
        let mut fa = FileAnalysis::new(name, &self.cfg);
        let complete = fa.read(source, sink, obs)?;
        fa.finish(complete, &self.cfg, &mut self.report, sink)
    }

    /// Adds a source analysed packet by packet ([`FileAnalysis`]).
    pub fn add_file(&mut self, fa: FileAnalysis, complete: bool, sink: &mut dyn Sink) -> anyhow::Result<FileOutcome> {
        fa.finish(complete, &self.cfg, &mut self.report, sink)
    }

    /// The report: with fits across the captures when there are several.
    pub fn finish(mut self) -> Report {
        if self.report.files.len() > 1 {
            self.report.fits = fits(&self.report.peers);
        }
        self.report
    }
}
