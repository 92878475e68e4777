//! The per-direction framer: stream bytes and gaps in, messages out.
//!
//! Message boundaries come only from the headers' length fields (`payload_length`, HELLO
//! `nips`, connreq version), so payload bytes that were never captured do not break
//! framing. A header that falls (even partly, before its length field) into uncaptured bytes
//! loses the framing: the framer then scans captured bytes for a plausible header
//! ([`find_resync`]) and reports how many bytes it skipped.

use lnetcap_tcp::{ConnId, Dir, Stamp};

use crate::limits::{HDR_CAP, PEEK_BYTES};
use crate::message::{App, Body, DesyncReason, FramingEvent, LnetEvent, Message, Proto};
use crate::names::is_bulk_portal;
use crate::nid::Nid;
use crate::wire::consts::*;
use crate::wire::{
    hello_size, le32_at, union_used, Connreq, CutUnion, Hello, KsockHdr, LnetDetail, LnetHdr, PingInfo, PtlrpcInfo,
    SrpcInfo, Wmd, NID16, NID4,
};
use stamps::{Boundaries, RunStamps};

mod stamps;

/// What the framer expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Stream start of the active side: connreq (or directly a HELLO).
    ActiveStart,
    /// A HELLO (passive side's first bytes, or after the connreq).
    Hello,
    /// Messages of the negotiated protocol.
    Framed,
    /// Lost: scanning for a plausible header.
    Desync,
}

/// Structure being collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// Connreq or HELLO (first bytes of the active side).
    Start,
    /// HELLO.
    Hello,
    /// A message of the given protocol.
    Msg(Proto),
}

/// Outcome of looking at the first header bytes.
enum Size {
    /// Need this many header bytes in total to decide.
    Need(usize),
    /// Message occupies `total` bytes; the first `hdr` are header.
    Sized { total: u64, hdr: usize },
    /// Bytes are not the expected structure.
    Invalid(DesyncReason),
}

fn size_of(ctx: Ctx, h: &[u8]) -> Size {
    match ctx {
        Ctx::Start => {
            if h.len() < 4 {
                return Size::Need(4);
            }
            let m = le32_at(h, 0).unwrap_or(0);
            if m == ACCEPTOR_MAGIC || m.swap_bytes() == ACCEPTOR_MAGIC {
                if h.len() < 8 {
                    return Size::Need(8);
                }
                let v = le32_at(h, 4).unwrap_or(0);
                let v = if m == ACCEPTOR_MAGIC { v } else { v.swap_bytes() };
                return match Connreq::wire_len(v) {
                    Some(n) => Size::Sized { total: n as u64, hdr: n },
                    None => Size::Invalid(DesyncReason::ConnreqVersion(v)),
                };
            }
            size_of(Ctx::Hello, h)
        }
        Ctx::Hello => match hello_size(h) {
            Ok(Some(n)) => Size::Sized { total: n as u64, hdr: n.min(HDR_CAP) },
            Ok(None) => Size::Need(if le32_at(h, 0) == Some(TCP_MAGIC) {
                32
            } else if h.len() < 8 {
                8
            } else {
                56
            }),
            Err(e) => Size::Invalid(e.into()),
        },
        Ctx::Msg(Proto::V1) => {
            if h.len() < 32 {
                return Size::Need(32);
            }
            let pl = le32_at(h, 28).unwrap_or(0);
            if pl > LNET_MTU {
                return Size::Invalid(DesyncReason::PayloadOverMtu(pl));
            }
            Size::Sized { total: LNET_HDR_NID4_LEN as u64 + u64::from(pl), hdr: LNET_HDR_NID4_LEN }
        }
        Ctx::Msg(p) => {
            if h.len() < 4 {
                return Size::Need(4);
            }
            match le32_at(h, 0).unwrap_or(0) {
                KSOCK_NOOP => Size::Sized { total: KSOCK_HDR_LEN as u64, hdr: KSOCK_HDR_LEN },
                KSOCK_LNET => {
                    let layout = if p == Proto::V4 { NID16 } else { NID4 };
                    let need = KSOCK_HDR_LEN + layout.plen_off + 4;
                    if h.len() < need {
                        return Size::Need(need);
                    }
                    let pl = le32_at(h, KSOCK_HDR_LEN + layout.plen_off).unwrap_or(0);
                    if pl > LNET_MTU {
                        return Size::Invalid(DesyncReason::PayloadOverMtu(pl));
                    }
                    let hdr = KSOCK_HDR_LEN + layout.len;
                    Size::Sized { total: hdr as u64 + u64::from(pl), hdr }
                }
                t => Size::Invalid(DesyncReason::KsockType(t)),
            }
        }
    }
}

/// The message being framed. Boxed and used again for the next message with its `peek`
/// buffer (`Framer::spare`): building one a message (its header buffer zeroed, moved in
/// and out of the framer, a `peek` allocated and freed) was a third of the framer's copies
/// and allocations on a capture of small messages.
struct InProgress {
    start: u64,
    first: Stamp,
    ctx: Ctx,
    hdr: [u8; HDR_CAP],
    /// Contiguous captured header bytes from `start`.
    have: usize,
    /// Header bytes wanted before the next decision.
    want: usize,
    sized: Option<(u64, usize)>,
    /// Some header bytes fell into uncaptured stream.
    hdr_lost: bool,
    peek: Vec<u8>,
    payload_captured: u64,
}

