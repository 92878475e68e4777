//! What to analyse as one stream: rotated sets grouped, archives as units, and a
//! deterministic, size-balanced share of the units per shard.
//!
//! A rotated ring (`tcpdump -C/-W` numbering, `-G` strftime names) is found from its
//! names and first packets: files of one directory whose names are equal once every
//! digit run is a `*` (and the compression suffix and a trailing digit run are dropped),
//! with the same link type, put in the time order of their first packets. The cut
//! between two pieces is confirmed while they are read ([`crate::chain`]): the next
//! piece starts no earlier than the last packet of the one before and at most
//! [`MAX_CUT_GAP_NS`] after it, and a TCP connection continues across the cut (or the
//! gap is under [`CUT_GAP_WITHOUT_CONNECTION_NS`]). A cut that fails splits the group.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use lnetcap_capture::link::decode_packet;
use lnetcap_capture::CaptureReader;

use crate::discover::{Content, Input};

/// Packets read from the front of a capture to place it.
pub const SURVEY_PACKETS: usize = 64;

/// Largest gap between two pieces that still makes them one capture (ns).
pub const MAX_CUT_GAP_NS: i64 = 60_000_000_000;

/// Largest gap accepted without a TCP connection seen on both sides of the cut (ns).
pub const CUT_GAP_WITHOUT_CONNECTION_NS: i64 = 1_000_000_000;

/// A TCP connection's addresses, lower endpoint first.
pub type Tuple = (String, String);

/// The front of a capture.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    /// Link type of the first packet.
    pub linktype: Option<u32>,
    /// Time of the first packet (ns).
    pub first_ts_ns: Option<i64>,
    /// Connections of its first packets.
    pub tuples: BTreeSet<Tuple>,
}

/// The connection a packet belongs to, when it is TCP.
pub fn tuple_of(linktype: u32, data: &[u8], origlen: u32) -> Option<Tuple> {
    let seg = decode_packet(linktype, data, origlen).ok()?;
    let a = std::net::SocketAddr::new(seg.ip.src, seg.src_port).to_string();
    let b = std::net::SocketAddr::new(seg.ip.dst, seg.dst_port).to_string();
    Some(if a <= b { (a, b) } else { (b, a) })
}

