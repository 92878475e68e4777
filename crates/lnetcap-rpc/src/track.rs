//! The RPC tracker: LNet messages in, RPC records out.
//!
//! This file holds the index store (open RPCs in slots; handles carry the RPC's id, so a
//! handle left behind by a finished RPC is detected, not followed; every index bounded by
//! a limit in limits.rs and expired by capture time), the dispatch of each message by
//! type and portal, and what all protocols share (bulk data, replies by handle, parked
//! bulk waiting for its request, closing and emitting RPCs). One matcher per protocol:
//! [`ptlrpc`] (Lustre RPCs by XID), [`selftest`] (lst BRW and ping by reply and bulk id),
//! [`ping`] (LNet ping and discovery), [`cut`] (headers the snaplen cut short);
//! [`summary`] makes the per-pair report.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};

use lnetcap_lnet::message::{App, Body, Message};
use lnetcap_lnet::names::{
    is_bulk_portal, is_reply_portal, is_request_portal, LNET_RESERVED_PORTAL, SRPC_FRAMEWORK_REQUEST_PORTAL,
    SRPC_RDMA_PORTAL, SRPC_REQUEST_PORTAL,
};
use lnetcap_lnet::nid::Nid;
use lnetcap_lnet::record::Hex;
use lnetcap_lnet::wire::consts::{KSOCK_NOOP, PING_MATCHBITS};
use lnetcap_lnet::wire::{KsockHdr, LnetDetail, LnetHdr, Wmd};
use lnetcap_tcp::{CapturePoint, Connection, Dir, Endpoint};

use crate::limits::{
    EMIT_DELAY_NS, MAX_ACK_HANDLES, MAX_BULK_MDS, MAX_FINISHED_RPCS, MAX_GET_HANDLES, MAX_NID_NAMES, MAX_OPEN_RPCS,
    MAX_PEERS, MAX_PENDING_RPC_STEPS, MAX_ZC_PENDING, REORDER_HORIZON_NS, RPC_IDLE_TIMEOUT_NS, STEP_TOLERANCE_NS,
    STEP_TOLERANCE_PER_LOOP, SUSTAINED_NS,
};
use crate::report::{IntervalRow, MessagesDirection, Missing, Phases, RpcRecord};
use crate::stats::{regroup_index, Log2Hist, Quantiles, StepSeries};

mod cut;
mod ping;
mod ptlrpc;
mod selftest;
mod summary;
mod xids;

/// Schema version of [`RpcRecord`].
pub const RPC_SCHEMA_VERSION: u32 = 1;

/// Tracker options.
#[derive(Debug, Clone)]
pub struct RpcConfig {
    /// Time-series interval, ns.
    pub interval_ns: i64,
}

impl Default for RpcConfig {
    fn default() -> Self {
        Self { interval_ns: lnetcap_tcp::perf::DEFAULT_SERIES_NS }
    }
}

use crate::report::RpcKind as Kind;

/// Key of an RPC: (client NID, server NID, XID / rpyid / match bits).
type Key = (Nid, Nid, u64);

/// What an open RPC has gathered: the fields of its [`RpcRecord`] the matchers fill in.
/// The rest (the NIDs as text, latency, phases, `partial`) is derived when it closes, so an
/// open RPC costs what it must remember and no more (ARCHITECTURE.md, "Memory under attack").
#[derive(Clone, Default)]
struct Draft {
    id: u64,
    xid: Option<Hex>,
    opc: Option<u32>,
    opc_name: Option<Cow<'static, str>>,
    op: Option<&'static str>,
    portal: Option<u32>,
    bytes: u64,
    bulk_messages: u32,
    t_start_ns: Option<i64>,
    t_req_end_ns: Option<i64>,
    t_bulk_start_ns: Option<i64>,
    t_bulk_end_ns: Option<i64>,
    t_reply_ns: Option<i64>,
    t_end_ns: Option<i64>,
    t_reply_ack_ns: Option<i64>,
    early_replies: u32,
    resends: u32,
    status: Option<i32>,
    service_time_s: Option<u32>,
    jobid: Option<String>,
    missing: Vec<Missing>,
    first_frame: u64,
}

impl Draft {
    /// The record of the RPC once closed: the client's and server's NIDs as text (`names`),
    /// latency and phases from the times, `partial` from what is missing.
    fn into_record(self, kind: Kind, names: (Arc<str>, Arc<str>), client_owd_ns: i64) -> RpcRecord {
        // `request_body`, `bulk_unknown` and `xid_high_bits` say what could not be seen, not
        // that a part of the RPC is known to be missing.
        let partial = self.missing.iter().any(|m| m.makes_partial());
        let latency_us = us(self.t_start_ns, self.t_end_ns);
        let bulk_anchor = if self.t_bulk_end_ns.is_some() { self.t_bulk_end_ns } else { self.t_req_end_ns };
        let phases = Phases {
            request_us: us(self.t_start_ns, self.t_req_end_ns),
            server_wait_us: us(self.t_req_end_ns, self.t_bulk_start_ns),
            bulk_us: us(self.t_bulk_start_ns, self.t_bulk_end_ns),
            server_us: us(bulk_anchor, self.t_reply_ns),
            reply_us: us(self.t_reply_ns, self.t_end_ns),
        };
        RpcRecord {
            schema_version: RPC_SCHEMA_VERSION,
            id: self.id,
            file: None,
            client_nid: names.0,
            server_nid: names.1,
            kind,
            xid: self.xid,
            opc: self.opc,
            opc_name: self.opc_name,
            op: self.op,
            portal: self.portal,
            bytes: self.bytes,
            bulk_messages: self.bulk_messages,
            t_start_ns: self.t_start_ns,
            t_req_end_ns: self.t_req_end_ns,
            t_bulk_start_ns: self.t_bulk_start_ns,
            t_bulk_end_ns: self.t_bulk_end_ns,
            t_reply_ns: self.t_reply_ns,
            t_end_ns: self.t_end_ns,
            t_reply_ack_ns: self.t_reply_ack_ns,
            latency_us,
            client_latency_us: latency_us.map(|l| l + 2.0 * client_owd_ns as f64 / 1000.0),
            phases,
            early_replies: self.early_replies,
            resends: self.resends,
            status: self.status,
            service_time_s: self.service_time_s,
            jobid: self.jobid,
            partial,
            missing: self.missing,
            first_frame: self.first_frame,
        }
    }
}

#[derive(Clone)]
struct Open {
    rec: Draft,
    kind: Kind,
    /// (client, server, XID / rpyid / match bits).
    key: Key,
    /// Bulk MDs announced by pb_mbits.
    n_md: Option<u64>,
    bulkid: Option<u64>,
    bulk_mbits_seen: Vec<u64>,
    reply_done: bool,
    awaiting_reply_ack: bool,
    last_ns: i64,
    counted_start: bool,
    /// When its +1 in the RPCs-in-flight series takes effect.
    rif_up_ns: i64,
    /// One-way delay from the capture point to the client (0 when unknown).
    client_owd_ns: i64,
    /// Bulk bytes announced (selftest brw_len, GET sink lengths).
    expected_bytes: u64,
    /// Finished (reply seen) at this capture time; reported EMIT_DELAY_NS later, so that a
    /// request inferred late can still join its reply.
    settled_at: Option<i64>,
}

/// The key of the state shared by peer pairs beyond MAX_PEERS: a NID no LND uses (size,
/// LND, net and address all 0xfe), twice.
pub(crate) const OVERFLOW_PEER: (Nid, Nid) = {
    const X: Nid = Nid { size: 0xfe, lnd: 0xfe, num: 0xfefe, addr: [0xfe; 16] };
    (X, X)
};

#[derive(Default, Clone)]
struct ConnTrack {
    /// Active end, passive end: formatted for the report only (a connection flood opens
    /// one ConnTrack a connection, on the merging thread of a parallel run).
    tcp: Option<[Endpoint; 2]>,
    active_is_client: Option<bool>,
    nid: [Option<Nid>; 2],
    hello_type: [Option<u32>; 2],
    small: [u64; 2],
    large: [u64; 2],
    noop: [u64; 2],
}

/// Peer states in the order they were made, with an index by key: the report walks them
/// in key order, and `Tracker::peer`'s memo reaches one by its position. States are never
/// removed: the memo's positions and its check of the number of pairs rely on it.
///
/// Looked up through `find`, a hash of the pair (foldhash, randomly seeded; never
/// iterated, so the order of nothing depends on it): a search of the ordered index
/// compared pairs of NIDs node after node, and `Tracker::peer` asks a dozen times per
/// RPC, the pairs of a busy server interleaved so that its memo of the last pair misses
/// on most of them.
#[derive(Clone, Default)]
struct Peers {
    index: BTreeMap<(Nid, Nid), usize>,
    find: HashMap<(Nid, Nid), usize>,
    states: Vec<PeerState>,
}

impl Peers {
    fn len(&self) -> usize {
        self.states.len()
    }

    fn get(&self, k: &(Nid, Nid)) -> Option<&PeerState> {
        self.find.get(k).map(|&i| &self.states[i])
    }

    fn get_mut(&mut self, k: &(Nid, Nid)) -> Option<&mut PeerState> {
        let i = *self.find.get(k)?;
        Some(&mut self.states[i])
    }

    /// The key the pair of `a` and `b` is kept under, (a, b) unless only (b, a) is
    /// known, and its state's position if it is known.
    fn lookup(&self, a: Nid, b: Nid) -> ((Nid, Nid), Option<usize>) {
        if let Some(&i) = self.find.get(&(a, b)) {
            return ((a, b), Some(i));
        }
        match self.find.get(&(b, a)) {
            Some(&i) => ((b, a), Some(i)),
            None => ((a, b), None),
        }
    }

