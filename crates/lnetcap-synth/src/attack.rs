//! Adversarial captures: inputs built to exhaust an analyzer's memory or confuse its
//! indexes (floods of connections, RPCs never answered, lengths that lie, reorder storms).
//! Unlike the simulator these are written packet by packet straight to a writer, so a
//! capture of millions of connections never sits in memory, and the truth is a count of
//! what was written (see [`AttackTruth`]).

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr};

use lnetcap_lnet::wire::consts::*;
use lnetcap_lnet::wire::{conn_type, Connreq, Hello, KsockHdr, LnetDetail, LnetHdr, PtlrpcEmit, Wmd, NID4};
use lnetcap_lnet::Nid;
use serde::Serialize;

use crate::pcapw::{build_packet, CaptureWriter, TcpPacket};
use crate::{Container, Link};

/// An adversarial scenario: name and what it writes for a count `n`.
#[derive(Debug, Clone, Copy)]
pub struct Attack {
    /// Name (`lnetcap synth --scenario NAME --count N`).
    pub name: &'static str,
    /// What it writes.
    pub about: &'static str,
    /// `n` when `--count` is not given.
    pub default_count: u64,
}

/// Every adversarial scenario.
pub const ATTACKS: &[Attack] = &[
    Attack { name: "flood-syn", about: "n connections that each send one SYN", default_count: 1_000_000 },
    Attack {
        name: "flood-hello",
        about: "n connections that each complete the handshake and send a connreq + HELLO",
        default_count: 1_000_000,
    },
    Attack {
        name: "unanswered",
        about: "n OST_WRITE requests (asking for an LNet ACK) over 16 connections, each followed by the server's bulk GET; nothing is ever answered",
        default_count: 1_000_000,
    },
    Attack {
        name: "huge-length",
        about: "n connections whose one LNet header claims a 4 GiB payload, followed by nothing",
        default_count: 10_000,
    },
    Attack {
        name: "reorder-storm",
        about: "n MDS_GETATTR RPCs on one connection, every 2048 segments of each direction sent in reverse order",
        default_count: 200_000,
    },
    Attack {
        name: "zero-window",
        about: "a write whose server holds a zero window forever: n window probes 200 ms apart",
        default_count: 1_000_000,
    },
    Attack {
        name: "same-xid",
        about: "n clients that all use XID 0x1000 for one MDS_GETATTR each, answered",
        default_count: 1_000,
    },
    Attack {
        name: "flip-nid",
        about: "n requests on one connection, each from a different source NID",
        default_count: 1_000_000,
    },
];

/// What an adversarial capture holds (its truth).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct AttackTruth {
    /// Scenario.
    pub scenario: String,
    /// Its count.
    pub count: u64,
    /// Packets written.
    pub packets: u64,
    /// TCP connections opened.
    pub connections: u64,
    /// LNet messages written.
    pub lnet_messages: u64,
    /// PtlRPC requests written.
    pub requests: u64,
    /// PtlRPC replies written.
    pub replies: u64,
    /// Bulk GETs written (never answered).
    pub gets: u64,
}

const MSS: usize = 1448;
const SERVER_PORT: u16 = 988;
const T0: i64 = 1_700_000_000_000_000_000;

struct Flow {
    client: IpAddr,
    server: IpAddr,
    cport: u16,
    seq: [u32; 2],
}

/// Writes packets to `out` as they are made.
struct Writer<W: Write> {
    cw: CaptureWriter,
    out: W,
    t: i64,
    truth: AttackTruth,
}

fn client_ip(i: u64) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | ((i as u32 + 2) & 0x00ff_ffff)))
}

fn nid_of(ip: IpAddr) -> Nid {
    match ip {
        IpAddr::V4(a) => Nid::from_u64(0x0002_0000_0000_0000 | u64::from(u32::from(a))),
        IpAddr::V6(_) => Nid::from_u64(0),
    }
}

impl<W: Write> Writer<W> {
    fn packet(&mut self, f: &mut Flow, dir: usize, flags: u8, payload: &[u8], window: u16) -> io::Result<()> {
        let (src, dst, sport, dport) = if dir == 0 {
            (f.client, f.server, f.cport, SERVER_PORT)
        } else {
            (f.server, f.client, SERVER_PORT, f.cport)
        };
        let p = TcpPacket {
            src,
            dst,
            sport,
            dport,
            seq: f.seq[dir],
            ack: f.seq[1 - dir],
            flags,
            window,
            options: &[],
            payload,
            ip_id: 0,
        };
        let bytes = build_packet(Link::Ethernet, &p);
        self.t += 1_000;
        self.cw.packet(self.t, &bytes);
        self.truth.packets += 1;
        let syn_fin = u32::from(flags & 0x03 != 0);
        f.seq[dir] = f.seq[dir].wrapping_add(payload.len() as u32 + syn_fin);
        if self.cw.len() >= 1 << 20 {
            self.out.write_all(&self.cw.take())?;
        }
        Ok(())
    }

