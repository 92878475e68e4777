//! TCP behaviour of one connection direction, from the same pass as reassembly: RTT
//! samples, bytes in flight, receive window, retransmissions by cause, duplicate ACKs.
//!
//! Capture position. A capture point sees each segment once, somewhere between the two
//! hosts. For a direction S → R, the time from seeing S's data (or its TCP timestamp
//! `TSval`) to seeing R's acknowledgement (or R echoing that `TSval` in `TSecr`) is the
//! round trip capture → R → capture: the *half* loop on R's side. The other direction
//! measures S's side. Their sum is the connection's RTT wherever the capture was taken, and
//! their ratio says where: near S when S's half is ~0. Samples follow Karn's rule: no
//! data→ACK sample from retransmitted data.
//!
//! Bytes in flight are the sender's: at the moment the sender receives an ACK (the capture
//! saw it `d_S` earlier, d_S = half of S's loop / 2) it has sent what the capture will see
//! up to `d_S` after that. The tracker buffers ACKs for 2·d_S of capture time to look ahead.
//!
//! Loss before the capture point. A segment the path dropped upstream of the capture is
//! never seen: the capture sees a hole in the sequence space (Wireshark: "previous segment
//! not captured") that the sender's retransmission fills at least a round trip later. Such
//! a filler is a retransmission (`retransmits`, with the cause `retransmits_upstream` and
//! its delay in `upstream_delays`); a filler that comes within half the smallest round trip
//! is reordering (`out_of_order`). Both are excluded from data→ACK samples (Karn).

use std::collections::VecDeque;

use lnetcap_capture::prefetch::prefetch_value;

use crate::series::Series;
use crate::stats::Quantiles;
use crate::CapturePoint;

/// Counters and samples of one direction (sender → receiver).
#[derive(Debug, Clone, Default)]
pub struct DirPerf {
    /// Loop samples (ns) capture → receiver → capture: data→ACK (Karn) and TSval→TSecr,
    /// as a quantile sketch (memory bounded by the value range, not the count).
    pub loops: Quantiles,
    /// The latest loop samples, for a running median.
    pub recent_loops: RecentLoops,
    /// Loop samples per series interval (`ConnPerf::series_ns`): interval start → bucket.
    pub loop_series: Series<LoopBucket>,
    /// Data→ACK samples only, as tcptrace measures RTT at its capture point: count.
    pub data_ack_n: u64,
    /// ... and their sum, ns.
    pub data_ack_sum_ns: i128,
    /// Retransmitted segments (payload, not keepalive probes).
    pub retransmits: u64,
    /// ... of which after ≥ 3 duplicate ACKs (fast retransmit).
    pub retransmits_fast: u64,
    /// ... of which after a silence of at least max(200 ms, 2·loop) (timeout).
    pub retransmits_timeout: u64,
    /// ... of which of data already acknowledged (spurious).
    pub retransmits_spurious: u64,
    /// ... of which lost before the capture point: segments that filled a hole the capture
    /// had seen open (bytes beyond it came first) too late to be reordering, i.e. the
    /// sender's retransmission of a segment the path dropped upstream. They also count in
    /// `bytes_retransmitted` and, by how the sender noticed, in `retransmits_fast` or
    /// `retransmits_timeout`.
    pub retransmits_upstream: u64,
    /// Delays of those retransmissions, ns: capture time of the filler minus the capture
    /// time of the first segment seen beyond the hole.
    pub upstream_delays: Quantiles,
    /// Retransmitted payload bytes.
    pub bytes_retransmitted: u64,
    /// Segments behind the highest sequence that filled a hole the capture had not seen,
    /// soon enough after the hole opened to be reordering (or a hole no longer remembered).
    pub out_of_order: u64,
    /// Duplicate ACKs sent by the receiver for this direction's data.
    pub dup_acks: u64,
    /// ACKs advertising a zero window (receiver side).
    pub zero_windows: u64,
    /// Window scale shift of the receiver (from its SYN), if seen.
    pub rcv_wscale: Option<u8>,
    /// Window scaling was not seen (SYN missing) and is assumed from the largest raw window.
    pub wscale_inferred: bool,
    /// Largest bytes in flight (sender's view).
    pub inflight_max: u64,
    /// Bytes in flight per series interval (`ConnPerf::series_ns`), aggregated as the
    /// samples come (one per ACK): interval start → bucket.
    pub flight_series: Series<FlightBucket>,
    /// The congestion-window estimate's running state.
    pub cwnd: CwndHeld,
    /// Payload segments per series interval (capture time): interval start → bucket.
    pub tx_series: Series<TxBucket>,
    /// Payload segments.
    pub data_segments: u64,
    /// Payload bytes of all segments (retransmissions included).
    pub payload_bytes: u64,
    /// Time with no data outstanding and none sent for more than a loop (ns).
    pub idle_ns: i64,
}

/// What the sender had in flight when an ACK reached it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlightSample {
    /// Capture time of the ACK, ns.
    pub t: i64,
    /// Bytes sent and not yet acknowledged (nor selectively acknowledged).
    pub flight: u64,
    /// Receive window the ACK advertised, bytes (scaled).
    pub rwnd: u64,
    /// The sender was recovering from a loss (a retransmission not yet acknowledged past
    /// everything sent before it): the flight counts bytes the sender has given up as
    /// lost, so it is no evidence of the congestion window.
    pub recovery: bool,
}

/// Payload segments of one series interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxBucket {
    /// Payload bytes (retransmissions included).
    pub bytes: u64,
    /// Payload segments.
    pub segments: u32,
    /// Retransmitted segments.
    pub retransmits: u32,
}

/// Bytes in flight of one series interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlightBucket {
    /// Largest flight outside loss recovery, bytes (0: none).
    pub max_flight: u64,
    /// Largest congestion-window estimate (`CwndHeld`) in the interval, bytes (0: every
    /// sample fell in loss recovery).
    pub cwnd: u64,
    /// The last receive window advertised in the interval, bytes.
    pub rwnd: u64,
    /// Samples, and how many fell in loss recovery.
    pub samples: u32,
    /// Samples in loss recovery.
    pub recovery: u32,
}

/// The congestion-window estimate: the largest flight since the last loss recovery or idle
/// restart. Without loss a sender's window does not shrink, so a stretch where the
/// application sent less keeps the estimate it had reached; after a loss the estimate
/// restarts from what is in flight once recovery ends (during recovery it is not known).
/// An ACK-less gap longer than the idle time also restarts it, as Linux's
/// `tcp_slow_start_after_idle` does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CwndHeld {
    held: u64,
    last_t: Option<i64>,
}

impl CwndHeld {
    /// Feeds one sample; returns the estimate after it (None in loss recovery). `idle_ns`
    /// gives the idle time that restarts the estimate, at least [`MIN_RTO_NS`]: it is
    /// asked only after a gap that long.
    pub fn add(&mut self, s: &FlightSample, idle_ns: impl FnOnce() -> i64) -> Option<u64> {
        if s.recovery || self.last_t.is_some_and(|l| s.t - l > MIN_RTO_NS && s.t - l > idle_ns()) {
            self.held = 0;
        }
        self.last_t = Some(s.t);
        if s.recovery {
            return None;
        }
        self.held = self.held.max(s.flight);
        Some(self.held)
    }
}

impl FlightBucket {
    /// Adds a sample with the window estimate after it.
    fn add(&mut self, s: &FlightSample, cwnd: Option<u64>) {
        self.samples += 1;
        self.rwnd = s.rwnd;
        match cwnd {
            Some(c) => {
                self.max_flight = self.max_flight.max(s.flight);
                self.cwnd = self.cwnd.max(c);
            }
            None => self.recovery += 1,
        }
    }
}

/// Loop samples of one series interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopBucket {
    /// Smallest loop, ns.
    pub min: i64,
    /// Sum of the loops, ns.
    pub sum: i64,
    /// Samples.
    pub n: u32,
}

