//! RPCs from LNet headers cut short by the snaplen ([`LnetHdr::cut`]).
//!
//! At snaplen 128 with TCP timestamps (raw IP link) a segment keeps 76 payload bytes: the
//! ksock header, both NIDs, the type, the payload length, the first handle and the low 32
//! bits of the match bits. The portal, the high half of the match bits, the GET's sink
//! length and every message body are past the snaplen. What is left still names each
//! message's role and, with the rules below, its RPC:
//!
//! * roles: the pair's orientation once known; otherwise the sender on the connection's
//!   active side is the client (clients connect to the acceptor);
//! * a small PUT (≤ [`SMALL_PUT`]) from the client is a request. Its visible match bits are
//!   a selftest service id (1–12: `SRPC_SERVICE_*`, BRW 11, PING 12) or the low half of a
//!   PtlRPC XID;
//! * a GET from the server (a write's bulk) or a large PUT from the server (a read's bulk)
//!   belongs to the PtlRPC request whose XID starts its match-bit range, or else to the
//!   oldest selftest request of the pair that has no bulk yet (a selftest server serves a
//!   pair's requests in arrival order);
//! * a small PUT from the server is a reply: to the PtlRPC request of the same XID; or to the
//!   selftest RPC whose bulk id is one above (the client takes the reply id and then the bulk
//!   id of one RPC from one counter); or else to the oldest selftest RPC with its bulk, or
//!   without bulk when none has one.
//!
//! The RPC's XID is then known in its low 32 bits only: the record says so in `missing`
//! (`xid_high_bits`), beside `request_body`.

use std::collections::VecDeque;

use lnetcap_lnet::message::Message;
use lnetcap_lnet::nid::Nid;
use lnetcap_lnet::wire::consts::{LNET_GET, LNET_PUT};
use lnetcap_lnet::wire::{CutUnion, LnetHdr};
use lnetcap_tcp::Dir;

use super::{Kind, Tracker};
use crate::limits::{MAX_BULK_MDS, MAX_CUT_RPCS};
use crate::report::{Missing, RpcRecord};
use lnetcap_lnet::record::Hex;

/// Largest PUT payload taken for a request or reply (LNet's small-message size).
pub const SMALL_PUT: u32 = 4096;
/// Highest selftest service id (`SRPC_SERVICE_MAX_ID`).
const SRPC_SERVICE_MAX_ID: u32 = 12;
const SRPC_SERVICE_BRW: u32 = 11;
const SRPC_SERVICE_PING: u32 = 12;
/// Provisional keys of selftest RPCs whose reply id is not known yet sit at the top of the
/// id space (selftest and PtlRPC ids never reach it).
const PROVISIONAL: u64 = 0xffff_ffff_0000_0000;

/// An RPC built from cut headers, waiting for its bulk or reply.
#[derive(Debug, Clone, Copy)]
pub(super) struct CutOpen {
    slot: usize,
    id: u64,
    /// Visible match bits of the request: an XID's low half (PtlRPC) or a service id.
    req_lo: Option<u32>,
    selftest: bool,
    /// Visible match bits of its first bulk message.
    bulk_lo: Option<u32>,
}

/// Per pair: RPCs from cut headers in request order.
#[derive(Debug, Default, Clone)]
pub(super) struct CutPair {
    open: VecDeque<CutOpen>,
    seq: u64,
    /// Kind of the pair's last request (for requests inferred without match bits).
    last_selftest: Option<u32>,
}

impl Tracker {
    /// A message whose header union was cut by the snaplen. Returns the peer pair it was
    /// given to.
    pub(super) fn on_cut(
        &mut self,
        m: &Message,
        hdr: &LnetHdr,
        cut: CutUnion,
        owd: i64,
        out: &mut Vec<RpcRecord>,
    ) -> Option<(Nid, Nid)> {
        let (client, server) = match self.peer_of(hdr.src_nid, hdr.dest_nid) {
            Some(pk) => pk,
            None if m.dir == Dir::FromActive => (hdr.src_nid, hdr.dest_nid),
            None => (hdr.dest_nid, hdr.src_nid),
        };
        let from_client = hdr.src_nid == client;
        let small = hdr.payload_length <= SMALL_PUT;
        match (hdr.msg_type, from_client) {
            (LNET_PUT, true) if small => self.cut_request(m, (client, server), cut.match_bits_lo, owd, out),
            (LNET_GET, false) => self.cut_bulk(m, hdr, (client, server), cut, false),
            (LNET_PUT, false) if !small => self.cut_bulk(m, hdr, (client, server), cut, true),
            (LNET_PUT, false) => self.cut_reply(m, (client, server), cut.match_bits_lo),
            _ => {
                self.unmatched("header_partial");
                return None;
            }
        }
        Some((client, server))
    }

