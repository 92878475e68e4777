//! `lnetcap analyze`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use lnetcap_lnet::pipeline::FrameAccounting;
use lnetcap_lnet::{FramingEvent, LnetEvent};
use lnetcap_model::{advise, evaluate, Advice, Bound, ModelInput};
use lnetcap_rpc::tcp::{bulk_directions, rtt_report, tcp_report, ConnPerfRef, RttReport, TcpPeerReport};
use lnetcap_rpc::{PeerReport, RpcConfig, RpcRecord, Tracker};
use lnetcap_tcp::ConnId;
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
    /// Write the JSON report here (docs/analyze-json.md); `-` writes it to stdout instead
    /// of the terminal summary.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write one JSON line per RPC here; `-` writes them to stdout instead of the terminal
    /// summary.
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
    /// Link rate for the model, e.g. `10Gbit`, `25G`, `1250MB/s` (default: not known; the
    /// best sustained rate seen is reported beside it).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub link_rate: Option<f64>,
    /// Do not print the terminal summary.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Parses a link rate into bytes per second: `10Gbit`, `10G` and `10Gb` are bits;
/// `1250MB/s`, `1.25GB/s` are bytes.
fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase().replace("/s", "").replace("ps", "");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| format!("{s:?}: expected a number with a unit, like 10Gbit or 1250MB/s"))?;
    let (mult, bytes) = match unit.trim() {
        "" | "bit" | "b" => (1.0, false),
        "k" | "kbit" | "kb" => (1e3, false),
        "m" | "mbit" | "mb" if !unit.contains('B') => (1e6, false),
        "g" | "gbit" | "gb" => (1e9, false),
        "t" | "tbit" | "tb" => (1e12, false),
        _ => return Err(format!("{s:?}: unknown unit (use bit, Kbit, Mbit, Gbit, Tbit, or KB/s, MB/s, GB/s)")),
    };
    // Upper-case B means bytes.
    let is_bytes = s.contains("B") && !s.to_ascii_lowercase().contains("bit");
    let _ = bytes;
    Ok(if is_bytes { v * mult } else { v * mult / 8.0 })
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
    /// RTT from TCP (µs).
    pub rtt_us: RttReport,
    /// TCP behaviour.
    pub tcp: TcpPeerReport,
    /// The throughput model.
    pub model: ModelReport,
    /// The smallest bound: `rpc_window`, `lnet_credits`, `tcp_congestion`,
    /// `receive_window`, `server`, `link`.
    pub binding_limit: &'static str,
    /// What to change.
    pub advice: Vec<Advice>,
    /// The model per interval of the time series (intervals with bulk traffic).
    pub intervals: Vec<IntervalModel>,
}

/// The model evaluated on one interval.
#[derive(Debug, Serialize)]
pub(crate) struct IntervalModel {
    /// Interval start, ns.
    pub t_ns: i64,
    /// RTT in the interval (`min_us`, `mean_us`), when TCP gave samples.
    pub rtt_us: Option<lnetcap_rpc::tcp::IntervalRtt>,
    /// RTT the interval's model uses, µs: the peer's median RTT plus the rise of the
    /// interval's smallest RTT over the capture's (a standing queue).
    pub model_rtt_us: f64,
    /// Bulk bytes per second in the interval.
    pub observed_bytes_per_s: f64,
    /// T_rpc with the interval's mean RPCs in flight.
    pub t_rpc_bytes_per_s: f64,
    /// The smallest bound.
    pub t_model_bytes_per_s: f64,
    /// The binding limit of the interval.
    pub binding_limit: &'static str,
    /// Congestion-window estimate in the interval, bytes.
    pub cwnd_estimate: Option<u64>,
}

