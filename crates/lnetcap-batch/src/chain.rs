//! A capture cut in pieces, read as one: frame numbers carry on from piece to piece, and
//! each cut is checked (the next piece follows on in time and a connection continues).

use std::collections::BTreeSet;

use lnetcap_analysis::PacketSource;
use lnetcap_capture::{CaptureError, Packet};
use serde::{Deserialize, Serialize};

use crate::plan::{tuple_of, Survey, Tuple, CUT_GAP_WITHOUT_CONNECTION_NS, MAX_CUT_GAP_NS};

/// Packets at the end of a piece whose connections are compared with the next piece's.
const TAIL_PACKETS: usize = 64;
/// Bytes kept of each of those packets (link, IP and TCP headers).
const TAIL_BYTES: usize = 128;

/// Where a piece stands in the stream.
#[derive(Debug, Default)]
pub struct Cursor {
    /// Frames of the pieces before.
    pub frame_base: u64,
    /// Input bytes of the pieces before (for progress).
    pub bytes_base: u64,
    /// Input bytes of every piece.
    pub bytes_total: Option<u64>,
    /// Time of the last packet so far.
    pub last_ts_ns: Option<i64>,
    tail: Vec<(u32, u32, Vec<u8>)>,
    next: usize,
}

impl Cursor {
    /// A cursor at the start of a stream of `bytes_total` input bytes.
    pub fn new(bytes_total: u64) -> Self {
        Self { bytes_total: Some(bytes_total), ..Self::default() }
    }

    fn remember(&mut self, p: &Packet<'_>) {
        self.last_ts_ns = Some(p.ts_ns);
        let keep = &p.data[..p.data.len().min(TAIL_BYTES)];
        if self.tail.len() < TAIL_PACKETS {
            self.tail.push((p.linktype, p.origlen, keep.to_vec()));
        } else {
            let slot = &mut self.tail[self.next];
            slot.0 = p.linktype;
            slot.1 = p.origlen;
            slot.2.clear();
            slot.2.extend_from_slice(keep);
        }
        self.next = (self.next + 1) % TAIL_PACKETS;
    }

    /// Connections of the last packets read.
    fn tail_tuples(&self) -> BTreeSet<Tuple> {
        self.tail.iter().filter_map(|(lt, len, d)| tuple_of(*lt, d, *len)).collect()
    }

    /// Whether the piece surveyed as `next` carries on the stream read so far.
    pub fn check_cut(&self, next: &Survey) -> Cut {
        let (Some(last), Some(first)) = (self.last_ts_ns, next.first_ts_ns) else {
            return Cut {
                gap_ns: None,
                connections_continuing: 0,
                joined: true,
                why: "a piece holds no packet".into(),
            };
        };
        let gap = first - last;
        let shared = self.tail_tuples().intersection(&next.tuples).count();
        let (joined, why) = if gap < 0 {
            (false, format!("the next piece starts {:.3} s before this one ends", -gap as f64 / 1e9))
        } else if gap > MAX_CUT_GAP_NS {
            (
                false,
                format!(
                    "{:.1} s between the pieces (more than {} s)",
                    gap as f64 / 1e9,
                    MAX_CUT_GAP_NS / 1_000_000_000
                ),
            )
        } else if shared == 0 && gap > CUT_GAP_WITHOUT_CONNECTION_NS {
            (false, format!("{:.1} s between the pieces and no connection continues", gap as f64 / 1e9))
        } else {
            (true, format!("follows on after {:.3} ms; {shared} connection(s) continue", gap as f64 / 1e6))
        };
        Cut { gap_ns: Some(gap), connections_continuing: shared, joined, why }
    }
}

/// The check of one cut.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut {
    /// First packet of the next piece minus last packet of the one before (ns).
    pub gap_ns: Option<i64>,
    /// Connections seen in the last packets before the cut and the first after it.
    pub connections_continuing: usize,
    /// The pieces were read as one stream (else the group was split here).
    pub joined: bool,
    /// Why, in words.
    pub why: String,
}

/// One piece, read through a [`Cursor`].
pub struct Piece<'c, S> {
    /// The piece's source.
    pub source: S,
    /// The stream's cursor.
    pub cursor: &'c mut Cursor,
}

impl<S: PacketSource> PacketSource for Piece<'_, S> {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        let base = self.cursor.frame_base;
        let p = self.source.next_packet()?;
        if let Some(p) = &p {
            self.cursor.remember(p);
        }
        Ok(p.map(|p| Packet { frame: p.frame + base, ..p }))
    }

    fn drain_warnings(&mut self) -> Vec<CaptureError> {
        self.source.drain_warnings()
    }

    #[inline]
    fn has_warnings(&self) -> bool {
        self.source.has_warnings()
    }

    fn progress(&self) -> (u64, Option<u64>) {
        let (done, _) = self.source.progress();
        (self.cursor.bytes_base + done, self.cursor.bytes_total)
    }
}
