//! The retransmission history by reference, end to end: read from a plain capture file,
//! the history keeps where each segment's bytes lie in it and reads them back when a
//! retransmission must be compared; from compressed input it copies them. Both find the
//! same overlap conflict (a retransmitted copy that differs from the first in one byte,
//! built into the capture by hand), on one thread and on two. A file touched or appended
//! to while the run reads it is read back as before; one rewritten is not: the comparison
//! is said to be impossible (`history_unreadable`), never a conflict or its absence.

mod common;

use std::io::Write;
use std::process::Command;

use common::{hello, lnet, scratch, tcp_packet};
use lnetcap_analysis::{NoSink, Quiet};
use lnetcap_capture::CaptureReader;
use lnetcap_lnet::pipeline::DecodeConfig;
use lnetcap_lnet::wire::consts::LNET_PUT;
use lnetcap_lnet::wire::{Connreq, LnetDetail, Wmd};
use lnetcap_synth::pcapw::{CaptureWriter, Container, Link};
use serde_json::Value;

const C: &str = "10.0.0.2@tcp";
const S: &str = "10.0.0.1@tcp";
const T0: i64 = 1_700_000_000_000_000_000;
const MS: i64 = 1_000_000;

/// A connection whose client sends one 3,000-byte LNet PUT in three segments, then
/// sends the second again with its byte 500 changed, and the third again unchanged.
/// Returns the capture and the stream bytes the client's second and third segments hold.
fn capture() -> (Vec<u8>, u64) {
    let mut w = CaptureWriter::new(Container::PcapNs, Link::Ethernet, 65535);
    w.packet(T0, &tcp_packet(0, 99, 0, 0x02, 1000, &[]));
    w.packet(T0 + MS, &tcp_packet(1, 499, 100, 0x12, 1000, &[]));
    let mut first = Connreq::emit(&common::nid(S));
    first.extend(hello(C, S));
    w.packet(T0 + 2 * MS, &tcp_packet(0, 100, 500, 0x18, 1000, &first));
    let reply = hello(S, C);
    w.packet(T0 + 3 * MS, &tcp_packet(1, 500, 100 + first.len() as u32, 0x18, 1000, &reply));
    let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7 + 3) as u8).collect();
    let detail = LnetDetail::Put { ack_wmd: Wmd::NONE, match_bits: 7, hdr_data: 0, ptl_index: 6, offset: 0 };
    let mut msg = Vec::new();
    lnet(&mut msg, C, S, LNET_PUT, detail, &payload, 0);
    let base = 100 + first.len() as u32;
    let cuts = [0, 1000, 2000, msg.len()];
    let ack = 500 + reply.len() as u32;
    for (k, w2) in cuts.windows(2).enumerate() {
        let seg = &msg[w2[0]..w2[1]];
        w.packet(T0 + (4 + k as i64) * MS, &tcp_packet(0, base + w2[0] as u32, ack, 0x18, 1000, seg));
    }
    let mut changed = msg[1000..2000].to_vec();
    changed[500] ^= 0x5a;
    w.packet(T0 + 8 * MS, &tcp_packet(0, base + 1000, ack, 0x18, 1000, &changed));
    w.packet(T0 + 9 * MS, &tcp_packet(0, base + 2000, ack, 0x18, 1000, &msg[2000..]));
    (w.finish(), (msg.len() - 1000) as u64)
}

/// The client direction's accounting in a `decode --format jsonl` summary.
fn client_dir(summary: &Value) -> Value {
    let conns = summary["summary"]["connections"].as_array().expect("connections");
    assert_eq!(conns.len(), 1, "{summary}");
    let dirs = conns[0]["dirs"].as_array().expect("dirs");
    dirs.iter().find(|d| d["tcp"].as_str().is_some_and(|t| t.starts_with("10.0.0.2:1023"))).expect("client").clone()
}

