//! `lnetcap decode`.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use clap::{Args, ValueEnum};
use lnetcap_analysis::decode_source;
use lnetcap_analysis::defaults::ACCEPTOR_PORT;
use lnetcap_lnet::pipeline::{DecodeConfig, DecodeSummary, Pipeline};
use lnetcap_lnet::record::{MessageRecord, NidTexts, SCHEMA_VERSION};
use lnetcap_lnet::LnetEvent;
use lnetcap_tcp::{ConnId, Dir};

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
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut code = exit::OK;
    let multi = a.files.len() > 1;
    let progress = !a.quiet && !io::IsTerminal::is_terminal(&io::stdout());
    let mut obs = Stderr::new(progress);
    for path in &a.files {
        let name = path.display().to_string();
        let file = multi.then_some(name.as_str());
        // Decoding needs the byte streams only, not the TCP behaviour analysis.
        let cfg =
            DecodeConfig { ports: ports(&a.ports), detect: !a.no_detect, tcp_perf: false, ..DecodeConfig::default() };
        let Some(mut reader) = open(path, false) else {
            code = exit::INPUT;
            continue;
        };
        let mut scratch = Scratch::default();
        let run = decode_source(&name, &mut reader, cfg, &mut obs, |pipe, events| {
            write_events(&mut out, pipe, events, a.format, file, &mut scratch)
        })?;
        if !run.complete {
            code = exit::INPUT;
        }
        if !a.no_summary {
            write_summary(&mut out, &run.pipe.summary(), a.format, file)?;
        }
    }
    out.flush()?;
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

    fn get(&mut self, pipe: &Pipeline, conn: ConnId, dir: Dir) -> Arc<str> {
        // A folded connection has no tuple any more (as without the cache).
        let Some(c) = pipe.connection(conn) else { return Arc::default() };
        let slot = &mut self.slots[(conn.0 as usize * 2 + dir.index()) % Self::SLOTS];
        match slot {
            Some((id, d, t)) if *id == conn.0 && *d == dir => t.clone(),
            _ => {
                let t: Arc<str> = c.tuple(dir).into();
                *slot = Some((conn.0, dir, t.clone()));
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
    text: String,
}

fn write_events(
    out: &mut impl Write,
    pipe: &Pipeline,
    events: &mut Vec<LnetEvent>,
    format: Format,
    file: Option<&str>,
    sc: &mut Scratch,
) -> Result<()> {
    for ev in events.drain(..) {
        let LnetEvent::Message(m) = ev else { continue };
        let tcp = sc.tuples.get(pipe, m.conn, m.dir);
        let mut rec = MessageRecord::from_message_cached(&m, tcp, &mut sc.nids);
        rec.file = file.map(str::to_string);
        // Into a line of its own, then written whole: the record writers' many small
        // appends cost less into a vector than through the buffered stdout.
        match format {
            Format::Text => {
                sc.text.clear();
                rec.write_text(&mut sc.text);
                sc.text.push('\n');
                out.write_all(sc.text.as_bytes())?;
            }
            Format::Jsonl => {
                // serde_json's bytes, without its dispatch per field (record/json.rs).
                sc.json.clear();
                rec.write_json(&mut sc.json);
                sc.json.push(b'\n');
                out.write_all(&sc.json)?;
            }
        }
    }
    Ok(())
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