impl InProgress {
    /// The message starting at stream offset `start`, first seen at `first`: `reuse`
    /// (the last one, its header bytes left as they were: only the first `have` are ever
    /// read) or a new one.
    fn begin(reuse: Option<Box<InProgress>>, start: u64, first: Stamp, ctx: Ctx) -> Box<InProgress> {
        let Some(mut b) = reuse else {
            return Box::new(InProgress {
                start,
                first,
                ctx,
                hdr: [0; HDR_CAP],
                have: 0,
                want: 4,
                sized: None,
                hdr_lost: false,
                peek: Vec::new(),
                payload_captured: 0,
            });
        };
        b.start = start;
        b.first = first;
        b.ctx = ctx;
        b.have = 0;
        b.want = 4;
        b.sized = None;
        b.hdr_lost = false;
        b.peek.clear();
        b.payload_captured = 0;
        b
    }
}

/// Framing counters of one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FramerStats {
    /// Messages decoded (all kinds, including connreq and HELLO).
    pub messages: u64,
    /// Messages whose header was only partly captured (boundary known, some fields lost).
    pub headers_partial: u64,
    /// Message headers that fell into uncaptured bytes (boundary lost).
    pub headers_lost: u64,
    /// Times framing was lost.
    pub desyncs: u64,
    /// Times framing was found again.
    pub resyncs: u64,
    /// Bytes skipped while not framed.
    pub bytes_skipped: u64,
    /// Bytes inside decoded messages.
    pub bytes_in_messages: u64,
    /// Payload bytes of messages that were captured.
    pub payload_bytes_captured: u64,
    /// Bytes that did not parse as the expected structure (framing errors).
    pub invalid_headers: u64,
    /// Messages inferred in skipped runs.
    pub messages_inferred: u64,
    /// Bytes of the inferred messages (moved out of `bytes_skipped`).
    pub bytes_inferred: u64,
}

/// A resynchronisation that may let the skipped run be filled with inferred messages once
/// the first message after it is decoded.
struct PendingInfer {
    from: u64,
    to: u64,
    times: Boundaries,
    prev: Box<Message>,
}

/// Per-direction framer.
pub struct Framer {
    conn: ConnId,
    dir: Dir,
    expect: Expect,
    proto: Option<Proto>,
    flip: bool,
    pos: u64,
    cur: Option<Box<InProgress>>,
    /// The last message framed, for the next one ([`InProgress::begin`]).
    spare: Option<Box<InProgress>>,
    desync_from: u64,
    desync_at_boundary: bool,
    /// While desynchronised: the times of the skipped run's message boundaries.
    run_stamps: RunStamps,
    last_msg: Option<Box<Message>>,
    pending_infer: Option<PendingInfer>,
    /// NIDs seen on this connection (for resync plausibility).
    pub known_nids: Vec<Nid>,
    /// Counters.
    pub stats: FramerStats,
}

impl Framer {
    /// A framer for a half-stream. `from_start`: the stream origin is the true start (SYN
    /// seen); `active`: this is the active side's direction.
    pub fn new(conn: ConnId, dir: Dir, from_start: bool) -> Self {
        let expect = match (from_start, dir) {
            (true, Dir::FromActive) => Expect::ActiveStart,
            (true, Dir::FromPassive) => Expect::Hello,
            (false, _) => Expect::Desync,
        };
        Self {
            conn,
            dir,
            expect,
            proto: None,
            flip: false,
            pos: 0,
            cur: None,
            spare: None,
            desync_from: 0,
            desync_at_boundary: false,
            run_stamps: RunStamps::default(),
            last_msg: None,
            pending_infer: None,
            known_nids: Vec::new(),
            stats: FramerStats::default(),
        }
    }

    /// Protocol negotiated on this direction (from its HELLO), if seen.
    pub fn proto(&self) -> Option<Proto> {
        self.proto
    }

    /// Sets the protocol when it is known from elsewhere (the other direction's HELLO).
    pub fn hint_proto(&mut self, p: Proto) {
        if self.proto.is_none() {
            self.proto = Some(p);
        }
    }

    /// Stream offset up to which bytes were consumed.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// True while framing is lost.
    pub fn desynced(&self) -> bool {
        self.expect == Expect::Desync
    }

    fn ctx(&self) -> Ctx {
        match self.expect {
            Expect::ActiveStart => Ctx::Start,
            Expect::Hello => Ctx::Hello,
            _ => Ctx::Msg(self.proto.unwrap_or(Proto::V3)),
        }
    }

