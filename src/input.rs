//! Reading captures for the subcommands: one pass over a file's packets through the
//! decode pipeline, with bad input reported on stderr (file, frame, offset) and counted.

use std::path::Path;

use lnetcap_capture::CaptureReader;
use lnetcap_lnet::pipeline::{DecodeConfig, Pipeline};
use lnetcap_lnet::LnetEvent;

/// Inputs smaller than this get no progress bar (they take well under a second).
const PROGRESS_MIN_BYTES: u64 = 32 << 20;

/// A progress bar on stderr for one input: bytes read of the file (compressed bytes for a
/// compressed file), rate and ETA; only when stderr is a terminal.
pub(crate) struct Progress(indicatif::ProgressBar);

impl Progress {
    fn new(name: &str, total: Option<u64>) -> Option<Self> {
        use std::io::IsTerminal;
        // LNETCAP_PROGRESS_MIN_BYTES lowers the threshold (for tests).
        let min =
            std::env::var("LNETCAP_PROGRESS_MIN_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(PROGRESS_MIN_BYTES);
        if !std::io::stderr().is_terminal() || total.is_some_and(|t| t < min) {
            return None;
        }
        let bar = match total {
            Some(t) => indicatif::ProgressBar::new(t).with_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
                )
                .ok()?
                .progress_chars("=> "),
            ),
            // stdin and pipes: no total, so no ETA.
            None => indicatif::ProgressBar::new_spinner().with_style(
                indicatif::ProgressStyle::with_template("{msg} {spinner} {bytes} {binary_bytes_per_sec}").ok()?,
            ),
        };
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
        bar.set_message(name.to_string());
        Some(Self(bar))
    }

    fn update(&self, done: u64) {
        self.0.set_position(done);
    }

    fn finish(self) {
        self.0.finish_and_clear();
    }
}

/// Most per-frame warnings printed per file (the rest are counted in the summary).
const MAX_WARNINGS: u64 = 20;

/// What reading one file gave.
pub(crate) struct FileRun {
    /// The pipeline after the whole file (its summary, connections).
    pub pipe: Pipeline,
    /// The file could not be read to its end (or not opened at all: then `None`).
    pub complete: bool,
}

/// Runs one file through a pipeline; `on_events` sees the events after every packet (and
/// after the final flush) with the pipeline for connection lookups. Returns `None` when the
/// file cannot be opened (the error is printed).
pub(crate) fn run_file(
    path: &Path,
    cfg: DecodeConfig,
    progress: bool,
    mut on_events: impl FnMut(&Pipeline, &mut Vec<LnetEvent>) -> anyhow::Result<()>,
) -> anyhow::Result<Option<FileRun>> {
    let name = path.display().to_string();
    let mut reader = match CaptureReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("lnetcap: {name}: {e}");
            return Ok(None);
        }
    };
    let mut pipe = Pipeline::new(cfg.clone());
    let mut events = Vec::new();
    let mut warned = 0u64;
    let mut warn = |msg: String| {
        warned += 1;
        if warned <= MAX_WARNINGS {
            eprintln!("lnetcap: {name}: {msg}");
        }
    };
    let mut complete = true;
    let bar = progress.then(|| Progress::new(&name, reader.input_progress().1)).flatten();
    let mut n = 0u64;
    loop {
        n += 1;
        if n % 4096 == 0 {
            if let Some(b) = &bar {
                b.update(reader.input_progress().0);
            }
        }
        match reader.next_packet() {
            Ok(Some(pkt)) => {
                if let Some(why) = pipe.push(&pkt, &mut events) {
                    warn(format!("frame {}: not decodable: {why}", pkt.frame));
                }
            }
            Ok(None) => break,
            Err(e) => {
                eprintln!("lnetcap: {name}: {e}");
                complete = false;
                break;
            }
        }
        for w in reader.drain_warnings() {
            pipe.count_unreadable_frame();
            warn(w.to_string());
        }
        if !events.is_empty() {
            on_events(&pipe, &mut events)?;
        }
    }
    for w in reader.drain_warnings() {
        pipe.count_unreadable_frame();
        warn(w.to_string());
    }
    if let Some(b) = bar {
        b.finish();
    }
    pipe.finish(&mut events);
    on_events(&pipe, &mut events)?;
    if warned > MAX_WARNINGS {
        eprintln!(
            "lnetcap: {name}: {} more warnings not shown (see the summary's undecodable counts)",
            warned - MAX_WARNINGS
        );
    }
    let summary = pipe.summary();
    if summary.connections.is_empty() {
        eprintln!(
            "lnetcap: {name}: no LNet traffic found ({} frames; ports {:?}{})",
            summary.frames.frames,
            cfg.ports,
            if cfg.detect { " and detection by content" } else { "" }
        );
    }
    Ok(Some(FileRun { pipe, complete }))
}
