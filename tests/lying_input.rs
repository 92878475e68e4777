//! Input that lies (issue 13): headers, records, timestamps, pcapng blocks and gzip streams
//! that say something false. Each is built from fixtures/synth/metadata.pcap (127 frames,
//! 69 with LNet payload, 25 RPCs), and the oracle is that fixture's own analysis: what
//! the lie did not touch must come out the same, and what it touched is named with file,
//! frame and offset.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;

const FRAMES: u64 = 127;

fn fixture() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/synth/metadata.pcap")).unwrap()
}

/// (seconds, fraction, caplen, origlen, data) of every record of the fixture (little endian).
fn records(b: &[u8]) -> Vec<(u32, u32, u32, u32, Vec<u8>)> {
    let u = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let mut out = Vec::new();
    let mut pos = 24;
    while pos + 16 <= b.len() {
        let cap = u(pos + 8) as usize;
        out.push((u(pos), u(pos + 4), cap as u32, u(pos + 12), b[pos + 16..pos + 16 + cap].to_vec()));
        pos += 16 + cap;
    }
    out
}

fn pcap(header: &[u8], recs: &[(u32, u32, u32, u32, Vec<u8>)]) -> Vec<u8> {
    let mut out = header.to_vec();
    for (s, f, c, l, d) in recs {
        for v in [s, f, c, l] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(d);
    }
    out
}

fn dir() -> PathBuf {
    common::scratch_shared("lying")
}

/// Analyzes `bytes` written as `name`: (exit code, stderr, report).
fn analyze(name: &str, bytes: &[u8]) -> (i32, String, Value) {
    let d = dir();
    let f = d.join(name);
    std::fs::write(&f, bytes).unwrap();
    let json = d.join(format!("{name}.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
        .args(["analyze", "-q"])
        .arg(&f)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let r = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stderr).into_owned(), r)
}

fn rpcs(r: &Value) -> u64 {
    r["peers"].as_array().unwrap().iter().map(|p| p["rpcs"].as_u64().unwrap()).sum()
}

fn frames(r: &Value) -> &Value {
    &r["files"][0]["frames"]
}

/// A clean run whose frames, LNet frames and RPCs are the untouched fixture's.
fn assert_as_fixture((code, err, r): (i32, String, Value)) {
    assert_eq!(code, 0, "{err}");
    assert_eq!(frames(&r)["frames"], FRAMES);
    assert_eq!(frames(&r)["lnet_data"], 69);
    assert_eq!(rpcs(&r), 25);
}

#[test]
fn the_untouched_fixture_is_the_oracle() {
    assert_as_fixture(analyze("orig.pcap", &fixture()));
}

#[test]
fn a_header_snaplen_of_zero_or_two_gib_is_not_believed() {
    let b = fixture();
    for snap in [0u32, 1 << 31] {
        let mut h = b[..24].to_vec();
        h[16..20].copy_from_slice(&snap.to_le_bytes());
        let (code, err, r) = analyze(&format!("snap{snap}.pcap"), &pcap(&h, &records(&b)));
        assert_eq!(code, 0, "{err}");
        assert_eq!(frames(&r)["frames"], FRAMES, "snaplen {snap}");
        assert_eq!(rpcs(&r), 25, "snaplen {snap}");
    }
}

#[test]
fn a_record_whose_caplen_exceeds_its_length_is_still_read() {
    let b = fixture();
    let mut recs = records(&b);
    let cap = recs[10].2;
    recs[10].3 = cap - 10;
    recs[30].3 = recs[30].2 - 1;
    let (code, err, r) = analyze("caplen.pcap", &pcap(&b[..24], &recs));
    assert_eq!(code, 0, "{err}");
    // Named once, with file, frame and offset (frame 11 starts at byte 964, as the clock
    // test below also finds); the second lying record is read without another line.
    let want = format!(
        "caplen.pcap: suspect pcap record at offset 964 (frame 11): {cap} bytes captured of a {}-byte frame (caplen > len)",
        cap - 10
    );
    assert!(err.contains(&want), "{err}");
    assert_eq!(err.matches("caplen > len").count(), 1, "{err}");
    // Delivered, not lost: the accounting and the analysis are the fixture's.
    assert_eq!(frames(&r)["frames"], FRAMES);
    assert!(frames(&r)["undecodable"].as_object().unwrap().is_empty(), "{r}");
    assert_eq!(rpcs(&r), 25);
}

#[test]
fn timestamps_forty_years_ahead_or_an_hour_back_are_clock_steps() {
    let b = fixture();
    let mut recs = records(&b);
    recs[10].0 += 40 * 365 * 86_400;
    let (code, err, r) = analyze("ahead.pcap", &pcap(&b[..24], &recs));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("ahead.pcap: frame 11 (offset 964): timestamp 3056740000.003000 s jumps +1261440000.000 s"),
        "{err}"
    );
    assert!(err.contains("frame 12 (offset 1102)"), "back to the true clock: {err}");
    assert_eq!(frames(&r)["clock_steps"], 2);
    assert_eq!(rpcs(&r), 25, "the analysis is the fixture's");
    let span = r["files"][0]["span_ns"].as_array().unwrap();
    assert!(span[1].as_i64().unwrap() - span[0].as_i64().unwrap() < 10_000_000_000, "no 40-year span");

    let mut recs = records(&b);
    recs[10].0 -= 3_600;
    let (code, err, r) = analyze("back.pcap", &pcap(&b[..24], &recs));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("back.pcap: frame 11 (offset 964)") && err.contains("jumps -3600.000 s"), "{err}");
    assert_eq!(frames(&r)["clock_steps"], 1);
    assert_eq!(rpcs(&r), 25);
}