    fn lose(&mut self, at: u64, stamp: Stamp, reason: DesyncReason, at_boundary: bool, out: &mut Vec<LnetEvent>) {
        let first = match self.cur.take() {
            Some(cur) => {
                // Header bytes collected so far are skipped bytes now.
                self.stats.bytes_skipped += self.pos - cur.start;
                let first = cur.first;
                self.spare = Some(cur);
                first
            }
            None => stamp,
        };
        self.expect = Expect::Desync;
        self.desync_from = at;
        self.desync_at_boundary = at_boundary && self.expect_was_framed();
        // Messages inferred in the run would be as long as the one decoded before it.
        let len = if self.desync_at_boundary { self.last_msg.as_ref().map_or(0, |m| m.wire_len) } else { 0 };
        self.run_stamps.start(at, first, len);
        self.pending_infer = None;
        self.stats.desyncs += 1;
        out.push(LnetEvent::Framing {
            conn: self.conn,
            dir: self.dir,
            stamp,
            event: FramingEvent::Desync { offset: at, reason },
        });
    }

    fn expect_was_framed(&self) -> bool {
        self.last_msg.as_ref().is_some_and(|m| m.proto.is_some())
    }

    /// Captured bytes at the current position.
    pub fn on_data(&mut self, offset: u64, data: &[u8], stamp: Stamp, out: &mut Vec<LnetEvent>) {
        debug_assert_eq!(offset, self.pos);
        let mut i = 0usize;
        while i < data.len() {
            if self.expect == Expect::Desync {
                let at = self.pos;
                self.run_stamps.note(at, stamp);
                let found = find_resync(&data[i..], self.proto, &self.known_nids);
                match found {
                    Some((k, proto)) => {
                        self.pos += k as u64;
                        i += k;
                        self.stats.bytes_skipped += k as u64;
                        let skipped = self.pos - self.desync_from;
                        if self.desync_at_boundary && skipped > 0 {
                            self.pending_infer = self.pending(self.pos);
                        }
                        if self.proto.is_none() {
                            self.proto = Some(proto);
                        }
                        self.expect = Expect::Framed;
                        self.stats.resyncs += 1;
                        out.push(LnetEvent::Framing {
                            conn: self.conn,
                            dir: self.dir,
                            stamp,
                            event: FramingEvent::Resync { offset: self.pos, skipped },
                        });
                    }
                    None => {
                        let k = data.len() - i;
                        self.pos += k as u64;
                        self.stats.bytes_skipped += k as u64;
                        return;
                    }
                }
            }
            let ctx = self.ctx();
            let pos = self.pos;
            let spare = &mut self.spare;
            let cur = self.cur.get_or_insert_with(|| InProgress::begin(spare.take(), pos, stamp, ctx));
            let in_msg = self.pos - cur.start;
            let hdr_region = cur.sized.map_or(usize::MAX, |(_, h)| h) as u64;
            if in_msg < hdr_region {
                if cur.hdr_lost {
                    // Header bytes after a hole: not contiguous, not usable.
                    let k = ((hdr_region - in_msg) as usize).min(data.len() - i);
                    self.pos += k as u64;
                    i += k;
                } else {
                    let k = (cur.want - cur.have).min(data.len() - i);
                    cur.hdr[cur.have..cur.have + k].copy_from_slice(&data[i..i + k]);
                    cur.have += k;
                    self.pos += k as u64;
                    i += k;
                    if cur.have == cur.want && cur.sized.is_none() {
                        match size_of(cur.ctx, &cur.hdr[..cur.have]) {
                            Size::Need(n) => cur.want = n.clamp(cur.have + 1, HDR_CAP),
                            Size::Sized { total, hdr } => {
                                cur.sized = Some((total, hdr));
                                cur.want = hdr;
                            }
                            Size::Invalid(reason) => {
                                self.stats.invalid_headers += 1;
                                let start = cur.start;
                                self.lose(start, stamp, reason, false, out);
                                continue;
                            }
                        }
                    }
                }
            } else {
                let (total, _) = cur.sized.unwrap_or((0, 0));
                let k = ((total - in_msg) as usize).min(data.len() - i);
                if cur.peek.len() < PEEK_BYTES {
                    let p = k.min(PEEK_BYTES - cur.peek.len());
                    cur.peek.extend_from_slice(&data[i..i + p]);
                }
                cur.payload_captured += k as u64;
                self.pos += k as u64;
                i += k;
            }
            if let Some((total, _)) = cur.sized {
                if self.pos - cur.start == total {
                    self.finish(stamp, out);
                }
            }
        }
    }

    /// Uncaptured bytes at the current position.
    pub fn on_gap(&mut self, offset: u64, len: u64, stamp: Stamp, out: &mut Vec<LnetEvent>) {
        debug_assert_eq!(offset, self.pos);
        let mut left = len;
        while left > 0 {
            if self.expect == Expect::Desync {
                let at = self.pos;
                self.run_stamps.note(at, stamp);
                self.pos += left;
                self.stats.bytes_skipped += left;
                return;
            }
            let Some(cur) = self.cur.as_mut() else {
                self.stats.headers_lost += 1;
                let at = self.pos;
                self.lose(at, stamp, DesyncReason::HeaderNotCaptured, true, out);
                continue;
            };
            let Some((total, hdr)) = cur.sized else {
                self.stats.headers_lost += 1;
                let start = cur.start;
                self.lose(start, stamp, DesyncReason::HeaderCut, true, out);
                continue;
            };
            let in_msg = self.pos - cur.start;
            if in_msg < hdr as u64 {
                cur.hdr_lost = true;
            }
            let k = (total - in_msg).min(left);
            self.pos += k;
            left -= k;
            if self.pos - cur.start == total {
                self.finish(stamp, out);
            }
        }
    }

