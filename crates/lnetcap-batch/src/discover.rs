//! Finding a batch's inputs: files, directories (recursive), globs and `@list` files;
//! what each holds, judged by content; and its identity for resumable runs.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Bytes hashed at each end of a file for its identity.
pub const IDENTITY_HASH_BYTES: u64 = 1 << 20;

/// Bytes of (decompressed) content read to tell what a file holds.
const SNIFF_BYTES: usize = 512;

/// What a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Content {
    /// A pcap or pcapng capture (plain, gzip or zstd).
    Capture,
    /// A tar archive (plain, gzip or zstd) whose members are read as streams.
    Archive,
    /// Something else.
    Other,
}

/// A file found, with its identity: a file whose path, size, mtime and both hashes are
/// unchanged is the same input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Path as given or found.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the Unix epoch.
    pub mtime_ns: i64,
    /// XXH3-128 of the first MiB, hex.
    pub head_xxh3: String,
    /// XXH3-128 of the last MiB, hex.
    pub tail_xxh3: String,
}

/// An input of the batch.
#[derive(Debug, Clone)]
pub struct Input {
    /// Where it is.
    pub path: PathBuf,
    /// Named explicitly (a file, a glob match, an `@list` line) rather than found in a
    /// directory walk: something that is not a capture is then a failure, not skipped.
    pub explicit: bool,
    /// What it holds, when it could be read.
    pub content: Result<Content, String>,
    /// Its identity, when it could be read.
    pub identity: Option<Identity>,
}

impl Input {
    /// The path as a string (the key of the manifest).
    pub fn key(&self) -> String {
        self.path.display().to_string()
    }

    /// Not a capture or an archive: skipped when found in a directory walk under a name
    /// that does not look like a capture, a failure otherwise.
    pub fn skipped(&self) -> bool {
        matches!(self.content, Ok(Content::Other)) && !self.explicit && !capture_like_name(&self.path)
    }
}

fn lower_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default()
}

/// A name that promises a capture (`.pcap`, `.pcapng`, `.cap`, compressed or not).
pub fn capture_name(p: &Path) -> bool {
    let n = lower_name(p);
    [".pcap", ".pcapng", ".cap"].iter().any(|e| n.contains(e))
}

/// A name that promises a capture or an archive of them.
fn capture_like_name(p: &Path) -> bool {
    capture_name(p) || lower_name(p).contains(".tar")
}

/// Expands PATHS into inputs, in a stable order (arguments in order, directory entries
/// sorted by name), each once. Paths under `exclude` (the output directory) are left out.
/// Problems with a path (no such file, a bad glob, an unreadable list) are returned as
/// messages beside the inputs found.
pub fn discover(paths: &[PathBuf], exclude: Option<&Path>) -> (Vec<Input>, Vec<String>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    let exclude = exclude.and_then(|e| e.canonicalize().ok());
    for p in paths {
        expand(p, &mut out, &mut errors, &mut seen, exclude.as_deref());
    }
    (out, errors)
}

fn expand(
    p: &Path,
    out: &mut Vec<Input>,
    errors: &mut Vec<String>,
    seen: &mut BTreeSet<PathBuf>,
    exclude: Option<&Path>,
) {
    let s = p.to_string_lossy();
    if let Some(list) = s.strip_prefix('@') {
        match std::fs::read_to_string(list) {
            Ok(text) => {
                for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
                    expand(Path::new(line), out, errors, seen, exclude);
                }
            }
            Err(e) => errors.push(format!("{list}: cannot read the list: {e}")),
        }
        return;
    }
    if p.is_dir() {
        walk(p, out, seen, exclude);
    } else if p.exists() {
        add(p.to_path_buf(), true, out, seen);
    } else if s.contains(['*', '?', '[']) {
        match glob::glob(&s) {
            Ok(matches) => {
                let mut n = 0;
                for m in matches {
                    match m {
                        Ok(m) if m.is_dir() => walk(&m, out, seen, exclude),
                        Ok(m) => add(m, true, out, seen),
                        Err(e) => errors.push(format!("{s}: {e}")),
                    }
                    n += 1;
                }
                if n == 0 {
                    errors.push(format!("{s}: no file matches"));
                }
            }
            Err(e) => errors.push(format!("{s}: bad glob: {e}")),
        }
    } else {
        errors.push(format!("{s}: no such file or directory"));
    }
}

