//! `lnetcap batch` end to end on an archive built from the fixtures: a lab capture split
//! at arbitrary packet boundaries into a 5-file tcpdump ring (two pieces gzip, one zstd),
//! a .tar.zst of three synthetic captures and a README, a truncated capture, a text file
//! named like a capture and a README. Oracles: `lnetcap analyze` of the unsplit capture
//! and of each archived file (the ring and the members must give the same report), the
//! fixture's construction (what must fail, what must be skipped), and DuckDB and pyarrow
//! reading the Parquet dataset in place (tests/tools/read_dataset.py).

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const LAB: &str = "lst_read_rtt10_c6_pc8";
/// Packet indexes where the ring is cut (arbitrary, uneven).
const CUTS: [usize; 4] = [9_001, 23_457, 23_458, 51_234];
const MEMBERS: [&str; 3] = ["lst-write.pcap", "metadata.pcap", "ost-small.pcap"];

fn tmpdir(name: &str) -> PathBuf {
    common::scratch(&format!("batch-{name}"))
}

fn lab_pcap() -> Vec<u8> {
    let z = std::fs::read(common::lab_dir().join(LAB).join("trace.pcap.zst")).unwrap();
    zstd::decode_all(&z[..]).unwrap()
}

/// A classic little-endian pcap's header and its records.
fn records(pcap: &[u8]) -> (&[u8], Vec<&[u8]>) {
    assert_eq!(pcap[..4], [0xd4, 0xc3, 0xb2, 0xa1], "the lab capture is little-endian µs pcap");
    let mut recs = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let caplen = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        recs.push(&pcap[at..at + 16 + caplen]);
        at += 16 + caplen;
    }
    assert_eq!(at, pcap.len());
    (&pcap[..24], recs)
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// Builds the archive in `dir/in`; returns the unsplit lab capture's path.
fn build_archive(dir: &Path) -> PathBuf {
    let input = dir.join("in");
    std::fs::create_dir_all(&input).unwrap();
    let full = lab_pcap();
    let unsplit = dir.join("unsplit.pcap");
    std::fs::write(&unsplit, &full).unwrap();
    let (header, recs) = records(&full);
    let mut bounds = vec![0];
    bounds.extend(CUTS);
    bounds.push(recs.len());
    for (k, w) in bounds.windows(2).enumerate() {
        let mut piece = header.to_vec();
        recs[w[0]..w[1]].iter().for_each(|r| piece.extend_from_slice(r));
        let (name, bytes) = match k {
            1 | 3 => (format!("ring.pcap0{k}.gz"), gzip(&piece)),
            2 => (format!("ring.pcap0{k}.zst"), zstd::encode_all(&piece[..], 3).unwrap()),
            _ => (format!("ring.pcap0{k}"), piece),
        };
        std::fs::write(input.join(name), bytes).unwrap();
    }
    let lossy = std::fs::read(common::root().join("fixtures/synth/lossy.pcap")).unwrap();
    std::fs::write(input.join("truncated.pcap"), &lossy[..lossy.len() * 3 / 5]).unwrap();
    std::fs::write(input.join("notes.pcap"), b"not a capture: notes of the incident\n").unwrap();
    std::fs::write(input.join("README.txt"), b"what these files are\n").unwrap();
    unsplit
}

