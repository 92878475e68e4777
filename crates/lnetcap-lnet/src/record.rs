//! The flat, versioned record of one message: the `lnetcap decode --format jsonl` schema
//! (docs/decode-jsonl.md) and the source of the text format.
//!
//! 64-bit identifiers (match bits, cookies, XIDs, wire handles, incarnations) are hex
//! strings: JSON numbers lose bits past 2^53.

use std::sync::Arc;

use serde::Serialize;

use crate::jsonw::HexText;
use crate::limits::RECORD_NID_TEXTS;
use crate::message::{App, Body, Message};
use crate::names::{opc_name, portal_name};
use crate::nid::Nid;
use crate::wire::consts::{LNET_GET, LNET_PUT};
use crate::wire::{conn_type, srpc, LnetDetail, Wmd};

mod json;
mod text;

/// Schema version of [`MessageRecord`]; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// A 64-bit identifier (match bits, cookie, XID, incarnation): kept as a number, written
/// as a `0x…` hex string (JSON numbers lose bits past 2^53).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Hex(pub u64);

impl std::fmt::Display for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(HexText::new(self.0, 1).as_str())
    }
}

impl Serialize for Hex {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(HexText::new(self.0, 1).as_str())
    }
}

/// A 32-bit checksum, written as eight hex digits (`0x0000abcd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hex32(pub u32);

impl std::fmt::Display for Hex32 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(HexText::new(u64::from(self.0), 8).as_str())
    }
}

impl Serialize for Hex32 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(HexText::new(u64::from(self.0), 8).as_str())
    }
}

/// `0x{interface:x}:0x{object:x}`, without the formatting machinery.
fn wmd(w: &Wmd) -> Option<String> {
    (!w.is_unknown()).then(|| {
        let (a, b) = (HexText::new(w.interface, 1), HexText::new(w.object, 1));
        let mut s = String::with_capacity(a.len() + 1 + b.len());
        s.push_str(a.as_str());
        s.push(':');
        s.push_str(b.as_str());
        s
    })
}

