//! The PtlRPC matcher: a request PUT on a request portal opens the RPC under its XID (the
//! match bits); its bulk (reads: PUTs; writes: GETs answered by REPLYs) comes on a bulk
//! portal with match bits from the XID up to pb_mbits, one per MD; replies on a reply
//! portal, early replies (adaptive timeouts) first, the final one perhaps asking for an
//! LNet ACK. A resend is the same XID again before the reply.

use std::borrow::Cow;

use lnetcap_lnet::message::{App, Message};
use lnetcap_lnet::nid::Nid;
use lnetcap_lnet::wire::{LnetHdr, Wmd};

use lnetcap_lnet::names::opc_name;

use super::{Kind, Orphan, Parked, Tracker};
use crate::limits::{MAX_BULK_MDS, MAX_XID_ALIGN};
use crate::report::{Missing, RpcRecord};

impl Tracker {
    /// PtlRPC request PUT: a new RPC keyed by its XID (the match bits).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ptlrpc_request(
        &mut self,
        m: &Message,
        hdr: &LnetHdr,
        app: &App,
        mb: u64,
        portal: u32,
        owd: i64,
        out: &mut Vec<RpcRecord>,
    ) -> Option<(Nid, Nid)> {
        let (client, server) = self.roles(hdr, true);
        let align = if mb == 0 { MAX_XID_ALIGN } else { (1u64 << mb.trailing_zeros().min(7)).min(MAX_XID_ALIGN) };
        let a = self.xid_align.entry(client).or_insert(MAX_XID_ALIGN);
        *a = (*a).min(align);
        let i = self.request(Kind::Ptlrpc, (client, server, mb), m, owd, out);
        let o = self.slot(i);
        o.rec.portal = Some(portal);
        if let App::Ptlrpc(r) = app {
            if let Some(opc) = r.opc {
                o.rec.opc = Some(opc);
                o.rec.opc_name = Some(opc_name(opc).map_or_else(|| format!("opc{opc}").into(), Cow::Borrowed));
                o.rec.op = match opc {
                    3 => Some("read"),
                    4 => Some("write"),
                    _ => None,
                };
            }
            if let Some(last) = r.mbits {
                if last >= mb && last - mb < MAX_BULK_MDS {
                    o.n_md = Some(last - mb + 1);
                }
            }
            o.rec.jobid = r.jobid.clone();
        } else {
            o.rec.missing.push(Missing::RequestBody);
        }
        self.adopt(i);
        Some((client, server))
    }

    /// PtlRPC reply PUT: an early reply, or the final reply (with an ACK handle when it
    /// asks for an LNet ACK); a reply whose request was not captured opens the RPC.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ptlrpc_reply(
        &mut self,
        m: &Message,
        hdr: &LnetHdr,
        app: &App,
        mb: u64,
        offset: u32,
        ack_wmd: Wmd,
        out: &mut Vec<RpcRecord>,
    ) -> Option<(Nid, Nid)> {
        let (client, server) = self.roles(hdr, false);
        let i = self.by_key.get(&(client, server, mb)).copied().or_else(|| self.ptl_by_bulk(client, server, mb));
        let (status, service, early) = match app {
            App::Ptlrpc(r) => (r.status, r.service_time, r.looks_early_reply() || offset == 0 && r.bufcount == 1),
            _ => (None, None, false),
        };
        let i = match i {
            Some(i) => i,
            None => {
                let i = self.new_rpc(Kind::Ptlrpc, (client, server, mb), m, out);
                self.slot(i).rec.missing.push(Missing::Request);
                i
            }
        };
        if let App::Ptlrpc(r) = app {
            let o = self.slot(i);
            if o.rec.opc.is_none() {
                o.rec.opc = r.opc;
                o.rec.opc_name =
                    r.opc.map(|opc| opc_name(opc).map_or_else(|| format!("opc{opc}").into(), Cow::Borrowed));
            }
        }
        if early {
            let o = self.slot(i);
            o.rec.early_replies += 1;
            o.last_ns = m.last.ts_ns;
        } else {
            let ack = (!ack_wmd.is_none()).then_some(ack_wmd);
            if let Some(w) = ack {
                self.insert_ack((hdr.src_nid, w), i, true);
            }
            self.final_reply(i, m, status, service, ack.is_some());
        }
        Some((client, server))
    }

    /// PtlRPC bulk data PUT (reads): the RPC by the match bits' XID range, or parked.
    pub(super) fn ptlrpc_bulk_put(&mut self, m: &Message, hdr: &LnetHdr, mb: u64, ack_wmd: Wmd) -> Option<(Nid, Nid)> {
        let (client, server) = self.roles(hdr, false);
        match self.ptl_by_bulk(client, server, mb) {
            Some(i) => {
                self.bulk_data(i, m.first.ts_ns, m.last.ts_ns, hdr.payload_length, mb, true);
                if !ack_wmd.is_none() && !ack_wmd.is_unknown() {
                    self.insert_ack((hdr.src_nid, ack_wmd), i, false);
                }
            }
            None => self.park_data(m, hdr, (client, server), mb, ack_wmd),
        }
        Some((client, server))
    }

    /// PtlRPC bulk GET (writes): the RPC by the match bits' XID range, or parked.
    pub(super) fn ptlrpc_bulk_get(
        &mut self,
        m: &Message,
        hdr: &LnetHdr,
        mb: u64,
        wmd: Wmd,
        sink: u32,
    ) -> Option<(Nid, Nid)> {
        let (client, server) = self.roles(hdr, false);
        match self.ptl_by_bulk(client, server, mb) {
            Some(i) => {
                self.bulk_start(i, m.first.ts_ns, m.last.ts_ns);
                let o = self.slot(i);
                o.bulk_mbits_seen.push(mb);
                o.expected_bytes += u64::from(sink);
                self.get_seq += 1;
                self.insert_get((hdr.src_nid, wmd), i, self.get_seq, sink);
            }
            None => self.park(Orphan {
                client,
                server,
                mb,
                first_ns: m.first.ts_ns,
                last_ns: m.last.ts_ns,
                what: Parked::Get { wmd, sink, sender: hdr.src_nid },
            }),
        }
        Some((client, server))
    }
}
