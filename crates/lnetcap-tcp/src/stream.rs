//! One direction of a TCP connection: sequence numbers → stream offsets → ordered events.

use std::collections::BTreeMap;
use std::sync::Arc;

use lnetcap_capture::{Origin, Reread};

use crate::limits::{HISTORY_BYTES, MAX_ACK_AHEAD, MAX_HOLE_SPAN, MAX_HOLE_WAIT_NS, MAX_OOO_BYTES, MAX_OOO_SEGMENTS};
use crate::{Anomaly, GapReason, Stamp, StreamEvent};

/// Counters of one direction. Every payload byte of every segment lands in exactly one of
/// `bytes_delivered`, `bytes_snaplen`, `bytes_retransmitted`, `bytes_before_start`,
/// `bytes_after_fin` or (while waiting) the out-of-order buffer; `bytes_lost` counts stream
/// bytes no segment in the capture carried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HalfStats {
    /// Segments seen in this direction (any flags).
    pub segments: u64,
    /// Segments with payload.
    pub data_segments: u64,
    /// Payload bytes delivered in order, as captured.
    pub bytes_delivered: u64,
    /// Payload bytes in stream order that the snaplen cut off.
    pub bytes_snaplen: u64,
    /// Stream bytes no captured segment carried (capture loss, buffer limit).
    pub bytes_lost: u64,
    /// Payload bytes that repeated bytes already delivered (retransmissions, overlaps).
    pub bytes_retransmitted: u64,
    /// Segments that repeated some already delivered bytes.
    pub segments_retransmitted: u64,
    /// Segments that arrived ahead of a hole.
    pub segments_out_of_order: u64,
    /// Segments that arrived at the delivery point while later bytes waited beyond it: each
    /// filled a hole (all or part of it) that the capture had seen open, by reordering or
    /// as the retransmission of a segment lost before the capture point.
    pub segments_filling_holes: u64,
    /// Bytes of repeated copies that differed from the first copy.
    pub bytes_overlap_conflict: u64,
    /// Bytes before the first byte seen of a stream picked up mid-stream.
    pub bytes_before_start: u64,
    /// Bytes after the FIN.
    pub bytes_after_fin: u64,
    /// Gaps delivered (any reason).
    pub gaps: u64,
}

struct Chunk {
    len: u64,
    data: Vec<u8>,
    stamp: Stamp,
    /// Where `data` lies in the capture, when it can be read again (for the history).
    origin: Option<(Arc<Reread>, u64)>,
}

/// Recently delivered bytes, to compare retransmitted copies with: the captured bytes of
/// the last [`HISTORY_BYTES`] of the stream (at or after the end of the latest record less
/// that). Kept by reference when the segments come from a capture that can be read again
/// (a plain capture file, or one in memory: [`Origin`]): where each segment's bytes lie in
/// it ([`Ref`], 24 bytes), read back only when a retransmission is compared. The copy
/// into a ring was 45 % of the data-cache misses of a header-only `decode` (cachegrind);
/// without it `decode` of the header-only bench file ran 1.13x and of 1 GB of full payload
/// 1.17x as fast (paired pinned rounds, 2026-11-30), for 0.2 % more instructions (the
/// packet's origin). Otherwise (pipes, compressed input, live capture, and from the first
/// segment of another capture on: the places held read back into copies then) the bytes
/// are copied, packed one after the other in a ring. A header-only capture records a few
/// hundred bytes of each segment: packed, its ring holds those alone (16 KiB at snaplen
/// 256 and 1,448-byte segments) where a ring indexed by stream offset needed the whole
/// 64 KiB window on every direction that carried data, mostly holes.
///
/// Bytes that fall out of the window are forgotten lazily: a record that fits the ring's
/// room forgets nothing, and [`History::compare`] stops at the window's floor itself. The
/// window is forgotten (exactly, to its floor) only when a record does not fit, before the
/// ring grows, so the ring is as large as with eager forgetting, and the ranges held are
/// bounded by the ring's bytes. On a header-only capture, where each record forgot the one
/// range that fell out, the ranges of a full ring are now dropped in one pass: 1.6 % fewer
/// instructions for `decode` of the budget's header-only capture (wall time: 1.08x in one
/// set of paired pinned rounds, 1.00x in two later ones, within the host's noise);
/// contiguous streams forget on every record as before. The stale ranges cost memory,
/// which ranges without their packed place ([`Span`]) give back: peak RSS of 1,200
/// connections 45.7 MiB before (one thread), 47.8 lazily, 46.6 with 16-byte ranges; two
/// threads 55.4, 57.0, 55.8.
#[derive(Default)]
struct History {
    /// Packed bytes: the `k`-th byte ever recorded at `k & (len − 1)`; the length a power
    /// of two (0 before the first record), grown with what is held up to [`HISTORY_BYTES`].
    ring: Vec<u8>,
    /// Known stream ranges whose bytes are in the ring, ascending; contiguous in the ring,
    /// the last one ending at `head`.
    ranges: Ranges,
    /// Bytes recorded so far (the packed place of the next one).
    head: u64,
    /// Bytes held: `head` less the first range's packed place, bytes before the window's
    /// floor included until they are forgotten. Kept, not derived from the first range:
    /// reading that range in `record`'s room test made a one-thread `analyze` of the
    /// header-only bench file 0.92x as fast (14 paired rounds).
    held: usize,
    /// The stream offset after the latest record (0 before the first): the window is
    /// [`HISTORY_BYTES`] before it, and a record starting there extends the last range.
    end: u64,
    /// The capture the history's bytes can be read again from: while set, records keep
    /// where their bytes lie in it ([`History::refs`]), not copies (the ring is empty).
    src: Option<Arc<Reread>>,
    /// Ranges recorded by reference, ascending.
    refs: Ranges<Ref>,
    /// Reads made to compare retransmitted copies while by reference ([`MAX_REREADS`]).
    rereads: u32,
}

