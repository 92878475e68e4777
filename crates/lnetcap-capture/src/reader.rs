//! [`CaptureReader`]: packet records out of pcap and pcapng input.
//!
//! Input is recognised by content, never by file name: gzip (`1f 8b`) and zstd
//! (`28 b5 2f fd`) streams are decompressed on the fly, then the container is recognised by
//! its magic (pcap µs / ns in either byte order, pcapng). Files, stdin and compressed
//! input go through one streaming buffer that holds at most one record beyond
//! [`STREAM_CHUNK_BYTES`], so memory does not grow with the capture; records are parsed in
//! place in it. Read from a regular file, that buffer is a [`SharedBlock`] other threads
//! may hold on to: a packet says where its bytes lie in it ([`Packet::shared`]), so that a
//! parallel run hands packets to its workers without copying them; while a block is
//! held, the reader reads on into another (at most [`MAX_SPARE_BLOCKS`] kept for reuse).
//! Not from pipes and decompressors: their reads are small, and a block a read would
//! soon be held by every worker.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use pcap_parser::nom;
use pcap_parser::pcapng::Block;
use pcap_parser::{parse_block_be, parse_block_le};

use crate::error::CaptureError;
use crate::limits::{
    MAP_KEEP_BEHIND, MAP_MIN_SNAPLEN, MAP_PROBE_BYTES, MAP_RELEASE_STEP, MAP_THREADED_MIN_MEAN_RECORD,
    MAP_WINDOW_BYTES, MAX_INTERFACES, MAX_RECORD_BYTES, MAX_SHARED_BLOCK_BYTES, MAX_SPARE_BLOCKS, STREAM_CHUNK_BYTES,
};
use crate::map::{prefetch, MappedFile};
use crate::reread::{Origin, Reread};

/// A block of input bytes that packets borrow from and other threads may share.
pub type SharedBlock = Arc<InputBlock>;

/// Bytes of input: read into memory, or a window of a mapped file; with the capture they
/// can be read again from, and where, when they are its own bytes ([`Packet::origin`]).
#[derive(Debug, Clone, Default)]
pub struct InputBlock {
    bytes: Bytes,
    /// The capture these bytes are of, when it can be read again.
    reread: Option<Arc<Reread>>,
    /// Offset in it of the block's first byte.
    base: u64,
}

impl InputBlock {
    fn new(bytes: Bytes, reread: Option<Arc<Reread>>, base: u64) -> Self {
        Self { bytes, reread, base }
    }
}

#[derive(Debug, Clone)]
enum Bytes {
    /// Read from a stream into this buffer.
    Heap(Vec<u8>),
    /// A whole capture given in memory ([`CaptureReader::from_shared`]).
    Whole(Arc<Vec<u8>>),
    /// `file.bytes()[start..start + len]`.
    Map { file: Arc<MappedFile>, start: usize, len: usize },
}

impl Default for Bytes {
    fn default() -> Self {
        Bytes::Heap(Vec::new())
    }
}

impl std::ops::Deref for InputBlock {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Heap(v) => v,
            Bytes::Whole(v) => v,
            Bytes::Map { file, start, len } => file.bytes().get(*start..*start + *len).unwrap_or(&[]),
        }
    }
}

impl InputBlock {
    /// The buffer of a block read into memory (any other block becomes an empty one).
    fn heap(&mut self) -> &mut Vec<u8> {
        if !matches!(self.bytes, Bytes::Heap(_)) {
            self.bytes = Bytes::Heap(Vec::new());
        }
        match &mut self.bytes {
            Bytes::Heap(v) => v,
            _ => unreachable!("made a heap block above"),
        }
    }
}

/// Where a packet's bytes lie in a shareable [`SharedBlock`]: `block[start..start + len]`, `len`
/// the packet's captured length.
#[derive(Debug, Clone, Copy)]
pub struct Shared<'a> {
    /// The block.
    pub block: &'a SharedBlock,
    /// Offset of the packet's first byte in it.
    pub start: usize,
}

/// One packet record.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// 1-based frame number, as Wireshark numbers frames.
    pub frame: u64,
    /// Capture timestamp, ns since the Unix epoch.
    pub ts_ns: i64,
    /// Link type of the interface the packet was captured on.
    pub linktype: u32,
    /// Original length of the packet on the wire.
    pub origlen: u32,
    /// The captured bytes (`data.len()` is the captured length).
    pub data: &'a [u8],
    /// Byte offset of the record in the (decompressed) capture stream.
    pub offset: u64,
    /// pcapng interface id (0 for pcap).
    pub interface: u32,
    /// The block `data` lies in, when the source can share it (a consumer checks that
    /// `data` is where this says before relying on it: a wrapper may change `data`).
    pub shared: Option<Shared<'a>>,
}

impl<'a> Packet<'a> {
    /// The shareable block holding exactly `data`, with its offset, if there is one.
    /// Inline: [`Packet::origin`] asks it for every data segment.
    #[inline(always)]
    pub fn shared_data(&self) -> Option<(&'a SharedBlock, usize)> {
        let sh = self.shared?;
        let at = sh.block.get(sh.start..sh.start.checked_add(self.data.len())?)?;
        std::ptr::eq(at.as_ptr(), self.data.as_ptr()).then_some((sh.block, sh.start))
    }

    /// Where `data` lies in a capture that can be read again (a plain regular file, or a
    /// capture in memory), when it is that capture's own bytes (where `shared` says).
    #[inline(always)]
    pub fn origin(&self) -> Option<Origin<'a>> {
        // A block without a capture to read again first: the check of `data` needs none.
        let src = self.shared?.block.reread.as_ref()?;
        let (block, start) = self.shared_data()?;
        Some(Origin { src, at: block.base + start as u64 })
    }
}

/// Container format of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFormat {
    /// Classic libpcap format.
    Pcap {
        /// Timestamps in nanoseconds (magic a1b23c4d) rather than microseconds.
        nanos: bool,
        /// File written big-endian.
        big_endian: bool,
        /// Link type from the file header.
        linktype: u32,
        /// Snap length from the file header.
        snaplen: u32,
    },
    /// pcapng (any number of sections and interfaces).
    PcapNg,
}

/// Compression detected on the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain.
    None,
    /// gzip.
    Gzip,
    /// zstd.
    Zstd,
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    linktype: u32,
    units_per_sec: u64,
    offset_s: i64,
    snaplen: u32,
}

/// Counts input bytes consumed from the underlying file (compressed bytes for compressed
/// input), for progress reporting.
#[derive(Debug, Default, Clone)]
struct Counter(std::rc::Rc<std::cell::Cell<u64>>);

struct CountingRead<R> {
    inner: R,
    counter: Counter,
}

impl<R: Read> Read for CountingRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.0.set(self.counter.0.get() + n as u64);
        Ok(n)
    }
}

enum Storage {
    Owned(Vec<u8>),
    Shared(SharedBlock),
    /// `buf[..end]` holds input; `share`: packets say where they lie in `buf` (a regular
    /// file); `spare`: earlier buffers, for reuse once no other thread holds them.
    Stream {
        reader: Box<dyn Read>,
        buf: SharedBlock,
        end: usize,
        eof: bool,
        share: bool,
        /// Oldest first: the reader goes on in the free one it left longest ago.
        spare: VecDeque<SharedBlock>,
        /// The file, to be read again at a place (a regular file, not compressed).
        reread: Option<Arc<Reread>>,
    },
    /// A mapped regular file: `buf` is the window `[base, base + buf.len())` of it the
    /// reader parses (records are shared from it, never copied); `limit` the file's
    /// length as mapped (its length now once it `shrank`, which the window never passes);
    /// `released` how far the file's pages have been unmapped behind the cursor.
    Mapped {
        file: Arc<MappedFile>,
        reread: Option<Arc<Reread>>,
        buf: SharedBlock,
        limit: usize,
        released: usize,
        shrank: Shrink,
    },
}

/// Whether a mapped file was seen to shrink under the map, and whether that was said.
#[derive(Debug, Clone, Copy)]
enum Shrink {
    No,
    /// Seen: the length mapped, and the file's length when it was seen (the storage's
    /// `limit` is where reading ends: that length, or the first page that faulted when
    /// the file kept its length and a page could not be read).
    Seen {
        from: usize,
        length: usize,
    },
    Reported,
}

/// Outcome of parsing one record at the front of the window (numbers only, so the borrow
/// of the window ends before the reader's state is changed).
enum Step {
    Need(u64),
    Skip(usize),
    Section { big_endian: bool, consumed: usize },
    Interface { iface: Interface, consumed: usize },
    Packet(PacketStep),
    BadRecord { consumed: usize, reason: String, is_packet: bool },
    Fatal(String),
}

struct PacketStep {
    consumed: usize,
    data_start: usize,
    data_len: usize,
    ts_ns: i64,
    linktype: u32,
    origlen: u32,
    interface: u32,
}

/// Reads packet records from one capture input.
pub struct CaptureReader {
    name: String,
    storage: Storage,
    /// Index of the first unread byte in the storage.
    pos: usize,
    /// Offset, in the decompressed stream, of storage index 0.
    base: u64,
    format: CaptureFormat,
    compression: Compression,
    frame: u64,
    ng_big_endian: bool,
    interfaces: Vec<Interface>,
    last_ts_ns: i64,
    warnings: Vec<CaptureError>,
    /// Records whose caplen exceeded their len (see `suspect_caplen`).
    caplen_over_len: u64,
    /// How far (offset in the capture stream) the record loop has asked the CPU for the
    /// bytes ahead of the cursor (see [`PREFETCH_AHEAD`]).
    asked: u64,
    input_total: Option<u64>,
    input_counter: Option<Counter>,
}

/// A reader closed: its file's handle for reading again goes too (histories still holding
/// places in it open it again by name, `Reread::release`).
impl Drop for CaptureReader {
    fn drop(&mut self) {
        if let Storage::Stream { reread: Some(r), .. } | Storage::Mapped { reread: Some(r), .. } = &self.storage {
            r.release();
        }
    }
}

impl std::fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("frame", &self.frame)
            .finish_non_exhaustive()
    }
}

fn hex_prefix(b: &[u8]) -> String {
    b.iter().take(8).map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ")
}

fn io_err(what: &str, source: io::Error) -> CaptureError {
    CaptureError::Io { what: what.to_string(), source }
}

impl CaptureReader {
    /// Opens a capture file, or standard input when `path` is `-`, read with `read()`
    /// through the bounded buffer. With `LNETCAP_MAP=1` in the environment (and no
    /// `LNETCAP_NO_MAP`) a file [`open_mapped`](Self::open_mapped) maps is mapped instead.
    ///
    /// Read by default: what a map saves depends on how the file came into the page
    /// cache, which a process cannot see. A full-payload file read back from disk (large
    /// folios) ran 1.04-1.11x faster mapped, one that tcpdump had just written in 4 KiB
    /// writes (a small folio a page, each mapped and unmapped on its own) 0.73-0.80x as
    /// fast (README Speed, "Read against map").
    pub fn open(path: &Path) -> Result<Self, CaptureError> {
        let asked = map_asked(std::env::var_os("LNETCAP_MAP"), std::env::var_os("LNETCAP_NO_MAP"));
        Self::open_as(path, if asked { MapWhen::WholeFrames } else { MapWhen::Never })
    }

    /// [`open`](Self::open), mapping a plain classic pcap file of whole frames
    /// ([`MAP_MIN_SNAPLEN`]); anything else is read.
    pub fn open_mapped(path: &Path) -> Result<Self, CaptureError> {
        Self::open_as(path, MapWhen::WholeFrames)
    }

    /// Opens a capture whose packets other threads decode (`--threads` > 1): a plain
    /// classic pcap file of whole frames whose records are large is mapped
    /// ([`MAP_THREADED_MIN_MEAN_RECORD`], over the first [`MAP_PROBE_BYTES`]), anything
    /// else is read. With `LNETCAP_MAP=1` every file [`open_mapped`](Self::open_mapped)
    /// maps is mapped; with `LNETCAP_NO_MAP` (any value) everything is read.
    ///
    /// A read run's reading thread copies every byte of the file out of the page cache
    /// before the workers see any, which bounds the run on bulk payload (1 GB of full
    /// payload on the Intel VM of 2026-12-01: two threads 1.13x one thread's `analyze`
    /// read, 1.60x mapped, README Speed, "Read against map"); a map has no such copy. On
    /// a host whose copy is fast and a file in small folios (just written by tcpdump)
    /// the map lost (0.72-0.78x on the AMD VM of 2026-12-02): `LNETCAP_NO_MAP` there.
    /// Small records lose to the map: each
    /// packet is then mostly the bytes the workers read anyway, and a reused read buffer
    /// stays in their caches where every page of a map is new to them.
    pub fn open_threaded(path: &Path) -> Result<Self, CaptureError> {
        Self::open_as(path, map_when_threaded(std::env::var_os("LNETCAP_MAP"), std::env::var_os("LNETCAP_NO_MAP")))
    }

