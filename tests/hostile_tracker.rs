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

/// An OBD_PING request or reply's PtlRPC message, with match bits `mbits`.
fn ptlrpc(pb_type: u32, mbits: u64) -> Vec<u8> {
    PtlrpcEmit { pb_type, pb_version: 0x0003_0003, opc: 400, mbits, extra_buflens: vec![208], ..Default::default() }
        .emit()
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
                let req = ptlrpc(PTL_RPC_MSG_REQUEST, xid);
                let d = LnetDetail::Put { ack_wmd: Wmd::NONE, match_bits: xid, hdr_data: 0, ptl_index: 12, offset: 0 };
                return Some((0, msg(c, s, LNET_PUT, d, &req, 0)));
            }
            // The reply asks for an LNet ACK (an ACK handle) that never comes.
            let rep = ptlrpc(PTL_RPC_MSG_REPLY, 0);
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

/// RPCs of the second test: `ANSWERED` complete ones (request, then a reply asking for no
/// ACK), then `STUCK` requests never answered, one message every microsecond (all within
/// `EMIT_DELAY_NS`, so every finished RPC is still held when the open index fills).
const ANSWERED: u64 = 20_000;
const STUCK: u64 = 140_000;

/// The connreq and HELLOs of step 0 and 1, then `rest(k - 2)`: (direction, payload).
fn conversation(k: u64, rest: impl Fn(u64) -> Option<(bool, u64)>) -> Option<(usize, Vec<u8>)> {
    let (c, s) = (CLIENT, SERVER);
    match k {
        0 => {
            let mut a = Connreq::emit(&nid(s));
            a.extend(hello(c, s));
            return Some((0, a));
        }
        1 => return Some((1, hello(s, c))),
        _ => {}
    }
    // A request, or a reply asking for no ACK, of XID `xid`.
    let (reply, xid) = rest(k - 2)?;
    let pb_type = if reply { PTL_RPC_MSG_REPLY } else { PTL_RPC_MSG_REQUEST };
    let body = ptlrpc(pb_type, xid);
    let ptl_index = if reply { 10 } else { 12 };
    let d = LnetDetail::Put { ack_wmd: Wmd::NONE, match_bits: xid, hdr_data: 0, ptl_index, offset: 0 };
    Some(if reply { (1, msg(s, c, LNET_PUT, d, &body, 0)) } else { (0, msg(c, s, LNET_PUT, d, &body, 0)) })
}

/// Keeps every RPC record.
#[derive(Default)]
struct Records(Vec<lnetcap_rpc::RpcRecord>);

impl lnetcap_analysis::Sink for Records {
    fn rpc(&mut self, _file: &str, r: &mut lnetcap_rpc::RpcRecord) -> anyhow::Result<()> {
        self.0.push(r.clone());
        Ok(())
    }
}

/// Feeds the conversation of `step`, a message every microsecond, holding every index to
/// its limit every 10,000 packets; returns the records, each limit's count, and the most
/// finished RPCs held at a check.
fn feed(step: impl Fn(u64) -> Option<(usize, Vec<u8>)>) -> (Vec<lnetcap_rpc::RpcRecord>, impl Fn(&str) -> u64, usize) {
    let cfg = AnalysisConfig::default();
    let mut fa = FileAnalysis::new("busy", &cfg);
    let mut sink = Records::default();
    let (mut events, mut seq, mut k, mut finished) = (Vec::new(), [1000u32, 2000u32], 0u64, 0);
    while let Some((d, payload)) = step(k) {
        let buf = tcp_packet(d, seq[d], 0, 0x08, 1000, &payload);
        seq[d] = seq[d].wrapping_add(payload.len() as u32);
        k += 1;
        let pkt = Packet {
            frame: k,
            ts_ns: 1_700_000_000_000_000_000 + k as i64 * 1_000,
            linktype: linktype::ETHERNET,
            origlen: buf.len() as u32,
            data: &buf,
            offset: 0,
            interface: 0,
            shared: None,
        };
        assert!(fa.push(&pkt, &mut events, &mut sink).unwrap().is_none(), "frame {k}");
        if k % 10_000 == 0 {
            for (name, live, limit) in fa.index_sizes() {
                assert!(live <= limit, "packet {k}: {name} holds {live} entries, limit {limit}");
                if name == "finished_rpcs" {
                    finished = finished.max(live);
                }
            }
        }
    }
    let mut all = lnetcap_analysis::Analysis::new(cfg);
    all.add_file(fa, true, &mut sink).unwrap();
    let report = all.finish();
    let hits: Vec<(&str, u64)> = report.files[0].limits.iter().map(|h| (h.limit, h.count)).collect();
    let limit = move |name: &str| hits.iter().find(|h| h.0 == name).map_or(0, |h| h.1);
    (sink.0, limit, finished)
}

