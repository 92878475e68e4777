//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use lnetcap_analysis::Quiet;
use lnetcap_capture::CaptureReader;
use lnetcap_lnet::pipeline::{DecodeConfig, DecodeSummary};
use lnetcap_lnet::record::MessageRecord;
use lnetcap_lnet::LnetEvent;
use serde_json::Value;

/// Repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A test's scratch directory, emptied and created: `<name>` under cargo's
/// `CARGO_TARGET_TMPDIR` (`target/tmp`). Fixed names, not one per process: a run leaves at
/// most one of each behind, overwritten by the next run and removed by `cargo clean`, where
/// scratch under /tmp named by process id piled up run after run (about 70 files and
/// directories a run, a 176 MB capture among them). Tests that run at once need names of
/// their own.
pub fn scratch(name: &str) -> PathBuf {
    let d = scratch_shared(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A scratch directory several tests of one binary write into at once (files of names of
/// their own): created if missing, never emptied.
pub fn scratch_shared(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The real-kernel-TCP lab captures, vendored into the repository (fixtures/lab/README.md).
pub fn lab_dir() -> PathBuf {
    root().join("fixtures/lab")
}

/// Decoded records (as JSON values, exactly as `decode --format jsonl` writes them) and the
/// accounting of one capture.
pub fn decode(path: &Path) -> (Vec<Value>, DecodeSummary) {
    let mut reader = CaptureReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    let name = path.display().to_string();
    let d = lnetcap_analysis::decode_source(&name, &mut reader, DecodeConfig::default(), &mut Quiet, |pipe, events| {
        for ev in events.drain(..) {
            if let LnetEvent::Message(m) = ev {
                let tcp = pipe.connection(m.conn).map(|c| c.tuple(m.dir)).unwrap_or_default();
                out.push(serde_json::to_value(MessageRecord::from_message(&m, tcp)).unwrap());
            }
        }
        Ok(())
    })
    .unwrap();
    assert!(d.complete, "{name}: not read to its end");
    (out, d.pipe.summary())
}

/// A capture of `n` Ethernet/IPv4/TCP packets of HTTP requests (port 80, no LNet), one
/// per µs, left open for more packets.
pub fn http_capture(n: u32) -> lnetcap_synth::pcapw::CaptureWriter {
    use lnetcap_synth::pcapw::{build_packet, CaptureWriter, TcpPacket};
    use lnetcap_synth::{Container, Link};
    let mut w = CaptureWriter::new(Container::PcapUs, Link::Ethernet, 65535);
    for i in 0..n {
        let p = build_packet(
            Link::Ethernet,
            &TcpPacket {
                src: "192.0.2.1".parse().unwrap(),
                dst: "192.0.2.2".parse().unwrap(),
                sport: 40000,
                dport: 80,
                seq: 1000 + i * 100,
                ack: 0,
                flags: 0x18,
                window: 100,
                options: &[],
                payload: b"GET / HTTP/1.1\r\nHost: example\r\n\r\n",
                ip_id: i as u16,
            },
        );
        w.packet(i64::from(i) * 1000, &p);
    }
    w
}

/// Reads a JSON-lines file, zstd-compressed when its name ends in `.zst`.
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let bytes = if path.extension().is_some_and(|e| e == "zst") {
        zstd::decode_all(&bytes[..]).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    } else {
        bytes
    };
    let text = String::from_utf8(bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Checks a peer's per-interval congestion-window estimates (`intervals[].cwnd_estimate`
/// of `analyze --json`) against the simulator's window (`cwnd` truth records, per 100 ms of
/// sender time): an estimate never exceeds the sum, over the bulk sender's directions, of
/// the largest true window in its interval or the one before (the capture sees the sender's
/// flight up to a round trip late), plus one MSS per direction for the sampling. With
/// `cwnd_limited`, the sender always had data waiting, so the estimate must also reach half
/// the smallest true window of its interval. Returns the intervals checked.
pub fn check_cwnd_against_truth(peer: &Value, truth: &[Value], cwnd_limited: bool) -> usize {
    use std::collections::HashMap;
    let reads = peer["bytes_read"].as_u64().unwrap() > peer["bytes_written"].as_u64().unwrap();
    let server = peer["connections"][0]["tcp"].as_str().unwrap().rsplit("->").next().unwrap().to_string();
    // (direction, bucket) → (min, max)
    let mut cw: HashMap<(String, i64), (u64, u64)> = HashMap::new();
    let mut dirs = std::collections::BTreeSet::new();
    for r in truth.iter().filter(|r| r["type"] == "cwnd") {
        let tcp = r["tcp"].as_str().unwrap();
        // Bulk flows from the server on reads (its direction starts with its endpoint).
        if tcp.starts_with(&server) != reads {
            continue;
        }
        dirs.insert(tcp.to_string());
        cw.insert(
            (tcp.to_string(), r["t_ns"].as_i64().unwrap()),
            (r["min_bytes"].as_u64().unwrap(), r["max_bytes"].as_u64().unwrap()),
        );
    }
    let mut n = 0;
    for iv in peer["intervals"].as_array().unwrap() {
        let Some(est) = iv["cwnd_estimate"].as_u64() else { continue };
        let t = iv["t_ns"].as_i64().unwrap();
        let get = |d: &String, b: i64| cw.get(&(d.clone(), b)).copied();
        let hi: u64 = dirs
            .iter()
            .map(|d| [t, t - 100_000_000].iter().filter_map(|&b| get(d, b)).map(|x| x.1).max().unwrap_or(0))
            .sum();
        let slack = 9000 * dirs.len() as u64;
        assert!(est <= hi + slack, "interval {t}: estimate {est} above the true window {hi}");
        if cwnd_limited {
            let lo: u64 = dirs.iter().filter_map(|d| get(d, t)).map(|x| x.0).sum();
            assert!(2 * est >= lo, "interval {t}: estimate {est} below half the true window {lo}");
        }
        n += 1;
    }
    n
}

/// A NID from its text form.
pub fn nid(s: &str) -> lnetcap_lnet::nid::Nid {
    lnetcap_lnet::nid::Nid::parse(s).unwrap()
}

/// Appends one LNet message (ksock header with its zero-copy cookie, LNet header with
/// NID4 addresses and the Lustre pid, payload) to `v`.
pub fn lnet(
    v: &mut Vec<u8>,
    src: &str,
    dst: &str,
    t: u32,
    d: lnetcap_lnet::wire::LnetDetail,
    payload: &[u8],
    cookie: u64,
) {
    use lnetcap_lnet::wire::consts::{KSOCK_LNET, PID_LUSTRE};
    use lnetcap_lnet::wire::{KsockHdr, LnetHdr, NID4};
    KsockHdr { msg_type: KSOCK_LNET, csum: 0, zc_req_cookie: cookie, zc_ack_cookie: 0 }.emit(v);
    LnetHdr {
        dest_nid: nid(dst),
        src_nid: nid(src),
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        msg_type: t,
        payload_length: payload.len() as u32,
        detail: Some(d),
        cut: None,
    }
    .emit(NID4, v);
    v.extend_from_slice(payload);
}

/// A socklnd V3 HELLO of a CONTROL connection from `src` to `dst`.
pub fn hello(src: &str, dst: &str) -> Vec<u8> {
    use lnetcap_lnet::wire::consts::PID_LUSTRE;
    lnetcap_lnet::wire::Hello {
        version: 3,
        flip: false,
        src_nid: nid(src),
        dst_nid: Some(nid(dst)),
        src_pid: PID_LUSTRE,
        dst_pid: 0,
        src_incarnation: 0x17a5_0000_0000_0001,
        dst_incarnation: 0,
        conn_type: lnetcap_lnet::wire::conn_type::CONTROL,
        ips: vec![],
    }
    .emit()
}

/// An Ethernet frame of one TCP segment between the test client 10.0.0.2:1023 (`d` = 0
/// sends) and the server 10.0.0.1:988 (`d` = 1 sends).
pub fn tcp_packet(d: usize, seq: u32, ack: u32, flags: u8, window: u16, payload: &[u8]) -> Vec<u8> {
    use lnetcap_synth::pcapw::{build_packet, Link, TcpPacket};
    let ip = ["10.0.0.2".parse().unwrap(), "10.0.0.1".parse().unwrap()];
    let ports = [1023u16, 988];
    build_packet(
        Link::Ethernet,
        &TcpPacket {
            src: ip[d],
            dst: ip[1 - d],
            sport: ports[d],
            dport: ports[1 - d],
            seq,
            ack,
            flags,
            window,
            options: &[],
            payload,
            ip_id: 0,
        },
    )
}

/// A headless Chromium: $CHROMIUM, else the first of the usual names on PATH.
pub fn chromium() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    for name in ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"] {
        if let Ok(o) = std::process::Command::new("sh").arg("-c").arg(format!("command -v {name}")).output() {
            if o.status.success() {
                return Some(PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
            }
        }
    }
    None
}

/// A PNG's size and pixels (RGBA).
pub fn decode_png(path: &Path) -> (u32, u32, Vec<[u8; 4]>) {
    let dec = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let buf = &buf[..info.buffer_size()];
    let px: Vec<[u8; 4]> = match info.color_type {
        png::ColorType::Rgb => buf.chunks(3).map(|c| [c[0], c[1], c[2], 255]).collect(),
        png::ColorType::Rgba => buf.chunks(4).map(|c| [c[0], c[1], c[2], c[3]]).collect(),
        t => panic!("{}: colour type {t:?}", path.display()),
    };
    (info.width, info.height, px)
}

/// Pixels within 6 of a colour.
pub fn count_color(px: &[[u8; 4]], rgb: [u8; 3]) -> usize {
    px.iter().filter(|p| (0..3).all(|i| (i32::from(p[i]) - i32::from(rgb[i])).abs() <= 6)).count()
}

/// Screenshots `page` in headless Chromium at `size` into `shot`; the browser's stderr on
/// failure.
pub fn screenshot(browser: &Path, page: &Path, shot: &Path, size: (u32, u32), profile: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(shot);
    let o = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-extensions",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size={},{}", size.0, size.1))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .map_err(|e| e.to_string())?;
    if shot.is_file() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).to_string())
    }
}

