//! `lnetcap analyze`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use lnetcap_lnet::pipeline::FrameAccounting;
use lnetcap_lnet::{FramingEvent, LnetEvent};
use lnetcap_rpc::{PeerReport, RpcConfig, RpcRecord, Tracker};
use serde::Serialize;

use crate::decode::config;
use crate::exit;
use crate::input::run_file;

/// Schema version of the analyze JSON report (docs/analyze-json.md).
pub(crate) const REPORT_SCHEMA_VERSION: u32 = 1;

#[derive(Args, Debug)]
pub(crate) struct AnalyzeArgs {
    /// Capture files (pcap or pcapng, optionally gzip or zstd compressed); `-` reads stdin.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Write the JSON report here (docs/analyze-json.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write one JSON line per RPC here.
    #[arg(long, value_name = "FILE")]
    pub rpcs: Option<PathBuf>,
    /// LNet acceptor TCP port (repeatable). Default 988.
    #[arg(long = "port", value_name = "N")]
    pub ports: Vec<u16>,
    /// Only follow connections on the given ports (no detection by content).
    #[arg(long)]
    pub no_detect: bool,
    /// Time-series interval in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub interval_ms: u64,
    /// Do not print the terminal summary.
    #[arg(long, short)]
    pub quiet: bool,
}

/// One analysed capture.
#[derive(Debug, Serialize)]
pub(crate) struct FileReport {
    /// File name as given.
    pub file: String,
    /// The file was read to its end.
    pub complete: bool,
    /// Frame accounting.
    pub frames: FrameAccounting,
    /// Capture time of the first and last frame with LNet traffic (ns).
    pub span_ns: Option<[i64; 2]>,
    /// LNet messages that belong to no RPC, by reason.
    pub unmatched_messages: std::collections::BTreeMap<&'static str, u64>,
}

/// A peer pair in the report.
#[derive(Debug, Serialize)]
pub(crate) struct PeerEntry {
    /// The capture it comes from.
    pub file: String,
    #[serde(flatten)]
    pub peer: PeerReport,
}

/// The JSON report.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub schema_version: u32,
    pub tool: String,
    pub files: Vec<FileReport>,
    pub peers: Vec<PeerEntry>,
}

pub(crate) fn run(a: &AnalyzeArgs) -> Result<u8> {
    let mut code = exit::OK;
    let mut rpc_out = match &a.rpcs {
        Some(p) => Some(BufWriter::new(File::create(p).with_context(|| format!("creating {}", p.display()))?)),
        None => None,
    };
    let multi = a.files.len() > 1;
    let mut report = Report {
        schema_version: REPORT_SCHEMA_VERSION,
        tool: format!("lnetcap {}", env!("CARGO_PKG_VERSION")),
        files: Vec::new(),
        peers: Vec::new(),
    };
    for path in &a.files {
        let name = path.display().to_string();
        let mut tracker = Tracker::new(RpcConfig { interval_ns: (a.interval_ms.max(1) * 1_000_000) as i64 });
        let mut rpcs: Vec<RpcRecord> = Vec::new();
        let mut span: Option<[i64; 2]> = None;
        let mut write_rpcs = |rpcs: &mut Vec<RpcRecord>| -> Result<()> {
            if let Some(w) = rpc_out.as_mut() {
                for mut r in rpcs.drain(..) {
                    r.file = multi.then(|| name.clone());
                    serde_json::to_writer(&mut *w, &r)?;
                    w.write_all(b"\n")?;
                }
            } else {
                rpcs.clear();
            }
            Ok(())
        };
        let run = run_file(path, config(&a.ports, a.no_detect), |pipe, events| {
            for ev in events.drain(..) {
                match ev {
                    LnetEvent::Message(m) => {
                        if let Some(conn) = pipe.connection(m.conn) {
                            span = Some(match span {
                                Some([s, e]) => [s.min(m.first.ts_ns), e.max(m.last.ts_ns)],
                                None => [m.first.ts_ns, m.last.ts_ns],
                            });
                            tracker.on_message(&m, conn, &mut rpcs);
                        }
                    }
                    LnetEvent::Framing { conn, dir, stamp, event } => {
                        tracker.on_framing(
                            conn.0,
                            dir.index(),
                            stamp.ts_ns,
                            matches!(event, FramingEvent::Desync { .. }),
                        );
                    }
                }
            }
            write_rpcs(&mut rpcs)
        })?;
        let Some(run) = run else {
            code = exit::INPUT;
            continue;
        };
        if !run.complete {
            code = exit::INPUT;
        }
        tracker.finish(&mut rpcs);
        write_rpcs(&mut rpcs)?;
        let summary = run.pipe.summary();
        report.files.push(FileReport {
            file: name.clone(),
            complete: run.complete,
            frames: summary.frames,
            span_ns: span,
            unmatched_messages: tracker.unmatched.clone(),
        });
        for peer in tracker.reports() {
            report.peers.push(PeerEntry { file: name.clone(), peer });
        }
    }
    if let Some(mut w) = rpc_out {
        w.flush()?;
    }
    if let Some(p) = &a.json {
        let mut w = BufWriter::new(File::create(p).with_context(|| format!("creating {}", p.display()))?);
        serde_json::to_writer_pretty(&mut w, &report)?;
        w.write_all(b"\n")?;
        w.flush()?;
    }
    if !a.quiet {
        let stdout = io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        print_summary(&mut out, &report)?;
        out.flush()?;
    }
    Ok(code)
}