    /// [`open`](Self::open), but a file is read with `read()` into a buffer, never
    /// mapped, whatever the environment says: for tests that hold the two ways to one
    /// answer.
    pub fn open_unmapped(path: &Path) -> Result<Self, CaptureError> {
        Self::open_as(path, MapWhen::Never)
    }

    fn open_as(path: &Path, when: MapWhen) -> Result<Self, CaptureError> {
        let name = path.display().to_string();
        if name == "-" {
            return Self::from_reader("stdin", Box::new(io::stdin()), None);
        }
        let mut file = File::open(path).map_err(|e| io_err(&name, e))?;
        let meta = file.metadata().ok();
        let total = meta.as_ref().map(|m| m.len());
        let regular = meta.is_some_and(|m| m.is_file());
        let reread = if regular { Reread::file(path, &file) } else { None };
        // The kernel's copy into a read buffer was a third to a half of a full-payload
        // run; a map does without it (README Speed). A file cut short under the map ends
        // there with an error instead of SIGBUS (`map`).
        if regular && worth_mapping(&file, when) {
            match MappedFile::open(file, total.unwrap_or(0)) {
                Ok(map) => return Self::mapped(name, map, reread),
                Err(f) => file = f,
            }
        }
        Self::from_stream(&name, Box::new(file), total, regular, reread)
    }

    /// A reader of a mapped file: windows of the map, from its first byte.
    fn mapped(name: String, file: Arc<MappedFile>, reread: Option<Arc<Reread>>) -> Result<Self, CaptureError> {
        let limit = file.bytes().len();
        let bytes = Bytes::Map { file: Arc::clone(&file), start: 0, len: 0 };
        let buf = Arc::new(InputBlock::new(bytes, reread.clone(), 0));
        let storage = Storage::Mapped { file, reread, buf, limit, released: 0, shrank: Shrink::No };
        Self::with_storage(name, storage, Compression::None, Some(limit as u64), None)
    }

    /// Reads a capture from memory (tests, fuzzing, already-loaded data).
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<Self, CaptureError> {
        if bytes.len() >= 4 && (bytes[..2] == [0x1f, 0x8b] || bytes[..4] == [0x28, 0xb5, 0x2f, 0xfd]) {
            let total = bytes.len() as u64;
            return Self::from_reader(name, Box::new(io::Cursor::new(bytes)), Some(total));
        }
        let total = bytes.len() as u64;
        Self::with_storage(name.to_string(), Storage::Owned(bytes), Compression::None, Some(total), None)
    }

    /// Reads an uncompressed capture shared with the caller (benchmarks: no copy per run).
    pub fn from_shared(name: &str, bytes: Arc<Vec<u8>>) -> Result<Self, CaptureError> {
        let total = bytes.len() as u64;
        let reread = Reread::memory(Arc::clone(&bytes));
        let block = Arc::new(InputBlock::new(Bytes::Whole(bytes), Some(reread), 0));
        Self::with_storage(name.to_string(), Storage::Shared(block), Compression::None, Some(total), None)
    }

    /// Reads a capture from any byte stream (pipes, sockets); gzip / zstd are recognised.
    pub fn from_reader(name: &str, reader: Box<dyn Read>, total: Option<u64>) -> Result<Self, CaptureError> {
        Self::from_stream(name, reader, total, false, None)
    }

    /// [`CaptureReader::from_reader`]; `share`: the input gives whole chunks per read (a
    /// regular file), so that its blocks are worth sharing when it is not compressed;
    /// `reread`: the file, whose bytes can then be read again where they lie.
    fn from_stream(
        name: &str,
        reader: Box<dyn Read>,
        total: Option<u64>,
        share: bool,
        reread: Option<Arc<Reread>>,
    ) -> Result<Self, CaptureError> {
        let counter = Counter::default();
        let mut reader: Box<dyn Read> = Box::new(CountingRead { inner: reader, counter: counter.clone() });
        let mut magic = [0u8; 4];
        let n = read_up_to(&mut reader, &mut magic).map_err(|e| io_err(name, e))?;
        let head = io::Cursor::new(magic[..n].to_vec());
        let chained: Box<dyn Read> = Box::new(head.chain(reader));
        let (stream, compression): (Box<dyn Read>, _) = if n >= 2 && magic[..2] == [0x1f, 0x8b] {
            (Box::new(flate2::read::MultiGzDecoder::new(chained)), Compression::Gzip)
        } else if n == 4 && magic == [0x28, 0xb5, 0x2f, 0xfd] {
            let dec = zstd::stream::read::Decoder::new(chained).map_err(|e| io_err(name, e))?;
            (Box::new(dec), Compression::Zstd)
        } else {
            (chained, Compression::None)
        };
        let share = share && compression == Compression::None;
        let reread = reread.filter(|_| share);
        let storage = Storage::Stream {
            reader: stream,
            buf: SharedBlock::default(),
            end: 0,
            eof: false,
            share,
            spare: VecDeque::new(),
            reread,
        };
        Self::with_storage(name.to_string(), storage, compression, total, Some(counter))
    }

    fn with_storage(
        name: String,
        storage: Storage,
        compression: Compression,
        total: Option<u64>,
        counter: Option<Counter>,
    ) -> Result<Self, CaptureError> {
        let mut r = Self {
            name,
            storage,
            pos: 0,
            base: 0,
            format: CaptureFormat::PcapNg,
            compression,
            frame: 0,
            ng_big_endian: false,
            interfaces: Vec::new(),
            last_ts_ns: 0,
            warnings: Vec::new(),
            caplen_over_len: 0,
            asked: 0,
            input_total: total,
            input_counter: counter,
        };
        r.read_file_header()?;
        Ok(r)
    }

    /// Name of the input (file name or "stdin").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Container format.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// Compression of the input.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Frames read so far (the number of the last frame returned).
    pub fn frames_read(&self) -> u64 {
        self.frame
    }

    /// Bytes of the underlying input consumed so far (compressed bytes for compressed
    /// input) and the input's total size when known: for progress bars.
    pub fn input_progress(&self) -> (u64, Option<u64>) {
        let done = match &self.input_counter {
            Some(c) => c.0.get(),
            None => self.base + self.pos as u64,
        };
        (done, self.input_total)
    }

    /// Whether record problems wait to be drained.
    #[inline]
    pub fn has_warnings(&self) -> bool {
        !self.warnings.is_empty()
    }

    /// Problems met so far that did not stop reading (malformed blocks that were skipped).
    pub fn drain_warnings(&mut self) -> Vec<CaptureError> {
        std::mem::take(&mut self.warnings)
    }

