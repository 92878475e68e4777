//! `analyze --threads N` gives the single-threaded run's output byte for byte (issue 14):
//! on every committed capture (synthetic scenarios, the 28 lab captures, the public
//! capture, the fuzz regressions that step the clock and coarsen the series), with 2 and 3
//! workers, the JSON report, the RPC lines, the stderr notices and every file of `--out`
//! (CSV tables, report.html) are compared; and on generated captures that coarsen the
//! series after the last message, open connections by the thousand (past the connection
//! limit: the same connections retired whatever the number of threads), reorder, or carry
//! whole frames of bulk payload (which a parallel run maps; one thread maps every
//! whole-frame file, three threads read them). Three workers on two cores also checks that the
//! merge does not depend on which worker runs first. `decode --threads N` is held to one
//! thread's output on the same captures.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every capture under fixtures/ and the analyze fuzz regressions.
fn captures() -> Vec<PathBuf> {
    let root = common::root();
    let mut v: Vec<PathBuf> = common::files_under(&root.join("fixtures"))
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains(".pcap"))
        .collect();
    v.extend(common::files_under(&root.join("fuzz/regressions/analyze")));
    v
}

/// Generated captures that reach what the fixtures do not: a capture long enough to
/// coarsen the series with no message after it (zero-window), connections by the
/// thousand (flood-hello) and past the connection limit (flood-syn: 40,000 connections
/// that stay open, 625 a partition of the limit on average against its 512), reordering
/// everywhere (reorder-storm); and a pcapng capture of many connections (the reader's runs
/// of enhanced packet blocks, which the parallel run's reading thread takes too).
fn generated(dir: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let ng = dir.join("multi-pcapng.pcap");
    let st = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .args(["synth", "--scenario", "multi", "--container", "pcapng", "-o"])
        .arg(&ng)
        .output()
        .unwrap();
    assert!(st.status.success(), "synth multi --container pcapng");
    // Whole frames of bulk payload: a parallel run maps this one by default.
    let full = dir.join("bench-full.pcap");
    let st = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .args(["synth", "--scenario", "bench", "--rpcs", "1", "--snaplen", "65535", "-o"])
        .arg(&full)
        .output()
        .unwrap();
    assert!(st.status.success(), "synth bench --snaplen 65535");
    let mean = mean_record(&full);
    assert!(mean >= 512, "bench-full.pcap's records are those a parallel run maps: {mean} bytes on average");
    let attacks = [("zero-window", 40_000), ("flood-syn", 40_000), ("flood-hello", 5_000), ("reorder-storm", 2_000)];
    // The full-payload capture first: the several-files check takes the last four.
    std::iter::once(full)
        .chain(attacks.iter().map(|(scenario, count)| {
            let cap = dir.join(format!("{scenario}.pcap"));
            let st = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
                .args(["synth", "--scenario", scenario, "--count", &count.to_string(), "-o"])
                .arg(&cap)
                .output()
                .unwrap();
            assert!(st.status.success(), "synth {scenario}");
            cap
        }))
        .chain([ng])
        .collect()
}

/// The mean length, with its 16-byte header, of the records in a little-endian classic
/// pcap file's first MiB (what `CaptureReader::open_threaded` weighs), computed here
/// on its own.
fn mean_record(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let recs = &bytes[24..bytes.len().min(24 + (1 << 20))];
    let (mut at, mut n) = (0, 0);
    while at + 16 <= recs.len() {
        let len = 16 + u32::from_le_bytes(recs[at + 8..at + 12].try_into().unwrap()) as usize;
        if at + len > recs.len() {
            break;
        }
        (at, n) = (at + len, n + 1);
    }
    at / n.max(1)
}

