//! Time series are bounded in length (`MAX_SERIES_INTERVALS`, lnetcap-tcp limits): a
//! capture spanning more intervals than a series keeps has its interval doubled and the
//! buckets kept so far merged. The oracle is the same capture analysed at the coarser
//! interval from the start: every table and every number of the JSON report must be the
//! same; only the report's requested interval, the file's `series_interval_ns` and the
//! limit entry say what happened.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;

fn lnetcap() -> &'static str {
    env!("CARGO_BIN_EXE_lnetcap")
}

fn analyze(cap: &Path, interval_ms: u32, out: &Path) -> Value {
    let json = out.join("report.json");
    let st = Command::new(lnetcap())
        .arg("analyze")
        .arg(cap)
        .args(["--interval-ms", &interval_ms.to_string(), "--table-format", "csv", "-q", "--out"])
        .arg(out)
        .arg("--json")
        .arg(&json)
        .status()
        .unwrap();
    assert!(st.success(), "analyze --interval-ms {interval_ms}");
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

#[test]
fn a_coarsened_series_equals_the_coarse_interval_from_the_start() {
    let d: PathBuf = common::scratch("series-bound");
    let cap = d.join("long.pcap");
    // 100 OST RPCs one at a time, 700 ms of server time each: 70.4 s of capture, 70,412
    // intervals of 1 ms > 65,536, so the 1 ms series double once to 2 ms.
    let st = Command::new(lnetcap())
        .args(["synth", "--scenario", "ost-small", "--rpcs", "100", "--service-ms", "700", "--concurrency", "1", "-o"])
        .arg(&cap)
        .status()
        .unwrap();
    assert!(st.success());
    let (fine_dir, coarse_dir) = (d.join("fine"), d.join("coarse"));
    let mut fine = analyze(&cap, 1, &fine_dir);
    let mut coarse = analyze(&cap, 2, &coarse_dir);

    let f = &fine["files"][0];
    assert_eq!(fine["interval_ns"], 1_000_000, "the report keeps the interval asked for");
    assert_eq!(f["series_interval_ns"], 2_000_000, "the file says its series are at 2 ms");
    let hit = f["limits"].as_array().unwrap().iter().find(|h| h["limit"] == "MAX_SERIES_INTERVALS").unwrap();
    assert_eq!(hit["count"], 1, "doubled once");
    assert_eq!(hit["value"], 65_536);
    assert!(coarse["files"][0].get("series_interval_ns").is_none(), "2 ms x 35,206 intervals fits");
    assert!(coarse["files"][0].get("limits").is_none());
    let peers = coarse["peers"].as_array().unwrap();
    assert!(!peers.is_empty() && peers.iter().all(|p| p["timeseries"].as_array().is_some_and(|t| t.len() > 100)));

    for r in [&mut fine, &mut coarse] {
        let file = r["files"][0].as_object_mut().unwrap();
        file.remove("series_interval_ns");
        file.remove("limits");
        r.as_object_mut().unwrap().remove("interval_ns");
    }
    assert!(fine == coarse, "the coarsened report differs from the one at 2 ms from the start");
    for table in ["rpcs", "messages", "connections", "peers", "timeseries"] {
        let name = format!("{table}.csv");
        let (a, b) = (std::fs::read(fine_dir.join(&name)).unwrap(), std::fs::read(coarse_dir.join(&name)).unwrap());
        assert!(a == b, "{name} differs between the coarsened run and the 2 ms run");
    }
    std::fs::remove_dir_all(&d).ok();
}
