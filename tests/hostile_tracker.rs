//! Memory under a hostile sequence: GET handles that never get their REPLY, ACK handles
//! that never get their ACK, zero-copy messages that never get their ZC-ACK, a million of
//! each kind, fed packet by packet through lnetcap-analysis. Every index of the RPC
//! tracker stays at or under its named limit (crates/lnetcap-rpc/src/limits.rs) the whole
//! time, entries whose RPC finished are dropped (a ping that replaces the previous one
//! leaves a stale GET handle behind), and what could not be indexed is counted.

mod common;

use common::{hello, lnet, nid, tcp_packet};
use lnetcap_analysis::{AnalysisConfig, FileAnalysis, NoSink};
use lnetcap_capture::{linktype, Packet};
use lnetcap_lnet::wire::consts::*;
use lnetcap_lnet::wire::{Connreq, LnetDetail, PtlrpcEmit, Wmd};

const CLIENT: &str = "10.0.0.2@tcp";
const SERVER: &str = "10.0.0.1@tcp";

/// One LNet message on the wire.
fn msg(src: &str, dst: &str, t: u32, d: LnetDetail, payload: &[u8], zc_cookie: u64) -> Vec<u8> {
    let mut v = Vec::new();
    lnet(&mut v, src, dst, t, d, payload, zc_cookie);
    v
}

/// The hostile conversation, one message per TCP segment, 1 ms apart, made as it is read
/// (nothing of it is held in memory). Message `k` of `PINGS` pings, then `ZC` zero-copy
/// PUTs, then `RPCS` requests whose replies ask for an LNet ACK that never comes.
struct Hostile {
    k: u64,
    seq: [u32; 2],
    buf: Vec<u8>,
}

const PINGS: u64 = 1_000_000;
const ZC: u64 = 1_000_000;
const RPCS: u64 = 300_000;

impl Hostile {
    /// (direction: 0 client → server, payload) of step `k`; `None` at the end.
    fn step(&self, k: u64) -> Option<(usize, Vec<u8>)> {
        let (c, s) = (CLIENT, SERVER);
        if k == 0 {
            let mut a = Connreq::emit(&nid(s));
            a.extend(hello(c, s));
            return Some((0, a));
        }
        if k == 1 {
            return Some((1, hello(s, c)));
        }
        let k = k - 2;
        if k < PINGS {
            // A ping GET each time: the next replaces this one (same match bits), which
            // leaves its GET handle stale; no REPLY ever comes.
            let w = Wmd { interface: 1, object: k };
            let d = LnetDetail::Get {
                return_wmd: w,
                match_bits: PING_MATCHBITS,
                ptl_index: 0,
                src_offset: 0,
                sink_length: 4096,
            };
            return Some((0, msg(c, s, LNET_GET, d, &[], 0)));
        }
        let k = k - PINGS;
        if k < ZC {
            // A zero-copy PUT whose ZC-ACK never comes.
            let d =
                LnetDetail::Put { ack_wmd: Wmd::NONE, match_bits: 1 << 40 | k, hdr_data: 0, ptl_index: 8, offset: 0 };
            return Some((1, msg(s, c, LNET_PUT, d, &[0; 64], k + 1)));
        }
        let k = k - ZC;
        if k < 2 * RPCS {
            let xid = 0x1000 + (k / 2) * 8;
            if k % 2 == 0 {
                let req = PtlrpcEmit {
                    pb_type: PTL_RPC_MSG_REQUEST,
                    pb_version: 0x0003_0003,
                    opc: 400,
                    mbits: xid,
                    extra_buflens: vec![208],
                    ..Default::default()
                }
                .emit();
                let d = LnetDetail::Put { ack_wmd: Wmd::NONE, match_bits: xid, hdr_data: 0, ptl_index: 12, offset: 0 };
                return Some((0, msg(c, s, LNET_PUT, d, &req, 0)));
            }
            // The reply asks for an LNet ACK (an ACK handle) that never comes.
            let rep = PtlrpcEmit {
                pb_type: PTL_RPC_MSG_REPLY,
                pb_version: 0x0003_0003,
                opc: 400,
                extra_buflens: vec![208],
                ..Default::default()
            }
            .emit();
            let w = Wmd { interface: 2, object: xid };
            let d = LnetDetail::Put { ack_wmd: w, match_bits: xid, hdr_data: 0, ptl_index: 10, offset: 0 };
            return Some((1, msg(s, c, LNET_PUT, d, &rep, 0)));
        }
        None
    }
}

impl Hostile {
    fn next(&mut self) -> Option<Packet<'_>> {
        let (d, payload) = self.step(self.k)?;
        self.buf = tcp_packet(d, self.seq[d], 0, 0x08, 1000, &payload);
        self.seq[d] = self.seq[d].wrapping_add(payload.len() as u32);
        self.k += 1;
        Some(Packet {
            frame: self.k,
            ts_ns: 1_700_000_000_000_000_000 + self.k as i64 * 1_000_000,
            linktype: linktype::ETHERNET,
            origlen: self.buf.len() as u32,
            data: &self.buf,
            offset: 0,
            interface: 0,
            shared: None,
        })
    }
}

#[test]
fn tracker_indexes_stay_bounded_under_a_million_open_handles() {
    let mut g = Hostile { k: 0, seq: [1000, 2000], buf: Vec::new() };
    let mut fa = FileAnalysis::new("hostile", &AnalysisConfig::default());
    let mut events = Vec::new();
    let mut peak = std::collections::BTreeMap::new();
    let mut n = 0u64;
    while let Some(pkt) = g.next() {
        let why = fa.push(&pkt, &mut events, &mut NoSink).unwrap();
        assert!(why.is_none(), "frame {}: {why:?}", pkt.frame);
        n += 1;
        if n % 10_000 == 0 || n == PINGS + 2 {
            for (name, live, limit) in fa.index_sizes() {
                assert!(live <= limit, "packet {n}: {name} holds {live} entries, limit {limit}");
                let p = peak.entry(name).or_insert(0);
                *p = (*p).max(live);
            }
        }
        if n == PINGS + 2 {
            // A million pings, each replacing the one before: their stale GET handles are
            // dropped every second of capture time (1000 pings), never piled up.
            let gets = fa.index_sizes().into_iter().find(|x| x.0 == "get_handles").unwrap().1;
            assert!(gets <= 1_001, "{gets} GET handles after {PINGS} pings replaced one another");
        }
    }
    assert_eq!(n, 2 + PINGS + ZC + 2 * RPCS);
    let sizes: std::collections::BTreeMap<_, _> =
        fa.index_sizes().into_iter().map(|(n, live, lim)| (n, (live, lim))).collect();
    // Zero-copy messages past the limit, and ACK handles past it, were counted, not kept.
    let (zc, zc_lim) = sizes["zc_pending"];
    assert!(zc <= zc_lim && ZC > zc_lim as u64, "zc_pending {zc} / {zc_lim}");
    let (acks, ack_lim) = sizes["ack_handles"];
    assert!(acks <= ack_lim && RPCS > ack_lim as u64, "ack_handles {acks} / {ack_lim}");
    let p = fa.pipeline().summary();
    assert_eq!(p.messages_by_kind.values().sum::<u64>(), PINGS + ZC + 2 * RPCS, "every message decoded");
    eprintln!("peak live entries: {peak:?}");
}
