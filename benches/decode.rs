//! Decode throughput: the whole pipeline (capture parsing, link/IP/TCP slicing, stream
//! reassembly, socklnd framing, PtlRPC decoding) over generated captures held in memory.
//!
//! - `header_only`: ≥ 1 M packets at snaplen 256 (the capture admins are told to take).
//! - `full_payload`: MTU-9000 frames with every payload byte captured.
//! - `midstream`: header-only, started after the handshakes (no SYN: the TCP analysis
//!   finds the capture point from its RTT loops).
//!
//! `packets/*` is the decode pipeline alone (as `lnetcap decode` runs it, without the TCP
//! behaviour analysis), `analyze_packets/*` adds the TCP analysis, RPC reconstruction and
//! the in-flight statistics.
//!
//! Run: `cargo bench --bench decode`. benches/compare.sh compares the CLI against tshark
//! and tcptrace on the same files.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lnetcap_capture::CaptureReader;
use lnetcap_lnet::pipeline::{DecodeConfig, Pipeline};
use lnetcap_lnet::LnetEvent;
use lnetcap_rpc::{RpcConfig, Tracker};
use lnetcap_synth::{generate, scenario, Workload};

/// `header_only`, `full_payload`, or `midstream` (header-only, the capture started after
/// the handshakes: the capture point and the senders' one-way delays come from the RTT
/// loops, recomputed as they grow).
fn capture(kind: &str) -> (Arc<Vec<u8>>, u64) {
    let mut cfg = scenario("bench").expect("bench scenario");
    if kind == "midstream" {
        cfg.rpcs_per_client = 60;
        cfg.midstream = Some(0.1);
    } else if kind == "header_only" {
        cfg.rpcs_per_client = 130;
    } else {
        cfg.snaplen = 65_535;
        cfg.mtu = 9000;
        cfg.rpcs_per_client = 24;
        cfg.workload = Workload::OstBrw { write: true, size: 1 << 20 };
    }
    let out = generate("bench", cfg, 1);
    (Arc::new(out.capture), out.packets as u64)
}

fn decode_all(bytes: &Arc<Vec<u8>>) -> usize {
    let mut r = CaptureReader::from_shared("bench", Arc::clone(bytes)).expect("capture");
    // As `lnetcap decode` runs it: no TCP behaviour analysis.
    let mut p = Pipeline::new(DecodeConfig { tcp_perf: false, ..DecodeConfig::default() });
    let mut ev = Vec::new();
    let mut n = 0;
    while let Some(pkt) = r.next_packet().expect("packet") {
        p.push(&pkt, &mut ev);
        n += ev.len();
        ev.clear();
    }
    p.finish(&mut ev);
    n + ev.len()
}

/// Decode plus RPC reconstruction (what `lnetcap analyze` does per packet).
fn analyze_all(bytes: &Arc<Vec<u8>>) -> usize {
    let mut r = CaptureReader::from_shared("bench", Arc::clone(bytes)).expect("capture");
    let mut p = Pipeline::new(DecodeConfig::default());
    let mut t = Tracker::new(RpcConfig::default());
    let mut ev = Vec::new();
    let mut rpcs = Vec::new();
    let mut n = 0;
    let mut feed = |p: &Pipeline, ev: &mut Vec<LnetEvent>, rpcs: &mut Vec<_>, t: &mut Tracker| {
        for e in ev.drain(..) {
            if let LnetEvent::Message(m) = e {
                if let Some(c) = p.connection(m.conn) {
                    t.on_message(&m, c, rpcs);
                }
            }
        }
        n += rpcs.len();
        rpcs.clear();
    };
    while let Some(pkt) = r.next_packet().expect("packet") {
        p.push(&pkt, &mut ev);
        feed(&p, &mut ev, &mut rpcs, &mut t);
    }
    p.finish(&mut ev);
    feed(&p, &mut ev, &mut rpcs, &mut t);
    t.finish(&mut rpcs);
    n + rpcs.len() + t.reports().len()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    g.sample_size(10);
    for name in ["header_only", "full_payload", "midstream"] {
        let (bytes, packets) = capture(name);
        if name == "header_only" {
            assert!(packets >= 1_000_000, "header-only bench capture has only {packets} packets");
        }
        g.throughput(Throughput::Elements(packets));
        g.bench_with_input(BenchmarkId::new("packets", name), &bytes, |b, bytes| b.iter(|| decode_all(bytes)));
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_with_input(BenchmarkId::new("bytes", name), &bytes, |b, bytes| b.iter(|| decode_all(bytes)));
        g.throughput(Throughput::Elements(packets));
        g.bench_with_input(BenchmarkId::new("analyze_packets", name), &bytes, |b, bytes| b.iter(|| analyze_all(bytes)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
