//! Per-layer throughput on the header-only bench capture (≥ 1 M packets at snaplen 256,
//! held in memory), so that a regression in one layer shows by itself. Each bench adds one
//! layer to the one before; the difference between two is the layer's cost:
//!
//! - `capture`: record parsing (`CaptureReader::next_packet`);
//! - `link`: + link/IP/TCP slicing (`decode_packet`);
//! - `reassembly`: + the flow table and stream reassembly (TCP behaviour off, a sink that
//!   follows every connection and drops the bytes);
//! - `tcp_behaviour`: + RTT loops, bytes in flight, window estimate, retransmissions;
//! - `framing`: the decode pipeline as `lnetcap decode` runs it (reassembly + socklnd
//!   framing + LNet/PtlRPC decoding, TCP behaviour off);
//! - `rpc_tracking`: the RPC tracker alone, over the messages the pipeline decoded
//!   (held in memory beforehand).
//!
//! Run: `cargo bench --bench layers`; `benches/decode.rs` has the whole pipeline and
//! `analyze`, benches/compare.sh the CLI against tshark and tcptrace.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lnetcap_capture::{decode_packet, CaptureReader};
use lnetcap_lnet::{DecodeConfig, LnetEvent, Message, Pipeline};
use lnetcap_rpc::{RpcConfig, Tracker};
use lnetcap_synth::{generate, scenario};
use lnetcap_tcp::{Connection, Dir, FlowTable, Stamp, StreamEvent, StreamSink, Verdict};

fn capture() -> (Arc<Vec<u8>>, u64) {
    let mut cfg = scenario("bench").expect("bench scenario");
    cfg.rpcs_per_client = 130;
    let out = generate("bench", cfg, 1);
    (Arc::new(out.capture), out.packets as u64)
}

fn reader(bytes: &Arc<Vec<u8>>) -> CaptureReader {
    CaptureReader::from_shared("bench", Arc::clone(bytes)).expect("capture")
}

/// Follows every connection and keeps nothing.
struct Drop;

impl StreamSink for Drop {
    fn on_open(&mut self, _conn: &Connection) -> Verdict {
        Verdict::Follow
    }
    fn on_event(&mut self, _conn: &Connection, _dir: Dir, _stamp: Stamp, _ev: StreamEvent<'_>) -> Verdict {
        Verdict::Follow
    }
}

fn records(bytes: &Arc<Vec<u8>>) -> u64 {
    let mut r = reader(bytes);
    let mut n = 0;
    while let Ok(Some(p)) = r.next_packet() {
        n += u64::from(p.origlen);
    }
    n
}

fn sliced(bytes: &Arc<Vec<u8>>) -> u64 {
    let mut r = reader(bytes);
    let mut n = 0;
    while let Ok(Some(p)) = r.next_packet() {
        if let Ok(seg) = decode_packet(p.linktype, p.data, p.origlen) {
            n += u64::from(seg.payload_len);
        }
    }
    n
}

fn reassembled(bytes: &Arc<Vec<u8>>, perf: bool) -> usize {
    let mut r = reader(bytes);
    let table = FlowTable::new(&[988]);
    let mut table = if perf { table } else { table.without_perf() };
    let mut sink = Drop;
    let mut last = Stamp::default();
    while let Ok(Some(p)) = r.next_packet() {
        last = Stamp { frame: p.frame, ts_ns: p.ts_ns };
        if let Ok(seg) = decode_packet(p.linktype, p.data, p.origlen) {
            table.process(&seg, last, &mut sink);
        }
    }
    table.finish(last, &mut sink);
    table.len()
}

/// The decode pipeline (TCP behaviour off); `keep` collects the messages.
fn framed(bytes: &Arc<Vec<u8>>, keep: Option<&mut Vec<Message>>) -> (usize, Pipeline) {
    let mut r = reader(bytes);
    let mut pipe = Pipeline::new(DecodeConfig { tcp_perf: false, ..DecodeConfig::default() });
    let mut events = Vec::new();
    let mut n = 0;
    let mut keep = keep;
    let mut take = |events: &mut Vec<LnetEvent>| {
        n += events.len();
        for ev in events.drain(..) {
            if let (LnetEvent::Message(m), Some(k)) = (ev, keep.as_deref_mut()) {
                k.push(*m);
            }
        }
    };
    while let Ok(Some(p)) = r.next_packet() {
        pipe.push(&p, &mut events);
        take(&mut events);
    }
    pipe.finish(&mut events);
    take(&mut events);
    (n, pipe)
}

fn tracked(messages: &[Message], pipe: &Pipeline) -> usize {
    let mut t = Tracker::new(RpcConfig::default());
    let mut out = Vec::new();
    let mut n = 0;
    for m in messages {
        if let Some(conn) = pipe.connection(m.conn) {
            t.on_message(m, conn, &mut out);
            n += out.len();
            out.clear();
        }
    }
    t.finish(&mut out);
    n + out.len()
}

fn bench(c: &mut Criterion) {
    let (bytes, packets) = capture();
    assert!(packets >= 1_000_000, "header-only bench capture has only {packets} packets");
    let mut g = c.benchmark_group("layers");
    g.sample_size(10);
    g.throughput(Throughput::Elements(packets));
    g.bench_function("capture", |b| b.iter(|| records(&bytes)));
    g.bench_function("link", |b| b.iter(|| sliced(&bytes)));
    g.bench_function("reassembly", |b| b.iter(|| reassembled(&bytes, false)));
    g.bench_function("tcp_behaviour", |b| b.iter(|| reassembled(&bytes, true)));
    g.bench_function("framing", |b| b.iter(|| framed(&bytes, None).0));
    let mut messages = Vec::new();
    let (_, pipe) = framed(&bytes, Some(&mut messages));
    g.throughput(Throughput::Elements(messages.len() as u64));
    g.bench_function("rpc_tracking", |b| b.iter(|| tracked(&messages, &pipe)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