/// What [`History::compare`] found: (differing bytes, offset of the first difference),
/// and the bytes held by reference that could not be read back (and the first one's
/// offset), if any.
type Compared = ((u64, u64), Option<(u64, u64)>);

/// A stream range [start, end) recorded by reference: its captured bytes lie at `at` of
/// the capture ([`History::src`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ref {
    start: u64,
    end: u64,
    at: u64,
}

/// Ranges recorded by reference kept before those out of the window are forgotten: a
/// few more than the 1,448-byte segments of a window.
const REFS_KEPT: usize = 64;

/// Ranges recorded by reference in the window at most: a direction of smaller segments
/// (under 256 bytes on average) has its places read back into copies, and copies from
/// then on. With [`MAX_REREADS`], what bounds the reads a crafted capture can ask for.
const MAX_REFS: usize = 256;

/// Reads back a history by reference makes to compare retransmitted copies: past this,
/// its places are read back into copies (one read for places close together in the
/// capture, [`COALESCE_GAP`]) and it copies from then on. A read a retransmission is
/// cheap on real traffic; a flood of retransmitted segments of a byte each would
/// otherwise cost a system call each, where a copy costs a comparison.
const MAX_REREADS: u32 = 64;

/// Places at most this far apart in the capture are read back in one read when a
/// history turns into copies, up to [`COALESCE_MAX`] bytes a read.
const COALESCE_GAP: u64 = 4096;

/// The longest read of [`History::materialize`].
const COALESCE_MAX: u64 = 256 * 1024;

/// A known stream range [start, end). Its bytes' packed places need no field: the ranges
/// are contiguous in the ring and end at `head`, so the first starts at `head − held` and
/// each of the others where the one before it ends (16 bytes a range, not 24: a
/// header-only direction holds one a segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u64,
    end: u64,
}

/// A queue of ranges: a vector read from `head`, its dropped front compacted away once
/// it is half the vector (amortised; at most twice the live ranges plus
/// [`Ranges::COMPACT_AT`]). A header-only capture delivers one range a segment and
/// retires one: against a `VecDeque`, recording costs 12 % fewer instructions (30.2 M
/// against 34.5 M on the 263,000-packet header-only bench capture). The same queue as
/// [`crate::headvec::HeadVec`], kept apart: with that type here `decode` of the budget's
/// header-only capture executed 0.6 % more instructions (224.38 M against 223.06 M, all
/// in `deliver` and the flow table), for the same code.
struct Ranges<T = Span> {
    v: Vec<T>,
    head: usize,
}

impl<T> Default for Ranges<T> {
    fn default() -> Self {
        Self { v: Vec::new(), head: 0 }
    }
}

impl<T> Ranges<T> {
    /// Dropped ranges kept before a compaction at least.
    const COMPACT_AT: usize = 64;

    fn live(&self) -> &[T] {
        &self.v[self.head..]
    }

    fn front_mut(&mut self) -> Option<&mut T> {
        self.v.get_mut(self.head)
    }

    fn back_mut(&mut self) -> Option<&mut T> {
        if self.head < self.v.len() {
            self.v.last_mut()
        } else {
            None
        }
    }

    fn push_back(&mut self, r: T) {
        self.v.push(r);
    }

    fn pop_front(&mut self) {
        self.head += 1;
        if self.head >= self.v.len() {
            self.v.clear();
            self.head = 0;
        } else if self.head >= Self::COMPACT_AT && 2 * self.head >= self.v.len() {
            self.v.drain(..self.head);
            self.head = 0;
        }
    }
}

impl History {
    /// Keeps `bytes`, the captured bytes at stream offset `off` (records come in stream
    /// order). Inline for the usual case (room in the ring, the record in one piece of
    /// it): one copy, the range update; forgetting (when the ring is full), growing and
    /// wrapping are out of line. Inlined into `deliver` (as a call it was 1.8 % of a
    /// header-only `decode`'s instructions).
    /// Returns the bytes held by reference that could not be read back into copies, with
    /// the first one's offset, when this record turned places into copies
    /// ([`History::materialize`]).
    #[inline(always)]
    fn record(&mut self, off: u64, bytes: &[u8], origin: Option<Origin<'_>>) -> Option<(u64, u64)> {
        const { assert!(HISTORY_BYTES.is_power_of_two()) };
        if let Some(o) = origin {
            if self.by_ref(o.src) {
                return self.record_ref(off, bytes.len(), o.at);
            }
        }
        let unread = if self.src.is_some() { self.materialize() } else { None };
        self.record_copy(off, bytes);
        unread
    }

    /// [`History::record`] of a copy.
    #[inline(always)]
    fn record_copy(&mut self, off: u64, bytes: &[u8]) {
        let n = bytes.len();
        let len = self.ring.len();
        let pos = (self.head & (len as u64).wrapping_sub(1)) as usize;
        if n != 0 && n <= len.saturating_sub(pos) {
            // A full ring forgets what fell out of the window (on a contiguous stream,
            // every record once the ring is the window).
            if self.held + n > len {
                self.forget((off + n as u64).saturating_sub(HISTORY_BYTES as u64));
            }
            if self.held + n <= len {
                self.ring[pos..pos + n].copy_from_slice(bytes);
                self.append(off, n);
                return;
            }
        }
        self.record_any(off, bytes);
    }

    /// Whether a record of capture `src` is kept by reference: while the history keeps
    /// that capture's places, or when it holds nothing yet. A record of another capture
    /// (the next piece of a capture cut in pieces) or of none is copied, and the places
    /// held are read back into copies first ([`History::materialize`]).
    #[inline(always)]
    fn by_ref(&mut self, src: &Arc<Reread>) -> bool {
        match &self.src {
            Some(s) => Arc::ptr_eq(s, src),
            None if self.ring.is_empty() => {
                self.src = Some(Arc::clone(src));
                true
            }
            None => false,
        }
    }

