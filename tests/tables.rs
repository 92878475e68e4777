//! `lnetcap analyze --out DIR`: the Parquet tables read back by an independent reader
//! (Apache Arrow's pyarrow, row counts also by DuckDB) and checked row by row against the
//! JSON report, the `--rpcs` lines and the decoder's records; the CSV tables against the
//! Parquet ones; docs/tables.md against the column lists.
//!
//! The reader is tests/tools/read_tables.py. Without pyarrow the reader tests print why
//! and pass, unless LNETCAP_REQUIRE_ORACLES=1 (set by .ci/run, which installs it).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use lnetcap_report::tables::{self, Table, Ty};
use serde_json::Value;

fn lnetcap(args: &[&str]) -> std::process::Output {
    let o = Command::new(env!("CARGO_BIN_EXE_lnetcap")).args(args).output().unwrap();
    assert!(o.status.success(), "lnetcap {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

fn tmpdir(name: &str) -> PathBuf {
    common::scratch(&format!("tables-{name}"))
}

/// The tables as pyarrow read them, or `None` (skip) when pyarrow is missing.
fn read_with_pyarrow(pq: &Path, csv: &Path) -> Option<Value> {
    let script = common::root().join("tests/tools/read_tables.py");
    let o = Command::new("python3").arg(&script).arg(pq).arg(csv).output();
    let require = std::env::var("LNETCAP_REQUIRE_ORACLES").is_ok_and(|v| v == "1");
    match o {
        Ok(o) if o.status.success() => Some(serde_json::from_slice(&o.stdout).unwrap()),
        Ok(o) if o.status.code() == Some(3) && !require => {
            eprintln!("SKIPPED: pyarrow is not installed (pip install pyarrow duckdb)");
            None
        }
        Ok(o) => panic!("read_tables.py failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) if !require => {
            eprintln!("SKIPPED: python3: {e}");
            None
        }
        Err(e) => panic!("python3: {e}"),
    }
}

fn hex(v: &Value) -> Value {
    match v.as_str() {
        Some(s) => Value::from(u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()),
        None => Value::Null,
    }
}

/// Float columns compare within 1e-9 relative (Parquet stores the f64 bit for bit; the
/// JSON report prints the shortest round trip, so they are equal in practice).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_f64() || b.is_f64() => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
        _ => a == b,
    }
}

macro_rules! check {
    ($what:expr, $got:expr, $want:expr) => {{
        let (g, w): (Value, Value) = ($got.clone(), $want.clone());
        assert!(same(&g, &w), "{}: table has {g}, reference {w}", $what);
    }};
}

/// The Arrow type names a column of type `ty` may come back as.
fn arrow_types(ty: Ty) -> &'static [&'static str] {
    match ty {
        Ty::I64 => &["int64"],
        Ty::U64 => &["uint64"],
        Ty::F64 => &["double"],
        Ty::Str => &["string", "large_string", "string_view"],
        Ty::Bool => &["bool"],
    }
}