/// Loop samples the running median is taken over.
const RECENT_LOOPS: usize = 64;
/// The running median is refreshed every this many samples (a sort of 64 per ACK would
/// cost more than the rest of the TCP analysis).
const RECENT_REFRESH: u64 = 16;
/// Loop samples kept: the median's window as of its last refresh, and the samples since.
const RECENT_RING: usize = RECENT_LOOPS + RECENT_REFRESH as usize;

/// The latest loop samples and their running median: the median of the latest
/// [`RECENT_LOOPS`] as of the last refresh, a refresh at each of the first
/// [`RECENT_REFRESH`] samples and at every multiple of it. Worked out only when asked
/// (an idle gap, a retransmission: rarely), from a ring that keeps the samples since the
/// last refresh too; it was sorted at every refresh, about 90 instructions a loop sample.
#[derive(Debug, Clone, Default)]
pub struct RecentLoops {
    /// Sample `i` (counting from 0) at `i % RECENT_RING` while among the latest
    /// [`RECENT_RING`]; grown to that size as the samples come.
    ring: Vec<i64>,
    /// Samples taken.
    seen: u64,
    /// The median last asked for, and the refresh it is the median at.
    cached: Option<(u64, i64)>,
}

impl RecentLoops {
    /// Takes one loop sample, ns.
    #[inline]
    fn push(&mut self, x: i64) {
        if self.ring.len() < RECENT_RING {
            self.ring.push(x);
        } else {
            self.ring[(self.seen % RECENT_RING as u64) as usize] = x;
        }
        self.seen += 1;
    }

    /// The running median, ns (None before the first sample).
    fn median(&mut self) -> Option<i64> {
        let n = self.seen;
        if n == 0 {
            return None;
        }
        // The last refresh: every sample at first, then every RECENT_REFRESH-th.
        let at = if n < RECENT_REFRESH { n } else { n - n % RECENT_REFRESH };
        if let Some((c, m)) = self.cached {
            if c == at {
                return Some(m);
            }
        }
        // Samples [from, at), all still in the ring: n - from < RECENT_RING.
        let from = at.saturating_sub(RECENT_LOOPS as u64);
        let k = (at - from) as usize;
        let mut v = [0i64; RECENT_LOOPS];
        // At most two runs of the ring: from `from`'s place to its end, then from its start.
        let start = (from % RECENT_RING as u64) as usize;
        let first = k.min(RECENT_RING - start);
        v[..first].copy_from_slice(&self.ring[start..start + first]);
        v[first..k].copy_from_slice(&self.ring[..k - first]);
        let m = *v[..k].select_nth_unstable(k / 2).1;
        self.cached = Some((at, m));
        Some(m)
    }

    /// The latest samples, oldest first (at most [`RECENT_LOOPS`]): what the tests compare.
    #[cfg(test)]
    fn latest(&self) -> Vec<i64> {
        let from = self.seen.saturating_sub(RECENT_LOOPS as u64);
        (from..self.seen).map(|i| self.ring[(i % RECENT_RING as u64) as usize]).collect()
    }
}

/// Default series interval, ns: the one default of every time series and per-interval
/// model (`lnetcap analyze --interval-ms`); lnetcap-analysis's `defaults` names it.
pub const DEFAULT_SERIES_NS: i64 = 100_000_000;

/// Linux's minimum retransmission timeout (TCP_RTO_MIN, 200 ms): a resend this long after
/// the last progress is a timeout, and an idle this long restarts the window estimate.
pub const MIN_RTO_NS: i64 = 200_000_000;

/// An ACK waiting for the look-ahead (24 bytes: the deque spans a round trip of ACKs on
/// every connection, and its front is read cold).
#[derive(Debug, Clone, Copy)]
struct PendingAck {
    /// Capture time.
    t: i64,
    ack: u32,
    /// The window, scaled, bytes.
    wnd: u32,
    /// SACKed bytes above the ACK.
    sacked: u32,
    recovery: bool,
}

#[derive(Debug, Clone, Copy)]
struct SentSeg {
    end: u32,
    ts: i64,
    retransmitted: bool,
}

/// Per-direction state.
#[derive(Debug, Default)]
pub(crate) struct DirState {
    pub perf: DirPerf,
    /// Unacknowledged first transmissions, in sequence order.
    sent: VecDeque<SentSeg>,
    snd_max: Option<u32>,
    snd_una: Option<u32>,
    /// Loss recovery until the ACK passes this sequence.
    recover: Option<u32>,
    last_ack: Option<u32>,
    dup_count: u32,
    last_progress_ts: i64,
    last_data_ts: Option<i64>,
    /// TSval first seen → capture time (pruned).
    tsvals: VecDeque<(u32, i64)>,
    /// The highest TSval seen, echoed or not.
    last_tsval: Option<u32>,
    /// ACKs waiting for the look-ahead, in capture order.
    pending: VecDeque<PendingAck>,
    /// No entry of `pending` is older than this (a lower bound: reading the deque's
    /// front on every segment is a cache miss per connection).
    pending_from: i64,
    /// snd_max history for the look-ahead: (capture time, snd_max).
    max_hist: VecDeque<(i64, u32)>,
    /// Entries of `max_hist` at or before the last look-ahead horizon: where the next
    /// search starts (horizons mostly grow by a segment or two per ACK).
    hist_hint: usize,
    last_raw_window: u16,
    max_raw_window: u16,
    seen: Seen,
    holes: Holes,
}

impl DirState {
    /// Bounds the sent-sequence history ([`MAX_HIST`], [`HIST_TRIM_SLACK_NS`]) at capture
    /// time `now`.
    #[cold]
    #[inline(never)]
    fn trim_history(&mut self, now: i64) {
        // Room for the entry about to be added.
        let mut drop = (self.max_hist.len() + 1).saturating_sub(MAX_HIST);
        if self.pending.is_empty() {
            let keep_from = now.saturating_sub(HIST_TRIM_SLACK_NS);
            // The entry in force at `keep_from` stays: an ACK of that time reads it.
            while drop + 1 < self.max_hist.len() && self.max_hist[drop + 1].0 <= keep_from {
                drop += 1;
            }
        }
        self.max_hist.drain(..drop);
        self.hist_hint = self.hist_hint.saturating_sub(drop);
    }

    /// Counts a retransmitted segment [seq, end) seen at capture time `ts`, with how the
    /// sender came to resend it, and marks the first transmissions it repeats (Karn).
    fn retransmitted(&mut self, seq: u32, end: u32, ts: i64) {
        self.perf.retransmits += 1;
        self.perf.bytes_retransmitted += u64::from(end.wrapping_sub(seq));
        let loop_ns = self.perf.recent_loop().unwrap_or(0);
        if self.snd_una.is_some_and(|u| !after(end, u)) {
            self.perf.retransmits_spurious += 1;
        } else {
            if self.dup_count >= 3 {
                self.perf.retransmits_fast += 1;
            } else if ts - self.last_progress_ts >= (2 * loop_ns).max(MIN_RTO_NS) {
                self.perf.retransmits_timeout += 1;
            }
            // Loss recovery lasts until everything sent so far is acknowledged.
            self.recover = self.snd_max;
        }
        for sg in self.sent.iter_mut() {
            if after(sg.end, seq) && !after(sg.end, end) {
                sg.retransmitted = true;
            }
        }
    }
}

/// Sequence ranges the capture has seen, recent ones only (bounded).
#[derive(Debug, Default)]
struct Seen {
    /// [start, end) in sequence space, ascending from `base`.
    ranges: VecDeque<(u32, u32)>,
}

/// Ranges remembered (older ones are forgotten).
const MAX_SEEN_RANGES: usize = 256;

impl Seen {
    fn overlaps(&self, a: u32, b: u32) -> bool {
        self.ranges.iter().any(|&(s, e)| after(e, a) && after(b, s))
    }