    /// Stream bytes in MSS-sized segments, PSH on the last.
    fn send(&mut self, f: &mut Flow, dir: usize, bytes: &[u8]) -> io::Result<()> {
        let n = bytes.chunks(MSS).len();
        for (i, c) in bytes.chunks(MSS).enumerate() {
            let flags = if i + 1 == n { 0x18 } else { 0x10 };
            self.packet(f, dir, flags, c, 0xffff)?;
        }
        Ok(())
    }

    fn open(&mut self, i: u64, server: IpAddr) -> io::Result<Flow> {
        let mut f = Flow { client: client_ip(i), server, cport: 1023 - (i % 512) as u16, seq: [1_000, 5_000] };
        self.packet(&mut f, 0, 0x02, &[], 0xffff)?;
        self.packet(&mut f, 1, 0x12, &[], 0xffff)?;
        self.packet(&mut f, 0, 0x10, &[], 0xffff)?;
        self.truth.connections += 1;
        Ok(f)
    }

    /// Opens connection `i` and exchanges V3 HELLOs (the server's answer too when `both`).
    fn open_lnet(&mut self, i: u64, server: IpAddr, both: bool) -> io::Result<Flow> {
        let mut f = self.open(i, server)?;
        let (c, s) = (nid_of(f.client), nid_of(f.server));
        self.send(&mut f, 0, &hello(c, s, conn_type::ANY))?;
        if both {
            self.send(&mut f, 1, &hello(s, c, conn_type::ANY))?;
        }
        Ok(f)
    }

    fn finish(mut self) -> io::Result<AttackTruth> {
        self.out.write_all(&self.cw.take())?;
        self.out.flush()?;
        Ok(self.truth)
    }
}

fn hello(src: Nid, dst: Nid, ctype: u32) -> Vec<u8> {
    Hello {
        version: 3,
        flip: false,
        src_nid: src,
        dst_nid: Some(dst),
        src_pid: PID_LUSTRE,
        dst_pid: 0,
        src_incarnation: 0x17a5_c3d2_e1f0_0000,
        dst_incarnation: 0,
        conn_type: ctype,
        ips: Vec::new(),
    }
    .emit()
}

/// A ksock LNET message: the header (payload_length as given) and `body`.
fn lnet(src: Nid, dst: Nid, msg_type: u32, detail: LnetDetail, payload_length: u32, body: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(96 + body.len());
    KsockHdr { msg_type: KSOCK_LNET, csum: 0, zc_req_cookie: 0, zc_ack_cookie: 0 }.emit(&mut b);
    LnetHdr {
        dest_nid: dst,
        src_nid: src,
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        msg_type,
        payload_length,
        detail: Some(detail),
        cut: None,
    }
    .emit(NID4, &mut b);
    b.extend_from_slice(body);
    b
}

/// An OST_WRITE request (1 MiB, one MD) with XID `xid`, asking for an ACK when `ack`.
fn write_request(src: Nid, dst: Nid, xid: u64, ack: bool) -> Vec<u8> {
    let body = PtlrpcEmit {
        pb_type: PTL_RPC_MSG_REQUEST,
        pb_version: 0x0003_0003,
        opc: 4,
        lm_flags: 3,
        timeout: 11,
        mbits: xid,
        jobid: "dd.1000".into(),
        extra_buflens: vec![208, 24, 16, 0, 0],
        ..Default::default()
    }
    .emit();
    let ack_wmd = if ack { Wmd { interface: 0x77, object: xid << 2 | 3 } } else { Wmd::NONE };
    ptlrpc_put(src, dst, &body, ack_wmd, xid, 6, 0)
}

/// A PUT carrying a lustre_msg `body` to `portal` with the XID as match bits.
fn ptlrpc_put(src: Nid, dst: Nid, body: &[u8], ack_wmd: Wmd, xid: u64, portal: u32, offset: u32) -> Vec<u8> {
    let d = LnetDetail::Put { ack_wmd, match_bits: xid, hdr_data: 0, ptl_index: portal, offset };
    lnet(src, dst, LNET_PUT, d, body.len() as u32, body)
}

