//! Decode throughput: the whole pipeline (capture parsing, link/IP/TCP slicing, stream
//! reassembly, socklnd framing, PtlRPC decoding) over generated captures held in memory.
//!
//! - `header_only`: ≥ 1 M packets at snaplen 256 (the capture admins are told to take).
//! - `full_payload`: MTU-9000 frames with every payload byte captured.
//! - `midstream`: header-only, started after the handshakes (no SYN: the TCP analysis
//!   finds the capture point from its RTT loops).
//!
//! `packets/*` is the decode pipeline alone (as `lnetcap decode` runs it, without the TCP
//! behaviour analysis), `analyze_packets/*` is `lnetcap analyze` through lnetcap-analysis: the TCP
//! analysis, RPC reconstruction, the in-flight statistics and the report.
//!
//! Run: `cargo bench --bench decode`. benches/compare.sh compares the CLI against tshark
//! and tcptrace on the same files.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lnetcap_analysis::{decode_source, Analysis, AnalysisConfig, Quiet, Sink};
use lnetcap_capture::CaptureReader;
use lnetcap_lnet::pipeline::DecodeConfig;
use lnetcap_rpc::RpcRecord;
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
    let cfg = DecodeConfig { tcp_perf: false, ..DecodeConfig::default() };
    let mut n = 0;
    decode_source("bench", &mut r, cfg, &mut Quiet, |_, ev| {
        n += ev.len();
        ev.clear();
        Ok(())
    })
    .expect("decode");
    n
}

/// Counts what an analysis streams out.
#[derive(Default)]
struct Count(usize);

impl Sink for Count {
    fn rpc(&mut self, _file: &str, _r: &mut RpcRecord) -> anyhow::Result<()> {
        self.0 += 1;
        Ok(())
    }
}

/// What `lnetcap analyze` does: decode, TCP behaviour, RPC reconstruction, the report.
fn analyze_all(bytes: &Arc<Vec<u8>>) -> usize {
    let mut r = CaptureReader::from_shared("bench", Arc::clone(bytes)).expect("capture");
    let mut a = Analysis::new(AnalysisConfig::default());
    let mut count = Count::default();
    a.add("bench", &mut r, &mut count, &mut Quiet).expect("analysis");
    count.0 + a.finish().peers.len()
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
