//! Pairs without bulk data (metadata): the RPC rate against RIF / (RTT + service), the
//! latency per opcode, and nothing negative, infinite or NaN — on nDPI's public Lustre 2.15
//! capture (mount-time MGS traffic, taken mid-stream) and on the synthetic metadata fixture.

mod common;

use std::process::Command;

use serde_json::Value;

fn analyze(path: &str) -> (Value, String) {
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_lnetcap")).args(args).current_dir(common::root()).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    (serde_json::from_str(&run(&["analyze", path, "--json", "-"])).unwrap(), run(&["analyze", path]))
}

fn peer<'a>(r: &'a Value, client: &str) -> &'a Value {
    r["peers"].as_array().unwrap().iter().find(|p| p["client_nid"] == client).expect("peer")
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

/// tshark's frame times are the oracle: MGS_CONNECT 83.489868 → 83.490086 (218 µs),
/// LDLM_ENQUEUE 83.490230 → .490343 and .490625 → .490718 (113, 93 µs),
/// LLOG_ORIGIN_HANDLE_CREATE .490449 → .490546 and .490857 → .490971 (97, 114 µs).
#[test]
fn ndpi_mount_traffic_is_a_serial_rate() {
    let (r, summary) = analyze("fixtures/public/ndpi-lustre.pcapng");
    let p = peer(&r, "192.168.88.118@tcp");
    assert_eq!(p["rpcs"], 5);
    assert_eq!(p["rpcs_partial"], 2, "READ_HEADER and NEXT_BLOCK have no reply in the capture");
    let rif = &p["rpcs_in_flight"];
    assert_eq!(rif["max"], 1, "the client mounts one RPC at a time");
    assert!(rif["mean"].as_f64().unwrap() >= 0.0);
    let rows: Vec<&String> = rif["histogram"].as_object().unwrap().keys().collect();
    assert_eq!(rows, ["1"], "rpc_stats rows start at 1");
    let ops = &p["latency_by_opcode"];
    // The capture point is not known (mid-stream, too few loops): latencies are the capture
    // point's, as tshark's frame times give them.
    for (op, n, mean) in
        [("MGS_CONNECT", 1, 218.0), ("LDLM_ENQUEUE", 2, 103.0), ("LLOG_ORIGIN_HANDLE_CREATE", 2, 105.5)]
    {
        assert_eq!(ops[op]["rpcs"], n, "{op}");
        let got = ops[op]["mean_us"].as_f64().unwrap();
        assert!(close(got, mean, 1.0), "{op}: mean {got} µs, tshark {mean}");
    }
    let rate = &p["rate"];
    assert_eq!(rate["binding"], "rpcs_in_flight");
    // 5 RPCs from the first request (83.489868) to the last complete reply (83.490971):
    // 1103 µs at the capture point, plus the path's floor less the loop to the server.
    let inp = &rate["inputs"];
    let extra = inp["span_s"].as_f64().unwrap() - 1103e-6;
    assert!(extra >= 0.0 && extra <= inp["rtt_s"].as_f64().unwrap() + 1e-9, "span {}", inp["span_s"]);
    let rif_mean = rate["rif_mean"].as_f64().unwrap();
    assert!(rif_mean > 0.0 && rif_mean <= 1.0, "serial RPCs: mean in flight {rif_mean} must be in (0, 1]");
    assert!(rate["efficiency"].as_f64().unwrap() <= 1.05);
    assert!(summary.contains("binding      rpcs_in_flight: one RPC at a time"), "{summary}");
    assert_clean(&summary);
}

/// The synthetic metadata fixture: 4 RPCs in flight (its truth's concurrency; the LNet ping
/// is outside the PtlRPC window), RTT 2 ms against 400 µs of service for most opcodes: the
/// round trip binds.
#[test]
fn synthetic_metadata_is_bound_by_the_round_trip() {
    let truth = common::read_jsonl(&common::root().join("fixtures/synth/metadata.truth.jsonl"));
    let scenario = truth.iter().find(|t| t["type"] == "scenario").unwrap();
    let rpcs: Vec<&Value> = truth.iter().filter(|t| t["type"] == "rpc").collect();
    let (r, summary) = analyze("fixtures/synth/metadata.pcap");
    let p = peer(&r, "10.0.1.1@tcp");
    assert_eq!(p["rpcs"].as_u64().unwrap(), rpcs.len() as u64);
    assert_eq!(p["rpcs_in_flight"]["max"], scenario["concurrency"]);
    let rate = &p["rate"];
    assert_eq!(rate["binding"], "round_trip", "{summary}");
    let rtt = rate["inputs"]["rtt_s"].as_f64().unwrap();
    assert!(close(rtt, scenario["rtt_ns"].as_f64().unwrap() / 1e9, 20e-6), "RTT {rtt}");
    // Per opcode, the truth's mean latency (capture at the server: the truth's times are
    // the capture's, the client's latency adds the round trip to the server... here the
    // capture point's loop to the client, one RTT).
    for op in ["MDS_GETATTR", "MDS_REINT", "OBD_PING", "LDLM_ENQUEUE"] {
        let mine: Vec<f64> = rpcs
            .iter()
            .filter(|t| t["opc_name"] == op)
            .map(|t| (t["t_end_ns"].as_f64().unwrap() - t["t_start_ns"].as_f64().unwrap()) / 1e3 + rtt * 1e6)
            .collect();
        let want = mine.iter().sum::<f64>() / mine.len() as f64;
        let got = p["latency_by_opcode"][op]["mean_us"].as_f64().unwrap();
        assert!(close(got, want, 20.0), "{op}: {got} µs, truth {want} µs");
    }
    assert_clean(&summary);
}