/// An MDS_GETATTR request (opcode 33, MDS portal 12): no bulk, so a reply completes it.
fn getattr_request(src: Nid, dst: Nid, xid: u64) -> Vec<u8> {
    let body = PtlrpcEmit {
        pb_type: PTL_RPC_MSG_REQUEST,
        pb_version: 0x0002_0003,
        opc: 33,
        lm_flags: 3,
        timeout: 11,
        mbits: xid,
        extra_buflens: vec![216],
        ..Default::default()
    }
    .emit();
    ptlrpc_put(src, dst, &body, Wmd::NONE, xid, 12, 0)
}

/// The reply to an MDS_GETATTR with XID `xid` (MDS reply portal 10).
fn reply(src: Nid, dst: Nid, xid: u64) -> Vec<u8> {
    let body = PtlrpcEmit {
        pb_type: PTL_RPC_MSG_REPLY,
        pb_version: 0x0002_0003,
        opc: 33,
        lm_flags: 1,
        service_time: 1,
        timeout: 11,
        extra_buflens: vec![216, 64],
        ..Default::default()
    }
    .emit();
    ptlrpc_put(src, dst, &body, Wmd::NONE, xid, 10, 224)
}

/// Writes adversarial scenario `name` with count `n` to `out` (pcap, Ethernet, ns
/// timestamps); `None` when no such scenario exists.
pub fn write_attack<W: Write>(name: &str, n: u64, out: W) -> Option<io::Result<AttackTruth>> {
    let attack = ATTACKS.iter().find(|a| a.name == name)?;
    let mut w = Writer {
        cw: CaptureWriter::new(Container::PcapNs, Link::Ethernet, 65535),
        out,
        t: T0,
        truth: AttackTruth { scenario: attack.name.into(), count: n, ..AttackTruth::default() },
    };
    let r = match attack.name {
        "flood-syn" => flood(&mut w, n, false),
        "flood-hello" => flood(&mut w, n, true),
        "unanswered" => unanswered(&mut w, n),
        "huge-length" => huge_length(&mut w, n),
        "reorder-storm" => reorder_storm(&mut w, n),
        "zero-window" => zero_window(&mut w, n),
        "same-xid" => same_xid(&mut w, n),
        _ => flip_nid(&mut w, n),
    };
    Some(r.and_then(|()| w.finish()))
}

const SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 255, 0, 1));

fn flood<W: Write>(w: &mut Writer<W>, n: u64, hello_too: bool) -> io::Result<()> {
    for i in 0..n {
        if hello_too {
            let mut f = w.open(i, SERVER)?;
            let (c, s) = (nid_of(f.client), nid_of(f.server));
            let mut b = Connreq::emit(&s);
            b.extend_from_slice(&hello(c, s, conn_type::ANY));
            w.send(&mut f, 0, &b)?;
            w.truth.lnet_messages += 1;
        } else {
            let mut f = Flow { client: client_ip(i), server: SERVER, cport: 1023 - (i % 512) as u16, seq: [1_000, 0] };
            w.packet(&mut f, 0, 0x02, &[], 0xffff)?;
            w.truth.connections += 1;
        }
    }
    Ok(())
}

fn unanswered<W: Write>(w: &mut Writer<W>, n: u64) -> io::Result<()> {
    let mut flows = Vec::new();
    for i in 0..16 {
        flows.push(w.open_lnet(i, SERVER, true)?);
    }
    for k in 0..n {
        let f = &mut flows[(k % 16) as usize];
        let (c, s) = (nid_of(f.client), nid_of(f.server));
        let xid = 0x1000 + (k / 16) * 8;
        let req = write_request(c, s, xid, true);
        let get = lnet(
            s,
            c,
            LNET_GET,
            LnetDetail::Get {
                return_wmd: Wmd { interface: 0x99, object: xid << 2 | 3 },
                match_bits: xid,
                ptl_index: 8,
                src_offset: 0,
                sink_length: 1 << 20,
            },
            0,
            &[],
        );
        let mut f2 = Flow { seq: f.seq, ..*f };
        w.send(&mut f2, 0, &req)?;
        w.send(&mut f2, 1, &get)?;
        f.seq = f2.seq;
        w.truth.requests += 1;
        w.truth.gets += 1;
        w.truth.lnet_messages += 2;
    }
    Ok(())
}

