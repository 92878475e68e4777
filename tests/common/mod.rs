//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use lnetcap_capture::CaptureReader;
use lnetcap_lnet::pipeline::{DecodeConfig, DecodeSummary, Pipeline};
use lnetcap_lnet::record::MessageRecord;
use lnetcap_lnet::LnetEvent;
use serde_json::Value;

/// Repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shared lab fixtures (../shared/fixtures-lab beside the repository).
pub fn lab_dir() -> PathBuf {
    root().join("../shared/fixtures-lab")
}

/// Decoded records (as JSON values, exactly as `decode --format jsonl` writes them) and the
/// accounting of one capture.
pub fn decode(path: &Path) -> (Vec<Value>, DecodeSummary) {
    let mut reader = CaptureReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut pipe = Pipeline::new(DecodeConfig::default());
    let mut events = Vec::new();
    let mut out = Vec::new();
    let flush = |pipe: &Pipeline, events: &mut Vec<LnetEvent>, out: &mut Vec<Value>| {
        for ev in events.drain(..) {
            if let LnetEvent::Message(m) = ev {
                let tcp = pipe.connection(m.conn).map(|c| c.tuple(m.dir)).unwrap_or_default();
                out.push(serde_json::to_value(MessageRecord::from_message(&m, tcp)).unwrap());
            }
        }
    };
    while let Some(pkt) = reader.next_packet().unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
        pipe.push(&pkt, &mut events);
        flush(&pipe, &mut events, &mut out);
    }
    pipe.finish(&mut events);
    flush(&pipe, &mut events, &mut out);
    (out, pipe.summary())
}

/// Reads a JSON-lines file.
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}
