//! The capture times a skipped run's inference needs, kept as the run goes.
//!
//! While framing is lost, a message inferred later in the run (`Framer::infer_run`) takes
//! its first and last times from the segments that carried its first and last bytes. The
//! run's messages, if it has any, are as long as the message decoded before the run, so
//! the only offsets asked about are known from the start: `from + j·len` (a message's first
//! byte) and `from + j·len − 1` (the last byte of the one before). [`RunStamps`] keeps the
//! time of those offsets alone, resolved as the segments pass, where a map of every
//! segment of the run (24 bytes each; a header-only bulk stream skips thousands a run, on
//! every connection at once) was kept to be searched at the end. The answers are the
//! map's: the time of the latest segment that starts at or before the offset.

use lnetcap_tcp::Stamp;

/// Segments a skipped run may span and still be inferred (the count a map of every
/// segment was bounded by): past it the run is left skipped.
pub(super) const MAX_SKIP_SEGMENTS: usize = 1 << 17;

/// Offsets resolved at most: the first and last byte of each of `MAX_INFERRED_RUN`
/// messages (a longer run is never inferred).
const MAX_POINTS: usize = 2 * super::MAX_INFERRED_RUN as usize;

/// The times of a skipped run's message boundaries (see the module's comment).
#[derive(Debug, Default)]
pub(super) struct RunStamps {
    /// The run's start.
    from: u64,
    /// The length of the messages it may hold (0: none can be inferred; nothing is kept).
    len: u64,
    /// The latest segment's time: the answer for every offset not yet passed.
    cur: Stamp,
    /// Segments noted (one per distinct time in a row, as the map held).
    segments: usize,
    /// Times of the offsets passed, in order: `from`, `from + len − 1`, `from + len`,
    /// `from + 2·len − 1`, ...
    points: Vec<Stamp>,
}

impl RunStamps {
    /// A run from `from`, whose first byte came in the segment of time `first`, that may
    /// hold messages of `len` bytes (0 when no message can be inferred in it).
    pub(super) fn start(&mut self, from: u64, first: Stamp, len: u64) {
        self.from = from;
        self.len = len;
        self.cur = first;
        self.segments = 1;
        self.points.clear();
    }

    /// The offset of point `n`.
    fn point(&self, n: usize) -> u64 {
        let j = n.div_ceil(2) as u64;
        let at = self.from.saturating_add(j.saturating_mul(self.len));
        if n % 2 == 1 {
            at - 1
        } else {
            at
        }
    }

    /// A segment of the run starts at `offset`, at time `stamp` (offsets never go back).
    #[inline]
    pub(super) fn note(&mut self, offset: u64, stamp: Stamp) {
        if self.cur == stamp || self.full() {
            return;
        }
        self.segments += 1;
        if self.full() {
            return;
        }
        if self.len > 0 {
            // Offsets before this segment's start keep the time of the one before.
            while self.points.len() < MAX_POINTS && self.point(self.points.len()) < offset {
                self.points.push(self.cur);
            }
        }
        self.cur = stamp;
    }

    /// More segments than a run may span to be inferred.
    pub(super) fn full(&self) -> bool {
        self.segments > MAX_SKIP_SEGMENTS
    }

    /// The run ends at `to`: the times of the first and last bytes of each of the run's
    /// messages of `len` bytes, or `None` when it holds no whole number of them (or more
    /// than inference takes, or too many segments).
    pub(super) fn finish(mut self, to: u64, len: u64) -> Option<Boundaries> {
        let run = to.checked_sub(self.from)?;
        if self.full() || len == 0 || len != self.len || run % len != 0 {
            return None;
        }
        let need = usize::try_from(2 * (run / len)).ok().filter(|&n| n <= MAX_POINTS)?;
        while self.points.len() < need {
            self.points.push(self.cur);
        }
        self.points.truncate(need);
        Some(Boundaries(self.points))
    }

    /// Drops what the run kept (a retired connection's framer).
    pub(super) fn release(&mut self) {
        self.points = Vec::new();
    }
}

/// The times of a run's messages: the first and last byte of message `i` (from 1).
#[derive(Debug)]
pub(super) struct Boundaries(Vec<Stamp>);

impl Boundaries {
    /// (first, last) of message `i` (1-based; at most the run's count).
    pub(super) fn of(&self, i: u64) -> (Stamp, Stamp) {
        let i = i as usize;
        (self.0[2 * (i - 1)], self.0[2 * i - 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn st(frame: u64) -> Stamp {
        Stamp { frame, ts_ns: frame as i64 * 7 }
    }

    /// The map this replaces: every segment's (offset, time), searched at the end.
    fn by_map(map: &[(u64, Stamp)], off: u64) -> Stamp {
        let i = map.partition_point(|(o, _)| *o <= off);
        map[i.saturating_sub(1)].1
    }

    proptest! {
        /// Every boundary's time is the one the map of every segment gives: segments
        /// that start at the same offset, repeat a time, or span several boundaries.
        #[test]
        fn boundaries_are_the_maps_answers(
            from in 0u64..1000,
            len in 1u64..50,
            steps in proptest::collection::vec((0u64..120, 0u64..3), 0..60),
            tail in 0u64..200,
        ) {
            let mut map = vec![(from, st(1))];
            let mut rs = RunStamps::default();
            rs.start(from, st(1), len);
            let (mut off, mut frame) = (from, 1u64);
            for (adv, fstep) in steps {
                off += adv;
                frame += fstep;
                if map.last().is_some_and(|(_, s)| *s == st(frame)) {
                    // The framer notes only a new time (the map skipped repeats too).
                } else {
                    map.push((off, st(frame)));
                }
                rs.note(off, st(frame));
            }
            let to = off + tail;
            let run = to - from;
            let got = rs.finish(to, len);
            if run % len != 0 || run / len > super::super::MAX_INFERRED_RUN {
                prop_assert!(got.is_none());
            } else {
                let b = got.expect("a whole number of messages");
                for i in 1..=run / len {
                    let o = from + (i - 1) * len;
                    prop_assert_eq!(b.of(i), (by_map(&map, o), by_map(&map, o + len - 1)));
                }
            }
        }
    }

    #[test]
    fn a_run_of_other_lengths_or_too_many_segments_is_not_inferred() {
        let mut rs = RunStamps::default();
        rs.start(100, st(1), 10);
        rs.note(105, st(2));
        assert!(rs.finish(130, 15).is_none(), "the length asked for is not the run's");
        let mut rs = RunStamps::default();
        rs.start(100, st(1), 10);
        assert!(rs.finish(125, 10).is_none(), "not a whole number of messages");
        let mut rs = RunStamps::default();
        rs.start(0, st(0), 10);
        for f in 1..MAX_SKIP_SEGMENTS as u64 {
            rs.note(f, st(f));
        }
        assert!(!rs.full(), "as many segments as the map held");
        rs.note(MAX_SKIP_SEGMENTS as u64, st(MAX_SKIP_SEGMENTS as u64));
        assert!(rs.full());
        assert!(rs.finish(10, 10).is_none(), "the map's bound: too many segments");
        let mut rs = RunStamps::default();
        rs.start(0, st(0), 0);
        rs.note(5, st(1));
        assert!(rs.points.is_empty() && rs.finish(10, 10).is_none(), "nothing kept without a length");
    }
}