/// One message as a flat record. Keys absent from a message are omitted.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct MessageRecord {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Input file (only when several files are decoded in one run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// 1-based frame number of the frame holding the first header byte.
    pub frame: u64,
    /// Frame holding the last byte.
    pub frame_last: u64,
    /// Capture time of `frame`, ns since the epoch.
    pub ts_ns: i64,
    /// Capture time of `frame_last`.
    pub ts_last_ns: i64,
    /// Connection id (order of first packet in the capture).
    pub conn: u32,
    /// `srcip:port->dstip:port` of the sending direction.
    pub tcp: Arc<str>,
    /// CONNREQ, HELLO, NOOP, PUT, GET, REPLY, ACK.
    pub kind: &'static str,
    /// socklnd version framing the message (absent for CONNREQ/HELLO).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proto: Option<u8>,
    /// Stream offset of the first byte.
    pub stream_offset: u64,
    /// Bytes the message occupies in the stream.
    pub wire_len: u64,
    /// Every header byte was captured.
    pub header_complete: bool,
    /// Payload bytes captured.
    pub payload_captured: u64,
    /// The message was not decoded but inferred in a run of bytes the capture lost (only
    /// the fields its decoded neighbours determine are present).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inferred: bool,
    /// Source NID (HELLO: sender; LNet: originator).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src_nid: Option<Arc<str>>,
    /// Destination NID (CONNREQ: target; HELLO: what the sender believes the peer is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_nid: Option<Arc<str>>,
    /// Source pid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src_pid: Option<u32>,
    /// Destination pid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_pid: Option<u32>,
    /// Acceptor connreq version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connreq_version: Option<u32>,
    /// HELLO version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hello_version: Option<u32>,
    /// HELLO connection type (CONTROL, BULK_IN, BULK_OUT, ANY, NONE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conn_type: Option<&'static str>,
    /// HELLO incarnation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<Hex>,
    /// ksock checksum (when non-zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csum: Option<Hex32>,
    /// ksock zero-copy request cookie (when non-zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zc_req_cookie: Option<Hex>,
    /// ksock zero-copy ACK cookie (when non-zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zc_ack_cookie: Option<Hex>,
    /// LNet payload length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_length: Option<u32>,
    /// Portal (PUT, GET).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub portal: Option<u32>,
    /// Portal name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub portal_name: Option<&'static str>,
    /// Match bits (PUT, GET, ACK).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_bits: Option<Hex>,
    /// Low 32 bits of the match bits of a header the snaplen cut before their high half.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_bits_low32: Option<Hex>,
    /// PUT hdr_data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hdr_data: Option<Hex>,
    /// PUT offset in the target MD.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub put_offset: Option<u32>,
    /// PUT ack_wmd (absent when no ACK is wanted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_wmd: Option<String>,
    /// GET return_wmd.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub return_wmd: Option<String>,
    /// REPLY/ACK dst_wmd.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_wmd: Option<String>,
    /// GET sink_length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sink_length: Option<u32>,
    /// GET src_offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src_offset: Option<u32>,
    /// ACK mlength.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mlength: Option<u32>,
    /// PtlRPC: request, reply or error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ptlrpc: Option<&'static str>,
    /// PtlRPC opcode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opc: Option<u32>,
    /// PtlRPC opcode name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opc_name: Option<&'static str>,
    /// PtlRPC pb_status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    /// PtlRPC pb_service_time (s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_time: Option<u32>,
    /// PtlRPC pb_mbits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pb_mbits: Option<Hex>,
    /// PtlRPC jobid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobid: Option<String>,
    /// PtlRPC early reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_reply: Option<bool>,
    /// Self-test message type name (BRW_REQST, BRW_REPLY, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub srpc_type: Option<&'static str>,
    /// Self-test rpyid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpyid: Option<Hex>,
    /// Self-test bulkid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bulkid: Option<Hex>,
    /// Self-test BRW direction (read, write).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brw_rw: Option<&'static str>,
    /// Self-test BRW bulk length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brw_len: Option<u32>,
    /// Self-test reply status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub srpc_status: Option<u32>,
    /// LNet ping info: NIDs listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ping_nids: Option<Vec<String>>,
}

/// The text of recently written NIDs: a message names two, and a capture a handful of
/// peers, so most NIDs are formatted once instead of twice a message, and shared rather
/// than copied into each record. Direct-mapped, [`RECORD_NID_TEXTS`] entries: bounded
/// whatever the capture.
pub struct NidTexts {
    slots: Vec<Option<(Nid, Arc<str>)>>,
}

impl Default for NidTexts {
    fn default() -> Self {
        Self { slots: vec![None; RECORD_NID_TEXTS] }
    }
}

impl NidTexts {
    /// The NID's text (`Nid`'s `Display`).
    pub fn text(&mut self, n: Nid) -> Arc<str> {
        let a = u32::from_ne_bytes([n.addr[0], n.addr[1], n.addr[2], n.addr[3]]);
        let b = u32::from_ne_bytes([n.addr[12], n.addr[13], n.addr[14], n.addr[15]]);
        let h = (a ^ b.rotate_left(7) ^ (u32::from(n.num) << 8) ^ u32::from(n.lnd)).wrapping_mul(0x9e37_79b1);
        // The hash's top bits pick the slot (a multiplicative hash mixes most there).
        let slot = &mut self.slots[(h >> (32 - RECORD_NID_TEXTS.trailing_zeros())) as usize];
        match slot {
            Some((k, t)) if *k == n => t.clone(),
            _ => {
                let t: Arc<str> = n.to_string().into();
                *slot = Some((n, t.clone()));
                t
            }
        }
    }
}

impl MessageRecord {
    /// Flattens a message; `tcp` is the sending direction's tuple.
    pub fn from_message(m: &Message, tcp: impl Into<Arc<str>>) -> Self {
        Self::build(m, tcp.into(), &mut |n| n.to_string().into())
    }

