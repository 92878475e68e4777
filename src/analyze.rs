//! `lnetcap analyze`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use lnetcap_lnet::record::MessageRecord;
use lnetcap_lnet::{FramingEvent, LnetEvent};
use lnetcap_report::build::{connection_entries, fits, peer_entry};
use lnetcap_report::charts::{charts, png};
use lnetcap_report::gate::{check, Gate};
use lnetcap_report::html::write_html;
use lnetcap_report::summary::write_summary;
use lnetcap_report::tables::{TableFormat, TableSet};
use lnetcap_report::{FileReport, Report, REPORT_SCHEMA_VERSION};
use lnetcap_rpc::{RpcConfig, RpcRecord, Tracker};

use crate::decode::config;
use crate::exit;
use crate::input::run_file;

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
    /// best sustained rate seen is reported beside it). Not used when the capture carried
    /// more (a nominal speed such as a veth's); a path full below 80 % of it binds at its
    /// own best rate.
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub link_rate: Option<f64>,
    /// Write the tables (rpcs, messages, connections, peers, timeseries; docs/tables.md)
    /// and report.html (charts, advice) into this directory, created if missing.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With `--out`: also write each chart of report.html as DIR/<chart>.png.
    #[arg(long, requires = "out")]
    pub png: bool,
    /// Format of the `--out` tables.
    #[arg(long, value_enum, default_value_t = TableFormatArg::Parquet)]
    pub table_format: TableFormatArg,
    /// CI gate: exit 3 when EXPR holds for any peer, e.g. 'efficiency < 0.8',
    /// 'binding_limit == lnet_credits', 'rtt > 25ms and throughput < 1Gbit'; repeatable
    /// (README: "CI gates" has the language, fields and aliases).
    #[arg(long = "fail-if", value_name = "EXPR", value_parser = Gate::parse)]
    pub fail_if: Vec<Gate>,
    /// Do not print the terminal summary, the list of files written or the progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `--table-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TableFormatArg {
    /// Apache Parquet.
    Parquet,
    /// CSV with a header line.
    Csv,
}

impl From<TableFormatArg> for TableFormat {
    fn from(f: TableFormatArg) -> Self {
        match f {
            TableFormatArg::Parquet => TableFormat::Parquet,
            TableFormatArg::Csv => TableFormat::Csv,
        }
    }
}

