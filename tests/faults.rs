//! Faults: a signal during `analyze` still yields a report of what was read, marked as
//! interrupted (exit 5); a second signal exits at once; a run killed at any moment leaves
//! every output either as it was or complete (outputs are written to temporary names and
//! renamed into place together).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_lnetcap")
}

fn tmp(name: &str) -> PathBuf {
    common::scratch(&format!("faults-{name}"))
}

/// `synth --scenario bench --rpcs 100`: 882,908 packets, 183 MB; `analyze` with every
/// output takes about 1.2 s on the 2-core CI machine.
const BIG_RPCS: &str = "100";

/// A header-only capture large enough to interrupt (`synth --scenario bench`), made once.
fn big() -> &'static Path {
    static BIG: OnceLock<PathBuf> = OnceLock::new();
    BIG.get_or_init(|| {
        let dir = common::scratch("faults-big");
        let p = dir.join("big.pcap");
        let o = Command::new(bin())
            .args(["synth", "--scenario", "bench", "--rpcs", BIG_RPCS, "-o"])
            .arg(&p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        p
    })
}

fn analyze_args(capture: &Path, dir: &Path, interval_ms: &str) -> Vec<String> {
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    vec![
        "analyze".into(),
        "--interval-ms".into(),
        interval_ms.into(),
        s(capture.to_path_buf()),
        "--json".into(),
        s(dir.join("report.json")),
        "--rpcs".into(),
        s(dir.join("rpcs.jsonl")),
        "--out".into(),
        s(dir.join("out")),
        "--png".into(),
        "-q".into(),
    ]
}

fn spawn(args: &[String]) -> Child {
    Command::new(bin()).args(args).spawn().unwrap()
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig}");
}

/// Every file under `dir` (relative path → bytes), temporary files (hidden) left out.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                todo.push(p);
            } else if !name.starts_with('.') {
                out.insert(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn copy_into(files: &BTreeMap<String, Vec<u8>>, dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    for (name, bytes) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
}

/// `analyze` reading the big capture from a pipe the test feeds: the first `part` of its
/// bytes go in, then the run waits on the pipe, where a signal is sure to find it
/// reading. Returns the child and the pipe.
fn analyze_from_pipe(dir: &Path, part: f64) -> (Child, std::process::ChildStdin) {
    let mut args = analyze_args(Path::new("-"), dir, "100");
    args.retain(|a| a != "--png");
    let mut child = Command::new(bin()).args(&args).stdin(std::process::Stdio::piped()).spawn().unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let bytes = std::fs::read(big()).unwrap();
    let n = (bytes.len() as f64 * part) as usize;
    std::io::Write::write_all(&mut pipe, &bytes[..n]).unwrap();
    // Let it read all of that and block on the pipe.
    std::thread::sleep(Duration::from_millis(500));
    (child, pipe)
}

#[test]
fn sigint_during_analyze_writes_the_report_of_what_was_read() {
    let dir = tmp("int");
    let (child, mut pipe) = analyze_from_pipe(&dir, 0.5);
    signal(&child, "-INT");
    std::thread::sleep(Duration::from_millis(100));
    // The next bytes wake the reader, which sees the flag and stops.
    let rest = std::fs::read(big()).unwrap();
    let half = rest.len() / 2;
    let _ = std::io::Write::write_all(&mut pipe, &rest[half..half + 65_536]);
    let status = child.wait_with_output().unwrap().status;
    drop(pipe);
    assert_eq!(status.code(), Some(5), "exit code of an interrupted run");
    let report: Value = serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["interrupted"], true);
    let f = &report["files"][0];
    assert_eq!(f["complete"], false);
    let frame = f["interrupted_at"]["frame"].as_u64().unwrap();
    let offset = f["interrupted_at"]["offset"].as_u64().unwrap();
    // Stopped where the pipe was: within the half written (and the 64 KiB after it);
    // the frames analysed are exactly those up to the one it names.
    assert!(frame > 1 && offset > half as u64 - 300_000 && offset < half as u64 + 65_536, "{f} (half {half})");
    assert_eq!(f["frames"]["frames"].as_u64(), Some(frame), "{f}");
    // The RPC lines are whole lines, and the tables and page are there.
    let lines = std::fs::read_to_string(dir.join("rpcs.jsonl")).unwrap();
    assert!(lines.ends_with('\n'));
    let mut n = 0;
    for l in lines.lines() {
        serde_json::from_str::<Value>(l).expect("a whole JSON line");
        n += 1;
    }
    assert!(n > 0);
    for t in ["rpcs.parquet", "messages.parquet", "peers.parquet", "report.html"] {
        assert!(dir.join("out").join(t).metadata().unwrap().len() > 0, "{t}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_signal_exits_at_once_and_writes_nothing() {
    let dir = tmp("int2");
    let (child, pipe) = analyze_from_pipe(&dir, 0.3);
    signal(&child, "-INT");
    std::thread::sleep(Duration::from_millis(50));
    signal(&child, "-INT");
    let status = child.wait_with_output().unwrap().status;
    drop(pipe);
    assert_eq!(status.code(), Some(130), "128 + SIGINT");
    assert!(files(&dir).is_empty(), "nothing written in place: {:?}", files(&dir).keys().collect::<Vec<_>>());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_killed_at_any_moment_leaves_each_output_old_or_new_and_whole() {
    let old_dir = tmp("old");
    let new_dir = tmp("new");
    let work = tmp("kill");
    // The old outputs: a complete run with another interval into the same names (the
    // same files, other contents).
    assert!(Command::new(bin()).args(analyze_args(big(), &old_dir, "50")).status().unwrap().success());
    let old = files(&old_dir);
    // The new ones, complete, and how long they take.
    let t = Instant::now();
    assert!(Command::new(bin()).args(analyze_args(big(), &new_dir, "100")).status().unwrap().success());
    let took = t.elapsed();
    let new = files(&new_dir);
    assert_eq!(old.keys().collect::<Vec<_>>(), new.keys().collect::<Vec<_>>());
    assert_ne!(old["report.json"], new["report.json"]);
    let mut seen_new = 0;
    let mut seen_old = 0;
    // Kills spread over the run (and past its end), at moments no two runs share.
    for k in 0..10u32 {
        copy_into(&old, &work);
        let child = spawn(&analyze_args(big(), &work, "100"));
        let at = took.mul_f64((f64::from(k) + 0.37) / 9.0);
        std::thread::sleep(at);
        let _ = Command::new("kill").args(["-KILL", &child.id().to_string()]).status();
        let _ = child.wait_with_output();
        let now = files(&work);
        assert_eq!(now.keys().collect::<Vec<_>>(), old.keys().collect::<Vec<_>>(), "kill at {at:?}");
        for (name, bytes) in &now {
            if *bytes == new[name] {
                seen_new += 1;
            } else if *bytes == old[name] {
                seen_old += 1;
            } else {
                panic!("{name} is neither the old nor the new file after a kill at {at:?}");
            }
        }
    }
    assert!(seen_old > 0 && seen_new > 0, "kills before and after the outputs were renamed");
    for d in [old_dir, new_dir, work] {
        let _ = std::fs::remove_dir_all(d);
    }
}