    /// The position of `k`'s state, made by `make` if new.
    fn position_or_insert(&mut self, k: (Nid, Nid), make: impl FnOnce() -> PeerState) -> usize {
        if let Some(&i) = self.find.get(&k) {
            return i;
        }
        self.states.push(make());
        self.index.insert(k, self.states.len() - 1);
        self.find.insert(k, self.states.len() - 1);
        self.states.len() - 1
    }

    /// Every state, in the order they were made.
    fn values_mut(&mut self) -> impl Iterator<Item = &mut PeerState> {
        self.states.iter_mut()
    }

    /// Every state, in key order.
    fn values(&self) -> impl Iterator<Item = &PeerState> {
        self.index.values().map(|&i| &self.states[i])
    }

    /// Every key and state, in key order.
    fn iter(&self) -> impl Iterator<Item = (&(Nid, Nid), &PeerState)> {
        self.index.iter().map(|(k, &i)| (k, &self.states[i]))
    }
}

#[derive(Clone)]
struct PeerState {
    client: Nid,
    server: Nid,
    /// A selftest BRW RPC was seen (the pair is an `lst` run).
    selftest: bool,
    conns: Vec<u32>,
    rif: StepSeries,
    mif: [StepSeries; 2],
    mif_msgs: [u64; 2],
    mif_zc: [u64; 2],
    rpcs: u64,
    /// Bulk data messages of the complete RPCs.
    bulk_msgs: u64,
    partial: u64,
    missing: BTreeMap<Missing, u64>,
    /// RPCs by opcode name. Hashed, not ordered (the report sorts them): an ordered map
    /// compared names a dozen times a finished RPC, twice (this and `opc_latency`).
    by_opc: HashMap<String, u64>,
    bytes_read: u64,
    bytes_written: u64,
    latency: Quantiles,
    latency_hist: Log2Hist,
    pages: Log2Hist,
    phase: [Quantiles; 5],
    service: Quantiles,
    /// (t_end, bytes) of completed RPCs, per interval: bytes read, bytes written, count.
    completed: BTreeMap<i64, (u64, u64, u64)>,
    /// Bulk bytes per interval by the data message's last byte.
    bulk_read: BTreeMap<i64, u64>,
    bulk_write: BTreeMap<i64, u64>,
    first_ns: Option<i64>,
    last_ns: Option<i64>,
    /// Client latency and server phase per opcode name (at most MAX_OPCODES names).
    opc_latency: HashMap<String, (Quantiles, Quantiles)>,
    /// Shortest client latency of the pair's RPCs answered so far (i64::MAX before one).
    min_latency_ns: i64,
    /// Times of messages of the pair that could not be given to an RPC.
    uncertain: std::collections::BTreeSet<i64>,
    /// Spans when framing was lost on one of the pair's connections: (start, end; i64::MAX
    /// while still lost), keyed by (connection, direction) for the open ones.
    lost_spans: Vec<(i64, i64)>,
    open_spans: HashMap<(u32, usize), usize>,
}

/// `f` on `map[name]` (made with its default if absent): the name is copied only when
/// it is new (an RPC's opcode name, looked up twice an RPC, is nearly always there).
fn update<V: Default>(map: &mut HashMap<String, V>, name: &str, f: impl FnOnce(&mut V)) {
    if let Some(v) = map.get_mut(name) {
        f(v);
    } else {
        let mut v = V::default();
        f(&mut v);
        map.insert(name.to_owned(), v);
    }
}

impl PeerState {
    /// Messages in flight per direction (client → server, server → client).
    fn messages_directions(&self) -> Vec<MessagesDirection> {
        (0..2)
            .map(|d| {
                let s = &self.mif[d];
                let busy: i64 = s.time_at.iter().filter(|(l, _)| **l >= 1).map(|(_, t)| *t).sum();
                let max = s.sustained_max(SUSTAINED_NS);
                let at_max: i64 = if max >= 1 { s.time_at.range(max..).map(|(_, t)| *t).sum() } else { 0 };
                let below = s.time_at.get(&(max - 1)).copied().unwrap_or(0);
                let (from, to) = if d == 0 { (self.client, self.server) } else { (self.server, self.client) };
                MessagesDirection {
                    from: from.to_string(),
                    to: to.to_string(),
                    messages: self.mif_msgs[d],
                    zero_copy: self.mif_zc[d],
                    max,
                    mean: s.mean(),
                    time_at_max: if busy > 0 { at_max as f64 / busy as f64 } else { 0.0 },
                    time_below_max: if busy > 0 { below as f64 / busy as f64 } else { 0.0 },
                }
            })
            .collect()
    }

    /// The pair's time series, one row per interval with activity.
    fn series(&self, interval: i64) -> Vec<IntervalRow> {
        let mut series = Vec::new();
        let rif: BTreeMap<i64, _> = self.rif.intervals().collect();
        let m0: BTreeMap<i64, _> = self.mif[0].intervals().collect();
        let m1: BTreeMap<i64, _> = self.mif[1].intervals().collect();
        let mut ts: Vec<i64> = rif.keys().chain(m0.keys()).chain(m1.keys()).copied().collect();
        ts.extend(self.bulk_read.keys().map(|i| i * interval));
        ts.extend(self.bulk_write.keys().map(|i| i * interval));
        ts.sort_unstable();
        ts.dedup();
        let per_s = 1e9 / interval as f64;
        for t in ts {
            let idx = t.div_euclid(interval);
            let r = rif.get(&t).copied().unwrap_or_default();
            series.push(IntervalRow {
                t_ns: t,
                read_bytes_per_s: self.bulk_read.get(&idx).copied().unwrap_or(0) as f64 * per_s,
                write_bytes_per_s: self.bulk_write.get(&idx).copied().unwrap_or(0) as f64 * per_s,
                rpcs_completed: self.completed.get(&idx).map_or(0, |c| c.2),
                rpcs_in_flight_mean: r.mean,
                rpcs_in_flight_max: r.max,
                messages_in_flight_max_c2s: m0.get(&t).map_or(0, |x| x.max),
                messages_in_flight_max_s2c: m1.get(&t).map_or(0, |x| x.max),
            });
        }
        series
    }

    /// A finished RPC's share of the pair's statistics: missing parts, counts, latency
    /// by opcode, pages, phases and service time (complete RPCs only).
    fn tally(&mut self, rec: &RpcRecord) {
        self.selftest |= rec.kind == Kind::LstBrw;
        for m in &rec.missing {
            *self.missing.entry(*m).or_default() += 1;
        }
        if rec.partial {
            self.partial += 1;
        } else {
            self.rpcs += 1;
            self.bulk_msgs += u64::from(rec.bulk_messages);
            if let Some(l) = rec.client_latency_us {
                let name = rec.opc_name.as_deref().unwrap_or("unknown");
                let name = if self.opc_latency.len() >= MAX_OPCODES && !self.opc_latency.contains_key(name) {
                    "other"
                } else {
                    name
                };
                update(&mut self.opc_latency, name, |q| {
                    q.0.add(l);
                    if let Some(sv) = rec.phases.server_us {
                        q.1.add(sv);
                    }
                });
                self.latency.add(l);
                self.latency_hist.tally(l.round() as u64);
            }
            if rec.bytes > 0 {
                self.pages.tally(rec.bytes.div_ceil(4096));
            }
            let ph = rec.phases;
            // Where some of the bulk may have gone unseen, its start and end are not known:
            // only the request and reply phases count.
            let bulk_known = !rec.missing.contains(&Missing::BulkUnknown);
            for (k, v) in
                [ph.request_us, ph.server_wait_us, ph.bulk_us, ph.server_us, ph.reply_us].into_iter().enumerate()
            {
                if let Some(v) = v.filter(|_| bulk_known || k == 0 || k == 4) {
                    self.phase[k].add(v);
                }
            }
            if let Some(s) = rec.service_time_s {
                self.service.add(f64::from(s));
            }
        }
    }

    fn new(client: Nid, server: Nid, interval: i64) -> Self {
        Self {
            client,
            server,
            selftest: false,
            conns: Vec::new(),
            rif: StepSeries::new(interval).with_tolerance(STEP_TOLERANCE_NS).with_cap(MAX_PENDING_RPC_STEPS),
            mif: [
                StepSeries::new(interval).with_tolerance(STEP_TOLERANCE_NS),
                StepSeries::new(interval).with_tolerance(STEP_TOLERANCE_NS),
            ],
            mif_msgs: [0; 2],
            mif_zc: [0; 2],
            rpcs: 0,
            bulk_msgs: 0,
            partial: 0,
            missing: BTreeMap::new(),
            by_opc: HashMap::new(),
            bytes_read: 0,
            bytes_written: 0,
            latency: Quantiles::default(),
            latency_hist: Log2Hist::default(),
            pages: Log2Hist::default(),
            phase: Default::default(),
            service: Quantiles::default(),
            completed: BTreeMap::new(),
            bulk_read: BTreeMap::new(),
            bulk_write: BTreeMap::new(),
            first_ns: None,
            opc_latency: HashMap::new(),
            min_latency_ns: i64::MAX,
            last_ns: None,
            uncertain: std::collections::BTreeSet::new(),
            lost_spans: Vec::new(),
            open_spans: HashMap::new(),
        }
    }
}

/// A bulk message that arrived before its request was known (the request was inferred
/// later, in a run of lost bytes).
#[derive(Clone)]
struct Orphan {
    client: Nid,
    server: Nid,
    mb: u64,
    first_ns: i64,
    last_ns: i64,
    what: Parked,
}

#[derive(Clone)]
enum Parked {
    /// Bulk data (PUT of a read).
    Data { len: u32, ack_wmd: Wmd, sender: Nid },
    /// A GET of a write.
    Get { wmd: Wmd, sink: u32, sender: Nid },
    /// The REPLY to a parked GET (write data).
    Reply { len: u32 },
}

/// `gets` index of a GET parked before its request: its order is kept from its arrival,
/// and `parked_gets` says whose it is.
const PARKED: Handle = Handle { slot: usize::MAX, id: u64::MAX };