/// Peak memory of one run, MiB: the VmHWM of /proc/PID/status sampled while it ran and
/// getrusage of the child at its exit (tests/tools/peak_rss.py).
#[derive(Debug, Clone, Copy)]
pub struct PeakRss {
    pub proc_hwm_mib: f64,
    pub rusage_mib: f64,
    /// Samples of /proc taken while it ran, and in how many a capture file was mapped.
    pub samples: u32,
    pub mapped_samples: u32,
}

impl PeakRss {
    /// The larger of the two.
    pub fn mib(&self) -> f64 {
        self.proc_hwm_mib.max(self.rusage_mib)
    }
}

/// Runs `lnetcap analyze -q CAPTURE --json JSON` under the RSS probe; returns the report
/// and the peak RSS. Panics (with stderr) when the run fails.
pub fn analyze_under_rss_probe(capture: &Path, json: &Path) -> (Value, PeakRss) {
    analyze_under_rss_probe_with(capture, json, &[], &[])
}

/// [`analyze_under_rss_probe`] with more options for `analyze` (`--threads 1`) and
/// variables set in its environment (`LNETCAP_MAP=1`).
pub fn analyze_under_rss_probe_with(
    capture: &Path,
    json: &Path,
    extra: &[&str],
    vars: &[(&str, &str)],
) -> (Value, PeakRss) {
    let mut args: Vec<&std::ffi::OsStr> = ["analyze", "-q"].iter().map(std::ffi::OsStr::new).collect();
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    args.extend([capture.as_os_str(), "--json".as_ref(), json.as_os_str()]);
    let (_, peak) = lnetcap_under_rss_probe(&args, vars);
    let report = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    (report, peak)
}

