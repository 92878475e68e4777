//! The real-kernel-TCP captures of fixtures/lab (see its README): every RPC of
//! truth.jsonl shows up as its messages (request, bulk, LNet ACK, reply) with the right
//! portals and match bits and with capture times that agree with the server-side truth
//! times; the messages that do not show up are exactly those whose header fell into bytes
//! the snaplen cut off, and their bytes are exactly the decoder's skipped bytes.

mod common;

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

const LABS: &[&str] = &["lst_write_rtt20_c8_pc8", "lst_read_rtt50_c32_pc8", "ptlrpc_read_rtt20_c8_pc8"];

/// Server-side truth times are taken when the emulator's socket call returns; the capture
/// is taken on the same host. A message the server sends must be captured within this of
/// the truth's `*_wire_start`.
const SEND_TOL_NS: i64 = 100_000;
/// A message the server receives is captured before the server reads its last byte
/// (`*_rcvd`); the server application may read up to a few ms late while it is busy
/// writing bulk data (measured: up to 2.8 ms), never early.
const RECV_LAG_MAX_NS: i64 = 5_000_000;
/// Clock granularity slack (pcap µs timestamps, truth rounded to µs).
const EPS_NS: i64 = 2_000;

/// A reply the server writes while its CONTROL connection's congestion window is full is
/// sent by TCP only when ACKs open the window, up to one RTT later (lst_read_rtt50 frame
/// 5364: written at .398351, on the wire at .448555). Such sends are accepted up to one RTT
/// plus this slack, and counted; they must stay rare.
const CWND_SLACK_NS: i64 = 1_000_000;

#[derive(Clone, Copy)]
enum When {
    /// Server wrote it: first byte captured within SEND_TOL_NS of this time.
    Sent(i64),
    /// Server read it: last byte captured at most RECV_LAG_MAX_NS before this time.
    Received(i64),
}

impl When {
    fn check(self, d: &Value, rtt_ns: i64) -> Option<i64> {
        match self {
            Self::Sent(t) => {
                let dt = d["ts_ns"].as_i64()? - t;
                (-EPS_NS..=rtt_ns + CWND_SLACK_NS).contains(&dt).then_some(dt.abs())
            }
            Self::Received(t) => {
                let dt = t - d["ts_last_ns"].as_i64()?;
                (-EPS_NS..=RECV_LAG_MAX_NS).contains(&dt).then_some(dt.abs())
            }
        }
    }
}

/// (tcp, kind, portal, match bits).
type MsgKey = (String, String, Option<u64>, Option<String>);

fn reverse(tcp: &str) -> String {
    let (a, b) = tcp.split_once("->").unwrap();
    format!("{b}->{a}")
}

fn ns(v: &Value) -> i64 {
    (v.as_f64().unwrap() * 1e9).round() as i64
}

struct Expect {
    tcp: String,
    kind: &'static str,
    portal: Option<u64>,
    match_bits: Option<u64>,
    rpyid: Option<u64>,
    /// For a REPLY: the GET whose return_wmd it carries (by match bits).
    reply_to_get: Option<u64>,
    when: When,
    what: &'static str,
}

fn hex(v: u64) -> Value {
    Value::String(format!("0x{v:x}"))
}

