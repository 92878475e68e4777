//! Seed 000's single-client figure, reproduced with lnetcap-synth: LNet selftest reads of
//! 1 MiB over a 20 ms RTT with peer_credits 8, sweeping RPCs in flight. Throughput tracks
//! T_rpc = RIF × BS / (2 × RTT) while RIF ≤ peer_credits and falls away above it; lnetcap
//! names the RPC window below and the LNet credits at 32 RPCs in flight, with the advice to
//! raise peer_credits. A lossy run names TCP congestion.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn run(dir: &Path, name: &str, args: &[&str]) -> Value {
    let cap = dir.join(format!("{name}.pcap"));
    let mut synth = vec!["synth", "--scenario", "credits", "-o", cap.to_str().unwrap()];
    synth.extend_from_slice(args);
    let o = Command::new(env!("CARGO_BIN_EXE_lnetcap")).args(&synth).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json = dir.join(format!("{name}.json"));
    let o = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .args(["analyze", "-q", "--json", json.to_str().unwrap(), cap.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let mut p = r["peers"][0].clone();
    p["truth"] = Value::Array(common::read_jsonl(&dir.join(format!("{name}.pcap.truth.jsonl"))));
    p
}

#[test]
fn seed000_single_client_figure_and_a_lossy_run() {
    let dir = common::scratch("sweep-sweep");
    let mut eff = Vec::new();
    for conc in [1u32, 2, 4, 8, 32] {
        let rpcs = (conc * 12).max(96).to_string();
        let p = run(
            &dir,
            &format!("c{conc}"),
            &["--concurrency", &conc.to_string(), "--rpcs", &rpcs, "--peer-credits", "8"],
        );
        let observed = p["throughput_bytes_per_s"].as_f64().unwrap();
        let trpc = p["model"]["t_rpc_bytes_per_s"].as_f64().unwrap();
        let e = observed / trpc;
        eprintln!(
            "RIF {conc:>2}: observed {:.1} MB/s, T_rpc {:.1} MB/s ({:.0} %), binding {}",
            observed / 1e6,
            trpc / 1e6,
            e * 100.0,
            p["binding_limit"]
        );
        if conc <= 8 {
            assert_eq!(p["binding_limit"], "rpc_window", "RIF {conc}");
            assert!(e >= 0.9, "RIF {conc}: throughput tracks T_rpc ({e:.2})");
        } else {
            assert_eq!(p["binding_limit"], "lnet_credits", "RIF {conc}");
            assert_eq!(p["messages_in_flight"]["inferred_peer_credits"], 8);
            assert!(e < 0.5, "RIF {conc}: throughput falls away from T_rpc ({e:.2})");
            let credit = 8.0 * 1_048_576.0 / (p["rtt_us"]["p50"].as_f64().unwrap() / 1e6);
            assert!(observed <= 1.02 * credit, "RIF {conc}: above the credit window");
            let adv = &p["advice"][0];
            assert!(adv["command"].as_str().unwrap().contains("peer_credits=32"), "{adv}");
        }
        eff.push(e);
    }
    assert!(eff[4] < eff[3] && eff[4] < eff[2], "efficiency falls above peer_credits: {eff:?}");
    // Loss: 0.5 % of segments, RPC window 8 and credits 64: TCP congestion control binds.
    let p = run(&dir, "lossy", &["--concurrency", "8", "--rpcs", "96", "--peer-credits", "64", "--loss", "0.005"]);
    assert_eq!(p["binding_limit"], "tcp_congestion", "{}", p["model"]);
    assert!(p["tcp"]["retransmits"].as_u64().unwrap() > 0);
    assert!(p["tcp"]["efficiency_loss"].as_f64().unwrap() > 0.3, "{}", p["tcp"]);
    assert!(p["advice"][0]["setting"].as_str().unwrap().contains("TCP"), "{}", p["advice"]);
    // The per-interval window estimate follows the simulator's window through the losses:
    // never above it, and (the RPC window of 8 MiB always had data waiting) never below half.
    let n = common::check_cwnd_against_truth(&p, p["truth"].as_array().unwrap(), true);
    assert!(n >= 20, "{n} intervals");
    assert!(p["intervals"].as_array().unwrap().iter().all(|i| i["binding_limit"] == "tcp_congestion"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_slow_server_is_named() {
    // 40 ms of server time per RPC against a 2 ms RTT, 8 RPCs in flight and credits to
    // spare: the server binds at 8 × 1 MiB / (2 × 2 ms + 40 ms) = 190.6 MB/s.
    let dir = common::scratch("sweep-server");
    let p = run(
        &dir,
        "server",
        &["--concurrency", "8", "--rpcs", "200", "--peer-credits", "64", "--rtt-ms", "2", "--service-ms", "40"],
    );
    assert_eq!(p["binding_limit"], "server", "{}", p["model"]);
    let s = p["model"]["inputs"]["server_s"].as_f64().unwrap();
    assert!((s - 0.040).abs() < 0.0004, "server time {s}");
    let eff = p["model"]["efficiency"].as_f64().unwrap();
    assert!(eff > 0.9 && eff <= 1.02, "efficiency {eff}");
    let bound = p["model"]["t_model_bytes_per_s"].as_f64().unwrap();
    assert!((bound - 8.0 * 1_048_576.0 / 0.044).abs() / bound < 0.02, "server bound {bound}");
    // TCP had the window for it: no TCP bound, and no advice to add RPCs in flight.
    assert!(p["model"]["bounds"].as_array().unwrap().iter().all(|b| b["limit"] != "tcp_congestion"));
    assert_eq!(p["advice"][0]["setting"], "server", "{}", p["advice"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_link_is_named_with_or_without_its_rate() {
    // 16 RPCs of 1 MiB over a 1 Gbit/s link with a 2 ms RTT: T_rpc is 4 GB/s, the link
    // carries 1 Gbit/s × MSS / (MSS + 66 bytes of headers and framing the simulator puts
    // on every segment), MSS = 9000 − 52 (jumbo frames, IPv4, timestamps).
    let dir = common::scratch("sweep-link");
    let args = ["--concurrency", "16", "--rpcs", "200", "--peer-credits", "64", "--rtt-ms", "2", "--rate-gbit", "1"];
    let p = run(&dir, "link", &args);
    let goodput = 125e6 * 8948.0 / (8948.0 + 66.0);
    // Without --link-rate: the flight stays at the BDP with 8 MiB offered per round trip,
    // no loss and an open receive window: the path is full at its best rate.
    assert_eq!(p["binding_limit"], "link", "{}", p["model"]);
    assert_eq!(p["model"]["link_source"], "best sustained rate (the path was full)");
    let best = p["model"]["best_sustained_bytes_per_s"].as_f64().unwrap();
    assert!((best - goodput).abs() / goodput < 0.01, "best {best} vs {goodput}");
    assert!(p["advice"][0]["setting"].as_str().unwrap().starts_with("none"), "{}", p["advice"]);
    // TCP is not named: no loss, the window steady.
    assert!(p["model"]["bounds"].as_array().unwrap().iter().all(|b| b["limit"] != "tcp_congestion"));
    // With the link rate given, the link binds and the capture reaches 99 % of it.
    let cap = dir.join("link.pcap");
    let json = dir.join("link2.json");
    let o = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .args(["analyze", "-q", "--link-rate", "1Gbit", "--json", json.to_str().unwrap(), cap.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success());
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let p = &r["peers"][0];
    assert_eq!(p["binding_limit"], "link");
    let eff = p["model"]["efficiency"].as_f64().unwrap();
    assert!(eff > 0.97 && eff <= 1.0, "efficiency {eff}");
    // Every interval's smallest RTT is the path's: the simulator paces at the link, no queue.
    for i in p["intervals"].as_array().unwrap() {
        let min = i["rtt_us"]["min_us"].as_f64().unwrap();
        assert!((min - 2000.0).abs() <= 20.0, "{i}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