    fn add(&mut self, a: u32, b: u32) {
        if !after(b, a) {
            return;
        }
        // The usual segment: in order, it extends the highest range (nothing else touches).
        if let Some(last) = self.ranges.back_mut() {
            if !after(a, last.1) && !after(last.0, a) {
                if after(b, last.1) {
                    last.1 = b;
                }
                return;
            }
        }
        let (mut a, mut b) = (a, b);
        // Merge every range that touches [a, b).
        self.ranges.retain(|&(s, e)| {
            let touches = !after(s, b) && !after(a, e);
            if touches {
                if after(a, s) {
                    a = s;
                }
                if after(e, b) {
                    b = e;
                }
            }
            !touches
        });
        let pos = self.ranges.iter().position(|&(s, _)| after(s, a)).unwrap_or(self.ranges.len());
        self.ranges.insert(pos, (a, b));
        while self.ranges.len() > MAX_SEEN_RANGES {
            self.ranges.pop_front();
        }
    }
}

/// Holes the capture saw open: sequence ranges [start, end) that a segment ahead of
/// everything seen skipped, each with the capture time it was first seen (recent ones only).
#[derive(Debug, Default)]
struct Holes {
    list: VecDeque<(u32, u32, i64)>,
}

/// Holes remembered per direction (older ones are forgotten).
const MAX_HOLES: usize = 256;

/// A hole's filler that comes sooner than this after the hole opened is reordering while
/// a loop of the connection is not measured yet (Wireshark's default out-of-order
/// threshold).
const REORDER_DEFAULT_NS: i64 = 3_000_000;

impl Holes {
    fn open(&mut self, a: u32, b: u32, ts: i64) {
        self.list.push_back((a, b, ts));
        if self.list.len() > MAX_HOLES {
            self.list.pop_front();
        }
    }

    /// Takes [a, b) out of the holes; returns when the earliest hole it touched opened.
    fn fill(&mut self, a: u32, b: u32) -> Option<i64> {
        if !self.list.iter().any(|&(s, e, _)| after(e, a) && after(b, s)) {
            return None;
        }
        let mut first: Option<i64> = None;
        let mut rest = VecDeque::with_capacity(self.list.len() + 1);
        for (s, e, t) in self.list.drain(..) {
            if !(after(e, a) && after(b, s)) {
                rest.push_back((s, e, t));
                continue;
            }
            first = Some(first.map_or(t, |f| f.min(t)));
            if after(a, s) {
                rest.push_back((s, a, t));
            }
            if after(e, b) {
                rest.push_back((b, e, t));
            }
        }
        self.list = rest;
        first
    }

    /// The receiver acknowledged up to `ack`: holes below it were received (the capture
    /// missed those bytes) and will not be filled.
    fn acked(&mut self, ack: u32) {
        if self.list.is_empty() {
            return;
        }
        self.list.retain_mut(|h| {
            if !after(h.1, ack) {
                return false;
            }
            if after(ack, h.0) {
                h.0 = ack;
            }
            true
        });
    }
}

/// How late a hole's filler may come (ns after the hole opened) and still be reordering:
/// half the smallest round trip measured (the sum of the two directions' smallest loops).
/// The retransmission of a segment lost before the capture point comes at least a round
/// trip after the segment that followed it: that segment's duplicate ACK travels capture →
/// receiver → capture → sender, and the retransmission sender → capture. While one loop is
/// not measured, at least [`REORDER_DEFAULT_NS`].
fn reorder_window(me: &DirPerf, peer: &DirPerf) -> i64 {
    match (me.loops.min(), peer.loops.min()) {
        (Some(a), Some(b)) => ((a + b) / 2.0) as i64,
        (a, b) => ((a.or(b).unwrap_or(0.0) / 2.0) as i64).max(REORDER_DEFAULT_NS),
    }
}

/// Most TSvals remembered per direction.
const MAX_TSVALS: usize = 4096;
/// Most unacknowledged segments remembered per direction.
const MAX_SENT: usize = 65_536;
/// Most ACKs awaiting the look-ahead per direction (24 bytes each). They wait twice the
/// sender's one-way delay from the capture point, half a measured loop: a loop that
/// claims minutes (a TSval echoed late, a hostile capture) would keep minutes of ACKs.
/// Past this the oldest is settled at once, on the sent-sequence history seen so far (its
/// flight can only be underestimated).
const MAX_PENDING: usize = 65_536;
/// Most entries of the sent-sequence history per direction (16 bytes each). An ACK takes
/// what it needs of the history when it is settled; a direction whose ACKs the capture
/// never sees (one direction captured: `tcpdump -Q out`, asymmetric routing) grew it by
/// an entry per data segment for the whole capture (massif, a 1.8 GB capture of one
/// direction of the full-payload bench: 16.8 MB of a 36 MiB peak RSS, growing with the
/// capture; 21 MiB in all with this bound). Past this the oldest entry is
/// dropped; an ACK needing it gets no flight sample.
const MAX_HIST: usize = 65_536;
/// A direction with no ACK waiting drops the history older than this before the
/// latest segment (ns), every [`HIST_TRIM_EVERY`] entries: an ACK settled later needs
/// only the history from its own time on, and ACKs come in capture order, bar the
/// microseconds by which packets captured on different CPUs disagree.
const HIST_TRIM_SLACK_NS: i64 = 10_000_000;
/// How often (entries added) a direction's history is trimmed ([`HIST_TRIM_SLACK_NS`]);
/// MAX_HIST is a multiple of it.
const HIST_TRIM_EVERY: usize = 64;

fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// SACK blocks a segment's options hold at most: a TCP header has at most 40 bytes of
/// options, and each SACK option takes 2 bytes and 8 a block (RFC 2018: 4 blocks in one
/// option, or 4 in two).
const MAX_SACK_BLOCKS: usize = 4;

/// What the TCP analysis reads of a segment's options. Kept in place, not in a vector:
/// the options of every segment are read, and the tuple with a vector that this was cost
/// a call and a 48-byte copy a segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Opts {
    /// Timestamps (TSval, TSecr).
    ts: Option<(u32, u32)>,
    /// Window scale (at most 14).
    ws: Option<u8>,
    /// The first `sacks` are the SACK blocks, in order.
    sack: [(u32, u32); MAX_SACK_BLOCKS],
    sacks: u8,
}

impl Opts {
    /// The SACK blocks, in order.
    fn sack(&self) -> &[(u32, u32)] {
        &self.sack[..usize::from(self.sacks)]
    }
}

/// A segment's TCP timestamps: a TSval first seen now; an echo closes the peer's loop.
#[inline]
fn on_timestamps(me: &mut DirState, peer: &mut DirState, tsval: u32, tsecr: u32, s_ts: i64, series_ns: i64) {
    // TSvals only grow (a reordered older one is not new): the first capture time of
    // each, ascending. New means after every TSval seen, not only after those still
    // awaiting their echo: a TSval (1 ms ticks) repeated after its echo popped it is
    // echoed again by whatever the peer sends next, not in response to this segment.
    if me.last_tsval.is_none_or(|v| after(tsval, v)) {
        me.last_tsval = Some(tsval);
        me.tsvals.push_back((tsval, s_ts));
        if me.tsvals.len() > MAX_TSVALS {
            me.tsvals.pop_front();
        }
    }
    if tsecr != 0 {
        // TS.Recent only moves forward, so TSvals older than the echo will not be
        // echoed again.
        while let Some(&(v, t0)) = peer.tsvals.front() {
            if after(tsecr, v) {
                peer.tsvals.pop_front();
                continue;
            }
            if v == tsecr {
                peer.tsvals.pop_front();
                // The peer's TSval came past the capture at t0; I echo it now: the
                // loop capture → me → capture, measured for the peer's direction.
                peer.perf.add_loop(s_ts, s_ts - t0, series_ns);
            }
            break;
        }
    }
}

