//! The RPC tracker's matchers, one hand-built message sequence per case, each checked
//! against what the sequence means on the wire (not against the tracker's own output):
//! PtlRPC reads (one MD and four), a write's GET and REPLY, a resend, an early reply, a
//! reply that asks for an LNet ACK, a request or a reply not captured; a selftest BRW
//! read; an LNet ping. Each conversation goes through lnetcap-analysis as a capture
//! would (SYN, connreq, HELLOs, one message per segment, 1 ms apart).

mod common;

use std::sync::Arc;

use common::{hello, lnet, nid, tcp_packet};
use lnetcap_analysis::{Analysis, AnalysisConfig, Quiet, Sink};
use lnetcap_capture::CaptureReader;
use lnetcap_lnet::names::{LNET_RESERVED_PORTAL, SRPC_RDMA_PORTAL, SRPC_REQUEST_PORTAL};
use lnetcap_lnet::wire::consts::*;
use lnetcap_lnet::wire::{Connreq, LnetDetail, PingInfo, PtlrpcEmit, SrpcInfo, Wmd};
use lnetcap_rpc::RpcRecord;
use lnetcap_synth::pcapw::{CaptureWriter, Container, Link};
use serde_json::Value;

const C: &str = "10.0.0.2@tcp";
const S: &str = "10.0.0.1@tcp";
/// PtlRPC portals of an OST (names.rs portal_name).
const OST_IO: u32 = 6;
const OST_BULK: u32 = 8;
const OSC_REPLY: u32 = 4;
const OST_READ: u32 = 3;
const OST_WRITE: u32 = 4;
const T0: i64 = 1_700_000_000_000_000_000;
const MS: i64 = 1_000_000;

/// A client ↔ server conversation on one TCP connection, written as a capture.
struct Conv {
    w: CaptureWriter,
    seq: [u32; 2],
    t: i64,
}

impl Conv {
    fn new() -> Self {
        let mut w = CaptureWriter::new(Container::PcapNs, Link::Ethernet, 65535);
        w.packet(T0, &tcp_packet(0, 99, 0, 0x02, 1000, &[]));
        w.packet(T0 + MS, &tcp_packet(1, 499, 100, 0x12, 1000, &[]));
        let mut c = Self { w, seq: [100, 500], t: T0 + MS };
        let mut a = Connreq::emit(&nid(S));
        a.extend(hello(C, S));
        c.send(0, &a);
        c.send(1, &hello(S, C));
        c
    }

    fn send(&mut self, d: usize, bytes: &[u8]) {
        self.t += MS;
        self.w.packet(self.t, &tcp_packet(d, self.seq[d], 0, 0x08, 1000, bytes));
        self.seq[d] = self.seq[d].wrapping_add(bytes.len() as u32);
    }

    /// One LNet message from side `d` (0: client).
    fn msg(&mut self, d: usize, t: u32, detail: LnetDetail, payload: &[u8]) {
        let (src, dst) = if d == 0 { (C, S) } else { (S, C) };
        let mut v = Vec::new();
        lnet(&mut v, src, dst, t, detail, payload, 0);
        self.send(d, &v);
    }

    fn put(&mut self, d: usize, portal: u32, match_bits: u64, ack_wmd: Wmd, offset: u32, payload: &[u8]) {
        let detail = LnetDetail::Put { ack_wmd, match_bits, hdr_data: 0, ptl_index: portal, offset };
        self.msg(d, LNET_PUT, detail, payload);
    }

    fn request(&mut self, opc: u32, xid: u64, last_mbits: u64) {
        let body = PtlrpcEmit {
            pb_type: PTL_RPC_MSG_REQUEST,
            pb_version: 0x0003_0003,
            opc,
            lm_flags: 3,
            mbits: last_mbits,
            extra_buflens: vec![208, 24, 16],
            ..Default::default()
        }
        .emit();
        self.put(0, OST_IO, xid, Wmd::NONE, 0, &body);
    }

    fn reply(&mut self, opc: u32, xid: u64, ack: Wmd) {
        let body = PtlrpcEmit {
            pb_type: PTL_RPC_MSG_REPLY,
            pb_version: 0x0003_0003,
            opc,
            lm_flags: 1,
            service_time: 1,
            extra_buflens: vec![208, 4],
            ..Default::default()
        }
        .emit();
        self.put(1, OSC_REPLY, xid, ack, 224, &body);
    }

