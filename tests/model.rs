//! The throughput model on the real-kernel lab captures: the binding limit is named
//! correctly, the efficiency and RTT agree with the runs' measurements, and the advice has
//! the numbers the evidence supports.

mod common;

use std::process::Command;

use serde_json::Value;

fn report(path: &std::path::Path, extra: &[&str]) -> Value {
    // One file per call: tests run in parallel and may analyse the same capture.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let out = common::scratch_shared("model").join(format!(
        "{}-{}-{}.json",
        CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        path.parent().unwrap().file_name().unwrap().to_string_lossy(),
        path.file_name().unwrap().to_string_lossy()
    ));
    let mut args = vec!["analyze", "-q", "--json", out.to_str().unwrap(), path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = Command::new(env!("CARGO_BIN_EXE_lnetcap")).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

#[test]
fn lab_binding_limits_efficiency_rtt_and_advice() {
    for (lab, limit, rtt_ms) in [
        ("lst_write_rtt20_c8_pc8", "rpc_window", 20.2),
        ("ptlrpc_read_rtt20_c8_pc8", "rpc_window", 20.2),
        ("lst_read_rtt50_c32_pc8", "lnet_credits", 50.4),
    ] {
        let r = report(&common::lab_dir().join(lab).join("trace.pcap.zst"), &[]);
        let p = &r["peers"][0];
        assert_eq!(p["binding_limit"], limit, "{lab}: {}", p["model"]);
        let rtt = p["rtt_us"]["p50"].as_f64().unwrap() / 1000.0;
        // The runs' own RTT probes (summary.json rtt_probe) measured 20.1-20.2 ms and 50.4 ms.
        assert!((rtt - rtt_ms).abs() / rtt_ms <= 0.02, "{lab}: RTT {rtt} ms vs {rtt_ms}");
        let min = p["rtt_us"]["min"].as_f64().unwrap() / 1000.0;
        assert!(min <= rtt && (min - rtt_ms).abs() / rtt_ms <= 0.02, "{lab}: min RTT {min}");
        let eff = p["model"]["efficiency"].as_f64().unwrap();
        for k in ["t_rpc_bytes_per_s", "t_model_bytes_per_s", "efficiency"] {
            assert!(p["model"][k].is_number(), "{lab}: model.{k}");
        }
        for k in ["retransmits", "bytes_in_flight_max", "cwnd_estimate_max", "efficiency_loss"] {
            assert!(p["tcp"][k].is_number(), "{lab}: tcp.{k}");
        }
        assert_eq!(p["tcp"]["retransmits"], 0, "{lab}: no loss on the delay line");
        if limit == "rpc_window" {
            assert!(eff >= 0.9, "{lab}: efficiency {eff}");
            // Advice: more RPCs in flight, with peer_credits to match.
            let adv = p["advice"].as_array().unwrap();
            assert!(
                adv.iter().any(|a| a["setting"].as_str().unwrap().contains("max_rpcs_in_flight")
                    || a["setting"].as_str().unwrap().contains("concurrency")),
                "{lab}: {adv:?}"
            );
        } else {
            let adv = &p["advice"][0];
            let n: u64 = adv["value"]
                .as_str()
                .unwrap()
                .trim_start_matches("peer_credits=")
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(n >= 32, "{lab}: advice {adv}");
            assert!(adv["command"].as_str().unwrap().contains("peer_credits=32"), "{lab}: {adv}");
            // The credit bound: 8 messages of 1 MiB per RTT.
            let credit =
                p["model"]["bounds"].as_array().unwrap().iter().find(|b| b["limit"] == "lnet_credits").unwrap()
                    ["bytes_per_s"]
                    .as_f64()
                    .unwrap();
            let want = 8.0 * 1_048_576.0 / (rtt_ms / 1000.0);
            assert!((credit - want).abs() / want < 0.03, "{lab}: credit bound {credit} vs {want}");
        }
        // The waterfall from T_rpc: the binding limit takes the largest step (none for the
        // RPC window, the reference itself), and the steps and the observed share add up.
        let m = &p["model"];
        let trpc = m["t_rpc_bytes_per_s"].as_f64().unwrap();
        let steps = m["shares_lost"].as_array().unwrap();
        let total: f64 = steps.iter().map(|s| s["share"].as_f64().unwrap()).sum();
        let reached = m["inputs"]["observed"].as_f64().unwrap() / trpc;
        assert!((total + reached - 1.0).abs() < 1e-9 || reached > 1.0 - total, "{lab}: {steps:?} + {reached}");
        if limit == "lnet_credits" {
            assert_eq!(steps[0]["limit"], "lnet_credits", "{lab}: {steps:?}");
            let credit = m["bounds"][0]["bytes_per_s"].as_f64().unwrap();
            assert!((steps[0]["share"].as_f64().unwrap() - (1.0 - credit / trpc)).abs() < 1e-9);
        } else {
            assert!(steps.iter().all(|s| s["share"].as_f64().unwrap() < 0.05), "{lab}: {steps:?}");
        }
        eprintln!("{lab}: {limit}, efficiency {eff:.3}, RTT p50 {rtt:.3} ms (min {min:.3})");
    }
}

#[test]
fn link_rate_bounds_and_needed_rif() {
    // With a 10 Gbit/s link the RPC window stays binding and the RIF needed to fill the
    // link is 2 × BDP / BS.
    let r =
        report(&common::lab_dir().join("lst_write_rtt20_c8_pc8").join("trace.pcap.zst"), &["--link-rate", "10Gbit"]);
    let p = &r["peers"][0];
    assert_eq!(p["binding_limit"], "rpc_window");
    let rtt = p["model"]["inputs"]["rtt_s"].as_f64().unwrap();
    let bs = p["model"]["inputs"]["bs_bytes"].as_f64().unwrap();
    let want = (2.0 * 1.25e9 * rtt / bs).floor() as u64 + 1;
    assert_eq!(p["model"]["needed_rif"].as_u64(), Some(want));
    assert_eq!(p["model"]["link_source"], "--link-rate");
}

#[test]
fn fixtures_credit_limit_and_short_captures_flagged() {
    // The credits fixture: selftest reads, 32 RPCs in flight, peer_credits 8, 20 ms RTT.
    let r = report(&common::root().join("fixtures/synth/credits.pcap.zst"), &[]);
    let p = &r["peers"][0];
    assert_eq!(p["binding_limit"], "lnet_credits");
    assert_eq!(p["messages_in_flight"]["inferred_peer_credits"], 8);
    assert_eq!(p["rpcs_in_flight"]["max"], 32);
    assert_eq!(p["model"]["steady_state"], true);
    // A few milliseconds of metadata RPCs are no steady state: the verdict says so.
    let r = report(&common::root().join("fixtures/synth/metadata.pcap"), &[]);
    assert_eq!(r["peers"][0]["model"]["steady_state"], false);
}

#[test]
fn interval_model_follows_slow_start_and_the_true_window() {
    // The lab runs lose nothing: TCP binds only while the window opens (slow start at the
    // start of the capture), then the run's own limit binds to the end.
    for (lab, limit) in [
        ("lst_write_rtt20_c8_pc8", "rpc_window"),
        ("ptlrpc_read_rtt20_c8_pc8", "rpc_window"),
        ("lst_read_rtt50_c32_pc8", "lnet_credits"),
    ] {
        let r = report(&common::lab_dir().join(lab).join("trace.pcap.zst"), &[]);
        let iv = r["peers"][0]["intervals"].as_array().unwrap();
        assert!(iv.len() >= 20, "{lab}: {} intervals", iv.len());
        let first_other = iv.iter().position(|i| i["binding_limit"] != "tcp_congestion").unwrap();
        assert!(first_other <= 3, "{lab}: slow start lasts {first_other} intervals");
        assert!(iv[first_other..].iter().all(|i| i["binding_limit"] == limit), "{lab}: {iv:?}");
        // Without loss the window estimate never shrinks.
        let cw: Vec<u64> = iv.iter().filter_map(|i| i["cwnd_estimate"].as_u64()).collect();
        assert!(cw.windows(2).all(|w| w[1] >= w[0]), "{lab}: {cw:?}");
        // The bound is a bound: no interval runs much above it (bytes are counted when an
        // RPC's bulk completes, so one interval can take a little of the next one's).
        for i in iv {
            let (o, m) = (i["observed_bytes_per_s"].as_f64().unwrap(), i["t_model_bytes_per_s"].as_f64().unwrap());
            assert!(o <= 1.15 * m, "{lab}: {i}");
        }
    }
    // The synthetic fixtures: no estimate exceeds the simulator's window.
    for name in ["credits", "lossy", "lst-read", "lst-write", "ost-read", "ost-write", "cpp2", "tso", "wrap"] {
        let dir = common::root().join("fixtures/synth");
        let cap = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with(&format!("{name}.pcap")))
            .unwrap();
        let r = report(&cap, &[]);
        let truth = common::read_jsonl(&dir.join(format!("{name}.truth.jsonl")));
        let n = common::check_cwnd_against_truth(&r["peers"][0], &truth, false);
        assert!(n >= 1, "{name}");
    }
}

