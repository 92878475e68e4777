//! Reading captures for the subcommands: one pass over a file's packets through the
//! decode pipeline, with bad input reported on stderr (file, frame, offset) and counted.

use std::path::Path;

use lnetcap_capture::CaptureReader;
use lnetcap_lnet::pipeline::{DecodeConfig, Pipeline};
use lnetcap_lnet::LnetEvent;

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
    loop {
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
