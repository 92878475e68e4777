//! `lnetcap analyze`.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use lnetcap_analysis::defaults::{parse_rate, INTERVAL_MS};
use lnetcap_analysis::{Analysis, AnalysisConfig, ReadPoint, Report, Sink};
use lnetcap_live::source::Until;
use lnetcap_live::Stop;
use lnetcap_lnet::message::Message;
use lnetcap_lnet::record::{MessageRecord, NidTexts};
use lnetcap_report::charts::{charts, png};
use lnetcap_report::gate::{check, Gate};
use lnetcap_report::html::write_html;
use lnetcap_report::summary::write_summary;
use lnetcap_report::tables::{OpenTable, TableError, TableFormat, TableOut, TableSet};
use lnetcap_rpc::RpcRecord;
use lnetcap_tcp::Connection;

use crate::exit;
use crate::input::{open, Stderr};
use lnetcap_report::output::Staged;

#[derive(Args, Debug)]
pub(crate) struct AnalyzeArgs {
    /// Capture files (pcap or pcapng, optionally gzip or zstd compressed); `-` reads stdin.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    /// Threads per capture (default: one per core). The output is the same for any N;
    /// 1 runs everything on one thread.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
}

/// What `analyze` and `live` write at the end of a run.
#[derive(Args, Debug)]
pub(crate) struct OutputArgs {
    /// Write the JSON report here (docs/analyze-json.md); `-` writes it to stdout instead
    /// of the terminal summary.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write one JSON line per RPC here; `-` writes them to stdout instead of the terminal
    /// summary.
    #[arg(long, value_name = "FILE")]
    pub rpcs: Option<PathBuf>,
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

/// The analysis options `analyze` and `batch` share.
#[derive(Args, Debug)]
pub(crate) struct AnalysisArgs {
    /// LNet acceptor TCP port (repeatable). Default 988.
    #[arg(long = "port", value_name = "N")]
    pub ports: Vec<u16>,
    /// Only follow connections on the given ports (no detection by content).
    #[arg(long)]
    pub no_detect: bool,
    /// Time-series interval in milliseconds.
    #[arg(long, default_value_t = INTERVAL_MS)]
    pub interval_ms: u64,
    /// Link rate for the model, e.g. `10Gbit`, `25G`, `1250MB/s` (default: not known; the
    /// best sustained rate seen is reported beside it). Not used when the capture carried
    /// more (a nominal speed such as a veth's); a path full below 80 % of it binds at its
    /// own best rate.
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub link_rate: Option<f64>,
}

impl AnalysisArgs {
    /// The analysis these options ask for.
    pub(crate) fn config(&self) -> AnalysisConfig {
        AnalysisConfig {
            ports: crate::decode::ports(&self.ports),
            detect: !self.no_detect,
            interval_ns: (self.interval_ms.max(1) * 1_000_000) as i64,
            link_rate: self.link_rate,
            threads: 1,
        }
    }
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

/// Where the analysis streams to: `--rpcs` lines, and the `rpcs` and `messages` tables.
pub(crate) struct Outputs {
    lines: Option<Box<dyn Write>>,
    tables: Option<TableSet>,
    /// Every output file, renamed into place when the run's outputs are complete.
    staged: Staged,
    /// Several captures: each RPC line names its file.
    multi: bool,
    /// The text of the messages table's NIDs.
    nids: NidTexts,
    /// The `--rpcs` line being written.
    line: Vec<u8>,
}

impl Sink for Outputs {
    fn wants_messages(&self) -> bool {
        self.tables.is_some()
    }

    fn message(&mut self, file: &str, m: &Message, conn: Option<&Connection>) -> Result<()> {
        if let Some(t) = self.tables.as_mut() {
            let tcp = conn.map(|c| c.tuple(m.dir)).unwrap_or_default();
            t.message(file, &MessageRecord::from_message_cached(m, tcp.into(), &mut self.nids))?;
        }
        Ok(())
    }

    fn rpc(&mut self, file: &str, r: &mut RpcRecord) -> Result<()> {
        if let Some(t) = self.tables.as_mut() {
            t.rpc(file, r)?;
        }
        if let Some(w) = self.lines.as_mut() {
            r.file = self.multi.then(|| file.to_string());
            // Into a line of its own, then written whole (serde_json's bytes, without its
            // dispatch per field: lnetcap-rpc's report/json.rs).
            self.line.clear();
            r.write_json(&mut self.line);
            self.line.push(b'\n');
            w.write_all(&self.line)?;
        }
        Ok(())
    }
}

/// An output file (staged: renamed into place at the end), or stdout for `-`.
fn create_output(p: &Path, staged: &Staged) -> Result<Box<dyn Write>> {
    Ok(if p.as_os_str() == "-" {
        Box::new(BufWriter::with_capacity(1 << 16, io::stdout()))
    } else {
        Box::new(staged.create(p).with_context(|| format!("creating {}", p.display()))?)
    })
}

pub(crate) fn run(a: &AnalyzeArgs) -> Result<u8> {
    let o = &a.output;
    let stop = Stop::with_signals().context("installing the SIGINT/SIGTERM handlers")?;
    let Some(mut sink) = Outputs::open(o, a.files.len() > 1)? else { return Ok(exit::USAGE) };
    let mut code = exit::OK;
    let threads = a.threads.map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), usize::from);
    let mut analysis = Analysis::new(AnalysisConfig { threads, ..a.analysis.config() });
    let mut obs = Stderr::new(!o.quiet);
    let mut stopped = Vec::new();
    for path in &a.files {
        if stop.is_set() {
            break;
        }
        let Some(reader) = open(path, threads > 1) else {
            code = exit::INPUT;
            continue;
        };
        let name = path.display().to_string();
        let mut src = Until::new(reader, stop.clone());
        let done = analysis.add(&name, &mut src, &mut sink, &mut obs)?;
        if let Some(at) = src.stopped_at() {
            stopped.push((name, at));
        } else if !done.complete {
            code = exit::INPUT;
        }
    }
    let mut report = analysis.finish();
    if stop.is_set() {
        mark_interrupted(&mut report, &stopped);
        if !o.quiet {
            eprintln!("lnetcap: interrupted: writing the report of what was read (a second signal exits at once)");
        }
        code = exit::INTERRUPTED;
    }
    write_outputs(o, sink, &report, code)
}