/// The open RPC index (`MAX_OPEN_RPCS`) fills with requests a stuck server never answers
/// while finished RPCs wait out their emit delay in it: the finished ones make room first,
/// reported complete; only then are the idlest unanswered ones evicted as partial. (The
/// eviction alone took the finished ones first, as the least recently active, and
/// reported complete RPCs as partial.)
#[test]
fn a_full_open_index_reports_finished_rpcs_before_it_evicts() {
    use lnetcap_rpc::limits::{MAX_FINISHED_RPCS, MAX_OPEN_RPCS};
    let (max, eighth) = (MAX_OPEN_RPCS as u64, MAX_OPEN_RPCS as u64 / 8);
    // The index fills at 20,000 finished and 111,072 stuck: 16,384 finished are reported
    // (down to seven eighths); it fills again at 127,456 stuck: the other 3,616 finished
    // are reported, nothing is evicted; it fills a third time at 131,072 stuck, with no
    // finished RPC left: 16,384 stuck are evicted, and no more fill comes.
    assert!(eighth <= ANSWERED && ANSWERED as usize <= MAX_FINISHED_RPCS, "every finished RPC is held");
    assert!(max < STUCK && STUCK <= max + eighth, "one eviction");
    let (records, limit, _) = feed(|k| {
        conversation(k, |k| match k {
            k if k < 2 * ANSWERED => Some((k % 2 == 1, 0x1000 + k / 2 * 8)),
            k if k < 2 * ANSWERED + STUCK => Some((false, 0x1000 + (ANSWERED + k - 2 * ANSWERED) * 8)),
            _ => None,
        })
    });
    let answered = |r: &&lnetcap_rpc::RpcRecord| r.xid.is_some_and(|x| x.0 < 0x1000 + ANSWERED * 8);
    let done: Vec<_> = records.iter().filter(answered).collect();
    assert_eq!(done.len() as u64, ANSWERED);
    let partial = done.iter().find(|r| !r.missing.is_empty());
    assert!(partial.is_none(), "a finished RPC reported partial: {partial:?}");
    assert_eq!(limit("MAX_FINISHED_RPCS"), ANSWERED, "every finished RPC made room, reported early");
    assert_eq!(limit("MAX_OPEN_RPCS"), eighth, "an eighth evicted, all unanswered requests");
    assert_eq!(records.len() as u64, ANSWERED + STUCK);
}

/// RPCs that finish, each of a new XID, and after each seven RPCs that finish and reuse
/// one XID: each of those reports the one before (finished, waiting out its emit delay),
/// whose place in the queue of finished RPCs stays behind, between live ones. Those places
/// are not finished RPCs held: with 10,001 held and up to 69,999 places of RPCs reported,
/// none is reported early for want of room (counting the places, the code before reported
/// the oldest live ones early once the queue passed 32,768), and the queue is trimmed to
/// the live ones when it passes 65,536.
#[test]
fn reused_xids_leave_no_finished_rpc_counted_twice() {
    use lnetcap_rpc::limits::MAX_FINISHED_RPCS;
    const N: u64 = 10_000;
    const REUSES: u64 = 7;
    assert!(N as usize + 1 < MAX_FINISHED_RPCS && (N * (1 + REUSES)) as usize > 2 * MAX_FINISHED_RPCS);
    let per = 2 * (1 + REUSES);
    let (records, limit, finished) = feed(|k| {
        conversation(k, |k| {
            let xid = if k % per < 2 { 0x100_0000 + k / per * 8 } else { 0x1000 };
            (k < per * N).then_some((k % 2 == 1, xid))
        })
    });
    assert_eq!(records.len() as u64, N * (1 + REUSES));
    assert!(records.iter().all(|r| r.missing.is_empty()), "every RPC complete");
    assert_eq!(limit("MAX_FINISHED_RPCS"), 0, "none reported early");
    assert!(finished as u64 <= N + 1, "{finished} finished RPCs held");
}