fn huge_length<W: Write>(w: &mut Writer<W>, n: u64) -> io::Result<()> {
    for i in 0..n {
        let mut f = w.open_lnet(i, SERVER, true)?;
        let (c, s) = (nid_of(f.client), nid_of(f.server));
        let d = LnetDetail::Put { ack_wmd: Wmd::NONE, match_bits: 0x1000, hdr_data: 0, ptl_index: 6, offset: 0 };
        w.send(&mut f, 0, &lnet(c, s, LNET_PUT, d, u32::MAX, &[]))?;
        w.packet(&mut f, 0, 0x11, &[], 0xffff)?;
        w.truth.lnet_messages += 3;
    }
    Ok(())
}

fn reorder_storm<W: Write>(w: &mut Writer<W>, n: u64) -> io::Result<()> {
    const WINDOW: usize = 2048;
    let mut f = w.open_lnet(0, SERVER, true)?;
    let (c, s) = (nid_of(f.client), nid_of(f.server));
    w.truth.lnet_messages += 2;
    // Requests and replies alternate in the stream of each direction; each direction's
    // segments are gathered WINDOW at a time and written in reverse. `written` is how far
    // each direction's bytes were written: the peer acknowledges no further.
    let mut written = f.seq;
    let mut pending: [Vec<(u32, Vec<u8>)>; 2] = [Vec::new(), Vec::new()];
    for k in 0..n {
        let xid = 0x1000 + k * 8;
        for (dir, msg) in [(0, getattr_request(c, s, xid)), (1, reply(s, c, xid))] {
            for chunk in msg.chunks(MSS) {
                pending[dir].push((f.seq[dir], chunk.to_vec()));
                f.seq[dir] = f.seq[dir].wrapping_add(chunk.len() as u32);
            }
            if pending[dir].len() >= WINDOW {
                flush_reversed(w, &mut f, dir, &mut pending[dir], &mut written)?;
            }
        }
        w.truth.requests += 1;
        w.truth.replies += 1;
        w.truth.lnet_messages += 2;
    }
    for (dir, segs) in pending.iter_mut().enumerate() {
        flush_reversed(w, &mut f, dir, segs, &mut written)?;
    }
    Ok(())
}

fn flush_reversed<W: Write>(
    w: &mut Writer<W>,
    f: &mut Flow,
    dir: usize,
    segs: &mut Vec<(u32, Vec<u8>)>,
    written: &mut [u32; 2],
) -> io::Result<()> {
    let next = f.seq;
    for (seq, bytes) in segs.drain(..).rev() {
        f.seq = if dir == 0 { [seq, written[1]] } else { [written[0], seq] };
        w.packet(f, dir, 0x18, &bytes, 0xffff)?;
    }
    f.seq = next;
    written[dir] = next[dir];
    Ok(())
}

fn zero_window<W: Write>(w: &mut Writer<W>, n: u64) -> io::Result<()> {
    let mut f = w.open_lnet(0, SERVER, true)?;
    let (c, s) = (nid_of(f.client), nid_of(f.server));
    w.send(&mut f, 0, &write_request(c, s, 0x1000, false))?;
    w.truth.requests += 1;
    w.truth.lnet_messages += 3;
    for _ in 0..n {
        // The server's window is shut; the client probes with the byte before its next.
        w.packet(&mut f, 1, 0x10, &[], 0)?;
        w.t += 200_000_000;
        let mut probe = Flow { seq: [f.seq[0].wrapping_sub(1), f.seq[1]], ..f };
        w.packet(&mut probe, 0, 0x10, &[], 0xffff)?;
    }
    Ok(())
}

fn same_xid<W: Write>(w: &mut Writer<W>, n: u64) -> io::Result<()> {
    for i in 0..n {
        let mut f = w.open_lnet(i, SERVER, true)?;
        let (c, s) = (nid_of(f.client), nid_of(f.server));
        w.send(&mut f, 0, &getattr_request(c, s, 0x1000))?;
        w.send(&mut f, 1, &reply(s, c, 0x1000))?;
        w.truth.requests += 1;
        w.truth.replies += 1;
        w.truth.lnet_messages += 4;
    }
    Ok(())
}

fn flip_nid<W: Write>(w: &mut Writer<W>, n: u64) -> io::Result<()> {
    let mut f = w.open_lnet(0, SERVER, true)?;
    let s = nid_of(f.server);
    w.truth.lnet_messages += 2;
    for k in 0..n {
        let c = nid_of(client_ip(k + 1));
        w.send(&mut f, 0, &write_request(c, s, 0x1000 + k * 8, false))?;
        w.truth.requests += 1;
        w.truth.lnet_messages += 1;
    }
    Ok(())
}