/// Runs `lnetcap ARGS` under the RSS probe with `vars` in its environment; returns its
/// stdout and the peak RSS. Panics (with stderr) when the run fails.
pub fn lnetcap_under_rss_probe(args: &[&std::ffi::OsStr], vars: &[(&str, &str)]) -> (Vec<u8>, PeakRss) {
    // The map is what the test asks for, not what the developer's shell says.
    let out = std::process::Command::new("python3")
        .env_remove("LNETCAP_MAP")
        .env_remove("LNETCAP_NO_MAP")
        .envs(vars.iter().copied())
        .arg(root().join("tests/tools/peak_rss.py"))
        .arg(env!("CARGO_BIN_EXE_lnetcap"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lnetcap {args:?}: {err}");
    let kib = |key: &str| -> f64 {
        err.lines()
            .rev()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {err}"))
    };
    let peak = PeakRss {
        proc_hwm_mib: kib("proc_hwm_kib=") / 1024.0,
        rusage_mib: kib("peak_rss_kib=") / 1024.0,
        samples: kib("samples=") as u32,
        mapped_samples: kib("pcap_mapped_samples=") as u32,
    };
    (out.stdout, peak)
}

/// Every file under `dir`, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut walk = vec![dir.to_path_buf()];
    while let Some(d) = walk.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// Every file under `dir`, relative, with its bytes, sorted by name.
pub fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    files_under(dir)
        .into_iter()
        .map(|p| (p.strip_prefix(dir).unwrap().display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}
