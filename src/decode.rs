//! `lnetcap decode`.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use clap::{Args, ValueEnum};
use lnetcap_analysis::defaults::ACCEPTOR_PORT;
use lnetcap_analysis::{decode_messages, Sink};
use lnetcap_lnet::message::Message;
use lnetcap_lnet::pipeline::{DecodeConfig, DecodeSummary};
use lnetcap_lnet::record::{MessageRecord, NidTexts, SCHEMA_VERSION};
use lnetcap_tcp::{ConnId, Connection, Dir};

use crate::exit;
use crate::input::{open, Stderr};

/// Output format of `decode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// One line per message, then the accounting.
    Text,
    /// One JSON object per message (docs/decode-jsonl.md), then one summary object.
    Jsonl,
}

#[derive(Args, Debug)]
pub(crate) struct DecodeArgs {
    /// Capture files (pcap or pcapng, optionally gzip or zstd compressed); `-` reads stdin.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// LNet acceptor TCP port (repeatable). Default 988.
    #[arg(long = "port", value_name = "N")]
    pub ports: Vec<u16>,
    /// Only decode connections on the given ports (no detection by content).
    #[arg(long)]
    pub no_detect: bool,
    /// Do not print the accounting summary at the end.
    #[arg(long)]
    pub no_summary: bool,
    /// No progress bar (it is only drawn when stderr is a terminal and stdout is not).
    #[arg(long, short)]
    pub quiet: bool,
    /// Threads per capture (default: one per core): the reading thread and a pool of
    /// N - 1 workers, each decoding whole connections; the output is the same for any N.
    /// 1 decodes everything on one thread.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
}

/// `--port`, or the acceptor's port when none is given.
pub(crate) fn ports(given: &[u16]) -> Vec<u16> {
    if given.is_empty() {
        vec![ACCEPTOR_PORT]
    } else {
        given.to_vec()
    }
}

pub(crate) fn run(a: &DecodeArgs) -> Result<u8> {
    let stdout = io::stdout();
    let out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut code = exit::OK;
    let multi = a.files.len() > 1;
    let progress = !a.quiet && !io::IsTerminal::is_terminal(&io::stdout());
    let mut obs = Stderr::new(progress);
    let threads = a.threads.map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), usize::from);
    let mut w = Writer { out, format: a.format, file: None, sc: Scratch::default() };
    for path in &a.files {
        let name = path.display().to_string();
        w.file = multi.then(|| name.clone());
        // Decoding needs the byte streams only, not the TCP behaviour analysis.
        let cfg =
            DecodeConfig { ports: ports(&a.ports), detect: !a.no_detect, tcp_perf: false, ..DecodeConfig::default() };
        let Some(mut reader) = open(path, threads > 1) else {
            code = exit::INPUT;
            continue;
        };
        // Connections are numbered again in each file.
        w.sc = Scratch::default();
        let run = decode_messages(&name, &mut reader, cfg, &mut obs, threads, &mut w)?;
        if !run.complete {
            code = exit::INPUT;
        }
        if !a.no_summary {
            write_summary(&mut w.out, &run.pipe.summary(), a.format, w.file.as_deref())?;
        }
    }
    w.out.flush()?;
    Ok(code)
}

/// The text of a connection direction's TCP tuple, for the connections of recent
/// messages: a few hundred entries by connection number (a message's tuple was formatted
/// anew for every line). A connection's number and ends never change within a capture.
struct Tuples {
    slots: Vec<Option<(u32, Dir, Arc<str>)>>,
}

impl Default for Tuples {
    fn default() -> Self {
        Self { slots: vec![None; Self::SLOTS] }
    }
}

impl Tuples {
    const SLOTS: usize = 256;

    fn get(&mut self, conn: Option<&Connection>, id: ConnId, dir: Dir) -> Arc<str> {
        // A folded connection has no tuple any more (as without the cache): the message
        // comes without its connection.
        let Some(c) = conn else { return Arc::default() };
        let slot = &mut self.slots[(id.0 as usize * 2 + dir.index()) % Self::SLOTS];
        match slot {
            Some((i, d, t)) if *i == id.0 && *d == dir => t.clone(),
            _ => {
                let t: Arc<str> = c.tuple(dir).into();
                *slot = Some((id.0, dir, t.clone()));
                t
            }
        }
    }
}

