//! CI gates that fail and pass on purpose: `analyze --fail-if` (exit 3 with the reason,
//! 0 when no gate holds, 2 for an expression that does not parse or names no field) and
//! `lnetcap diff` (exit 3 on a regression beyond tolerance, 0 otherwise), on the lab
//! captures whose binding limits are known (lst_read: lnet_credits at 77 % efficiency;
//! lst_write: rpc_window at 99 %).

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn lnetcap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lnetcap")).args(args).output().unwrap()
}

fn lab(name: &str) -> String {
    common::lab_dir().join(name).join("trace.pcap.zst").display().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn tmp(name: &str) -> PathBuf {
    common::scratch_shared("gates").join(name)
}

#[test]
fn fail_if_fails_and_passes_on_purpose() {
    let read = lab("lst_read_rtt50_c32_pc8");
    let write = lab("lst_write_rtt20_c8_pc8");
    // The credit-bound read fails both gates of the issue, and says why.
    let o = lnetcap(&[
        "analyze",
        &read,
        "-q",
        "--fail-if",
        "efficiency < 0.8",
        "--fail-if",
        "binding_limit == lnet_credits",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("gate failed: --fail-if 'efficiency < 0.8' holds for 10.99.1.1@tcp ↔ 10.99.2.1@tcp"), "{e}");
    assert!(e.contains("efficiency (model.efficiency) = 0.7"), "{e}");
    assert!(
        e.contains("--fail-if 'binding_limit == lnet_credits' holds") && e.contains("binding_limit = \"lnet_credits\""),
        "{e}"
    );
    // The RPC-window-bound write passes them.
    let o = lnetcap(&[
        "analyze",
        &write,
        "-q",
        "--fail-if",
        "efficiency < 0.8",
        "--fail-if",
        "binding_limit == lnet_credits",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("gate failed"));
    // Units: its RTT is 20.4 ms and its throughput 201.9 MB/s.
    for (gate, code) in [
        ("rtt > 20ms", 3),
        ("rtt > 21ms", 0),
        ("rtt_us.p50 > 20000", 3),
        ("throughput < 1.6Gbit", 0),
        ("throughput < 1.7Gbit", 3),
        ("throughput < 200MB/s or retransmits > 0", 0),
        ("not (binding_limit == rpc_window)", 0),
        ("advice > 0 and efficiency > 95%", 3),
    ] {
        let o = lnetcap(&["analyze", &write, "-q", "--fail-if", gate]);
        assert_eq!(o.status.code(), Some(code), "{gate}: {}", stderr(&o));
    }
    // Usage errors: exit 2 with what and where.
    let o = lnetcap(&["analyze", &write, "-q", "--fail-if", "efficiency <"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("at the end: expected a field"), "{}", stderr(&o));
    let o = lnetcap(&["analyze", &write, "-q", "--fail-if", "efficency < 0.8"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no field \"efficency\"; did you mean efficiency"), "{}", stderr(&o));
    // A misspelt field fails when the gate is parsed, before any capture is read.
    let o = lnetcap(&["analyze", "/nonexistent.pcap", "-q", "--fail-if", "rtt_typo > 1ms"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no field \"rtt_typo\"; did you mean rtt,"), "{}", stderr(&o));
    let o = lnetcap(&["analyze", &write, "-q", "--fail-if", "binding_limit == lnet_credit"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("lnet_credits"), "{}", stderr(&o));
    let o = lnetcap(&["analyze", &write, "-q", "--fail-if", "rtt > 5MB"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is a duration"), "{}", stderr(&o));
}

#[test]
fn fail_if_without_any_peer_fails() {
    // A capture of one frame that is not LNet: no peer report, nothing to vouch for.
    let empty = tmp("empty.pcap");
    let mut w = lnetcap_synth::pcapw::CaptureWriter::new(
        lnetcap_synth::Container::PcapUs,
        lnetcap_synth::Link::Ethernet,
        65535,
    );
    w.packet(0, &[0u8; 20]);
    std::fs::write(&empty, w.finish()).unwrap();
    let o = lnetcap(&["analyze", empty.to_str().unwrap(), "-q", "--fail-if", "efficiency < 0.8"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("no peer pair in the report to check"), "{}", stderr(&o));
}

#[test]
fn diff_fails_on_regressions_and_passes_within_tolerance() {
    let base = tmp("base.json");
    let other = tmp("other.json");
    let o = lnetcap(&["analyze", &lab("lst_read_rtt50_c32_pc8"), "-q", "--json", base.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Against itself: nothing changed.
    let o = lnetcap(&["diff", base.to_str().unwrap(), base.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no regression"));
    // Throughput 8 % lower and p99 latency 30 % higher: two regressions at the defaults.
    let mut r: Value = serde_json::from_slice(&std::fs::read(&base).unwrap()).unwrap();
    let p = &mut r["peers"][0];
    p["throughput_bytes_per_s"] = Value::from(p["throughput_bytes_per_s"].as_f64().unwrap() * 0.92);
    p["latency_us"]["p99"] = Value::from(p["latency_us"]["p99"].as_f64().unwrap() * 1.3);
    std::fs::write(&other, serde_json::to_vec(&r).unwrap()).unwrap();
    let o = lnetcap(&["diff", base.to_str().unwrap(), other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("throughput") && out.contains("-8.0%") && out.contains("REGRESSION (tolerance 5%)"), "{out}");
    assert!(out.contains("latency_p99") && out.contains("+30.0%") && out.contains("2 regressions"), "{out}");
    // Wider tolerances let it pass; --json - gives the same verdicts as data.
    let o = lnetcap(&[
        "diff",
        base.to_str().unwrap(),
        other.to_str().unwrap(),
        "--tolerance",
        "throughput=10%",
        "--tolerance",
        "latency_p99=50%",
        "--json",
        "-",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["regressions"], 0);
    let thr = d["rows"].as_array().unwrap().iter().find(|r| r["metric"] == "throughput").unwrap();
    assert_eq!((thr["verdict"].as_str(), thr["tolerance"].as_str()), (Some("same"), Some("10%")));
    assert!((thr["change"].as_f64().unwrap() + 0.08).abs() < 1e-9);
    // Another capture of the same peers: a different binding limit is a regression.
    let o = lnetcap(&["analyze", &lab("lst_write_rtt20_c8_pc8"), "-q", "--json", other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let o = lnetcap(&["diff", other.to_str().unwrap(), base.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("binding_limit") && out.contains("rpc_window") && out.contains("lnet_credits"), "{out}");
    // Bad input and usage.
    let o = lnetcap(&["diff", base.to_str().unwrap(), "/nonexistent.json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/nonexistent.json"));
    let o = lnetcap(&["diff", base.to_str().unwrap(), base.to_str().unwrap(), "--tolerance", "speed=5%"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no metric \"speed\""));
    // A report of another schema version is refused (exit 2), naming the file.
    let mut r: Value = serde_json::from_slice(&std::fs::read(&base).unwrap()).unwrap();
    r["schema_version"] = Value::from(99);
    std::fs::write(&other, serde_json::to_vec(&r).unwrap()).unwrap();
    let o = lnetcap(&["diff", base.to_str().unwrap(), other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("schema_version 99") && stderr(&o).contains(other.to_str().unwrap()), "{}", stderr(&o));
}

#[test]
fn gate_checks_stored_reports_of_this_schema_only() {
    let report = tmp("gate.json");
    let o = lnetcap(&["analyze", &lab("lst_read_rtt50_c32_pc8"), "-q", "--json", report.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = report.to_str().unwrap();
    // The credit-bound read (efficiency 0.7x): the same verdicts as `analyze --fail-if`.
    let o = lnetcap(&["gate", r, "--fail-if", "binding_limit == lnet_credits"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("holds for 10.99.1.1@tcp ↔ 10.99.2.1@tcp"), "{}", stderr(&o));
    let o = lnetcap(&["gate", r, "--fail-if", "efficiency > 0.9", "--fail-if", "rpcs_by_opcode.BRW_WRITE > 0"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = lnetcap(&["gate", r, "--fail-if", "rtt_typo > 1ms"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("did you mean rtt,"), "{}", stderr(&o));
    // Another schema version is refused (exit 2), naming the file and the versions.
    let mut v: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    v["schema_version"] = Value::from(1);
    let other = tmp("gate-v1.json");
    std::fs::write(&other, serde_json::to_vec(&v).unwrap()).unwrap();
    let o = lnetcap(&["gate", other.to_str().unwrap(), "--fail-if", "efficiency < 0.8"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("schema_version 1, this lnetcap reads 2"), "{}", stderr(&o));
    let o = lnetcap(&["gate", "/nonexistent.json", "--fail-if", "efficiency < 0.8"]);
    assert_eq!(o.status.code(), Some(1));
}

/// The README's CI example, run as written (with `lnetcap` on PATH): it passes against a
/// baseline of the same analysis and fails against one 20 % faster.
#[test]
fn readme_ci_example_passes_and_fails_on_purpose() {
    let readme = std::fs::read_to_string(common::root().join("README.md")).unwrap();
    let start = readme.find("<!-- ci-example -->\n```sh\n").expect("README has the CI example") + 27;
    let end = start + readme[start..].find("```\n<!-- /ci-example -->").unwrap();
    let script = &readme[start..end];
    let dir = common::scratch("gates-ci-example");
    std::fs::create_dir_all(dir.join("baseline")).unwrap();
    std::os::unix::fs::symlink(common::root().join("fixtures"), dir.join("fixtures")).unwrap();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_lnetcap"));
    let path = format!("{}:{}", bin.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let base = dir.join("baseline/credits.json");
    let o = lnetcap(&["analyze", "fixtures/synth/credits.pcap.zst", "-q", "--json", base.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let run = || Command::new("bash").arg("-c").arg(script).current_dir(&dir).env("PATH", &path).output().unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(0), "{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(dir.join("out/credits/report.html").is_file() && dir.join("out/credits/rpcs.parquet").is_file());
    let mut r: Value = serde_json::from_slice(&std::fs::read(&base).unwrap()).unwrap();
    let t = r["peers"][0]["throughput_bytes_per_s"].as_f64().unwrap();
    r["peers"][0]["throughput_bytes_per_s"] = Value::from(t * 1.2);
    std::fs::write(&base, serde_json::to_vec(&r).unwrap()).unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("REGRESSION"));
}