/// A capture whose notices come from both sides of a parallel run, interleaved: TCP
/// segments with a cut data offset (routed by their tuple, found not decodable by the
/// worker), frames with a cut IPv4 header (not routable: the reading thread decodes and
/// reports them) and clock steps (the reading thread), around an LNet connection, for
/// more frames than the batches in flight hold.
fn mixed_notices(dir: &Path) -> PathBuf {
    use lnetcap_synth::pcapw::CaptureWriter;
    use lnetcap_synth::{Container, Link};
    let mut w = CaptureWriter::new(Container::PcapUs, Link::Ethernet, 65535);
    let mut t = 1_000_000_000i64;
    let mut seq = [1000u32, 5000];
    w.packet(t, &common::tcp_packet(0, seq[0] - 1, 0, 0x02, 1000, &[]));
    for i in 0..40_000u32 {
        t += 1_000;
        match i % 1000 {
            // Data offset 4 words (16 bytes < 20): the worker's notice.
            7 => {
                let mut p = common::tcp_packet((i % 2) as usize, seq[0], seq[1], 0x10, 1000, &[]);
                p[14 + 20 + 12] = 0x40;
                w.packet(t, &p);
            }
            // An IPv4 header cut at 10 bytes: the reading thread's notice.
            8 => {
                let p = common::tcp_packet(0, seq[0], seq[1], 0x10, 1000, &[]);
                w.packet(t, &p[..14 + 10]);
            }
            // A timestamp a year ahead: the reading thread's clock step.
            9 if i % 3000 == 9 => {
                w.packet(t + 365 * 86_400_000_000_000, &common::tcp_packet(1, seq[1], seq[0], 0x10, 1000, &[]))
            }
            _ => {
                let d = (i % 2) as usize;
                let pl = [0u8; 64];
                w.packet(t, &common::tcp_packet(d, seq[d], seq[1 - d], 0x18, 1000, &pl));
                seq[d] += 64;
            }
        }
    }
    let cap = dir.join("mixed-notices.pcap");
    std::fs::write(&cap, w.finish()).unwrap();
    cap
}

/// The committed captures and the generated ones (written into `gen`): what both
/// comparisons run on.
fn every_capture(gen: &Path) -> Vec<PathBuf> {
    let mut caps = captures();
    assert!(caps.len() >= 45, "the fixtures are there ({} captures)", caps.len());
    caps.extend(generated(gen));
    caps.push(mixed_notices(gen));
    caps
}

/// Runs analyze with `threads` into `dir`; returns every output, named, and stderr. The
/// one-thread run maps every whole-frame file (`LNETCAP_MAP=1`); two threads map those
/// of large records (the default) and three read everything (`LNETCAP_NO_MAP=1`): the
/// ways of reading are held to one answer here too.
fn run(capture: &Path, threads: u32, dir: &Path) -> (Vec<(String, Vec<u8>)>, String) {
    std::fs::create_dir_all(dir).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_lnetcap"));
    c.env_remove("LNETCAP_MAP").env_remove("LNETCAP_NO_MAP");
    match threads {
        1 => c.env("LNETCAP_MAP", "1"),
        3 => c.env("LNETCAP_NO_MAP", "1"),
        _ => &mut c,
    };
    let o = c
        .arg("analyze")
        .arg(capture)
        .args(["--threads", &threads.to_string(), "--table-format", "csv", "--json"])
        .arg(dir.join("report.json"))
        .arg("--rpcs")
        .arg(dir.join("rpcs.jsonl"))
        .arg("--out")
        .arg(dir.join("out"))
        .arg("-q")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{} --threads {threads}: {err}", capture.display());
    let files = common::tree(dir);
    (files, err)
}

#[test]
fn parallel_output_equals_single_threaded_output_on_every_capture() {
    let gen = common::scratch("parallel-gen");
    let caps = every_capture(&gen);
    let tmp = common::scratch("parallel-runs");
    let mut compared = 0;
    for cap in &caps {
        let (one, err_one) = run(cap, 1, &tmp.join("t1"));
        assert!(one.iter().any(|(n, b)| n == "report.json" && !b.is_empty()), "{}: a report", cap.display());
        if cap.ends_with("flood-syn.pcap") {
            // The table's limit was reached (what the comparison is about on this one).
            let report = &one.iter().find(|(n, _)| n == "report.json").unwrap().1;
            let r: serde_json::Value = serde_json::from_slice(report).unwrap();
            let retired = r["files"][0]["limits"].as_array().and_then(|l| {
                l.iter().find(|h| h["limit"] == "MAX_OPEN_CONNECTIONS").and_then(|h| h["count"].as_u64())
            });
            assert!(retired.is_some_and(|n| n > 1000), "connections retired: {retired:?}");
        }
        for threads in [2, 3] {
            let (many, err_many) = run(cap, threads, &tmp.join(format!("t{threads}")));
            let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
            assert_eq!(names(&one), names(&many), "{} --threads {threads}: the same files", cap.display());
            for ((name, a), (_, b)) in one.iter().zip(&many) {
                assert!(a == b, "{} --threads {threads}: {name} differs from the single-threaded run", cap.display());
                compared += 1;
            }
            assert_eq!(err_one, err_many, "{} --threads {threads}: the same notices", cap.display());
            if cap.ends_with("mixed-notices.pcap") {
                // Both sides spoke, interleaved (what the order is checked on).
                let lines: Vec<&str> = err_one.lines().collect();
                let worker = lines.iter().position(|l| l.contains("frame 9: not decodable")).unwrap();
                let reader = lines.iter().position(|l| l.contains("frame 10: not decodable")).unwrap();
                assert!(worker < reader, "{err_one}");
            }
        }
        std::fs::remove_dir_all(&tmp).ok();
    }
    std::fs::remove_dir_all(&gen).ok();
    eprintln!("{} captures, {compared} output files compared", caps.len());
}