fn walk(dir: &Path, out: &mut Vec<Input>, seen: &mut BTreeSet<PathBuf>, exclude: Option<&Path>) {
    let it = walkdir::WalkDir::new(dir).follow_links(true).sort_by_file_name().into_iter();
    let it = it.filter_entry(|e| {
        let hidden = e.depth() > 0 && e.file_name().to_string_lossy().starts_with('.');
        let excluded = exclude.is_some_and(|x| e.path().canonicalize().is_ok_and(|c| c == x));
        !hidden && !excluded
    });
    for e in it {
        match e {
            Ok(e) if e.file_type().is_file() => add(e.into_path(), false, out, seen),
            Ok(_) => {}
            Err(e) => {
                let path = e.path().map(Path::to_path_buf).unwrap_or_else(|| dir.to_path_buf());
                if seen.insert(path.clone()) {
                    out.push(Input { path, explicit: true, content: Err(e.to_string()), identity: None });
                }
            }
        }
    }
}

fn add(path: PathBuf, explicit: bool, out: &mut Vec<Input>, seen: &mut BTreeSet<PathBuf>) {
    if !seen.insert(path.clone()) {
        return;
    }
    let (content, identity) = match inspect(&path) {
        Ok((c, id)) => (Ok(c), Some(id)),
        Err(e) => (Err(e), None),
    };
    out.push(Input { path, explicit, content, identity });
}

/// What the file holds and its identity.
fn inspect(path: &Path) -> Result<(Content, Identity), String> {
    let mut f = File::open(path).map_err(|e| e.to_string())?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    let size = meta.len();
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64);
    let mut head = Vec::with_capacity(IDENTITY_HASH_BYTES.min(size) as usize);
    (&mut f).take(IDENTITY_HASH_BYTES).read_to_end(&mut head).map_err(|e| e.to_string())?;
    let tail = if size > IDENTITY_HASH_BYTES {
        let mut t = Vec::with_capacity(IDENTITY_HASH_BYTES as usize);
        f.seek(SeekFrom::Start(size - IDENTITY_HASH_BYTES)).map_err(|e| e.to_string())?;
        f.take(IDENTITY_HASH_BYTES).read_to_end(&mut t).map_err(|e| e.to_string())?;
        t
    } else {
        head.clone()
    };
    let hex = |b: &[u8]| format!("{:032x}", xxhash_rust::xxh3::xxh3_128(b));
    let identity =
        Identity { path: path.display().to_string(), size, mtime_ns, head_xxh3: hex(&head), tail_xxh3: hex(&tail) };
    Ok((sniff(&head), identity))
}

/// Recognises content by its first bytes, looking inside gzip and zstd.
pub fn sniff(head: &[u8]) -> Content {
    let inner: Vec<u8> = if head.starts_with(&[0x1f, 0x8b]) {
        read_prefix(flate2::read::MultiGzDecoder::new(head))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        match zstd::stream::read::Decoder::new(head) {
            Ok(d) => read_prefix(d),
            Err(_) => Vec::new(),
        }
    } else {
        head[..head.len().min(SNIFF_BYTES)].to_vec()
    };
    let magic = inner.get(..4);
    let pcap: [[u8; 4]; 5] = [
        [0xd4, 0xc3, 0xb2, 0xa1],
        [0xa1, 0xb2, 0xc3, 0xd4],
        [0x4d, 0x3c, 0xb2, 0xa1],
        [0xa1, 0xb2, 0x3c, 0x4d],
        [0x0a, 0x0d, 0x0d, 0x0a],
    ];
    if magic.is_some_and(|m| pcap.iter().any(|p| p == m)) {
        Content::Capture
    } else if inner.get(257..262) == Some(b"ustar") {
        Content::Archive
    } else {
        Content::Other
    }
}

/// Up to SNIFF_BYTES decompressed bytes (fewer when the stream is short or broken).
fn read_prefix(mut r: impl Read) -> Vec<u8> {
    let mut buf = vec![0u8; SNIFF_BYTES];
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    buf.truncate(n);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_by_content() {
        assert_eq!(sniff(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0]), Content::Capture);
        assert_eq!(sniff(&[0x0a, 0x0d, 0x0d, 0x0a]), Content::Capture);
        assert_eq!(sniff(b"hello, world"), Content::Other);
        let mut tar = vec![0u8; 512];
        tar[257..262].copy_from_slice(b"ustar");
        assert_eq!(sniff(&tar), Content::Archive);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar).unwrap();
        assert_eq!(sniff(&gz.finish().unwrap()), Content::Archive);
        let z = zstd::encode_all(&[0xa1u8, 0xb2, 0xc3, 0xd4, 0, 2][..], 1).unwrap();
        assert_eq!(sniff(&z), Content::Capture);
    }

    #[test]
    fn capture_names() {
        assert!(capture_like_name(Path::new("a/ring.pcap3.gz")));
        assert!(capture_like_name(Path::new("x.tar.zst")));
        assert!(!capture_like_name(Path::new("README.txt")));
    }
}