/// An index's reference to an open RPC: its slot and the id of the RPC the slot held when
/// the entry was made (a generation): an entry whose RPC finished, and whose slot a later
/// RPC took, no longer resolves ([`Tracker::resolve`]) rather than reaching the wrong RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Handle {
    slot: usize,
    id: u64,
}

/// The slot of a live handle.
fn resolve(slots: &[Option<Box<Open>>], h: Handle) -> Option<usize> {
    slots.get(h.slot)?.as_ref().filter(|o| o.rec.id == h.id).map(|_| h.slot)
}

/// Inferred REPLYs of one connection direction and the order of the GET the last decoded
/// REPLY answered.
#[derive(Default, Clone)]
struct ReplyRun {
    /// (client, server): the REPLYs' sender and receiver.
    nids: Option<(Nid, Nid)>,
    last_seq: u64,
    /// (first byte, last byte, payload length).
    pending: Vec<(i64, i64, u32)>,
}

/// Opcode names a pair keeps latencies for (more than Lustre has opcodes).
const MAX_OPCODES: usize = 256;

/// Most inferred REPLYs waiting for the end of their run on one connection.
const MAX_INFERRED_PENDING: usize = 4096;

/// A zero-copy message waiting for its ZC-ACK: (peer pair, direction, sender's one-way
/// delay from the capture point, capture time of the message).
type ZcPending = ((Nid, Nid), usize, i64, i64);

/// What `Tracker::peer` was last asked, and its answer while no pair is added.
#[derive(Clone, Copy)]
struct PeerMemo {
    /// (client, server) as asked.
    asked: (Nid, Nid),
    /// Their `Tracker::peer_key`.
    key: (Nid, Nid),
    /// The position of the pair's state.
    at: usize,
    /// Asking again counts a use of the aggregate past MAX_PEERS.
    overflow: bool,
    /// Pairs then.
    pairs: usize,
}

/// Rebuilds RPCs and in-flight series from decoded messages. Clone: a live view finishes
/// a copy to report the capture as if it ended now.
#[derive(Clone)]
pub struct Tracker {
    cfg: RpcConfig,
    next_id: u64,
    /// Boxed: a free slot costs a pointer, and the vector's doubling doubles pointers.
    slots: Vec<Option<Box<Open>>>,
    free: Vec<usize>,
    by_key: HashMap<Key, usize>,
    /// PtlRPC XIDs of open RPCs, for bulk/reply match-bit ranges: (client, server) → that
    /// pair's XIDs, in order; a pair leaves with its last XID.
    xid_pairs: HashMap<(Nid, Nid), xids::PairXids>,
    /// Selftest bulkids of open RPCs.
    bulkids: HashMap<Key, usize>,
    /// GET return_wmd → (RPC, order, sink length) (the REPLY carries it as dst_wmd):
    /// keyed by (GET sender, wmd).
    gets: HashMap<(Nid, Wmd), (Handle, u64, u32)>,
    get_seq: u64,
    /// GETs parked before their request (in `gets` as PARKED): (GET sender, wmd) →
    /// (client, server, match bits).
    parked_gets: HashMap<(Nid, Wmd), (Nid, Nid, u64)>,
    /// RPCs waiting to be reported: (ready at, slot, RPC id).
    settling: std::collections::VecDeque<(i64, usize, u64)>,
    /// ZC-ACKs whose message was not reported yet (inferred later): (sender, acker,
    /// cookie) → capture time of the ACK.
    zc_early: HashMap<(Nid, Nid, u64), i64>,
    /// Bulk messages waiting for their request.
    orphans: Vec<Orphan>,
    /// Inferred REPLYs waiting for the decoded REPLY that ends their run, per (connection,
    /// direction).
    reply_runs: HashMap<(u32, usize), ReplyRun>,
    /// Per client: the largest power of two (≤ 128) dividing every PtlRPC XID it sent, an
    /// upper bound of PTLRPC_BULK_OPS_COUNT and so of an RPC's MDs.
    xid_align: HashMap<Nid, u64>,
    /// PUT ack_wmd → RPC (the LNet ACK carries it): (PUT sender, wmd), is the reply.
    acks: HashMap<(Nid, Wmd), (Handle, bool)>,
    conns: BTreeMap<u32, ConnTrack>,
    /// Peer states by (client, server).
    peers: Peers,
    /// Zero-copy messages waiting for their ZC-ACK: (sender, receiver, cookie) → peer
    /// direction.
    zc_pending: HashMap<(Nid, Nid, u64), ZcPending>,
    now_ns: i64,
    last_expiry_ns: i64,
    /// A full index is pruned again no sooner than this (capture time).
    prune_again_ns: i64,
    /// Messages that belong to no RPC, by reason.
    pub unmatched: BTreeMap<&'static str, u64>,
    capture_points: HashMap<u32, CapturePoint>,
    /// RPCs built from headers cut by the snaplen, per pair, in request order.
    cut: HashMap<(Nid, Nid), cut::CutPair>,
    /// RPCs evicted from a full open index (see `evict_oldest`).
    evicted: u64,
    /// Finished RPCs reported before their emit delay was over: beyond
    /// `MAX_FINISHED_RPCS`, or to make room in a full open index (see `make_room`).
    emitted_early: u64,
    /// Finished RPCs held (`settling` also keeps entries of RPCs closed otherwise: a
    /// replaced ping, a reused XID).
    finished: usize,
    /// Folded connections forgotten so far (see `forget_folded`).
    forgotten: usize,
    /// Uses of the untracked pairs' aggregate (see `peer`).
    overflow_uses: u64,
    /// NIDs' text forms for the records (at most [`MAX_NID_NAMES`]).
    nid_names: HashMap<Nid, Arc<str>>,
    /// The last pair `peer` was asked for.
    peer_memo: Option<PeerMemo>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("open", &self.by_key.len())
            .field("peers", &self.peers.len())
            .finish_non_exhaustive()
    }
}

/// A selftest reply's status.
fn srpc_status(app: &App) -> Option<i32> {
    match app {
        App::Srpc(s) => s.status.map(|x| x as i32),
        _ => None,
    }
}

fn us(a: Option<i64>, b: Option<i64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b >= a => Some((b - a) as f64 / 1000.0),
        _ => None,
    }
}

impl Tracker {
    /// A tracker.
    pub fn new(cfg: RpcConfig) -> Self {
        Self {
            cfg,
            next_id: 0,
            slots: Vec::new(),
            free: Vec::new(),
            by_key: HashMap::new(),
            xid_pairs: HashMap::new(),
            bulkids: HashMap::new(),
            gets: HashMap::new(),
            get_seq: 0,
            parked_gets: HashMap::new(),
            settling: std::collections::VecDeque::new(),
            zc_early: HashMap::new(),
            orphans: Vec::new(),
            xid_align: HashMap::new(),
            reply_runs: HashMap::new(),
            acks: HashMap::new(),
            conns: BTreeMap::new(),
            peers: Peers::default(),
            zc_pending: HashMap::new(),
            now_ns: i64::MIN,
            last_expiry_ns: i64::MIN,
            prune_again_ns: i64::MIN,
            unmatched: BTreeMap::new(),
            capture_points: HashMap::new(),
            cut: HashMap::new(),
            evicted: 0,
            emitted_early: 0,
            finished: 0,
            overflow_uses: 0,
            nid_names: HashMap::new(),
            peer_memo: None,
            forgotten: 0,
        }
    }

    /// The key a pair's state is kept under. A peer is an unordered NID pair: RPCs in
    /// either direction (an LNet ping or push from the server, say) belong to the pair the
    /// first RPC or message between the two NIDs named (client, server).
    fn peer_key(&self, a: Nid, b: Nid) -> (Nid, Nid) {
        if let Some(m) = self.memo_for((a, b)) {
            return m.key;
        }
        self.peers.lookup(a, b).0
    }

    /// The memo of the last question, if it was `asked` and no pair was added since
    /// (looked at where it is: a copy of the memo, about 100 bytes, on every question was
    /// most of a remembered answer's cost).
    #[inline]
    fn memo_for(&self, asked: (Nid, Nid)) -> Option<&PeerMemo> {
        self.peer_memo.as_ref().filter(|m| m.asked == asked && m.pairs == self.peers.len())
    }

    /// A NID's text form, from the cache of [`MAX_NID_NAMES`].
    fn nid_name(&mut self, n: Nid) -> Arc<str> {
        if let Some(s) = self.nid_names.get(&n) {
            return Arc::clone(s);
        }
        if self.nid_names.len() >= MAX_NID_NAMES {
            self.nid_names.clear();
        }
        let s: Arc<str> = n.to_string().into();
        self.nid_names.insert(n, Arc::clone(&s));
        s
    }

    /// The state of the pair of `client` and `server` (made if new). The key it is kept
    /// under is remembered for the next call with the same NIDs (a message asks several
    /// times): it depends only on which pairs exist, and pairs are only ever added.
    #[inline]
    fn peer(&mut self, client: Nid, server: Nid) -> &mut PeerState {
        let at = match self.memo_for((client, server)).map(|m| (m.at, m.overflow)) {
            Some((at, overflow)) => {
                if overflow {
                    self.overflow_uses += 1;
                }
                at
            }
            None => self.peer_asked(client, server),
        };
        &mut self.peers.states[at]
    }