/// The model's numbers for a peer.
#[derive(Debug, Serialize)]
pub(crate) struct ModelReport {
    /// T_rpc = RIF × BS / (2 × RTT), bytes/s.
    pub t_rpc_bytes_per_s: f64,
    /// The smallest bound, bytes/s.
    pub t_model_bytes_per_s: f64,
    /// RPCs in flight needed to fill the link (`--link-rate`), or to reach the next bound.
    pub needed_rif: Option<u64>,
    /// Observed / T_model.
    pub efficiency: f64,
    /// Every bound, ascending: limit and bytes/s.
    pub bounds: Vec<Bound>,
    /// The waterfall from the reference (link, else T_rpc) to the observed rate.
    pub shares_lost: Vec<lnetcap_model::ShareLost>,
    /// The inputs.
    pub inputs: ModelInput,
    /// Best rate seen over a 1 s window (or a third of the active period, if shorter),
    /// bytes/s: the link carries at least this.
    pub best_sustained_bytes_per_s: f64,
    /// Where the link rate comes from: `--link-rate` or `not given`.
    pub link_source: &'static str,
    /// The steady window spans at least 10 round trips (shorter captures are dominated by
    /// TCP slow start and the first RPCs; their verdict is flagged).
    pub steady_state: bool,
}

/// The JSON report.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub schema_version: u32,
    pub tool: String,
    pub files: Vec<FileReport>,
    pub peers: Vec<PeerEntry>,
    /// Fits across the captures (with two or more peers in all).
    pub fits: Option<Fits>,
}

/// Models fitted across captures of one workload (seeds 002 and 003).
#[derive(Debug, Serialize)]
pub(crate) struct Fits {
    /// Points used: (file, RTT s, RPC size bytes, RPCs in flight, throughput bytes/s).
    pub points: Vec<(String, f64, f64, f64, f64)>,
    /// Seed 002: Θ(τ) = B / τ; B in bytes, and the largest relative error.
    pub buffer_bytes: Option<f64>,
    /// Largest relative error of the B / τ fit.
    pub buffer_fit_error: Option<f64>,
    /// Seed 003 equation 4's k against the first point, and its largest relative error.
    pub k: Option<f64>,
    /// Largest relative error of the k fit.
    pub k_fit_error: Option<f64>,
}

fn fits(peers: &[PeerEntry]) -> Option<Fits> {
    let points: Vec<(String, f64, f64, f64, f64)> = peers
        .iter()
        .filter(|e| e.model.inputs.rtt_s > 0.0 && e.model.inputs.observed > 0.0)
        .map(|e| {
            (e.file.clone(), e.model.inputs.rtt_s, e.model.inputs.bs_bytes, e.model.inputs.rif, e.model.inputs.observed)
        })
        .collect();
    if points.len() < 2 {
        return None;
    }
    let buf = lnetcap_model::fit_buffer_profile(&points.iter().map(|p| (p.1, p.4)).collect::<Vec<_>>());
    let base = (points[0].2, points[0].3, points[0].1, points[0].4);
    let rest: Vec<(f64, f64, f64, f64)> = points[1..].iter().map(|p| (p.2, p.3, p.1, p.4)).collect();
    let k = lnetcap_model::fit_seed003_k(base, &rest);
    Some(Fits {
        points,
        buffer_bytes: buf.map(|b| b.0),
        buffer_fit_error: buf.map(|b| b.1),
        k: k.map(|x| x.0),
        k_fit_error: k.map(|x| x.1),
    })
}

/// An output file, or stdout for `-`.
fn create_output(p: &Path) -> Result<BufWriter<Box<dyn Write>>> {
    let w: Box<dyn Write> = if p.as_os_str() == "-" {
        Box::new(io::stdout())
    } else {
        Box::new(File::create(p).with_context(|| format!("creating {}", p.display()))?)
    };
    Ok(BufWriter::with_capacity(1 << 16, w))
}