    /// Drops what only further bytes would use (the skipped run's segment map, the last
    /// message, the inference in waiting, the peeked payload), keeping the counters and
    /// the message in progress's extent: for a connection the table retired.
    pub fn release(&mut self) {
        self.run_stamps.release();
        self.last_msg = None;
        self.pending_infer = None;
        self.known_nids = Vec::new();
        self.spare = None;
        if let Some(c) = &mut self.cur {
            c.peek = Vec::new();
        }
    }

    /// Bytes consumed by a message still in progress.
    pub fn in_progress_bytes(&self) -> u64 {
        self.cur.as_ref().map_or(0, |c| self.pos - c.start)
    }

    fn finish(&mut self, last: Stamp, out: &mut Vec<LnetEvent>) {
        let Some(cur) = self.cur.take() else { return };
        let (total, hdr_len) = cur.sized.unwrap_or((0, 0));
        let hdr = &cur.hdr[..cur.have];
        let header_complete = !cur.hdr_lost && cur.have >= hdr_len;
        self.stats.messages += 1;
        self.stats.bytes_in_messages += total;
        self.stats.payload_bytes_captured += cur.payload_captured;
        if !header_complete {
            self.stats.headers_partial += 1;
        }
        let body = match cur.ctx {
            Ctx::Start | Ctx::Hello => {
                let is_connreq = cur.ctx == Ctx::Start && {
                    let m = le32_at(hdr, 0).unwrap_or(0);
                    m == ACCEPTOR_MAGIC || m.swap_bytes() == ACCEPTOR_MAGIC
                };
                if is_connreq {
                    match Connreq::parse(hdr) {
                        Ok(c) => {
                            self.expect = Expect::Hello;
                            self.note_nid(c.target_nid);
                            Some(Body::Connreq(c))
                        }
                        Err(e) => {
                            let s = cur.start;
                            self.lose(s, last, e.into(), false, out);
                            None
                        }
                    }
                } else {
                    match Hello::parse(hdr) {
                        Ok(h) => {
                            self.proto = Proto::from_version(h.version);
                            self.flip = h.flip;
                            self.expect = Expect::Framed;
                            self.note_nid(h.src_nid);
                            if let Some(d) = h.dst_nid {
                                self.note_nid(d);
                            }
                            Some(Body::Hello(h))
                        }
                        Err(e) => {
                            let s = cur.start;
                            self.lose(s, last, e.into(), false, out);
                            None
                        }
                    }
                }
            }
            Ctx::Msg(proto) => {
                let (ksock, lnet_bytes) = if proto.has_ksock() {
                    match KsockHdr::parse(hdr, self.flip) {
                        Ok(k) => (Some(k), hdr.get(KSOCK_HDR_LEN..).unwrap_or(&[])),
                        Err(_) => (None, &[][..]),
                    }
                } else {
                    (None, hdr)
                };
                match ksock {
                    Some(k) if k.msg_type == KSOCK_NOOP => Some(Body::Noop(k)),
                    _ => {
                        let layout = if proto == Proto::V4 { NID16 } else { NID4 };
                        match LnetHdr::parse(lnet_bytes, layout) {
                            Ok(h) => {
                                self.note_nid(h.src_nid);
                                self.note_nid(h.dest_nid);
                                let app = decode_app(&h, &cur.peek);
                                Some(Body::Lnet { ksock, hdr: h, app })
                            }
                            Err(_) => None,
                        }
                    }
                }
            }
        };
        if let Some(body) = body {
            let msg = Box::new(Message {
                conn: self.conn,
                dir: self.dir,
                offset: cur.start,
                wire_len: total,
                first: cur.first,
                last,
                proto: self.proto.filter(|_| matches!(cur.ctx, Ctx::Msg(_))),
                body,
                header_complete,
                payload_captured: cur.payload_captured,
                inferred: false,
            });
            if let Some(p) = self.pending_infer.take() {
                if p.to == msg.offset {
                    self.infer_run(p, Some(&msg), out);
                }
            }
            if msg.proto.is_some() && (msg.header_complete || sized_lnet(&msg)) {
                keep_for_inference(&mut self.last_msg, &msg);
            }
            out.push(LnetEvent::Message(msg));
        }
        self.spare = Some(cur);
    }