/// Runs `decode --format FORMAT --threads THREADS` on `capture`: (exit code, stdout,
/// stderr).
fn decode(capture: &Path, format: &str, threads: u32) -> Decoded {
    decode_files(&[capture], None, format, threads)
}

/// `decode` of `files` (`-` reads `stdin`, a file given to the child's standard input).
fn decode_files(files: &[&Path], stdin: Option<&Path>, format: &str, threads: u32) -> Decoded {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lnetcap"));
    c.env_remove("LNETCAP_MAP").env_remove("LNETCAP_NO_MAP").arg("decode").args(files);
    c.args(["--format", format, "--threads", &threads.to_string(), "-q"]);
    if let Some(f) = stdin {
        c.stdin(std::fs::File::open(f).unwrap());
    }
    let o = c.output().unwrap();
    (o.status.code(), o.stdout, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A `decode` run's (exit code, stdout, stderr).
type Decoded = (Option<i32>, Vec<u8>, String);

/// The message lines of `decode --format jsonl`'s stdout (the summary is the last line).
fn message_lines(stdout: &[u8]) -> usize {
    stdout.split(|&b| b == b'\n').filter(|l| l.starts_with(b"{\"schema_version\"")).count()
}

/// Two `decode` runs printed the same: exit code, stdout, stderr.
fn same_decode(one: &Decoded, many: &Decoded, what: &str) {
    assert_eq!(one.0, many.0, "{what}: the exit code");
    assert!(one.1 == many.1, "{what}: stdout differs");
    assert_eq!(one.2, many.2, "{what}: the notices");
}

/// `decode --threads N` (the parallel engine without the RPC tracker) prints what one
/// thread prints, byte for byte: every message in the same order, the accounting summary,
/// the notices on stderr and the exit code, on the captures the analyze comparison runs
/// on, in both formats; and on several files in one run, one of them read from stdin.
#[test]
fn parallel_decode_equals_single_threaded_decode_on_every_capture() {
    let gen = common::scratch("parallel-decode-gen");
    let caps = every_capture(&gen);
    let (mut messages, mut busiest) = (0usize, 0usize);
    for cap in &caps {
        for format in ["jsonl", "text"] {
            let one = decode(cap, format, 1);
            assert!(matches!(one.0, Some(0 | 1)), "{} {format}: {}", cap.display(), one.2);
            if format == "jsonl" {
                let n = message_lines(&one.1);
                messages += n;
                busiest = busiest.max(n);
            }
            for threads in [2, 3] {
                same_decode(
                    &one,
                    &decode(cap, format, threads),
                    &format!("{} {format} --threads {threads}", cap.display()),
                );
            }
        }
    }
    // The comparison saw messages, and a capture with many of them.
    assert!(messages > 50_000 && busiest >= 10_000, "{messages} messages, {busiest} in the busiest capture");
    // Several files in one run (each line names its file; connections numbered again in
    // each), one of them from stdin.
    let mut files: Vec<&Path> = caps.iter().rev().take(4).map(PathBuf::as_path).collect();
    files.insert(2, Path::new("-"));
    let stdin = caps.iter().find(|p| p.ends_with("metadata.pcap")).expect("the metadata fixture");
    for format in ["jsonl", "text"] {
        let one = decode_files(&files, Some(stdin), format, 1);
        let lines = message_lines(&one.1);
        assert!(format == "text" || lines > 10_000, "{format}: {lines} message lines from {files:?}");
        same_decode(&one, &decode_files(&files, Some(stdin), format, 2), &format!("{format} {files:?}"));
    }
    std::fs::remove_dir_all(&gen).ok();
}