/// A segment's data (or SYN) in its own direction: retransmissions by cause, holes,
/// segments awaiting their ACK, idle time, the highest sequence sent.
#[inline]
fn on_data(me: &mut DirState, peer: &mut DirState, s: &SegInfo<'_>, series_ns: i64) {
    let seq = if s.syn { s.seq.wrapping_add(1) } else { s.seq };
    let end = seq.wrapping_add(s.len);
    if s.len > 0 {
        me.perf.data_segments += 1;
        me.perf.payload_bytes += u64::from(s.len);
        let is_probe = s.len <= 1 && me.snd_max.is_some_and(|m| seq.wrapping_add(1) == m);
        let behind = me.snd_max.is_some_and(|m| after(m, seq)) && !is_probe;
        // Like tcptrace, a retransmission repeats bytes the capture already saw. A
        // segment ahead of everything seen opens a hole; a segment behind the highest
        // sequence that fills a hole is out of order when it comes within the
        // reordering window of the hole's opening, else it is the retransmission of a
        // segment lost before the capture point.
        let repeats = behind && me.seen.overlaps(seq, end);
        if let Some(m) = me.snd_max {
            if after(seq, m) {
                me.holes.open(m, seq, s.ts);
            }
        }
        let hole_delay = if behind { me.holes.fill(seq, end).map(|t0| (s.ts - t0).max(0)) } else { None };
        // The reordering window only for a hole's filler (two float quantities a segment
        // otherwise).
        let upstream = hole_delay.is_some_and(|x| x >= reorder_window(&me.perf, &peer.perf));
        if behind && !repeats && !upstream {
            me.perf.out_of_order += 1;
        }
        me.seen.add(seq, end);
        let retrans = repeats || upstream;
        me.perf.tx_series.slot(s.ts, series_ns, TxBucket::default, |b| {
            b.bytes += u64::from(s.len);
            b.segments += 1;
            b.retransmits += u32::from(retrans);
        });
        if retrans {
            if upstream {
                me.perf.retransmits_upstream += 1;
                me.perf.upstream_delays.add(hole_delay.unwrap_or(0) as f64);
            }
            me.retransmitted(seq, end, s.ts);
        }
        if hole_delay.is_some() || (behind && !repeats) {
            // A hole filler (reordered, or resent after a loss before the capture
            // point): an ACK covering it was held back by the hole, so it is ambiguous
            // for RTT like a retransmission (Karn).
            let pos = me.sent.iter().position(|sg| after(sg.end, end)).unwrap_or(me.sent.len());
            if me.sent.len() < MAX_SENT {
                me.sent.insert(pos, SentSeg { end, ts: s.ts, retransmitted: true });
            }
        } else if !behind && !is_probe && me.sent.len() < MAX_SENT {
            me.sent.push_back(SentSeg { end, ts: s.ts, retransmitted: false });
        }
        if let Some(last) = me.last_data_ts {
            let outstanding = me.snd_una.zip(me.snd_max).is_some_and(|(u, m)| after(m, u));
            // The gap against 1 ms first: the running median is worked out only when asked.
            let gap = s.ts - last;
            if !outstanding && gap > 1_000_000 && gap > me.perf.recent_loop().unwrap_or(0) {
                me.perf.idle_ns += gap;
            }
        }
        me.last_data_ts = Some(s.ts);
    }
    if me.snd_max.is_none_or(|m| after(end, m)) {
        me.snd_max = Some(end);
    }
    if me.snd_una.is_none() {
        me.snd_una = Some(seq);
        me.last_progress_ts = s.ts;
    }
    if let Some(m) = me.snd_max {
        // Only changes: the history is a step function of time.
        if me.max_hist.back().is_none_or(|&(_, last)| last != m) {
            // Trimmed before the push: the deque's capacity never doubles past MAX_HIST.
            if me.max_hist.len() % HIST_TRIM_EVERY == 0 {
                me.trim_history(s.ts);
            }
            me.max_hist.push_back((s.ts, m));
        }
    }
}

/// A segment's ACK field, acknowledging the peer's data: duplicate ACKs, RTT samples
/// (Karn), the window and SACKed bytes for the flight estimate.
#[inline]
fn on_ack(me: &mut DirState, peer: &mut DirState, s: &SegInfo<'_>, sack: &[(u32, u32)], series_ns: i64) {
    me.last_raw_window = s.window;
    me.max_raw_window = me.max_raw_window.max(s.window);
    let ack = s.ack;
    if s.window == 0 && s.len == 0 {
        peer.perf.zero_windows += 1;
    }
    match peer.last_ack {
        Some(l) if l == ack && s.len == 0 && !s.syn && peer.snd_max.is_some_and(|m| after(m, ack)) => {
            peer.dup_count += 1;
            peer.perf.dup_acks += 1;
        }
        Some(l) if !after(ack, l) => {}
        _ => {
            peer.dup_count = 0;
            peer.last_progress_ts = s.ts;
        }
    }
    if peer.last_ack.is_none_or(|l| after(ack, l)) {
        peer.last_ack = Some(ack);
        peer.holes.acked(ack);
        if peer.snd_una.is_none_or(|u| after(ack, u)) {
            peer.snd_una = Some(ack);
        }
        // Karn, as tcptrace applies it: a sample only from the segment this ACK ends at
        // exactly, and only if that segment was never retransmitted (an ACK that jumps
        // over a repaired hole says nothing about the segments it covers).
        let mut sample = None;
        let mut covers_retransmitted = false;
        while let Some(sg) = peer.sent.front() {
            if after(sg.end, ack) {
                break;
            }
            covers_retransmitted |= sg.retransmitted;
            sample = (sg.end == ack && !covers_retransmitted).then(|| s.ts - sg.ts);
            peer.sent.pop_front();
        }
        // The segments the next ACKs cover were sent a round trip ago (as in
        // `settle_due`): asked for now.
        prefetch_value(peer.sent.get(1));
        prefetch_value(peer.sent.get(3));

        if let Some(x) = sample {
            peer.perf.data_ack_n += 1;
            peer.perf.data_ack_sum_ns += i128::from(x);
            peer.perf.add_loop(s.ts, x, series_ns);
        }
    }
    let scale = peer.perf.rcv_wscale.unwrap_or(0);
    // The scale is at most 14 (parse_opts_walk caps it): a scaled window is below 2^30.
    let wnd = u32::from(s.window) << scale;
    let sacked: u64 =
        sack.iter().filter(|(l, r)| after(*r, *l) && after(*r, ack)).map(|(l, r)| u64::from(r.wrapping_sub(*l))).sum();
    if peer.recover.is_some_and(|r| !after(r, ack)) {
        peer.recover = None;
    }
    // SACKed bytes beyond 2^32 - 1 leave no flight either (the flight is below 2^32).
    let sacked = u32::try_from(sacked).unwrap_or(u32::MAX);
    peer.pending.push_back(PendingAck { t: s.ts, ack, wnd, sacked, recovery: peer.recover.is_some() });
    peer.pending_from = peer.pending_from.min(s.ts);
    if peer.pending.len() > MAX_PENDING {
        // Due now: the next settle takes the oldest ([`MAX_PENDING`]).
        peer.pending_from = i64::MIN;
    }
}

/// Inlined into the segment's TCP analysis up to its usual answer.
#[inline(always)]
fn parse_opts(opts: &[u8]) -> Opts {
    // The options of almost every segment of an established connection: NOP, NOP,
    // timestamps (RFC 7323's recommended layout); parse_opts_walk gives the same answer.
    if let [1, 1, 8, 10, a0, a1, a2, a3, b0, b1, b2, b3] = *opts {
        let ts = Some((u32::from_be_bytes([a0, a1, a2, a3]), u32::from_be_bytes([b0, b1, b2, b3])));
        return Opts { ts, ..Opts::default() };
    }
    parse_opts_walk(opts)
}