fn decode_cli(path: &std::path::Path, threads: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .args(["decode", "--format", "jsonl", "--threads", threads])
        .arg(path)
        .output()
        .expect("lnetcap runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    serde_json::from_str(text.lines().last().expect("a summary line")).expect("json")
}

#[test]
fn a_changed_retransmitted_byte_is_found_read_back_or_copied_on_one_thread_or_two() {
    let (bytes, retransmitted) = capture();
    let dir = scratch("history-by-reference");
    let plain = dir.join("conflict.pcap");
    std::fs::write(&plain, &bytes).unwrap();
    let gz = dir.join("conflict.pcap.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&bytes).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let want = client_dir(&decode_cli(&plain, "1"));
    assert_eq!(want["anomalies"], serde_json::json!({ "overlap_conflict": 1 }), "{want}");
    assert_eq!(want["bytes_retransmitted"], retransmitted, "{want}");
    for (path, threads) in [(&plain, "2"), (&gz, "1"), (&gz, "2")] {
        assert_eq!(client_dir(&decode_cli(path, threads)), want, "{} on {threads} thread(s)", path.display());
    }
}

/// How another process changes the capture once the run has opened it.
#[derive(Debug, Clone, Copy)]
enum Change {
    /// A new modification time, the same bytes.
    Touch,
    /// A record appended (a writer still running): an ARP frame, other traffic.
    Append,
    /// Its first bytes rewritten in place (the pcap header's `sigfigs`, which readers
    /// ignore; a rotating writer rewrites the whole file from its start). The capture is
    /// longer than the 4 KiB that stand for a file's bytes.
    Rewrite,
}

impl Change {
    fn apply(self, path: &std::path::Path) {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        match self {
            Change::Touch => {
                f.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000)).unwrap()
            }
            Change::Append => {
                let len = f.metadata().unwrap().len();
                let mut arp = vec![0xffu8; 6];
                arp.extend([2, 0, 0, 0, 0, 1, 0x08, 0x06]);
                arp.resize(42, 0);
                // The next piece of the capture as its writer streams it: the file header
                // is already in the file.
                let mut w = CaptureWriter::new(Container::PcapNs, Link::Ethernet, 65535);
                w.take();
                w.packet(T0 + 10 * MS, &arp);
                f.write_all_at(&w.take(), len).unwrap();
            }
            Change::Rewrite => {
                f.write_all_at(&1u32.to_le_bytes(), 12).unwrap();
                // As a writer's clock moves (not left to the file system's tick).
                f.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(2_000)).unwrap();
            }
        }
    }
}

/// The client's accounting from `decode_messages` on `threads` threads, the capture at
/// `path` changed as `change` says once its reader has opened it.
fn decode_changed(path: &std::path::Path, threads: usize, change: Change) -> Value {
    let mut reader = CaptureReader::open_unmapped(path).unwrap();
    change.apply(path);
    let name = path.display().to_string();
    let d = lnetcap_analysis::decode_messages(
        &name,
        &mut reader,
        DecodeConfig::default(),
        &mut Quiet,
        threads,
        &mut NoSink,
    )
    .unwrap();
    let summary = serde_json::json!({ "summary": serde_json::to_value(d.pipe.summary()).unwrap() });
    client_dir(&summary)
}

#[test]
fn a_file_changed_while_it_is_read_is_read_back_only_if_its_bytes_are_still_there() {
    let (bytes, retransmitted) = capture();
    let dir = scratch("history-by-reference-changed");
    let path = dir.join("changed.pcap");
    std::fs::write(&path, &bytes).unwrap();
    assert!(bytes.len() > 4096, "{}", bytes.len());
    let want = client_dir(&decode_cli(&path, "1"));
    assert_eq!(want["anomalies"], serde_json::json!({ "overlap_conflict": 1 }), "{want}");
    for threads in [1, 2] {
        for change in [Change::Touch, Change::Append] {
            std::fs::write(&path, &bytes).unwrap();
            // The bytes the run read are still where they were: compared as before.
            assert_eq!(decode_changed(&path, threads, change), want, "{change:?}, {threads} thread(s)");
        }
        std::fs::write(&path, &bytes).unwrap();
        let client = decode_changed(&path, threads, Change::Rewrite);
        // Rewritten: both retransmissions' bytes not compared, none said to conflict or
        // to agree.
        assert_eq!(
            client["anomalies"],
            serde_json::json!({ "history_unreadable": 2 }),
            "{threads} thread(s): {client}"
        );
        assert_eq!(client["bytes_retransmitted"], retransmitted, "{client}");
    }
}
