//! A capture's bytes read again by their place in it: what lets the TCP layer keep where
//! a segment's captured bytes lie instead of a copy of them (its retransmission history,
//! `lnetcap_tcp`), and read them back on the rare retransmission that must be compared.
//!
//! Only inputs whose bytes are the file's own can be read again: a plain (uncompressed)
//! regular file, read or mapped, and a capture held in memory. Pipes, standard input,
//! compressed input and live capture give packets no [`Origin`], and the history copies.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

/// A capture that can be read again.
#[derive(Debug)]
pub struct Reread {
    kind: Kind,
    /// Reads that could not be made (counted, for the run's warning).
    failed: AtomicU64,
}

#[derive(Debug)]
enum Kind {
    /// A regular file, with its length and modification time when it was opened: a file
    /// changed since (rewritten by a rotating `tcpdump -W`, appended to by one still
    /// writing) is not read again, since its bytes may no longer be those the run saw.
    File { file: File, len: u64, modified: Option<SystemTime> },
    /// A whole capture in memory.
    Memory(Arc<Vec<u8>>),
}

impl Reread {
    /// A regular file as it is now (its own handle: reads at a place do not move the
    /// reader's). `None` when its metadata cannot be had.
    pub fn file(file: &File) -> Option<Arc<Self>> {
        let meta = file.metadata().ok()?;
        let file = file.try_clone().ok()?;
        let kind = Kind::File { file, len: meta.len(), modified: meta.modified().ok() };
        Some(Arc::new(Self { kind, failed: AtomicU64::new(0) }))
    }

    /// A capture in memory.
    pub fn memory(bytes: Arc<Vec<u8>>) -> Arc<Self> {
        Arc::new(Self { kind: Kind::Memory(bytes), failed: AtomicU64::new(0) })
    }

    /// Fills `buf` with the bytes at offset `at`. False (and counted) when they cannot be
    /// had: the file changed since it was opened (its length or modification time), the
    /// read failed, or they lie past the end.
    pub fn read_at(&self, at: u64, buf: &mut [u8]) -> bool {
        let ok = match &self.kind {
            Kind::File { file, len, modified } => {
                let same = file.metadata().is_ok_and(|m| m.len() == *len && m.modified().ok() == *modified);
                same && file.read_exact_at(buf, at).is_ok()
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

    #[test]
    fn reads_a_file_at_a_place_until_the_file_changes() {
        let dir = std::env::temp_dir().join(format!("lnetcap-reread-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let f = File::open(&path).unwrap();
        let r = Reread::file(&f).unwrap();
        let mut b = [0u8; 4];
        assert!(r.read_at(3, &mut b));
        assert_eq!(&b, b"3456");
        // Past the end: not read, counted.
        assert!(!r.read_at(8, &mut b));
        assert_eq!(r.failures(), 1);
        // Appended to: its bytes may no longer be the run's (a rotating writer truncates
        // first), so it is not read again.
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"ab").unwrap();
        assert!(!r.read_at(0, &mut b));
        assert_eq!(r.failures(), 2);
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