    fn window(&self) -> &[u8] {
        match &self.storage {
            Storage::Owned(v) => v.get(self.pos..).unwrap_or(&[]),
            Storage::Shared(v) => v.get(self.pos..).unwrap_or(&[]),
            Storage::Stream { buf, end, .. } => buf.get(self.pos..*end).unwrap_or(&[]),
            Storage::Mapped { buf, .. } => buf.get(self.pos..).unwrap_or(&[]),
        }
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Reads more input into the stream buffer, keeping the unread bytes. Returns false when
    /// no more bytes can come.
    fn refill(&mut self, want: usize) -> Result<bool, CaptureError> {
        if let Storage::Mapped { .. } = self.storage {
            return self.refill_map(want);
        }
        let frame = self.frame;
        let Storage::Stream { reader, buf, end, eof, spare, reread, .. } = &mut self.storage else {
            return Ok(false);
        };
        if *eof {
            return Ok(false);
        }
        // Another thread holds the block (a parallel run's worker): go on in a free spare
        // one (or a new one) with the unread bytes, and keep this one for reuse. The free
        // one left longest ago: the worker that read it last did so longest ago, so its
        // lines have most likely left that core's cache and the kernel's copy into it
        // does not take them back line by line (the first free one in the list, often
        // the one a worker had just let go, ran a two-thread `analyze` 0.95-0.98x as fast,
        // 2026-11-28, paired rounds).
        if Arc::get_mut(buf).is_none() {
            let free = spare.iter().position(|b| Arc::strong_count(b) == 1 && Arc::weak_count(b) == 0);
            let mut next = free.and_then(|i| spare.remove(i)).unwrap_or_default();
            let nb = Arc::make_mut(&mut next).heap();
            let unread = *end - self.pos;
            if nb.len() < unread {
                nb.resize(unread, 0);
            }
            nb[..unread].copy_from_slice(&buf[self.pos..*end]);
            let old = std::mem::replace(buf, next);
            if spare.len() < MAX_SPARE_BLOCKS && old.len() <= MAX_SHARED_BLOCK_BYTES {
                spare.push_back(old);
            }
            *end = unread;
            self.base += self.pos as u64;
            self.pos = 0;
        }
        // No other holder now: make_mut does not copy.
        let block = Arc::make_mut(buf);
        let buf = block.heap();
        // Compact: move the unread bytes to the front.
        if self.pos > 0 {
            buf.copy_within(self.pos..*end, 0);
            *end -= self.pos;
            self.base += self.pos as u64;
            self.pos = 0;
        }
        // The block's first byte is at `base` of the input (a place in the file, which
        // packets' origins are counted from).
        block.base = self.base;
        if block.reread.is_none() {
            block.reread = reread.clone();
        }
        let buf = block.heap();
        let need = (*end + want.max(STREAM_CHUNK_BYTES)).min(*end + MAX_RECORD_BYTES + STREAM_CHUNK_BYTES);
        if buf.len() < need {
            buf.resize(need, 0);
        }
        let mut got_any = false;
        while *end < buf.len() {
            match reader.read(&mut buf[*end..]) {
                Ok(0) => {
                    *eof = true;
                    break;
                }
                Ok(n) => {
                    *end += n;
                    got_any = true;
                    if *end >= want {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Where: a truncated or corrupt compressed stream says how far it got.
                    let at = self.base + *end as u64;
                    let what = format!("{} at offset {at} of the decompressed stream, after frame {frame}", self.name);
                    return Err(io_err(&what, e));
                }
            }
        }
        Ok(got_any)
    }

    /// [`refill`](Self::refill) of a mapped file: the next window, from the first unread
    /// byte, at least `want` bytes longer (up to the file's end), its pages mapped in one
    /// call; the file's pages far enough behind are released.
    fn refill_map(&mut self, want: usize) -> Result<bool, CaptureError> {
        self.note_shrink();
        // A cut that no fault showed yet (pages not touched since, or a cut inside the
        // page the window ends in, whose tail reads as zeros).
        if let Storage::Mapped { file, limit, shrank: Shrink::No, .. } = &self.storage {
            match file.length_now().map(|n| usize::try_from(n).unwrap_or(usize::MAX)) {
                Some(now) if now < *limit => self.cut_map(now, now),
                _ => {}
            }
        }
        let (at, frame) = (self.base as usize + self.pos, self.frame);
        let Storage::Mapped { file, reread, buf, limit, released, shrank } = &mut self.storage else {
            return Ok(false);
        };
        let have = buf.len().saturating_sub(self.pos);
        let len = (have + want.max(MAP_WINDOW_BYTES)).min(limit.saturating_sub(at));
        if len <= have {
            let Shrink::Seen { from, length } = *shrank else { return Ok(false) };
            *shrank = Shrink::Reported;
            // Which of the two ended the reading: the file's new end, or a page that
            // faulted before it (the file cut and written again, or an I/O error).
            let why = if *limit < length {
                format!(
                    "the page at offset {limit} could not be read under the map (it faulted while the file was {length} bytes long: cut and written again, or an I/O error of its device): nothing from there on is read"
                )
            } else {
                format!(
                    "the file shrank from {from} to {length} bytes while it was read (another process truncated it): what it had past its new end is not read"
                )
            };
            let what = format!("{} at offset {at}, after frame {frame}", self.name);
            return Err(io_err(&what, io::Error::new(io::ErrorKind::UnexpectedEof, why)));
        }
        file.populate(at + have, len - have);
        let bytes = Bytes::Map { file: Arc::clone(file), start: at, len };
        *buf = Arc::new(InputBlock::new(bytes, reread.clone(), at as u64));
        self.base = at as u64;
        self.pos = 0;
        if at >= *released + MAP_KEEP_BEHIND + MAP_RELEASE_STEP {
            let to = at - MAP_KEEP_BEHIND;
            file.release(*released, to - *released);
            *released = to;
        }
        Ok(true)
    }

    /// A mapped file whose shrinking has not been noted yet shrank.
    #[inline(always)]
    fn map_shrank(&self) -> bool {
        matches!(&self.storage, Storage::Mapped { file, shrank: Shrink::No, .. } if file.shrank())
    }

    /// The mapped file shrank: its length now is the limit, and the window is cut there
    /// (records before it are read as usual; the end says what happened).
    #[cold]
    #[inline(never)]
    fn note_shrink(&mut self) {
        if let (true, Storage::Mapped { file, .. }) = (self.map_shrank(), &self.storage) {
            let length = file.length_now().map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
            let fault = file.first_fault().unwrap_or(usize::MAX);
            self.cut_map(length.min(fault), length);
        }
    }

    /// The mapped file is `length` bytes long now and reading ends at `end` (that length,
    /// or the first page that faulted, before it): the window ends there.
    fn cut_map(&mut self, end: usize, length: usize) {
        let start = self.base as usize;
        let Storage::Mapped { file, reread, buf, limit, shrank, .. } = &mut self.storage else { return };
        let now = end.min(*limit);
        *shrank = Shrink::Seen { from: *limit, length };
        *limit = now;
        let keep = now.saturating_sub(start).min(buf.len());
        let bytes = Bytes::Map { file: Arc::clone(file), start, len: keep };
        *buf = Arc::new(InputBlock::new(bytes, reread.clone(), start as u64));
        self.pos = self.pos.min(keep);
    }

    fn ensure(&mut self, n: usize) -> Result<bool, CaptureError> {
        while self.window().len() < n {
            let want = n - self.window().len();
            if !self.refill(want)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn read_file_header(&mut self) -> Result<(), CaptureError> {
        self.ensure(24)?;
        let w = self.window();
        if w.len() < 4 {
            return Err(CaptureError::NotACapture { first_bytes: hex_prefix(w) });
        }
        let magic = [w[0], w[1], w[2], w[3]];
        let (nanos, big_endian) = match pcap_magic(magic) {
            Some(v) => v,
            None if magic == [0x0a, 0x0d, 0x0d, 0x0a] => {
                self.format = CaptureFormat::PcapNg;
                return Ok(());
            }
            None => return Err(CaptureError::NotACapture { first_bytes: hex_prefix(w) }),
        };
        if w.len() < 24 {
            return Err(CaptureError::Truncated { offset: 0, frame: 0, needed: 24 - w.len() as u64 });
        }
        // The 24-byte header is there (checked above).
        let rd = |o: usize| u32_at(w, o, big_endian).unwrap_or(0);
        let snaplen = rd(16);
        // The low 16 bits hold the link type; the upper bits may carry FCS information.
        let linktype = rd(20) & 0xffff;
        self.format = CaptureFormat::Pcap { nanos, big_endian, linktype, snaplen };
        self.pos += 24;
        Ok(())
    }

    /// Returns the next packet, `Ok(None)` at the end of the input, or an error when the
    /// input cannot be read further (a truncated last record, an I/O error, a corrupt record
    /// header whose length cannot be trusted). Malformed blocks that can be skipped are
    /// reported through [`drain_warnings`](Self::drain_warnings).
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        if self.map_shrank() {
            self.note_shrink();
        }
        // The usual record: a whole pcap record or enhanced packet block in the window.
        let usual = match self.format {
            CaptureFormat::Pcap { nanos, big_endian, linktype, .. } => {
                whole_pcap_record(self.window(), nanos, big_endian, linktype)
            }
            CaptureFormat::PcapNg => whole_epb(self.window(), self.ng_big_endian, &self.interfaces),
        };
        if let Some(p) = usual {
            if !self.map_shrank() {
                return Ok(Some(self.take_packet(p)));
            }
            self.note_shrink();
        }
        loop {
            let win = self.window();
            if win.is_empty() {
                if self.refill(1)? {
                    continue;
                }
                return Ok(None);
            }
            let step = match self.format {
                CaptureFormat::Pcap { nanos, big_endian, linktype, .. } => step_pcap(win, nanos, big_endian, linktype),
                CaptureFormat::PcapNg => step_pcapng(win, self.ng_big_endian, &self.interfaces, self.last_ts_ns),
            };
            // A fault while the record was parsed: the file was cut; parse again up to the cut.
            if self.map_shrank() {
                self.note_shrink();
                continue;
            }
            match step {
                Step::Need(n) => {
                    let have = self.window().len();
                    if !self.ensure(have + n as usize)? {
                        let needed = (have as u64 + n).saturating_sub(self.window().len() as u64);
                        let e = CaptureError::Truncated { offset: self.offset(), frame: self.frame + 1, needed };
                        // Consume the rest so that a caller that continues sees the end.
                        self.pos += self.window().len();
                        return Err(e);
                    }
                }
                Step::Skip(n) => self.pos += n,
                Step::Section { big_endian, consumed } => {
                    self.ng_big_endian = big_endian;
                    self.interfaces.clear();
                    self.pos += consumed;
                }
                Step::Interface { iface, consumed } => {
                    if self.interfaces.len() < MAX_INTERFACES {
                        self.interfaces.push(iface);
                    }
                    self.pos += consumed;
                }
                Step::BadRecord { consumed, reason, is_packet } => {
                    if is_packet {
                        self.frame += 1;
                    }
                    let container = if matches!(self.format, CaptureFormat::Pcap { .. }) { "pcap" } else { "pcapng" };
                    self.warnings.push(CaptureError::Malformed {
                        container,
                        offset: self.offset(),
                        frame: self.frame + u64::from(!is_packet),
                        reason,
                    });
                    self.pos += consumed;
                }
                Step::Fatal(reason) => {
                    let container = if matches!(self.format, CaptureFormat::Pcap { .. }) { "pcap" } else { "pcapng" };
                    let e = CaptureError::Malformed { container, offset: self.offset(), frame: self.frame + 1, reason };
                    self.pos += self.window().len();
                    return Err(e);
                }
                Step::Packet(p) => return Ok(Some(self.take_packet(p))),
            }
        }
    }

    /// The packet of a record found whole in the window; the reader moves past it.
    /// Inlined into `next_packet` (every frame comes through here), with one look at the
    /// storage for both the bytes and the block they can be shared in.
    #[inline(always)]
    fn take_packet(&mut self, p: PacketStep) -> Packet<'_> {
        let offset = self.offset();
        let start = self.pos + p.data_start;
        self.pos += p.consumed;
        self.frame += 1;
        if p.data_len > p.origlen as usize {
            self.suspect_caplen(offset, p.data_len, p.origlen);
        }
        self.last_ts_ns = p.ts_ns;
        let (all, _, shared) = self.run_parts();
        Packet {
            frame: self.frame,
            ts_ns: p.ts_ns,
            linktype: p.linktype,
            origlen: p.origlen,
            data: all.get(start..start + p.data_len).unwrap_or(&[]),
            offset,
            interface: p.interface,
            shared: shared.map(|block| Shared { block, start }),
        }
    }
}

/// One record of a [`Run`]: what a [`Packet`] says, its bytes at `start..start + len` of the
/// run's block (plain numbers, so that a run is filled in one tight loop and read after).
#[derive(Debug, Clone, Copy, Default)]
pub struct Rec {
    /// 1-based frame number.
    pub frame: u64,
    /// Capture timestamp, ns since the Unix epoch.
    pub ts_ns: i64,
    /// Byte offset of the record in the capture stream.
    pub offset: u64,
    /// Where its captured bytes start in the run's block.
    pub start: usize,
    /// Captured length.
    pub len: u32,
    /// Original length on the wire.
    pub origlen: u32,
}

/// The block the records of a run ([`CaptureReader::next_run`]) lie in.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    bytes: &'a [u8],
    shared: Option<&'a SharedBlock>,
    linktype: u32,
    /// The pcapng interface of every record of the run (0 for pcap).
    interface: u32,
}

impl<'a> Run<'a> {
    /// The packet of a record of this run: the one [`CaptureReader::next_packet`] would
    /// have returned for it.
    #[inline(always)]
    pub fn packet(&self, r: &Rec) -> Packet<'a> {
        Packet {
            frame: r.frame,
            ts_ns: r.ts_ns,
            linktype: self.linktype,
            origlen: r.origlen,
            data: self.bytes.get(r.start..r.start + r.len as usize).unwrap_or(&[]),
            offset: r.offset,
            interface: self.interface,
            shared: self.shared.map(|block| Shared { block, start: r.start }),
        }
    }
}

/// How far ahead of a record the record loop asks for a mapped capture's bytes: every
/// 64-byte line up to there, once (a large record's payload is asked for too, and not
/// read); and how far past its first record a mapped run reaches at most (`next_run`).
const PREFETCH_AHEAD: usize = 16 * 1024;

/// Where a run ends at the latest: `max` records, and before the first record that starts
/// at or past `stop` (a position in the window).
#[derive(Clone, Copy)]
struct RunBound {
    max: usize,
    stop: usize,
}