/// Reads the front of a capture; an error when it cannot be opened as one.
pub fn survey(path: &Path) -> Result<Survey, String> {
    let mut r = CaptureReader::open(path).map_err(|e| e.to_string())?;
    let mut s = Survey::default();
    for _ in 0..SURVEY_PACKETS {
        match r.next_packet() {
            Ok(Some(p)) => {
                s.linktype.get_or_insert(p.linktype);
                s.first_ts_ns.get_or_insert(p.ts_ns);
                if let Some(t) = tuple_of(p.linktype, p.data, p.origlen) {
                    s.tuples.insert(t);
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    Ok(s)
}

/// What a unit is.
#[derive(Debug, Clone)]
pub enum UnitKind {
    /// Capture files analysed as one stream, in time order (one file, or a rotated set).
    Files {
        /// Indexes into the inputs, in time order.
        pieces: Vec<usize>,
        /// How the grouping was decided.
        rule: String,
    },
    /// A tar archive: each member capture analysed by itself, read as a stream.
    Archive {
        /// Index into the inputs.
        input: usize,
    },
}

/// The unit of work (and of resuming): analysed by one worker, in one pass.
#[derive(Debug, Clone)]
pub struct Unit {
    /// Stable name: the file's path, a ring's path pattern (`dir/ring.pcap*`), an
    /// archive's path.
    pub key: String,
    /// Its inputs.
    pub kind: UnitKind,
    /// Input bytes (for balancing and progress).
    pub bytes: u64,
}

impl Unit {
    /// Indexes of its inputs.
    pub fn inputs(&self) -> Vec<usize> {
        match &self.kind {
            UnitKind::Files { pieces, .. } => pieces.clone(),
            UnitKind::Archive { input } => vec![*input],
        }
    }

    /// The identities of its inputs (what a manifest compares to know it is done).
    pub fn identities(&self, inputs: &[Input]) -> Vec<crate::discover::Identity> {
        self.inputs().iter().filter_map(|&i| inputs[i].identity.clone()).collect()
    }
}

/// The grouping key of a file name: compression suffix dropped, every digit run a `*`,
/// a trailing `*` dropped (tcpdump -C names its first file without a number).
pub fn name_pattern(name: &str) -> (String, String) {
    let mut base = name;
    for ext in [".gz", ".zst", ".zstd"] {
        if let Some(b) = base.strip_suffix(ext) {
            base = b;
            break;
        }
    }
    let mut shown = String::new();
    let mut in_digits = false;
    for c in base.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                shown.push('*');
            }
            in_digits = true;
        } else {
            shown.push(c);
            in_digits = false;
        }
    }
    let key = shown.strip_suffix('*').unwrap_or(&shown).to_string();
    let shown = if shown.contains('*') { shown } else { format!("{shown}*") };
    (key, shown)
}

/// The units of a batch: capture files grouped into rotated sets (unless `group` is
/// off), archives one unit each, in key order.
pub fn units(inputs: &[Input], surveys: &BTreeMap<usize, Survey>, group: bool) -> Vec<Unit> {
    let mut out = Vec::new();
    // (directory, name key, link type) → pieces
    let mut sets: BTreeMap<(String, String, u32), Vec<usize>> = BTreeMap::new();
    for (i, inp) in inputs.iter().enumerate() {
        let bytes = inp.identity.as_ref().map_or(0, |id| id.size);
        match (&inp.content, surveys.get(&i)) {
            (Ok(Content::Archive), _) => out.push(Unit { key: inp.key(), kind: UnitKind::Archive { input: i }, bytes }),
            (Ok(Content::Capture), Some(s)) if group && s.first_ts_ns.is_some() => {
                let dir = inp.path.parent().map(|p| p.display().to_string()).unwrap_or_default();
                let name = inp.path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                let (key, _) = name_pattern(&name);
                sets.entry((dir, key, s.linktype.unwrap_or(0))).or_default().push(i);
            }
            (Ok(Content::Capture), Some(_)) => out.push(single(inputs, i)),
            _ => {}
        }
    }
    for ((dir, _, linktype), mut pieces) in sets {
        if pieces.len() == 1 {
            out.push(single(inputs, pieces[0]));
            continue;
        }
        pieces.sort_by_key(|&i| (surveys[&i].first_ts_ns, inputs[i].key()));
        let first = inputs[pieces[0]].path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let shown = name_pattern(&first).1;
        let key = if dir.is_empty() { shown.clone() } else { format!("{dir}/{shown}") };
        let rule = format!(
            "rotated set: {} files named {shown} (link type {linktype}), in the time order of their first packets; \
             each cut checked as read",
            pieces.len()
        );
        let bytes = pieces.iter().map(|&i| inputs[i].identity.as_ref().map_or(0, |id| id.size)).sum();
        out.push(Unit { key, kind: UnitKind::Files { pieces, rule }, bytes });
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

fn single(inputs: &[Input], i: usize) -> Unit {
    Unit {
        key: inputs[i].key(),
        kind: UnitKind::Files { pieces: vec![i], rule: "single file".into() },
        bytes: inputs[i].identity.as_ref().map_or(0, |id| id.size),
    }
}

/// Shard `k` of `n`: units dealt largest first to the least loaded shard (ties to the
/// lower shard, units of equal size in key order), so every shard computes the same
/// split from the same inputs.
pub fn shard(units: &[Unit], k: usize, n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by(|&a, &b| units[b].bytes.cmp(&units[a].bytes).then_with(|| units[a].key.cmp(&units[b].key)));
    let mut load = vec![0u64; n.max(1)];
    let mut mine = Vec::new();
    for u in order {
        let (s, _) = load.iter().enumerate().min_by_key(|&(i, l)| (*l, i)).unwrap_or((0, &0));
        load[s] += units[u].bytes.max(1);
        if s == k {
            mine.push(u);
        }
    }
    mine.sort_unstable();
    mine
}

/// A name for directories and partitions: the key's last component made safe, and a
/// hash of the whole key (so equal names in different directories stay apart).
pub fn output_id(key: &str) -> String {
    let last = key.rsplit('/').next().unwrap_or(key);
    let safe: String =
        last.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    let safe = safe.trim_start_matches('.');
    format!("{}-{:08x}", &safe[..safe.len().min(60)], xxhash_rust::xxh3::xxh3_64(key.as_bytes()) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_names() {
        // tcpdump -C without -W: ring.pcap, ring.pcap1, ring.pcap2
        assert_eq!(name_pattern("ring.pcap").0, name_pattern("ring.pcap1").0);
        assert_eq!(name_pattern("ring.pcap1").1, "ring.pcap*");
        // -W 10: ring.pcap0 … ring.pcap9, compressed afterwards
        assert_eq!(name_pattern("ring.pcap03.gz").0, name_pattern("ring.pcap04").0);
        // -G with strftime
        assert_eq!(name_pattern("oss1-20261123-1400.pcap").0, "oss*-*-*.pcap");
        assert_ne!(name_pattern("a.pcap").0, name_pattern("b.pcap").0);
        assert_eq!(name_pattern("a.pcap").1, "a.pcap*");
    }

    fn unit(key: &str, bytes: u64) -> Unit {
        Unit { key: key.into(), kind: UnitKind::Archive { input: 0 }, bytes }
    }

    #[test]
    fn shards_cover_every_unit_once_and_balance() {
        let units: Vec<Unit> = (0..20).map(|i| unit(&format!("u{i:02}"), 100 + (i * 37 % 11) as u64 * 50)).collect();
        let mut all = Vec::new();
        let mut loads = Vec::new();
        for k in 0..4 {
            let s = shard(&units, k, 4);
            loads.push(s.iter().map(|&u| units[u].bytes).sum::<u64>());
            all.extend(s);
        }
        all.sort_unstable();
        assert_eq!(all, (0..20).collect::<Vec<_>>());
        let (min, max) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
        // LPT: no shard exceeds another by more than the largest unit.
        assert!(max - min <= 600, "{loads:?}");
    }

    #[test]
    fn ids_are_safe_and_distinct() {
        assert_eq!(output_id("a/b/ring.pcap*").len(), "ring.pcap_-".len() + 8);
        assert_ne!(output_id("x/ring.pcap*"), output_id("y/ring.pcap*"));
        assert!(output_id("../../x y.pcap").starts_with("x_y.pcap-"));
    }
}
