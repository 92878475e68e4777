//! The XIDs of one peer pair's open PtlRPC RPCs, ordered, for bulk and reply match bits.
//!
//! A client hands out XIDs in increasing order, and the RPCs finish, and leave the index,
//! about in that order too; so a pair's XIDs are kept in a sorted queue: the usual insert
//! is a push at the back, the usual removal near the front. The one B-tree over every
//! pair's (pair, XID) this replaces cost ~620 instructions an insert on the metadata
//! bench capture (20,000 RPCs, every finished one indexed for `EMIT_DELAY_NS`): a walk
//! down three levels that compared with every key of each node on its way to the right
//! end. RPCs do finish out of XID order: a client's OSCs to one server's targets share
//! the pair, each with its own RPCs in flight, so a removal may land hundreds of places
//! from the front. An insert or removal that would shift more than [`MAX_SHIFT`] entries
//! moves the pair to a B-tree of its own (until the pair has no XIDs left), so that,
//! amortised, no operation costs more than that shift or a tree's: the move itself is one
//! pass over the queue, paid for by the pushes that filled it, as is the queue's growth.

use std::collections::{BTreeMap, VecDeque};

/// The most entries an insert or removal in the middle of a pair's queue shifts (the
/// shorter side of the queue moves); past that the pair's XIDs move to a B-tree until the
/// pair has none left. 256 entries are 4 KiB moved (by estimate, not measured: about as
/// many instructions as the B-tree's ~620 an insert), and more places than the RPCs a
/// client keeps in flight to one server (`max_rpcs_in_flight`, 8 by default, on each of
/// its OSCs to that server's targets).
pub(super) const MAX_SHIFT: usize = 256;

/// One pair's XIDs → their RPC's slot.
#[derive(Clone, Debug)]
pub(super) enum PairXids {
    /// Sorted by XID, no XID twice.
    Queue(VecDeque<(u64, usize)>),
    /// The same, once an operation would have shifted the queue too far.
    Tree(BTreeMap<u64, usize>),
}

impl Default for PairXids {
    fn default() -> Self {
        Self::Queue(VecDeque::new())
    }
}

impl PairXids {
    /// Indexes `xid` → `slot`; returns the slot it had, which it replaces.
    pub(super) fn insert(&mut self, xid: u64, slot: usize) -> Option<usize> {
        let q = match self {
            Self::Tree(t) => return t.insert(xid, slot),
            Self::Queue(q) => q,
        };
        if q.back().is_none_or(|&(last, _)| last < xid) {
            q.push_back((xid, slot));
            return None;
        }
        let p = q.partition_point(|&(x, _)| x < xid);
        if let Some(e) = q.get_mut(p).filter(|e| e.0 == xid) {
            return Some(std::mem::replace(&mut e.1, slot));
        }
        if p.min(q.len() - p) > MAX_SHIFT {
            return self.make_tree().insert(xid, slot);
        }
        q.insert(p, (xid, slot));
        None
    }

    /// Forgets `xid`; returns its slot, if it was indexed.
    pub(super) fn remove(&mut self, xid: u64) -> Option<usize> {
        let q = match self {
            Self::Tree(t) => return t.remove(&xid),
            Self::Queue(q) => q,
        };
        let p = q.partition_point(|&(x, _)| x < xid);
        if q.get(p).is_none_or(|e| e.0 != xid) {
            return None;
        }
        if p.min(q.len() - 1 - p) > MAX_SHIFT {
            return self.make_tree().remove(&xid);
        }
        q.remove(p).map(|e| e.1)
    }

    /// The pair's XIDs as a B-tree, moved there from the queue if they were in it.
    fn make_tree(&mut self) -> &mut BTreeMap<u64, usize> {
        if let Self::Queue(q) = self {
            *self = Self::Tree(q.drain(..).collect());
        }
        match self {
            Self::Tree(t) => t,
            Self::Queue(_) => unreachable!("moved to a tree just above"),
        }
    }

    /// The entry with the largest XID at or below `mb`.
    pub(super) fn at_or_below(&self, mb: u64) -> Option<(u64, usize)> {
        match self {
            Self::Queue(q) => q.partition_point(|&(x, _)| x <= mb).checked_sub(1).map(|p| q[p]),
            Self::Tree(t) => t.range(..=mb).next_back().map(|(&x, &s)| (x, s)),
        }
    }