/// The fixture as pcapng with two interfaces of different link types (Ethernet for even
/// frames, raw IP for odd ones: the Ethernet header stripped), µs resolution.
fn two_links() -> (Vec<u8>, Vec<usize>) {
    let b = fixture();
    let block = |t: u32, body: &[u8]| {
        let pad = (4 - body.len() % 4) % 4;
        let tot = (12 + body.len() + pad) as u32;
        let mut v = t.to_le_bytes().to_vec();
        v.extend_from_slice(&tot.to_le_bytes());
        v.extend_from_slice(body);
        v.extend(std::iter::repeat_n(0, pad));
        v.extend_from_slice(&tot.to_le_bytes());
        v
    };
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    let mut out = block(0x0a0d_0d0a, &shb);
    for lt in [1u16, 101] {
        let mut idb = lt.to_le_bytes().to_vec();
        idb.extend_from_slice(&[0, 0]);
        idb.extend_from_slice(&65535u32.to_le_bytes());
        out.extend(block(1, &idb));
    }
    let mut starts = Vec::new();
    for (i, (s, us, cap, len, d)) in records(&b).into_iter().enumerate() {
        let t = u64::from(s) * 1_000_000 + u64::from(us);
        let strip = if i % 2 == 1 { 14 } else { 0 };
        let mut epb = Vec::new();
        for v in [(i % 2) as u32, (t >> 32) as u32, t as u32, cap - strip, len - strip] {
            epb.extend_from_slice(&v.to_le_bytes());
        }
        epb.extend_from_slice(&d[strip as usize..]);
        starts.push(out.len());
        out.extend(block(6, &epb));
    }
    (out, starts)
}

#[test]
fn link_types_that_change_between_interfaces() {
    let (ng, _) = two_links();
    assert_as_fixture(analyze("two.pcapng", &ng));
}

#[test]
fn pcapng_blocks_with_lengths_that_lie_are_skipped_and_the_rest_read() {
    let (ng, starts) = two_links();
    for (name, at, len) in [("seven", 9usize, 7u32), ("huge", 29, 0x7fff_fff0)] {
        let mut b = ng.clone();
        let p = starts[at];
        b[p + 4..p + 8].copy_from_slice(&len.to_le_bytes());
        let (code, err, r) = analyze(&format!("{name}.pcapng"), &b);
        assert_eq!(code, 0, "{err}");
        let what = format!(
            "{name}.pcapng: malformed pcapng record at offset {p} (frame {}): block length {len} is invalid",
            at + 1
        );
        assert!(err.contains(&what) && err.contains("skipped"), "{err}");
        assert_eq!(frames(&r)["frames"], FRAMES, "every frame accounted for");
        assert_eq!(frames(&r)["undecodable"]["malformed_record"], 1);
    }
    // A trailing length that disagrees: the block is skipped, the next one read.
    let mut b = ng.clone();
    let (p, q) = (starts[19], starts[20]);
    b[q - 4..q].copy_from_slice(&((q - p + 4) as u32).to_le_bytes());
    let (code, err, r) = analyze("trailer.pcapng", &b);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("at offset {p} (frame 20)")), "{err}");
    assert_eq!(frames(&r)["frames"], FRAMES);
}

#[test]
fn gzip_streams_concatenated_or_cut_short() {
    use std::io::Write;
    let b = fixture();
    let gz = |bytes: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    };
    // Two members (as `cat a.gz b.gz` makes): read as one stream.
    let half = 24 + records(&b)[..63].iter().map(|r| 16 + r.2 as usize).sum::<usize>();
    let mut two = gz(&b[..half]);
    two.extend(gz(&b[half..]));
    let (code, err, r) = analyze("two.pcap.gz", &two);
    assert_eq!(code, 0, "{err}");
    assert_eq!(frames(&r)["frames"], FRAMES);
    assert_eq!(rpcs(&r), 25);
    // Cut at two thirds: what was read is analysed, the error says where.
    let whole = gz(&b);
    let (code, err, r) = analyze("cut.pcap.gz", &whole[..whole.len() * 2 / 3]);
    assert_eq!(code, 1, "a source that failed: exit 1");
    assert!(err.contains("cut.pcap.gz at offset") && err.contains("of the decompressed stream, after frame"), "{err}");
    assert_eq!(r["files"][0]["complete"], false);
    let n = frames(&r)["frames"].as_u64().unwrap();
    assert!(n > 40 && n < FRAMES, "{n} frames read before the cut");
}