/// Every option, in order (RFC 9293 3.2: kinds 0 and 1 are one byte, the others
/// kind-length-value; a malformed length ends the walk). SACK blocks past
/// [`MAX_SACK_BLOCKS`] cannot be in a TCP header's options and are not read.
#[inline(never)]
fn parse_opts_walk(opts: &[u8]) -> Opts {
    let mut o = Opts::default();
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => break,
            1 => i += 1,
            k => {
                let Some(&l) = opts.get(i + 1) else { break };
                let l = l as usize;
                if l < 2 || i + l > opts.len() {
                    break;
                }
                let v = &opts[i + 2..i + l];
                match (k, l) {
                    (8, 10) => {
                        o.ts = Some((
                            u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
                            u32::from_be_bytes([v[4], v[5], v[6], v[7]]),
                        ))
                    }
                    (3, 3) => o.ws = Some(v[0].min(14)),
                    (5, _) => {
                        for b in v.chunks_exact(8) {
                            let Some(slot) = o.sack.get_mut(usize::from(o.sacks)) else { break };
                            *slot = (
                                u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                                u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
                            );
                            o.sacks += 1;
                        }
                    }
                    _ => {}
                }
                i += l;
            }
        }
    }
    o
}

/// What one segment tells the TCP analysis.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegInfo<'a> {
    pub ts: i64,
    pub seq: u32,
    pub ack: u32,
    pub syn: bool,
    pub has_ack: bool,
    pub len: u32,
    pub window: u16,
    pub options: &'a [u8],
}

/// Both directions of a connection.
#[derive(Debug)]
pub(crate) struct ConnPerf {
    pub dirs: [DirState; 2],
    /// Interval of the loop series, ns.
    series_ns: i64,
    /// One-way delays from the loops (see `loop_owd`), and the sample counts they were
    /// computed at.
    owd_cache: ([i64; 2], [u64; 2]),
    /// The one-way delays the captured handshake gives, once it gave them (they do not
    /// change after: each handshake time is set once).
    handshake_owd: Option<[i64; 2]>,
}

impl Default for ConnPerf {
    fn default() -> Self {
        Self::new(DEFAULT_SERIES_NS)
    }
}

impl DirPerf {
    /// Records a loop sample taken at capture time `t`.
    fn add_loop(&mut self, t: i64, x: i64, series_ns: i64) {
        self.loops.add(x as f64);
        self.recent_loops.push(x);
        self.loop_series.slot(
            t,
            series_ns,
            || LoopBucket { min: x, sum: 0, n: 0 },
            |b| {
                b.min = b.min.min(x);
                b.sum += x;
                b.n += 1;
            },
        );
    }

    /// Running median of the latest loop samples, ns ([`RecentLoops`]).
    fn recent_loop(&mut self) -> Option<i64> {
        self.recent_loops.median()
    }
}

impl ConnPerf {
    /// Both directions, with a loop series per `series_ns`.
    pub(crate) fn new(series_ns: i64) -> Self {
        Self { dirs: Default::default(), series_ns: series_ns.max(1), owd_cache: ([0, 0], [0, 0]), handshake_owd: None }
    }

    /// Its series interval, ns.
    pub(crate) fn series_ns(&self) -> i64 {
        self.series_ns
    }

    /// Keeps its series at `series_ns` from now on, re-bucketing what it has.
    pub(crate) fn coarsen(&mut self, series_ns: i64) {
        self.series_ns = series_ns;
        for d in &mut self.dirs {
            d.perf.coarsen(series_ns);
        }
    }

    /// One-way delay between the capture point and each direction's sender: from the
    /// handshake when `capture_point` gives it (kept from then on: asking the connection
    /// costs three optional times and two halvings, on every segment), else
    /// [`ConnPerf::loop_owd`].
    pub(crate) fn sender_owd(&mut self, capture_point: impl FnOnce() -> Option<CapturePoint>) -> [i64; 2] {
        if let Some(owd) = self.handshake_owd {
            return owd;
        }
        if let Some(cp) = capture_point() {
            let owd = [cp.active_owd_ns, cp.passive_owd_ns];
            self.handshake_owd = Some(owd);
            return owd;
        }
        // Direction d's sender sits on the loop measured for the reverse direction's data.
        self.loop_owd()
    }

    /// One-way delay between the capture point and each direction's sender, half the
    /// median loop measured on the reverse direction's data; recomputed as the samples
    /// grow by a thirty-second (the sketch's median costs a walk over its buckets).
    fn loop_owd(&mut self) -> [i64; 2] {
        let n = [self.dirs[1].perf.loops.count(), self.dirs[0].perf.loops.count()];
        let (owd, at) = &mut self.owd_cache;
        for d in 0..2 {
            if n[d] != at[d] && (n[d] < 64 || n[d] >= at[d] + at[d] / 32) {
                let p = &self.dirs[1 - d].perf.loops;
                owd[d] = p.quantile(0.5).map_or(0, |x| x as i64 / 2);
                at[d] = n[d];
            }
        }
        *owd
    }
    /// One segment from direction `d` (0/1). Inlined into the flow table's one call a
    /// segment.
    #[inline(always)]
    pub(crate) fn on_segment(&mut self, d: usize, s: &SegInfo<'_>) {
        let opts = parse_opts(s.options);
        let (ts_opt, ws) = (opts.ts, opts.ws);
        let [a, b] = &mut self.dirs;
        let (me, peer) = if d == 0 { (a, b) } else { (b, a) };
        if s.syn {
            if let Some(w) = ws {
                // My window scale applies to the windows I advertise for the peer's data.
                peer.perf.rcv_wscale = Some(w);
            }
        }
        // TCP timestamps: a TSval first seen now; an echo closes the peer's loop.
        if let Some((tsval, tsecr)) = ts_opt {
            on_timestamps(me, peer, tsval, tsecr, s.ts, self.series_ns);
        }
        // Data of this direction.
        if s.len > 0 || s.syn {
            on_data(me, peer, s, self.series_ns);
        }
        // This segment's ACK field acknowledges the peer's data.
        if s.has_ack {
            on_ack(me, peer, s, opts.sack(), self.series_ns);
        }
    }

    /// Resolves pending in-flight samples whose look-ahead window has passed (`now`), or
    /// all of them at the end. `owd` gives each direction's sender one-way delay from the
    /// capture point.
    ///
    /// Inline up to that test for both directions: on most segments neither has a sample
    /// due, and the call and its frame were most of `settle`'s cost per segment.
    #[inline]
    pub(crate) fn settle(&mut self, now: i64, owd: [i64; 2], all: bool) {
        let due = |d: usize| self.dirs[d].pending_from.saturating_add(2 * owd[d]) <= now;
        if all || due(0) || due(1) {
            self.settle_due(now, owd, all);
        }
    }

    /// [`ConnPerf::settle`] once a direction may have a sample due.
    #[inline(never)]
    fn settle_due(&mut self, now: i64, owd: [i64; 2], all: bool) {
        let series_ns = self.series_ns;
        for (d, st) in self.dirs.iter_mut().enumerate() {
            let look = 2 * owd[d];
            if !all && st.pending_from.saturating_add(look) > now {
                continue;
            }
            while let Some(&PendingAck { t, ack, wnd, sacked, recovery }) = st.pending.front() {
                if !all && t + look > now && st.pending.len() <= MAX_PENDING {
                    st.pending_from = t;
                    break;
                }
                st.pending.pop_front();
                // What the sender had sent when this ACK reached it: the highest sequence
                // the capture sees up to `look` later.
                let horizon = t + look;
                while st.max_hist.len() > 1 && st.max_hist[1].0 <= horizon && st.max_hist[0].0 < t {
                    st.max_hist.pop_front();
                    st.hist_hint = st.hist_hint.saturating_sub(1);
                }
                let k = entries_upto(&st.max_hist, st.hist_hint, horizon);
                st.hist_hint = k;
                let sent = k.checked_sub(1).map(|i| st.max_hist[i].1);
                if let Some(m) = sent {
                    let inflight = if after(m, ack) {
                        u64::from(m.wrapping_sub(ack)).saturating_sub(u64::from(sacked))
                    } else {
                        0
                    };
                    st.perf.inflight_max = st.perf.inflight_max.max(inflight);
                    st.perf
                        .add_flight(&FlightSample { t, flight: inflight, rwnd: u64::from(wnd), recovery }, series_ns);
                }
            }
            if st.pending.is_empty() {
                st.pending_from = i64::MAX;
            }
            // What the next due ACKs read (the queue's next entries and the history's
            // oldest) was written a look-ahead ago, and a capture streamed through the
            // cache since: asked for now, an ACK or two ahead, it is there when it is
            // read.
            prefetch_value(st.pending.get(1));
            prefetch_value(st.pending.get(3));
            prefetch_value(st.max_hist.get(1));
            prefetch_value(st.max_hist.get(4));
        }
    }