fn ms(us: Option<f64>) -> String {
    us.map_or("-".into(), |v| if v >= 1000.0 { format!("{:.1} ms", v / 1000.0) } else { format!("{v:.0} µs") })
}

fn bytes(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

fn print_summary(out: &mut impl Write, r: &Report) -> Result<()> {
    for f in &r.files {
        let dur = f.span_ns.map_or(0.0, |[a, b]| (b - a) as f64 / 1e9);
        let und: u64 = f.frames.undecodable.values().sum();
        writeln!(
            out,
            "{}: {} frames ({} LNet data, {} TCP control, {} other, {} undecodable), LNet traffic over {:.3} s",
            f.file, f.frames.frames, f.frames.lnet_data, f.frames.tcp_control, f.frames.other_traffic, und, dur
        )?;
        if !f.unmatched_messages.is_empty() {
            let u: Vec<String> = f.unmatched_messages.iter().map(|(k, v)| format!("{k} {v}")).collect();
            writeln!(out, "  messages outside any RPC: {}", u.join(", "))?;
        }
        for e in r.peers.iter().filter(|e| e.file == f.file) {
            let p = &e.peer;
            writeln!(out)?;
            let conns: Vec<String> = p
                .connections
                .iter()
                .map(|c| format!("{} c{}{}", c.conn_type, c.id, if c.type_inferred { " (inferred)" } else { "" }))
                .collect();
            writeln!(out, "peer {} (client) <-> {} (server)", p.client_nid, p.server_nid)?;
            writeln!(
                out,
                "  connections  {}{}",
                conns.join(", "),
                p.handshake_rtt_us.map_or(String::new(), |r| format!("; TCP handshake RTT {}", ms(Some(r))))
            )?;
            let ops: Vec<String> = p.rpcs_by_opcode.iter().map(|(k, v)| format!("{k} {v}")).collect();
            writeln!(out, "  RPCs         {} complete, {} partial: {}", p.rpcs, p.rpcs_partial, ops.join(", "))?;
            if !p.missing.is_empty() {
                let m: Vec<String> = p.missing.iter().map(|(k, v)| format!("{k} {v}")).collect();
                writeln!(out, "               not captured: {} (see --rpcs `missing`)", m.join(", "))?;
            }
            let win = p.steady_window_ns.map_or("-".into(), |[a, b]| format!("{:.2} s window", (b - a) as f64 / 1e9));
            writeln!(
                out,
                "  bulk         read {}, written {}; throughput {}/s ({win}, MB = 10^6 B)",
                bytes(p.bytes_read as f64),
                bytes(p.bytes_written as f64),
                bytes(p.throughput_bytes_per_s)
            )?;
            let l = &p.latency_us;
            writeln!(out, "  latency      p50 {}  p95 {}  p99 {}  max {}", ms(l.p50), ms(l.p95), ms(l.p99), ms(l.max))?;
            let ph = &p.phases;
            writeln!(
                out,
                "  phases       request {} | server wait {} | bulk {} | server {} | reply {}   (means at the capture point)",
                ms(ph.request_us),
                ms(ph.server_wait_us),
                ms(ph.bulk_us),
                ms(ph.server_us),
                ms(ph.reply_us)
            )?;
            writeln!(
                out,
                "  RPCs in flight      mean {:.1} (steady {:.1}), max {}",
                p.rpcs_in_flight.mean, p.rpcs_in_flight.steady_mean, p.rpcs_in_flight.max
            )?;
            for d in &p.messages_in_flight.directions {
                writeln!(out, "  LNet msgs in flight {} → {}: max {}, mean {:.1}, {:.0}% of busy time at max ({} messages, {} zero-copy)", d.from, d.to, d.max, d.mean, d.time_at_max * 100.0, d.messages, d.zero_copy)?;
            }
            match p.messages_in_flight.inferred_peer_credits {
                Some(c) => writeln!(out, "  peer_credits binds at {c}: {}", p.messages_in_flight.evidence)?,
                None => writeln!(out, "  peer_credits       {}", p.messages_in_flight.evidence)?,
            }
            let h: Vec<String> = p.rpcs_in_flight.histogram.0.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            writeln!(out, "  rpc_stats    rpcs in flight {}", h.join(" "))?;
            let h: Vec<String> = p.pages_per_rpc.0.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            if !h.is_empty() {
                writeln!(out, "               pages per rpc  {}", h.join(" "))?;
            }
        }
    }
    Ok(())
}