/// The messages a truth RPC must show: request, bulk (GET + REPLY, or PUT, with its
/// LNet ACK), reply, each with the time the lab's socklnd saw it.
fn expectations(t: &Value) -> Vec<Expect> {
    let ctl = t["control_tcp"].as_str().unwrap().to_string();
    let bulk = t["bulk_tcp"].as_str().unwrap().to_string();
    let ss = &t["server_side"];
    let mut exp = vec![Expect {
        tcp: ctl.clone(),
        kind: "PUT",
        portal: t["req_portal"].as_u64(),
        match_bits: t["req_match_bits"].as_u64(),
        rpyid: (t["kind"].as_str().unwrap().starts_with("lst")).then(|| t["rpyid"].as_u64().unwrap()),
        reply_to_get: None,
        when: When::Received(ns(&ss["t_req_rcvd"])),
        what: "request",
    }];
    match t["bulk_lnet"].as_str().unwrap() {
        "GET+REPLY" => {
            exp.push(Expect {
                tcp: reverse(&ctl),
                kind: "GET",
                portal: t["bulk_portal"].as_u64(),
                match_bits: t["bulk_match_bits"].as_u64(),
                rpyid: None,
                reply_to_get: None,
                when: When::Sent(ns(&ss["t_get_wire_start"])),
                what: "bulk GET",
            });
            exp.push(Expect {
                tcp: bulk.clone(),
                kind: "REPLY",
                portal: None,
                match_bits: None,
                rpyid: None,
                reply_to_get: t["bulk_match_bits"].as_u64(),
                when: When::Received(ns(&ss["t_bulk_rcvd"])),
                what: "bulk REPLY",
            });
        }
        "PUT" | "PUT+ACK" => exp.push(Expect {
            tcp: reverse(&bulk),
            kind: "PUT",
            portal: t["bulk_portal"].as_u64(),
            match_bits: t["bulk_match_bits"].as_u64(),
            rpyid: None,
            reply_to_get: None,
            when: When::Sent(ns(&ss["t_bulk_wire_start"])),
            what: "bulk PUT",
        }),
        other => panic!("unknown bulk_lnet {other}"),
    }
    if t["bulk_lnet"] == "PUT+ACK" {
        exp.push(Expect {
            tcp: ctl.clone(),
            kind: "ACK",
            portal: None,
            match_bits: t["bulk_match_bits"].as_u64(),
            rpyid: None,
            reply_to_get: None,
            when: When::Received(ns(&ss["t_bulk_ack_rcvd"])),
            what: "LNet ACK",
        });
    }
    exp.push(Expect {
        tcp: reverse(&ctl),
        kind: "PUT",
        portal: t["reply_portal"].as_u64(),
        match_bits: t["reply_match_bits"].as_u64(),
        rpyid: None,
        reply_to_get: None,
        when: When::Sent(ns(&ss["t_reply_wire_start"])),
        what: "reply",
    });
    exp
}

