//! The LNet selftest matcher: BRW, ping and framework RPCs of `lst`. A request on
//! SRPC_REQUEST_PORTAL (or the framework portal) is keyed by its reply id; on
//! SRPC_RDMA_PORTAL, a PUT is the reply (by reply id) or the bulk of a BRW read (by bulk
//! id), a GET the bulk of a BRW write (by bulk id). Bulk seen before its request waits,
//! parked, for it.

use lnetcap_lnet::message::{App, Message};
use lnetcap_lnet::nid::Nid;
use lnetcap_lnet::wire::{LnetHdr, Wmd};

use lnetcap_lnet::names::SRPC_RDMA_PORTAL;
use lnetcap_lnet::wire::srpc;

use super::{srpc_status, Kind, Orphan, Parked, Tracker};
use crate::report::RpcRecord;

impl Tracker {
    /// Selftest: a request (BRW, ping, framework) on SRPC_REQUEST_PORTAL or
    /// SRPC_FRAMEWORK_REQUEST_PORTAL, keyed by its reply id.
    pub(super) fn srpc_request(
        &mut self,
        m: &Message,
        hdr: &LnetHdr,
        app: &App,
        portal: u32,
        owd: i64,
        out: &mut Vec<RpcRecord>,
    ) -> Option<(Nid, Nid)> {
        let (client, server) = self.roles(hdr, true);
        let App::Srpc(s) = app else {
            self.unmatched("selftest_request_body_not_captured");
            return Some((client, server));
        };
        let Some(rpyid) = s.rpyid else {
            self.unmatched("selftest_request_body_not_captured");
            return Some((client, server));
        };
        let kind = match s.msg_type {
            srpc::BRW_REQST => Kind::LstBrw,
            srpc::PING_REQST => Kind::LstPing,
            _ => Kind::LstFramework,
        };
        let i = self.request(kind, (client, server, rpyid), m, owd, out);
        let o = self.slot(i);
        o.rec.portal = Some(portal);
        o.rec.opc_name = Some(
            match (kind, s.brw_rw) {
                (Kind::LstBrw, Some(1)) => "BRW_READ",
                (Kind::LstBrw, Some(2)) => "BRW_WRITE",
                (Kind::LstBrw, _) => "BRW",
                (Kind::LstPing, _) => "PING",
                _ => srpc::type_name(s.msg_type),
            }
            .into(),
        );
        o.rec.op = match s.brw_rw {
            Some(1) => Some("read"),
            Some(2) => Some("write"),
            _ => None,
        };
        if let Some(len) = s.brw_len.filter(|_| kind == Kind::LstBrw) {
            o.expected_bytes = u64::from(len);
        }
        if let Some(b) = s.bulkid.filter(|_| kind == Kind::LstBrw) {
            o.bulkid = Some(b);
            self.bulkids.insert((client, server, b), i);
        }
        self.adopt(i);
        Some((client, server))
    }

    /// Selftest on SRPC_RDMA_PORTAL: a reply (by its reply id), the bulk of a BRW (by its
    /// bulk id), a reply whose request was not captured, or bulk waiting for its request.
    pub(super) fn srpc_rdma_put(
        &mut self,
        m: &Message,
        hdr: &LnetHdr,
        app: &App,
        mb: u64,
        ack_wmd: Wmd,
        out: &mut Vec<RpcRecord>,
    ) -> Option<(Nid, Nid)> {
        let (client, server) = self.roles(hdr, false);
        if let Some(&i) = self.by_key.get(&(client, server, mb)) {
            self.final_reply(i, m, srpc_status(app), None, false);
        } else if let Some(&i) = self.bulkids.get(&(client, server, mb)) {
            self.bulk_data(i, m.first.ts_ns, m.last.ts_ns, hdr.payload_length, mb, true);
        } else if hdr.payload_length <= 4096 && !matches!(app, App::None) {
            // A selftest reply whose request was not captured.
            let i = self.new_rpc(Kind::LstBrw, (client, server, mb), m, out);
            let o = self.slot(i);
            o.rec.portal = Some(SRPC_RDMA_PORTAL);
            o.rec.opc_name = Some("BRW".into());
            self.final_reply(i, m, srpc_status(app), None, false);
        } else {
            self.park_data(m, hdr, (client, server), mb, ack_wmd);
        }
        Some((client, server))
    }

    /// Selftest bulk GET (a BRW write) by its bulk id, or parked for its request.
    pub(super) fn srpc_get(&mut self, m: &Message, hdr: &LnetHdr, mb: u64, wmd: Wmd, sink: u32) -> Option<(Nid, Nid)> {
        let (client, server) = self.roles(hdr, false);
        match self.bulkids.get(&(client, server, mb)).copied() {
            Some(i) => {
                self.bulk_start(i, m.first.ts_ns, m.last.ts_ns);
                self.get_seq += 1;
                self.insert_get((hdr.src_nid, wmd), i, self.get_seq, sink);
            }
            None => {
                self.park_get(hdr.src_nid, wmd, (client, server, mb));
                let what = Parked::Get { wmd, sink, sender: hdr.src_nid };
                self.park(Orphan { client, server, mb, first_ns: m.first.ts_ns, last_ns: m.last.ts_ns, what });
            }
        }
        if let Some(&i) = self.bulkids.get(&(client, server, mb)) {
            let o = self.slot(i);
            o.expected_bytes = o.expected_bytes.max(u64::from(sink));
        }
        Some((client, server))
    }
}
