//! Memory flat in the capture's size (issue 14): `lnetcap analyze FILE` of generated
//! captures several times larger than the bound keeps its peak RSS at or under
//! [`BOUND_MIB`], measured the way users see it: the VmHWM of /proc/PID/status sampled while
//! it runs and getrusage of the child at its exit (tests/tools/peak_rss.py). The file is
//! read through a bounded buffer, so neither its size nor its payload bytes count. The
//! report must still account for every frame the generator wrote (a run that read nothing
//! would pass the bound trivially).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

mod common;

/// The bound of issue 14, MiB.
const BOUND_MIB: f64 = 64.0;

fn lnetcap() -> &'static str {
    env!("CARGO_BIN_EXE_lnetcap")
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lnetcap-memory-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes the bench scenario with `args`, analyzes the file under the RSS probe, checks
/// the frames against the generator's count; returns (capture MiB, peak RSS MiB).
fn analyze_bench(name: &str, args: &[&str]) -> (f64, f64) {
    let d = dir(name);
    let cap = d.join("c.pcap");
    let st = Command::new(lnetcap()).args(["synth", "--scenario", "bench"]).args(args).arg("-o").arg(&cap).status();
    assert!(st.unwrap().success(), "synth {name}");
    let truth = std::fs::read_to_string(d.join("c.pcap.truth.jsonl")).unwrap();
    let truth: Value =
        serde_json::from_str(truth.lines().next().unwrap()).expect("the truth's first line: the capture");
    let size_mib = std::fs::metadata(&cap).unwrap().len() as f64 / (1 << 20) as f64;
    let json = d.join("report.json");
    let (report, peak) = common::analyze_under_rss_probe(&cap, &json);
    std::fs::remove_dir_all(&d).ok();
    assert_eq!(report["files"][0]["frames"]["frames"], truth["packets"], "{name}: every frame read");
    assert!(report["files"][0]["complete"].as_bool().unwrap(), "{name}: read to its end");
    let (hwm, rusage) = (peak.proc_hwm_mib, peak.rusage_mib);
    eprintln!("{name}: {size_mib:.0} MiB capture, peak RSS {rusage:.1} MiB (VmHWM sampled {hwm:.1} MiB)");
    assert!(hwm > 0.0, "{name}: /proc was sampled");
    (size_mib, peak.mib())
}

#[test]
fn header_only_capture_of_230_mb_analyzes_in_64_mib() {
    let (size, rss) = analyze_bench("header", &["--rpcs", "130"]);
    assert!(size > 3.0 * BOUND_MIB, "the capture ({size:.0} MiB) is much larger than the bound");
    assert!(rss <= BOUND_MIB, "peak RSS {rss:.1} MiB > {BOUND_MIB} MiB for a {size:.0} MiB capture");
}

#[test]
fn full_payload_capture_of_1_gb_analyzes_in_64_mib() {
    let (size, rss) = analyze_bench("full", &["--rpcs", "120", "--snaplen", "65535"]);
    assert!(size > 15.0 * BOUND_MIB, "the capture ({size:.0} MiB) is much larger than the bound");
    assert!(rss <= BOUND_MIB, "peak RSS {rss:.1} MiB > {BOUND_MIB} MiB for a {size:.0} MiB capture");
}
