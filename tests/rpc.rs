//! RPC reconstruction against ground truth.
//!
//! Synthetic fixtures: every RPC whose request or reply was captured is found, nothing is
//! invented, every time lnetcap reports equals the generator's (capture timestamps of the
//! request's first byte, the first bulk byte, the last bulk data byte, the reply's first and
//! last byte), and RPCs whose every message was captured are reproduced exactly.
//!
//! Lab captures (real kernel TCP): every RPC of truth.jsonl is found (count equal), the
//! server-side times agree with the truth, throughput over the truth's steady window is
//! within 1 % of the measured one, and on lst_read_rtt50_c32_pc8 the inferred credit limit
//! is 8 while RPCs in flight reach 32.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn analyze(cap: &Path) -> (Vec<Value>, Value) {
    // One directory per call: tests run in parallel and lab captures share a file name.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = common::scratch_shared("rpc").join(format!(
        "{}-{}",
        CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        cap.file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (rpcs, json) = (dir.join("rpcs.jsonl"), dir.join("report.json"));
    let o = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .args([
            "analyze",
            "-q",
            "--rpcs",
            rpcs.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            cap.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (common::read_jsonl(&rpcs), report)
}

const TIMES: &[&str] = &["t_start_ns", "t_bulk_start_ns", "t_bulk_end_ns", "t_reply_ns", "t_end_ns"];

#[test]
fn synthetic_rpcs_match_truth() {
    let dir = common::root().join("fixtures/synth");
    let mut lines = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let Some(stem) = name.strip_suffix(".truth.jsonl") else { continue };
        let cap = ["pcap", "pcap.gz", "pcap.zst"]
            .iter()
            .map(|x| dir.join(format!("{stem}.{x}")))
            .find(|c| c.exists())
            .unwrap();
        let truth = common::read_jsonl(&p);
        let (decoded, _) = common::decode(&cap);
        // Messages decoded with their whole header, or inferred with the fields that name
        // their RPC.
        let decoded_at: std::collections::HashSet<(String, u64)> = decoded
            .iter()
            .filter(|d| d["header_complete"] == true || (d.get("inferred").is_some() && d.get("match_bits").is_some()))
            .map(|d| (d["tcp"].as_str().unwrap().to_string(), d["stream_offset"].as_u64().unwrap()))
            .collect();
        // Which truth messages were decoded (or inferred), per RPC and role.
        let mut seen: HashMap<u64, Vec<(String, bool)>> = HashMap::new();
        for t in truth.iter().filter(|t| t["type"] == "message" && t.get("rpc").is_some()) {
            let ok = t.get("stream_offset").is_some()
                && decoded_at.contains(&(t["tcp"].as_str().unwrap().to_string(), t["stream_offset"].as_u64().unwrap()));
            seen.entry(t["rpc"].as_u64().unwrap()).or_default().push((t["role"].as_str().unwrap().to_string(), ok));
        }
        let (rpcs, _) = analyze(&cap);
        let mut ours: HashMap<(String, String, String), Vec<&Value>> = HashMap::new();
        for r in &rpcs {
            ours.entry((
                r["client_nid"].as_str().unwrap().into(),
                r["server_nid"].as_str().unwrap().into(),
                r["xid"].as_str().unwrap_or("").into(),
            ))
            .or_default()
            .push(r);
        }
        let (mut visible, mut found, mut exact) = (0, 0, 0);
        let mut matched = 0usize;
        for t in truth.iter().filter(|t| t["type"] == "rpc") {
            let roles = seen.get(&t["id"].as_u64().unwrap()).cloned().unwrap_or_default();
            let has = |role: &str| {
                roles.iter().any(|(r, ok)| {
                    (r == role || (role == "request" && r == "ping_get") || (role == "reply" && r == "ping_reply"))
                        && *ok
                })
            };
            let all = !roles.is_empty() && roles.iter().all(|(_, ok)| *ok);
            let key = (
                t["client_nid"].as_str().unwrap().to_string(),
                t["server_nid"].as_str().unwrap().to_string(),
                t["xid"].as_str().unwrap().to_string(),
            );
            let Some(o) = ours.get(&key).and_then(|v| v.first()) else {
                assert!(
                    !has("request") && !has("reply"),
                    "{stem}: RPC {} ({}) has a captured request or reply but was not found",
                    t["id"],
                    t["opc_name"]
                );
                continue;
            };
            matched += 1;
            if has("request") || has("reply") {
                visible += 1;
            }
            found += 1;
            // Every time lnetcap reports is the truth; when some bulk messages were not
            // captured, the bulk times it reports lie within the true bulk phase.
            let bulk_partial = o["missing"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m == "bulk_header" || m == "bulk" || m == "bulk_unknown");
            for f in TIMES {
                if o[f].is_null() {
                    continue;
                }
                let (v, want) = (o[*f].as_i64().unwrap(), t[*f].as_i64().unwrap());
                match *f {
                    "t_bulk_start_ns" if bulk_partial => {
                        assert!(v >= want, "{stem}: RPC {} {f} {v} before the truth {want}", t["id"])
                    }
                    "t_bulk_end_ns" if bulk_partial => {
                        assert!(v <= want, "{stem}: RPC {} {f} {v} after the truth {want}", t["id"])
                    }
                    _ => assert_eq!(v, want, "{stem}: RPC {} {f}", t["id"]),
                }
            }
            if !o["opc_name"].is_null() {
                assert_eq!(o["opc_name"], t["opc_name"], "{stem}: RPC {}", t["id"]);
            }
            if all && t["completed"] == true {
                exact += 1;
                assert_eq!(o["partial"], false, "{stem}: RPC {} fully captured but partial: {o}", t["id"]);
                for f in TIMES {
                    assert_eq!(o[*f], t[*f], "{stem}: RPC {} {f}", t["id"]);
                }
                if t["kind"] != "lnet_ping" {
                    assert_eq!(o["bytes"], t["bytes"], "{stem}: RPC {} bytes", t["id"]);
                }
            }
        }
        assert_eq!(matched, rpcs.len(), "{stem}: lnetcap reported RPCs the truth does not have");
        lines.push(format!("{stem}: {found} RPCs found ({visible} with request or reply captured), {exact} fully captured and exact, of {}", truth.iter().filter(|t| t["type"] == "rpc").count()));
    }
    lines.sort();
    eprintln!("{}", lines.join("\n"));
}