    /// Whether no XID is indexed.
    pub(super) fn is_empty(&self) -> bool {
        match self {
            Self::Queue(q) => q.is_empty(),
            Self::Tree(t) => t.is_empty(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An operation on the index: XIDs from a small range, so that inserts replace and
    /// removals find, in order or not.
    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, usize),
        Remove(u64),
        Below(u64),
    }

    /// Up to 2,500 operations on XIDs below `xids`, inserts the most common: about a
    /// thousand XIDs live at once at their most, so that queues pass [`MAX_SHIFT`] both
    /// ways from an end and move to a tree.
    fn ops(xids: u64) -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            5 => (0..xids, any::<usize>()).prop_map(|(x, s)| Op::Insert(x, s)),
            1 => (0..xids).prop_map(Op::Remove),
            2 => (0..xids + 2).prop_map(Op::Below),
        ];
        proptest::collection::vec(op, 0..2500)
    }

    /// Replays `ops` on the index and on a B-tree (the model): every answer agrees.
    fn same_as_a_btree(ops: &[Op]) -> Result<(), TestCaseError> {
        let (mut ix, mut model) = (PairXids::default(), BTreeMap::new());
        for op in ops {
            match *op {
                Op::Insert(x, s) => prop_assert_eq!(ix.insert(x, s), model.insert(x, s)),
                Op::Remove(x) => prop_assert_eq!(ix.remove(x), model.remove(&x)),
                Op::Below(x) => {
                    prop_assert_eq!(ix.at_or_below(x), model.range(..=x).next_back().map(|(&x, &s)| (x, s)))
                }
            }
            prop_assert_eq!(ix.is_empty(), model.is_empty());
        }
        Ok(())
    }

    /// Operations as a client's RPCs make them: XIDs rising with small steps back (sent
    /// a little out of order), removals of XIDs inserted before (mostly the oldest still
    /// indexed), searches near the newest.
    fn rising() -> impl Strategy<Value = Vec<Op>> {
        let step = (-4i64..40, 0u8..10, any::<proptest::sample::Index>(), 0u64..50);
        proptest::collection::vec(step, 0..800).prop_map(|steps| {
            let (mut cur, mut seen, mut out) = (1_000i64, Vec::new(), Vec::new());
            for (k, (d, kind, pick, back)) in steps.into_iter().enumerate() {
                cur = (cur + d).max(0);
                let x = cur as u64;
                match kind {
                    0..=4 => {
                        seen.push(x);
                        out.push(Op::Insert(x, k));
                    }
                    5..=7 if !seen.is_empty() => {
                        // The oldest half, mostly: RPCs finish about in order.
                        let i = if kind < 7 { pick.index(seen.len().div_ceil(2)) } else { pick.index(seen.len()) };
                        out.push(Op::Remove(seen.remove(i)));
                    }
                    _ => out.push(Op::Below(x.saturating_sub(back))),
                }
            }
            out
        })
    }

    proptest! {
        /// Any order of inserts, replacements, removals and searches answers as a B-tree
        /// does, on either side of the move to a tree (1,500-XID ranges pass [`MAX_SHIFT`]).
        #[test]
        fn answers_as_a_btree(ops in ops(1500)) {
            same_as_a_btree(&ops)?;
        }

        /// The same in the order a client makes them.
        #[test]
        fn answers_as_a_btree_rising(ops in rising()) {
            same_as_a_btree(&ops)?;
        }
    }

    /// XIDs in order stay in the queue; an insert in the middle of a long queue moves the
    /// pair to a tree, and a removal there does too.
    #[test]
    fn moves_to_a_tree_only_past_the_shift_bound() {
        let mut ix = PairXids::default();
        for x in 0..2000 {
            ix.insert(2 * x, x as usize);
        }
        ix.insert(1, 7);
        ix.insert(3997, 8);
        ix.remove(0);
        ix.remove(3998);
        assert!(matches!(ix, PairXids::Queue(_)), "near either end: a short shift");
        ix.insert(2001, 9);
        assert!(matches!(ix, PairXids::Tree(_)), "the middle of 2,000: a tree");
        assert_eq!(ix.at_or_below(2001), Some((2001, 9)));
        assert_eq!(ix.at_or_below(2003), Some((2002, 1001)));
    }

    /// The bound exactly: a shift of `MAX_SHIFT` entries stays in the queue, one more moves
    /// the pair, for inserts and removals, from either end.
    #[test]
    fn shift_bound_is_exact() {
        const N: usize = 4 * MAX_SHIFT;
        // Even XIDs 0, 2, ..., an entry at each place.
        let queue = || {
            let mut ix = PairXids::default();
            (0..N).for_each(|p| _ = ix.insert(2 * p as u64, p));
            ix
        };
        let is_queue = |ix: &PairXids| matches!(ix, PairXids::Queue(_));
        for (p, stays) in [(MAX_SHIFT, true), (MAX_SHIFT + 1, false)] {
            // An odd XID just before place p: p entries before it, N - p after.
            let mut ix = queue();
            ix.insert(2 * p as u64 - 1, 0);
            assert_eq!(is_queue(&ix), stays, "insert at {p} from the front");
            let mut ix = queue();
            ix.insert(2 * (N - p) as u64 - 1, 0);
            assert_eq!(is_queue(&ix), stays, "insert at {p} from the back");
            // Removing place p moves the p before it; place N - 1 - p, the p after it.
            let mut ix = queue();
            assert_eq!(ix.remove(2 * p as u64), Some(p));
            assert_eq!(is_queue(&ix), stays, "removal at {p} from the front");
            let mut ix = queue();
            assert_eq!(ix.remove(2 * (N - 1 - p) as u64), Some(N - 1 - p));
            assert_eq!(is_queue(&ix), stays, "removal at {p} from the back");
        }
    }
}
