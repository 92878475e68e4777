//! The LNet ping matcher: a GET on the reserved portal with the ping match bits (a ping
//! or a discovery) is an RPC whose REPLY carries the ping info; the REPLY is matched by
//! the GET's handle (see `on_reply`).

use lnetcap_lnet::message::Message;
use lnetcap_lnet::names::LNET_RESERVED_PORTAL;
use lnetcap_lnet::nid::Nid;
use lnetcap_lnet::wire::consts::PING_MATCHBITS;
use lnetcap_lnet::wire::{LnetHdr, Wmd};

use super::{Kind, Tracker};
use crate::report::RpcRecord;

impl Tracker {
    /// An LNet ping (or discovery) GET: a new RPC keyed by the ping match bits; a ping
    /// that replaces the previous one of the pair closes it.
    pub(super) fn ping_get(
        &mut self,
        m: &Message,
        hdr: &LnetHdr,
        wmd: Wmd,
        sink: u32,
        owd: i64,
        out: &mut Vec<RpcRecord>,
    ) -> Option<(Nid, Nid)> {
        let (client, server) = self.roles(hdr, true);
        let key = (client, server, PING_MATCHBITS);
        if let Some(&old) = self.by_key.get(&key) {
            self.close(old, out, None);
        }
        let i = self.new_rpc(Kind::LnetPing, key, m, out);
        {
            let o = self.slot(i);
            o.rec.opc_name = Some("LNET_PING".into());
            o.rec.portal = Some(LNET_RESERVED_PORTAL);
        }
        self.request(Kind::LnetPing, key, m, owd, out);
        self.get_seq += 1;
        self.insert_get((hdr.src_nid, wmd), i, self.get_seq, sink);
        Some((client, server))
    }
}