    /// Keeps where the `n` captured bytes at stream offset `off` lie: at `at` of the
    /// capture. Forgets what fell out of the window once more than [`REFS_KEPT`] ranges
    /// are held; past [`MAX_REFS`] in the window, turns into copies (returns what could
    /// not be read back, as [`History::materialize`]).
    #[inline(always)]
    fn record_ref(&mut self, off: u64, n: usize, at: u64) -> Option<(u64, u64)> {
        if n == 0 {
            return None;
        }
        let end = off + n as u64;
        self.refs.push_back(Ref { start: off, end, at });
        self.end = end;
        if self.refs.live().len() > REFS_KEPT {
            let floor = end.saturating_sub(HISTORY_BYTES as u64);
            while self.refs.front_mut().is_some_and(|r| r.end <= floor) {
                self.refs.pop_front();
            }
            if self.refs.live().len() > MAX_REFS {
                return self.materialize();
            }
        }
        None
    }

    /// Turns the places held into copies: the window's bytes read back from the capture
    /// into the ring. Bytes that cannot be read back are not held: returns how many, and
    /// the first one's offset, if any.
    #[cold]
    #[inline(never)]
    fn materialize(&mut self) -> Option<(u64, u64)> {
        let src = self.src.take()?;
        let refs = std::mem::take(&mut self.refs);
        self.rereads = 0;
        let (end, floor) = (self.end, self.end.saturating_sub(HISTORY_BYTES as u64));
        // The window's part of each range: (stream offset, place, length).
        let parts: Vec<(u64, u64, u64)> = refs
            .live()
            .iter()
            .filter(|r| r.end > floor)
            .map(|r| {
                let lo = r.start.max(floor);
                (lo, r.at + (lo - r.start), r.end - lo)
            })
            .collect();
        let mut buf = Vec::new();
        let mut unread: Option<(u64, u64)> = None;
        let mut i = 0;
        while i < parts.len() {
            // Parts close together in the capture, in one read.
            let (from, mut to) = (parts[i].1, parts[i].1 + parts[i].2);
            let mut j = i + 1;
            while let Some(&(_, at, n)) = parts.get(j) {
                if at < to || at - to > COALESCE_GAP || at + n - from > COALESCE_MAX {
                    break;
                }
                to = at + n;
                j += 1;
            }
            buf.resize((to - from) as usize, 0);
            if src.read_at(from, &mut buf) {
                for &(off, at, n) in &parts[i..j] {
                    let k = (at - from) as usize;
                    self.record_any(off, &buf[k..k + n as usize]);
                }
            } else {
                for &(off, _, n) in &parts[i..j] {
                    let (first, sum) = unread.unwrap_or((off, 0));
                    unread = Some((first, sum + n));
                }
            }
            i = j;
        }
        self.end = end;
        unread
    }

    /// [`History::record`] of any size, into a ring of any size: forgets what lies before
    /// the window, then grows the ring if the record still does not fit.
    #[inline(never)]
    fn record_any(&mut self, off: u64, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        // Only the window's worth of a record larger than the window stays.
        let cut = bytes.len().saturating_sub(HISTORY_BYTES);
        let (start, bytes) = (off + cut as u64, &bytes[cut..]);
        self.forget((start + bytes.len() as u64).saturating_sub(HISTORY_BYTES as u64));
        // The bytes held lie in the window before `start`: with these, at most the window.
        let need = self.held + bytes.len();
        if need > self.ring.len() {
            self.grow(need);
        }
        let len = self.ring.len();
        debug_assert!(len.is_power_of_two() && need <= len);
        let pos = (self.head & (len as u64 - 1)) as usize;
        let (a, b) = bytes.split_at(bytes.len().min(len - pos));
        self.ring[pos..pos + a.len()].copy_from_slice(a);
        self.ring[..b.len()].copy_from_slice(b);
        self.append(start, bytes.len());
    }

    /// The `n` bytes just written at `head` are the stream's [off, off + n).
    #[inline(always)]
    fn append(&mut self, off: u64, n: usize) {
        let end = off + n as u64;
        match self.ranges.back_mut() {
            // `self.end` first: the last range's line is read only when it may be extended
            // (it may not end there: bytes a history by reference could not read back
            // into copies are not held, `materialize`).
            Some(last) if self.end == off && last.end == off => last.end = end,
            _ => self.ranges.push_back(Span { start: off, end }),
        }
        self.head += n as u64;
        self.held += n;
        self.end = end;
    }

    /// Forgets the bytes before stream offset `floor`.
    fn forget(&mut self, floor: u64) {
        while let Some(front) = self.ranges.front_mut() {
            if front.end <= floor {
                self.held -= (front.end - front.start) as usize;
                self.ranges.pop_front();
            } else {
                if front.start < floor {
                    let d = floor - front.start;
                    front.start = floor;
                    self.held -= d as usize;
                }
                break;
            }
        }
    }

    /// The ring grows with what it holds (a power of two from 256 bytes up to
    /// [`HISTORY_BYTES`]), so a connection that carried only a handshake holds a few hundred
    /// bytes, not the whole window. The bytes held keep their packed places (a place's
    /// index is place & (len − 1)): one contiguous run, copied in at most three pieces.
    fn grow(&mut self, need: usize) {
        let len = need.next_power_of_two().clamp(256, HISTORY_BYTES);
        let mut ring = vec![0; len];
        let (om, nm) = (self.ring.len().wrapping_sub(1) as u64, (len - 1) as u64);
        let mut p = self.head - self.held as u64;
        while p < self.head {
            let (i, j) = ((p & om) as usize, (p & nm) as usize);
            let k = usize::try_from(self.head - p).unwrap_or(usize::MAX).min(self.ring.len() - i).min(len - j);
            ring[j..j + k].copy_from_slice(&self.ring[i..i + k]);
            p += k as u64;
        }
        self.ring = ring;
    }