fn check_schema<T: ?Sized>(t: &Table<T>, got: &Value) {
    let schema = got["schema"].as_array().unwrap();
    let names: Vec<&str> = schema.iter().map(|f| f[0].as_str().unwrap()).collect();
    let want: Vec<&str> = std::iter::once("file").chain(t.cols.iter().map(|c| c.name)).collect();
    assert_eq!(names, want, "{}: columns", t.name);
    for (c, f) in t.cols.iter().zip(&schema[1..]) {
        let ty = f[1].as_str().unwrap();
        assert!(arrow_types(c.ty).contains(&ty), "{}.{}: Arrow type {ty}, declared {:?}", t.name, c.name, c.ty);
    }
    let csv: Vec<&str> = got["csv_header"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(csv, want, "{}: CSV header", t.name);
}

/// Every CSV cell says what the Parquet cell says (empty = null).
fn check_csv_equals_parquet(table: &str, got: &Value) {
    let rows = got["rows"].as_array().unwrap();
    let csv = got["csv_rows"].as_array().unwrap();
    assert_eq!(csv.len(), rows.len(), "{table}: CSV rows vs Parquet rows");
    let header: Vec<&str> = got["csv_header"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for (i, (r, c)) in rows.iter().zip(csv).enumerate() {
        for (k, name) in header.iter().enumerate() {
            let text = c[k].as_str().unwrap();
            let v = &r[*name];
            let ok = match v {
                Value::Null => text.is_empty(),
                Value::Bool(b) => text == b.to_string(),
                Value::Number(n) if n.is_f64() => {
                    text.parse::<f64>().is_ok_and(|x| (x - n.as_f64().unwrap()).abs() <= 1e-9 * x.abs())
                }
                Value::Number(n) => text == n.to_string(),
                Value::String(s) => text == s,
                _ => false,
            };
            assert!(ok, "{table} row {i} column {name}: CSV {text:?}, Parquet {v}");
        }
    }
}

/// The peers table against the JSON report's peers.
fn check_peer_rows(got: &Value, report: &Value, lab_file: &str) {
    // peers: the JSON report's peers.
    let rows = got["peers"]["rows"].as_array().unwrap();
    let peers = report["peers"].as_array().unwrap();
    assert_eq!(rows.len(), peers.len(), "peers rows");
    for (r, p) in rows.iter().zip(peers) {
        let what = format!("peer {} of {}", p["client_nid"], p["file"]);
        check!(format!("{what} file"), r["file"], p["file"]);
        check!(format!("{what} server_nid"), r["server_nid"], p["server_nid"]);
        check!(format!("{what} rpcs"), r["rpcs"], p["rpcs"]);
        check!(format!("{what} bytes_read"), r["bytes_read"], p["bytes_read"]);
        check!(format!("{what} throughput"), r["throughput_bytes_per_s"], p["throughput_bytes_per_s"]);
        check!(format!("{what} rtt_min_us"), r["rtt_min_us"], p["rtt_us"]["min"]);
        check!(format!("{what} efficiency"), r["efficiency"], p["model"]["efficiency"]);
        check!(format!("{what} t_rpc"), r["t_rpc_bytes_per_s"], p["model"]["t_rpc_bytes_per_s"]);
        check!(format!("{what} binding_limit"), r["binding_limit"], p["binding_limit"]);
        check!(format!("{what} retransmits"), r["retransmits"], p["tcp"]["retransmits"]);
    }
    let lab_peer = rows.iter().find(|r| r["file"] == lab_file).unwrap();
    assert_eq!(lab_peer["binding_limit"], "lnet_credits", "the lab read is credit bound");
    assert!(lab_peer["advice"].as_str().unwrap().contains("peer_credits="), "advice column: {}", lab_peer["advice"]);
}

/// The rpcs table against the --rpcs lines, in order.
fn check_rpc_rows(got: &Value, rpcs_path: &Path) {
    // rpcs: the --rpcs lines, in order.
    let lines = common::read_jsonl(rpcs_path);
    let rows = got["rpcs"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), lines.len(), "rpcs rows vs --rpcs lines");
    assert!(rows.len() > 352, "both captures' RPCs");
    for (r, l) in rows.iter().zip(&lines) {
        let what = format!("rpc {} of {}", l["id"], l["file"]);
        check!(format!("{what} file"), r["file"], l["file"]);
        check!(format!("{what} id"), r["id"], l["id"]);
        check!(format!("{what} xid"), r["xid"], hex(&l["xid"]));
        check!(format!("{what} op"), r["op"], l["op"]);
        check!(format!("{what} bulk_bytes"), r["bulk_bytes"], l["bytes"]);
        check!(format!("{what} t_start_ns"), r["t_start_ns"], l["t_start_ns"]);
        check!(format!("{what} t_end_ns"), r["t_end_ns"], l["t_end_ns"]);
        check!(format!("{what} latency_us"), r["latency_us"], l["latency_us"]);
        check!(format!("{what} bulk_us"), r["bulk_us"], l["phases"]["bulk_us"]);
        check!(format!("{what} partial"), r["partial"], l["partial"]);
        let missing: Vec<&str> = l["missing"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        check!(format!("{what} missing"), r["missing"], Value::from(missing.join(" ")));
    }
}

/// The messages table against the decoder's records of each file, in order.
fn check_message_rows(got: &Value, files: &[&str]) {
    // messages: the decoder's records of each file, in order.
    let rows = got["messages"]["rows"].as_array().unwrap();
    let mut want = Vec::new();
    for &f in files {
        want.extend(common::decode(Path::new(f)).0.into_iter().map(|m| (f, m)));
    }
    assert_eq!(rows.len(), want.len(), "messages rows vs decoded messages");
    for (r, (f, m)) in rows.iter().zip(&want) {
        let what = format!("message at frame {} of {f}", m["frame"]);
        check!(format!("{what} file"), r["file"], Value::from(*f));
        for (col, key) in [
            ("frame", "frame"),
            ("ts_ns", "ts_ns"),
            ("conn_id", "conn"),
            ("kind", "kind"),
            ("stream_offset", "stream_offset"),
            ("wire_bytes", "wire_len"),
            ("inferred", "inferred"),
            ("src_nid", "src_nid"),
            ("payload_length_bytes", "payload_length"),
            ("opc", "opc"),
        ] {
            let w = if m[key].is_null() && key == "inferred" { Value::Bool(false) } else { m[key].clone() };
            check!(format!("{what} {col}"), r[col], w);
        }
        check!(format!("{what} match_bits"), r["match_bits"], hex(&m["match_bits"]));
    }
}

#[test]
fn tables_read_back_by_an_independent_reader_match_the_report() {
    let lab = common::lab_dir().join("lst_read_rtt50_c32_pc8/trace.pcap.zst");
    let synth = common::root().join("fixtures/synth/ost-write.pcap.zst");
    let files = [synth.to_str().unwrap(), lab.to_str().unwrap()];
    let pq = tmpdir("pq");
    let csv = tmpdir("csv");
    let json = pq.join("report.json");
    let rpcs_path = pq.join("rpcs.jsonl");
    let mut args = files.to_vec();
    args.extend(["--quiet", "--out", pq.to_str().unwrap(), "--json", json.to_str().unwrap()]);
    args.extend(["--rpcs", rpcs_path.to_str().unwrap()]);
    lnetcap(&[&["analyze"], &args[..]].concat());
    let mut args = files.to_vec();
    args.extend(["--quiet", "--out", csv.to_str().unwrap(), "--table-format", "csv"]);
    lnetcap(&[&["analyze"], &args[..]].concat());
    for t in ["rpcs", "messages", "connections", "peers", "timeseries"] {
        assert!(pq.join(format!("{t}.parquet")).is_file(), "{t}.parquet written");
        assert!(csv.join(format!("{t}.csv")).is_file(), "{t}.csv written");
    }

    let Some(got) = read_with_pyarrow(&pq, &csv) else { return };
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();

    check_schema(&tables::RPCS, &got["rpcs"]);
    check_schema(&tables::MESSAGES, &got["messages"]);
    check_schema(&tables::CONNECTIONS, &got["connections"]);
    check_schema(&tables::PEERS, &got["peers"]);
    check_schema(&tables::TIMESERIES, &got["timeseries"]);
    for t in ["rpcs", "messages", "connections", "peers", "timeseries"] {
        check_csv_equals_parquet(t, &got[t]);
        let n = got[t]["rows"].as_array().unwrap().len();
        if let Some(d) = got[t]["duckdb_rows"].as_u64() {
            assert_eq!(d as usize, n, "{t}: DuckDB and pyarrow row counts");
        }
    }

    check_rpc_rows(&got, &rpcs_path);
    check_message_rows(&got, &files);

    check_peer_rows(&got, &report, files[1]);
    let peers = report["peers"].as_array().unwrap();

    // connections: one row per direction of the JSON report's connections.
    let rows = got["connections"]["rows"].as_array().unwrap();
    let dirs: Vec<(&Value, &Value)> = report["connections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["directions"].as_array().unwrap().iter().map(move |d| (c, d)))
        .collect();
    assert_eq!(rows.len(), dirs.len(), "connections rows vs connection directions");
    for (r, (c, d)) in rows.iter().zip(&dirs) {
        let what = format!("connection {} {}", c["id"], d["stream"]["tcp"]);
        check!(format!("{what} file"), r["file"], c["file"]);
        check!(format!("{what} conn_id"), r["conn_id"], c["id"]);
        check!(format!("{what} tcp"), r["tcp"], d["stream"]["tcp"]);
        check!(format!("{what} conn_type"), r["conn_type"], c["conn_type"]);
        check!(format!("{what} segments"), r["segments"], d["stream"]["segments"]);
        check!(format!("{what} messages"), r["messages"], d["stream"]["messages"]);
        check!(format!("{what} retransmits"), r["retransmits"], d["tcp_perf"]["retransmits"]);
        check!(format!("{what} loop_p50_us"), r["loop_p50_us"], d["tcp_perf"]["loop_p50_us"]);
    }

    // timeseries: the peers' intervals and models; the connections' intervals add up to
    // the connections' totals (a separate path through the TCP analysis).
    let rows = got["timeseries"]["rows"].as_array().unwrap();
    let peer_rows: Vec<&Value> = rows.iter().filter(|r| r["scope"] == "peer").collect();
    let want: Vec<(&Value, &Value)> =
        peers.iter().flat_map(|p| p["timeseries"].as_array().unwrap().iter().map(move |t| (p, t))).collect();
    assert_eq!(peer_rows.len(), want.len(), "timeseries peer rows vs peers' intervals");
    let mut bound = 0;
    for (r, (p, t)) in peer_rows.iter().zip(&want) {
        let what = format!("interval {} of peer {}", t["t_ns"], p["client_nid"]);
        check!(format!("{what} t_ns"), r["t_ns"], t["t_ns"]);
        check!(format!("{what} client_nid"), r["client_nid"], p["client_nid"]);
        check!(format!("{what} read"), r["read_bytes_per_s"], t["read_bytes_per_s"]);
        check!(format!("{what} rpcs in flight"), r["rpcs_in_flight_max"], t["rpcs_in_flight_max"]);
        let model = p["intervals"].as_array().unwrap().iter().find(|m| m["t_ns"] == t["t_ns"]);
        match model {
            Some(m) => {
                check!(format!("{what} binding_limit"), r["binding_limit"], m["binding_limit"]);
                check!(format!("{what} t_model"), r["t_model_bytes_per_s"], m["t_model_bytes_per_s"]);
                check!(format!("{what} rtt_min_us"), r["rtt_min_us"], m["rtt_us"]["min_us"]);
                bound += 1;
            }
            None => check!(format!("{what} binding_limit"), r["binding_limit"], Value::Null),
        }
    }
    assert!(bound > 20, "intervals with a model: {bound}");
    let mut sums: BTreeMap<(String, u64, String), (u64, f64)> = BTreeMap::new();
    let interval_s = 0.1;
    for r in rows.iter().filter(|r| r["scope"] == "connection") {
        let key =
            (r["file"].as_str().unwrap().into(), r["conn_id"].as_u64().unwrap(), r["tcp"].as_str().unwrap().into());
        let e = sums.entry(key).or_default();
        e.0 += r["retransmits"].as_u64().unwrap();
        e.1 += r["payload_bytes_per_s"].as_f64().unwrap() * interval_s;
    }
    let conn_rows = got["connections"]["rows"].as_array().unwrap();
    for c in conn_rows {
        let key =
            (c["file"].as_str().unwrap().into(), c["conn_id"].as_u64().unwrap(), c["tcp"].as_str().unwrap().into());
        let (retx, bytes) = sums.get(&key).copied().unwrap_or_default();
        assert_eq!(retx, c["retransmits"].as_u64().unwrap(), "{key:?}: retransmits over intervals vs total");
        let total = c["payload_bytes"].as_u64().unwrap() as f64;
        assert!((bytes - total).abs() <= 1.0, "{key:?}: payload over intervals {bytes} vs total {total}");
    }
}

#[test]
fn docs_tables_md_lists_every_column() {
    let path = common::root().join("docs/tables.md");
    let want = tables::tables_doc();
    if std::env::var("UPDATE_DOCS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/tables.md is not the column lists of tables.rs: run UPDATE_DOCS=1 cargo test --test tables"
    );
}
