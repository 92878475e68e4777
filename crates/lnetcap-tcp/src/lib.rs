//! TCP byte streams out of captured segments, sans-IO.
//!
//! [`FlowTable`] keeps one [`Connection`] per TCP 4-tuple (a new one when a SYN reuses a
//! closed tuple) and, per direction, turns segments into an ordered stream of [`StreamEvent`]s
//! in `u64` stream offsets (offset 0 = first byte after the SYN, or the first byte seen when
//! the SYN was not captured):
//!
//! - in-order bytes are delivered at once, borrowing the capture buffer;
//! - out-of-order segments wait in a bounded buffer ([`limits`]) for the hole's fill: a
//!   segment the path dropped before the capture point leaves a hole that the sender's
//!   retransmission fills about a round trip later, and the stream then continues as on a
//!   loss-free capture (the TCP analysis counts that filler as a retransmission lost
//!   upstream, [`perf::DirPerf::retransmits_upstream`]). A hole is given up on only when the
//!   peer acknowledges past it, bytes arrive more than a TCP window beyond it
//!   ([`limits::MAX_HOLE_SPAN`]), it waited [`limits::MAX_HOLE_WAIT_NS`] of capture time, or
//!   the capture ends: it becomes a [`GapReason::CaptureLoss`] gap; or when the buffer's
//!   memory bound ([`limits::MAX_OOO_BYTES`], [`limits::MAX_OOO_SEGMENTS`]) is reached: a
//!   [`GapReason::BufferLimit`] gap. Only the captured prefix of a buffered segment is
//!   copied; bytes the snaplen cut off are kept as a length;
//! - retransmitted and overlapping bytes are dropped (first copy wins) after being compared
//!   with the recently delivered bytes; a difference is an [`Anomaly::OverlapConflict`];
//! - payload bytes that the snaplen cut off still occupy stream space: they are delivered as
//!   a [`GapReason::Snaplen`] gap right after the captured prefix.
//!
//! Sequence numbers are compared modulo 2^32 (RFC 793 / RFC 1323 §4.2 style: a distance
//! below 2^31 is "after"), so ISNs near 2^32 and wraps inside long streams are handled.

pub mod headvec;
pub mod limits;
pub mod perf;
pub mod series;
pub mod stats;
mod stream;
mod table;

pub use stream::{HalfStats, StreamHalf};
pub use table::{
    partition_of, ActiveRule, CapturePoint, ConnId, ConnKey, Connection, Dir, Endpoint, FlowTable, Retirements,
    SegmentOutcome, SweepClock, Verdict,
};

/// Why bytes of a stream are missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GapReason {
    /// The snaplen cut the segment's payload: the bytes were sent but not captured.
    Snaplen,
    /// A segment was never captured (the peer acknowledged bytes the capture does not have,
    /// bytes came a TCP window beyond the hole, the hole waited past
    /// [`limits::MAX_HOLE_WAIT_NS`] without a retransmission filling it, or the capture ended
    /// with a hole).
    CaptureLoss,
    /// The out-of-order buffer hit its limit and the hole was given up on.
    BufferLimit,
}

impl GapReason {
    /// Short name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Snaplen => "snaplen",
            Self::CaptureLoss => "capture_loss",
            Self::BufferLimit => "buffer_limit",
        }
    }
}

/// Stream-level anomalies: data, not log lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anomaly {
    /// A retransmitted or overlapping copy carried bytes that differ from the first copy.
    OverlapConflict {
        /// Stream offset of the first differing byte.
        offset: u64,
        /// Number of differing bytes in this segment.
        bytes: u64,
    },
    /// Bytes before the first byte this capture saw of a stream picked up mid-stream.
    BeforeStreamStart {
        /// Bytes dropped.
        bytes: u64,
    },
    /// Data after the FIN's sequence number.
    DataAfterFin {
        /// Bytes dropped.
        bytes: u64,
    },
    /// Bytes of the first copy that could not be read back from the capture file, which
    /// the retransmission history keeps places in rather than copies: the file was
    /// rewritten, cut, replaced or removed since the run opened it
    /// (`lnetcap_capture::Reread`). A retransmitted copy of them is not compared.
    HistoryUnreadable {
        /// Stream offset of the first byte not read back.
        offset: u64,
        /// Bytes not read back.
        bytes: u64,
    },
}

/// What a flow table reports to its sink, in stream order per direction.
#[derive(Debug)]
pub enum StreamEvent<'a> {
    /// Captured, in-order, first-copy bytes.
    Data {
        /// Stream offset of `bytes[0]`.
        offset: u64,
        /// The bytes.
        bytes: &'a [u8],
        /// Stream bytes right after `bytes` that the capture's snapshot length cut off
        /// (0 when the segment's payload was captured whole): a [`StreamEvent::Gap`] of
        /// reason [`GapReason::Snaplen`] at `offset + bytes.len()`, carried by this event
        /// rather than one of its own (a header-only capture cuts nearly every data
        /// segment: one event a segment instead of two).
        cut: u64,
    },
    /// Bytes that occupy stream space but were not captured.
    Gap {
        /// Stream offset of the first missing byte.
        offset: u64,
        /// Number of missing bytes.
        len: u64,
        /// Why they are missing.
        reason: GapReason,
    },
    /// The sender's FIN (at the stream offset after its last byte).
    Fin {
        /// Stream offset of the FIN.
        offset: u64,
    },
    /// A RST from this direction's sender.
    Rst,
    /// An anomaly.
    Anomaly(Anomaly),
}

impl StreamEvent<'_> {
    /// The snaplen gap a [`StreamEvent::Data`] event carries after its bytes (its `cut`):
    /// (stream offset, length), or `None` (no cut, or another event).
    pub fn cut_gap(&self) -> Option<(u64, u64)> {
        match self {
            StreamEvent::Data { offset, bytes, cut } if *cut > 0 => Some((offset + bytes.len() as u64, *cut)),
            _ => None,
        }
    }
}

/// Capture position of the segment an event came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    /// 1-based frame number.
    pub frame: u64,
    /// Capture timestamp, ns.
    pub ts_ns: i64,
}

/// Receives stream events. `conn` and `dir` say which half-stream; `stamp` is the frame the
/// bytes arrived in (for buffered out-of-order data, the frame that carried them).
pub trait StreamSink {
    /// A new connection was opened in the table (first packet of a 4-tuple).
    fn on_open(&mut self, conn: &Connection) -> Verdict;
    /// An event on one half-stream.
    fn on_event(&mut self, conn: &Connection, dir: Dir, stamp: Stamp, ev: StreamEvent<'_>) -> Verdict;
    /// The table retired the connection to make room (its streams were flushed just
    /// before). Returns true to fold it: the table then keeps no record of it, and the
    /// sink accounts for it in its own aggregate.
    fn on_retire(&mut self, _conn: &Connection) -> bool {
        false
    }
}