    /// Fills a skipped run with the messages it must have held, when the run is an exact
    /// number of messages like both of its decoded neighbours (same kind, NIDs, portal and
    /// length). Fields that follow an arithmetic progression between the neighbours (match
    /// bits, zero-copy cookies, selftest ids) are filled in; the others are left out.
    /// Times come from the segments that carried the run's bytes.
    ///
    /// A run that ends the stream (`next` is None: the connection closed, or the capture
    /// ended, while framing was lost) is inferred from its decoded predecessor alone: same
    /// kind, NIDs, portal and length; the fields a progression would give (match bits,
    /// cookies, selftest ids) stay unknown.
    fn infer_run(&mut self, p: PendingInfer, next: Option<&Message>, out: &mut Vec<LnetEvent>) {
        let prev = &p.prev;
        // Fields step between the neighbours only when both headers were seen whole.
        let tail = next.is_none() || !prev.header_complete || !next.is_some_and(|n| n.header_complete);
        let next = next.unwrap_or(prev);
        let len = prev.wire_len;
        let run = p.to - p.from;
        let framed = next.header_complete || sized_lnet(next);
        if len == 0 || next.wire_len != len || run % len != 0 || !framed || prev.kind() != next.kind() {
            return;
        }
        let k = run / len;
        if k == 0 || k > MAX_INFERRED_RUN {
            return;
        }
        let (Body::Lnet { ksock: pk, hdr: ph, app: pa }, Body::Lnet { ksock: nk, hdr: nh, app: na }) =
            (&prev.body, &next.body)
        else {
            return;
        };
        if ph.src_nid != nh.src_nid
            || ph.dest_nid != nh.dest_nid
            || ph.payload_length != nh.payload_length
            || ph.portal() != nh.portal()
        {
            return;
        }
        for i in 1..=k {
            let cookie = match (pk, nk) {
                (Some(a), Some(b)) if !tail => progression(a.zc_req_cookie, b.zc_req_cookie, k, i),
                _ => None,
            };
            let ksock = match (pk, cookie) {
                (Some(a), Some(c)) => Some(KsockHdr { zc_req_cookie: c, zc_ack_cookie: 0, csum: 0, ..*a }),
                _ => None,
            };
            let mb = match (ph.match_bits(), nh.match_bits()) {
                (Some(a), Some(b)) if !tail => progression(a, b, k, i),
                _ => None,
            };
            let detail = match (ph.detail, mb) {
                (Some(LnetDetail::Put { ptl_index, offset, hdr_data, ack_wmd, .. }), Some(mb)) => {
                    Some(LnetDetail::Put {
                        ack_wmd: if ack_wmd.is_none() { ack_wmd } else { Wmd::UNKNOWN },
                        match_bits: mb,
                        hdr_data,
                        ptl_index,
                        offset,
                    })
                }
                (Some(LnetDetail::Get { ptl_index, src_offset, sink_length, .. }), Some(mb)) => Some(LnetDetail::Get {
                    return_wmd: Wmd::UNKNOWN,
                    match_bits: mb,
                    ptl_index,
                    src_offset,
                    sink_length,
                }),
                (Some(LnetDetail::Ack { mlength, .. }), Some(mb)) => {
                    Some(LnetDetail::Ack { dst_wmd: Wmd::UNKNOWN, match_bits: mb, mlength })
                }
                (Some(LnetDetail::Reply { .. }), _) => Some(LnetDetail::Reply { dst_wmd: Wmd::UNKNOWN }),
                _ => None,
            };
            let app = match (pa, na) {
                (App::Srpc(a), App::Srpc(b)) if a.msg_type == b.msg_type && !tail => {
                    let rpyid = match (a.rpyid, b.rpyid) {
                        (Some(x), Some(y)) => progression(x, y, k, i),
                        _ => None,
                    };
                    let bulkid = match (a.bulkid, b.bulkid) {
                        (Some(x), Some(y)) => progression(x, y, k, i),
                        _ => None,
                    };
                    if rpyid.is_some() || a.rpyid.is_none() {
                        App::Srpc(SrpcInfo { rpyid, bulkid, status: None, ..a.clone() })
                    } else {
                        App::None
                    }
                }
                _ => App::None,
            };
            let offset = p.from + (i - 1) * len;
            let (first, last) = p.times.of(i);
            out.push(LnetEvent::Message(Box::new(Message {
                conn: self.conn,
                dir: self.dir,
                offset,
                wire_len: len,
                first,
                last,
                proto: prev.proto,
                // What a cut header showed of the union belongs to that message alone.
                body: Body::Lnet {
                    ksock,
                    hdr: LnetHdr { detail, cut: ph.cut.map(|_| CutUnion::default()), ..*ph },
                    app,
                },
                header_complete: false,
                payload_captured: 0,
                inferred: true,
            })));
        }
        self.stats.messages_inferred += k;
        self.stats.bytes_inferred += run;
        self.stats.bytes_skipped -= run;
    }

    /// The stream ended at `offset` (FIN, reset, or the end of the capture). A skipped run
    /// that began at a message boundary and reaches the end is inferred from the message
    /// before it when it is an exact number of such messages (a sender that lost segments
    /// before the capture point queues its bulk back to back, and at a short snaplen every
    /// header after the first lies past the captured bytes until the connection closes).
    pub fn end(&mut self, offset: u64, out: &mut Vec<LnetEvent>) {
        if self.expect != Expect::Desync
            || offset != self.pos
            || !self.desync_at_boundary
            || self.run_stamps.full()
            || self.last_msg.is_none()
        {
            return;
        }
        self.desync_at_boundary = false;
        if offset > self.desync_from {
            if let Some(p) = self.pending(offset) {
                self.infer_run(p, None, out);
            }
        }
    }

    /// The skipped run from `desync_from` to `to`, to be inferred from the last message
    /// decoded before it: `None` when it holds no whole number of messages as long as that
    /// one (or spans too many segments).
    fn pending(&mut self, to: u64) -> Option<PendingInfer> {
        let prev = self.last_msg.clone()?;
        let times = std::mem::take(&mut self.run_stamps).finish(to, prev.wire_len)?;
        Some(PendingInfer { from: self.desync_from, to, times, prev })
    }