    /// [`Tracker::peer`] of a question not remembered: the pair's position (made if new,
    /// or the aggregate's past MAX_PEERS), remembered. Out of line, so that a remembered
    /// answer is a comparison and an index, not a call that makes room for this one.
    #[cold]
    #[inline(never)]
    fn peer_asked(&mut self, client: Nid, server: Nid) -> usize {
        let (key, found) = self.peers.lookup(client, server);
        let (mut c, mut s) = key;
        let overflow = found.is_none() && self.peers.len() >= MAX_PEERS;
        if overflow {
            // Past the limit, new pairs share one state that is never reported as a
            // pair.
            self.overflow_uses += 1;
            (c, s) = OVERFLOW_PEER;
        }
        let interval = self.cfg.interval_ns;
        let at = match found {
            Some(at) => at,
            None => self.peers.position_or_insert((c, s), || PeerState::new(c, s, interval)),
        };
        // The same question again overflows again, unless it named the aggregate's
        // own key (a capture can carry its NIDs), which now exists.
        let again = overflow && key != OVERFLOW_PEER;
        self.peer_memo = Some(PeerMemo { asked: (client, server), key, at, overflow: again, pairs: self.peers.len() });
        at
    }

    /// Times a message or RPC of a pair beyond MAX_PEERS was folded into the untracked
    /// aggregate.
    pub fn overflow_uses(&self) -> u64 {
        self.overflow_uses
    }

    fn note_uncertain(&mut self, a: Nid, b: Nid, ts: i64) {
        if let Some(pk) = self.peer_of(a, b) {
            let p = self.peer(pk.0, pk.1);
            if p.uncertain.len() < MAX_OPEN_RPCS {
                p.uncertain.insert(ts);
            }
        }
    }

    fn unmatched(&mut self, why: &'static str) {
        *self.unmatched.entry(why).or_default() += 1;
    }

    /// One decoded message (in the order the decoder reports them). Finished RPCs are
    /// appended to `out`.
    pub fn on_message(&mut self, m: &Message, conn: &Connection, out: &mut Vec<RpcRecord>) {
        self.now_ns = self.now_ns.max(m.last.ts_ns);
        if let Some(cp) = conn.capture_point() {
            self.capture_points.insert(conn.id.0, cp);
        }
        let d = m.dir.index();
        let ct = self
            .conns
            .entry(conn.id.0)
            .or_insert_with(|| ConnTrack { tcp: Some(conn.endpoints), ..ConnTrack::default() });
        match &m.body {
            Body::Hello(h) => {
                ct.nid[d] = Some(h.src_nid);
                ct.hello_type[d] = Some(h.conn_type);
                if let Some(dst) = h.dst_nid {
                    ct.nid[1 - d].get_or_insert(dst);
                }
            }
            Body::Connreq(c) => {
                ct.nid[1 - d].get_or_insert(c.target_nid);
            }
            Body::Noop(k) => {
                ct.noop[d] += 1;
                let (me, peer) = (ct.nid[d], ct.nid[1 - d]);
                if let (Some(me), Some(peer)) = (me, peer) {
                    self.zc_acked(peer, me, k, m.last.ts_ns);
                }
            }
            Body::Lnet { ksock, hdr, app } => {
                ct.nid[d] = Some(hdr.src_nid);
                ct.nid[1 - d].get_or_insert(hdr.dest_nid);
                if m.wire_len >= 1024 {
                    ct.large[d] += 1;
                } else {
                    ct.small[d] += 1;
                }
                if let Some(k) = ksock {
                    if k.zc_ack_cookie != 0 {
                        self.zc_acked(hdr.dest_nid, hdr.src_nid, k, m.last.ts_ns);
                    }
                }
                self.on_lnet(m, conn, hdr, ksock.as_ref(), app, out);
            }
        }
        self.emit_settled(out);
        if self.now_ns > self.last_expiry_ns.saturating_add(1_000_000_000) {
            self.last_expiry_ns = self.now_ns;
            self.expire(out);
        }
    }

    /// Whether the capture point of connection `conn` is known (from its handshake, or
    /// given by [`Tracker::note_capture_point`]).
    pub fn knows_capture_point(&self, conn: u32) -> bool {
        self.capture_points.contains_key(&conn)
    }

    /// The capture point of a connection whose handshake was not captured, estimated from
    /// its RTT loops (`tcp::capture_point_from_loops`). Without it, times are rebuilt as if
    /// the capture had been taken at both ends at once.
    pub fn note_capture_point(&mut self, conn: u32, cp: CapturePoint) {
        self.capture_points.entry(conn).or_insert(cp);
    }

    /// A framing event: while framing is lost on a connection of a pair, messages of its RPCs
    /// may go unseen.
    pub fn on_framing(&mut self, conn: u32, dir: usize, ts: i64, lost: bool) {
        let Some(ct) = self.conns.get(&conn) else { return };
        let (Some(a), Some(b)) = (ct.nid[0], ct.nid[1]) else { return };
        let Some((c, s)) = self.peer_of(a, b) else { return };
        let p = self.peer(c, s);
        if lost {
            if !p.open_spans.contains_key(&(conn, dir)) && p.lost_spans.len() < MAX_OPEN_RPCS {
                p.open_spans.insert((conn, dir), p.lost_spans.len());
                p.lost_spans.push((ts, i64::MAX));
            }
        } else if let Some(i) = p.open_spans.remove(&(conn, dir)) {
            p.lost_spans[i].1 = ts;
        }
    }

    /// Cookies acknowledged by a ksock header sent by `acker` to `sender`.
    fn zc_acked(&mut self, sender: Nid, acker: Nid, k: &KsockHdr, ts: i64) {
        let h = KsockHdr { msg_type: KSOCK_NOOP, ..*k };
        let cookies = if k.msg_type == KSOCK_NOOP {
            k.acked_cookies()
        } else {
            KsockHdr { zc_req_cookie: 0, ..h }.acked_cookies()
        };
        for c in cookies {
            if let Some((pk, dir, owd, _)) = self.zc_pending.remove(&(sender, acker, c)) {
                // The sender gets the ZC-ACK one one-way delay after the capture point.
                if let Some(p) = self.peers.get_mut(&pk) {
                    p.mif[dir].push(ts + owd, -1);
                }
            } else if self.zc_early.len() < MAX_OPEN_RPCS {
                self.zc_early.insert((sender, acker, c), ts);
            }
        }
    }

    /// One-way delay from the capture point to the sender of a message on `conn`.
    fn sender_owd(&self, conn: &Connection, dir: Dir) -> i64 {
        self.capture_points.get(&conn.id.0).map_or(0, |cp| match dir {
            Dir::FromActive => cp.active_owd_ns,
            Dir::FromPassive => cp.passive_owd_ns,
        })
    }

    fn roles(&self, hdr: &LnetHdr, client_sends: bool) -> (Nid, Nid) {
        if client_sends {
            (hdr.src_nid, hdr.dest_nid)
        } else {
            (hdr.dest_nid, hdr.src_nid)
        }
    }

    /// The open RPC index is full. Finished RPCs waiting out their emit delay (up to
    /// `MAX_FINISHED_RPCS` of them) make room first: reported at once, complete, the
    /// longest waiting first, down to seven eighths of the index (the room an eviction
    /// makes); as the least recently active, the eviction would take them first and report
    /// complete RPCs as partial. Only when none is finished are unfinished ones
    /// evicted ([`Tracker::evict_oldest`]).
    fn make_room(&mut self, out: &mut Vec<RpcRecord>) {
        let room = MAX_OPEN_RPCS - MAX_OPEN_RPCS / 8;
        while self.by_key.len() > room {
            let Some((ready, i, id)) = self.settling.pop_front() else { break };
            if resolve(&self.slots, Handle { slot: i, id }).is_some() {
                self.emitted_early += u64::from(ready > self.now_ns);
                self.close(i, out, None);
            }
        }
        if self.by_key.len() >= MAX_OPEN_RPCS {
            self.evict_oldest(out);
        }
    }

    /// The open RPC index is full and no RPC in it is finished: the eighth least
    /// recently active are reported as partial (`evicted`), in one pass so that a flood
    /// of requests never answered costs a scan per MAX_OPEN_RPCS / 8 requests, not per
    /// request.
    fn evict_oldest(&mut self, out: &mut Vec<RpcRecord>) {
        let mut open: Vec<(i64, usize)> =
            self.by_key.values().filter_map(|&i| self.slots[i].as_ref().map(|o| (o.last_ns, i))).collect();
        if open.is_empty() {
            return;
        }
        let n = (MAX_OPEN_RPCS / 8).clamp(1, open.len());
        open.select_nth_unstable(n - 1);
        open.truncate(n);
        open.sort_unstable();
        for (_, i) in open {
            self.evicted += 1;
            self.close(i, out, Some(Missing::Evicted));
        }
    }

    /// The interval of its series, ns.
    pub fn interval_ns(&self) -> i64 {
        self.cfg.interval_ns
    }

