//! The fuzz campaign's harnesses, one per target. The targets in `fuzz_targets/` call
//! them under libFuzzer; the main workspace's `tests/fuzz_corpus.rs` includes this file and
//! replays the committed corpus through the same functions on every `cargo test`.
//!
//! Each harness panics only on a broken invariant (a hang bound passed, an accounting sum
//! that does not add up); the code under test must never panic by itself.

#![allow(missing_docs)]

use arbitrary::{Arbitrary, Unstructured};
use lnetcap_analysis::{Analysis, AnalysisConfig, NoSink, Quiet};
use lnetcap_capture::{decode_packet, CaptureReader};
use lnetcap_lnet::framer::{find_resync, looks_like_lnet, Framer};
use lnetcap_lnet::wire::{Connreq, Hello, KsockHdr, LnetHdr, PingInfo, PtlrpcInfo, SrpcInfo, NID16, NID4};
use lnetcap_lnet::{Nid, Proto};
use lnetcap_synth::pcapw::{build_packet, CaptureWriter, TcpPacket};
use lnetcap_synth::{Container, Link};
use lnetcap_tcp::{ConnId, Dir, Stamp};

/// Link types `decode_packet` knows, and two it does not.
const LINKTYPES: [u32; 10] = [0, 1, 12, 14, 101, 108, 113, 228, 229, 276];

/// A capture container (pcap, pcapng, gzip or zstd, any byte order), read to its end;
/// each packet through the link/IP/TCP slicer.
pub fn capture(data: &[u8]) {
    let Ok(mut r) = CaptureReader::from_bytes("fuzz", data.to_vec()) else { return };
    let mut last: Option<u64> = None;
    while let Ok(Some(p)) = r.next_packet() {
        let _ = decode_packet(p.linktype, p.data, p.origlen);
        // Every record starts past the one before (in the decompressed stream): else the
        // reader loops.
        assert!(last.is_none_or(|l| p.offset > l), "record offset {} did not advance past {last:?}", p.offset);
        last = Some(p.offset);
    }
    let _ = r.drain_warnings();
}

/// Link, IP and TCP slicing of one frame: the first byte picks the link type, the next
/// two the original length.
pub fn link(data: &[u8]) {
    let [lt, a, b, rest @ ..] = data else { return };
    let linktype = LINKTYPES[usize::from(*lt) % LINKTYPES.len()];
    let origlen = u32::from(u16::from_be_bytes([*a, *b]));
    if let Ok(seg) = decode_packet(linktype, rest, origlen) {
        assert!(seg.payload.len() <= rest.len());
        assert!(seg.payload.len() as u64 <= u64::from(seg.payload_len), "more payload captured than sent");
    }
}

/// Every wire parser on the same bytes, and the framer's two content probes.
pub fn wire(data: &[u8]) {
    let _ = Connreq::parse(data);
    let _ = Hello::parse(data);
    let _ = KsockHdr::parse(data, false);
    let _ = KsockHdr::parse(data, true);
    let _ = LnetHdr::parse(data, NID4);
    let _ = LnetHdr::parse(data, NID16);
    let _ = PtlrpcInfo::parse(data);
    let _ = SrpcInfo::parse(data);
    let _ = PingInfo::parse(data);
    let _ = looks_like_lnet(data, true);
    let _ = looks_like_lnet(data, false);
    let known: Vec<Nid> = Nid::parse("192.168.1.10@tcp").into_iter().collect();
    for proto in [None, Some(Proto::V1), Some(Proto::V2), Some(Proto::V3), Some(Proto::V4)] {
        if let Some((at, _)) = find_resync(data, proto, &known) {
            assert!(at < data.len(), "resync point past the bytes searched");
        }
    }
}

/// What the stream layer can hand a framer.
#[derive(Debug, Arbitrary)]
pub enum StreamOp {
    /// The next `bytes` of the stream.
    Data(Vec<u8>),
    /// `len` bytes not captured.
    Gap(u32),
    /// The stream ends.
    Fin,
}

/// A framer over an arbitrary sequence of stream events.
#[derive(Debug, Arbitrary)]
pub struct FramerInput {
    pub from_start: bool,
    pub ops: Vec<StreamOp>,
}