    fn note_nid(&mut self, n: Nid) {
        if n != Nid::ANY && !self.known_nids.contains(&n) && self.known_nids.len() < 16 {
            self.known_nids.push(n);
        }
    }
}

/// What inference keeps of the last message (`infer_run` copies a self-test body, never a
/// PtlRPC or ping one): the message without those, so that keeping it costs no clone of a
/// lustre_msg's buffer lengths and job id per message.
///
/// Written over the message kept before, field by field: a whole `Message` built and then
/// moved into the box was two copies of it a message.
fn keep_for_inference(kept: &mut Option<Box<Message>>, m: &Message) {
    let Some(k) = kept else {
        *kept = Some(Box::new(Message { body: slim_body(&m.body), ..*m }));
        return;
    };
    // Every field named, so that a field added to `Message` cannot be left stale here.
    let Message { conn, dir, offset, wire_len, first, last, proto, body, header_complete, payload_captured, inferred } =
        m;
    k.conn = *conn;
    k.dir = *dir;
    k.offset = *offset;
    k.wire_len = *wire_len;
    k.first = *first;
    k.last = *last;
    k.proto = *proto;
    k.header_complete = *header_complete;
    k.payload_captured = *payload_captured;
    k.inferred = *inferred;
    match (body, &mut k.body) {
        (
            Body::Lnet { ksock, hdr, app: App::Ptlrpc(_) | App::Ping(_) | App::None },
            Body::Lnet { ksock: k_ksock, hdr: k_hdr, app: k_app },
        ) => {
            *k_ksock = *ksock;
            *k_hdr = *hdr;
            *k_app = App::None;
        }
        (b, kb) => *kb = slim_body(b),
    }
}

/// A message's body as inference keeps it (see [`keep_for_inference`]).
fn slim_body(b: &Body) -> Body {
    match b {
        Body::Lnet { ksock, hdr, app: App::Ptlrpc(_) | App::Ping(_) } => {
            Body::Lnet { ksock: *ksock, hdr: *hdr, app: App::None }
        }
        b => b.clone(),
    }
}

/// An LNet message whose header was cut by the snaplen but showed its length: framing
/// went on past it.
fn sized_lnet(m: &Message) -> bool {
    matches!(&m.body, Body::Lnet { hdr, .. } if hdr.detail.is_some() || hdr.cut.is_some())
}

/// Longest run of messages inferred at once.
const MAX_INFERRED_RUN: u64 = 4096;

/// The i-th of k values strictly between `a` and `b` on an arithmetic progression (all equal
/// when a == b), or `None` when the gap does not divide evenly.
fn progression(a: u64, b: u64, k: u64, i: u64) -> Option<u64> {
    if a == b {
        return Some(a);
    }
    if b < a || (b - a) % (k + 1) != 0 {
        return None;
    }
    let step = (b - a) / (k + 1);
    (step <= 1 << 20).then(|| a + i * step)
}

/// Decodes the captured payload prefix of an LNet message.
fn decode_app(h: &LnetHdr, peek: &[u8]) -> App {
    if peek.len() < 12 {
        return App::None;
    }
    match h.detail {
        Some(LnetDetail::Put { ptl_index, match_bits, .. }) => {
            if ptl_index == 0 && match_bits == PING_MATCHBITS {
                return PingInfo::parse(peek).map_or(App::None, App::Ping);
            }
            if matches!(ptl_index, 50..=52) {
                return SrpcInfo::parse(peek).map_or(App::None, App::Srpc);
            }
            if is_bulk_portal(ptl_index) {
                return App::None;
            }
            PtlrpcInfo::parse(peek).map_or(App::None, App::Ptlrpc)
        }
        Some(LnetDetail::Reply { .. }) => PingInfo::parse(peek).map_or(App::None, App::Ping),
        _ => App::None,
    }
}

fn plausible_nid(n: &Nid, known: &[Nid]) -> bool {
    if !known.is_empty() {
        return known.contains(n);
    }
    *n != Nid::ANY && matches!(n.lnd, 2 | 5 | 13 | 14 | 15 | 16 | 18 | 19) && (n.size == 0 || n.size == 12)
}

fn plausible_pid(p: u32) -> bool {
    p == PID_LUSTRE || p & PID_USERFLAG != 0 || p < 65_536
}