pub(crate) fn run(a: &AnalyzeArgs) -> Result<u8> {
    let mut code = exit::OK;
    let is_stdout = |p: &Option<PathBuf>| p.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if is_stdout(&a.json) && is_stdout(&a.rpcs) {
        eprintln!("lnetcap: --json - and --rpcs - cannot both write to stdout");
        return Ok(exit::USAGE);
    }
    let mut rpc_out = a.rpcs.as_deref().map(create_output).transpose()?;
    let multi = a.files.len() > 1;
    let mut report = Report {
        schema_version: REPORT_SCHEMA_VERSION,
        tool: format!("lnetcap {}", env!("CARGO_PKG_VERSION")),
        files: Vec::new(),
        peers: Vec::new(),
        fits: None,
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
        let cfg = lnetcap_lnet::pipeline::DecodeConfig {
            series_interval_ns: (a.interval_ms.max(1) * 1_000_000) as i64,
            ..config(&a.ports, a.no_detect)
        };
        let run = run_file(path, cfg, |pipe, events| {
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
        let reports = tracker.reports();
        for peer in &reports {
            let entry = model_peer(&run.pipe, peer.clone(), &reports, a.link_rate, &name);
            report.peers.push(entry);
        }
    }
    if let Some(mut w) = rpc_out {
        w.flush()?;
    }
    if a.files.len() > 1 {
        report.fits = fits(&report.peers);
    }
    if let Some(p) = &a.json {
        let mut w = create_output(p)?;
        serde_json::to_writer_pretty(&mut w, &report)?;
        w.write_all(b"\n")?;
        w.flush()?;
    }
    if !a.quiet && !is_stdout(&a.json) && !is_stdout(&a.rpcs) {
        let stdout = io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        print_summary(&mut out, &report)?;
        out.flush()?;
    }
    Ok(code)
}

/// The server's own time per RPC, s: the quickest RPC's (so a bound: queueing behind
/// credits or in a busy TCP connection, which a capture cannot tell from work, is left
/// out), with the network round trips it waited for taken out. At the capture
/// point the server's wait (request → bulk start) is one server loop L_s plus its first
/// part of work; bulk end → reply is L_s plus its second part, plus the client loop L_c on
/// reads when the server waited for the bulk's acknowledgement (LNet ACK or zero-copy ACK;
/// taken when that phase is at least 80 % of L_c + L_s, the loops' jitter allowed). None
/// when LNet credits bind (the wait for a credit at the server cannot be told from its
/// work) or the loops are unknown. pb_service_time is whole seconds of the server's clock
/// and at least 1 (Lustre reports max(1, elapsed seconds)), so only a value v > 1 says
/// something: at least v − 1 s.
fn server_time_s(peer: &PeerReport, rtt: &RttReport, reads: bool) -> Option<f64> {
    if peer.messages_in_flight.inferred_peer_credits.is_some() {
        return None;
    }
    let (ls, lc) = (rtt.server_loop_us?, rtt.client_loop_us?);
    let ph = &peer.phases;
    let wait = ph.server_wait_min_us.map(|w| (w - ls).max(0.0));
    let after = ph.server_min_us.map(|v| {
        let acked = reads && ph.server_wait_min_us.is_some() && v >= 0.8 * (lc + ls);
        (v - ls - if acked { lc } else { 0.0 }).max(0.0)
    });
    if wait.is_none() && after.is_none() {
        return None;
    }
    let s = (wait.unwrap_or(0.0) + after.unwrap_or(0.0)) / 1e6;
    Some(s.max(ph.service_time_s.unwrap_or(0.0) - 1.0))
}

/// TCP behaviour and the throughput model for one peer pair.
fn model_peer(
    pipe: &lnetcap_lnet::pipeline::Pipeline,
    peer: PeerReport,
    all: &[PeerReport],
    link_rate: Option<f64>,
    file: &str,
) -> PeerEntry {
    let conns: Vec<ConnPerfRef<'_>> = peer
        .connections
        .iter()
        .filter_map(|c| {
            pipe.tcp_perf(ConnId(c.id)).map(|dirs| ConnPerfRef { dirs, active_is_client: c.active_is_client })
        })
        .collect();
    let rtt = rtt_report(&conns);
    let rtt_us = rtt.p50.or(peer.handshake_rtt_us).unwrap_or(0.0);
    let reads = peer.bytes_read >= peer.bytes_written;
    let bulk = bulk_directions(&conns, reads);
    let mut tcp = tcp_report(&conns, &bulk, peer.steady_window_ns);
    let rpcs = peer.rpcs + peer.rpcs_partial;
    let bs = if rpcs > 0 { (peer.bytes_read + peer.bytes_written) as f64 / rpcs as f64 } else { 0.0 };
    // The best sustained rate: the largest 1 s mean of the per-interval bulk rate.
    let rates: Vec<f64> = peer.timeseries.iter().map(|r| r.read_bytes_per_s + r.write_bytes_per_s).collect();
    // Windows of 1 s, or a third of the active period when it is shorter.
    let span = if peer.timeseries.len() >= 2 {
        let per_s = (1e9 / (peer.timeseries[1].t_ns - peer.timeseries[0].t_ns).max(1) as f64).round() as usize;
        per_s.min(peer.timeseries.len() / 3).max(1)
    } else {
        1
    };
    let best =
        rates.windows(span.min(rates.len()).max(1)).map(|w| w.iter().sum::<f64>() / w.len() as f64).fold(0.0, f64::max);
    let peers_of_server = all.iter().filter(|p| p.server_nid == peer.server_nid).count() as u64;
    let bulk_msg = bs.min(1_048_576.0);
    // Loss recovery (retransmissions that were not spurious) is congestion control acting.
    let loss = tcp.retransmits > tcp.retransmits_spurious;
    let steady_state =
        peer.steady_window_ns.is_some_and(|[a, b]| rtt_us > 0.0 && (b - a) as f64 >= 10.0 * rtt_us * 1000.0);
    let interval_ns =
        if peer.timeseries.len() >= 2 { peer.timeseries[1].t_ns - peer.timeseries[0].t_ns } else { 100_000_000 };
    let cwnd_iv = lnetcap_rpc::tcp::cwnd_by_interval(&conns, &bulk);
    // The window still opening over the steady window (its last interval's estimate a
    // tenth above its first's) is congestion control acting too.
    let opening_in_steady = peer.steady_window_ns.is_some_and(|[a, b]| {
        let mut r = cwnd_iv.range(a.div_euclid(interval_ns) * interval_ns..b).map(|(_, c)| *c);
        let first = r.next();
        matches!((first, r.next_back()), (Some(f), Some(l)) if l as f64 > 1.1 * f as f64)
    });
    let inp = ModelInput {
        observed: peer.throughput_bytes_per_s,
        rtt_s: rtt_us / 1e6,
        bs_bytes: bs,
        rif: peer.rpcs_in_flight.steady_mean,
        credits: peer.messages_in_flight.inferred_peer_credits.map(|c| (c as f64, bulk_msg)),
        cwnd_bytes: (tcp.cwnd_estimate_p50 > 0).then_some(tcp.cwnd_estimate_p50 as f64),
        cwnd_acting: loss || opening_in_steady,
        rwnd_bytes: if tcp.rwnd_scale_unknown { None } else { tcp.rwnd_p50.map(|x| x as f64) },
        server_s: server_time_s(&peer, &rtt, reads),
        link: link_rate.map(|l| (l, true)),
    };
    // Without a link rate, a path seen full stands for the link at its best rate.
    let mut inp = inp;
    let link_source = if link_rate.is_some() {
        "--link-rate"
    } else if steady_state && lnetcap_model::path_full(&inp) && best > 0.0 && inp.observed <= 1.05 * best {
        inp.link = Some((best, false));
        "best sustained rate (the path was full)"
    } else {
        "not given"
    };
    let out = evaluate(&inp);
    tcp.efficiency_loss = out.tcp_efficiency_loss;
    let rtt_iv = lnetcap_rpc::tcp::rtt_by_interval(&conns);
    let rtt_report_min = rtt.min;
    let intervals = peer
        .timeseries
        .iter()
        .filter(|r| r.read_bytes_per_s + r.write_bytes_per_s > 0.0 && r.rpcs_in_flight_mean > 0.0)
        .map(|r| {
            let cw = cwnd_iv.get(&r.t_ns).copied();
            // The window opening (slow start, or growth after a cut) by more than a tenth
            // into or out of this interval.
            let opening =
                |a: Option<u64>, b: Option<u64>| matches!((a, b), (Some(a), Some(b)) if b as f64 > 1.1 * a as f64);
            let acting = loss
                || opening(cwnd_iv.get(&(r.t_ns - interval_ns)).copied(), cw)
                || opening(cw, cwnd_iv.get(&(r.t_ns + interval_ns)).copied());
            let rtt = rtt_iv.get(&r.t_ns).copied();
            let model_rtt_us = match (rtt, rtt_report_min) {
                (Some(iv), Some(min)) => rtt_us + (iv.min_us - min).max(0.0),
                _ => rtt_us,
            };
            let i = ModelInput {
                observed: r.read_bytes_per_s + r.write_bytes_per_s,
                rtt_s: model_rtt_us / 1e6,
                rif: r.rpcs_in_flight_mean,
                cwnd_bytes: cw.map(|c| c as f64),
                cwnd_acting: acting,
                ..inp.clone()
            };
            let o = evaluate(&i);
            IntervalModel {
                t_ns: r.t_ns,
                rtt_us: rtt,
                model_rtt_us,
                observed_bytes_per_s: i.observed,
                t_rpc_bytes_per_s: o.t_rpc_bytes_per_s,
                t_model_bytes_per_s: o.t_model_bytes_per_s,
                binding_limit: o.binding_limit.as_str(),
                cwnd_estimate: cw,
            }
        })
        .collect();
    let selftest = peer.rpcs_by_opcode.keys().any(|k| k.starts_with("BRW"));
    let advice = advise(
        &inp,
        &out,
        selftest,
        !reads,
        f64::from(peer.rpcs_in_flight.max as u32),
        peers_of_server,
        tcp.retransmitted_share,
    );
    PeerEntry {
        file: file.to_string(),
        rtt_us: rtt,
        tcp,
        binding_limit: out.binding_limit.as_str(),
        model: ModelReport {
            t_rpc_bytes_per_s: out.t_rpc_bytes_per_s,
            t_model_bytes_per_s: out.t_model_bytes_per_s,
            needed_rif: out.needed_rif,
            efficiency: out.efficiency,
            bounds: out.bounds,
            shares_lost: out.shares_lost,
            inputs: inp,
            best_sustained_bytes_per_s: best,
            link_source,
            steady_state,
        },
        advice,
        intervals,
        peer,
    }
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

fn print_model(out: &mut impl Write, e: &PeerEntry) -> Result<()> {
    let m = &e.model;
    let r = &e.rtt_us;
    writeln!(
        out,
        "  observed vs model{}",
        if m.steady_state {
            ""
        } else {
            "  (caution: the steady window is shorter than 10 round trips; slow start and ramp-up weigh on every number)"
        }
    )?;
    writeln!(
        out,
        "    RTT          {} (min {}; capture point near the {}: client loop {}, server loop {})",
        ms(r.p50),
        ms(r.min),
        r.capture_side.unwrap_or("?"),
        ms(r.client_loop_us),
        ms(r.server_loop_us)
    )?;
    let t = &e.tcp;
    writeln!(
        out,
        "    TCP          {} retransmits ({} fast, {} timeout, {} spurious; {:.2} % of bulk bytes), bytes in flight max {}, cwnd estimate {} (max {}), receive window {}",
        t.retransmits,
        t.retransmits_fast,
        t.retransmits_timeout,
        t.retransmits_spurious,
        t.retransmitted_share * 100.0,
        bytes(t.bytes_in_flight_max as f64),
        bytes(t.cwnd_estimate_p50 as f64),
        bytes(t.cwnd_estimate_max as f64),
        t.rwnd_p50.map_or("unknown (no SYN)".into(), |w| bytes(w as f64))
    )?;
    writeln!(
        out,
        "    T_rpc        RIF {:.1} × {} / (2 × {}) = {}/s",
        m.inputs.rif,
        bytes(m.inputs.bs_bytes),
        ms(r.p50),
        bytes(m.t_rpc_bytes_per_s)
    )?;
    let b: Vec<String> = m.bounds.iter().map(|b| format!("{} {}/s", b.limit.as_str(), bytes(b.bytes_per_s))).collect();
    writeln!(out, "    bounds       {}", b.join(" < "))?;
    writeln!(
        out,
        "    observed     {}/s = {:.0} % of the model; binding limit: {}{}",
        bytes(m.inputs.observed),
        m.efficiency * 100.0,
        e.binding_limit,
        match m.link_source {
            "not given" => format!(" (link not given; best 1 s rate seen {}/s)", bytes(m.best_sustained_bytes_per_s)),
            "--link-rate" => String::new(),
            other => format!(" (link: {other}, {}/s)", bytes(m.best_sustained_bytes_per_s)),
        }
    )?;
    let (name, reference) = match m.inputs.link {
        Some((l, true)) => ("the link", l),
        Some((l, false)) => ("the path's best rate", l),
        None => ("T_rpc", m.t_rpc_bytes_per_s),
    };
    if reference > 0.0 && reference.is_finite() {
        let parts: Vec<String> =
            m.shares_lost.iter().map(|s| format!("{} {:.1} %", s.limit, s.share * 100.0)).collect();
        writeln!(
            out,
            "    lost         {} of {name} {}/s; {:.1} % reached",
            if parts.is_empty() { "nothing".into() } else { parts.join(", ") },
            bytes(reference),
            100.0 * m.inputs.observed / reference
        )?;
    }
    if let Some(line) = limit_over_time(e) {
        writeln!(out, "    over time    {line}")?;
    }
    for a in &e.advice {
        writeln!(out, "    advice       {} = {}: {}", a.setting, a.value, a.reason)?;
        writeln!(out, "                 $ {}", a.command)?;
    }
    Ok(())
}

/// The binding limit over time, as runs of consecutive intervals with bulk traffic:
/// `tcp_congestion 0.0-0.3 s, lnet_credits 0.3-3.0 s` (seconds from the peer's first
/// interval). None when one limit binds throughout.
fn limit_over_time(e: &PeerEntry) -> Option<String> {
    const SHOWN: usize = 6;
    let iv = &e.intervals;
    let t0 = e.peer.timeseries.first()?.t_ns;
    let step = match e.peer.timeseries.as_slice() {
        [a, b, ..] => b.t_ns - a.t_ns,
        _ => return None,
    };
    let mut runs: Vec<(&str, i64, i64)> = Vec::new();
    for i in iv {
        match runs.last_mut() {
            Some(r) if r.0 == i.binding_limit && r.2 == i.t_ns => r.2 = i.t_ns + step,
            _ => runs.push((i.binding_limit, i.t_ns, i.t_ns + step)),
        }
    }
    if runs.iter().all(|r| r.0 == e.binding_limit) {
        return None;
    }
    let s = |t: i64| (t - t0) as f64 / 1e9;
    let mut parts: Vec<String> =
        runs.iter().take(SHOWN).map(|(l, a, b)| format!("{l} {:.1}-{:.1} s", s(*a), s(*b))).collect();
    if runs.len() > SHOWN {
        parts.push(format!("... {} more runs (--json intervals)", runs.len() - SHOWN));
    }
    Some(format!("{} (per {} ms interval)", parts.join(", "), step / 1_000_000))
}

fn print_summary(out: &mut impl Write, r: &Report) -> Result<()> {
    print_files(out, r)?;
    if let Some(f) = &r.fits {
        writeln!(out)?;
        writeln!(out, "fits across {} captures", f.points.len())?;
        if let (Some(b), Some(e)) = (f.buffer_bytes, f.buffer_fit_error) {
            writeln!(out, "  seed 002  Θ(τ) = B / τ with B = {} (largest error {:.0} %): a buffer of that size bounds data in transit", bytes(b), e * 100.0)?;
        }
        if let (Some(k), Some(e)) = (f.k, f.k_fit_error) {
            writeln!(out, "  seed 003  k = {k:.2} (largest error {:.0} %) against {}", e * 100.0, f.points[0].0)?;
        }
    }
    Ok(())
}

fn print_files(out: &mut impl Write, r: &Report) -> Result<()> {
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
            print_model(out, e)?;
        }
    }
    Ok(())
}