    fn early_reply(&mut self, opc: u32, xid: u64) {
        let body = PtlrpcEmit {
            pb_type: PTL_RPC_MSG_REPLY,
            pb_version: 0x0003_0003,
            opc,
            lm_flags: 1,
            lm_cksum: 0xfeed,
            ..Default::default()
        }
        .emit();
        self.put(1, OSC_REPLY, xid, Wmd::NONE, 0, &body);
    }

    /// The RPCs the analysis reconstructs, as the RPC lines write them.
    fn rpcs(self) -> Vec<Value> {
        struct Keep(Vec<Value>);
        impl Sink for Keep {
            fn rpc(&mut self, _file: &str, r: &mut RpcRecord) -> anyhow::Result<()> {
                self.0.push(serde_json::to_value(&*r)?);
                Ok(())
            }
        }
        let mut reader = CaptureReader::from_shared("conv", Arc::new(self.w.finish())).unwrap();
        let mut analysis = Analysis::new(AnalysisConfig::default());
        let mut keep = Keep(Vec::new());
        let done = analysis.add("conv", &mut reader, &mut keep, &mut Quiet).unwrap();
        assert!(done.complete);
        keep.0
    }
}

fn only(rpcs: &[Value]) -> &Value {
    assert_eq!(rpcs.len(), 1, "{rpcs:#?}");
    &rpcs[0]
}

fn missing(r: &Value) -> Vec<&str> {
    r["missing"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect()
}

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| i as u8).collect()
}

#[test]
fn ptlrpc_read_one_md_and_four() {
    for mds in [1u64, 4] {
        let xid = 0x1_0000;
        let mut c = Conv::new();
        c.request(OST_READ, xid, xid + mds - 1);
        for k in 0..mds {
            c.put(1, OST_BULK, xid + k, Wmd::NONE, 0, &data(4096));
        }
        c.reply(OST_READ, xid, Wmd::NONE);
        let rpcs = c.rpcs();
        let r = only(&rpcs);
        assert_eq!(r["kind"], "ptlrpc");
        assert_eq!(r["xid"], format!("0x{xid:x}"));
        assert_eq!((r["opc_name"].as_str(), r["op"].as_str()), (Some("OST_READ"), Some("read")));
        assert_eq!(r["bulk_messages"], mds, "{mds} MDs");
        assert_eq!(r["bytes"], 4096 * mds);
        assert_eq!((r["partial"].as_bool(), missing(r).len()), (Some(false), 0), "{r}");
        // Request at +3 ms (SYN, SYN-ACK, connreq+HELLO, HELLO), one message a ms.
        let t = |k: i64| T0 + k * MS;
        assert_eq!(r["t_start_ns"], t(4));
        assert_eq!(r["t_bulk_start_ns"], t(5));
        assert_eq!(r["t_bulk_end_ns"], t(4 + mds as i64));
        assert_eq!(r["t_reply_ns"], t(5 + mds as i64));
        assert_eq!(r["service_time_s"], 1);
    }
}

#[test]
fn ptlrpc_write_get_and_reply() {
    let xid = 0x2_0000;
    let mut c = Conv::new();
    c.request(OST_WRITE, xid, xid);
    let w = Wmd { interface: 7, object: 0x13 };
    let get = LnetDetail::Get { return_wmd: w, match_bits: xid, ptl_index: OST_BULK, src_offset: 0, sink_length: 8192 };
    c.msg(1, LNET_GET, get, &[]);
    c.msg(0, LNET_REPLY, LnetDetail::Reply { dst_wmd: w }, &data(8192));
    c.reply(OST_WRITE, xid, Wmd::NONE);
    let rpcs = c.rpcs();
    let r = only(&rpcs);
    assert_eq!((r["opc_name"].as_str(), r["op"].as_str()), (Some("OST_WRITE"), Some("write")));
    assert_eq!((r["bytes"].as_u64(), r["bulk_messages"].as_u64()), (Some(8192), Some(1)));
    // The bulk starts with the server's GET and ends with the client's data.
    assert_eq!((r["t_bulk_start_ns"].as_i64(), r["t_bulk_end_ns"].as_i64()), (Some(T0 + 5 * MS), Some(T0 + 6 * MS)));
    assert_eq!(r["partial"], false, "{r}");
}