#[test]
fn lab_captures_show_every_truth_rpc() {
    let dir = common::lab_dir();
    assert!(dir.is_dir(), "{} is missing: the lab captures are part of the test suite", dir.display());
    for lab in LABS {
        let (decoded, summary) = common::decode(&dir.join(lab).join("trace.pcap.zst"));
        let truth = common::read_jsonl(&dir.join(lab).join("truth.jsonl.zst"));
        // Index decoded messages by (tcp, kind, portal, match bits).
        let mut index: HashMap<MsgKey, Vec<&Value>> = HashMap::new();
        for d in &decoded {
            let k = (
                d["tcp"].as_str().unwrap().to_string(),
                d["kind"].as_str().unwrap().to_string(),
                d["portal"].as_u64(),
                d["match_bits"].as_str().map(str::to_string),
            );
            index.entry(k).or_default().push(d);
        }
        let mut by_wmd: HashMap<String, Vec<&Value>> = HashMap::new();
        for d in decoded.iter().filter(|d| d["kind"] == "REPLY") {
            by_wmd.entry(d["tcp"].as_str().unwrap().to_string()).or_default().push(d);
        }
        let mut missing: BTreeMap<String, u64> = BTreeMap::new();
        let mut matched: std::collections::HashSet<(String, u64)> = std::collections::HashSet::new();
        let mut found = 0usize;
        let (mut sends, mut held_by_tcp) = (0usize, 0usize);
        let cfg: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(lab).join("summary.json")).unwrap()).unwrap();
        let rtt_ns = (cfg["config"]["rtt_ms"].as_f64().unwrap() * 1e6) as i64;
        let mut worst = 0i64;
        let mut expected = 0usize;
        // Sizes of each kind of message (header + payload), for the byte accounting.
        for t in &truth {
            let ctl = t["control_tcp"].as_str().unwrap().to_string();
            let size = t["size"].as_u64().unwrap();
            let exp = expectations(t);
            for e in exp {
                expected += 1;
                let cands: Vec<&Value> = match e.reply_to_get {
                    // A REPLY carries no match bits: it answers the GET whose return_wmd it
                    // carries as dst_wmd.
                    Some(mb) => {
                        let gk =
                            (reverse(&ctl), "GET".to_string(), t["bulk_portal"].as_u64(), Some(format!("0x{mb:x}")));
                        let wmds: Vec<&Value> =
                            index.get(&gk).map(|g| g.iter().map(|d| &d["return_wmd"]).collect()).unwrap_or_default();
                        by_wmd
                            .get(&e.tcp)
                            .map(|v| v.iter().copied().filter(|d| wmds.contains(&&d["dst_wmd"])).collect())
                            .unwrap_or_default()
                    }
                    None => {
                        let k = (e.tcp.clone(), e.kind.to_string(), e.portal, e.match_bits.map(|m| format!("0x{m:x}")));
                        index.get(&k).cloned().unwrap_or_default()
                    }
                };
                // Several lst requests share the match bits (the service id): pick by rpyid
                // when it was captured, and the one nearest the truth time.
                let hit = cands
                    .iter()
                    .copied()
                    .filter(|d| e.rpyid.is_none_or(|r| d.get("rpyid").is_none_or(|x| *x == hex(r))))
                    .filter_map(|d| e.when.check(d, rtt_ns).map(|dt| (dt, d)))
                    .min_by_key(|(dt, d)| (*dt, d["frame"].as_u64()));
                match hit {
                    Some((dt, d)) => {
                        found += 1;
                        matched.insert((d["tcp"].as_str().unwrap().to_string(), d["stream_offset"].as_u64().unwrap()));
                        if matches!(e.when, When::Sent(_)) {
                            sends += 1;
                            if dt > SEND_TOL_NS {
                                held_by_tcp += 1;
                            } else {
                                worst = worst.max(dt);
                            }
                        }
                    }
                    None => {
                        let len = match (e.what, t["kind"].as_str().unwrap()) {
                            ("request", "ptlrpc_ost_read") => 96 + 480,
                            ("request", _) => 96 + 160,
                            ("bulk PUT" | "bulk REPLY", _) => 96 + size,
                            ("reply", "ptlrpc_ost_read") => 96 + 448,
                            ("reply", _) => 96 + 160,
                            _ => 96,
                        };
                        *missing.entry(e.tcp.clone()).or_default() += len;
                    }
                }
            }
        }
        // What was not found is exactly what the decoder skipped (headers cut by snaplen), or
        // inferred without the fields this test matches on (a REPLY's handle).
        let mut skipped: BTreeMap<String, u64> = BTreeMap::new();
        for d in decoded.iter().filter(|d| d.get("inferred").is_some()) {
            let key = (d["tcp"].as_str().unwrap().to_string(), d["stream_offset"].as_u64().unwrap());
            if !matched.contains(&key) {
                *skipped.entry(key.0).or_default() += d["wire_len"].as_u64().unwrap();
            }
        }
        for c in &summary.connections {
            for d in &c.dirs {
                if d.bytes_skipped + d.bytes_in_partial_message > 0 {
                    *skipped.entry(d.tcp.clone()).or_default() += d.bytes_skipped + d.bytes_in_partial_message;
                }
            }
        }
        eprintln!(
            "{lab}: {} RPCs, {found}/{expected} messages found, server sends on the wire within {} µs of the truth ({held_by_tcp} of {sends} held back by TCP), skipped {skipped:?}",
            truth.len(),
            worst / 1000
        );
        // Sends held back by TCP are rare, but over-represented among inferred messages: TCP
        // coalesces held-back messages into one segment, which is exactly where headers fall
        // beyond the snaplen (lst_read: 2 of 665 decoded replies, 37 of 37 inferred ones).
        assert!(held_by_tcp * 10 <= sends, "{lab}: too many sends far from the truth time");
        assert_eq!(missing, skipped, "{lab}: messages not found vs bytes skipped");
        assert!(found * 100 >= expected * 90, "{lab}: too few messages found");
    }
}