    /// End of the connection's data: window scale inference when the SYN was missing.
    pub(crate) fn finish(&mut self) {
        for d in 0..2 {
            let peer_raw_max = self.dirs[1 - d].max_raw_window;
            let p = &mut self.dirs[d].perf;
            if p.rcv_wscale.is_none() && peer_raw_max > 0 {
                // Without the SYN, the scale is unknown; windows are shown raw and flagged.
                p.wscale_inferred = true;
            }
        }
    }
}

/// How many entries of `hist` (ascending in time) are at or before `horizon`, searching
/// forward from `hint` (the answer for an earlier horizon) a few steps before falling
/// back to a binary search: the same answer as `partition_point`, in O(1) for the
/// usual ACK.
fn entries_upto(hist: &VecDeque<(i64, u32)>, hint: usize, horizon: i64) -> usize {
    const STEPS: usize = 8;
    if hint <= hist.len() && (hint == 0 || hist[hint - 1].0 <= horizon) {
        let mut k = hint;
        while k < hist.len() && k < hint + STEPS {
            if hist[k].0 > horizon {
                return k;
            }
            k += 1;
        }
        if k == hist.len() {
            return k;
        }
    }
    hist.partition_point(|(ht, _)| *ht <= horizon)
}

/// Median of a slice (ns).
pub fn median(v: &[i64]) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    Some(s[s.len() / 2])
}

/// Quantile of a slice (nearest rank).
pub fn quantile(v: &[i64], q: f64) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let i = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    Some(s[i])
}

/// Summary of one direction for reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirSummaryPerf {
    /// Loop (capture → receiver → capture) min / median / p95, ns.
    pub loop_min_ns: Option<i64>,
    /// Median loop.
    pub loop_p50_ns: Option<i64>,
    /// 95th percentile loop.
    pub loop_p95_ns: Option<i64>,
    /// Mean data→ACK time at the capture point (tcptrace's "RTT avg"), ns.
    pub data_ack_avg_ns: Option<f64>,
    /// Data→ACK samples.
    pub data_ack_samples: usize,
}

impl DirPerf {
    /// Summary statistics.
    pub fn summary(&self) -> DirSummaryPerf {
        DirSummaryPerf {
            loop_min_ns: self.loops.min().map(|x| x as i64),
            loop_p50_ns: self.loops.quantile(0.5).map(|x| x as i64),
            loop_p95_ns: self.loops.quantile(0.95).map(|x| x as i64),
            data_ack_avg_ns: (self.data_ack_n > 0).then(|| self.data_ack_sum_ns as f64 / self.data_ack_n as f64),
            data_ack_samples: self.data_ack_n as usize,
        }
    }

    /// Re-buckets the three series at `series_ns`, a multiple of the interval they were
    /// kept at: each new bucket merges the old ones it covers (see `MAX_SERIES_INTERVALS`).
    pub(crate) fn coarsen(&mut self, series_ns: i64) {
        self.loop_series.regroup(series_ns, |a, b| LoopBucket {
            min: a.min.min(b.min),
            sum: a.sum + b.sum,
            n: a.n + b.n,
        });
        self.tx_series.regroup(series_ns, |a, b| TxBucket {
            bytes: a.bytes + b.bytes,
            segments: a.segments + b.segments,
            retransmits: a.retransmits + b.retransmits,
        });
        self.flight_series.regroup(series_ns, |a, b| FlightBucket {
            max_flight: a.max_flight.max(b.max_flight),
            cwnd: a.cwnd.max(b.cwnd),
            // The later bucket's last advertised window (the merge goes in time order).
            rwnd: if b.samples > 0 { b.rwnd } else { a.rwnd },
            samples: a.samples + b.samples,
            recovery: a.recovery + b.recovery,
        });
    }