    fn cut_request(&mut self, m: &Message, pk: (Nid, Nid), lo: Option<u32>, owd: i64, out: &mut Vec<RpcRecord>) {
        let st = self.cut.entry(pk).or_default();
        let service = match lo {
            Some(x) if (1..=SRPC_SERVICE_MAX_ID).contains(&x) => Some(x),
            Some(_) => None,
            None => st.last_selftest,
        };
        st.last_selftest = service;
        st.seq += 1;
        let seq = st.seq;
        let (kind, key) = match service {
            Some(SRPC_SERVICE_BRW) => (Kind::LstBrw, PROVISIONAL | (seq & 0xffff_ffff)),
            Some(SRPC_SERVICE_PING) => (Kind::LstPing, PROVISIONAL | (seq & 0xffff_ffff)),
            Some(_) => (Kind::LstFramework, PROVISIONAL | (seq & 0xffff_ffff)),
            None => match lo {
                Some(x) => (Kind::Ptlrpc, u64::from(x)),
                None => {
                    self.unmatched("header_partial");
                    return;
                }
            },
        };
        let i = self.request(kind, (pk.0, pk.1, key), m, owd, out);
        let o = self.slot(i);
        o.rec.xid = (kind == Kind::Ptlrpc).then_some(Hex(key));
        o.rec.opc_name = Some(
            match kind {
                Kind::LstBrw => "BRW",
                Kind::LstPing => "PING",
                Kind::Ptlrpc => "unknown",
                _ => "FRAMEWORK",
            }
            .into(),
        );
        for what in [Missing::RequestBody, Missing::XidHighBits] {
            if !o.rec.missing.contains(&what) {
                o.rec.missing.push(what);
            }
        }
        let id = o.rec.id;
        let entry = CutOpen { slot: i, id, req_lo: lo, selftest: service.is_some(), bulk_lo: None };
        let st = self.cut.entry(pk).or_default();
        if st.open.len() >= MAX_CUT_RPCS {
            st.open.pop_front();
            self.unmatched("cut_rpcs_over_limit");
        }
        self.cut.entry(pk).or_default().open.push_back(entry);
    }

    /// Position of a live entry of the pair chosen by `pick` among live entries.
    fn cut_find(&mut self, pk: (Nid, Nid), pick: impl Fn(&CutOpen) -> bool) -> Option<usize> {
        let slots = &self.slots;
        let st = self.cut.get_mut(&pk)?;
        st.open.retain(|e| slots[e.slot].as_ref().is_some_and(|o| o.rec.id == e.id && !o.reply_done));
        st.open.iter().position(pick)
    }

    fn cut_bulk(&mut self, m: &Message, hdr: &LnetHdr, pk: (Nid, Nid), cut: CutUnion, is_read: bool) {
        let lo = cut.match_bits_lo;
        let ptl = lo.and_then(|b| {
            self.cut_find(pk, |e| !e.selftest && e.req_lo.is_some_and(|x| u64::from(b.wrapping_sub(x)) < MAX_BULK_MDS))
        });
        let pos = ptl.or_else(|| self.cut_find(pk, |e| e.selftest && e.bulk_lo.is_none()));
        let Some(pos) = pos else {
            self.unmatched("bulk_without_request");
            self.note_uncertain(hdr.src_nid, hdr.dest_nid, m.first.ts_ns);
            return;
        };
        let e = &mut self.cut.get_mut(&pk).expect("pair state").open[pos];
        e.bulk_lo = e.bulk_lo.or(lo);
        let i = e.slot;
        let o = self.slot(i);
        if o.kind == Kind::LstBrw {
            o.rec.opc_name = Some(if is_read { "BRW_READ" } else { "BRW_WRITE" }.into());
        }
        o.rec.op = Some(if is_read { "read" } else { "write" });
        if is_read {
            self.bulk_data(i, m.first.ts_ns, m.last.ts_ns, hdr.payload_length, u64::MAX, true);
        } else {
            self.bulk_start(i, m.first.ts_ns, m.last.ts_ns);
            if let Some(w) = cut.wmd {
                // The REPLY carries the GET's handle whole: it finds the RPC by it. The sink
                // length is past the snaplen (0: any REPLY length fits).
                self.get_seq += 1;
                self.insert_get((hdr.src_nid, w), i, self.get_seq, 0);
            }
        }
    }

    fn cut_reply(&mut self, m: &Message, pk: (Nid, Nid), lo: Option<u32>) {
        let pos = lo
            .and_then(|r| self.cut_find(pk, |e| !e.selftest && e.req_lo == Some(r)))
            .or_else(|| lo.and_then(|r| self.cut_find(pk, |e| e.selftest && e.bulk_lo == Some(r.wrapping_add(1)))))
            .or_else(|| self.cut_find(pk, |e| e.selftest && e.bulk_lo.is_some()))
            .or_else(|| self.cut_find(pk, |e| e.selftest));
        let Some(pos) = pos else {
            self.unmatched("reply_without_request");
            self.note_uncertain(pk.0, pk.1, m.first.ts_ns);
            return;
        };
        let e = self.cut.get_mut(&pk).expect("pair state").open.remove(pos).expect("entry");
        let i = e.slot;
        if let (true, Some(r)) = (e.selftest, lo) {
            // The reply's match bits are the RPC's reply id: its XID, low half.
            let new = (pk.0, pk.1, u64::from(r));
            if !self.by_key.contains_key(&new) {
                let old = self.slot(i).key;
                self.by_key.remove(&old);
                self.by_key.insert(new, i);
                let o = self.slot(i);
                o.key = new;
                o.rec.xid = Some(Hex(new.2));
            }
        }
        self.final_reply(i, m, None, None, false);
    }
}
