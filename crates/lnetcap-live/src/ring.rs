//! The packets of a live run kept as pcap files, rotated like tcpdump's `-C` (size),
//! `-G` (seconds) and `-W` (count): `FILE`, `FILE1`, `FILE2`, ... without a count (as
//! `tcpdump -C`), or `FILE0` … `FILE{N-1}` reused in turn with one (as `tcpdump -C -W`,
//! zero-padded). `lnetcap batch` groups such a ring back into one capture (its name
//! pattern with the digits as a wildcard, pieces ordered by first packet).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use lnetcap_capture::Packet;

/// When to start the next file.
#[derive(Debug, Clone, Default)]
pub struct RingConfig {
    /// The name the files are numbered after.
    pub path: PathBuf,
    /// Start a new file before one would grow past this many bytes.
    pub size: Option<u64>,
    /// Start a new file when the current one spans this many seconds of capture time.
    pub seconds: Option<u64>,
    /// Keep at most this many files, reusing the oldest name.
    pub count: Option<u32>,
}

impl RingConfig {
    /// The name of file number `i` (0-based, before wrapping).
    pub fn name(&self, i: u64) -> PathBuf {
        let mut s = self.path.as_os_str().to_owned();
        match self.count {
            Some(n) => {
                let width = (n.saturating_sub(1)).to_string().len();
                s.push(format!("{:0width$}", i % u64::from(n.max(1))));
            }
            None if i == 0 => {}
            None => s.push(i.to_string()),
        }
        PathBuf::from(s)
    }
}

/// The pcap global header: nanosecond magic (a1b23c4d), version 2.4, written in this
/// machine's byte order as libpcap does.
fn header(snaplen: u32, linktype: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_ne_bytes());
    h[4..6].copy_from_slice(&2u16.to_ne_bytes());
    h[6..8].copy_from_slice(&4u16.to_ne_bytes());
    h[16..20].copy_from_slice(&snaplen.to_ne_bytes());
    h[20..24].copy_from_slice(&linktype.to_ne_bytes());
    h
}

/// The ring being written.
#[derive(Debug)]
pub struct Ring {
    cfg: RingConfig,
    snaplen: u32,
    /// The current file, its number, bytes written and capture time of its first packet.
    out: Option<(BufWriter<File>, u64, u64, i64)>,
    next: u64,
    written: Vec<PathBuf>,
}

impl Ring {
    /// A ring of `cfg`, files with `snaplen` in their header. Nothing is created before
    /// the first packet.
    pub fn new(cfg: RingConfig, snaplen: u32) -> Self {
        Self { cfg, snaplen, out: None, next: 0, written: Vec::new() }
    }

    /// Writes one packet, starting a new file first when the current one is full.
    pub fn write(&mut self, p: &Packet<'_>) -> io::Result<()> {
        let len = 16 + p.data.len() as u64;
        let full = self.out.as_ref().is_some_and(|(_, _, bytes, t0)| {
            self.cfg.size.is_some_and(|s| bytes + len > s && *bytes > 24)
                || self
                    .cfg
                    .seconds
                    .is_some_and(|s| p.ts_ns.saturating_sub(*t0) >= (s as i64).saturating_mul(1_000_000_000))
        });
        if full || self.out.is_none() {
            self.rotate(p)?;
        }
        let Some((w, _, bytes, _)) = self.out.as_mut() else { return Ok(()) };
        let secs = p.ts_ns.div_euclid(1_000_000_000) as u32;
        let nanos = p.ts_ns.rem_euclid(1_000_000_000) as u32;
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&secs.to_ne_bytes());
        rec[4..8].copy_from_slice(&nanos.to_ne_bytes());
        rec[8..12].copy_from_slice(&(p.data.len() as u32).to_ne_bytes());
        rec[12..16].copy_from_slice(&p.origlen.to_ne_bytes());
        w.write_all(&rec)?;
        w.write_all(p.data)?;
        *bytes += len;
        Ok(())
    }

    fn rotate(&mut self, p: &Packet<'_>) -> io::Result<()> {
        if let Some((mut w, ..)) = self.out.take() {
            w.flush()?;
        }
        let i = self.next;
        self.next += 1;
        let path = self.cfg.name(i);
        let mut w = BufWriter::with_capacity(1 << 16, create(&path)?);
        w.write_all(&header(self.snaplen.max(p.data.len() as u32), p.linktype))?;
        if !self.written.contains(&path) {
            self.written.push(path);
        }
        self.out = Some((w, i, 24, p.ts_ns));
        Ok(())
    }

    /// Flushes the last file; the files written (a reused name once).
    pub fn finish(mut self) -> io::Result<Vec<PathBuf>> {
        if let Some((mut w, ..)) = self.out.take() {
            w.flush()?;
        }
        Ok(self.written)
    }
}

fn create(path: &Path) -> io::Result<File> {
    File::create(path).map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(count: Option<u32>) -> RingConfig {
        RingConfig { path: PathBuf::from("/d/ring.pcap"), size: None, seconds: None, count }
    }

    #[test]
    fn names_follow_tcpdump() {
        // tcpdump -C: first file unnumbered, then 1, 2, ...
        let c = cfg(None);
        assert_eq!(c.name(0), PathBuf::from("/d/ring.pcap"));
        assert_eq!(c.name(2), PathBuf::from("/d/ring.pcap2"));
        // tcpdump -C -W 12: 00 .. 11, then the oldest again.
        let c = cfg(Some(12));
        assert_eq!(c.name(0), PathBuf::from("/d/ring.pcap00"));
        assert_eq!(c.name(11), PathBuf::from("/d/ring.pcap11"));
        assert_eq!(c.name(12), PathBuf::from("/d/ring.pcap00"));
        assert_eq!(cfg(Some(3)).name(4), PathBuf::from("/d/ring.pcap1"));
    }
}
