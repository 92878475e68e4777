//! Golden reports: the JSON report and the terminal summary of every committed fixture
//! and of the shared lab captures, as insta snapshots under tests/snapshots/. A change in
//! any number shows up as a reviewed diff: `INSTA_UPDATE=always cargo test --release --test
//! golden` rewrites them and `git diff tests/snapshots` is the review (or `cargo insta
//! review` with cargo-insta). CI never accepts one: .ci/run sets INSTA_UPDATE=no, so a
//! changed report fails the run.
//!
//! The snapshots are the program's own output: they pin behaviour against unreviewed
//! change, while correctness is checked against truth, tshark and tcptrace elsewhere.

mod common;

use std::process::Command;

use lnetcap_analysis::fields::{Unit, PEER_FIELDS};
use serde_json::Value;

fn run(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_lnetcap")).args(args).current_dir(common::root()).output().unwrap();
    assert!(o.status.code() == Some(0), "lnetcap {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn captures() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(common::root().join("fixtures/synth"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".pcap"))
        .map(|n| (n.split('.').next().unwrap().to_string(), format!("fixtures/synth/{n}")))
        .collect();
    v.sort();
    for lab in ["lst_write_rtt20_c8_pc8", "ptlrpc_read_rtt20_c8_pc8", "lst_read_rtt50_c32_pc8"] {
        v.push((format!("lab-{lab}"), format!("fixtures/lab/{lab}/trace.pcap.zst")));
    }
    v.push(("public-ndpi-lustre".into(), "fixtures/public/ndpi-lustre.pcapng".into()));
    v
}

#[test]
fn golden_reports() {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    let mut reports = Vec::new();
    settings.bind(|| {
        for (name, path) in captures() {
            let json = run(&["analyze", &path, "--json", "-"]);
            reports.push((name.clone(), serde_json::from_str::<Value>(&json).unwrap()));
            insta::assert_snapshot!(format!("{name}.json"), json);
            insta::assert_snapshot!(format!("{name}.summary"), run(&["analyze", &path]));
        }
    });
    registry_is_the_report(&reports);
}

/// The field registry (lnetcap_analysis::fields) and the peers of every golden report
/// agree: each scalar the report writes (a number, text, true/false, or a list, which
/// gates compare by length) is a registered field of that type (a text of fixed words is
/// one of them), and each registered field appears in some report.
fn registry_is_the_report(reports: &[(String, Value)]) {
    fn leaves(v: &Value, path: String, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    leaves(x, if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, out);
                }
            }
            v => out.push((path, v.clone())),
        }
    }
    let mut seen = vec![false; PEER_FIELDS.len()];
    for (name, r) in reports {
        for peer in r["peers"].as_array().unwrap() {
            let mut out = Vec::new();
            leaves(peer, String::new(), &mut out);
            for (path, v) in out {
                let Some(i) = PEER_FIELDS.iter().position(|f| f.matches(&path)) else {
                    // An object the peer does not have (`capture_point: null`).
                    let parent = format!("{path}.");
                    assert!(
                        v.is_null() && PEER_FIELDS.iter().any(|f| f.path.starts_with(&parent)),
                        "{name}: {path} is written but not in lnetcap_analysis::fields"
                    );
                    continue;
                };
                seen[i] = true;
                let f = &PEER_FIELDS[i];
                let ok = match (&v, f.unit) {
                    (Value::Null, _) => true,
                    (Value::Number(_), u) => u.is_number(),
                    (Value::String(s), Unit::Text(values)) => values.is_empty() || values.contains(&s.as_str()),
                    (Value::Bool(_), Unit::Bool) | (Value::Array(_), Unit::List) => true,
                    _ => false,
                };
                assert!(ok, "{name}: {path} = {v} is not {}", f.unit.name());
            }
        }
    }
    let unseen: Vec<&str> = PEER_FIELDS.iter().zip(&seen).filter(|(_, s)| !**s).map(|(f, _)| f.path).collect();
    assert!(unseen.is_empty(), "registered but written by no golden report: {unseen:?}");
}

#[test]
fn docs_list_every_field() {
    let path = common::root().join("docs/analyze-json.md");
    let have = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = (FIELDS_BEGIN, "<!-- end of the generated field list -->");
    let (a, b) = (have.find(begin).expect("docs/analyze-json.md: no field list"), have.find(end).unwrap());
    let want = format!("{}{begin}\n\n{}\n{}", &have[..a], lnetcap_analysis::fields::markdown(), &have[b..]);
    if std::env::var("UPDATE_DOCS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
    }
    assert!(
        std::fs::read_to_string(&path).unwrap() == want,
        "docs/analyze-json.md's field list is not lnetcap_analysis::fields: run UPDATE_DOCS=1 cargo test --release --test golden docs"
    );
}

const FIELDS_BEGIN: &str = "<!-- generated from lnetcap_analysis::fields by tests/golden.rs; do not edit -->";