    /// Compares `bytes` (at stream offset `off`) with the known history. Returns (differing
    /// bytes, offset of the first difference), and the bytes held by reference that could
    /// not be read back to compare with (and the first one's offset), if any.
    fn compare(&mut self, off: u64, bytes: &[u8]) -> Compared {
        if let Some(src) = &self.src {
            if self.rereads < MAX_REREADS {
                let (compared, reads) = self.compare_refs(src, off, bytes);
                self.rereads = self.rereads.saturating_add(reads);
                return compared;
            }
            let unread = self.materialize();
            return (self.compare_copies(off, bytes), unread);
        }
        (self.compare_copies(off, bytes), None)
    }

    /// [`History::compare`] of the copies in the ring.
    fn compare_copies(&self, off: u64, bytes: &[u8]) -> (u64, u64) {
        let mask = (self.ring.len() as u64).wrapping_sub(1);
        let end = off + bytes.len() as u64;
        // Bytes before the window's floor may still be held (forgotten lazily).
        let floor = self.end.saturating_sub(HISTORY_BYTES as u64).max(off);
        let mut differ = 0u64;
        let mut first = u64::MAX;
        // The packed place of the first range's first byte.
        let mut at = self.head - self.held as u64;
        for r in self.ranges.live() {
            let (lo, hi, r_at) = (r.start.max(floor), r.end.min(end), at);
            at += r.end - r.start;
            let mut o = lo;
            while o < hi {
                if self.ring[((r_at + (o - r.start)) & mask) as usize] != bytes[(o - off) as usize] {
                    differ += 1;
                    first = first.min(o);
                }
                o += 1;
            }
        }
        (differ, first)
    }
}

impl History {
    /// [`History::compare`] of ranges recorded by reference: their bytes read back from the
    /// capture (bytes that cannot be read back are not compared, and counted). Returns
    /// the reads made too.
    #[cold]
    #[inline(never)]
    fn compare_refs(&self, src: &Reread, off: u64, bytes: &[u8]) -> (Compared, u32) {
        let end = off + bytes.len() as u64;
        let floor = self.end.saturating_sub(HISTORY_BYTES as u64).max(off);
        let (mut differ, mut first) = (0u64, u64::MAX);
        let mut unread: Option<(u64, u64)> = None;
        let mut reads = 0u32;
        let mut buf = Vec::new();
        for r in self.refs.live() {
            let (lo, hi) = (r.start.max(floor), r.end.min(end));
            if lo >= hi {
                continue;
            }
            // The range's part the copy overlaps, in one read.
            reads = reads.saturating_add(1);
            buf.resize((hi - lo) as usize, 0);
            if !src.read_at(r.at + (lo - r.start), &mut buf) {
                let (at, n) = unread.unwrap_or((lo, 0));
                unread = Some((at, n + (hi - lo)));
                continue;
            }
            let mine = &bytes[(lo - off) as usize..(hi - off) as usize];
            for (i, (a, b)) in buf.iter().zip(mine).enumerate() {
                if a != b {
                    differ += 1;
                    first = first.min(lo + i as u64);
                }
            }
        }
        (((differ, first), unread), reads)
    }
}

/// One direction of a connection.
#[derive(Default)]
pub struct StreamHalf {
    started: bool,
    syn_seen: bool,
    base_seq: u32,
    next: u64,
    ooo: BTreeMap<u64, Chunk>,
    ooo_bytes: usize,
    max_acked: Option<u64>,
    fin: Option<u64>,
    fin_emitted: bool,
    history: History,
    /// Counters.
    pub stats: HalfStats,
}

impl std::fmt::Debug for StreamHalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamHalf")
            .field("started", &self.started)
            .field("next", &self.next)
            .field("ooo", &self.ooo.len())
            .finish_non_exhaustive()
    }
}

impl StreamHalf {
    /// True once the stream's origin (offset 0) is fixed.
    pub fn started(&self) -> bool {
        self.started
    }

    /// True when the SYN of this direction was captured (offset 0 is the true start).
    pub fn syn_seen(&self) -> bool {
        self.syn_seen
    }

    /// Next stream offset to be delivered.
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    /// Raw sequence number of stream offset 0.
    pub fn base_seq(&self) -> u32 {
        self.base_seq
    }

    /// Stream offset of a raw sequence number, relative to the delivery point; `None` before
    /// the origin or when the stream has not started.
    pub fn offset_of(&self, seq: u32) -> Option<u64> {
        if !self.started {
            return None;
        }
        let at_next = self.base_seq.wrapping_add(self.next as u32);
        let rel = i64::from(seq.wrapping_sub(at_next) as i32);
        let abs = self.next as i64 + rel;
        (abs >= 0).then_some(abs as u64)
    }

    /// A SYN from this direction's sender.
    pub fn on_syn(&mut self, seq: u32) {
        if !self.started {
            self.started = true;
            self.syn_seen = true;
            self.base_seq = seq.wrapping_add(1);
        }
    }

    /// Fixes the origin at `seq` if the stream has not started (mid-stream pickup).
    pub fn start_at(&mut self, seq: u32) {
        if !self.started {
            self.started = true;
            self.base_seq = seq;
        }
    }

    /// Frees the buffers of a stream no longer followed; counters stay.
    pub fn release(&mut self) {
        *self = Self { stats: std::mem::take(&mut self.stats), ..Self::default() };
    }

    /// True while bytes wait in the out-of-order buffer.
    pub fn has_pending(&self) -> bool {
        !self.ooo.is_empty()
    }