/// Checks an LNet header at the start of `b`. `b` holds the whole header, or ends inside it
/// (the captured bytes of the segment stop there, as at a short snaplen): then the header
/// must show at least its payload length, both NIDs must be ones this connection already
/// named, and the union is checked as far as it was captured.
fn plausible_lnet(b: &[u8], proto: Proto, known: &[Nid]) -> Option<u64> {
    let layout = if proto == Proto::V4 { NID16 } else { NID4 };
    if b.len() < layout.len && (b.len() < layout.plen_off + 4 || known.is_empty()) {
        return None;
    }
    let h = LnetHdr::parse(b, layout).ok()?;
    if h.msg_type > LNET_REPLY || h.payload_length > LNET_MTU {
        return None;
    }
    if matches!(h.msg_type, LNET_GET | LNET_ACK) && h.payload_length != 0 {
        return None;
    }
    if !plausible_nid(&h.src_nid, known) || !plausible_nid(&h.dest_nid, known) {
        return None;
    }
    if !plausible_pid(h.src_pid) || !plausible_pid(h.dest_pid) {
        return None;
    }
    let u = &b[layout.union_off.min(b.len())..layout.len.min(b.len())];
    let used = match h.detail {
        Some(LnetDetail::Put { ptl_index, .. }) if ptl_index > 255 => return None,
        Some(LnetDetail::Get { ptl_index, sink_length, .. }) if ptl_index > 255 || sink_length > LNET_MTU => {
            return None
        }
        Some(LnetDetail::Ack { mlength, .. }) if mlength > LNET_MTU => return None,
        Some(LnetDetail::Put { .. } | LnetDetail::Get { .. } | LnetDetail::Ack { .. } | LnetDetail::Reply { .. })
        | None => union_used(h.msg_type),
        _ => return None,
    };
    if u.get(used..).is_some_and(|pad| pad.iter().any(|&x| x != 0)) {
        return None;
    }
    Some(layout.len as u64 + u64::from(h.payload_length))
}

/// Length of a plausible message (ksock-framed for `proto` V2–V4, bare for V1) at the start
/// of `b`, or `None`.
fn plausible_msg(b: &[u8], proto: Proto, known: &[Nid]) -> Option<u64> {
    if proto == Proto::V1 {
        return plausible_lnet(b, proto, known);
    }
    if b.len() < KSOCK_HDR_LEN {
        return None;
    }
    let k = KsockHdr::parse(b, false).ok()?;
    // Cookies are per-peer counters starting at 2: far below 2^48 in any real capture.
    if k.zc_req_cookie >= 1 << 48 || k.zc_ack_cookie >= 1 << 48 {
        return None;
    }
    if k.csum != 0 && proto != Proto::V2 {
        return None;
    }
    match k.msg_type {
        KSOCK_NOOP => (k.zc_ack_cookie != 0).then_some(KSOCK_HDR_LEN as u64),
        KSOCK_LNET => plausible_lnet(&b[KSOCK_HDR_LEN..], proto, known).map(|n| n + KSOCK_HDR_LEN as u64),
        _ => None,
    }
}

/// Finds a resynchronisation point in `b`: the index of a plausible message start and the
/// protocol it was recognised under.
///
/// A candidate must pass every header plausibility check (NIDs, pids, type, payload length,
/// zero union padding, small ZC cookies) and the message that follows it must parse too
/// whenever its start was captured; a lone NOOP is accepted only when it ends exactly where
/// the captured bytes end or is followed by another plausible message.
///
/// Inline up to the first candidate: most segments of a skipped run (bulk payload) hold no
/// type byte, and end at one `find_type_byte` without a call of `resync_from`.
#[inline]
pub fn find_resync(b: &[u8], proto: Option<Proto>, known: &[Nid]) -> Option<(usize, Proto)> {
    if proto == Some(Proto::V1) {
        // No type byte to search for: only a message starting exactly here.
        return plausible_chain(b, Proto::V1, known).then_some((0, Proto::V1));
    }
    // The candidates' first byte (NOOP c0, LNET c1) by SIMD search (memchr): captured bulk
    // payload is scanned byte by byte otherwise, the framer's largest cost. Only where a
    // whole ksock header fits: `plausible_msg` refuses a shorter start (a snaplen-cut bulk
    // segment's last 23 bytes, an eighth of what a header-only capture keeps of it).
    let end = b.len().saturating_sub(KSOCK_HDR_LEN - 1);
    let first = find_type_byte(&b[..end])?;
    resync_from(b, end, first, proto, known)
}

/// The first NOOP or LNET type byte (0xc0, 0xc1) in `b`: memchr's AVX2 searcher, built
/// once, called directly. Through `memchr::memchr2` each call went through the crate's
/// run-time dispatch (a function pointer, then the searcher's own checks): a third of the
/// search's instructions on the short captured slices of a header-only capture's bulk
/// segments, which a framer without sync searches one after another.
#[inline]
fn find_type_byte(b: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        static AVX2: std::sync::LazyLock<Option<memchr::arch::x86_64::avx2::memchr::Two>> =
            std::sync::LazyLock::new(|| memchr::arch::x86_64::avx2::memchr::Two::new(0xc0, 0xc1));
        if let Some(two) = AVX2.as_ref() {
            return two.find(b);
        }
    }
    memchr::memchr2(0xc0, 0xc1, b)
}

/// [`find_resync`] from `p`, the first candidate's index; candidates start before `end`.
#[inline(never)]
fn resync_from(b: &[u8], end: usize, mut p: usize, proto: Option<Proto>, known: &[Nid]) -> Option<(usize, Proto)> {
    let protos: &[Proto] = match proto {
        Some(Proto::V1) => &[Proto::V1],
        Some(Proto::V2) => &[Proto::V2],
        Some(Proto::V4) => &[Proto::V4],
        Some(Proto::V3) => &[Proto::V3],
        None => &[Proto::V3, Proto::V4],
    };
    while p < end {
        if b[p + 1..p + 4] == [0, 0, 0] {
            for &pr in protos {
                if plausible_chain(&b[p..], pr, known) {
                    return Some((p, pr));
                }
            }
        }
        p += 1 + find_type_byte(&b[p + 1..end])?;
    }
    None
}