fn ns(v: &Value) -> i64 {
    (v.as_f64().unwrap() * 1e9).round() as i64
}

#[test]
fn lab_rpcs_match_truth() {
    for lab in ["lst_write_rtt20_c8_pc8", "lst_read_rtt50_c32_pc8", "ptlrpc_read_rtt20_c8_pc8"] {
        let dir = common::lab_dir().join(lab);
        let truth = common::read_jsonl(&dir.join("truth.jsonl.zst"));
        let summary: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
        let (rpcs, report) = analyze(&dir.join("trace.pcap.zst"));
        assert_eq!(rpcs.len(), truth.len(), "{lab}: RPC count");
        let by_xid: HashMap<&str, &Value> = rpcs.iter().map(|r| (r["xid"].as_str().unwrap(), r)).collect();
        let mut worst_sent = 0i64;
        let mut late = 0;
        for t in &truth {
            let r = by_xid
                .get(t["xid_hex"].as_str().unwrap())
                .unwrap_or_else(|| panic!("{lab}: truth RPC {} not found", t["xid_hex"]));
            assert_eq!(r["partial"], false, "{lab}: {r}");
            assert_eq!(r["bytes"].as_u64(), t["size"].as_u64(), "{lab}: bytes of {}", t["xid_hex"]);
            let ss = &t["server_side"];
            // Server sends: the capture (on the server) sees the first byte when the
            // server writes it, unless TCP holds it back (then within one RTT).
            let rtt = (summary["config"]["rtt_ms"].as_f64().unwrap() * 1e6) as i64;
            let mut sent = vec![("t_reply_ns", ns(&ss["t_reply_wire_start"]))];
            match t["bulk_lnet"].as_str().unwrap() {
                "GET+REPLY" => sent.push(("t_bulk_start_ns", ns(&ss["t_get_wire_start"]))),
                _ => sent.push(("t_bulk_start_ns", ns(&ss["t_bulk_wire_start"]))),
            }
            for (f, want) in sent {
                let dt = r[f].as_i64().unwrap() - want;
                // Data written into a full socket send queue waits until the queue ahead of
                // it drains (up to a congestion window, a few RTTs at most).
                assert!((-2_000..=3 * rtt).contains(&dt), "{lab}: {} {f} off by {dt} ns", t["xid_hex"]);
                if dt <= 100_000 {
                    worst_sent = worst_sent.max(dt.abs());
                } else {
                    late += 1;
                }
            }
            // Server receives: captured before the server read the last byte.
            let mut recv = vec![("t_req_end_ns", ns(&ss["t_req_rcvd"]))];
            if t["bulk_lnet"] == "GET+REPLY" {
                recv.push(("t_bulk_end_ns", ns(&ss["t_bulk_rcvd"])));
            }
            for (f, want) in recv {
                let dt = want - r[f].as_i64().unwrap();
                assert!(
                    (-2_000..=5_000_000).contains(&dt),
                    "{lab}: {} {f}: server read it {dt} ns after capture",
                    t["xid_hex"]
                );
            }
        }
        assert!(late * 10 <= truth.len() * 2, "{lab}: {late} sends far from the truth");
        // Throughput over the truth's steady window, counting RPCs by the client's completion
        // (the capture-point end plus the one-way delay to the client).
        let w = &summary["measured"]["steady_window"];
        let (a, b) = (ns(&w[0]), ns(&w[1]));
        let bytes: u64 = rpcs
            .iter()
            .filter(|r| {
                let owd =
                    ((r["client_latency_us"].as_f64().unwrap() - r["latency_us"].as_f64().unwrap()) * 500.0) as i64;
                let end = r["t_end_ns"].as_i64().unwrap() + owd;
                end >= a && end < b
            })
            .map(|r| r["bytes"].as_u64().unwrap())
            .sum();
        let ours = bytes as f64 / ((b - a) as f64 / 1e9) / 1e6;
        let measured = summary["measured"]["throughput_MBps"].as_f64().unwrap();
        assert!((ours - measured).abs() / measured <= 0.01, "{lab}: {ours:.3} MB/s vs measured {measured}");
        let peer = &report["peers"][0];
        assert_eq!(report["peers"].as_array().unwrap().len(), 1);
        assert_eq!(peer["rpcs"].as_u64().unwrap() as usize, truth.len());
        assert_eq!(peer["rpcs_partial"], 0);
        let conc = summary["config"]["concurrency"].as_i64().unwrap();
        assert_eq!(peer["rpcs_in_flight"]["max"].as_i64(), Some(conc), "{lab}: RPCs in flight reach the concurrency");
        let credits = &peer["messages_in_flight"]["inferred_peer_credits"];
        if lab == "lst_read_rtt50_c32_pc8" {
            assert_eq!(credits.as_i64(), Some(8), "{lab}: {}", peer["messages_in_flight"]);
        } else {
            assert!(credits.is_null(), "{lab}: credits do not bind: {}", peer["messages_in_flight"]);
        }
        eprintln!(
            "{lab}: {} RPCs, server sends within {} µs ({late} held back by TCP), throughput {ours:.1} MB/s vs {measured} measured, RPCs in flight max {}, credits {}",
            rpcs.len(),
            worst_sent / 1000,
            peer["rpcs_in_flight"]["max"],
            credits
        );
    }
}