/// Writes the tar.zst of MEMBERS (built apart so its bytes are flushed before use).
fn write_tar(dir: &Path) {
    let f = std::fs::File::create(dir.join("in/incident.tar.zst")).unwrap();
    let enc = zstd::Encoder::new(f, 3).unwrap().auto_finish();
    let mut tar = tar::Builder::new(enc);
    for m in MEMBERS {
        tar.append_path_with_name(common::root().join("fixtures/synth").join(m), format!("incident/{m}")).unwrap();
    }
    let readme = b"captures of the incident\n";
    let mut h = tar::Header::new_gnu();
    h.set_size(readme.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append_data(&mut h, "incident/README", &readme[..]).unwrap();
    tar.into_inner().unwrap().flush().unwrap();
}

fn archive(name: &str) -> (PathBuf, PathBuf) {
    let dir = tmpdir(name);
    let unsplit = build_archive(&dir);
    write_tar(&dir);
    (dir, unsplit)
}

fn lnetcap(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lnetcap")).args(args).current_dir(cwd).output().unwrap()
}

fn json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// A report without the names of its files (a ring is named by its pattern).
fn anonymous(mut r: Value) -> Value {
    for key in ["peers", "connections"] {
        for x in r[key].as_array_mut().unwrap() {
            x.as_object_mut().unwrap().remove("file");
        }
    }
    r["files"][0].as_object_mut().unwrap().remove("file");
    r
}

fn analyze_json(file: &Path, dir: &Path) -> Value {
    let out = dir.join("analyze.json");
    let o = lnetcap(&["analyze", "-q", "--json", out.to_str().unwrap(), file.to_str().unwrap()], dir);
    assert!(o.status.success(), "{}", stderr(&o));
    json(&out)
}

fn capture<'m>(m: &'m Value, name: &str) -> &'m Value {
    m["units"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|u| u["captures"].as_array().unwrap())
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no capture {name} in the manifest"))
}