/// The report of a run stopped by a signal: marked, with where each file stopped.
fn mark_interrupted(report: &mut Report, stopped: &[(String, ReadPoint)]) {
    report.interrupted = true;
    for f in &mut report.files {
        if let Some((_, at)) = stopped.iter().find(|(n, _)| *n == f.file) {
            f.interrupted_at = Some(*at);
            f.complete = false;
        }
    }
}

fn is_stdout(p: &Option<PathBuf>) -> bool {
    p.as_ref().is_some_and(|p| p.as_os_str() == "-")
}

impl Outputs {
    /// The streaming outputs `o` asks for; `None` (after saying why) for a usage error.
    pub(crate) fn open(o: &OutputArgs, multi: bool) -> Result<Option<Self>> {
        if is_stdout(&o.json) && is_stdout(&o.rpcs) {
            eprintln!("lnetcap: --json - and --rpcs - cannot both write to stdout");
            return Ok(None);
        }
        let staged = Staged::default();
        let lines = o.rpcs.as_deref().map(|p| create_output(p, &staged)).transpose()?;
        let tables = match &o.out {
            Some(dir) => {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
                Some(TableSet::new(o.table_format.into(), open_tables_in(dir.clone(), staged.clone()))?)
            }
            None => None,
        };
        Ok(Some(Self { lines, tables, staged, multi, nids: NidTexts::default(), line: Vec::with_capacity(1024) }))
    }
}

/// Ends a run: the `--rpcs` lines, tables, report.html and PNGs, the JSON report, the
/// terminal summary and the gates. Returns the exit code (`code` unless a gate fails).
pub(crate) fn write_outputs(o: &OutputArgs, sink: Outputs, report: &Report, mut code: u8) -> Result<u8> {
    let Outputs { lines, tables, staged, .. } = sink;
    if let Some(mut w) = lines {
        w.flush()?;
    }
    let mut wrote = Vec::new();
    if let (Some(t), Some(dir)) = (tables, &o.out) {
        wrote = write_dir(o, t, dir, report, &staged)?;
    }
    if let Some(p) = &o.json {
        // serde_json makes a write call per token: into a concrete BufWriter (static
        // calls), the boxed writer called once per 64 KiB, not once a token (the 6.7 MB
        // report of 1,200 connections: one-thread `analyze` 2,045.7 M -> 1,998.7 M
        // instructions, -2.3 %). A reader that stops early breaks the pipe inside
        // serde_json: `main` knows its error type too.
        let mut w = BufWriter::with_capacity(1 << 16, create_output(p, &staged)?);
        serde_json::to_writer_pretty(&mut w, report)?;
        w.write_all(b"\n")?;
        w.into_inner().map_err(|e| e.into_error())?.flush()?;
    }
    // Every file whole, or none: the outputs are renamed into place together.
    staged.commit()?;
    if !o.quiet {
        for w in wrote {
            eprintln!("lnetcap: wrote {w}");
        }
    }
    if !o.quiet && !is_stdout(&o.json) && !is_stdout(&o.rpcs) {
        let stdout = io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        write_summary(&mut out, report)?;
        out.flush()?;
    }
    if !o.fail_if.is_empty() {
        let json = serde_json::to_value(report)?;
        match check(&o.fail_if, &json) {
            Err(e) => {
                eprintln!("lnetcap: --fail-if: {e}");
                return Ok(exit::USAGE);
            }
            Ok(failures) => {
                crate::gate::print_failures(&failures);
                if !failures.is_empty() && code == exit::OK {
                    code = exit::GATE;
                }
            }
        }
    }
    Ok(code)
}

/// `--out DIR`: the tables, report.html and (`--png`) the charts, staged; returns what
/// to list as written.
fn write_dir(o: &OutputArgs, t: TableSet, dir: &Path, report: &Report, staged: &Staged) -> Result<Vec<String>> {
    let mut wrote = Vec::new();
    for w in t.finish(report)? {
        wrote.push(format!("{} ({} rows)", dir.join(&w.file_name).display(), w.rows));
    }
    let path = dir.join("report.html");
    let mut w = create_output(&path, staged)?;
    write_html(&mut w, report).with_context(|| format!("writing {}", path.display()))?;
    w.flush().with_context(|| format!("writing {}", path.display()))?;
    wrote.push(path.display().to_string());
    if o.png {
        for c in charts(report) {
            let path = dir.join(format!("{}.png", c.id));
            png(report, &c, &staged.path_for(&path, ".png")?)?;
            wrote.push(path.display().to_string());
        }
    }
    Ok(wrote)
}

/// Tables as staged files of `dir`.
fn open_tables_in(dir: PathBuf, staged: Staged) -> OpenTable {
    Box::new(move |name: &str| {
        let path = dir.join(name);
        let w = staged.create(&path).map_err(|e| TableError(format!("creating {}: {e}", path.display())))?;
        Ok(Box::new(w) as TableOut)
    })
}
