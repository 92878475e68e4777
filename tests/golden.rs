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
    settings.bind(|| {
        for (name, path) in captures() {
            insta::assert_snapshot!(format!("{name}.json"), run(&["analyze", &path, "--json", "-"]));
            insta::assert_snapshot!(format!("{name}.summary"), run(&["analyze", &path]));
        }
    });
}