fn plausible_chain(b: &[u8], proto: Proto, known: &[Nid]) -> bool {
    let Some(len) = plausible_msg(b, proto, known) else {
        return false;
    };
    let is_noop = proto.has_ksock() && b[0] == 0xc0;
    let next = usize::try_from(len).unwrap_or(usize::MAX);
    if next < b.len() {
        // The following message starts inside the captured bytes: it must look right too.
        let rest = &b[next..];
        if proto.has_ksock() {
            if rest.len() < 4 {
                return !is_noop;
            }
            if !(rest[0] == 0xc0 || rest[0] == 0xc1) || rest[1..4] != [0, 0, 0] {
                return false;
            }
            let full = KSOCK_HDR_LEN
                + if rest[0] == 0xc1 {
                    if proto == Proto::V4 {
                        LNET_HDR_NID16_LEN
                    } else {
                        LNET_HDR_NID4_LEN
                    }
                } else {
                    0
                };
            return rest.len() < full || plausible_msg(rest, proto, known).is_some();
        }
        return rest.len() < LNET_HDR_NID4_LEN || plausible_msg(rest, proto, known).is_some();
    }
    // A NOOP is weak evidence alone: accept it only when it ends exactly at the end of the
    // captured bytes (a segment of NOOPs).
    !is_noop || next == b.len()
}

/// True when the first captured bytes of a stream look like socklnd: an acceptor connreq or
/// HELLO at the stream start, or a plausible message anywhere.
pub fn looks_like_lnet(b: &[u8], at_stream_start: bool) -> bool {
    if at_stream_start {
        if let Some(m) = le32_at(b, 0) {
            if [ACCEPTOR_MAGIC, PROTO_MAGIC, TCP_MAGIC].iter().any(|&x| m == x || m.swap_bytes() == x) {
                return true;
            }
        }
    }
    find_resync(b, None, &[]).is_some_and(|(i, _)| b.get(i) == Some(&0xc1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every candidate start, one after the other: the search as it was before it stopped
    /// where a whole ksock header no longer fits.
    fn every_start(b: &[u8], proto: Option<Proto>, known: &[Nid]) -> Option<(usize, Proto)> {
        let protos: &[Proto] = match proto {
            Some(p) => &[p][..],
            None => &[Proto::V3, Proto::V4],
        };
        (0..b.len())
            .filter(|&p| p + 4 <= b.len() && (b[p] == 0xc0 || b[p] == 0xc1) && b[p + 1..p + 4] == [0, 0, 0])
            .find_map(|p| protos.iter().find(|&&pr| plausible_chain(&b[p..], pr, known)).map(|&pr| (p, pr)))
    }

    fn noop(ack_cookie: u64) -> Vec<u8> {
        let mut h = vec![0xc0, 0, 0, 0, 0, 0, 0, 0];
        h.extend_from_slice(&0u64.to_le_bytes());
        h.extend_from_slice(&ack_cookie.to_le_bytes());
        h
    }

    proptest::proptest! {
        /// The bounded search finds what a search of every start finds: bytes from an
        /// alphabet full of type bytes and zeros, with NOOPs (whole, or cut short) at the
        /// end, where the bound falls.
        #[test]
        fn resync_search_bound_finds_every_start(
            prefix in proptest::collection::vec(proptest::sample::select(vec![0u8, 0xc0, 0xc1, 1, 0x5a]), 0..80),
            noops in 0usize..3,
            cut in 0usize..30,
            v2 in proptest::bool::ANY,
        ) {
            let mut b = prefix;
            for i in 0..noops {
                b.extend_from_slice(&noop(2 + i as u64));
            }
            b.truncate(b.len().saturating_sub(cut));
            let proto = if v2 { Some(Proto::V2) } else { None };
            proptest::prop_assert_eq!(find_resync(&b, proto, &[]), every_start(&b, proto, &[]));
        }

        /// The searcher built once finds the first type byte as a byte-by-byte search does,
        /// on slices of every length around the vector widths (16, 32, 64 bytes), starting
        /// at any alignment.
        #[test]
        fn type_byte_search_is_the_first_match(
            bytes in proptest::collection::vec(proptest::sample::select(vec![0u8, 0xc0, 0xc1, 0xc2, 0x40, 0xff]), 0..300),
            skip in 0usize..40,
            sparse in proptest::bool::ANY,
        ) {
            // Sparse: type bytes only near the end, so that the vector loops run first.
            let mut b = bytes;
            if sparse {
                let keep = b.len().saturating_sub(3);
                b[..keep].iter_mut().filter(|x| **x == 0xc0 || **x == 0xc1).for_each(|x| *x = 0);
            }
            let b = b.get(skip.min(b.len())..).unwrap_or(&[]);
            proptest::prop_assert_eq!(find_type_byte(b), b.iter().position(|&x| x == 0xc0 || x == 0xc1));
        }
    }
}