/// The framer over arbitrary data and gaps: messages never claim bytes beyond the offset
/// delivered.
pub fn framer(data: &[u8]) {
    let Ok(input) = FramerInput::arbitrary_take_rest(Unstructured::new(data)) else { return };
    let mut f = Framer::new(ConnId(0), Dir::FromActive, input.from_start);
    let mut out = Vec::new();
    let mut off = 0u64;
    for (i, op) in input.ops.iter().enumerate() {
        let stamp = Stamp { frame: i as u64 + 1, ts_ns: i as i64 * 1000 };
        match op {
            StreamOp::Data(b) => {
                f.on_data(off, b, stamp, &mut out);
                off += b.len() as u64;
            }
            StreamOp::Gap(n) => {
                f.on_gap(off, u64::from(*n), stamp, &mut out);
                off += u64::from(*n);
            }
            StreamOp::Fin => {
                f.end(off, &mut out);
                break;
            }
        }
        out.clear();
    }
}

/// One TCP segment of a structured capture: which connection, which way, and what it
/// carries (payload bytes with a claimed length that may exceed them: a snaplen).
#[derive(Debug, Arbitrary)]
pub struct Seg {
    pub conn: u8,
    pub from_passive: bool,
    pub flags: u8,
    pub seq_delta: i16,
    pub ack_delta: i16,
    pub window: u16,
    pub dt_us: u16,
    pub payload: Vec<Piece>,
    pub cut: u8,
}

/// A piece of a segment's payload: raw bytes, or a structure the protocol knows with
/// fields the fuzzer picks (so inputs reach the framer and the RPC matchers).
#[derive(Debug, Arbitrary)]
pub enum Piece {
    Raw(Vec<u8>),
    Hello { v4: bool, conn_type: u8, src: u32, dst: u32 },
    Lnet { kind: u8, nid16: bool, src: u32, dst: u32, plen: u16, mbits: u64, cookie: u64, portal: u8, body: Vec<u8> },
}

fn nid(v: u32) -> Nid {
    Nid::from_u64(0x0002_0000_0000_0000 | u64::from(v))
}

impl Piece {
    fn emit(&self, out: &mut Vec<u8>) {
        use lnetcap_lnet::wire::consts::*;
        use lnetcap_lnet::wire::{LnetDetail, Wmd};
        match self {
            Piece::Raw(b) => out.extend_from_slice(b),
            Piece::Hello { v4, conn_type, src, dst } => out.extend_from_slice(
                &Hello {
                    version: if *v4 { 4 } else { 3 },
                    flip: false,
                    src_nid: nid(*src),
                    dst_nid: Some(nid(*dst)),
                    src_pid: PID_LUSTRE,
                    dst_pid: 0,
                    src_incarnation: 1,
                    dst_incarnation: 0,
                    conn_type: u32::from(*conn_type % 4),
                    ips: Vec::new(),
                }
                .emit(),
            ),
            Piece::Lnet { kind, nid16, src, dst, plen, mbits, cookie, portal, body } => {
                let wmd = Wmd { interface: 7, object: *cookie | 3 };
                let (msg_type, detail) = match kind % 4 {
                    0 => (LNET_ACK, LnetDetail::Ack { dst_wmd: wmd, match_bits: *mbits, mlength: u32::from(*plen) }),
                    1 => (
                        LNET_PUT,
                        LnetDetail::Put {
                            ack_wmd: if cookie % 2 == 0 { wmd } else { Wmd::NONE },
                            match_bits: *mbits,
                            hdr_data: 0,
                            ptl_index: u32::from(*portal % 32),
                            offset: 0,
                        },
                    ),
                    2 => (
                        LNET_GET,
                        LnetDetail::Get {
                            return_wmd: wmd,
                            match_bits: *mbits,
                            ptl_index: u32::from(*portal % 32),
                            src_offset: 0,
                            sink_length: u32::from(*plen),
                        },
                    ),
                    _ => (LNET_REPLY, LnetDetail::Reply { dst_wmd: wmd }),
                };
                KsockHdr { msg_type: KSOCK_LNET, csum: 0, zc_req_cookie: 0, zc_ack_cookie: 0 }.emit(out);
                let h = LnetHdr {
                    dest_nid: nid(*dst),
                    src_nid: nid(*src),
                    dest_pid: PID_LUSTRE,
                    src_pid: PID_LUSTRE,
                    msg_type,
                    payload_length: u32::from(*plen),
                    detail: Some(detail),
                    cut: None,
                };
                h.emit(if *nid16 { NID16 } else { NID4 }, out);
                let n = usize::from(*plen);
                out.extend(body.iter().copied().chain(std::iter::repeat(0)).take(n));
            }
        }
    }
}