#[test]
fn batch_groups_the_ring_analyses_the_archive_and_records_failures() {
    let (dir, unsplit) = archive("main");
    let o = lnetcap(&["batch", "in", "--out", "out", "--html"], &dir);
    assert_eq!(o.status.code(), Some(1), "two inputs fail: exit 1\n{}", stderr(&o));
    let m = json(&dir.join("out/manifest.json"));
    let status = |p: &str| {
        let i = m["inputs"].as_array().unwrap().iter().find(|i| i["path"] == p).unwrap();
        (i["status"].as_str().unwrap().to_string(), i["error"].as_str().unwrap_or("").to_string())
    };
    assert_eq!(status("in/truncated.pcap").0, "failed");
    assert!(status("in/truncated.pcap").1.contains("truncated"), "{:?}", status("in/truncated.pcap"));
    assert_eq!(status("in/notes.pcap"), ("failed".into(), "not a capture: no pcap, pcapng or tar header".into()));
    assert_eq!(status("in/README.txt").0, "skipped");
    assert_eq!(status("in/ring.pcap02.zst").0, "ok");
    assert_eq!(status("in/incident.tar.zst").0, "ok");

    // The ring: one capture of 5 pieces in time order, every cut joined, and the same
    // report as the unsplit capture.
    let ring = capture(&m, "in/ring.pcap*");
    let pieces: Vec<&str> = ring["pieces"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert_eq!(
        pieces,
        ["in/ring.pcap00", "in/ring.pcap01.gz", "in/ring.pcap02.zst", "in/ring.pcap03.gz", "in/ring.pcap04"]
    );
    assert!(ring["cuts"].as_array().unwrap().iter().all(|c| c["joined"] == true), "{}", ring["cuts"]);
    let id = ring["id"].as_str().unwrap();
    let got = json(&dir.join("out/captures").join(id).join("report.json"));
    let want = analyze_json(&unsplit, &dir);
    assert_eq!(anonymous(got.clone()), anonymous(want.clone()), "ring report differs from the unsplit capture's");
    assert!(!want["peers"].as_array().unwrap().is_empty());
    assert!(dir.join("out/captures").join(id).join("report.html").is_file());

    // Archive members: each the same as `analyze` of the file; the README skipped.
    for mname in MEMBERS {
        let c = capture(&m, &format!("in/incident.tar.zst:incident/{mname}"));
        let got = json(&dir.join("out/captures").join(c["id"].as_str().unwrap()).join("report.json"));
        let want = analyze_json(&common::root().join("fixtures/synth").join(mname), &dir);
        assert_eq!(anonymous(got), anonymous(want), "{mname}");
    }
    let unit = m["units"].as_array().unwrap().iter().find(|u| u["key"] == "in/incident.tar.zst").unwrap();
    assert_eq!(unit["skipped_members"], serde_json::json!(["incident/README"]));
    // The truncated file still has its report, marked incomplete.
    assert_eq!(capture(&m, "in/truncated.pcap")["complete"], false);

    check_dataset(&dir.join("out"), &m, &unsplit, &dir);
}

/// The Parquet dataset, read in place by DuckDB and pyarrow, against the JSON reports.
fn check_dataset(out: &Path, m: &Value, unsplit: &Path, dir: &Path) {
    let require = std::env::var("LNETCAP_REQUIRE_ORACLES").is_ok_and(|v| v == "1");
    let o = Command::new("python3").arg(common::root().join("tests/tools/read_dataset.py")).arg(out).output();
    let d: Value = match o {
        Ok(o) if o.status.success() => serde_json::from_slice(&o.stdout).unwrap(),
        Ok(o) if o.status.code() == Some(3) && !require => {
            eprintln!("SKIPPED dataset check: {}", stderr(&o));
            return;
        }
        Ok(o) => panic!("read_dataset.py: {}", stderr(&o)),
        Err(e) if !require => {
            eprintln!("SKIPPED dataset check: python3: {e}");
            return;
        }
        Err(e) => panic!("python3: {e}"),
    };
    assert_eq!(d["duckdb"], d["pyarrow"], "DuckDB and pyarrow read the same dataset");
    let captures: Vec<&Value> =
        m["units"].as_array().unwrap().iter().flat_map(|u| u["captures"].as_array().unwrap()).collect();
    assert_eq!(captures.len(), 1 + MEMBERS.len() + 1);
    for c in &captures {
        let id = c["id"].as_str().unwrap();
        let report = json(&out.join("captures").join(id).join("report.json"));
        assert_eq!(d["duckdb"]["rpcs"][id], c["rpcs"], "{id}: rpcs rows");
        let peers = report["peers"].as_array().unwrap();
        assert_eq!(d["duckdb"]["peers"][id].as_u64().unwrap_or(0), peers.len() as u64, "{id}: peers rows");
        for p in peers {
            let row = d["peers_duckdb"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| {
                    r["capture"] == id && r["client_nid"] == p["client_nid"] && r["server_nid"] == p["server_nid"]
                })
                .unwrap_or_else(|| panic!("{id}: no peers row for {}", p["client_nid"]));
            assert_eq!(row["rpcs"], p["rpcs"]);
            assert_eq!(row["binding_limit"], p["binding_limit"]);
            assert_eq!(row["file"], c["name"]);
            let (a, b) = (row["throughput_bytes_per_s"].as_f64(), p["throughput_bytes_per_s"].as_f64());
            assert_eq!(a.is_some(), b.is_some(), "{id}: throughput null in one of them");
            if let (Some(a), Some(b)) = (a, b) {
                assert!((a - b).abs() <= 1e-9 * b.abs(), "{id}: throughput {a} vs {b}");
            }
        }
    }
    assert_eq!(d["peers_duckdb"], d["peers_pyarrow"]);
    // The ring's RPC rows are the unsplit capture's RPC lines.
    let lines = lnetcap(&["analyze", "-q", "--rpcs", "-", unsplit.to_str().unwrap()], dir).stdout;
    let ring = capture(m, "in/ring.pcap*");
    assert_eq!(
        d["duckdb"]["rpcs"][ring["id"].as_str().unwrap()],
        lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count()
    );
    let inputs = d["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), m["inputs"].as_array().unwrap().len());
    assert_eq!(inputs.iter().filter(|i| i["status"] == "failed").count(), 2);
}

fn mtime(p: &Path) -> std::time::SystemTime {
    std::fs::metadata(p).unwrap().modified().unwrap()
}

fn summary_line(o: &Output) -> String {
    stderr(o).lines().find(|l| l.contains("units:")).unwrap_or_default().to_string()
}

#[test]
fn rerun_analyses_nothing_and_a_touched_file_redoes_only_its_group() {
    let (dir, _) = archive("rerun");
    let run = || lnetcap(&["batch", "in", "--out", "out"], &dir);
    let first = run();
    assert!(summary_line(&first).contains("3 units: 3 analysed, 0 up to date"), "{}", stderr(&first));
    let m = json(&dir.join("out/manifest.json"));
    let report =
        |name: &str| dir.join("out/captures").join(capture(&m, name)["id"].as_str().unwrap()).join("report.json");
    let (ring, member) = (report("in/ring.pcap*"), report("in/incident.tar.zst:incident/metadata.pcap"));
    let (t_ring, t_member) = (mtime(&ring), mtime(&member));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let again = run();
    assert!(summary_line(&again).contains("3 units: 0 analysed, 3 up to date"), "{}", stderr(&again));
    assert_eq!(again.status.code(), Some(1), "the failures are still reported");
    assert_eq!((mtime(&ring), mtime(&member)), (t_ring, t_member));
    assert_eq!(json(&dir.join("out/manifest.json")), m);
    // Touch one piece of the ring: its group alone is analysed again.
    let piece = std::fs::File::options().write(true).open(dir.join("in/ring.pcap03.gz")).unwrap();
    piece.set_modified(std::time::SystemTime::now()).unwrap();
    drop(piece);
    let touched = run();
    assert!(summary_line(&touched).contains("3 units: 1 analysed, 2 up to date"), "{}", stderr(&touched));
    assert_ne!(mtime(&ring), t_ring);
    assert_eq!(mtime(&member), t_member);
    // --force redoes everything.
    let forced = lnetcap(&["batch", "in", "--out", "out", "--force"], &dir);
    assert!(summary_line(&forced).contains("3 units: 3 analysed, 0 up to date"), "{}", stderr(&forced));
}

pub(crate) use common::tree;

#[test]
fn shards_merged_equal_the_single_run_byte_for_byte() {
    let (dir, _) = archive("shards");
    let o = lnetcap(&["batch", "in", "--out", "single", "--html"], &dir);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let mut shard_dirs = Vec::new();
    let mut captures = 0;
    for k in 0..4 {
        let out = format!("shards/{k}");
        let o = lnetcap(&["batch", "in", "--out", &out, "--html", "--shard", &format!("{k}/4")], &dir);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
        captures += json(&dir.join(&out).join("manifest.json"))["units"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["captures"].as_array().unwrap().len())
            .sum::<usize>();
        shard_dirs.push(out);
    }
    assert_eq!(captures, 1 + MEMBERS.len() + 1, "every capture in exactly one shard");
    // A temporary a killed shard left behind is not part of its dataset: the merge skips it.
    let part = (0..4)
        .find_map(|k| std::fs::read_dir(dir.join(format!("shards/{k}/rpcs"))).ok()?.next()?.ok())
        .expect("a shard with an rpcs partition")
        .path();
    std::fs::write(part.join(".part-0.parquet.stale.tmp"), b"PAR1 half").unwrap();
    let mut args = vec!["batch", "--merge"];
    args.extend(shard_dirs.iter().map(String::as_str));
    args.extend(["--out", "merged"]);
    let o = lnetcap(&args, &dir);
    assert_eq!(o.status.code(), Some(1), "merge reports the failed inputs: {}", stderr(&o));
    let (single, merged) = (tree(&dir.join("single")), tree(&dir.join("merged")));
    assert_eq!(single.iter().map(|f| &f.0).collect::<Vec<_>>(), merged.iter().map(|f| &f.0).collect::<Vec<_>>());
    for (a, b) in single.iter().zip(&merged) {
        assert!(a.1 == b.1, "{} differs between the single run and the merged shards", a.0);
    }
}

#[test]
fn pieces_that_do_not_follow_on_are_not_joined() {
    let dir = tmpdir("split");
    let input = dir.join("in");
    std::fs::create_dir_all(&input).unwrap();
    // Two captures named like a ring whose packets overlap in time.
    let synth = common::root().join("fixtures/synth");
    std::fs::copy(synth.join("lst-read.pcap"), input.join("night1.pcap")).unwrap();
    std::fs::copy(synth.join("lst-write.pcap"), input.join("night2.pcap")).unwrap();
    let o = lnetcap(&["batch", "in", "--out", "out"], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let m = json(&dir.join("out/manifest.json"));
    let unit = &m["units"][0];
    assert_eq!(unit["key"], "in/night*.pcap");
    let caps = unit["captures"].as_array().unwrap();
    assert_eq!(caps.len(), 2, "split at the cut: {unit}");
    let cut = &caps[0]["cuts"][0];
    assert_eq!(cut["joined"], false);
    assert!(cut["why"].as_str().unwrap().contains("starts"), "{cut}");
    for c in caps {
        let report = json(&dir.join("out/captures").join(c["id"].as_str().unwrap()).join("report.json"));
        let file = synth.join(if c["pieces"][0] == "in/night1.pcap" { "lst-read.pcap" } else { "lst-write.pcap" });
        assert_eq!(anonymous(report), anonymous(analyze_json(&file, &dir)));
    }
    // --no-group: one unit per file, no cut checked.
    let o = lnetcap(&["batch", "in", "--out", "flat", "--no-group"], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let m = json(&dir.join("flat/manifest.json"));
    assert_eq!(m["units"].as_array().unwrap().len(), 2);
    assert!(m["units"].as_array().unwrap().iter().all(|u| u["rule"] == "single file"));
}

#[test]
fn paths_globs_and_lists() {
    let (dir, _) = archive("paths");
    std::fs::write(dir.join("list.txt"), "# the ring only\nin/ring.pcap0*\n").unwrap();
    let o = lnetcap(&["batch", "@list.txt", "in/incident.tar.zst", "in/missing.pcap", "--out", "out"], &dir);
    assert_eq!(o.status.code(), Some(1), "a missing path is a failure");
    assert!(stderr(&o).contains("in/missing.pcap: no such file or directory"), "{}", stderr(&o));
    let m = json(&dir.join("out/manifest.json"));
    let keys: Vec<&str> = m["units"].as_array().unwrap().iter().map(|u| u["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["in/incident.tar.zst", "in/ring.pcap*"]);
    // A text file named explicitly is a failure, not skipped.
    let o = lnetcap(&["batch", "in/README.txt", "--out", "out2"], &dir);
    assert_eq!(o.status.code(), Some(1));
    let m = json(&dir.join("out2/manifest.json"));
    assert_eq!(m["inputs"][0]["status"], "failed");
}

#[test]
fn index_html_renders_in_headless_chromium() {
    let (dir, _) = archive("index");
    let o = lnetcap(&["batch", "in", "--out", "out", "--html"], &dir);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let index = dir.join("out/index.html");
    let html = std::fs::read_to_string(&index).unwrap();
    let m = json(&dir.join("out/manifest.json"));
    for u in m["units"].as_array().unwrap() {
        for c in u["captures"].as_array().unwrap() {
            let href = format!("captures/{}/report.json", c["id"].as_str().unwrap());
            assert!(html.contains(&href), "index links {href}");
            assert!(dir.join("out").join(&href).is_file());
        }
    }
    assert!(html.contains("in/notes.pcap") && html.contains("failed"));
    assert!(html.contains("<svg"), "fleet chart drawn");
    for bad in ["<script", "<link", "src=\"http"] {
        assert!(!html.contains(bad), "index.html is self-contained: {bad}");
    }
    let require = std::env::var("LNETCAP_REQUIRE_ORACLES").is_ok_and(|v| v == "1");
    let Some(browser) = common::chromium() else {
        assert!(!require, "LNETCAP_REQUIRE_ORACLES=1 but no chromium");
        eprintln!("SKIPPED: no chromium");
        return;
    };
    let shot = dir.join("index.png");
    common::screenshot(&browser, &index, &shot, (1100, 2400), &dir.join("profile")).unwrap();
    let (w, h, px) = common::decode_png(&shot);
    assert_eq!((w, h), (1100, 2400));
    // rpc_window (the ring and the lst-write member) in its colour: badges and dots.
    let blue = common::count_color(&px, [0x1f, 0x77, 0xb4]);
    assert!(blue > 300, "rpc_window blue: {blue} pixels");
    let ink = common::count_color(&px, [0x20, 0x20, 0x20]);
    assert!(ink > 3000, "text: {ink} pixels");
}

/// The local one-node Slurm cluster (tests/tools/slurm-local.sh), when this run may use
/// it: LNETCAP_REQUIRE_ORACLES=1 (CI) or SLURM_CONF set. Returns SLURM_CONF.
fn slurm() -> Option<String> {
    let require = std::env::var("LNETCAP_REQUIRE_ORACLES").is_ok_and(|v| v == "1");
    if !require && std::env::var("SLURM_CONF").is_err() {
        eprintln!(
            "SKIPPED: no Slurm (set SLURM_CONF, or LNETCAP_REQUIRE_ORACLES=1 to start tests/tools/slurm-local.sh)"
        );
        return None;
    }
    let o = Command::new("bash").arg(common::root().join("tests/tools/slurm-local.sh")).arg("up").output().unwrap();
    assert!(o.status.success(), "slurm-local.sh up: {}", stderr(&o));
    let line = String::from_utf8_lossy(&o.stdout).to_string();
    let conf =
        line.trim().strip_prefix("export SLURM_CONF=").unwrap_or_else(|| panic!("slurm-local.sh printed {line}"));
    Some(conf.to_string())
}

#[test]
fn slurm_job_array_and_merge_equal_the_single_run_and_a_failed_shard_cancels_the_merge() {
    let Some(conf) = slurm() else { return };
    let (dir, _) = archive("slurm");
    let o = lnetcap(&["batch", "in", "--out", "single", "--html"], &dir);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let cluster = |out: &str| {
        Command::new(env!("CARGO_BIN_EXE_lnetcap"))
            .args(["batch", "in", "--html", "--out", out, "--slurm", "--shards", "4", "--wait"])
            .env("SLURM_CONF", &conf)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let o = cluster("cluster");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "merged; two inputs failed: {err}");
    assert!(err.contains("COMPLETED; 2 inputs failed"), "{err}");
    assert!(dir.join("cluster/slurm/array.sh").is_file() && dir.join("cluster/slurm/merge.sh").is_file());
    let keep = |t: Vec<(String, Vec<u8>)>| -> Vec<(String, Vec<u8>)> {
        t.into_iter().filter(|(p, _)| !p.starts_with("shards/") && !p.starts_with("slurm/")).collect()
    };
    let (single, merged) = (tree(&dir.join("single")), keep(tree(&dir.join("cluster"))));
    assert_eq!(single.iter().map(|f| &f.0).collect::<Vec<_>>(), merged.iter().map(|f| &f.0).collect::<Vec<_>>());
    for (a, b) in single.iter().zip(&merged) {
        assert!(a.1 == b.1, "{} differs between the single run and the Slurm run", a.0);
    }
    // Shard 2 cannot write its directory (a file is in the way): its task fails, the
    // merge is cancelled, and batch --slurm says so with exit 4.
    std::fs::create_dir_all(dir.join("broken/shards")).unwrap();
    std::fs::write(dir.join("broken/shards/2"), b"in the way").unwrap();
    let o = cluster("broken");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("_2 FAILED"), "the failed task is named: {err}");
    assert!(err.contains("CANCELLED (DependencyNeverSatisfied)"), "{err}");
    assert!(!dir.join("broken/manifest.json").exists(), "nothing merged");
}

/// Whether a dataset file is whole by its own structure: Parquet starts and ends with its
/// magic and its footer fits; JSON parses; HTML ends its document.
fn whole(path: &Path, bytes: &[u8]) -> bool {
    let name = path.to_string_lossy();
    if name.ends_with(".parquet") {
        let n = bytes.len();
        n >= 12 && &bytes[..4] == b"PAR1" && &bytes[n - 4..] == b"PAR1" && {
            let footer = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
            footer + 12 <= n
        }
    } else if name.ends_with(".json") {
        serde_json::from_slice::<Value>(bytes).is_ok()
    } else if name.ends_with(".html") {
        bytes.ends_with(b"</html>\n")
    } else {
        true
    }
}

#[test]
fn a_batch_killed_at_any_moment_leaves_every_file_whole_and_a_rerun_completes_it() {
    let dir = tmpdir("kill");
    std::fs::create_dir_all(dir.join("in")).unwrap();
    for (s, rpcs) in
        [("ost-write", "150"), ("ost-read", "150"), ("multi", "60"), ("lst-write", "150"), ("metadata", "1")]
    {
        let o = lnetcap(&["synth", "--scenario", s, "--rpcs", rpcs, "-o", &format!("in/{s}.pcap")], &dir);
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::remove_file(dir.join(format!("in/{s}.pcap.truth.jsonl"))).unwrap();
    }
    let t = std::time::Instant::now();
    let clean = lnetcap(&["batch", "in", "--out", "clean", "--html"], &dir);
    let took = t.elapsed();
    assert!(clean.status.success(), "{}", stderr(&clean));
    let visible = |root: &Path| -> Vec<(String, Vec<u8>)> {
        tree(root).into_iter().filter(|(p, _)| !p.split('/').any(|c| c.starts_with('.'))).collect()
    };
    let clean = visible(&dir.join("clean"));
    let clean_map: std::collections::BTreeMap<_, _> = clean.iter().cloned().collect();
    let out = dir.join("out");
    let (mut whole_files, mut partial_runs) = (0, 0);
    for k in 0..9u32 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lnetcap"))
            .args(["batch", "in", "--out", "out", "--html", "--force"])
            .current_dir(&dir)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let at = took.mul_f64((f64::from(k) + 0.37) / 8.0);
        std::thread::sleep(at);
        let _ = child.kill();
        let _ = child.wait();
        let now = if out.exists() { visible(&out) } else { vec![] };
        partial_runs += usize::from(now.len() < clean.len());
        for (name, bytes) in &now {
            assert!(whole(Path::new(name), bytes), "{name} is not whole after a kill at {at:?}");
            // The tables and reports are deterministic: a file in place is the clean run's
            // (the manifest and index.html list what this run got to).
            if name.contains("capture=") || name.starts_with("captures/") {
                assert!(clean_map.get(name) == Some(bytes), "{name} differs from the clean run after a kill at {at:?}");
            }
            whole_files += 1;
        }
    }
    assert!(whole_files > 0, "some kills came after files were written");
    // A run to the end over what the kills left gives the clean dataset.
    let o = lnetcap(&["batch", "in", "--out", "out", "--html"], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let done = visible(&out);
    assert_eq!(done.iter().map(|f| &f.0).collect::<Vec<_>>(), clean.iter().map(|f| &f.0).collect::<Vec<_>>());
    for (a, b) in done.iter().zip(&clean) {
        assert!(a.1 == b.1, "{} differs from the clean run after the kills and a rerun", a.0);
    }
    // A kill between a capture's commit and the manifest can leave that capture's
    // temporaries when the rerun finds it up to date: they are hidden (no reader lists
    // them) and go when the capture is next written.
    let hidden = |p: &str| p.rsplit('/').next().is_some_and(|n| n.starts_with('.') && n.contains(".tmp"));
    let stray: Vec<String> = tree(&out).into_iter().map(|f| f.0).filter(|p| p.contains("/.") && !hidden(p)).collect();
    assert!(stray.is_empty(), "only hidden temporaries may be left: {stray:?}");
    eprintln!("batch took {took:?}; {whole_files} files checked whole, {partial_runs} of 9 kills mid-run");
    let _ = std::fs::remove_dir_all(&dir);
}
