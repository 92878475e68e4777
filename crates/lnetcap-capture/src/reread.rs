//! A capture's bytes read again by their place in it: what lets the TCP layer keep where
//! a segment's captured bytes lie instead of a copy of them (its retransmission history,
//! `lnetcap_tcp`), and read them back on the rare retransmission that must be compared.
//!
//! Only inputs whose bytes are the file's own can be read again: a plain (uncompressed)
//! regular file, read or mapped, and a capture held in memory. Pipes, standard input,
//! compressed input and live capture give packets no [`Origin`], and the history copies.

use std::fs::{File, Metadata};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

/// A capture that can be read again.
#[derive(Debug)]
pub struct Reread {
    kind: Kind,
    /// Reads that could not be made (tests).
    failed: AtomicU64,
}

#[derive(Debug)]
enum Kind {
    /// A regular file: its own handle while the run's reader of it is open
    /// ([`Reread::release`]: a run over thousands of rotated pieces must not hold one
    /// each), else opened again by `path` for each read; and what it was when last seen.
    File { state: Mutex<FileState>, path: PathBuf },
    /// A whole capture in memory.
    Memory(Arc<Vec<u8>>),
}

/// Bytes at the start of a file that stand for its bytes: a writer that appends (a
/// `tcpdump -w` still running) leaves them as they were; one that rewrites the file (a
/// rotating `tcpdump -C/-W` reusing its oldest piece, which truncates it first) writes
/// another first packet, with its own time, within them (a pcap file's header is 24
/// bytes, a pcapng file's first blocks a few hundred). A file shorter than this when it
/// was opened has no such stand-in (its header alone is the same after a rewrite): any
/// change to it is taken for a rewrite.
const PREFIX_BYTES: u64 = 4096;

/// A file of the run: its handle while the reader is open, and what it was when last seen.
#[derive(Debug)]
struct FileState {
    held: Option<File>,
    seen: Seen,
}

/// What a file was when last seen.
#[derive(Debug)]
struct Seen {
    /// Device, inode, length and modification time.
    was: Identity,
    /// The hash of its first [`PREFIX_BYTES`], when it had that many when opened.
    prefix: Option<u64>,
}

/// What a file was: device, inode, length and modification time.
#[derive(Debug, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl Identity {
    fn of(m: &Metadata) -> Self {
        Self { dev: m.dev(), ino: m.ino(), len: m.len(), modified: m.modified().ok() }
    }
}

/// The hash of the first [`PREFIX_BYTES`] of `f` (`None` when they cannot be read).
fn prefix_hash(f: &File) -> Option<u64> {
    let mut buf = [0u8; PREFIX_BYTES as usize];
    f.read_exact_at(&mut buf, 0).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash_slice(&buf, &mut h);
    Some(std::hash::Hasher::finish(&h))
}

impl Seen {
    /// Whether `f` still holds the bytes the run read: the same file (device and inode),
    /// unchanged (length and modification time: a rewrite to the same length within one
    /// tick of the file system's clock is not seen), or grown with its first
    /// [`PREFIX_BYTES`] as they were (appended to). A file shorter than it was, or whose
    /// first bytes changed, or that was shorter than [`PREFIX_BYTES`] when opened and
    /// changed at all, was rewritten. Once a grown file passes, what it is now is what the
    /// next read compares with.
    fn same_bytes(&mut self, f: &File) -> bool {
        let Ok(m) = f.metadata() else { return false };
        let now = Identity::of(&m);
        if now == self.was {
            return true;
        }
        let same_file = (now.dev, now.ino) == (self.was.dev, self.was.ino) && now.len >= self.was.len;
        if !same_file || self.prefix.is_none() || prefix_hash(f) != self.prefix {
            return false;
        }
        self.was = now;
        true
    }
}

impl Reread {
    /// The regular file at `path`, open as `file`, as it is now (its own handle: reads at
    /// a place do not move the reader's). `None` when its metadata or its first bytes
    /// cannot be had.
    pub fn file(path: &Path, file: &File) -> Option<Arc<Self>> {
        let was = Identity::of(&file.metadata().ok()?);
        let prefix = if was.len >= PREFIX_BYTES { Some(prefix_hash(file)?) } else { None };
        let state = Mutex::new(FileState { held: Some(file.try_clone().ok()?), seen: Seen { was, prefix } });
        let kind = Kind::File { state, path: path.to_path_buf() };
        Some(Arc::new(Self { kind, failed: AtomicU64::new(0) }))
    }

    /// The run's reader of the file is done: its handle is closed, and later reads open
    /// the file again by its name (checked to hold the bytes the run read).
    pub fn release(&self) {
        if let Kind::File { state, .. } = &self.kind {
            state.lock().unwrap_or_else(PoisonError::into_inner).held.take();
        }
    }

    /// Whether it holds a handle of its file.
    pub fn holds_file(&self) -> bool {
        match &self.kind {
            Kind::File { state, .. } => state.lock().unwrap_or_else(PoisonError::into_inner).held.is_some(),
            Kind::Memory(_) => false,
        }
    }

    /// A capture in memory.
    pub fn memory(bytes: Arc<Vec<u8>>) -> Arc<Self> {
        Arc::new(Self { kind: Kind::Memory(bytes), failed: AtomicU64::new(0) })
    }

