//! The progress bar: drawn on stderr only when stderr is a terminal (here a pseudo
//! terminal from util-linux `script`), silenced by --quiet, never in pipes or files.

mod common;

use std::process::Command;

fn lab() -> String {
    common::lab_dir().join("lst_read_rtt50_c32_pc8/trace.pcap.zst").display().to_string()
}

#[test]
fn no_progress_bar_when_stderr_is_not_a_terminal() {
    let o = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .args(["analyze", &lab()])
        .env("LNETCAP_PROGRESS_MIN_BYTES", "0")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!e.contains("ETA") && !e.contains('\u{1b}'), "stderr: {e}");
}

#[test]
fn progress_bar_on_a_terminal_and_quiet_silences_it() {
    if Command::new("script").arg("--version").output().is_err() {
        assert!(std::env::var("LNETCAP_REQUIRE_ORACLES").map_or(true, |v| v != "1"), "no util-linux script");
        eprintln!("SKIPPED: no `script` to make a terminal");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_lnetcap");
    let pty = |extra: &str| {
        // stdout to /dev/null; stderr stays on the pseudo terminal that `script` records.
        let cmd = format!("{bin} analyze {extra} '{}' > /dev/null", lab());
        let o = Command::new("script")
            .args(["-qfec", &cmd, "/dev/null"])
            .env("LNETCAP_PROGRESS_MIN_BYTES", "0")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let shown = pty("");
    assert!(shown.contains("trace.pcap.zst") && shown.contains("ETA") && shown.contains("MiB"), "terminal: {shown:?}");
    let quiet = pty("--quiet");
    assert!(!quiet.contains("ETA"), "--quiet: {quiet:?}");
}
