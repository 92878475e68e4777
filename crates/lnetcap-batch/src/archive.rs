//! Members of a tar archive (.tar, .tar.gz, .tar.zst) as streams, never unpacked to disk.
//!
//! A reader thread walks the archive with the `tar` crate and hands each regular member
//! over as a [`Read`] fed through a bounded channel, so memory holds at most
//! [`CHANNEL_CHUNKS`] chunks of [`CHUNK_BYTES`] whatever the member's size. Dropping a
//! member's reader makes the thread skip the rest of it.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use lnetcap_analysis::PacketSource;
use lnetcap_capture::{CaptureError, CaptureReader, Packet};

/// Bytes per chunk handed from the archive thread to the analysis.
pub const CHUNK_BYTES: usize = 256 << 10;
/// Chunks in flight per member.
pub const CHANNEL_CHUNKS: usize = 4;

/// One regular member.
pub struct Member {
    /// Its path inside the archive.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// Its bytes.
    pub reader: MemberRead,
}

/// A member's bytes, as they come from the archive thread.
pub struct MemberRead {
    rx: Receiver<io::Result<Vec<u8>>>,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for MemberRead {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.buf.len() {
            match self.rx.recv() {
                Ok(Ok(chunk)) => {
                    self.buf = chunk;
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Counts the archive file's bytes read (compressed bytes for a compressed archive).
struct Counted<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Members as they come; an error ends the sequence.
pub type Members = Receiver<Result<Member, String>>;

/// The members of the archive at `path`, in archive order, and a counter of the archive
/// file's bytes read so far.
pub fn members(path: &Path) -> io::Result<(Members, Arc<AtomicU64>)> {
    let file = File::open(path)?;
    let read = Arc::new(AtomicU64::new(0));
    let mut counted = BufReader::new(Counted { inner: file, read: read.clone() });
    let head: Vec<u8> = io::BufRead::fill_buf(&mut counted)?.iter().take(4).copied().collect();
    let stream: Box<dyn Read + Send> = if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(counted))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(zstd::stream::read::Decoder::new(counted)?)
    } else {
        Box::new(counted)
    };
    let (tx, rx) = sync_channel(0);
    std::thread::Builder::new().name("lnetcap-tar".into()).spawn(move || walk(stream, &tx))?;
    Ok((rx, read))
}

fn walk(stream: Box<dyn Read + Send>, tx: &SyncSender<Result<Member, String>>) {
    let mut archive = tar::Archive::new(stream);
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => {
            let _ = tx.send(Err(format!("not a readable tar archive: {e}")));
            return;
        }
    };
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let _ = tx.send(Err(format!("archive unreadable after its last good member: {e}")));
                return;
            }
        };
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry.path().map(|p| p.display().to_string()).unwrap_or_else(|_| "?".into());
        let (ctx, crx) = sync_channel(CHANNEL_CHUNKS);
        let member = Member { name, size: entry.size(), reader: MemberRead { rx: crx, buf: Vec::new(), pos: 0 } };
        if tx.send(Ok(member)).is_err() {
            return;
        }
        loop {
            let mut chunk = vec![0u8; CHUNK_BYTES];
            match entry.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    chunk.truncate(n);
                    if ctx.send(Ok(chunk)).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = ctx.send(Err(e));
                    let _ = tx.send(Err("archive truncated inside a member".into()));
                    return;
                }
            }
        }
    }
}

/// A member capture as a packet source whose progress is the archive's.
pub struct MemberSource {
    /// The member's capture.
    pub reader: CaptureReader,
    /// Archive bytes read.
    pub read: Arc<AtomicU64>,
    /// Archive size.
    pub total: u64,
}

impl PacketSource for MemberSource {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        self.reader.next_packet()
    }

    fn drain_warnings(&mut self) -> Vec<CaptureError> {
        self.reader.drain_warnings()
    }

    #[inline]
    fn has_warnings(&self) -> bool {
        self.reader.has_warnings()
    }

    fn progress(&self) -> (u64, Option<u64>) {
        (self.read.load(Ordering::Relaxed), Some(self.total))
    }
}