    /// Fills `buf` with the bytes at offset `at`. False (and counted) when they cannot be
    /// had: the file is no longer the one read, or was rewritten ([`Seen::same_bytes`]), the
    /// read failed, or they lie past the end.
    pub fn read_at(&self, at: u64, buf: &mut [u8]) -> bool {
        let ok = match &self.kind {
            Kind::File { state, path } => {
                let mut st = state.lock().unwrap_or_else(PoisonError::into_inner);
                let FileState { held, seen } = &mut *st;
                let opened;
                let file = match held {
                    Some(f) => Some(&*f),
                    None => {
                        opened = File::open(path).ok();
                        opened.as_ref()
                    }
                };
                file.is_some_and(|f| seen.same_bytes(f) && f.read_exact_at(buf, at).is_ok())
            }
            Kind::Memory(bytes) => {
                let from = usize::try_from(at).ok();
                match from.and_then(|f| bytes.get(f..f.checked_add(buf.len())?)) {
                    Some(b) => {
                        buf.copy_from_slice(b);
                        true
                    }
                    None => false,
                }
            }
        };
        if !ok {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Reads that could not be made so far.
    pub fn failures(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// Where bytes of a packet lie in a capture that can be read again: `src` at offset `at`.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The capture.
    pub src: &'a Arc<Reread>,
    /// Offset of the first byte.
    pub at: u64,
}

impl<'a> Origin<'a> {
    /// The place `n` bytes further on.
    #[inline(always)]
    pub fn advanced(self, n: usize) -> Origin<'a> {
        Origin { src: self.src, at: self.at + n as u64 }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// `n` bytes of the digits 0-9 over and over.
    fn digits(n: usize) -> Vec<u8> {
        (0..n).map(|i| b'0' + (i % 10) as u8).collect()
    }

    /// Writes `bytes` to `path` with modification time `secs` after the epoch: the tests
    /// do not depend on the file system's clock ticking between two writes.
    fn write_at_time(path: &Path, bytes: &[u8], secs: u64) {
        std::fs::write(path, bytes).unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs)).unwrap();
    }

    #[test]
    fn reads_a_file_at_a_place_until_the_file_changes() {
        let dir = std::env::temp_dir().join(format!("lnetcap-reread-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        // Past PREFIX_BYTES: its first 4 KiB stand for its bytes.
        let n = PREFIX_BYTES as usize + 14;
        write_at_time(&path, &digits(n), 100);
        let f = File::open(&path).unwrap();
        let r = Reread::file(&path, &f).unwrap();
        let mut b = [0u8; 4];
        assert!(r.read_at(3, &mut b));
        assert_eq!(&b, b"3456");
        // Released, it opens the file again for each read.
        r.release();
        assert!(!r.holds_file());
        assert!(r.read_at(1, &mut b));
        assert_eq!(&b, b"1234");
        // Past the end: not read, counted.
        assert!(!r.read_at(n as u64 - 2, &mut b));
        assert_eq!(r.failures(), 1);
        // Appended to (a writer still running): the bytes read are still there, and so
        // are the new ones.
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"ab").unwrap();
        assert!(r.read_at(0, &mut b));
        assert_eq!(&b, b"0123");
        assert!(r.read_at(n as u64 - 2, &mut b));
        assert_eq!(&b, b"89ab");
        // Rewritten from the start (a rotating writer truncates its oldest piece and
        // writes another first packet), longer than it was: not read again.
        let mut other = digits(n + 4);
        other[0] = b'x';
        write_at_time(&path, &other, 200);
        assert!(!r.read_at(4, &mut b));
        assert_eq!(r.failures(), 2);
        // Rewritten in place at the same length, the clock moved: not read again.
        other.truncate(n + 2);
        write_at_time(&path, &other, 300);
        assert!(!r.read_at(4, &mut b));
        // Its old bytes, but shorter than the file last seen: cut, not read again.
        write_at_time(&path, &digits(n + 1), 400);
        assert!(!r.read_at(0, &mut b));
        assert_eq!(r.failures(), 4);
        // Its bytes as last seen, touched (a new modification time): read.
        let mut last = digits(n);
        last.extend(b"ab");
        write_at_time(&path, &last, 500);
        assert!(r.read_at(6, &mut b));
        assert_eq!(&b, b"6789");
        assert_eq!(r.failures(), 4);
        // Another file of the same bytes and time in its place is not the file.
        let g = File::open(&path).unwrap();
        let r = Reread::file(&path, &g).unwrap();
        r.release();
        let other = dir.join("g");
        write_at_time(&other, &last, 500);
        std::fs::rename(&other, &path).unwrap();
        assert!(!r.read_at(0, &mut b));
        // Gone: not read.
        std::fs::remove_file(&path).unwrap();
        assert!(!r.read_at(0, &mut b));
        // A file shorter than PREFIX_BYTES when opened: its header alone would be the same
        // after a rewrite, so any change is taken for one, an append too.
        write_at_time(&path, &digits(10), 100);
        let f = File::open(&path).unwrap();
        let r = Reread::file(&path, &f).unwrap();
        assert!(r.read_at(6, &mut b));
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"ab").unwrap();
        assert!(!r.read_at(6, &mut b));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reads_memory_at_a_place() {
        let r = Reread::memory(Arc::new(b"abcdef".to_vec()));
        let mut b = [0u8; 2];
        assert!(r.read_at(4, &mut b));
        assert_eq!(&b, b"ef");
        assert!(!r.read_at(5, &mut b));
        assert!(!r.read_at(u64::MAX, &mut b));
        assert_eq!(r.failures(), 2);
    }

    #[test]
    fn an_origin_advances() {
        let r = Reread::memory(Arc::new(Vec::new()));
        let o = Origin { src: &r, at: 10 }.advanced(5);
        assert_eq!(o.at, 15);
    }
}