/// The synthetic fixtures, with their truth.
fn synth_fixtures() -> Vec<(String, std::path::PathBuf, Vec<Value>)> {
    let dir = common::root().join("fixtures/synth");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().contains(".pcap"))
        .map(|p| {
            let name = p.file_name().unwrap().to_str().unwrap().split(".pcap").next().unwrap().to_string();
            let truth = common::read_jsonl(&dir.join(format!("{name}.truth.jsonl")));
            (name, p, truth)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn rtt_and_server_time_agree_with_the_simulator() {
    let mut checked = 0;
    for (name, cap, truth) in synth_fixtures() {
        let sc = &truth[0];
        let rtt = sc["rtt_ns"].as_f64().unwrap() / 1000.0;
        let service = sc["service_ns"].as_f64().unwrap() / 1e9;
        let r = report(&cap, &[]);
        for p in r["peers"].as_array().unwrap() {
            // The smallest loop sum is the path's RTT (the simulator has no jitter); the
            // median carries delayed ACKs and queueing, a little above it.
            let (min, p50) = (p["rtt_us"]["min"].as_f64().unwrap(), p["rtt_us"]["p50"].as_f64().unwrap());
            assert!((min - rtt).abs() <= 0.005 * rtt, "{name}: RTT min {min} µs vs {rtt}");
            assert!(p50 >= min && p50 <= 1.02 * rtt, "{name}: RTT p50 {p50} µs vs {rtt}");
            // The server's own time per RPC, where the model has it: the simulator's service
            // time, within 1 % of the RTT (the loops taken out are medians; metadata RPCs with early
            // replies hold theirs 3 ms and more).
            if let Some(s) = p["model"]["inputs"]["server_s"].as_f64() {
                if !["metadata", "multi"].contains(&name.as_str()) {
                    assert!((s - service).abs() <= 0.01 * rtt / 1e6, "{name}: server time {s} s vs {service}");
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 8, "{checked} peers with a server time");
}