/// Fills `out` with the whole records at `pos` in `win`, up to `bound`; stops before any
/// record the general path must see (one not whole in the window, over the record limit,
/// or with more bytes captured than its frame had, which warns). Returns the position
/// after the last one taken; `asked`: how far the bytes ahead have been asked for.
#[inline(always)]
fn fill_run<const BE: bool, const NANOS: bool>(
    asked: &mut usize,
    win: &[u8],
    mut pos: usize,
    base: u64,
    frame: u64,
    out: &mut Vec<Rec>,
    bound: RunBound,
) -> usize {
    let word = |h: &[u8; 16], o: usize| {
        let b = [h[o], h[o + 1], h[o + 2], h[o + 3]];
        if BE {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let mut frame = frame;
    while out.len() < bound.max && pos < bound.stop {
        let Some(h) = win.get(pos..pos + 16).and_then(|h| <&[u8; 16]>::try_from(h).ok()) else { break };
        let (caplen, origlen) = (word(h, 8), word(h, 12));
        let len = caplen as usize;
        if len > MAX_RECORD_BYTES || win.len() - pos - 16 < len || caplen > origlen {
            break;
        }
        // Every line up to PREFETCH_AHEAD ahead, asked for once.
        let to = pos + PREFETCH_AHEAD;
        let mut at = (*asked).max(pos);
        while at < to {
            prefetch(win.as_ptr().wrapping_add(at));
            at += 64;
        }
        *asked = at;
        let frac = if NANOS { u64::from(word(h, 4)) } else { u64::from(word(h, 4)) * 1000 };
        frame += 1;
        out.push(Rec {
            frame,
            ts_ns: i64::from(word(h, 0)) * 1_000_000_000 + frac as i64,
            offset: base + pos as u64,
            start: pos + 16,
            len: caplen,
            origlen,
        });
        pos += 16 + len;
    }
    pos
}

impl CaptureReader {
    /// The whole records in the window now, at most `max` in `out` (which the caller
    /// clears), as [`next_packet`](Self::next_packet) would give them one by one: a
    /// consumer's loop over a run does not pay a call, a look at the format and the
    /// storage, and a `Result<Option<Packet>>` per record. `None` when this input gives
    /// no runs (a mapped pcapng file, which `open` never makes); an empty run when the next record needs the
    /// general path (`next_packet`: a refill, a record that warns, any pcapng block but an
    /// enhanced packet block, the end).
    pub fn next_run(&mut self, out: &mut Vec<Rec>, max: usize) -> Option<Run<'_>> {
        let CaptureFormat::Pcap { nanos, big_endian, linktype, .. } = self.format else {
            return self.next_run_ng(out, max);
        };
        if self.map_shrank() {
            self.note_shrink();
        }
        let first = out.len();
        let fill = match (big_endian, nanos) {
            (false, false) => fill_run::<false, false>,
            (false, true) => fill_run::<false, true>,
            (true, false) => fill_run::<true, false>,
            (true, true) => fill_run::<true, true>,
        };
        // Only a map's bytes are asked for ahead: a read buffer's are in the cache already.
        // A map's run ends within PREFETCH_AHEAD of its start: the records it walks were
        // asked for while the run before it was used, and they are still in the cache
        // when this one is (a run of 1,024 whole frames, 1.5 MB, outgrew the cache
        // between the walk and the use, and its walk waited on memory record by record).
        let (mut asked, stop) = match self.storage {
            Storage::Mapped { .. } => (self.asked.saturating_sub(self.base) as usize, self.pos + PREFETCH_AHEAD),
            _ => (usize::MAX - PREFETCH_AHEAD, usize::MAX),
        };
        let (all, end, _) = self.run_parts();
        let bound = RunBound { max, stop };
        self.pos = fill(&mut asked, all.get(..end).unwrap_or(&[]), self.pos, self.base, self.frame, out, bound);
        self.asked = self.base.saturating_add(asked as u64);
        self.probe_past_run(out.get(first..).and_then(|r| r.last()));
        // A fault while the headers were read: the file was cut under the map.
        if self.map_shrank() {
            self.note_shrink();
            self.keep_before_cut(out, first);
        }
        Some(self.run_taken(&out[first..], linktype, 0))
    }

    /// The run of the records `taken` (the reader is past them): its frame count and last
    /// time move to the last one.
    fn run_taken(&mut self, taken: &[Rec], linktype: u32, interface: u32) -> Run<'_> {
        if let Some(last) = taken.last() {
            self.frame = last.frame;
            self.last_ts_ns = last.ts_ns;
        }
        let (all, _, shared) = self.run_parts();
        Run { bytes: all, shared, linktype, interface }
    }

    /// [`CaptureReader::next_run`] of pcapng: the enhanced packet blocks at hand of one
    /// interface, each as `next_packet` gives it ([`whole_epb`]). A mapped file gives
    /// none: its runs would need the checks of a file cut under its map (no pcapng file
    /// is mapped today: `worth_mapping` takes classic pcap only; the guard keeps it so
    /// should that change).
    fn next_run_ng(&mut self, out: &mut Vec<Rec>, max: usize) -> Option<Run<'_>> {
        if matches!(self.storage, Storage::Mapped { .. }) {
            return None;
        }
        let first = out.len();
        let (all, end, _) = self.run_parts();
        let win = all.get(..end).unwrap_or(&[]);
        let (pos, iface) =
            fill_run_ng(win, self.pos, self.base, self.frame, out, max, self.ng_big_endian, &self.interfaces);
        self.pos = pos;
        let linktype = iface.and_then(|i| self.interfaces.get(i as usize)).map_or(0, |f| f.linktype);
        Some(self.run_taken(&out[first..], linktype, iface.unwrap_or(0)))
    }

    /// The storage's bytes, how far they hold input, and the block packets may share.
    #[inline(always)]
    fn run_parts(&self) -> (&[u8], usize, Option<&SharedBlock>) {
        match &self.storage {
            Storage::Owned(v) => (v, v.len(), None),
            Storage::Shared(block) => (block, block.len(), Some(block)),
            Storage::Stream { buf, end, share, .. } => {
                (buf, *end, (*share && buf.len() <= MAX_SHARED_BLOCK_BYTES).then_some(buf))
            }
            Storage::Mapped { buf, .. } => (buf, buf.len(), Some(buf)),
        }
    }

    /// Reads a byte of the page after the one a mapped run's last record ends in (when the
    /// window holds it): were the file cut before that end, the page lies wholly past the
    /// cut and faults, and the run is cut back to whole records ([`keep_before_cut`]). A
    /// run that walked on past its last record's page did so itself; one that ends within
    /// [`PREFETCH_AHEAD`] of its start might not have.
    ///
    /// [`keep_before_cut`]: Self::keep_before_cut
    #[inline]
    fn probe_past_run(&self, last: Option<&Rec>) {
        let (Storage::Mapped { buf, .. }, Some(last)) = (&self.storage, last) else { return };
        let page = MappedFile::page_size() as u64;
        let end = self.base + (last.start + last.len as usize) as u64;
        let next_page = (end.saturating_sub(1) / page + 1) * page;
        if let Some(&b) = usize::try_from(next_page - self.base).ok().and_then(|i| buf.get(i)) {
            std::hint::black_box(b);
        }
    }

    /// After a cut: drops the run's records from the first that does not end before the
    /// window's (new) end, and puts the cursor at it.
    #[cold]
    fn keep_before_cut(&mut self, out: &mut Vec<Rec>, first: usize) {
        let end = self.window().len() + self.pos;
        if let Some(k) = out[first..].iter().position(|r| r.start + r.len as usize > end) {
            self.pos = out[first + k].start - 16;
            out.truncate(first + k);
        }
    }

    /// A record with more bytes captured than its frame had: named once per source (the
    /// first such record, with its frame and offset), counted, and read as captured.
    #[cold]
    #[inline(never)]
    fn suspect_caplen(&mut self, offset: u64, caplen: usize, origlen: u32) {
        self.caplen_over_len += 1;
        if self.caplen_over_len > 1 {
            return;
        }
        let container = if matches!(self.format, CaptureFormat::Pcap { .. }) { "pcap" } else { "pcapng" };
        self.warnings.push(CaptureError::Suspect {
            container,
            offset,
            frame: self.frame,
            reason: format!(
                "{caplen} bytes captured of a {origlen}-byte frame (caplen > len): read as captured; later records like it are counted, not named"
            ),
        });
    }

    /// Records whose captured length exceeded their frame's length.
    pub fn caplen_over_len(&self) -> u64 {
        self.caplen_over_len
    }
}

/// Whether the environment asks for whole-frame files to be mapped: `LNETCAP_MAP=1`,
/// unless `LNETCAP_NO_MAP` is set too (any value: it read everything when the map was
/// the default, and still does).
fn map_asked(map: Option<std::ffi::OsString>, no_map: Option<std::ffi::OsString>) -> bool {
    map.is_some_and(|v| v == "1") && no_map.is_none()
}

/// Which files a reader maps rather than reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MapWhen {
    /// None: every file is read.
    Never,
    /// Plain classic pcap files of whole frames ([`MAP_MIN_SNAPLEN`]).
    WholeFrames,
    /// Those whose first records are large too ([`MAP_THREADED_MIN_MEAN_RECORD`]).
    LargeRecords,
}

/// What a run whose packets other threads decode maps ([`CaptureReader::open_threaded`]):
/// nothing with `LNETCAP_NO_MAP` (any value), every whole-frame file with `LNETCAP_MAP=1`,
/// else the whole-frame files of large records.
fn map_when_threaded(map: Option<std::ffi::OsString>, no_map: Option<std::ffi::OsString>) -> MapWhen {
    match (no_map, map) {
        (Some(_), _) => MapWhen::Never,
        (None, Some(v)) if v == "1" => MapWhen::WholeFrames,
        _ => MapWhen::LargeRecords,
    }
}

/// Whether a file is better mapped than read, as `when` says: a classic pcap file (not
/// compressed, not pcapng) whose snap length is at least [`MAP_MIN_SNAPLEN`], and for
/// [`MapWhen::LargeRecords`] whose records in the first [`MAP_PROBE_BYTES`] are
/// [`MAP_THREADED_MIN_MEAN_RECORD`] bytes long or longer on average. Read in place (the
/// file's position does not move).
fn worth_mapping(file: &File, when: MapWhen) -> bool {
    use std::os::unix::fs::FileExt;
    if when == MapWhen::Never {
        return false;
    }
    let mut h = [0u8; 24];
    if file.read_at(&mut h, 0).unwrap_or(0) < 24 {
        return false;
    }
    let Some((_, big_endian)) = pcap_magic([h[0], h[1], h[2], h[3]]) else { return false };
    let whole_frames = u32_at(&h, 16, big_endian).is_some_and(|snaplen| snaplen as usize >= MAP_MIN_SNAPLEN);
    whole_frames
        && (when == MapWhen::WholeFrames || {
            let mut probe = vec![0u8; MAP_PROBE_BYTES];
            let n = read_at_most(file, &mut probe, 24);
            mean_record_len(&probe[..n], big_endian).is_some_and(|m| m >= MAP_THREADED_MIN_MEAN_RECORD)
        })
}

/// Reads `buf.len()` bytes of `file` from `at` on, or as many as there are; a failed
/// read ends it (the reader meets the error itself).
fn read_at_most(file: &File, buf: &mut [u8], at: u64) -> usize {
    use std::os::unix::fs::FileExt;
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], at + n as u64) {
            Ok(k) if k > 0 => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            _ => break,
        }
    }
    n
}

/// The mean length, each 16-byte record header included, of the classic pcap records
/// that lie whole in `recs` (the bytes after the file header), or of the first record
/// alone when even that one does not: `None` without a whole first record header.
/// Counted in `u64`, so that a length near 4 GiB cannot wrap (on a 32-bit target too).
fn mean_record_len(recs: &[u8], big_endian: bool) -> Option<usize> {
    let (mut at, mut count, mut bytes) = (0u64, 0u64, 0u64);
    while let Some(caplen) = usize::try_from(at + 8).ok().and_then(|i| u32_at(recs, i, big_endian)) {
        let len = 16 + u64::from(caplen);
        if count > 0 && at + len > recs.len() as u64 {
            break;
        }
        (at, count, bytes) = (at + len, count + 1, bytes + len);
    }
    (count > 0).then(|| usize::try_from(bytes / count).unwrap_or(usize::MAX))
}

/// A classic pcap file's magic: (timestamps in nanoseconds, written big-endian), or
/// `None` for anything else.
fn pcap_magic(magic: [u8; 4]) -> Option<(bool, bool)> {
    match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] => Some((false, false)),
        [0xa1, 0xb2, 0xc3, 0xd4] => Some((false, true)),
        [0x4d, 0x3c, 0xb2, 0xa1] => Some((true, false)),
        [0xa1, 0xb2, 0x3c, 0x4d] => Some((true, true)),
        _ => None,
    }
}