#[test]
fn ptlrpc_resend_early_reply_and_reply_ack() {
    let xid = 0x3_0000;
    let mut c = Conv::new();
    c.request(OST_READ, xid, xid);
    c.request(OST_READ, xid, xid);
    c.early_reply(OST_READ, xid);
    c.put(1, OST_BULK, xid, Wmd::NONE, 0, &data(4096));
    let ack = Wmd { interface: 2, object: 9 };
    c.reply(OST_READ, xid, ack);
    c.msg(0, LNET_ACK, LnetDetail::Ack { dst_wmd: ack, match_bits: xid, mlength: 200 }, &[]);
    let rpcs = c.rpcs();
    let r = only(&rpcs);
    assert_eq!((r["resends"].as_u64(), r["early_replies"].as_u64()), (Some(1), Some(1)), "{r}");
    assert_eq!(r["t_reply_ns"], T0 + 8 * MS, "the final reply, not the early one");
    assert_eq!(r["t_reply_ack_ns"], T0 + 9 * MS);
    assert_eq!(r["partial"], false, "{r}");
}

#[test]
fn ptlrpc_missing_request_reply_and_reply_ack() {
    // A reply whose request was not captured: one RPC, partial, missing its request.
    let mut c = Conv::new();
    c.put(1, OST_BULK, 0x4_0000, Wmd::NONE, 0, &data(4096));
    c.reply(OST_READ, 0x4_0000, Wmd::NONE);
    let rpcs = c.rpcs();
    let r = only(&rpcs);
    assert!(missing(r).contains(&"request") && r["partial"] == true, "{r}");
    // A request and its bulk, no reply (the capture ends): missing its reply. A reply
    // that asks for an LNet ACK that never comes: missing reply_ack.
    let mut c = Conv::new();
    c.request(OST_READ, 0x5_0000, 0x5_0000);
    c.put(1, OST_BULK, 0x5_0000, Wmd::NONE, 0, &data(4096));
    c.request(OST_READ, 0x6_0000, 0x6_0000);
    c.put(1, OST_BULK, 0x6_0000, Wmd::NONE, 0, &data(4096));
    c.reply(OST_READ, 0x6_0000, Wmd { interface: 2, object: 10 });
    let rpcs = c.rpcs();
    assert_eq!(rpcs.len(), 2, "{rpcs:#?}");
    let by = |x: &str| rpcs.iter().find(|r| r["xid"] == x).unwrap();
    assert_eq!(missing(by("0x50000")), ["reply"]);
    assert_eq!(missing(by("0x60000")), ["reply_ack"]);
    assert!(rpcs.iter().all(|r| r["partial"] == true));
}

#[test]
fn selftest_brw_read() {
    let (rpyid, bulkid) = (0x77, 0x78);
    let mut c = Conv::new();
    c.put(0, SRPC_REQUEST_PORTAL, 11, Wmd::NONE, 0, &SrpcInfo::emit_brw_request(rpyid, bulkid, 1, 4096, 1));
    c.put(1, SRPC_RDMA_PORTAL, bulkid, Wmd::NONE, 0, &data(4096));
    c.put(1, SRPC_RDMA_PORTAL, rpyid, Wmd::NONE, 0, &SrpcInfo::emit_brw_reply(0));
    let rpcs = c.rpcs();
    let r = only(&rpcs);
    assert_eq!(
        (r["kind"].as_str(), r["opc_name"].as_str(), r["op"].as_str()),
        (Some("lst_brw"), Some("BRW_READ"), Some("read"))
    );
    assert_eq!((r["bytes"].as_u64(), r["status"].as_i64()), (Some(4096), Some(0)));
    assert_eq!(r["partial"], false, "{r}");
}

#[test]
fn lnet_ping() {
    let mut c = Conv::new();
    let w = Wmd { interface: 1, object: 5 };
    let get = LnetDetail::Get {
        return_wmd: w,
        match_bits: PING_MATCHBITS,
        ptl_index: LNET_RESERVED_PORTAL,
        src_offset: 0,
        sink_length: 4096,
    };
    c.msg(0, LNET_GET, get, &[]);
    c.msg(1, LNET_REPLY, LnetDetail::Reply { dst_wmd: w }, &PingInfo::emit(&[nid(S)], PID_LUSTRE));
    let rpcs = c.rpcs();
    let r = only(&rpcs);
    assert_eq!((r["kind"].as_str(), r["opc_name"].as_str()), (Some("lnet_ping"), Some("LNET_PING")));
    assert_eq!((r["t_start_ns"].as_i64(), r["t_end_ns"].as_i64()), (Some(T0 + 4 * MS), Some(T0 + 5 * MS)));
    assert_eq!(r["partial"], false, "{r}");
}