/// No line of a summary prints inf, NaN or −0.
fn assert_clean(summary: &str) {
    for line in summary.lines() {
        for word in line.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | ';' | '=' | ':')) {
            let w = word.trim_end_matches('%');
            assert!(!matches!(w, "inf" | "-inf" | "NaN" | "-0" | "-0.0" | "-0.00"), "{line}");
        }
    }
}

/// Every committed summary snapshot (every fixture and lab capture) is clean too.
#[test]
fn no_summary_prints_inf_nan_or_negative_zero() {
    for e in std::fs::read_dir(common::root().join("tests/snapshots")).unwrap() {
        let path = e.unwrap().path();
        if path.to_string_lossy().ends_with(".summary.snap") {
            assert_clean(&std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// A busy metadata server: 24 clients with 8 RPCs in flight each over a 100 µs path finish
/// 144,024 RPCs in about a second. Finished RPCs wait out `EMIT_DELAY_NS` (10 s) for a late
/// inferred request; at most `MAX_FINISHED_RPCS` (32,768) of them are held, the longest
/// held reported early beyond that, complete. Before, all of them were held and filled the
/// open RPC index (`MAX_OPEN_RPCS`, 131,072), whose eviction took the finished ones: the
/// report had 127,640 RPCs, 16,384 of them partial (`missing: evicted`) without the
/// latency and phases they carried, where the generator's truth has 144,024, all complete;
/// one thread peaked at 128 MiB (54 MiB now) and took 0.652 s (0.593 s; `dist`, medians
/// of 8 paired rounds).
#[test]
fn a_busy_metadata_server_reports_every_rpc_complete() {
    use lnetcap_rpc::limits::{MAX_FINISHED_RPCS, MAX_OPEN_RPCS};
    let d = common::scratch("metadata-busy");
    let cap = d.join("busy.pcap");
    let truth = d.join("busy.truth.jsonl");
    let st = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .args(["synth", "--scenario", "metadata", "--clients", "24", "--rpcs", "6000", "--concurrency", "8"])
        .args(["--rtt-ms", "0.1", "-o"])
        .arg(&cap)
        .arg("--truth")
        .arg(&truth)
        .status()
        .unwrap();
    assert!(st.success(), "synth");
    let rpcs: Vec<Value> = common::read_jsonl(&truth).into_iter().filter(|t| t["type"] == "rpc").collect();
    let n = rpcs.len() as u64;
    assert!(rpcs.len() > MAX_OPEN_RPCS, "{n} RPCs do not fill the open index");
    assert!(rpcs.iter().all(|t| t["completed"] == true), "the truth has every RPC complete");
    // One thread and two: the limits act alike on the reading thread's tracker, byte for byte.
    let run = |threads: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
            .arg("analyze")
            .arg(&cap)
            .args(["--threads", threads, "--json", "-"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    let (one, two) = (run("1"), run("2"));
    std::fs::remove_dir_all(&d).ok();
    assert!(one == two, "one thread and two differ");
    let r: Value = serde_json::from_slice(&one).unwrap();
    let peers = r["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 24);
    let sum = |k: &str| peers.iter().map(|p| p[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("rpcs"), n);
    assert_eq!(sum("rpcs_partial"), 0, "complete RPCs reported partial");
    let limit = |name: &str| {
        let hits = r["files"][0]["limits"].as_array().unwrap();
        hits.iter().find(|h| h["limit"] == name).map_or(0, |h| h["count"].as_u64().unwrap())
    };
    assert_eq!(limit("MAX_OPEN_RPCS"), 0, "nothing evicted");
    // Every RPC but those held at the end (at most MAX_FINISHED_RPCS finished, and the
    // 8 in flight of each client) was reported early: the capture is shorter than the delay.
    let early = limit("MAX_FINISHED_RPCS");
    let held = MAX_FINISHED_RPCS as u64 + 24 * 8;
    assert!(early >= n - held && early <= n - MAX_FINISHED_RPCS as u64, "reported early: {early} of {n}");
}