/// What writing the records reuses from message to message: the texts of tuples and NIDs,
/// and the line being written.
#[derive(Default)]
struct Scratch {
    tuples: Tuples,
    nids: NidTexts,
    json: Vec<u8>,
    text: Vec<u8>,
}

/// Writes each message as it comes, in the chosen format.
struct Writer<W: Write> {
    out: W,
    format: Format,
    /// The file's name when several are decoded.
    file: Option<String>,
    sc: Scratch,
}

impl<W: Write> Sink for Writer<W> {
    fn wants_messages(&self) -> bool {
        true
    }

    fn message(&mut self, _file: &str, m: &Message, conn: Option<&Connection>) -> Result<()> {
        let sc = &mut self.sc;
        let tcp = sc.tuples.get(conn, m.conn, m.dir);
        let mut rec = MessageRecord::from_message_cached(m, tcp, &mut sc.nids);
        rec.file.clone_from(&self.file);
        // Into a line of its own, then written whole: the record writers' many small
        // appends cost less into a vector than through the buffered stdout.
        match self.format {
            Format::Text => {
                sc.text.clear();
                rec.write_text(&mut sc.text);
                sc.text.push(b'\n');
                self.out.write_all(&sc.text)?;
            }
            Format::Jsonl => {
                // serde_json's bytes, without its dispatch per field (record/json.rs).
                sc.json.clear();
                rec.write_json(&mut sc.json);
                sc.json.push(b'\n');
                self.out.write_all(&sc.json)?;
            }
        }
        Ok(())
    }
}

fn write_summary(out: &mut impl Write, s: &DecodeSummary, format: Format, file: Option<&str>) -> Result<()> {
    match format {
        Format::Jsonl => {
            let v = serde_json::json!({ "schema_version": SCHEMA_VERSION, "file": file, "summary": s });
            serde_json::to_writer(&mut *out, &v)?;
            out.write_all(b"\n")?;
        }
        Format::Text => {
            let f = &s.frames;
            writeln!(out, "# summary{}", file.map(|f| format!(" of {f}")).unwrap_or_default())?;
            writeln!(
                out,
                "# frames {}: lnet data {}, tcp control {}, other traffic {}, undecodable {}",
                f.frames,
                f.lnet_data,
                f.tcp_control,
                f.other_traffic,
                f.undecodable.values().sum::<u64>()
            )?;
            for (why, n) in &f.undecodable {
                writeln!(out, "#   undecodable {why}: {n}")?;
            }
            let kinds: Vec<String> = s.messages_by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
            writeln!(out, "# messages: {}", kinds.join(", "))?;
            for c in &s.connections {
                writeln!(
                    out,
                    "# conn c{} {} -> {} ({:?}, active side by {}) frames {}+{}",
                    c.id, c.active, c.passive, c.class, c.active_rule, c.frames_data, c.frames_control
                )?;
                for d in &c.dirs {
                    writeln!(
                        out,
                        "#   {} proto {} type {}: stream {} B (captured {}, snaplen {}, lost {}), retrans {} B, messages {} ({} B), partial headers {}, lost headers {}, desyncs {}, resyncs {}, skipped {} B",
                        d.tcp,
                        d.proto.map_or("-".to_string(), |p| format!("V{p}")),
                        d.hello_conn_type.unwrap_or("-"),
                        d.stream_bytes,
                        d.bytes_captured,
                        d.bytes_snaplen,
                        d.bytes_lost,
                        d.bytes_retransmitted,
                        d.messages,
                        d.bytes_in_messages,
                        d.headers_partial,
                        d.headers_lost,
                        d.desyncs,
                        d.resyncs,
                        d.bytes_skipped
                    )?;
                }
            }
        }
    }
    Ok(())
}