fn read_up_to(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn u32_at(w: &[u8], o: usize, be: bool) -> Option<u32> {
    let b: [u8; 4] = w.get(o..o + 4)?.try_into().ok()?;
    Some(if be { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
}

fn step_pcap(win: &[u8], nanos: bool, be: bool, linktype: u32) -> Step {
    if let Some(p) = whole_pcap_record(win, nanos, be, linktype) {
        return Step::Packet(p);
    }
    if win.len() < 16 {
        return Step::Need(16 - win.len() as u64);
    }
    let caplen = u32_at(win, 8, be).unwrap_or(0) as usize;
    if caplen > MAX_RECORD_BYTES {
        return Step::Fatal(format!(
            "record claims {caplen} captured bytes (limit {MAX_RECORD_BYTES}); the file is corrupt from here on"
        ));
    }
    Step::Need((16 + caplen).saturating_sub(win.len()) as u64)
}

/// A pcap record whose 16-byte header and captured bytes are all in `win` (the record
/// layout of pcap-savefile(5): seconds, sub-second units, captured length, original
/// length), within the record limit; `None` for anything else (`step_pcap` says what).
/// Read in place: four words do not need a parser, and every frame comes through here.
#[inline]
fn whole_pcap_record(win: &[u8], nanos: bool, be: bool, linktype: u32) -> Option<PacketStep> {
    let h = win.get(..16)?;
    let word = |o: usize| u32_at(h, o, be).unwrap_or(0);
    let caplen = word(8) as usize;
    if caplen > MAX_RECORD_BYTES || win.len() - 16 < caplen {
        return None;
    }
    let frac = if nanos { u64::from(word(4)) } else { u64::from(word(4)) * 1000 };
    Some(PacketStep {
        consumed: 16 + caplen,
        data_start: 16,
        data_len: caplen,
        ts_ns: i64::from(word(0)) * 1_000_000_000 + frac as i64,
        linktype,
        origlen: word(12),
        interface: 0,
    })
}

fn iface_from_idb(linktype: i32, snaplen: u32, tsresol: u8, tsoffset: i64) -> Interface {
    let units = pcap_parser::build_ts_resolution(tsresol).filter(|u| *u > 0).unwrap_or(1_000_000);
    Interface { linktype: (linktype as u32) & 0xffff, units_per_sec: units, offset_s: tsoffset, snaplen }
}

/// A pcapng timestamp in ns since the epoch: `units_per_sec` units since the interface's
/// offset. Microseconds and nanoseconds (every capture tool's resolution) without the
/// 128-bit divisions the general case takes (two calls of a division routine a packet):
/// the same value, `ts_to_ns_general`'s to the bit (a test holds them together).
#[inline]
fn ts_to_ns(high: u32, low: u32, iface: &Interface) -> i64 {
    let t = (u64::from(high) << 32) | u64::from(low);
    // In 128 bits 1000 t and t are exact; their low 64 bits are these.
    let ns = match iface.units_per_sec {
        1_000_000 => t.wrapping_mul(1000) as i64,
        1_000_000_000 => t as i64,
        _ => return ts_to_ns_general(high, low, iface),
    };
    ns.saturating_add(iface.offset_s.saturating_mul(1_000_000_000))
}

/// [`ts_to_ns`] of any resolution.
#[inline(never)]
fn ts_to_ns_general(high: u32, low: u32, iface: &Interface) -> i64 {
    let t = (u128::from(high) << 32) | u128::from(low);
    let units = u128::from(iface.units_per_sec);
    let secs = t / units;
    let frac = t % units;
    let ns = secs * 1_000_000_000 + frac * 1_000_000_000 / units;
    (ns as i64).saturating_add(iface.offset_s.saturating_mul(1_000_000_000))
}

/// Block type of an enhanced packet block.
const EPB_TYPE: u32 = 6;

/// An enhanced packet block whole at the start of `win` that pcap-parser parses and
/// [`step_pcapng`] gives as a packet of a declared interface: the same [`PacketStep`],
/// read in place (seven words; pcap-parser's block parser with its options vector, 327
/// instructions a packet, and the 128-bit time arithmetic, 47, were a quarter of a
/// header-only `decode` of pcapng). `None` for anything else, which `step_pcapng` takes: every
/// check of pcap-parser on such a block is here (block length ≥ 32, a multiple of 4,
/// within the record limit and repeated at the block's end; caplen below 2^32 − 4, its
/// padded bytes within the block; options it parses without failing, whatever they
/// hold), and a proptest holds the two together on random blocks.
#[inline]
fn whole_epb(win: &[u8], be: bool, ifaces: &[Interface]) -> Option<PacketStep> {
    let h = win.get(..28)?;
    let word = |o: usize| u32_at(h, o, be).unwrap_or(0);
    let block_len = word(4) as usize;
    if word(0) != EPB_TYPE
        || block_len < 32
        || block_len % 4 != 0
        || block_len > MAX_RECORD_BYTES
        || win.len() < block_len
        || u32_at(win, block_len - 4, be) != Some(block_len as u32)
    {
        return None;
    }
    let caplen = word(20);
    if caplen >= u32::MAX - 4 || (caplen as usize).next_multiple_of(4) > block_len - 32 {
        return None;
    }
    let if_id = word(8);
    let iface = ifaces.get(if_id as usize)?;
    Some(PacketStep {
        consumed: block_len,
        data_start: 28,
        data_len: caplen as usize,
        ts_ns: ts_to_ns(word(12), word(16), iface),
        linktype: iface.linktype,
        origlen: word(24),
        interface: if_id,
    })
}

/// [`fill_run`] of pcapng: the enhanced packet blocks whole in `win` from `pos` on
/// ([`whole_epb`]), of the first one's interface, at most `max` in `out`; stops before
/// any other block, and before a record with more bytes captured than its frame had
/// (`next_packet` warns of it). Returns the position after the last one taken and the
/// run's interface (`None`: no record).
#[allow(clippy::too_many_arguments)]
fn fill_run_ng(
    win: &[u8],
    mut pos: usize,
    base: u64,
    mut frame: u64,
    out: &mut Vec<Rec>,
    max: usize,
    be: bool,
    ifaces: &[Interface],
) -> (usize, Option<u32>) {
    let mut iface = None;
    while out.len() < max {
        let Some(p) = win.get(pos..).and_then(|w| whole_epb(w, be, ifaces)) else { break };
        if p.data_len > p.origlen as usize || iface.is_some_and(|i| i != p.interface) {
            break;
        }
        iface = Some(p.interface);
        frame += 1;
        out.push(Rec {
            frame,
            ts_ns: p.ts_ns,
            offset: base + pos as u64,
            start: pos + p.data_start,
            len: p.data_len as u32,
            origlen: p.origlen,
        });
        pos += p.consumed;
    }
    (pos, iface)
}

/// After a block whose length cannot be trusted: the first 4-byte aligned offset in `win`
/// (past the bad block's header) where a known block type has a valid length repeated in
/// its trailer, i.e. where reading can safely go on.
fn next_block(win: &[u8], be: bool) -> Option<usize> {
    (8..win.len().saturating_sub(12)).step_by(4).find(|&k| {
        let (Some(t), Some(len)) = (u32_at(win, k, be), u32_at(win, k + 4, be)) else { return false };
        let len = len as usize;
        matches!(t, 1 | 3 | 5 | 6 | 0x0a0d_0d0a)
            && len >= 12
            && len % 4 == 0
            && len <= MAX_RECORD_BYTES
            && u32_at(win, k + len - 4, be) == Some(len as u32)
    })
}

fn step_pcapng(win: &[u8], be: bool, ifaces: &[Interface], last_ts: i64) -> Step {
    if win.len() < 12 {
        return Step::Need(12 - win.len() as u64);
    }
    let is_shb = win[..4] == [0x0a, 0x0d, 0x0d, 0x0a];
    // A section header announces its own byte order (byte-order magic at offset 8).
    let be = if is_shb { win.get(8..12) == Some(&[0x1a, 0x2b, 0x3c, 0x4d][..]) } else { be };
    let block_len = u32_at(win, 4, be).unwrap_or(0) as usize;
    if block_len < 12 || block_len % 4 != 0 || block_len > MAX_RECORD_BYTES {
        let why = format!("block length {block_len} is invalid (must be ≥ 12, a multiple of 4, ≤ {MAX_RECORD_BYTES})");
        return match next_block(win, be) {
            Some(k) => Step::BadRecord {
                consumed: k,
                reason: format!(
                    "{why}; skipped {k} bytes to the next block whose type, length and trailing length agree"
                ),
                is_packet: true,
            },
            None => Step::Fatal(why),
        };
    }
    if win.len() < block_len {
        return Step::Need((block_len - win.len()) as u64);
    }
    let block_type = u32_at(win, 0, be).unwrap_or(0);
    let is_packet_block = matches!(block_type, 6 | 3);
    let parsed = if be { parse_block_be(&win[..block_len]) } else { parse_block_le(&win[..block_len]) };
    let blk = match parsed {
        Ok((_, b)) => b,
        Err(nom::Err::Incomplete(_)) | Err(_) => {
            return Step::BadRecord {
                consumed: block_len,
                reason: format!("block type 0x{block_type:08x} of {block_len} bytes does not parse; skipped"),
                is_packet: is_packet_block,
            }
        }
    };
    match blk {
        Block::SectionHeader(shb) => Step::Section { big_endian: shb.big_endian(), consumed: block_len },
        Block::InterfaceDescription(idb) => Step::Interface {
            iface: iface_from_idb(idb.linktype.0, idb.snaplen, idb.if_tsresol, idb.if_tsoffset),
            consumed: block_len,
        },
        Block::EnhancedPacket(epb) => {
            let Some(iface) = ifaces.get(epb.if_id as usize) else {
                return Step::BadRecord {
                    consumed: block_len,
                    reason: format!("packet names interface {} but the section declared {}", epb.if_id, ifaces.len()),
                    is_packet: true,
                };
            };
            let caplen = (epb.caplen as usize).min(epb.data.len());
            let data_start = epb.data.as_ptr() as usize - win.as_ptr() as usize;
            Step::Packet(PacketStep {
                consumed: block_len,
                data_start,
                data_len: caplen,
                ts_ns: ts_to_ns(epb.ts_high, epb.ts_low, iface),
                linktype: iface.linktype,
                origlen: epb.origlen,
                interface: epb.if_id,
            })
        }
        Block::SimplePacket(spb) => {
            let Some(iface) = ifaces.first() else {
                return Step::BadRecord {
                    consumed: block_len,
                    reason: "simple packet block before any interface description".into(),
                    is_packet: true,
                };
            };
            let mut caplen = (spb.origlen as usize).min(spb.data.len());
            if iface.snaplen > 0 {
                caplen = caplen.min(iface.snaplen as usize);
            }
            let data_start = spb.data.as_ptr() as usize - win.as_ptr() as usize;
            Step::Packet(PacketStep {
                consumed: block_len,
                data_start,
                data_len: caplen,
                ts_ns: last_ts,
                linktype: iface.linktype,
                origlen: spb.origlen,
                interface: 0,
            })
        }
        _ => Step::Skip(block_len),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    /// Record `i`'s bytes: its number spread over every byte, so any byte out of place shows.
    fn record_bytes(i: u32, len: usize) -> Vec<u8> {
        (0..len).map(|k| (i as usize * 31 + k * 7) as u8 ^ (i >> 8) as u8).collect()
    }

    fn pcap(records: u32, len: usize) -> Vec<u8> {
        let mut v = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0];
        for i in 0..records {
            for w in [1_700_000_000 + i, 0, len as u32, len as u32] {
                v.extend_from_slice(&w.to_le_bytes());
            }
            v.extend_from_slice(&record_bytes(i, len));
        }
        v
    }

    /// Reads a few bytes at a time, as a pipe may.
    struct Trickle(io::Cursor<Vec<u8>>);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(70_001);
            self.0.read(&mut buf[..n])
        }
    }

    /// Packets a "worker" of [`read_holding_blocks`] holds on to: more than a stream chunk,
    /// and more than the spare blocks' worth of 70 KB reads (see the test).
    const HOLD: usize = 3000;
    const _: () = assert!(HOLD * 1000 > STREAM_CHUNK_BYTES && HOLD > (1 + MAX_SPARE_BLOCKS) * 70 && HOLD < 4000);

    /// Reads 4,000 records of 1,000 bytes (about sixteen stream chunks) from `input` while
    /// a "worker" holds each packet's block for the next [`HOLD`] packets; checks every
    /// packet's bytes in its block when it lets go. Returns how many blocks (by address)
    /// the reader used.
    fn read_holding_blocks(input: Box<dyn Read>) -> usize {
        let (n, len) = (4000u32, 1000usize);
        let mut r = CaptureReader::from_stream("t", input, None, true, None).unwrap();
        let mut held: VecDeque<(SharedBlock, usize, u32)> = VecDeque::new();
        // Blocks by address (holding them here would keep every one alive).
        let mut blocks = Vec::new();
        let check = |(b, start, i): (SharedBlock, usize, u32)| {
            assert_eq!(b[start..start + len], record_bytes(i, len)[..], "record {i}")
        };
        let mut i = 0;
        while let Some(p) = r.next_packet().unwrap() {
            assert_eq!(p.data, &record_bytes(i, len)[..]);
            let (b, start) = p.shared_data().expect("a shared stream's packets lie in a block");
            if !blocks.contains(&b.as_ptr()) {
                blocks.push(b.as_ptr());
            }
            held.push_back((SharedBlock::clone(b), start, i));
            if held.len() > HOLD {
                held.pop_front().map(check);
            }
            i += 1;
        }
        assert_eq!(i, n);
        held.into_iter().for_each(check);
        blocks.len()
    }

    #[test]
    fn blocks_held_by_other_threads_keep_their_bytes_while_the_reader_reads_on() {
        // Whole chunks per read (a regular file): it reads on into other blocks while
        // these are held, and reuses freed ones.
        let blocks = read_holding_blocks(Box::new(io::Cursor::new(pcap(4000, 1000))));
        assert!((3..=1 + MAX_SPARE_BLOCKS + 3).contains(&blocks), "{blocks} blocks");
        // Small reads: a block per read, the bytes still where they were.
        let blocks = read_holding_blocks(Box::new(Trickle(io::Cursor::new(pcap(4000, 1000)))));
        assert!(blocks > 1 + MAX_SPARE_BLOCKS, "{blocks} blocks");
    }

    #[test]
    fn the_reader_goes_on_in_the_spare_block_it_left_longest_ago() {
        // A "worker" holds the blocks of HOLD packets and lets go of them at once, as a
        // parallel run's workers let go of a set's: every block comes back after all the
        // others, in the order the reader left them.
        let mut r =
            CaptureReader::from_stream("t", Box::new(io::Cursor::new(pcap(16_000, 1000))), None, true, None).unwrap();
        let mut held = Vec::new();
        let mut order: Vec<usize> = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            let (b, _) = p.shared_data().expect("a shared stream's packets lie in a block");
            if order.last() != Some(&(b.as_ptr() as usize)) {
                order.push(b.as_ptr() as usize);
            }
            held.push(SharedBlock::clone(b));
            if held.len() > HOLD {
                held.clear();
            }
        }
        // The blocks in the cycle: those of the last half of the run (the first ones come
        // back irregularly while the spares fill; the very first may never come back).
        let mut distinct = order[order.len() / 2..].to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let n = distinct.len();
        assert!(n > 3 && order.len() > 3 * n, "{n} blocks, {} uses", order.len());
        for (i, a) in order.iter().enumerate().skip(order.len() / 2) {
            if let Some(j) = order[..i].iter().rposition(|b| b == a) {
                assert_eq!(i - j, n, "block {a:#x} used again after {} others: {order:x?}", i - j - 1);
            }
        }
    }

    #[test]
    fn a_regular_file_shares_its_blocks_and_nothing_else_does() {
        let f = TempFile::new("share", &pcap(2, 100));
        let mut r = CaptureReader::open(&f.0).unwrap();
        let p = r.next_packet().unwrap().unwrap();
        assert!(p.shared_data().is_some() && p.origin().is_some());
        // A packet whose bytes a wrapper moved is not, nor has it an origin.
        let elsewhere = p.data.to_vec();
        let moved = Packet { data: &elsewhere, ..p };
        assert!(moved.shared_data().is_none() && moved.origin().is_none());
        drop(f);
        // Pipes (small reads), in-memory input (not the reader's to hand out) and
        // compressed input, in memory or a file, are not shared, and have no origin.
        let none = |r: &mut CaptureReader| {
            let p = r.next_packet().unwrap().unwrap();
            assert!(p.shared_data().is_none() && p.origin().is_none());
        };
        none(&mut CaptureReader::from_reader("t", Box::new(io::Cursor::new(pcap(2, 100))), None).unwrap());
        none(&mut CaptureReader::from_bytes("t", pcap(2, 100)).unwrap());
        let gz = {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            io::Write::write_all(&mut e, &pcap(2, 100)).unwrap();
            e.finish().unwrap()
        };
        let gz_file = TempFile::new("share-gz", &gz);
        none(&mut CaptureReader::from_bytes("t", gz).unwrap());
        none(&mut CaptureReader::open_unmapped(&gz_file.0).unwrap());
    }

    /// Every packet's origin, read again from the file, is its bytes: records across many
    /// refills and block changes, read or mapped, one by one or in runs, pcap and pcapng.
    #[test]
    fn a_packets_origin_reads_back_its_bytes() {
        let check = |r: &mut CaptureReader, runs: bool| -> usize {
            let mut n = 0;
            let mut recs = Vec::new();
            let mut buf = Vec::new();
            // Blocks held as a parallel run's workers hold them: the reader goes on in
            // spare blocks, each with its own place in the file.
            let mut held: Vec<SharedBlock> = Vec::new();
            let mut same = |p: &Packet<'_>| {
                let o = p.origin().expect("a plain file's packet has an origin");
                buf.resize(p.data.len(), 0);
                assert!(o.src.read_at(o.at, &mut buf));
                assert_eq!(buf, p.data, "frame {}", p.frame);
                if p.frame % 300 == 0 {
                    held.truncate(3);
                    held.insert(0, SharedBlock::clone(p.shared.expect("shared").block));
                }
            };
            loop {
                recs.clear();
                if runs {
                    if let Some(run) = r.next_run(&mut recs, 64) {
                        for rec in &recs {
                            same(&run.packet(rec));
                            n += 1;
                        }
                        if !recs.is_empty() {
                            continue;
                        }
                    }
                }
                let Some(p) = r.next_packet().unwrap() else { break };
                same(&p);
                n += 1;
            }
            n
        };
        let f = TempFile::new("origin", &pcap(3000, 1000));
        // Closed, its reader lets the file's handle go; the places stay readable.
        let mut r = CaptureReader::open_unmapped(&f.0).unwrap();
        let p = r.next_packet().unwrap().unwrap();
        let (o, data) = (p.origin().unwrap(), p.data.to_vec());
        let src = Arc::clone(o.src);
        let at = o.at;
        assert!(src.holds_file());
        drop(r);
        assert!(!src.holds_file());
        let mut back = vec![0; data.len()];
        assert!(src.read_at(at, &mut back));
        assert_eq!(back, data);
        for runs in [false, true] {
            assert_eq!(check(&mut CaptureReader::open_unmapped(&f.0).unwrap(), runs), 3000);
            assert_eq!(check(&mut CaptureReader::open_mapped(&f.0).unwrap(), runs), 3000);
            let mem = Arc::new(pcap(3000, 1000));
            assert_eq!(check(&mut CaptureReader::from_shared("t", mem).unwrap(), runs), 3000);
        }
        // pcapng: enhanced packet blocks after a section and an interface block.
        let mut ng = vec![
            0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 28, 0, 0, 0,
        ];
        ng.extend_from_slice(&[1, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0, 0, 20, 0, 0, 0]);
        for i in 0..500u32 {
            let len = 50 + (i as usize % 7);
            let total = 32 + len.next_multiple_of(4);
            for w in [6, total as u32, 0, 0, i, len as u32, len as u32] {
                ng.extend_from_slice(&w.to_le_bytes());
            }
            ng.extend_from_slice(&record_bytes(i, len));
            ng.resize(ng.len() + len.next_multiple_of(4) - len, 0);
            ng.extend_from_slice(&(total as u32).to_le_bytes());
        }
        let f = TempFile::new("origin-ng", &ng);
        assert_eq!(check(&mut CaptureReader::open_unmapped(&f.0).unwrap(), false), 500);
        // Where bytes are not the file's own: a_regular_file_shares_its_blocks_and_nothing_else_does.
    }

    /// A packet as both ways of reading see it (bytes copied out, where it lies in a
    /// shared block).
    type Seen = (u64, i64, u32, u32, Vec<u8>, u64, u32, Option<usize>, bool);

    fn seen(p: &Packet<'_>) -> Seen {
        let shared = p.shared.map(|s| s.start);
        (
            p.frame,
            p.ts_ns,
            p.linktype,
            p.origlen,
            p.data.to_vec(),
            p.offset,
            p.interface,
            shared,
            p.shared_data().is_some(),
        )
    }

    /// Reads to the end: every packet, then the warnings, the end (or the error's text)
    /// and the counters. With `runs`, the records come from `next_run` (at most
    /// `runs[k % len]` a call) wherever it gives any, else from `next_packet`.
    fn read_all(mut r: CaptureReader, runs: &[usize]) -> (Vec<Seen>, Vec<String>, String, u64, u64) {
        let mut out = Vec::new();
        let mut recs = Vec::new();
        let mut warnings = Vec::new();
        let mut k = 0;
        let end = loop {
            if !runs.is_empty() {
                recs.clear();
                let max = runs[k % runs.len()];
                k += 1;
                if let Some(run) = r.next_run(&mut recs, max) {
                    if !recs.is_empty() {
                        assert!(recs.len() <= max);
                        out.extend(recs.iter().map(|x| seen(&run.packet(x))));
                        continue;
                    }
                }
            }
            match r.next_packet() {
                Ok(Some(p)) => out.push(seen(&p)),
                Ok(None) => break "end".to_string(),
                Err(e) => break e.to_string(),
            }
            warnings.extend(r.drain_warnings().iter().map(|w| w.to_string()));
        };
        warnings.extend(r.drain_warnings().iter().map(|w| w.to_string()));
        (out, warnings, end, r.frames_read(), r.caplen_over_len())
    }

    /// A classic pcap of `recs` (caplen, origlen extra, seconds, fraction) in either byte
    /// order and resolution, with `tail` bytes of a record cut short at the end.
    fn random_pcap(be: bool, nanos: bool, recs: &[(u16, i16, u32, u32)], tail: usize) -> Vec<u8> {
        let w = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&if be { x.to_be_bytes() } else { x.to_le_bytes() });
        let mut v = Vec::new();
        w(&mut v, if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
        v.extend_from_slice(&if be { [0, 2, 0, 4] } else { [2, 0, 4, 0] });
        for x in [0, 0, 65535, 1] {
            w(&mut v, x);
        }
        for (i, &(caplen, extra, sec, frac)) in recs.iter().enumerate() {
            let origlen = (i64::from(caplen) + i64::from(extra)).max(0) as u32;
            for x in [sec, frac, u32::from(caplen), origlen] {
                w(&mut v, x);
            }
            v.extend_from_slice(&record_bytes(i as u32, usize::from(caplen)));
        }
        let cut = v.len() - tail.min(v.len() - 24);
        v.truncate(cut);
        v
    }

    /// Reads a random number of bytes at a time (1 to `max`, cycling through `sizes`).
    struct Uneven(io::Cursor<Vec<u8>>, Vec<usize>, usize);

    impl Read for Uneven {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.1[self.2 % self.1.len()]);
            self.2 += 1;
            self.0.read(&mut buf[..n])
        }
    }

    /// A reader of `bytes` of each kind of input: 0 in memory, 1 shared, 2 a stream's
    /// whole reads, 3 uneven reads (`reads` bytes at a time, cycling).
    fn open_kind(kind: u8, bytes: &[u8], reads: &[usize]) -> CaptureReader {
        match kind {
            0 => CaptureReader::from_bytes("t", bytes.to_vec()).unwrap(),
            1 => CaptureReader::from_shared("t", Arc::new(bytes.to_vec())).unwrap(),
            2 => CaptureReader::from_stream("t", Box::new(io::Cursor::new(bytes.to_vec())), None, true, None).unwrap(),
            _ => {
                let input = Uneven(io::Cursor::new(bytes.to_vec()), reads.to_vec(), 0);
                CaptureReader::from_stream("t", Box::new(input), None, true, None).unwrap()
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Runs of records give what `next_packet` gives, record by record: the same
        /// packets (frame, time, lengths, bytes, offset, where they lie in a shared
        /// block), the same warnings (a record with more bytes captured than its frame
        /// had is left to `next_packet`, which names it), the same end or error, on every
        /// kind of input (in memory, shared, a regular file's whole reads, uneven reads).
        #[test]
        fn test_runs_give_what_next_packet_gives(
            be in proptest::prelude::any::<bool>(),
            nanos in proptest::prelude::any::<bool>(),
            recs in proptest::collection::vec(
                (proptest::prop_oneof![0u16..80, 1400u16..1600], -20i16..200, 0u32..4, 0u32..1_000_000),
                0..60,
            ),
            tail in proptest::prop_oneof![proptest::strategy::Just(0usize), 1usize..40],
            runs in proptest::collection::vec(1usize..9, 1..4),
            reads in proptest::collection::vec(1usize..3000, 1..5),
            kind in 0u8..4,
        ) {
            let bytes = random_pcap(be, nanos, &recs, tail);
            let open = || open_kind(kind, &bytes, &reads);
            let want = read_all(open(), &[]);
            // Whole, it is read whole: the comparison is over every record.
            if tail == 0 {
                proptest::prop_assert_eq!(want.0.len(), recs.len());
            }
            proptest::prop_assert_eq!(read_all(open(), &runs), want);
        }
    }

    /// One block of a random pcapng file (see `random_pcapng`).
    #[derive(Debug, Clone)]
    enum NgBlock {
        /// A section header in this byte order: the blocks after it are written in it.
        Section(bool),
        /// An interface: link type, `if_tsresol` (None: the default, microseconds).
        Interface(u16, Option<u8>),
        /// An enhanced packet block: interface id, timestamp, caplen, origlen, option
        /// bytes (a multiple of 4 or not: any bytes), and what is wrong with it (0: none,
        /// 1: its trailing length differs, 2: caplen beyond the block, 3: a length not a
        /// multiple of 4, 4: a length under 32, 5: caplen one more than its bytes, which
        /// its padding may hold while the padded length does not fit).
        Packet(u32, u64, u16, u16, Vec<u8>, u8),
        /// A simple packet block of this original length.
        Simple(u16),
        /// A block of a type the reader skips (interface statistics).
        Other,
    }

    /// A pcapng file of `blocks`, with `tail` bytes of the last block cut short.
    fn random_pcapng(blocks: &[NgBlock], tail: usize) -> Vec<u8> {
        let mut v = Vec::new();
        let mut be = false;
        let w = |v: &mut Vec<u8>, be: bool, x: u32| {
            v.extend_from_slice(&if be { x.to_be_bytes() } else { x.to_le_bytes() })
        };
        let block = |v: &mut Vec<u8>, be: bool, kind: u32, body: &[u8], len: Option<u32>, trailer: Option<u32>| {
            let total = (12 + body.len()) as u32;
            w(v, be, kind);
            w(v, be, len.unwrap_or(total));
            v.extend_from_slice(body);
            w(v, be, trailer.unwrap_or(len.unwrap_or(total)));
        };
        for (i, b) in blocks.iter().enumerate() {
            let mut body = Vec::new();
            match b {
                NgBlock::Section(big) => {
                    be = *big;
                    w(&mut body, be, 0x1a2b_3c4d);
                    body.extend_from_slice(&if be { [0, 1, 0, 0] } else { [1, 0, 0, 0] });
                    body.extend_from_slice(&[0xff; 8]);
                    block(&mut v, be, 0x0a0d_0d0a, &body, None, None);
                }
                NgBlock::Interface(linktype, tsresol) => {
                    let lt = if be { linktype.to_be_bytes() } else { linktype.to_le_bytes() };
                    body.extend_from_slice(&lt);
                    body.extend_from_slice(&[0, 0]);
                    w(&mut body, be, 65535);
                    if let Some(r) = tsresol {
                        let code: u16 = 9;
                        let one: u16 = 1;
                        body.extend_from_slice(&if be { code.to_be_bytes() } else { code.to_le_bytes() });
                        body.extend_from_slice(&if be { one.to_be_bytes() } else { one.to_le_bytes() });
                        body.extend_from_slice(&[*r, 0, 0, 0, 0, 0, 0, 0]);
                    }
                    block(&mut v, be, 1, &body, None, None);
                }
                NgBlock::Packet(if_id, ts, caplen, origlen, opts, fault) => {
                    let data = record_bytes(i as u32, usize::from(*caplen));
                    let claimed = u32::from(*caplen)
                        + match fault {
                            2 => 64,
                            5 => 1,
                            _ => 0,
                        };
                    for x in [*if_id, (*ts >> 32) as u32, *ts as u32, claimed, u32::from(*origlen)] {
                        w(&mut body, be, x);
                    }
                    body.extend_from_slice(&data);
                    body.resize(body.len().next_multiple_of(4), 0);
                    body.extend_from_slice(opts);
                    body.resize(body.len().next_multiple_of(4), 0);
                    let total = (12 + body.len()) as u32;
                    let (len, trailer) = match fault {
                        1 => (None, Some(total + 4)),
                        3 => (Some(total + 2), Some(total + 2)),
                        4 => (Some(28), Some(28)),
                        _ => (None, None),
                    };
                    block(&mut v, be, 6, &body, len, trailer);
                }
                NgBlock::Simple(origlen) => {
                    w(&mut body, be, u32::from(*origlen));
                    body.extend_from_slice(&record_bytes(i as u32, usize::from(*origlen)));
                    body.resize(body.len().next_multiple_of(4), 0);
                    block(&mut v, be, 3, &body, None, None);
                }
                NgBlock::Other => {
                    body.extend_from_slice(&[0; 12]);
                    block(&mut v, be, 5, &body, None, None);
                }
            }
        }
        let cut = v.len() - tail.min(v.len());
        v.truncate(cut);
        v
    }

    fn ng_block() -> impl proptest::strategy::Strategy<Value = NgBlock> {
        use proptest::prelude::*;
        prop_oneof![
            1 => any::<bool>().prop_map(NgBlock::Section),
            2 => (prop_oneof![Just(1u16), Just(113), Just(276)], prop_oneof![
                Just(None), Just(Some(6u8)), Just(Some(9)), Just(Some(3)), Just(Some(0x8a)), Just(Some(0))
            ]).prop_map(|(l, r)| NgBlock::Interface(l, r)),
            12 => (
                prop_oneof![4 => 0u32..2, 1 => 0u32..5],
                prop_oneof![any::<u64>(), 1_700_000_000_000_000u64..1_700_000_100_000_000],
                prop_oneof![0u16..80, 1400u16..1600],
                prop_oneof![0u16..80, 1400u16..1600],
                prop_oneof![4 => Just(Vec::new()), 1 => proptest::collection::vec(any::<u8>(), 0..24)],
                prop_oneof![8 => Just(0u8), 1 => 1u8..6],
            ).prop_map(|(i, t, c, o, opts, f)| NgBlock::Packet(i, t, c, o, opts, f)),
            1 => (0u16..100).prop_map(NgBlock::Simple),
            1 => Just(NgBlock::Other),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// The enhanced packet block read in place is pcap-parser's, field by field, on
        /// any block in any state; and where `whole_epb` leaves a block to the general path,
        /// that path is what reads it.
        #[test]
        fn test_whole_epb_is_pcap_parsers(
            blocks in proptest::collection::vec(ng_block(), 1..12),
            ifaces in 0usize..3,
        ) {
            let bytes = random_pcapng(&blocks, 0);
            let list: Vec<Interface> = (0..ifaces)
                .map(|k| Interface { linktype: 1 + k as u32, units_per_sec: [1_000_000, 1_000_000_000, 1000][k], offset_s: 0, snaplen: 0 })
                .collect();
            let mut pos = 0;
            let mut be = false;
            while pos + 8 <= bytes.len() {
                let win = &bytes[pos..];
                if win[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
                    be = win[8..12] == [0x1a, 0x2b, 0x3c, 0x4d];
                }
                let fast = whole_epb(win, be, &list);
                let step = step_pcapng(win, be, &list, 0);
                if let Some(f) = &fast {
                    let Step::Packet(g) = &step else { panic!("whole_epb took a block the general path does not give as a packet") };
                    proptest::prop_assert_eq!(
                        (f.consumed, f.data_start, f.data_len, f.ts_ns, f.linktype, f.origlen, f.interface),
                        (g.consumed, g.data_start, g.data_len, g.ts_ns, g.linktype, g.origlen, g.interface)
                    );
                }
                let len = u32_at(win, 4, be).unwrap_or(0) as usize;
                if len < 12 || len % 4 != 0 || len > win.len() {
                    break;
                }
                pos += len;
            }
        }

        /// Runs of pcapng records give what `next_packet` gives, as for pcap
        /// (`test_runs_give_what_next_packet_gives`): sections in either byte order,
        /// interfaces of several resolutions, packets of undeclared interfaces, with more
        /// bytes captured than their frames had, with options, malformed, simple packet
        /// blocks, skipped blocks, a cut tail, on every kind of input.
        #[test]
        fn test_pcapng_runs_give_what_next_packet_gives(
            big in proptest::prelude::any::<bool>(),
            blocks in proptest::collection::vec(ng_block(), 0..40),
            tail in proptest::prop_oneof![proptest::strategy::Just(0usize), 1usize..40],
            runs in proptest::collection::vec(1usize..9, 1..4),
            reads in proptest::collection::vec(1usize..3000, 1..5),
            kind in 0u8..4,
        ) {
            let mut all = vec![NgBlock::Section(big), NgBlock::Interface(1, None)];
            all.extend(blocks);
            let bytes = random_pcapng(&all, tail);
            let open = || open_kind(kind, &bytes, &reads);
            proptest::prop_assert_eq!(read_all(open(), &runs), read_all(open(), &[]));
        }

        /// Microseconds and nanoseconds in 64 bits are the 128-bit arithmetic's value.
        #[test]
        fn test_ts_to_ns_shortcuts_are_the_general_case(
            high in proptest::prelude::any::<u32>(),
            low in proptest::prelude::any::<u32>(),
            units in proptest::prop_oneof![proptest::strategy::Just(1_000_000u64), proptest::strategy::Just(1_000_000_000)],
            offset_s in proptest::prop_oneof![proptest::strategy::Just(0i64), proptest::prelude::any::<i64>()],
        ) {
            let iface = Interface { linktype: 1, units_per_sec: units, offset_s, snaplen: 0 };
            proptest::prop_assert_eq!(ts_to_ns(high, low, &iface), ts_to_ns_general(high, low, &iface));
        }
    }

    /// Runs of pcapng records against `next_packet` over a long capture: records across
    /// many refills, and an interface change that ends a run.
    #[test]
    fn pcapng_runs_over_refills_and_interfaces() {
        let mut blocks = vec![NgBlock::Section(false), NgBlock::Interface(1, None), NgBlock::Interface(113, Some(9))];
        for i in 0..3000u32 {
            let len = if i % 5 == 0 { 1500 } else { 60 + (i % 7) as u16 };
            blocks.push(NgBlock::Packet(
                u32::from(i % 400 == 399),
                1_700_000_000_000_000 + u64::from(i),
                len,
                len,
                Vec::new(),
                0,
            ));
        }
        let bytes = random_pcapng(&blocks, 0);
        let want = read_all(
            CaptureReader::from_stream("t", Box::new(io::Cursor::new(bytes.clone())), None, true, None).unwrap(),
            &[],
        );
        assert_eq!(want.0.len(), 3000);
        assert_eq!(want.0.iter().filter(|s| s.6 == 1).count(), 7);
        let got = read_all(
            CaptureReader::from_stream("t", Box::new(io::Cursor::new(bytes)), None, true, None).unwrap(),
            &[64],
        );
        assert_eq!(got, want);
    }

    /// A temporary file, removed when dropped.
    struct TempFile(std::path::PathBuf);

    impl TempFile {
        fn new(tag: &str, bytes: &[u8]) -> Self {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!("lnetcap-{tag}-{}-{n}.pcap", std::process::id()));
            std::fs::write(&path, bytes).unwrap();
            TempFile(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// What a packet is, whichever way it was read (where it lies in its block depends
    /// on how the input was cut into blocks).
    fn without_block_offsets(
        mut all: (Vec<Seen>, Vec<String>, String, u64, u64),
    ) -> (Vec<Seen>, Vec<String>, String, u64, u64) {
        all.0.iter_mut().for_each(|s| s.7 = None);
        all
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(60))]
        /// A plain file is mapped, and the map gives what reading the file gives: the
        /// same packets, warnings, end or error (a last record cut short), one record at
        /// a time and in runs.
        #[test]
        fn test_a_mapped_file_gives_what_reading_it_gives(
            be in proptest::prelude::any::<bool>(),
            nanos in proptest::prelude::any::<bool>(),
            recs in proptest::collection::vec(
                (proptest::prop_oneof![0u16..80, 1400u16..1600, 60000u16..65535], -20i16..200, 0u32..4, 0u32..1_000_000),
                0..60,
            ),
            tail in proptest::prop_oneof![proptest::strategy::Just(0usize), 1usize..40],
            runs in proptest::collection::vec(1usize..9, 1..4),
        ) {
            let f = TempFile::new("map", &random_pcap(be, nanos, &recs, tail));
            let mapped = CaptureReader::open_mapped(&f.0).unwrap();
            let is_mapped = matches!(mapped.storage, Storage::Mapped { .. });
            proptest::prop_assert!(is_mapped);
            let want = without_block_offsets(read_all(CaptureReader::open_unmapped(&f.0).unwrap(), &[]));
            proptest::prop_assert_eq!(without_block_offsets(read_all(mapped, &[])), want.clone());
            let mapped = CaptureReader::open_mapped(&f.0).unwrap();
            proptest::prop_assert_eq!(without_block_offsets(read_all(mapped, &runs)), want);
        }
    }

    /// `open` reads a whole-frame file that `open_mapped` maps, unless the environment
    /// asks for the map (`LNETCAP_MAP=1` without `LNETCAP_NO_MAP`).
    #[test]
    fn whole_frame_files_are_read_unless_the_map_is_asked_for() {
        let f = TempFile::new("readmap", &pcap(3, 1000));
        let asked = map_asked(std::env::var_os("LNETCAP_MAP"), std::env::var_os("LNETCAP_NO_MAP"));
        let r = CaptureReader::open(&f.0).unwrap();
        assert_eq!(matches!(r.storage, Storage::Mapped { .. }), asked);
        assert!(matches!(CaptureReader::open_mapped(&f.0).unwrap().storage, Storage::Mapped { .. }));
        let os = |v: &str| Some(std::ffi::OsString::from(v));
        assert!(map_asked(os("1"), None));
        assert!(!map_asked(None, None));
        assert!(!map_asked(os("0"), None));
        assert!(!map_asked(os("yes"), None));
        assert!(!map_asked(os("1"), os("1")));
        assert!(!map_asked(None, os("")));
    }

    /// The mean record length over a probe: whole records only, each with its 16-byte
    /// header; the first record alone when even it is cut; nothing without its header.
    #[test]
    fn mean_record_length_counts_whole_records_with_their_headers() {
        let recs = |n, len| pcap(n, len)[24..].to_vec();
        assert_eq!(mean_record_len(&recs(10, 1000), false), Some(1016));
        // Cut in the middle of the fourth record (longer than the three before it):
        // the three alone.
        let mut cut = recs(3, 1000);
        cut.extend_from_slice(&recs(1, 3000)[..1500]);
        assert_eq!(mean_record_len(&cut, false), Some(1016));
        // A length near 4 GiB counts as such, without wrapping.
        let mut huge = recs(1, 100);
        huge[8..12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        assert_eq!(mean_record_len(&huge, false), Some(usize::try_from(0xffff_fff0u64 + 16).unwrap_or(usize::MAX)));
        // Three of 100 bytes and one of 1,000: (3 * 116 + 1016) / 4.
        let mut mixed = recs(3, 100);
        mixed.extend_from_slice(&recs(1, 1000));
        assert_eq!(mean_record_len(&mixed, false), Some(341));
        // A first record longer than the probe counts by its header's length.
        assert_eq!(mean_record_len(&recs(1, 5000)[..100], false), Some(5016));
        assert_eq!(mean_record_len(&recs(1, 5000)[..11], false), None);
        assert_eq!(mean_record_len(&[], false), None);
        // Big-endian headers are read as such.
        let mut be = recs(2, 300);
        for at in [0, 316] {
            be[at + 8..at + 12].copy_from_slice(&300u32.to_be_bytes());
        }
        assert_eq!(mean_record_len(&be, true), Some(316));
    }

    /// What a run whose packets other threads decode maps: whole-frame files whose mean
    /// record reaches MAP_THREADED_MIN_MEAN_RECORD (exactly: one byte short is read),
    /// never a header-only file, every whole-frame file with LNETCAP_MAP=1, nothing
    /// with LNETCAP_NO_MAP.
    #[test]
    fn threaded_runs_map_whole_frame_files_of_large_records() {
        let mapped = |bytes: &[u8], when| {
            let f = TempFile::new("threaded", bytes);
            matches!(CaptureReader::open_as(&f.0, when).unwrap().storage, Storage::Mapped { .. })
        };
        let at = MAP_THREADED_MIN_MEAN_RECORD - 16;
        assert!(mapped(&pcap(400, at), MapWhen::LargeRecords));
        assert!(!mapped(&pcap(400, at - 1), MapWhen::LargeRecords));
        assert!(mapped(&pcap(400, at - 1), MapWhen::WholeFrames));
        assert!(!mapped(&pcap(400, 1000), MapWhen::Never));
        // Small records up front, large ones after: the probe's mean decides (1 MiB).
        let mut late = pcap(500, 100);
        late.extend_from_slice(&pcap(2000, 1000)[24..]);
        // 500 of 116 bytes, then 974 of 1,016 within the 1 MiB: 710 on average.
        assert!(mapped(&late, MapWhen::LargeRecords), "500 small records, then large ones");
        // 1 MiB of small records, then enough large ones that the whole file's mean is
        // over the bound ((9,040 * 116 + 8,000 * 1,016) / 17,040 = 538): only the first
        // MiB counts.
        let mut early = pcap(MAP_PROBE_BYTES as u32 / 116 + 1, 100);
        early.extend_from_slice(&pcap(8000, 1000)[24..]);
        let whole = mean_record_len(&early[24..], false).unwrap();
        assert!(whole >= MAP_THREADED_MIN_MEAN_RECORD, "the whole file's mean ({whole}) is over the bound");
        assert!(!mapped(&early, MapWhen::LargeRecords), "1 MiB of small records first");
        // A header-only capture (snap length 256) is read however large its records say
        // they are.
        let mut header_only = pcap(400, 1000);
        header_only[16..20].copy_from_slice(&256u32.to_le_bytes());
        assert!(!mapped(&header_only, MapWhen::LargeRecords) && !mapped(&header_only, MapWhen::WholeFrames));
        let os = |v: &str| Some(std::ffi::OsString::from(v));
        assert_eq!(map_when_threaded(None, None), MapWhen::LargeRecords);
        assert_eq!(map_when_threaded(os("1"), None), MapWhen::WholeFrames);
        assert_eq!(map_when_threaded(os("0"), None), MapWhen::LargeRecords);
        assert_eq!(map_when_threaded(os("1"), os("")), MapWhen::Never);
        assert_eq!(map_when_threaded(None, os("1")), MapWhen::Never);
    }

    /// A mapped file's runs end within PREFETCH_AHEAD of their first record, whatever
    /// number of records is asked for (records of 1,500 bytes: 1,516 apart with their
    /// headers, so 11 start within 16 KiB), and one after another they give every record;
    /// a read file's run is bounded by the number asked for only.
    #[test]
    fn test_a_mapped_files_runs_end_within_the_bytes_asked_for_ahead() {
        let recs_of = |n: u32| -> Vec<(u16, i16, u32, u32)> { (0..n).map(|i| (1500, 0, 1, i)).collect() };
        let f = TempFile::new("run", &random_pcap(false, false, &recs_of(200), 0));
        let mut r = CaptureReader::open_mapped(&f.0).unwrap();
        assert!(matches!(r.storage, Storage::Mapped { .. }));
        let (mut recs, mut runs, mut frames) = (Vec::new(), Vec::new(), Vec::new());
        loop {
            recs.clear();
            let run = r.next_run(&mut recs, 1024).unwrap();
            if let Some(first) = recs.first().map(|x| x.start) {
                assert!(recs.iter().all(|x| x.start < first + PREFETCH_AHEAD));
                frames.extend(recs.iter().map(|x| run.packet(x).frame));
                runs.push(recs.len());
                continue;
            }
            // A refill or the end: the general path.
            match r.next_packet().unwrap() {
                Some(p) => frames.push(p.frame),
                None => break,
            }
        }
        assert_eq!(PREFETCH_AHEAD.div_ceil(1516), 11);
        assert!(runs.iter().all(|&n| n <= 11) && runs.iter().filter(|&&n| n == 11).count() >= 15, "{runs:?}");
        assert_eq!(frames, (1..=200).collect::<Vec<u64>>());
        // Read, not mapped: one run of every record after the first (which refills), in a
        // file that fits one read (100 records of 1,516 bytes: 152 KB).
        const { assert!(24 + 100 * 1516 <= STREAM_CHUNK_BYTES) };
        let f = TempFile::new("run_read", &random_pcap(false, false, &recs_of(100), 0));
        let mut read = CaptureReader::open_unmapped(&f.0).unwrap();
        assert_eq!(read.next_packet().unwrap().map(|p| p.frame), Some(1));
        let mut recs = Vec::new();
        read.next_run(&mut recs, 1024);
        assert_eq!(recs.len(), 99);
    }

    /// 6,000 records of 1,000 bytes (6 MB) in a file; opens it mapped, reads 10 packets,
    /// cuts the file to `cut` bytes and reads on (in runs of 500, or a packet at a time):
    /// returns the frames of the packets after the cut that came whole, the end, and
    /// whether a page of the map faulted (SIGBUS, a zero page put in its place).
    fn read_across_a_cut(cut: usize, runs: &[usize]) -> (Vec<u64>, String, bool) {
        let (n, len) = (6000u32, 1000usize);
        let f = TempFile::new("cut", &pcap(n, len));
        let mut r = CaptureReader::open_mapped(&f.0).unwrap();
        assert!(matches!(r.storage, Storage::Mapped { .. }));
        for i in 0..10 {
            assert_eq!(r.next_packet().unwrap().unwrap().data, &record_bytes(i, len)[..]);
        }
        std::fs::OpenOptions::new().write(true).open(&f.0).unwrap().set_len(cut as u64).unwrap();
        let Storage::Mapped { file, .. } = &r.storage else { unreachable!("mapped above") };
        let file = Arc::clone(file);
        let (seen, _, end, _, _) = read_all(r, runs);
        // Frames that end before the cut, as they were in the file.
        for s in seen.iter().filter(|s| 24 + s.0 as usize * (16 + len) <= cut) {
            assert_eq!(s.4, record_bytes(s.0 as u32 - 1, len), "frame {} read as it was in the file", s.0);
        }
        (seen.iter().map(|s| s.0).collect(), end, file.shrank())
    }

    /// A file cut short while it is mapped and read (a ring reusing it, copytruncate)
    /// ends at the cut with an error that says so: no SIGBUS, and no record from past
    /// the cut. The cut ahead of the reader's window (seen by the file's length at the
    /// next window) and inside it (seen by the fault of a page past the new end, a zero
    /// page put in its place): in runs, every record that ends before the cut and none
    /// after; a packet at a time, the record across the cut may come with zeros past it
    /// (its bytes are read after it is handed out), never one after it.
    #[test]
    fn a_file_cut_short_under_its_map_ends_at_the_cut_with_an_error() {
        let rec = 16 + 1000;
        let whole_before = |cut: usize| ((cut - 24) / rec) as u64;
        // (cut, runs, whether a fault shows it: a cut inside the window the reader is in)
        let ahead = 24 + 4500 * rec + 300;
        let cases = [
            (ahead, &[500][..], false),
            (ahead, &[], false),
            (256 * 1024, &[500], true),
            (256 * 1024, &[], true),
            (600 * 1024 + 24, &[500], true),
        ];
        for (cut, runs, faults) in cases {
            let (frames, end, faulted) = read_across_a_cut(cut, runs);
            assert_eq!(faulted, faults, "cut {cut}, runs {runs:?}");
            let whole = whole_before(cut);
            assert!(end.contains(&format!("shrank from {} to {cut} bytes", 24 + 6000 * rec)), "cut {cut}: {end}");
            let want: Vec<u64> = (11..=whole).collect();
            if runs.is_empty() && frames.len() as u64 == whole - 9 {
                // The packet across the cut came (zeros past it: not checked), none after.
                assert_eq!(frames[..frames.len() - 1], want[..], "cut {cut}");
                assert_eq!(frames.last(), Some(&(whole + 1)), "cut {cut}");
            } else {
                assert_eq!(frames, want, "cut {cut}, runs {runs:?}");
            }
        }
    }

    /// A page of the map that faults while the file keeps its length (what an I/O error
    /// of its device does; made here by cutting the file, touching the page and writing
    /// the file back whole): reading ends at that page, every record before it as it is
    /// in the file, with an error that says so (not that the file shrank).
    #[test]
    fn a_page_that_cannot_be_read_under_the_map_ends_the_reading_there() {
        let (n, len) = (6000u32, 1000usize);
        let bytes = pcap(n, len);
        let f = TempFile::new("unreadable", &bytes);
        let mut r = CaptureReader::open_mapped(&f.0).unwrap();
        for i in 0..10 {
            assert_eq!(r.next_packet().unwrap().unwrap().data, &record_bytes(i, len)[..]);
        }
        let Storage::Mapped { file, .. } = &r.storage else { unreachable!("mapped above") };
        let file = Arc::clone(file);
        let (cut, page) = (3 << 20, 4 << 20);
        let w = std::fs::OpenOptions::new().write(true).open(&f.0).unwrap();
        w.set_len(cut as u64).unwrap();
        assert_eq!(std::hint::black_box(file.bytes()[page + 10]), 0);
        assert_eq!(file.first_fault(), Some(page));
        std::os::unix::fs::FileExt::write_all_at(&w, &bytes[cut..], cut as u64).unwrap();
        assert_eq!(file.length_now(), Some(bytes.len() as u64));
        let (seen, _, end, _, _) = read_all(r, &[500]);
        let whole = ((page - 24) / (16 + len)) as u64;
        assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), (11..=whole).collect::<Vec<_>>());
        for s in &seen {
            assert_eq!(s.4, record_bytes(s.0 as u32 - 1, len), "frame {} read as it is in the file", s.0);
        }
        let says = format!(
            "the page at offset {page} could not be read under the map (it faulted while the file was {} bytes long",
            bytes.len()
        );
        assert!(end.contains(&says), "{end}");
    }

    /// A block other than an enhanced packet block is the general path's: the run before
    /// it is empty.
    #[test]
    fn a_pcapng_section_alone_gives_an_empty_run() {
        let shb = [
            0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 28, 0, 0, 0,
        ];
        let mut r = CaptureReader::from_bytes("t", shb.to_vec()).unwrap();
        let mut recs = Vec::new();
        assert!(r.next_run(&mut recs, 8).is_some_and(|_| recs.is_empty()));
        assert!(r.next_packet().unwrap().is_none());
    }
}
