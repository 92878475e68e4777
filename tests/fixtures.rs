//! Ground truth: every synthetic fixture decodes to exactly the messages its truth file
//! lists (written by the generator from its own state, not by decoding), field by field;
//! the messages that are not decoded are exactly the ones whose header the capture lost,
//! and their bytes are exactly the bytes the decoder reports as skipped.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde_json::Value;

/// Truth keys that describe the generator's view, not decoded fields.
const TRUTH_ONLY: &[&str] =
    &["type", "captured", "header_captured", "role", "rpc", "before_capture", "bytes_after_capture_start"];
/// Fields a decoder can know from a header whose per-type union was not captured.
const COMMON_FIELDS: &[&str] = &[
    "frame",
    "frame_last",
    "ts_ns",
    "ts_last_ns",
    "tcp",
    "kind",
    "stream_offset",
    "wire_len",
    "payload_length",
    "src_nid",
    "dst_nid",
    "proto",
];

pub(crate) fn fixtures() -> Vec<(String, PathBuf, PathBuf)> {
    let dir = common::root().join("fixtures/synth");
    let mut v = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(".truth.jsonl") {
            let cap = ["pcap", "pcap.gz", "pcap.zst"]
                .iter()
                .map(|x| dir.join(format!("{stem}.{x}")))
                .find(|c| c.exists())
                .expect("capture beside truth");
            v.push((stem.to_string(), cap, p));
        }
    }
    v.sort();
    assert!(v.len() >= 12, "expected the synthetic fixtures, found {}", v.len());
    v
}

fn key(v: &Value) -> (String, u64) {
    (v["tcp"].as_str().unwrap().to_string(), v["stream_offset"].as_u64().unwrap())
}

#[test]
fn every_fixture_matches_its_truth() {
    let mut report = Vec::new();
    for (name, cap, truth) in fixtures() {
        let (decoded, summary) = common::decode(&cap);
        let truth: Vec<Value> = common::read_jsonl(&truth);
        let tmsgs: Vec<&Value> =
            truth.iter().filter(|t| t["type"] == "message" && t.get("stream_offset").is_some()).collect();
        assert!(!tmsgs.is_empty(), "{name}: truth has no messages");
        let dmap: HashMap<(String, u64), &Value> = decoded.iter().map(|d| (key(d), d)).collect();
        assert_eq!(dmap.len(), decoded.len(), "{name}: two decoded messages at the same stream offset");
        let tmap: HashMap<(String, u64), &Value> = tmsgs.iter().map(|t| (key(t), *t)).collect();
        // No message is invented.
        for d in &decoded {
            assert!(tmap.contains_key(&key(d)), "{name}: decoded a message the truth does not have: {d}");
        }
        let mut missing_bytes: BTreeMap<String, u64> = BTreeMap::new();
        // A message cut by the start of the capture: its captured tail is skipped.
        for t in truth.iter().filter(|t| t.get("bytes_after_capture_start").is_some()) {
            *missing_bytes.entry(t["tcp"].as_str().unwrap().to_string()).or_default() +=
                t["bytes_after_capture_start"].as_u64().unwrap();
        }
        let mut found = 0;
        let mut inferred = 0;
        for (k, t) in &tmap {
            let Some(d) = dmap.get(k) else {
                // Only a message whose header was not (wholly) captured may be missing.
                assert_eq!(t["header_captured"], false, "{name}: message with a captured header not decoded: {t}");
                *missing_bytes.entry(k.0.clone()).or_default() += t["wire_len"].as_u64().unwrap();
                continue;
            };
            found += 1;
            if d.get("inferred") == Some(&Value::Bool(true)) {
                // An inferred message: every field lnetcap filled in must be the truth.
                inferred += 1;
                assert_eq!(t["header_captured"], false, "{name}: inferred a message whose header was captured: {t}");
                for (f, v) in d.as_object().unwrap() {
                    if ["schema_version", "conn", "header_complete", "payload_captured", "inferred"]
                        .contains(&f.as_str())
                    {
                        continue;
                    }
                    assert_eq!(
                        Some(v),
                        t.get(f),
                        "{name}: inferred field {f} differs at {k:?}: decoded {d}, truth {t}"
                    );
                }
                continue;
            }
            let complete = t["header_captured"] == true;
            assert_eq!(d["header_complete"], Value::Bool(complete), "{name}: header_complete differs for {t}");
            for (f, v) in t.as_object().unwrap() {
                if TRUTH_ONLY.contains(&f.as_str()) || (!complete && !COMMON_FIELDS.contains(&f.as_str())) {
                    continue;
                }
                assert_eq!(&d[f], v, "{name}: field {f} differs at {k:?}: decoded {d}");
            }
        }
        // The bytes of the messages not decoded are the bytes the decoder says it skipped.
        for c in &summary.connections {
            for d in &c.dirs {
                let m = missing_bytes.get(&d.tcp).copied().unwrap_or(0);
                assert_eq!(d.bytes_skipped + d.bytes_in_partial_message, m, "{name}: {} skipped bytes vs truth", d.tcp);
                assert_eq!(
                    d.stream_bytes,
                    d.bytes_in_messages + d.bytes_inferred + d.bytes_skipped + d.bytes_in_partial_message,
                    "{name}: {} stream bytes not all accounted: {d:?}",
                    d.tcp
                );
            }
        }
        assert_eq!(summary.frames.total(), summary.frames.frames, "{name}: frame categories do not add up");
        report.push(format!("{name}: {found}/{} messages ({inferred} inferred)", tmap.len()));
    }
    eprintln!("{}", report.join("\n"));
}

#[test]
fn full_payload_fixtures_decode_every_message() {
    for name in ["lst-write", "lst-read", "ost-small", "metadata", "hello-versions", "lossy", "ipv6"] {
        let (_, cap, truth) = fixtures().into_iter().find(|f| f.0 == name).unwrap();
        let (decoded, summary) = common::decode(&cap);
        let n = common::read_jsonl(&truth).iter().filter(|t| t["type"] == "message").count();
        assert_eq!(decoded.len(), n, "{name}");
        for c in &summary.connections {
            for d in &c.dirs {
                assert_eq!(d.desyncs, 0, "{name} {}", d.tcp);
            }
        }
    }
}

#[test]
fn fixtures_are_what_the_generator_writes() {
    for (name, cap, truth) in fixtures() {
        let cfg = lnetcap_synth::scenario(&name).unwrap_or_else(|| panic!("no scenario {name}"));
        let out = lnetcap_synth::generate(&name, cfg, 1);
        let raw = std::fs::read(&cap).unwrap();
        let committed = if cap.extension().is_some_and(|e| e == "gz") {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&raw[..]), &mut v).unwrap();
            v
        } else if cap.extension().is_some_and(|e| e == "zst") {
            zstd::stream::decode_all(&raw[..]).unwrap()
        } else {
            raw
        };
        assert!(
            committed == out.capture,
            "{name}: committed capture differs from the generator's output; run fixtures/synth/regen.sh and review"
        );
        let lines: Vec<Value> = common::read_jsonl(&truth);
        assert_eq!(lines, out.truth, "{name}: truth file differs from the generator's; run fixtures/synth/regen.sh");
    }
}