/// Where RPC records go as they finish: `--rpcs` lines and the `rpcs` table.
fn emit_rpcs(
    rpcs: &mut Vec<RpcRecord>,
    lines: Option<&mut BufWriter<Box<dyn Write>>>,
    tables: Option<&mut TableSet>,
    name: &str,
    multi: bool,
) -> Result<()> {
    if let Some(t) = tables {
        for r in rpcs.iter() {
            t.rpc(name, r)?;
        }
    }
    if let Some(w) = lines {
        for mut r in rpcs.drain(..) {
            r.file = multi.then(|| name.to_string());
            serde_json::to_writer(&mut *w, &r)?;
            w.write_all(b"\n")?;
        }
    }
    rpcs.clear();
    Ok(())
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
    let mut tables = match &a.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            Some(TableSet::create(dir, a.table_format.into())?)
        }
        None => None,
    };
    let multi = a.files.len() > 1;
    let interval_ns = (a.interval_ms.max(1) * 1_000_000) as i64;
    let mut report = Report {
        schema_version: REPORT_SCHEMA_VERSION,
        tool: format!("lnetcap {}", env!("CARGO_PKG_VERSION")),
        interval_ns,
        files: Vec::new(),
        peers: Vec::new(),
        connections: Vec::new(),
        fits: None,
    };
    for path in &a.files {
        let name = path.display().to_string();
        let mut tracker = Tracker::new(RpcConfig { interval_ns });
        let mut rpcs: Vec<RpcRecord> = Vec::new();
        let mut span: Option<[i64; 2]> = None;
        let cfg =
            lnetcap_lnet::pipeline::DecodeConfig { series_interval_ns: interval_ns, ..config(&a.ports, a.no_detect) };
        let run = run_file(path, cfg, !a.quiet, |pipe, events| {
            for ev in events.drain(..) {
                match ev {
                    LnetEvent::Message(m) => {
                        if let Some(t) = tables.as_mut() {
                            let tcp = pipe.connection(m.conn).map(|c| c.tuple(m.dir)).unwrap_or_default();
                            t.message(&name, &MessageRecord::from_message(&m, tcp))?;
                        }
                        if let Some(conn) = pipe.connection(m.conn) {
                            span = Some(match span {
                                Some([s, e]) => [s.min(m.first.ts_ns), e.max(m.last.ts_ns)],
                                None => [m.first.ts_ns, m.last.ts_ns],
                            });
                            if conn.capture_point().is_none() && !tracker.knows_capture_point(m.conn.0) {
                                let cp = pipe.tcp_perf(m.conn).and_then(lnetcap_rpc::tcp::capture_point_from_loops);
                                if let Some(cp) = cp {
                                    tracker.note_capture_point(m.conn.0, cp);
                                }
                            }
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
            emit_rpcs(&mut rpcs, rpc_out.as_mut(), tables.as_mut(), &name, multi)
        })?;
        let Some(run) = run else {
            code = exit::INPUT;
            continue;
        };
        if !run.complete {
            code = exit::INPUT;
        }
        tracker.finish(&mut rpcs);
        emit_rpcs(&mut rpcs, rpc_out.as_mut(), tables.as_mut(), &name, multi)?;
        let summary = run.pipe.summary();
        report.files.push(FileReport {
            file: name.clone(),
            complete: run.complete,
            frames: summary.frames.clone(),
            span_ns: span,
            unmatched_messages: tracker.unmatched.clone(),
        });
        let reports = tracker.reports();
        report.connections.extend(connection_entries(&run.pipe, &summary, &reports, &name, interval_ns));
        for peer in &reports {
            let entry = peer_entry(&run.pipe, peer.clone(), &reports, a.link_rate, &name);
            report.peers.push(entry);
        }
    }
    if let Some(mut w) = rpc_out {
        w.flush()?;
    }
    if a.files.len() > 1 {
        report.fits = fits(&report.peers);
    }
    if let (Some(t), Some(dir)) = (tables, &a.out) {
        for w in t.finish(&report)? {
            if !a.quiet {
                eprintln!("lnetcap: wrote {} ({} rows)", w.path.display(), w.rows);
            }
        }
        let path = dir.join("report.html");
        let mut w = create_output(&path)?;
        write_html(&mut w, &report).with_context(|| format!("writing {}", path.display()))?;
        w.flush().with_context(|| format!("writing {}", path.display()))?;
        if !a.quiet {
            eprintln!("lnetcap: wrote {}", path.display());
        }
        if a.png {
            for c in charts(&report) {
                let path = dir.join(format!("{}.png", c.id));
                png(&report, &c, &path)?;
                if !a.quiet {
                    eprintln!("lnetcap: wrote {}", path.display());
                }
            }
        }
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
        write_summary(&mut out, &report)?;
        out.flush()?;
    }
    if !a.fail_if.is_empty() {
        let json = serde_json::to_value(&report)?;
        match check(&a.fail_if, &json) {
            Err(e) => {
                eprintln!("lnetcap: --fail-if: {e}");
                return Ok(exit::USAGE);
            }
            Ok(failures) => {
                for f in &failures {
                    let values = if f.values.is_empty() { String::new() } else { format!(": {}", f.values.join(", ")) };
                    eprintln!("lnetcap: gate failed: --fail-if '{}' holds for {}{values}", f.gate, f.peer);
                }
                if !failures.is_empty() && code == exit::OK {
                    code = exit::GATE;
                }
            }
        }
    }
    Ok(code)
}
