//! The command line: help, formats, exit codes, and bad input (truncated files, random
//! bytes, garbage payloads, captures without LNet, other containers) — always a clear
//! message naming the file and the frame, never a panic, and accounting that adds up.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn lnetcap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lnetcap")).args(args).output().unwrap()
}

fn fixture(name: &str) -> PathBuf {
    common::root().join("fixtures/synth").join(name)
}

fn tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = common::scratch_shared("cli");
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Parses jsonl output; returns (messages, summary).
fn jsonl(o: &Output) -> (Vec<Value>, Value) {
    let lines: Vec<Value> =
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let (s, m): (Vec<Value>, Vec<Value>) = lines.into_iter().partition(|v| v.get("summary").is_some());
    assert_eq!(s.len(), 1, "one summary line");
    (m, s[0]["summary"].clone())
}

fn check_accounting(s: &Value) {
    let f = &s["frames"];
    let und: u64 = f["undecodable"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    let sum = f["lnet_data"].as_u64().unwrap()
        + f["tcp_control"].as_u64().unwrap()
        + f["other_traffic"].as_u64().unwrap()
        + und;
    assert_eq!(sum, f["frames"].as_u64().unwrap(), "frame categories add up: {f}");
    for c in s["connections"].as_array().unwrap() {
        for d in c["dirs"].as_array().unwrap() {
            let g = |k: &str| d[k].as_u64().unwrap();
            assert_eq!(g("stream_bytes"), g("bytes_captured") + g("bytes_snaplen") + g("bytes_lost"), "{d}");
            assert_eq!(
                g("stream_bytes"),
                g("bytes_in_messages") + g("bytes_inferred") + g("bytes_skipped") + g("bytes_in_partial_message"),
                "{d}"
            );
        }
    }
}

#[test]
fn help_and_usage_errors() {
    let o = lnetcap(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("decode") && out.contains("synth") && out.contains("Exit codes"), "{out}");
    assert_eq!(lnetcap(&["decode"]).status.code(), Some(2));
    assert_eq!(lnetcap(&["decode", "--format", "xml", "x"]).status.code(), Some(2));
    assert_eq!(lnetcap(&["decode", "--threads", "0", "x"]).status.code(), Some(2));
    assert_eq!(lnetcap(&["frobnicate"]).status.code(), Some(2));
    let o = lnetcap(&["synth", "--help"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("lst-write"));
}

#[test]
fn missing_file_names_it() {
    let o = lnetcap(&["decode", "/nonexistent/trace.pcap"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/nonexistent/trace.pcap"), "{}", stderr(&o));
}

#[test]
fn jsonl_has_required_keys_and_hex_strings() {
    let o = lnetcap(&["decode", "--format", "jsonl", fixture("metadata.pcap").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (msgs, summary) = jsonl(&o);
    check_accounting(&summary);
    for m in &msgs {
        for k in ["schema_version", "frame", "ts_ns", "kind", "tcp"] {
            assert!(m.get(k).is_some(), "{k} missing in {m}");
        }
        if ["PUT", "GET", "ACK"].contains(&m["kind"].as_str().unwrap()) {
            assert!(m["match_bits"].as_str().unwrap().starts_with("0x"));
            assert!(m["src_nid"].as_str().unwrap().ends_with("@tcp"));
            assert!(m["payload_length"].is_u64());
        }
        if m["kind"] == "HELLO" {
            assert!(m["hello_version"].is_u64() && m["conn_type"].is_string());
        }
    }
    assert!(msgs.iter().any(|m| m["opc_name"] == "LDLM_ENQUEUE" && m["opc"] == 101));
    assert!(msgs.iter().any(|m| m["match_bits"] == "0x8000000000000000"), "ping match bits as a hex string");
}

#[test]
fn truncated_file_reports_offset_and_frame_and_keeps_what_was_read() {
    let full = std::fs::read(fixture("metadata.pcap")).unwrap();
    let cut = &full[..full.len() / 2 + 7];
    let p = tmp("truncated.pcap", cut);
    let o = lnetcap(&["decode", "--format", "jsonl", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("truncated.pcap") && e.contains("truncated at offset") && e.contains("frame"), "{e}");
    let (msgs, summary) = jsonl(&o);
    assert!(msgs.len() > 10, "messages before the cut are still decoded");
    check_accounting(&summary);
}

#[test]
fn random_bytes_are_not_a_capture() {
    let mut x = 0x1234_5678u32;
    let bytes: Vec<u8> = (0..5000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let p = tmp("random.bin", &bytes);
    let o = lnetcap(&["decode", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("random.bin: not a pcap or pcapng file"), "{}", stderr(&o));
}

/// Rewrites every TCP payload byte of a pcap (Ethernet, IPv4) with pseudo-random garbage.
fn garble_payloads(pcap: &[u8]) -> Vec<u8> {
    let mut out = pcap.to_vec();
    let mut pos = 24;
    let mut x = 99u32;
    while pos + 16 <= out.len() {
        let caplen = u32::from_le_bytes(out[pos + 8..pos + 12].try_into().unwrap()) as usize;
        let rec = pos + 16;
        let ihl = usize::from(out[rec + 14] & 0xf) * 4;
        let doff = usize::from(out[rec + 14 + ihl + 12] >> 4) * 4;
        for b in &mut out[rec + 14 + ihl + doff..rec + caplen] {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        pos = rec + caplen;
    }
    out
}

#[test]
fn garbage_payloads_never_panic_and_add_up() {
    let g = garble_payloads(&std::fs::read(fixture("lst-write.pcap")).unwrap());
    let p = tmp("garbage.pcap", &g);
    let o = lnetcap(&["decode", "--format", "jsonl", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (_, summary) = jsonl(&o);
    check_accounting(&summary);
    let desyncs: u64 = summary["connections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["dirs"].as_array().unwrap().iter())
        .map(|d| d["desyncs"].as_u64().unwrap())
        .sum();
    assert!(desyncs > 0, "garbage is reported as lost framing");
}

#[test]
fn non_lnet_capture_says_so() {
    // Ethernet/IPv4/TCP port 80 traffic and an ARP frame, built by hand.
    let mut w = common::http_capture(20);
    let mut arp = vec![0xffu8; 12];
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    w.packet(99_999, &arp);
    let p = tmp("http.pcap", &w.finish());
    let o = lnetcap(&["decode", "--format", "jsonl", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("no LNet traffic found"), "{}", stderr(&o));
    let (msgs, summary) = jsonl(&o);
    assert!(msgs.is_empty());
    assert_eq!(summary["frames"]["other_traffic"], 21);
    check_accounting(&summary);
}

#[test]
fn malformed_frames_are_named_and_counted() {
    // Corrupt the IPv4 version nibble of frame 3 and cut frame 5's TCP header short.
    let mut b = std::fs::read(fixture("metadata.pcap")).unwrap();
    let mut pos = 24;
    let mut frame = 0;
    while pos + 16 <= b.len() {
        frame += 1;
        let caplen = u32::from_le_bytes(b[pos + 8..pos + 12].try_into().unwrap()) as usize;
        if frame == 3 {
            b[pos + 16 + 14] = 0x35;
        }
        pos += 16 + caplen;
    }
    let p = tmp("malformed.pcap", &b);
    let o = lnetcap(&["decode", "--format", "jsonl", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let e = stderr(&o);
    assert!(e.contains("malformed.pcap: frame 3: not decodable: ipv4 header at offset 14"), "{e}");
    let (_, summary) = jsonl(&o);
    assert_eq!(summary["frames"]["undecodable"]["malformed_ipv4"], 1);
    check_accounting(&summary);
}

#[test]
fn compressed_stdin_and_other_containers_decode_the_same() {
    let reference = lnetcap(&["decode", "--format", "jsonl", fixture("wrap.pcap.gz").to_str().unwrap()]);
    assert_eq!(reference.status.code(), Some(0));
    // stdin, gzip recognised by content
    let mut child = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .args(["decode", "--format", "jsonl", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let gz = std::fs::read(fixture("wrap.pcap.gz")).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let t = std::thread::spawn(move || stdin.write_all(&gz));
    let out = child.wait_with_output().unwrap();
    t.join().unwrap().unwrap();
    assert_eq!(out.stdout, reference.stdout);
    // A big-endian pcap of the same packets.
    let le = {
        let mut v = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&std::fs::read(fixture("wrap.pcap.gz")).unwrap()[..]),
            &mut v,
        )
        .unwrap();
        v
    };
    let be = to_big_endian(&le);
    let p = tmp("be.pcap", &be);
    let o = lnetcap(&["decode", "--format", "jsonl", p.to_str().unwrap()]);
    assert_eq!(o.stdout, reference.stdout, "big-endian pcap decodes the same");
    // The same packets as pcapng with nanosecond resolution.
    let ng = to_pcapng(&le);
    let p = tmp("ng.pcapng", &ng);
    let o = lnetcap(&["decode", "--format", "jsonl", p.to_str().unwrap()]);
    assert_eq!(o.stdout, reference.stdout, "pcapng decodes the same");
}

/// Rewrites a little-endian ns pcap as big-endian.
fn to_big_endian(le: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(le.len());
    let sw32 = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap()).to_be_bytes();
    let sw16 = |b: &[u8]| u16::from_le_bytes(b.try_into().unwrap()).to_be_bytes();
    out.extend_from_slice(&sw32(&le[0..4]));
    out.extend_from_slice(&sw16(&le[4..6]));
    out.extend_from_slice(&sw16(&le[6..8]));
    for o in [8, 12, 16, 20] {
        out.extend_from_slice(&sw32(&le[o..o + 4]));
    }
    let mut pos = 24;
    while pos + 16 <= le.len() {
        for o in [0, 4, 8, 12] {
            out.extend_from_slice(&sw32(&le[pos + o..pos + o + 4]));
        }
        let caplen = u32::from_le_bytes(le[pos + 8..pos + 12].try_into().unwrap()) as usize;
        out.extend_from_slice(&le[pos + 16..pos + 16 + caplen]);
        pos += 16 + caplen;
    }
    out
}

/// Rewrites a little-endian ns pcap as pcapng with an IDB (if_tsresol 9) and EPBs.
fn to_pcapng(le: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let p32 = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
    p32(&mut out, 0x0a0d_0d0a);
    p32(&mut out, 28);
    p32(&mut out, 0x1a2b_3c4d);
    out.extend_from_slice(&[1, 0, 0, 0]);
    out.extend_from_slice(&(-1i64).to_le_bytes());
    p32(&mut out, 28);
    // Two interfaces: packets name interface 1 (the first is a decoy with µs resolution).
    for tsresol in [6u8, 9] {
        p32(&mut out, 1);
        p32(&mut out, 32);
        let lt = u32::from_le_bytes(le[20..24].try_into().unwrap());
        out.extend_from_slice(&(lt as u16).to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        p32(&mut out, 65535);
        out.extend_from_slice(&[9, 0, 1, 0, tsresol, 0, 0, 0]);
        p32(&mut out, 0);
        p32(&mut out, 32);
    }
    let mut pos = 24;
    while pos + 16 <= le.len() {
        let sec = u64::from(u32::from_le_bytes(le[pos..pos + 4].try_into().unwrap()));
        let ns = u64::from(u32::from_le_bytes(le[pos + 4..pos + 8].try_into().unwrap()));
        let caplen = u32::from_le_bytes(le[pos + 8..pos + 12].try_into().unwrap()) as usize;
        let orig = u32::from_le_bytes(le[pos + 12..pos + 16].try_into().unwrap());
        let t = sec * 1_000_000_000 + ns;
        let pad = (4 - caplen % 4) % 4;
        let total = 32 + caplen + pad;
        for x in [6u32, total as u32, 1, (t >> 32) as u32, t as u32, caplen as u32, orig] {
            p32(&mut out, x);
        }
        out.extend_from_slice(&le[pos + 16..pos + 16 + caplen]);
        out.extend(std::iter::repeat_n(0u8, pad));
        p32(&mut out, total as u32);
        pos += 16 + caplen;
    }
    out
}

#[test]
fn broken_pipe_is_quiet_success() {
    let bin = env!("CARGO_BIN_EXE_lnetcap");
    let f = fixture("multi.pcap.zst");
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!("set -o pipefail; '{bin}' decode '{}' | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}", f.display()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0", "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"));
}

/// `analyze --json -` into a reader that stops early is quiet success too, also when the
/// report is so large that the pipe breaks while serde_json is still writing it (past
/// the two 64 KiB buffers it goes through: serde_json then reports the write error as
/// its own error type, which printed "lnetcap: Broken pipe" and exited 1).
#[test]
fn broken_pipe_under_a_large_json_report_is_quiet_success() {
    let dir = common::scratch("cli-json-pipe");
    let cap = dir.join("clients.pcap");
    let cap_s = cap.to_string_lossy().into_owned();
    let o =
        lnetcap(&["synth", "--scenario", "bench", "--clients", "20", "--rpcs", "1", "--snaplen", "256", "-o", &cap_s]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Far larger than the buffers, or the test would pass without reaching serde_json's
    // error.
    let whole = lnetcap(&["analyze", "-q", "--json", "-", &cap_s]);
    assert!(whole.status.success(), "{}", stderr(&whole));
    assert!(whole.stdout.len() > 4 << 16, "a report of {} bytes", whole.stdout.len());
    let bin = env!("CARGO_BIN_EXE_lnetcap");
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!("'{bin}' analyze -q --json - '{cap_s}' | head -c 100 >/dev/null; echo ${{PIPESTATUS[0]}}"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0", "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

#[test]
fn synth_writes_a_capture_and_truth() {
    let dir = common::scratch("cli-synth");
    let out = dir.join("t.pcap");
    let o = lnetcap(&["synth", "--scenario", "metadata", "--seed", "1", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(fixture("metadata.pcap")).unwrap(), "same seed, same bytes");
    assert!(Path::new(&format!("{}.truth.jsonl", out.display())).exists());
    let o = lnetcap(&["synth", "--scenario", "nope", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("unknown scenario"));
}

#[test]
fn synth_clients_gives_every_client_its_own_address_and_connections() {
    // Past the 254th client the addresses move to 10.1.x.y: 300 clients of the metadata
    // scenario (one server, three typed connections each), against the truth's RPCs.
    let dir = common::scratch("cli-synth-clients");
    let out = dir.join("m300.pcap");
    let o =
        lnetcap(&["synth", "--scenario", "metadata", "--clients", "300", "--rpcs", "2", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let json = dir.join("m300.json");
    let o = lnetcap(&["analyze", "-q", "--json", json.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let peers = r["peers"].as_array().unwrap();
    assert_eq!(r["connections"].as_array().unwrap().len(), 900);
    let clients: std::collections::BTreeSet<&str> = peers.iter().map(|p| p["client_nid"].as_str().unwrap()).collect();
    assert_eq!(clients.len(), 300);
    assert!(
        clients.contains("10.0.1.254@tcp") && clients.contains("10.1.0.1@tcp") && clients.contains("10.1.0.46@tcp")
    );
    let truth = std::fs::read_to_string(format!("{}.truth.jsonl", out.display())).unwrap();
    let rpcs = truth.lines().filter(|l| l.contains(r#""type":"rpc""#)).count() as u64;
    assert_eq!(peers.iter().map(|p| p["rpcs"].as_u64().unwrap()).sum::<u64>(), rpcs);
    assert_eq!(rpcs, 900);
    let o = lnetcap(&["synth", "--scenario", "metadata", "--clients", "4097", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--clients must be between 1 and 4096, got 4097"), "{}", stderr(&o));
}

#[test]
fn other_ports_are_found_by_content_unless_told_not_to() {
    let f = fixture("metadata.pcap");
    let o = lnetcap(&["decode", "--format", "jsonl", "--port", "7", f.to_str().unwrap()]);
    let (msgs, summary) = jsonl(&o);
    let reference = jsonl(&lnetcap(&["decode", "--format", "jsonl", f.to_str().unwrap()])).0;
    assert_eq!(msgs, reference, "detection by content finds every message");
    assert!(summary["connections"].as_array().unwrap().iter().all(|c| c["class"] == "lnet_content"));
    let o = lnetcap(&["decode", "--format", "jsonl", "--port", "7", "--no-detect", f.to_str().unwrap()]);
    let (msgs, summary) = jsonl(&o);
    assert!(msgs.is_empty());
    assert!(stderr(&o).contains("no LNet traffic found"));
    assert_eq!(summary["frames"]["other_traffic"], summary["frames"]["frames"]);
}

#[test]
fn analyze_writes_json_and_rpcs_to_stdout_with_dash() {
    let f = fixture("lst-read.pcap");
    let dir = common::scratch("cli-dash");
    let (json, rpcs) = (dir.join("r.json"), dir.join("r.jsonl"));
    let o = lnetcap(&[
        "analyze",
        "-q",
        "--json",
        json.to_str().unwrap(),
        "--rpcs",
        rpcs.to_str().unwrap(),
        f.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // `--json -`: the report on stdout, exactly the file's, and no terminal summary.
    let o = lnetcap(&["analyze", "--json", "-", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(o.stdout, std::fs::read(&json).unwrap());
    let o = lnetcap(&["analyze", "--rpcs", "-", f.to_str().unwrap()]);
    assert_eq!(o.stdout, std::fs::read(&rpcs).unwrap());
    let o = lnetcap(&["analyze", "--rpcs", "-", "--json", "-", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot both"));
    let _ = std::fs::remove_dir_all(&dir);
}