    /// Keeps every pair's series at `interval_ns` (a multiple of the current interval)
    /// from now on, merging what was kept into the coarser intervals; the decode
    /// pipeline's series coarsen at the same time (`Pipeline::series_interval_ns`).
    pub fn coarsen(&mut self, interval_ns: i64) {
        let old = self.cfg.interval_ns;
        if interval_ns == old {
            return;
        }
        self.cfg.interval_ns = interval_ns;
        for p in self.peers.values_mut() {
            p.rif.coarsen(interval_ns);
            for s in &mut p.mif {
                s.coarsen(interval_ns);
            }
            regroup_index(&mut p.completed, old, interval_ns, |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
            regroup_index(&mut p.bulk_read, old, interval_ns, |a, b| a + b);
            regroup_index(&mut p.bulk_write, old, interval_ns, |a, b| a + b);
        }
    }

    /// Forgets what it kept of connections the decoder folded (they carried only setup,
    /// so no RPC or peer refers to them): `folded` is the pipeline's list of folded ids.
    pub fn forget_folded(&mut self, folded: &[u32]) {
        for &id in folded.get(self.forgotten..).unwrap_or_default() {
            self.forget_conn(id);
        }
        self.forgotten = folded.len();
    }

    /// [`forget_folded`](Self::forget_folded) given the list it was last given with
    /// `id` after it: for a caller that sees connections fold one at a time and need not
    /// keep the list (a parallel run's merge: a list of every connection folded grew with
    /// the capture, 4 bytes each, 4 MB under a flood of a million).
    pub fn forget_one_folded(&mut self, id: u32) {
        self.forget_conn(id);
        self.forgotten += 1;
    }

    /// What the tracker keeps of a connection, dropped once it is folded.
    fn forget_conn(&mut self, id: u32) {
        self.conns.remove(&id);
        self.capture_points.remove(&id);
    }

    /// RPCs reported as partial because the open RPC index was full.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Steps of the pairs' in-flight series applied before `REORDER_HORIZON_NS` had passed,
    /// more than `MAX_PENDING_STEPS` (`MAX_PENDING_RPC_STEPS`) being held in a series.
    pub fn steps_applied_early(&self) -> u64 {
        self.peers.states.iter().flat_map(|p| [&p.rif, &p.mif[0], &p.mif[1]]).map(|s| s.applied_early).sum()
    }

    /// Finished RPCs reported before `EMIT_DELAY_NS` was over: more than
    /// `MAX_FINISHED_RPCS` were held, or the open RPC index was full.
    pub fn emitted_early(&self) -> u64 {
        self.emitted_early
    }

    fn new_rpc(&mut self, kind: Kind, key: Key, m: &Message, out: &mut Vec<RpcRecord>) -> usize {
        if self.by_key.len() >= MAX_OPEN_RPCS {
            self.make_room(out);
        }
        let rec = Draft { id: self.next_id, xid: Some(Hex(key.2)), first_frame: m.first.frame, ..Draft::default() };
        self.next_id += 1;
        let open = Box::new(Open {
            rec,
            kind,
            key,
            n_md: None,
            bulkid: None,
            bulk_mbits_seen: Vec::new(),
            reply_done: false,
            awaiting_reply_ack: false,
            last_ns: m.last.ts_ns,
            counted_start: false,
            rif_up_ns: i64::MIN,
            client_owd_ns: 0,
            expected_bytes: 0,
            settled_at: None,
        });
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(open);
                i
            }
            None => {
                self.slots.push(Some(open));
                self.slots.len() - 1
            }
        };
        self.by_key.insert(key, i);
        if kind == Kind::Ptlrpc {
            self.index_xid(key, i);
        }
        self.peer(key.0, key.1);
        i
    }

    fn slot(&mut self, i: usize) -> &mut Open {
        // INVARIANT: indexes in the maps always point at occupied slots (close() removes
        // them before freeing the slot).
        self.slots[i].as_mut().expect("open RPC slot")
    }

    /// Indexes an open PtlRPC RPC's XID (replacing the RPC that had its key, if any).
    fn index_xid(&mut self, key: Key, i: usize) {
        self.xid_pairs.entry((key.0, key.1)).or_default().insert(key.2, i);
    }

    /// Forgets the XID index entry of `key`.
    fn unindex_xid(&mut self, key: Key) {
        let Some(pair) = self.xid_pairs.get_mut(&(key.0, key.1)) else { return };
        if pair.remove(key.2).is_some() && pair.is_empty() {
            self.xid_pairs.remove(&(key.0, key.1));
        }
    }

    /// Finds the PtlRPC RPC whose bulk match bits range holds `mb`.
    fn ptl_by_bulk(&self, client: Nid, server: Nid, mb: u64) -> Option<usize> {
        let (xid, i) = self.xid_pairs.get(&(client, server))?.at_or_below(mb)?;
        let o = self.slots[i].as_ref()?;
        // Without pb_mbits, an RPC's MDs cannot reach the next XID: XIDs advance by
        // PTLRPC_BULK_OPS_COUNT (16, 64 or 128), so every XID is a multiple of it.
        let n = o.n_md.unwrap_or_else(|| self.xid_align.get(&client).copied().unwrap_or(16).min(MAX_BULK_MDS));
        (mb - xid < n).then_some(i)
    }

    fn request(&mut self, kind: Kind, key: Key, m: &Message, owd: i64, out: &mut Vec<RpcRecord>) -> usize {
        let i = match self.by_key.get(&key) {
            Some(&i) if self.slots[i].as_ref().is_some_and(|o| !o.reply_done) => {
                // The same XID again before the reply: a resend.
                let o = self.slot(i);
                if o.rec.t_start_ns.is_some() {
                    o.rec.resends += 1;
                    return i;
                }
                i
            }
            Some(&i) if self.slots[i].as_ref().is_some_and(|o| o.rec.t_start_ns.is_none()) => {
                // The reply came first and the request only now (it was inferred in a run
                // of lost bytes): one RPC.
                let o = self.slot(i);
                o.rec.missing.retain(|x| *x != Missing::Request);
                i
            }
            Some(&i) => {
                // A new RPC reusing a finished one's id: report the old one first.
                self.close(i, out, None);
                self.new_rpc(kind, key, m, out)
            }
            None => self.new_rpc(kind, key, m, out),
        };
        let o = self.slot(i);
        o.rec.t_start_ns = Some(m.first.ts_ns);
        o.rec.t_req_end_ns = Some(m.last.ts_ns);
        o.rec.first_frame = o.rec.first_frame.min(m.first.frame);
        o.last_ns = m.last.ts_ns;
        o.client_owd_ns = owd;
        // The client sent the first byte one one-way delay before the capture point saw it.
        let start = m.first.ts_ns - owd;
        let (pk, counted) = ((o.key.0, o.key.1), o.counted_start);
        // RPCs in flight are the client's window: an RPC the pair's server sends its client
        // (a ping, a push) is one of the pair's RPCs but not in that window, and neither is
        // an LNet ping (LNet's own, outside PtlRPC's max_rpcs_in_flight).
        if !counted && kind != Kind::LnetPing && self.peer_key(pk.0, pk.1) == pk {
            self.slot(i).counted_start = true;
            let p = self.peer(pk.0, pk.1);
            p.rif.widen_tolerance(2 * owd / STEP_TOLERANCE_PER_LOOP);
            // The step tolerance keeps a slot freed and taken again from counting twice:
            // before the pair's first reply no slot was freed, and after it the tolerance
            // never outlasts a tenth of the shortest RPC (RPCs of a few hundred µs,
            // metadata on a LAN, would otherwise leave flight before they entered it).
            let lag = if p.min_latency_ns == i64::MAX { 0 } else { p.min_latency_ns / 10 };
            let up = p.rif.push_up(start, lag);
            p.first_ns = Some(p.first_ns.map_or(start, |f| f.min(start)));
            self.slot(i).rif_up_ns = up;
        }
        i
    }

    fn on_lnet(
        &mut self,
        m: &Message,
        conn: &Connection,
        hdr: &LnetHdr,
        ksock: Option<&KsockHdr>,
        app: &App,
        out: &mut Vec<RpcRecord>,
    ) {
        let zc_cookie = ksock.map_or(0, |k| k.zc_req_cookie);
        let owd = self.sender_owd(conn, m.dir);
        let Some(detail) = hdr.detail else {
            match hdr.cut {
                Some(cut) => {
                    let pk = self.on_cut(m, hdr, cut, owd, out);
                    self.in_flight(m, conn, hdr, zc_cookie, pk);
                }
                None => {
                    self.unmatched("header_partial");
                    // A message of this pair that no RPC can claim: RPCs around it may be
                    // missing parts without knowing it.
                    self.note_uncertain(hdr.src_nid, hdr.dest_nid, m.first.ts_ns);
                }
            }
            return;
        };
        let peer_dir = match detail {
            LnetDetail::Put { match_bits, ptl_index, offset, ack_wmd, .. } => {
                self.on_put(m, hdr, app, match_bits, ptl_index, offset, ack_wmd, owd, out)
            }
            LnetDetail::Get { match_bits, ptl_index, return_wmd, sink_length, .. } => {
                self.on_get(m, hdr, match_bits, ptl_index, return_wmd, sink_length, owd, out)
            }
            LnetDetail::Reply { dst_wmd } => self.on_reply(m, hdr, dst_wmd, conn.id.0),
            LnetDetail::Ack { dst_wmd, match_bits, mlength } => self.on_ack(m, hdr, dst_wmd, match_bits, mlength),
            _ => None,
        };
        self.in_flight(m, conn, hdr, zc_cookie, peer_dir);
    }

    /// Messages in flight: +1 at the first byte; −1 at the ZC-ACK (zero copy) or at the
    /// last byte (send complete when handed to the socket).
    fn in_flight(
        &mut self,
        m: &Message,
        conn: &Connection,
        hdr: &LnetHdr,
        zc_cookie: u64,
        peer_dir: Option<(Nid, Nid)>,
    ) {
        let owd = self.sender_owd(conn, m.dir);
        let pk = match peer_dir {
            Some((c, s)) => Some(self.peer_key(c, s)),
            None => self.peer_of(hdr.src_nid, hdr.dest_nid),
        };
        if let Some((client, server)) = pk {
            let dir = usize::from(hdr.src_nid != client);
            let horizon = self.now_ns - REORDER_HORIZON_NS;
            // In the sender's time: it wrote the first byte one one-way delay before the
            // capture point saw it.
            let p = self.peer(client, server);
            p.mif_msgs[dir] += 1;
            if zc_cookie != 0 {
                p.mif_zc[dir] += 1;
                match self.zc_early.remove(&(hdr.src_nid, hdr.dest_nid, zc_cookie)) {
                    // Acknowledged before the (inferred) message was reported.
                    Some(ack) => self.peer(client, server).mif[dir].push_interval(m.first.ts_ns - owd, ack + owd),
                    None => {
                        self.peer(client, server).mif[dir].push(m.first.ts_ns - owd, 1);
                        self.insert_zc(
                            (hdr.src_nid, hdr.dest_nid, zc_cookie),
                            ((client, server), dir, owd, m.last.ts_ns),
                        );
                    }
                }
            } else {
                p.mif[dir].push_interval(m.first.ts_ns - owd, m.last.ts_ns - owd);
            }
            let p = self.peer(client, server);
            p.mif[dir].advance(horizon);
            p.rif.advance(horizon);
            if !p.conns.contains(&conn.id.0) {
                p.conns.push(conn.id.0);
            }
            let active_is_client = conn_side_is(conn, m.dir, hdr.src_nid == client);
            if let Some(ct) = self.conns.get_mut(&conn.id.0) {
                ct.active_is_client.get_or_insert(active_is_client);
            }
        }
    }

    /// The peer pair (client, server) for a message between two NIDs, if one is known.
    fn peer_of(&self, a: Nid, b: Nid) -> Option<(Nid, Nid)> {
        let (key, found) = self.peers.lookup(a, b);
        found.map(|_| key)
    }

    #[allow(clippy::too_many_arguments)]
    fn on_put(
        &mut self,
        m: &Message,
        hdr: &LnetHdr,
        app: &App,
        mb: u64,
        portal: u32,
        offset: u32,
        ack_wmd: Wmd,
        owd: i64,
        out: &mut Vec<RpcRecord>,
    ) -> Option<(Nid, Nid)> {
        match portal {
            LNET_RESERVED_PORTAL => {
                self.unmatched("lnet_push");
                None
            }
            SRPC_REQUEST_PORTAL | SRPC_FRAMEWORK_REQUEST_PORTAL => self.srpc_request(m, hdr, app, portal, owd, out),
            SRPC_RDMA_PORTAL => self.srpc_rdma_put(m, hdr, app, mb, ack_wmd, out),
            p if is_bulk_portal(p) => self.ptlrpc_bulk_put(m, hdr, mb, ack_wmd),
            p if is_request_portal(p) => self.ptlrpc_request(m, hdr, app, mb, p, owd, out),
            p if is_reply_portal(p) => self.ptlrpc_reply(m, hdr, app, mb, offset, ack_wmd, out),
            _ => {
                self.unmatched("put_unknown_portal");
                None
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_get(
        &mut self,
        m: &Message,
        hdr: &LnetHdr,
        mb: u64,
        portal: u32,
        wmd: Wmd,
        sink: u32,
        owd: i64,
        out: &mut Vec<RpcRecord>,
    ) -> Option<(Nid, Nid)> {
        match portal {
            LNET_RESERVED_PORTAL if mb == PING_MATCHBITS => self.ping_get(m, hdr, wmd, sink, owd, out),
            SRPC_RDMA_PORTAL => self.srpc_get(m, hdr, mb, wmd, sink),
            p if is_bulk_portal(p) => self.ptlrpc_bulk_get(m, hdr, mb, wmd, sink),
            _ => {
                self.unmatched("get_unknown_portal");
                None
            }
        }
    }

    fn on_reply(&mut self, m: &Message, hdr: &LnetHdr, wmd: Wmd, conn: u32) -> Option<(Nid, Nid)> {
        let run_key = (conn, m.dir.index());
        if m.inferred {
            // An inferred REPLY carries no handle. The run it belongs to ends at the next
            // decoded REPLY on this connection: the run answers exactly the GETs between the
            // one the REPLY before it answered and the one the REPLY after it answers (a
            // client answers GETs in order). Wait for that REPLY.
            let run = self.reply_runs.entry(run_key).or_default();
            run.nids = Some((hdr.src_nid, hdr.dest_nid));
            if run.pending.len() < MAX_INFERRED_PENDING {
                run.pending.push((m.first.ts_ns, m.last.ts_ns, hdr.payload_length));
            } else {
                self.unmatched("reply_without_get");
            }
            return self.peer_of(hdr.src_nid, hdr.dest_nid);
        }
        let found = self.gets.remove(&(hdr.dest_nid, wmd));
        let next_seq = found.map_or(u64::MAX, |(_, seq, _)| seq);
        let run = self.reply_runs.entry(run_key).or_default();
        let pending = std::mem::take(&mut run.pending);
        let prev_seq = run.last_seq;
        if found.is_some() {
            run.last_seq = next_seq;
        }
        if !pending.is_empty() {
            let (slots, parked) = (&self.slots, &self.parked_gets);
            let mut between: Vec<((Nid, Wmd), u64, u32)> = self
                .gets
                .iter()
                .filter(|(k, (h, seq, _))| {
                    k.0 == hdr.dest_nid
                        && *seq > prev_seq
                        && *seq < next_seq
                        && match resolve(slots, *h).and_then(|i| slots[i].as_ref()) {
                            Some(o) => o.key.0 == hdr.src_nid,
                            None => *h == PARKED && parked.get(*k).is_some_and(|p| p.0 == hdr.src_nid),
                        }
                })
                .map(|(k, (_, seq, sink))| (*k, *seq, *sink))
                .collect();
            between.sort_by_key(|x| x.1);
            // The run answers the oldest GETs between (a client answers in order; one whose
            // REPLY went later leaves a GET over). A GET whose sink length was past the
            // snaplen (0) fits any length; parked GETs' lengths are checked at adoption.
            let fits =
                between.len() >= pending.len() && between.iter().zip(&pending).all(|(g, p)| g.2 == 0 || g.2 == p.2);
            for (k, (first, last, len)) in pending.into_iter().enumerate() {
                let key = fits.then(|| between[k].0);
                match key.and_then(|key| self.gets.remove(&key).map(|g| (key, g))) {
                    Some((key, g)) => self.reply_to_get(key, g, first, last, len),
                    None => {
                        self.unmatched("reply_without_get");
                        self.note_uncertain(hdr.src_nid, hdr.dest_nid, first);
                    }
                }
            }
        }
        let Some((h, _, _)) = found else {
            self.unmatched("reply_without_get");
            self.note_uncertain(hdr.src_nid, hdr.dest_nid, m.first.ts_ns);
            return None;
        };
        if h == PARKED {
            let key = (hdr.dest_nid, wmd);
            let owner = self.parked_gets.get(&key).map(|p| (p.0, p.1));
            self.reply_to_get(key, (PARKED, 0, 0), m.first.ts_ns, m.last.ts_ns, hdr.payload_length);
            return owner;
        }
        let i = resolve(&self.slots, h)?;
        let (kind, client, server) = {
            let o = self.slot(i);
            (o.kind, o.key.0, o.key.1)
        };
        if kind == Kind::LnetPing {
            self.final_reply(i, m, None, None, false);
        } else {
            // Write bulk data from the client.
            self.bulk_data(i, m.first.ts_ns, m.last.ts_ns, hdr.payload_length, u64::MAX, false);
        }
        Some((client, server))
    }

    fn on_ack(&mut self, m: &Message, hdr: &LnetHdr, wmd: Wmd, mb: u64, mlength: u32) -> Option<(Nid, Nid)> {
        let found = self.acks.remove(&(hdr.dest_nid, wmd));
        let (client, server) = (hdr.src_nid, hdr.dest_nid);
        match found {
            Some((h, true)) => {
                if let Some(i) = resolve(&self.slots, h) {
                    let o = self.slot(i);
                    o.rec.t_reply_ack_ns = Some(m.last.ts_ns);
                    o.awaiting_reply_ack = false;
                    if o.reply_done {
                        self.settle(i);
                    }
                }
            }
            Some((h, false)) => {
                if let Some(i) = resolve(&self.slots, h) {
                    self.slot(i).last_ns = m.last.ts_ns;
                }
            }
            None => {
                // The data PUT's header was not captured, but its LNet ACK was: the ACK
                // names the match bits and the bytes deposited.
                match self.ptl_by_bulk(client, server, mb) {
                    Some(i) if !self.slot(i).bulk_mbits_seen.contains(&mb) => {
                        let o = self.slot(i);
                        o.bulk_mbits_seen.push(mb);
                        o.rec.bytes += u64::from(mlength);
                        o.rec.missing.push(Missing::BulkHeader);
                        o.last_ns = m.last.ts_ns;
                    }
                    // The ACK of a PUT that was inferred (its handle is not known).
                    Some(i) => self.slot(i).last_ns = m.last.ts_ns,
                    None => self.unmatched("ack_without_put"),
                }
            }
        }
        Some((client, server))
    }

    fn bulk_start(&mut self, i: usize, first_ns: i64, last_ns: i64) {
        let o = self.slot(i);
        o.rec.t_bulk_start_ns = Some(o.rec.t_bulk_start_ns.map_or(first_ns, |t| t.min(first_ns)));
        o.last_ns = o.last_ns.max(last_ns);
    }

    fn bulk_data(&mut self, i: usize, first_ns: i64, last_ns: i64, len: u32, mb: u64, is_read: bool) {
        let interval = self.cfg.interval_ns;
        let o = self.slot(i);
        o.rec.bulk_messages += 1;
        if mb != u64::MAX && o.bulk_mbits_seen.contains(&mb) {
            // Its LNet ACK came first (this message was inferred later) and already counted
            // the bytes; now its times are known too.
            o.rec.missing.retain(|x| *x != Missing::BulkHeader);
        } else {
            o.rec.bytes += u64::from(len);
            if mb != u64::MAX {
                o.bulk_mbits_seen.push(mb);
            }
        }
        if is_read {
            o.rec.t_bulk_start_ns = Some(o.rec.t_bulk_start_ns.map_or(first_ns, |t| t.min(first_ns)));
        }
        o.rec.t_bulk_end_ns = Some(o.rec.t_bulk_end_ns.map_or(last_ns, |t| t.max(last_ns)));
        o.last_ns = o.last_ns.max(last_ns);
        if o.rec.op.is_none() {
            o.rec.op = Some(if is_read { "read" } else { "write" });
        }
        let pk = (o.key.0, o.key.1);
        let p = self.peer(pk.0, pk.1);
        let idx = last_ns.div_euclid(interval);
        if is_read {
            *p.bulk_read.entry(idx).or_default() += u64::from(len);
        } else {
            *p.bulk_write.entry(idx).or_default() += u64::from(len);
        }
    }

    fn final_reply(&mut self, i: usize, m: &Message, status: Option<i32>, service: Option<u32>, wants_ack: bool) {
        let o = self.slot(i);
        if let Some(start) = o.rec.t_start_ns.filter(|_| o.counted_start) {
            let latency = m.last.ts_ns - start + 2 * o.client_owd_ns;
            let pk = (o.key.0, o.key.1);
            let p = self.peer(pk.0, pk.1);
            p.min_latency_ns = p.min_latency_ns.min(latency.max(0));
        }
        let o = self.slot(i);
        o.rec.t_reply_ns = Some(m.first.ts_ns);
        o.rec.t_end_ns = Some(m.last.ts_ns);
        o.rec.status = status.or(o.rec.status);
        o.rec.service_time_s = service.or(o.rec.service_time_s);
        o.reply_done = true;
        o.awaiting_reply_ack = wants_ack;
        o.last_ns = m.last.ts_ns;
        if !wants_ack {
            self.settle(i);
        }
    }

    /// A GET whose request is not known yet keeps its place in the order of GETs.
    fn park_get(&mut self, sender: Nid, wmd: Wmd, owner: (Nid, Nid, u64)) {
        if self.parked_gets.len() < MAX_OPEN_RPCS {
            self.get_seq += 1;
            if self.gets.len() < MAX_GET_HANDLES {
                self.gets.insert((sender, wmd), (PARKED, self.get_seq, 0));
            }
            self.parked_gets.insert((sender, wmd), owner);
        }
    }

    /// Drops index entries whose RPC finished: GET and ACK handles that no longer
    /// resolve, GETs parked for no orphan.
    fn prune_handles(&mut self) {
        let (slots, parked) = (&self.slots, &self.parked_gets);
        self.gets.retain(|k, v| if v.0 == PARKED { parked.contains_key(k) } else { resolve(slots, v.0).is_some() });
        self.acks.retain(|_, v| resolve(slots, v.0).is_some());
    }

    /// `prune_handles` for a full index, at most once a second of capture time (an index
    /// full of live entries would otherwise be scanned at every insert).
    fn prune_when_full(&mut self) {
        if self.now_ns >= self.prune_again_ns {
            self.prune_handles();
            self.prune_again_ns = self.now_ns + 1_000_000_000;
        }
    }

    fn handle(&self, i: usize) -> Handle {
        Handle { slot: i, id: self.slots[i].as_ref().map_or(u64::MAX, |o| o.rec.id) }
    }

    /// Indexes a GET handle of the RPC in slot `i` (bounded: MAX_GET_HANDLES; when full,
    /// finished RPCs' entries go first, then the GET is not indexed and counted).
    fn insert_get(&mut self, key: (Nid, Wmd), i: usize, seq: u64, sink: u32) {
        let full = |t: &Self| t.gets.len() >= MAX_GET_HANDLES && !t.gets.contains_key(&key);
        if self.handle_room(full, "get_index_full") {
            let h = self.handle(i);
            self.gets.insert(key, (h, seq, sink));
        }
    }

    /// Indexes an ACK handle (bounded like `insert_get`: MAX_ACK_HANDLES).
    fn insert_ack(&mut self, key: (Nid, Wmd), i: usize, reply: bool) {
        let full = |t: &Self| t.acks.len() >= MAX_ACK_HANDLES && !t.acks.contains_key(&key);
        if self.handle_room(full, "ack_index_full") {
            let h = self.handle(i);
            self.acks.insert(key, (h, reply));
        }
    }

    /// Whether a handle index has room: when `full`, finished RPCs' handles are pruned
    /// (at most once a second of capture time); still full, the entry is counted under
    /// `why` and not indexed.
    fn handle_room(&mut self, full: impl Fn(&Self) -> bool, why: &'static str) -> bool {
        if full(self) {
            self.prune_when_full();
            if full(self) {
                self.unmatched(why);
                return false;
            }
        }
        true
    }

    /// A zero-copy message waiting for its ZC-ACK (bounded: MAX_ZC_PENDING; when full the
    /// message is not indexed, and its ACK will count as unmatched).
    fn insert_zc(&mut self, key: (Nid, Nid, u64), z: ZcPending) {
        if self.zc_pending.len() >= MAX_ZC_PENDING && !self.zc_pending.contains_key(&key) {
            if self.now_ns >= self.prune_again_ns {
                let old = self.now_ns - REORDER_HORIZON_NS;
                self.zc_pending.retain(|_, z| z.3 > old);
                self.prune_again_ns = self.now_ns + 1_000_000_000;
            }
            if self.zc_pending.len() >= MAX_ZC_PENDING {
                self.unmatched("zc_index_full");
                return;
            }
        }
        self.zc_pending.insert(key, z);
    }

    /// Live entries of each index, with its limit (tests and diagnostics: none may exceed
    /// its limit).
    pub fn index_sizes(&self) -> Vec<(&'static str, usize, usize)> {
        vec![
            ("open_rpcs", self.by_key.len(), MAX_OPEN_RPCS),
            ("finished_rpcs", self.finished, MAX_FINISHED_RPCS),
            ("get_handles", self.gets.len(), MAX_GET_HANDLES),
            ("ack_handles", self.acks.len(), MAX_ACK_HANDLES),
            ("zc_pending", self.zc_pending.len(), MAX_ZC_PENDING),
            ("zc_early", self.zc_early.len(), MAX_OPEN_RPCS),
            ("parked_gets", self.parked_gets.len(), MAX_OPEN_RPCS),
            ("orphans", self.orphans.len(), MAX_OPEN_RPCS),
        ]
    }

    /// A REPLY (write data) answers the GET `key` (removed from `gets` as `got`): its RPC's
    /// bulk, or parked beside the GET until the request comes.
    fn reply_to_get(&mut self, key: (Nid, Wmd), got: (Handle, u64, u32), first: i64, last: i64, len: u32) {
        if got.0 != PARKED {
            if let Some(i) = resolve(&self.slots, got.0) {
                self.bulk_data(i, first, last, len, u64::MAX, false);
            }
        } else if let Some(&(client, server, mb)) = self.parked_gets.get(&key) {
            self.park(Orphan { client, server, mb, first_ns: first, last_ns: last, what: Parked::Reply { len } });
        }
    }

    /// Parks a bulk data PUT whose RPC is not known yet.
    fn park_data(&mut self, m: &Message, hdr: &LnetHdr, (client, server): (Nid, Nid), mb: u64, ack_wmd: Wmd) {
        self.park(Orphan {
            client,
            server,
            mb,
            first_ns: m.first.ts_ns,
            last_ns: m.last.ts_ns,
            what: Parked::Data { len: hdr.payload_length, ack_wmd, sender: hdr.src_nid },
        });
    }

    fn park(&mut self, o: Orphan) {
        if self.orphans.len() >= MAX_OPEN_RPCS {
            self.unmatched("bulk_without_request");
            return;
        }
        self.orphans.push(o);
    }

    /// Gives an RPC the bulk messages that arrived before its request.
    fn adopt(&mut self, i: usize) {
        if self.orphans.is_empty() {
            return;
        }
        let o = self.slot(i);
        let (client, server, xid, bulkid, n_md, kind) = (o.key.0, o.key.1, o.key.2, o.bulkid, o.n_md, o.kind);
        let mine = |x: &Orphan| {
            x.client == client
                && x.server == server
                && match kind {
                    Kind::Ptlrpc => x.mb >= xid && x.mb - xid < n_md.unwrap_or(MAX_BULK_MDS),
                    _ => Some(x.mb) == bulkid,
                }
        };
        let (take, keep): (Vec<Orphan>, Vec<Orphan>) = std::mem::take(&mut self.orphans).into_iter().partition(mine);
        self.orphans = keep;
        for x in take {
            match x.what {
                Parked::Data { len, ack_wmd, sender } => {
                    self.bulk_data(i, x.first_ns, x.last_ns, len, x.mb, true);
                    if !ack_wmd.is_none() && !ack_wmd.is_unknown() {
                        self.insert_ack((sender, ack_wmd), i, false);
                    }
                }
                Parked::Get { wmd, sink, sender } => {
                    self.bulk_start(i, x.first_ns, x.last_ns);
                    let o = self.slot(i);
                    o.bulk_mbits_seen.push(x.mb);
                    o.expected_bytes += u64::from(sink);
                    let key = (sender, wmd);
                    match (self.parked_gets.remove(&key), self.gets.get(&key).copied()) {
                        // In order of its arrival, not of its request's.
                        (Some(_), Some((h, seq, _))) if h == PARKED => {
                            self.insert_get(key, i, seq, sink);
                        }
                        // Its REPLY came already and was parked with it.
                        (Some(_), _) => {}
                        (None, _) => {
                            self.get_seq += 1;
                            self.insert_get(key, i, self.get_seq, sink);
                        }
                    }
                }
                Parked::Reply { len } => self.bulk_data(i, x.first_ns, x.last_ns, len, u64::MAX, false),
            }
        }
    }

    /// Marks an RPC finished; it is reported EMIT_DELAY_NS of capture time later.
    fn settle(&mut self, i: usize) {
        let now = self.now_ns;
        let o = self.slot(i);
        if o.settled_at.is_none() {
            o.settled_at = Some(now);
            let id = o.rec.id;
            self.settling.push_back((now + EMIT_DELAY_NS, i, id));
            self.finished += 1;
            // Entries of RPCs closed otherwise wait for their turn at the front; kept to
            // twice the finished RPCs held.
            if self.settling.len() > 2 * MAX_FINISHED_RPCS.max(self.finished) {
                let slots = &self.slots;
                self.settling.retain(|&(_, i, id)| resolve(slots, Handle { slot: i, id }).is_some());
            }
        }
    }

    /// Reports the finished RPCs whose delay is over, and the longest held beyond
    /// `MAX_FINISHED_RPCS` (counted as reported early).
    fn emit_settled(&mut self, out: &mut Vec<RpcRecord>) {
        while let Some(&(ready, i, id)) = self.settling.front() {
            let early = ready > self.now_ns;
            if early && self.finished <= MAX_FINISHED_RPCS {
                break;
            }
            self.settling.pop_front();
            if resolve(&self.slots, Handle { slot: i, id }).is_some() {
                self.emitted_early += u64::from(early);
                self.close(i, out, None);
            }
        }
    }

    /// Finishes an RPC: statistics, and the record to the caller.
    fn close(&mut self, i: usize, out: &mut Vec<RpcRecord>, why: Option<Missing>) {
        let Some(mut o) = self.slots[i].take() else { return };
        self.free.push(i);
        if o.settled_at.is_some() {
            self.finished -= 1;
        }
        self.by_key.remove(&o.key);
        self.unindex_xid(o.key);
        if let Some(b) = o.bulkid {
            self.bulkids.remove(&(o.key.0, o.key.1, b));
        }
        let r = &mut o.rec;
        if r.t_start_ns.is_none() && !r.missing.contains(&Missing::Request) {
            r.missing.push(Missing::Request);
        }
        if !o.reply_done {
            r.missing.push(Missing::Reply);
        }
        if o.awaiting_reply_ack {
            r.missing.push(Missing::ReplyAck);
        }
        let expects_bulk =
            matches!(o.kind, Kind::LstBrw) && r.opc_name.as_deref() != Some("BRW") || matches!(r.opc, Some(3 | 4));
        // Bulk data messages expected: one per MD (pb_mbits), one for a selftest BRW.
        let expected_msgs = if o.kind == Kind::Ptlrpc { o.n_md.unwrap_or(1) } else { 1 };
        if expects_bulk && u64::from(r.bulk_messages) < expected_msgs {
            if o.expected_bytes > 0 && o.reply_done && r.status.unwrap_or(0) == 0 {
                // Some data messages' headers were not captured, but the request (or the
                // GETs) announced the size and the RPC succeeded.
                r.bytes = r.bytes.max(o.expected_bytes);
                if !r.missing.contains(&Missing::BulkHeader) {
                    r.missing.push(Missing::BulkHeader);
                }
            } else if r.bytes == 0 {
                r.missing.push(Missing::Bulk);
            } else if !r.missing.contains(&Missing::BulkHeader) {
                r.missing.push(Missing::BulkHeader);
            }
        }
        if expects_bulk && o.kind == Kind::Ptlrpc && o.n_md.is_none() {
            // The number of bulk MDs is unknown (pb_mbits not captured): if the pair had
            // messages no RPC could claim while this one ran, some may have been its bulk.
            if let (Some(a), Some(b)) = (r.t_start_ns, r.t_end_ns) {
                let unsure = self.peers.get(&self.peer_key(o.key.0, o.key.1)).is_some_and(|p| {
                    p.uncertain.range(a..=b).next().is_some() || p.lost_spans.iter().any(|&(s, e)| s <= b && e >= a)
                });
                if unsure && !r.missing.contains(&Missing::BulkHeader) {
                    r.missing.push(Missing::BulkUnknown);
                }
            }
        }
        if let Some(w) = why {
            r.missing.push(w);
        }
        let interval = self.cfg.interval_ns;
        let names = (self.nid_name(o.key.0), self.nid_name(o.key.1));
        let rec = o.rec.into_record(o.kind, names, o.client_owd_ns);
        let p = self.peer(o.key.0, o.key.1);
        update(&mut p.by_opc, rec.opc_name.as_deref().unwrap_or("unknown"), |n| *n += 1);
        if o.counted_start {
            // The RPC leaves flight when the client has the reply (one one-way delay after
            // the capture point saw its last byte), or, if none was seen, at its last
            // activity.
            let end = rec.t_end_ns.map_or(o.last_ns, |e| e + o.client_owd_ns);
            p.rif.push(end.max(o.rif_up_ns + 1), -1);
        }
        if rec.op == Some("write") {
            p.bytes_written += rec.bytes;
        } else {
            p.bytes_read += rec.bytes;
        }
        if let Some(e) = rec.t_end_ns {
            p.last_ns = Some(p.last_ns.map_or(e, |l| l.max(e)));
            let idx = e.div_euclid(interval);
            let c = p.completed.entry(idx).or_default();
            if rec.op == Some("write") {
                c.1 += rec.bytes;
            } else {
                c.0 += rec.bytes;
            }
            c.2 += 1;
        }
        p.tally(&rec);
        out.push(rec);
    }

    fn expire(&mut self, out: &mut Vec<RpcRecord>) {
        let limit = self.now_ns - RPC_IDLE_TIMEOUT_NS;
        let stale: Vec<usize> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.as_ref().filter(|o| o.last_ns < limit && o.settled_at.is_none()).map(|_| i))
            .collect();
        for i in stale {
            self.close(i, out, Some(Missing::Timeout));
        }
        let horizon = self.now_ns - REORDER_HORIZON_NS;
        self.zc_early.retain(|_, t| *t > horizon);
        for p in self.peers.values_mut() {
            p.uncertain = p.uncertain.split_off(&horizon);
        }
        let before = self.orphans.len();
        self.orphans.retain(|o| o.last_ns > horizon);
        let live: foldhash::HashSet<(Nid, Wmd)> = self
            .orphans
            .iter()
            .filter_map(|o| match o.what {
                Parked::Get { wmd, sender, .. } => Some((sender, wmd)),
                _ => None,
            })
            .collect();
        self.parked_gets.retain(|k, _| live.contains(k));
        self.prune_handles();
        let old = self.now_ns - RPC_IDLE_TIMEOUT_NS;
        self.zc_pending.retain(|_, z| z.3 > old);
        let dropped = (before - self.orphans.len()) as u64;
        if dropped > 0 {
            *self.unmatched.entry("bulk_without_request").or_default() += dropped;
        }
    }

    /// End of capture: every open RPC is reported (partial where parts are missing).
    pub fn finish(&mut self, out: &mut Vec<RpcRecord>) {
        let collected: Result<(), std::convert::Infallible> = self.finish_each(|done| {
            out.append(done);
            Ok(())
        });
        let Ok(()) = collected;
    }

    /// [`Tracker::finish`], handing the records to `emit` a batch at a time (in the order
    /// the RPCs were first seen) rather than all at once, so that closing a full index of
    /// open RPCs does not hold a second copy of them; `emit` drains the batch.
    pub fn finish_each<E>(&mut self, mut emit: impl FnMut(&mut Vec<RpcRecord>) -> Result<(), E>) -> Result<(), E> {
        const BATCH: usize = 1024;
        self.flush_reply_runs();
        let left: usize = self.reply_runs.values().map(|r| r.pending.len()).sum();
        if left > 0 {
            *self.unmatched.entry("reply_without_get").or_default() += left as u64;
            self.reply_runs.clear();
        }
        let n = self.orphans.len() as u64;
        if n > 0 {
            *self.unmatched.entry("bulk_without_request").or_default() += n;
            self.orphans.clear();
        }
        let mut open: Vec<(u64, usize)> =
            self.slots.iter().enumerate().filter_map(|(i, o)| o.as_ref().map(|o| (o.rec.id, i))).collect();
        open.sort_unstable();
        // Every open RPC closes now: its indexes go whole rather than an entry at a time,
        // a cache miss an RPC into tables of every RPC of the last `EMIT_DELAY_NS` (on a
        // capture shorter than that, all of them).
        self.by_key.clear();
        self.xid_pairs.clear();
        self.bulkids.clear();
        let mut done = Vec::with_capacity(BATCH);
        for chunk in open.chunks(BATCH) {
            for &(_, i) in chunk {
                self.close(i, &mut done, None);
            }
            emit(&mut done)?;
        }
        for p in self.peers.values_mut() {
            p.rif.finish();
            p.mif[0].finish();
            p.mif[1].finish();
        }
        Ok(())
    }

    /// Inferred REPLYs still waiting for a decoded REPLY at the end (their run ended the
    /// stream): they answer, in order, the first GETs their client had not answered yet, when
    /// there are as many with the same sink lengths. Others stay unmatched.
    fn flush_reply_runs(&mut self) {
        let mut runs: Vec<((u32, usize), ReplyRun)> = std::mem::take(&mut self.reply_runs).into_iter().collect();
        runs.sort_by_key(|(k, _)| *k);
        for (_, run) in runs {
            let Some((client, server)) = run.nids else { continue };
            if run.pending.is_empty() {
                continue;
            }
            let slots = &self.slots;
            let mut after: Vec<((Nid, Wmd), u64, u32)> = self
                .gets
                .iter()
                .filter(|((n, _), (h, seq, _))| {
                    *n == server
                        && *seq > run.last_seq
                        && resolve(slots, *h).and_then(|i| slots[i].as_ref()).is_some_and(|o| o.key.0 == client)
                })
                .map(|(k, (_, seq, sink))| (*k, *seq, *sink))
                .collect();
            after.sort_by_key(|x| x.1);
            let fits = after.len() >= run.pending.len() && after.iter().zip(&run.pending).all(|(g, p)| g.2 == p.2);
            if !fits {
                *self.unmatched.entry("reply_without_get").or_default() += run.pending.len() as u64;
                continue;
            }
            for (g, (first, last, len)) in after.into_iter().zip(run.pending) {
                if let Some(i) = self.gets.remove(&g.0).and_then(|(h, _, _)| resolve(&self.slots, h)) {
                    self.bulk_data(i, first, last, len, u64::MAX, false);
                }
            }
        }
    }
}

/// True when the side that sent a message from `dir` being the client means the active side
/// is the client.
fn conn_side_is(_conn: &Connection, dir: Dir, sender_is_client: bool) -> bool {
    match dir {
        Dir::FromActive => sender_is_client,
        Dir::FromPassive => !sender_is_client,
    }
}