    /// [`MessageRecord::from_message`], with the NIDs' text from (and into) `nids`.
    pub fn from_message_cached(m: &Message, tcp: Arc<str>, nids: &mut NidTexts) -> Self {
        Self::build(m, tcp, &mut |n| nids.text(n))
    }

    fn build(m: &Message, tcp: Arc<str>, nid: &mut impl FnMut(Nid) -> Arc<str>) -> Self {
        let mut r = Self {
            schema_version: SCHEMA_VERSION,
            frame: m.first.frame,
            frame_last: m.last.frame,
            ts_ns: m.first.ts_ns,
            ts_last_ns: m.last.ts_ns,
            conn: m.conn.0,
            tcp,
            kind: m.kind(),
            proto: m.proto.map(|p| p.version()),
            stream_offset: m.offset,
            wire_len: m.wire_len,
            header_complete: m.header_complete,
            payload_captured: m.payload_captured,
            inferred: m.inferred,
            ..Self::default()
        };
        let nz = |v: u64| (v != 0).then_some(Hex(v));
        match &m.body {
            Body::Connreq(c) => {
                r.connreq_version = Some(c.version);
                r.dst_nid = Some(nid(c.target_nid));
            }
            Body::Hello(h) => {
                r.hello_version = Some(h.version);
                r.conn_type = Some(conn_type::name(h.conn_type));
                r.src_nid = Some(nid(h.src_nid));
                r.dst_nid = h.dst_nid.map(&mut *nid);
                r.src_pid = Some(h.src_pid);
                r.dst_pid = Some(h.dst_pid);
                r.incarnation = Some(Hex(h.src_incarnation));
            }
            Body::Noop(k) => {
                r.csum = (k.csum != 0).then_some(Hex32(k.csum));
                r.zc_req_cookie = nz(k.zc_req_cookie);
                r.zc_ack_cookie = nz(k.zc_ack_cookie);
            }
            Body::Lnet { ksock, hdr, app } => {
                if let Some(k) = ksock {
                    r.csum = (k.csum != 0).then_some(Hex32(k.csum));
                    r.zc_req_cookie = nz(k.zc_req_cookie);
                    r.zc_ack_cookie = nz(k.zc_ack_cookie);
                }
                r.src_nid = Some(nid(hdr.src_nid));
                r.dst_nid = Some(nid(hdr.dest_nid));
                r.src_pid = Some(hdr.src_pid);
                r.dst_pid = Some(hdr.dest_pid);
                r.payload_length = Some(hdr.payload_length);
                match hdr.detail {
                    Some(LnetDetail::Put { ack_wmd, match_bits, hdr_data, ptl_index, offset }) => {
                        r.portal = Some(ptl_index);
                        r.match_bits = Some(Hex(match_bits));
                        r.hdr_data = Some(Hex(hdr_data));
                        r.put_offset = Some(offset);
                        r.ack_wmd = if ack_wmd.is_none() { None } else { wmd(&ack_wmd) };
                    }
                    Some(LnetDetail::Get { return_wmd, match_bits, ptl_index, src_offset, sink_length }) => {
                        r.portal = Some(ptl_index);
                        r.match_bits = Some(Hex(match_bits));
                        r.return_wmd = wmd(&return_wmd);
                        r.src_offset = Some(src_offset);
                        r.sink_length = Some(sink_length);
                    }
                    Some(LnetDetail::Reply { dst_wmd }) => r.dst_wmd = wmd(&dst_wmd),
                    Some(LnetDetail::Ack { dst_wmd, match_bits, mlength }) => {
                        r.dst_wmd = wmd(&dst_wmd);
                        r.match_bits = Some(Hex(match_bits));
                        r.mlength = Some(mlength);
                    }
                    Some(LnetDetail::Hello { .. }) | Some(LnetDetail::Unknown) => {}
                    None => {
                        // A header cut by the snaplen: the handle and half the match bits.
                        let cut = hdr.cut.unwrap_or_default();
                        r.match_bits_low32 = cut.match_bits_lo.map(|x| Hex(u64::from(x)));
                        let w = cut.wmd.filter(|w| !w.is_none()).and_then(|w| wmd(&w));
                        match hdr.msg_type {
                            LNET_PUT => r.ack_wmd = w,
                            LNET_GET => r.return_wmd = w,
                            _ => r.dst_wmd = w,
                        }
                    }
                }
                r.portal_name = r.portal.and_then(portal_name);
                match app {
                    App::Ptlrpc(p) => {
                        r.ptlrpc = p.kind_name();
                        r.opc = p.opc;
                        r.opc_name = p.opc.and_then(opc_name);
                        r.status = p.status;
                        r.service_time = p.service_time;
                        r.pb_mbits = p.mbits.map(Hex);
                        r.jobid = p.jobid.clone();
                        r.early_reply = p.looks_early_reply().then_some(true);
                    }
                    App::Srpc(s) => {
                        r.srpc_type = Some(srpc::type_name(s.msg_type));
                        r.rpyid = s.rpyid.map(Hex);
                        r.bulkid = s.bulkid.map(Hex);
                        r.brw_rw = s.brw_rw.map(|x| match x {
                            1 => "read",
                            2 => "write",
                            _ => "unknown",
                        });
                        r.brw_len = s.brw_len;
                        r.srpc_status = s.status;
                    }
                    App::Ping(p) => r.ping_nids = Some(p.nids.iter().map(|n| nid(*n).to_string()).collect()),
                    App::None => {}
                }
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every field set, and the names a record can hold: a field added to the record
    /// without a line here fails to compile (no `..Default`), one added here but not to
    /// the writer fails the comparison.
    /// Records for the writers' proptests: full or empty, with the fields that change
    /// their form drawn at random (strings JSON escapes, negative and wide numbers, names
    /// present or not).
    pub(super) fn arb_record() -> impl Strategy<Value = MessageRecord> {
        use proptest::option::of;
        let text = (".{0,24}", of(proptest::collection::vec(".{0,8}", 0..4)), of(".{0,12}"), of("[a-z/\"]{0,6}"));
        let kinds = proptest::sample::select(vec!["CONNREQ", "HELLO", "NOOP", "PUT", "GET", "REPLY", "ACK", ""]);
        let numbers = (any::<u64>(), any::<i64>(), prop_oneof![0u64..100_000_000_000, any::<u64>()], kinds);
        let app = (of(any::<u32>()), of(prop_oneof![-3i32..3, any::<i32>()]), of(any::<bool>()));
        (text, numbers, app, any::<[bool; 6]>()).prop_map(
            |((s, nids, jobid, file), (n, ts, frame, kind), app, flags)| {
                let mut r = if flags[0] { full_record(&s, n) } else { MessageRecord::default() };
                (r.ts_ns, r.frame, r.kind) = (ts, frame, kind);
                (r.ping_nids, r.jobid, r.file) = (nids, jobid, file);
                (r.inferred, r.header_complete) = (flags[1], flags[2]);
                (r.opc, r.status, r.early_reply) = app;
                if flags[3] {
                    r.opc_name = None;
                    r.match_bits = None;
                }
                if flags[4] {
                    r.tcp = s.into();
                    r.src_nid = None;
                }
                if flags[5] {
                    r.connreq_version = Some(1);
                    r.hello_version = None;
                }
                r
            },
        )
    }

    pub(super) fn full_record(s: &str, n: u64) -> MessageRecord {
        MessageRecord {
            schema_version: 1,
            file: Some(format!("{s}.pcap")),
            frame: n,
            frame_last: n + 1,
            ts_ns: -(n as i64),
            ts_last_ns: i64::MAX,
            conn: u32::MAX,
            tcp: s.into(),
            kind: "PUT",
            proto: Some(3),
            stream_offset: u64::MAX,
            wire_len: n,
            header_complete: false,
            payload_captured: 7,
            inferred: true,
            src_nid: Some(s.into()),
            dst_nid: Some("10.0.0.1@o2ib3".into()),
            src_pid: Some(12345),
            dst_pid: Some(0),
            connreq_version: Some(1),
            hello_version: Some(3),
            conn_type: Some("BULK_IN"),
            incarnation: Some(Hex(n)),
            csum: Some(Hex32(n as u32)),
            zc_req_cookie: Some(Hex(u64::MAX)),
            zc_ack_cookie: Some(Hex(0)),
            payload_length: Some(4096),
            portal: Some(4),
            portal_name: Some("OST_IO_PORTAL"),
            match_bits: Some(Hex(n ^ 0xdead)),
            match_bits_low32: Some(Hex(0xbeef)),
            hdr_data: Some(Hex(1)),
            put_offset: Some(0),
            ack_wmd: Some("0x1:0x2".into()),
            return_wmd: Some(s.to_string()),
            dst_wmd: Some("0x0:0x0".into()),
            sink_length: Some(1 << 20),
            src_offset: Some(17),
            mlength: Some(u32::MAX),
            ptlrpc: Some("request"),
            opc: Some(4),
            opc_name: Some("OST_WRITE"),
            status: Some(-2),
            service_time: Some(9),
            pb_mbits: Some(Hex(n << 3)),
            jobid: Some(s.to_string()),
            early_reply: Some(false),
            srpc_type: Some("BRW_REQST"),
            rpyid: Some(Hex(5)),
            bulkid: Some(Hex(6)),
            brw_rw: Some("write"),
            brw_len: Some(65536),
            srpc_status: Some(0),
            ping_nids: Some(vec![s.to_string(), "0@lo".into(), String::new()]),
        }
    }

    #[test]
    fn test_hex_text_at_the_edges() {
        for v in [0, 1, 0xf, 0x10, 0xdead_beef, u64::MAX] {
            assert_eq!(Hex(v).to_string(), format!("0x{v:x}"));
        }
        assert_eq!(Hex32(0).to_string(), "0x00000000");
        assert_eq!(serde_json::to_string(&Hex32(0xabcd)).unwrap(), "\"0x0000abcd\"");
    }

    proptest! {
        #[test]
        fn test_hex_text_is_std_format(v in any::<u64>(), w in any::<u32>(), shift in 0u32..64) {
            let v = v >> shift;
            prop_assert_eq!(Hex(v).to_string(), format!("0x{v:x}"));
            prop_assert_eq!(serde_json::to_string(&Hex(v)).unwrap(), format!("\"0x{v:x}\""));
            prop_assert_eq!(Hex32(w).to_string(), format!("0x{w:08x}"));
        }

        #[test]
        fn test_wmd_text_is_std_format(i in any::<u64>(), o in any::<u64>(), shift in 0u32..64) {
            let w = Wmd { interface: i >> shift, object: o };
            let want = (!w.is_unknown()).then(|| format!("0x{:x}:0x{:x}", w.interface, w.object));
            prop_assert_eq!(wmd(&w), want);
        }

        /// The cache gives every NID its own text, whatever collides in its slots: a
        /// few hundred NIDs through 64 slots, each asked for again and again.
        #[test]
        fn test_nid_texts_are_display(
            picks in proptest::collection::vec((0u8..4, any::<u16>(), 0u16..3), 1..400),
            lnd in proptest::sample::select(vec![2u8, 5, 9, 255]),
        ) {
            let mut cache = NidTexts::default();
            for (hi, lo, num) in picks {
                let ip = std::net::Ipv4Addr::from(u32::from(hi) << 24 | u32::from(lo));
                let n = Nid::ipv4(ip, lnd, num);
                prop_assert_eq!(&*cache.text(n), n.to_string());
                let other = Nid::from_u64(u64::from(lo) << 32 | u64::from(hi));
                prop_assert_eq!(&*cache.text(other), other.to_string());
                let v6 = Nid::ipv6(std::net::Ipv6Addr::from(u128::from(lo) << 64 | u128::from(hi)), lnd, num);
                prop_assert_eq!(&*cache.text(v6), v6.to_string());
            }
        }
    }
}