    /// Adds a bytes-in-flight sample to the series; the idle time that restarts the
    /// window estimate is max(200 ms, 2 × the running loop median).
    fn add_flight(&mut self, s: &FlightSample, series_ns: i64) {
        let recent = &mut self.recent_loops;
        let c = self.cwnd.add(s, || (2 * recent.median().unwrap_or(0)).max(MIN_RTO_NS));
        self.flight_series.slot(s.t, series_ns, FlightBucket::default, |b| b.add(s, c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The NOP-NOP-timestamps shortcut answers as the walk over the options does, on
        /// that layout with any values and on any other bytes (kinds 0-8 and lengths near
        /// theirs, so that timestamps, window scale and SACK blocks come up often).
        #[test]
        fn test_parse_opts_shortcut_is_the_walk(
            tsval in proptest::prelude::any::<u32>(),
            tsecr in proptest::prelude::any::<u32>(),
            noise in proptest::collection::vec(proptest::prop_oneof![0u8..12, proptest::prelude::any::<u8>()], 0..40),
            cut in 0usize..13,
        ) {
            let mut usual = vec![1, 1, 8, 10];
            usual.extend_from_slice(&tsval.to_be_bytes());
            usual.extend_from_slice(&tsecr.to_be_bytes());
            proptest::prop_assert_eq!(parse_opts(&usual), Opts { ts: Some((tsval, tsecr)), ..Opts::default() });
            proptest::prop_assert_eq!(parse_opts(&usual[..cut]), parse_opts_walk(&usual[..cut]));
            let mut longer = usual.clone();
            longer.extend_from_slice(&noise);
            proptest::prop_assert_eq!(parse_opts(&longer), parse_opts_walk(&longer));
            proptest::prop_assert_eq!(parse_opts(&noise), parse_opts_walk(&noise));
        }
    }

    /// Options written out by hand (RFC 7323, 2018, 9293): a SYN's MSS, SACK permitted,
    /// timestamps, NOP and window scale; four SACK blocks in one option after NOP-NOP, and
    /// four in two options (the most 40 bytes hold); a scale above 14 capped.
    #[test]
    fn test_parse_opts_hand_written() {
        let syn = [2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 7, 0, 0, 0, 0, 1, 3, 3, 7];
        assert_eq!(parse_opts(&syn), Opts { ts: Some((7, 0)), ws: Some(7), ..Opts::default() });
        let block = |l: u32, r: u32| [l.to_be_bytes(), r.to_be_bytes()].concat();
        let mut one = vec![1, 1, 5, 34];
        (0..4).for_each(|i| one.extend(block(100 * i, 100 * i + 50)));
        let four = [(0, 50), (100, 150), (200, 250), (300, 350)];
        assert_eq!(parse_opts(&one).sack(), &four);
        let mut two = vec![5, 18];
        (0..2).for_each(|i| two.extend(block(100 * i, 100 * i + 50)));
        two.extend([5, 18]);
        (2..4).for_each(|i| two.extend(block(100 * i, 100 * i + 50)));
        assert_eq!(two.len(), 36);
        let o = parse_opts(&two);
        assert_eq!((o.sack(), o.ts, o.ws), (&four[..], None, None));
        assert_eq!(parse_opts(&[3, 3, 15]).ws, Some(14));
        // A length past the end stops the walk; what came before stays.
        assert_eq!(parse_opts(&[3, 3, 2, 5, 10, 0]), Opts { ws: Some(2), ..Opts::default() });
    }

    proptest::proptest! {
        /// The running median worked out when asked is the median the eager way kept: the
        /// latest 64 samples sorted at each of the first 16 samples and every 16th, held
        /// in between; asked after any sample (or not), any number of times.
        #[test]
        fn test_recent_loops_median_is_the_eager_refresh(
            steps in proptest::collection::vec((0i64..1000, 0u8..4), 0..300),
        ) {
            let mut lazy = RecentLoops::default();
            let (mut window, mut seen, mut eager) = (VecDeque::new(), 0u64, None);
            proptest::prop_assert_eq!(lazy.median(), None);
            for (x, asks) in steps {
                lazy.push(x);
                if window.len() == RECENT_LOOPS {
                    window.pop_front();
                }
                window.push_back(x);
                seen += 1;
                if seen < RECENT_REFRESH || seen % RECENT_REFRESH == 0 {
                    let mut v: Vec<i64> = window.iter().copied().collect();
                    v.sort_unstable();
                    eager = Some(v[v.len() / 2]);
                }
                for _ in 0..asks {
                    proptest::prop_assert_eq!(lazy.median(), eager, "after {} samples", seen);
                }
                proptest::prop_assert_eq!(lazy.latest(), window.iter().copied().collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn test_entries_upto_is_partition_point_from_any_hint() {
        // Times with repeats, every horizon around them, every hint (right, stale, past
        // the end): the answer never depends on the hint.
        let hist: VecDeque<(i64, u32)> =
            [1, 3, 3, 4, 8, 9, 9, 9, 10, 15, 16, 17, 18, 19, 20, 21, 22, 23, 40].iter().map(|&t| (t, 0)).collect();
        for horizon in -1..45 {
            let want = hist.partition_point(|(t, _)| *t <= horizon);
            for hint in 0..=hist.len() + 2 {
                assert_eq!(entries_upto(&hist, hint, horizon), want, "horizon {horizon} hint {hint}");
            }
        }
        assert_eq!(entries_upto(&VecDeque::new(), 0, 5), 0);
    }

    fn ts_opts(tsval: u32, tsecr: u32) -> Vec<u8> {
        let mut o = vec![1, 1, 8, 10];
        o.extend_from_slice(&tsval.to_be_bytes());
        o.extend_from_slice(&tsecr.to_be_bytes());
        o
    }

    #[test]
    fn test_cwnd_held_through_recovery_and_idle() {
        let fs = |t: i64, flight: u64, recovery: bool| FlightSample { t, flight, rwnd: 1 << 20, recovery };
        let mut p = DirPerf::default();
        for s in [
            fs(0, 100, false),
            fs(10, 300, false),
            fs(20, 150, false), // application-limited: the window is still 300
            fs(30, 900, true),  // recovery: the old flight, not the window
            fs(40, 120, false), // after recovery: restart from the new flight
            fs(45, 200, false),
            fs(300_000_000, 50, false), // after an idle gap > 200 ms: restart
        ] {
            p.add_flight(&s, 10);
        }
        let got: Vec<(i64, u64, u64)> = p.flight_series.iter().map(|(t, b)| (*t, b.cwnd, b.max_flight)).collect();
        assert_eq!(
            got,
            vec![(0, 100, 100), (10, 300, 300), (20, 300, 150), (30, 0, 0), (40, 200, 200), (300_000_000, 50, 50)]
        );
        assert_eq!(p.flight_series[&30].recovery, 1);
    }

    #[test]
    fn test_halves_add_up_to_rtt() {
        // Capture 3 ms from the sender (dir 0), 7 ms from the receiver: RTT 20 ms.
        let mut c = ConnPerf::default();
        let mut feed = |d: usize, ts: i64, seq: u32, ack: u32, len: u32, tsval: u32, tsecr: u32| {
            let o = ts_opts(tsval, tsecr);
            c.on_segment(d, &SegInfo { ts, seq, ack, syn: false, has_ack: true, len, window: 1000, options: &o });
        };
        // Sender data at t=0 (TSval 100) → receiver ACK seen at 14 ms (echo 100, TSval 500)
        // → sender's next data at 14 + 6 = 20 ms echoes 500.
        feed(0, 0, 1000, 1, 100, 100, 0);
        feed(1, 14_000_000, 1, 1100, 0, 500, 100);
        feed(0, 20_000_000, 1100, 1, 100, 120, 500);
        let half_r: Vec<i64> = c.dirs[0].perf.recent_loops.latest();
        let half_s: Vec<i64> = c.dirs[1].perf.recent_loops.latest();
        assert_eq!(half_r, vec![14_000_000, 14_000_000]);
        assert_eq!(half_s, vec![6_000_000]);
        assert_eq!((c.dirs[0].perf.data_ack_n, c.dirs[0].perf.data_ack_sum_ns), (1, 14_000_000));
        // The sketch and the series hold the same samples: both at 14 ms in interval 0,
        // the sender's loop in the interval of 20 ms.
        assert_eq!(c.dirs[0].perf.loops.count(), 2);
        assert_eq!(c.dirs[0].perf.loop_series[&0], LoopBucket { min: 14_000_000, sum: 28_000_000, n: 2 });
        assert_eq!(c.dirs[1].perf.loop_series[&0], LoopBucket { min: 6_000_000, sum: 6_000_000, n: 1 });
        // The loops give each sender's one-way delay: half the reverse direction's loop.
        assert_eq!(c.loop_owd(), [3_000_000, 7_000_000]);
    }

    #[test]
    fn test_tsval_repeated_after_its_echo_is_not_new() {
        let mut c = ConnPerf::default();
        let mut feed = |d: usize, ts: i64, seq: u32, ack: u32, len: u32, tsval: u32, tsecr: u32| {
            let o = ts_opts(tsval, tsecr);
            c.on_segment(d, &SegInfo { ts, seq, ack, syn: false, has_ack: true, len, window: 1000, options: &o });
        };
        // An ACK with TSval 500, echoed 10 µs later; the next ACK, in the same millisecond,
        // carries 500 again, and the peer's next data still echoes 500 (TS.Recent): no sample.
        feed(1, 0, 1, 1000, 0, 500, 100);
        feed(0, 10_000, 1000, 1, 100, 101, 500);
        feed(1, 20_000, 1, 1100, 0, 500, 101);
        feed(0, 21_000, 1100, 1, 100, 101, 500);
        let loops: Vec<i64> = c.dirs[1].perf.recent_loops.latest();
        assert_eq!(loops, vec![10_000]);
    }

    #[test]
    fn test_retransmission_causes() {
        let mut c = ConnPerf::default();
        let f = |c: &mut ConnPerf, d: usize, ts: i64, seq: u32, ack: u32, len: u32| {
            c.on_segment(d, &SegInfo { ts, seq, ack, syn: false, has_ack: true, len, window: 100, options: &[] });
        };
        for i in 0..5 {
            f(&mut c, 0, i, 1000 + 100 * i as u32, 1, 100);
        }
        // Three duplicate ACKs for 1100, then the fast retransmit of 1100.
        for i in 0..4 {
            f(&mut c, 1, 10 + i, 1, 1100, 0);
        }
        f(&mut c, 0, 20, 1100, 1, 100);
        assert_eq!(c.dirs[0].perf.dup_acks, 3);
        assert_eq!(c.dirs[0].perf.retransmits, 1);
        assert_eq!(c.dirs[0].perf.retransmits_fast, 1);
        // A retransmission of acknowledged data is spurious.
        f(&mut c, 1, 30, 1, 1500, 0);
        f(&mut c, 0, 40, 1000, 1, 100);
        assert_eq!(c.dirs[0].perf.retransmits_spurious, 1);
    }

    /// One direction captured alone (no ACK of its data ever seen): the sent-sequence
    /// history keeps what an ACK could still need, not an entry per data segment.
    #[test]
    fn test_history_of_a_direction_without_acks_is_trimmed() {
        let mut c = ConnPerf::default();
        // 1 µs apart: 10 ms of history is 10,000 entries, within MAX_HIST.
        let us = 1_000i64;
        for i in 0..300_000u32 {
            let seg = SegInfo {
                ts: i64::from(i) * us,
                seq: i.wrapping_mul(1000),
                ack: 1,
                syn: false,
                has_ack: true,
                len: 1000,
                window: 100,
                options: &[],
            };
            c.on_segment(0, &seg);
            c.settle(seg.ts, [0, 0], false);
            let h = &c.dirs[0].max_hist;
            // 10 ms of segments, and the entries added since the last trim.
            assert!(h.len() <= 10_000 + HIST_TRIM_EVERY + 1, "segment {i}: {} entries", h.len());
        }
        let h = &c.dirs[0].max_hist;
        let (first, last) = (h.front().unwrap().0, h.back().unwrap().0);
        assert_eq!(last, 299_999 * us);
        // The entry in force 10 ms before the last trim is the first kept.
        assert!(last - first <= HIST_TRIM_SLACK_NS + HIST_TRIM_EVERY as i64 * us, "{first} {last}");
        assert!(last - first >= HIST_TRIM_SLACK_NS, "{first} {last}");
        // The ACKs this direction's segments carry (of the peer's data, none) are settled.
        assert!(c.dirs[1].pending.is_empty());
    }

    /// A history within the slack but longer than MAX_HIST (10 ns apart): capped, and the
    /// deque's capacity with it.
    #[test]
    fn test_history_is_capped() {
        let mut c = ConnPerf::default();
        for i in 0..200_000u32 {
            let ts = i64::from(i) * 10;
            let seg =
                SegInfo { ts, seq: i * 100, ack: 1, syn: false, has_ack: true, len: 100, window: 100, options: &[] };
            c.on_segment(0, &seg);
            c.settle(ts, [0, 0], false);
        }
        let h = &c.dirs[0].max_hist;
        assert_eq!(h.len(), MAX_HIST);
        assert!(h.capacity() <= MAX_HIST, "{}", h.capacity());
        assert_eq!(h.back().map(|e| e.1), Some(200_000 * 100));
    }

    /// A look-ahead of hours (a loop that claims so): the ACKs waiting for it stay within
    /// MAX_PENDING, the oldest settled on the history seen so far; none is lost.
    #[test]
    fn test_acks_awaiting_a_huge_look_ahead_are_bounded() {
        let mut c = ConnPerf::default();
        let hour = 3_600_000_000_000i64;
        let n = MAX_PENDING as u32 + 10_000;
        for i in 0..n {
            let t = i64::from(i) * 1_000;
            // Data from direction 0, acknowledged at once by direction 1.
            let data =
                SegInfo { ts: t, seq: i * 100, ack: 1, syn: false, has_ack: true, len: 100, window: 100, options: &[] };
            c.on_segment(0, &data);
            c.settle(t, [hour, hour], false);
            let ack = SegInfo {
                ts: t + 500,
                seq: 1,
                ack: (i + 1) * 100,
                syn: false,
                has_ack: true,
                len: 0,
                window: 100,
                options: &[],
            };
            c.on_segment(1, &ack);
            c.settle(t + 500, [hour, hour], false);
            assert!(c.dirs[0].pending.len() <= MAX_PENDING, "ACK {i}: {}", c.dirs[0].pending.len());
        }
        // The ACKs past the bound were settled early, each on the history up to the ACK
        // that pushed it out, MAX_PENDING ACKs (of 100 bytes each) later.
        let early: u32 = c.dirs[0].perf.flight_series.values().map(|b| b.samples).sum();
        assert_eq!(early, 10_000);
        assert_eq!(c.dirs[0].perf.inflight_max, MAX_PENDING as u64 * 100);
        c.settle(i64::from(n) * 1_000, [hour, hour], true);
        let all: u32 = c.dirs[0].perf.flight_series.values().map(|b| b.samples).sum();
        assert_eq!(all, n);
        assert!(c.dirs[0].pending.is_empty());
    }

    /// A capture next to the receiver (direction 1): the receiver's ACKs come 0.1 ms after
    /// the data, the sender's 30 ms after the receiver's. The sender's segment 1100..1200 is
    /// lost before the capture point; 1200..1400 come first, then the filler at `fill_ts`.
    fn hole_filled_at(fill_ts: i64) -> ConnPerf {
        let ms = 1_000_000i64;
        let f = |c: &mut ConnPerf, d: usize, ts: i64, seq: u32, ack: u32, len: u32| {
            c.on_segment(d, &SegInfo { ts, seq, ack, syn: false, has_ack: true, len, window: 100, options: &[] });
        };
        let mut c = ConnPerf::default();
        f(&mut c, 1, 0, 1, 1000, 10);
        f(&mut c, 0, 30 * ms, 1000, 11, 100);
        f(&mut c, 1, 30 * ms + ms / 10, 11, 1100, 0);
        f(&mut c, 0, 31 * ms, 1200, 11, 100);
        f(&mut c, 0, 31 * ms + 10, 1300, 11, 100);
        f(&mut c, 1, 31 * ms + ms / 10, 11, 1100, 0);
        f(&mut c, 1, 31 * ms + ms / 10 + 10, 11, 1100, 0);
        f(&mut c, 0, fill_ts, 1100, 11, 100);
        f(&mut c, 1, fill_ts + ms / 10, 11, 1400, 0);
        c
    }

    #[test]
    fn test_hole_filled_a_round_trip_later_is_an_upstream_retransmission() {
        let c = hole_filled_at(61_000_000);
        let p = &c.dirs[0].perf;
        assert_eq!((p.retransmits, p.retransmits_upstream, p.out_of_order), (1, 1, 0));
        assert_eq!(p.bytes_retransmitted, 100);
        assert_eq!(p.dup_acks, 2);
        // Its delay: from the first segment beyond the hole (31 ms) to the filler (61 ms).
        assert_eq!(p.upstream_delays.count(), 1);
        assert_eq!(p.upstream_delays.max(), Some(30_000_000.0));
        // In the interval series as well.
        assert_eq!(p.tx_series.values().map(|b| b.retransmits).sum::<u32>(), 1);
        // Karn: the ACK that jumps over the repaired hole gives no sample; only the first
        // data→ACK (0.1 ms) counts.
        assert_eq!((p.data_ack_n, p.data_ack_sum_ns), (1, 100_000));
    }

    #[test]
    fn test_hole_filled_within_the_reordering_window_is_out_of_order() {
        // Half the smallest round trip is (0.1 + 30) / 2 ms: a filler 0.5 ms after the hole
        // opened was reordered, not resent.
        let c = hole_filled_at(31_500_000);
        let p = &c.dirs[0].perf;
        assert_eq!((p.retransmits, p.retransmits_upstream, p.out_of_order), (0, 0, 1));
        assert_eq!(p.bytes_retransmitted, 0);
        assert_eq!(p.upstream_delays.count(), 0);
        assert_eq!((p.data_ack_n, p.data_ack_sum_ns), (1, 100_000));
    }

    #[test]
    fn test_holes_split_and_forget() {
        let mut h = Holes::default();
        h.open(100, 200, 5);
        h.open(300, 400, 7);
        // A filler in the middle of the first hole leaves both ends.
        assert_eq!(h.fill(120, 150), Some(5));
        assert_eq!(h.list.iter().copied().collect::<Vec<_>>(), vec![(100, 120, 5), (150, 200, 5), (300, 400, 7)]);
        // One spanning both holes reports the earlier opening.
        assert_eq!(h.fill(110, 350), Some(5));
        assert_eq!(h.fill(110, 350), None);
        // The receiver acknowledged bytes the capture missed: those holes will not fill.
        h.acked(380);
        assert_eq!(h.list.iter().copied().collect::<Vec<_>>(), vec![(380, 400, 7)]);
        h.acked(400);
        assert!(h.list.is_empty());
    }
}