/// A small capture built from arbitrary segments of up to four connections to port 988.
#[derive(Debug, Arbitrary)]
pub struct Segments {
    pub ns: bool,
    pub segs: Vec<Seg>,
}

/// Builds the capture a [`Segments`] input describes.
pub fn segments_capture(input: &Segments) -> Vec<u8> {
    let container = if input.ns { Container::PcapNs } else { Container::PcapUs };
    let mut w = CaptureWriter::new(container, Link::Ethernet, 65535);
    let mut seq = [[1000u32; 2]; 4];
    let mut ts = 1_700_000_000_000_000_000i64;
    for s in input.segs.iter().take(256) {
        let c = usize::from(s.conn % 4);
        let d = usize::from(s.from_passive);
        let client = std::net::IpAddr::from([10, 0, 0, 2 + c as u8]);
        let server = std::net::IpAddr::from([10, 0, 0, 1]);
        let (src, dst, sport, dport) =
            if d == 0 { (client, server, 1023 - c as u16, 988) } else { (server, client, 988, 1023 - c as u16) };
        seq[c][d] = seq[c][d].wrapping_add(s.seq_delta as u32);
        let ack = seq[c][1 - d].wrapping_add(s.ack_delta as u32);
        let mut payload = Vec::new();
        for p in s.payload.iter().take(8) {
            p.emit(&mut payload);
        }
        // An IPv4 packet holds at most 65,535 bytes.
        payload.truncate(60_000);
        let pkt = TcpPacket {
            src,
            dst,
            sport,
            dport,
            seq: seq[c][d],
            ack,
            flags: s.flags,
            window: s.window,
            options: &[],
            payload: &payload,
            ip_id: 0,
        };
        let bytes = build_packet(Link::Ethernet, &pkt);
        let keep = bytes.len() - usize::from(s.cut).min(payload.len());
        ts += i64::from(s.dt_us) * 1000;
        w.packet_cut(ts, &bytes, keep);
        seq[c][d] = seq[c][d].wrapping_add(payload.len() as u32);
    }
    w.finish()
}

/// The whole analysis of a capture; every frame lands in exactly one category.
pub fn analyze_bytes(capture: Vec<u8>) {
    let Ok(mut r) = CaptureReader::from_bytes("fuzz", capture) else { return };
    let mut a = Analysis::new(AnalysisConfig::default());
    if a.add("fuzz", &mut r, &mut NoSink, &mut Quiet).is_err() {
        return;
    }
    let report = a.finish();
    for f in &report.files {
        assert_eq!(f.frames.total(), f.frames.frames, "frame accounting of {}", f.file);
    }
    let json = serde_json::to_string(&report).expect("a report serialises");
    assert!(json.starts_with('{'));
}

/// Structured segments through the whole analysis.
pub fn segments(data: &[u8]) {
    let Ok(input) = Segments::arbitrary_take_rest(Unstructured::new(data)) else { return };
    analyze_bytes(segments_capture(&input));
}

/// Arbitrary bytes as a capture through the whole analysis.
pub fn analyze(data: &[u8]) {
    analyze_bytes(data.to_vec());
}

/// A harness: one input.
pub type Harness = fn(&[u8]);

/// The harness of each target by name, for the corpus replay.
pub const TARGETS: [(&str, Harness); 6] = [
    ("capture", capture),
    ("link", link),
    ("wire", wire),
    ("framer", framer),
    ("segments", segments),
    ("analyze", analyze),
];