    fn deliver(
        &mut self,
        off: u64,
        len: u64,
        captured: &[u8],
        origin: Option<Origin<'_>>,
        stamp: Stamp,
        emit: &mut impl FnMut(Stamp, StreamEvent<'_>),
    ) {
        debug_assert_eq!(off, self.next);
        let cap = (captured.len() as u64).min(len) as usize;
        let missing = len - cap as u64;
        if missing > 0 {
            self.stats.bytes_snaplen += missing;
            self.stats.gaps += 1;
        }
        if cap > 0 {
            if let Some((offset, bytes)) = self.history.record(off, &captured[..cap], origin) {
                emit(stamp, StreamEvent::Anomaly(Anomaly::HistoryUnreadable { offset, bytes }));
            }
            self.stats.bytes_delivered += cap as u64;
            emit(stamp, StreamEvent::Data { offset: off, bytes: &captured[..cap], cut: missing });
        } else if missing > 0 {
            emit(stamp, StreamEvent::Gap { offset: off, len: missing, reason: GapReason::Snaplen });
        }
        self.next = off + len;
        self.maybe_fin(stamp, emit);
    }

    fn maybe_fin(&mut self, stamp: Stamp, emit: &mut impl FnMut(Stamp, StreamEvent<'_>)) {
        if let Some(f) = self.fin {
            if !self.fin_emitted && f <= self.next && self.ooo.is_empty() {
                self.fin_emitted = true;
                emit(stamp, StreamEvent::Fin { offset: f });
            }
        }
    }

    /// Drops the part of [off, off+len) already delivered, comparing the captured bytes of
    /// that part with history. Returns the remaining (off, len, captured). Inline up to
    /// the test that nothing was delivered before (almost every segment).
    #[inline(always)]
    fn trim<'b>(
        &mut self,
        off: u64,
        len: u64,
        captured: &'b [u8],
        stamp: Stamp,
        emit: &mut impl FnMut(Stamp, StreamEvent<'_>),
    ) -> Option<(u64, u64, &'b [u8])> {
        if off >= self.next {
            return Some((off, len, captured));
        }
        self.trim_repeat(off, len, captured, stamp, emit)
    }

    /// [`StreamHalf::trim`] of a segment that repeats delivered bytes.
    #[inline(never)]
    fn trim_repeat<'b>(
        &mut self,
        off: u64,
        len: u64,
        captured: &'b [u8],
        stamp: Stamp,
        emit: &mut impl FnMut(Stamp, StreamEvent<'_>),
    ) -> Option<(u64, u64, &'b [u8])> {
        let dup = (self.next - off).min(len);
        self.stats.bytes_retransmitted += dup;
        self.stats.segments_retransmitted += 1;
        let cmp_len = (dup as usize).min(captured.len());
        let ((differ, first), unread) = self.history.compare(off, &captured[..cmp_len]);
        if let Some((offset, bytes)) = unread {
            emit(stamp, StreamEvent::Anomaly(Anomaly::HistoryUnreadable { offset, bytes }));
        }
        if differ > 0 {
            self.stats.bytes_overlap_conflict += differ;
            emit(stamp, StreamEvent::Anomaly(Anomaly::OverlapConflict { offset: first, bytes: differ }));
        }
        if dup == len {
            return None;
        }
        Some((self.next, len - dup, &captured[cmp_len..]))
    }

    /// A segment with `len` payload bytes on the wire, of which `captured` (a prefix) was
    /// captured, at `origin` of a capture that can be read again when it is one. Bytes
    /// ahead of a hole wait for the hole's fill (the sender's retransmission when the path
    /// dropped the segment before the capture point) within the bounds of
    /// [`crate::limits`]; the segment's capture time also ages the holes already waiting.
    #[inline]
    pub fn on_data(
        &mut self,
        seq: u32,
        len: u64,
        captured: &[u8],
        origin: Option<Origin<'_>>,
        stamp: Stamp,
        emit: &mut impl FnMut(Stamp, StreamEvent<'_>),
    ) {
        self.stats.data_segments += 1;
        self.place(seq, len, captured, origin, stamp, emit);
        self.enforce_bounds(Some(stamp.ts_ns), emit);
    }

    /// Delivers, buffers or drops one segment.
    #[inline]
    fn place(
        &mut self,
        seq: u32,
        len: u64,
        captured: &[u8],
        origin: Option<Origin<'_>>,
        stamp: Stamp,
        emit: &mut impl FnMut(Stamp, StreamEvent<'_>),
    ) {
        self.start_at(seq);
        let Some(off) = self.offset_of(seq) else {
            self.stats.bytes_before_start += len;
            emit(stamp, StreamEvent::Anomaly(Anomaly::BeforeStreamStart { bytes: len }));
            return;
        };
        let whole = captured.len();
        let Some((off, len, captured)) = self.trim(off, len, captured, stamp, emit) else {
            return;
        };
        let origin = origin.map(|o| o.advanced(whole - captured.len()));
        if let Some(fin) = self.fin {
            if off >= fin {
                self.stats.bytes_after_fin += len;
                emit(stamp, StreamEvent::Anomaly(Anomaly::DataAfterFin { bytes: len }));
                return;
            }
        }
        if off == self.next {
            // Almost every segment: in order with nothing buffered, so no drain to call.
            let filling = !self.ooo.is_empty();
            if filling {
                self.stats.segments_filling_holes += 1;
            }
            self.deliver(off, len, captured, origin, stamp, emit);
            if filling {
                self.drain(emit);
            }
        } else {
            self.buffer(off, len, captured, origin, stamp);
        }
    }

    /// Keeps a segment that lies ahead of a hole. Only its captured prefix is copied: the
    /// bytes the snaplen cut off are kept as a length, never as bytes.
    fn buffer(&mut self, off: u64, len: u64, captured: &[u8], origin: Option<Origin<'_>>, stamp: Stamp) {
        self.stats.segments_out_of_order += 1;
        let cap = &captured[..(captured.len() as u64).min(len) as usize];
        let keep = self.ooo.get(&off).is_none_or(|c| len > c.len);
        if keep {
            let origin = origin.map(|o| (Arc::clone(o.src), o.at));
            if let Some(old) = self.ooo.insert(off, Chunk { len, data: cap.to_vec(), stamp, origin }) {
                self.ooo_bytes -= old.data.len();
                self.stats.bytes_retransmitted += old.len;
                self.stats.segments_retransmitted += 1;
            }
            self.ooo_bytes += cap.len();
        } else {
            self.stats.bytes_retransmitted += len;
            self.stats.segments_retransmitted += 1;
        }
    }

    /// Capture time `now` (when known) has come: gives up on every hole that has passed a
    /// bound, in stream order. Inline: with nothing buffered (almost every call) it
    /// returns without a call.
    #[inline]
    fn enforce_bounds(&mut self, now: Option<i64>, emit: &mut impl FnMut(Stamp, StreamEvent<'_>)) {
        if self.ooo.is_empty() {
            return;
        }
        while let Some(reason) = self.hole_verdict(now) {
            self.skip_hole(reason, emit);
        }
    }

    /// Whether the hole before the first buffered chunk is given up on, and why: the buffer
    /// is over its memory bound ([`MAX_OOO_BYTES`], [`MAX_OOO_SEGMENTS`]: buffer limit), or
    /// the hole can no longer be filled by the capture (capture loss): the peer acknowledged
    /// past it, bytes were buffered more than a TCP window beyond it ([`MAX_HOLE_SPAN`]), or
    /// it has waited longer than [`MAX_HOLE_WAIT_NS`] of capture time.
    fn hole_verdict(&self, now: Option<i64>) -> Option<GapReason> {
        let (&start, first) = self.ooo.first_key_value()?;
        if start <= self.next {
            return None;
        }
        if self.ooo_bytes > MAX_OOO_BYTES || self.ooo.len() > MAX_OOO_SEGMENTS {
            return Some(GapReason::BufferLimit);
        }
        let end = self.ooo.last_key_value().map_or(start, |(o, c)| o + c.len);
        let acked = self.max_acked.is_some_and(|a| a >= start);
        let far = end - self.next > MAX_HOLE_SPAN;
        let stale = now.is_some_and(|t| t.saturating_sub(first.stamp.ts_ns) > MAX_HOLE_WAIT_NS);
        (acked || far || stale).then_some(GapReason::CaptureLoss)
    }

    /// Capture time `now` has come (no segment of this direction needed): every hole that
    /// has waited past [`MAX_HOLE_WAIT_NS`] (or passed another bound) becomes a gap, and the
    /// bytes buffered behind it are delivered.
    #[inline]
    pub fn expire(&mut self, now: i64, emit: &mut impl FnMut(Stamp, StreamEvent<'_>)) {
        self.enforce_bounds(Some(now), emit);
    }

    /// Declares the hole before the first buffered chunk missing, then drains.
    fn skip_hole(&mut self, reason: GapReason, emit: &mut impl FnMut(Stamp, StreamEvent<'_>)) {
        let Some((&start, chunk)) = self.ooo.first_key_value() else {
            return;
        };
        if start > self.next {
            let len = start - self.next;
            self.stats.bytes_lost += len;
            self.stats.gaps += 1;
            emit(chunk.stamp, StreamEvent::Gap { offset: self.next, len, reason });
            self.next = start;
        }
        self.drain(emit);
    }

    fn drain(&mut self, emit: &mut impl FnMut(Stamp, StreamEvent<'_>)) {
        while let Some(entry) = self.ooo.first_entry() {
            if *entry.key() > self.next {
                break;
            }
            let (off, chunk) = entry.remove_entry();
            self.ooo_bytes -= chunk.data.len();
            if let Some((o, l, c)) = self.trim(off, chunk.len, &chunk.data, chunk.stamp, emit) {
                let cut = (chunk.data.len() - c.len()) as u64;
                let origin = chunk.origin.as_ref().map(|(src, at)| Origin { src, at: at + cut });
                self.deliver(o, l, c, origin, chunk.stamp, emit);
            }
        }
    }

    /// The peer acknowledged up to raw sequence number `ack` of this direction.
    #[inline]
    pub fn on_peer_ack(&mut self, ack: u32, emit: &mut impl FnMut(Stamp, StreamEvent<'_>)) {
        let Some(off) = self.offset_of(ack) else {
            return;
        };
        // An ACK cannot cover bytes never sent; one far beyond anything seen is corrupt or
        // belongs to another incarnation of the tuple, and must not declare holes lost.
        let seen = self.ooo.last_key_value().map_or(self.next, |(o, c)| (o + c.len).max(self.next));
        if off > seen + MAX_ACK_AHEAD {
            return;
        }
        // An ACK can cover the FIN's sequence number; data ends before it.
        let off = match self.fin {
            Some(f) => off.min(f),
            None => off,
        };
        if self.max_acked.is_none_or(|m| off > m) {
            self.max_acked = Some(off);
        }
        self.enforce_bounds(None, emit);
    }

    /// The sender's FIN, carried by a segment at `seq` with `len` payload bytes.
    pub fn on_fin(&mut self, seq: u32, len: u64, stamp: Stamp, emit: &mut impl FnMut(Stamp, StreamEvent<'_>)) {
        self.start_at(seq);
        if self.fin.is_some() {
            return;
        }
        if let Some(off) = self.offset_of(seq) {
            self.fin = Some(off + len);
            self.maybe_fin(stamp, emit);
        }
    }

    /// End of capture (or of the connection): every hole becomes a capture-loss gap, buffered
    /// data is delivered, bytes acknowledged but never seen become a final gap.
    pub fn flush(&mut self, stamp: Stamp, emit: &mut impl FnMut(Stamp, StreamEvent<'_>)) {
        while !self.ooo.is_empty() {
            self.skip_hole(GapReason::CaptureLoss, emit);
        }
        if let Some(acked) = self.max_acked {
            if acked > self.next {
                let len = acked - self.next;
                self.stats.bytes_lost += len;
                self.stats.gaps += 1;
                emit(stamp, StreamEvent::Gap { offset: self.next, len, reason: GapReason::CaptureLoss });
                self.next = acked;
            }
        }
        self.maybe_fin(stamp, emit);
        self.history = History::default();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use std::sync::Arc;

    use lnetcap_capture::{Origin, Reread};

    use super::{History, Ranges, Span, HISTORY_BYTES, MAX_REREADS, REFS_KEPT};

    /// (differing bytes, first difference) of `bytes` at `off` against the model's bytes
    /// at or after `floor`.
    fn model_compare(model: &BTreeMap<u64, u8>, floor: u64, off: u64, bytes: &[u8]) -> (u64, u64) {
        let (mut differ, mut first) = (0u64, u64::MAX);
        let (lo, hi) = (off.max(floor), off + bytes.len() as u64);
        for (&o, &b) in model.range(lo..hi.max(lo)) {
            if bytes[(o - off) as usize] != b {
                differ += 1;
                first = first.min(o);
            }
        }
        (differ, first)
    }

    proptest! {
        /// The history against a model that keeps every recorded byte: a retransmitted
        /// copy is compared with exactly the recorded bytes of the window (those at or
        /// after the end of the latest record less `HISTORY_BYTES`), whatever the gaps
        /// between records and the sizes of the copies; the ring holds no more than the
        /// bytes of the window need.
        #[test]
        fn history_compares_with_the_bytes_it_still_holds(
            records in proptest::collection::vec((0u64..5000, 1usize..3000, any::<u8>()), 1..120),
            queries in proptest::collection::vec((0u64..400_000, 1usize..4000, any::<u8>()), 1..20),
        ) {
            let mut h = History::default();
            let mut model = BTreeMap::new();
            let (mut at, mut floor, mut most) = (0u64, 0u64, 0usize);
            for (i, &(gap, len, seed)) in records.iter().enumerate() {
                at += gap;
                let bytes: Vec<u8> = (0..len).map(|k| seed.wrapping_add((k * 7 + i) as u8)).collect();
                h.record(at, &bytes, None);
                for (k, b) in bytes.iter().enumerate() {
                    model.insert(at + k as u64, *b);
                }
                at += len as u64;
                floor = floor.max(at.saturating_sub(HISTORY_BYTES as u64));
                prop_assert!(h.ranges.v.len() <= 2 * h.ranges.live().len() + Ranges::<Span>::COMPACT_AT);
                // Held: the window's bytes, and those before its floor not yet forgotten
                // (lazily, when a record does not fit); the ranges say the same.
                let held = model.range(floor..).count();
                prop_assert!(h.held >= held, "held {} of the window's {}", h.held, held);
                prop_assert_eq!(h.held as u64, h.ranges.live().iter().map(|r| r.end - r.start).sum::<u64>());
                // Exactly the window's bytes at or after its floor.
                let in_window: u64 = h.ranges.live().iter().map(|r| r.end.saturating_sub(r.start.max(floor))).sum();
                prop_assert_eq!(in_window, held as u64);
                most = most.max(held);
                prop_assert!(h.ring.len() <= most.next_power_of_two().max(256), "ring {} for {} bytes", h.ring.len(), most);
            }
            for &(off, len, seed) in &queries {
                let off = off % (at + 10);
                let bytes: Vec<u8> = (0..len).map(|k| if k % 5 == 0 { seed } else { 0x5a }).collect();
                prop_assert_eq!(h.compare(off, &bytes), (model_compare(&model, floor, off, &bytes), None));
            }
        }

        /// The history by reference against the same model: records kept as places in a
        /// capture compare as their copies did, and the places out of the window held are
        /// bounded. Records of a second capture or of none (copied) come in turn: the
        /// places held are read back into copies at the first of them.
        #[test]
        fn history_by_reference_compares_as_the_copies(
            records in proptest::collection::vec((0u64..5000, 1usize..3000, any::<u8>(), 0u8..40), 1..120),
            queries in proptest::collection::vec((0u64..400_000, 1usize..4000, any::<u8>()), 1..20),
        ) {
            // Each record's bytes, and where they lie in capture A (tag < 38), B (38) or none.
            let (mut files, mut at, mut placed) = ([vec![0xee; 5], vec![0xee; 9]], 0u64, Vec::new());
            for (i, &(gap, len, seed, tag)) in records.iter().enumerate() {
                at += gap;
                let bytes: Vec<u8> = (0..len).map(|k| seed.wrapping_add((k * 7 + i) as u8)).collect();
                let file = match tag { 0..38 => Some(0), 38 => Some(1), _ => None };
                let place = file.map(|f: usize| {
                    let p = files[f].len() as u64;
                    files[f].extend_from_slice(&bytes);
                    (f, p)
                });
                placed.push((at, bytes, place));
                at += len as u64;
            }
            let [fa, fb] = files;
            let src = [Reread::memory(Arc::new(fa)), Reread::memory(Arc::new(fb))];
            let mut h = History::default();
            let (mut model, mut floor) = (BTreeMap::new(), 0u64);
            for (off, bytes, place) in &placed {
                h.record(*off, bytes, place.map(|(f, p)| Origin { src: &src[f], at: p }));
                for (k, b) in bytes.iter().enumerate() {
                    model.insert(off + k as u64, *b);
                }
                floor = floor.max((off + bytes.len() as u64).saturating_sub(HISTORY_BYTES as u64));
                if h.src.is_some() {
                    prop_assert!(h.ring.is_empty() && h.held == 0);
                    let stale = h.refs.live().iter().filter(|r| r.end <= floor).count();
                    prop_assert!(stale <= REFS_KEPT, "{} ranges out of the window held", stale);
                }
            }
            for &(off, len, seed) in &queries {
                let off = off % (at + 10);
                let bytes: Vec<u8> = (0..len).map(|k| if k % 5 == 0 { seed } else { 0x5a }).collect();
                prop_assert_eq!(h.compare(off, &bytes), (model_compare(&model, floor, off, &bytes), None));
            }
            prop_assert_eq!(src[0].failures() + src[1].failures(), 0);
        }
    }

    /// Records: (stream offset, bytes).
    type Records = Vec<(u64, Vec<u8>)>;

    /// A history by reference of `n` records of `len` bytes each, one after the other in
    /// the stream, `gap` bytes apart in the capture; and the model of its bytes.
    fn by_reference(n: u64, len: u64, gap: u64) -> (History, Arc<Reread>, BTreeMap<u64, u8>, Records) {
        let records: Vec<(u64, Vec<u8>)> =
            (0..n).map(|i| (i * len, (0..len).map(|k| (i * 13 + k * 7) as u8).collect())).collect();
        let mut file = Vec::new();
        let mut places = Vec::new();
        for (_, b) in &records {
            file.resize(file.len() + gap as usize, 0xee);
            places.push(file.len() as u64);
            file.extend_from_slice(b);
        }
        let src = Reread::memory(Arc::new(file));
        let (mut h, mut model) = (History::default(), BTreeMap::new());
        for ((off, b), at) in records.iter().zip(&places) {
            h.record(*off, b, Some(Origin { src: &src, at: *at }));
            model.extend(b.iter().enumerate().map(|(k, x)| (off + k as u64, *x)));
        }
        (h, src, model, records)
    }

    #[test]
    fn a_history_of_small_segments_turns_into_copies() {
        // 300 records of 100 bytes in the window: past MAX_REFS, copies, read back in
        // reads of places close together (100 bytes apart: one read), or one a record
        // (5,000 apart).
        for gap in [100, 5000] {
            let (mut h, src, model, _) = by_reference(300, 100, gap);
            assert!(h.src.is_none() && !h.ring.is_empty(), "gap {gap}");
            assert!(src.failures() == 0);
            let bytes = vec![0x11; 3000];
            assert_eq!(h.compare(10_000, &bytes), (model_compare(&model, 0, 10_000, &bytes), None));
        }
    }

    #[test]
    fn bytes_not_read_back_into_copies_are_not_held() {
        // The second record's place lies past the capture's end (as bytes of a file
        // changed between two reads would): turned into copies, the history holds the
        // first and says the second was not read back; what follows is compared with
        // what it holds, and forgets exactly.
        let src = Reread::memory(Arc::new(vec![1; 100]));
        let mut h = History::default();
        assert_eq!(h.record(0, &[1; 100], Some(Origin { src: &src, at: 0 })), None);
        assert_eq!(h.record(100, &[2; 100], Some(Origin { src: &src, at: 10_000 })), None);
        assert_eq!(h.record(200, &[3; 50], None), Some((100, 100)));
        assert_eq!(h.held as u64, h.ranges.live().iter().map(|r| r.end - r.start).sum::<u64>());
        assert_eq!(h.compare(200, &[3; 50]), ((0, u64::MAX), None));
        assert_eq!(h.compare(0, &[1; 250]), ((50, 200), None));
        h.record(250, &[4; 65_536], None);
        assert_eq!(h.held as u64, h.ranges.live().iter().map(|r| r.end - r.start).sum::<u64>());
        assert_eq!(h.compare(250, &[4; 10]), ((0, u64::MAX), None));
    }

    #[test]
    fn a_history_read_back_often_turns_into_copies() {
        let (mut h, _src, model, records) = by_reference(200, 100, 10);
        assert!(h.src.is_some());
        // Retransmissions of one record each, one changed byte: a read each, then copies.
        for (i, (off, b)) in records.iter().enumerate().skip(100).take(80) {
            let mut copy = b.clone();
            copy[i % 100] ^= 1;
            let floor = (200 * 100u64).saturating_sub(HISTORY_BYTES as u64);
            assert_eq!(h.compare(*off, &copy), (model_compare(&model, floor, *off, &copy), None), "compare {i}");
            assert_eq!(h.src.is_some(), i - 100 < MAX_REREADS as usize, "compare {i}");
        }
    }

    #[test]
    fn ranges_queue_in_order_and_compact() {
        let span = |i: u64| Span { start: 10 * i, end: 10 * i + 5 };
        let mut r = Ranges::default();
        for i in 0..200u64 {
            r.push_back(span(i));
        }
        for i in 0..150u64 {
            assert_eq!(r.front_mut().copied(), Some(span(i)));
            r.pop_front();
        }
        // Compacted once half was dropped: what is left starts at the front.
        assert_eq!(r.live().len(), 50);
        assert!(r.v.len() < 200);
        assert_eq!(r.front_mut().copied(), Some(span(150)));
        if let Some(b) = r.back_mut() {
            b.end = 2000;
        }
        assert_eq!(r.live().last().map(|s| (s.start, s.end)), Some((1990, 2000)));
        for _ in 0..50 {
            r.pop_front();
        }
        assert_eq!(r.front_mut(), None);
        assert_eq!(r.back_mut(), None);
        assert_eq!(r.v.len(), 0);
    }
}
