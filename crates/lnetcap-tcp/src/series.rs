//! A time series of one connection direction (loop samples, bytes in flight, payload per
//! interval): interval start (a multiple of the series interval) → bucket, in time order.
//!
//! Samples almost always go to the last bucket or append one, and most connections have
//! a few buckets: the series is a sorted vector, for which a BTreeMap's first node (room
//! for 11) cost ~0.8 KiB a connection more (massif, 10^5 HELLO connections). A sample of
//! an earlier interval that has no bucket yet inserts one, moving the buckets after it;
//! when that would move more than [`MAX_SHIFT`] of them (a clock that keeps stepping
//! backwards, each step within what `Pipeline` lets pass, would make every sample cost
//! the length of the series) the series becomes a BTreeMap for good.

use std::collections::{btree_map, BTreeMap};
use std::ops::Index;

use either::Either;

/// Buckets an out-of-order bucket may move in the vector: past this, the series turns into
/// a BTreeMap (its inserts cost a logarithm of its length, not its length).
pub const MAX_SHIFT: usize = 64;

/// See the module's documentation.
#[derive(Debug, Clone)]
pub enum Series<B> {
    /// Sorted by interval start, no two alike.
    Flat(Vec<(i64, B)>),
    /// After an insert that would have moved more than [`MAX_SHIFT`] buckets.
    Tree(BTreeMap<i64, B>),
}

impl<B> Default for Series<B> {
    fn default() -> Self {
        Series::Flat(Vec::new())
    }
}

/// The vector's iterator, as (&interval start, &bucket).
pub type FlatIter<'a, B> = std::iter::Map<std::slice::Iter<'a, (i64, B)>, fn(&(i64, B)) -> (&i64, &B)>;

fn pair<B>(e: &(i64, B)) -> (&i64, &B) {
    (&e.0, &e.1)
}

impl<B> Series<B> {
    /// An empty series.
    pub fn new() -> Self {
        Self::default()
    }

    /// Buckets.
    pub fn len(&self) -> usize {
        match self {
            Series::Flat(v) => v.len(),
            Series::Tree(m) => m.len(),
        }
    }

    /// No bucket.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (interval start, bucket) in time order.
    pub fn iter(&self) -> Either<FlatIter<'_, B>, btree_map::Iter<'_, i64, B>> {
        match self {
            Series::Flat(v) => Either::Left(v.iter().map(pair as fn(&(i64, B)) -> (&i64, &B))),
            Series::Tree(m) => Either::Right(m.iter()),
        }
    }

    /// Interval starts in time order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &i64> + '_ {
        self.iter().map(|(k, _)| k)
    }

    /// Buckets in time order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &B> + '_ {
        self.iter().map(|(_, b)| b)
    }

    /// The bucket of the interval starting at `start`.
    pub fn get(&self, start: &i64) -> Option<&B> {
        match self {
            Series::Flat(v) => v.binary_search_by_key(start, |e| e.0).ok().map(|i| &v[i].1),
            Series::Tree(m) => m.get(start),
        }
    }

    /// Gives `f` the bucket for capture time `t` (intervals of `series_ns`), made with
    /// `init` if new. Samples come in time order, so it is almost always the last bucket:
    /// that one is recognised without a division (a 64-bit division per sample in three
    /// series cost more than the rest of a sample's bookkeeping).
    #[inline]
    pub fn slot(&mut self, t: i64, series_ns: i64, init: impl FnOnce() -> B, f: impl FnOnce(&mut B)) {
        if let Series::Flat(v) = self {
            if let Some((k, b)) = v.last_mut() {
                if *k <= t && t.saturating_sub(*k) < series_ns {
                    return f(b);
                }
            }
        }
        self.slot_by_key(t.div_euclid(series_ns) * series_ns, init, f);
    }

    /// [`Series::slot`] past the last bucket of the vector: the bucket starting at `k`.
    #[cold]
    #[inline(never)]
    fn slot_by_key(&mut self, k: i64, init: impl FnOnce() -> B, f: impl FnOnce(&mut B)) {
        if let Series::Flat(v) = self {
            match v.binary_search_by_key(&k, |e| e.0) {
                Ok(i) => return f(&mut v[i].1),
                Err(i) if v.len() - i <= MAX_SHIFT => {
                    let mut b = init();
                    f(&mut b);
                    return v.insert(i, (k, b));
                }
                Err(_) => *self = Series::Tree(std::mem::take(v).into_iter().collect()),
            }
        }
        if let Series::Tree(m) = self {
            f(m.entry(k).or_insert_with(init));
        }
    }

    /// Re-keys the series at `series_ns`, merging in time order the buckets that fall in
    /// one new interval.
    pub fn regroup(&mut self, series_ns: i64, merge: impl Fn(B, B) -> B)
    where
        B: Copy,
    {
        let key = |k: i64| k.div_euclid(series_ns) * series_ns;
        *self = match std::mem::take(self) {
            Series::Flat(v) => Series::Flat(regroup_pairs(v, key, merge)),
            Series::Tree(mut m) => {
                regroup_by(&mut m, key, merge);
                Series::Tree(m)
            }
        };
    }
}

impl<'a, B> IntoIterator for &'a Series<B> {
    type Item = (&'a i64, &'a B);
    type IntoIter = Either<FlatIter<'a, B>, btree_map::Iter<'a, i64, B>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<B> Index<&i64> for Series<B> {
    type Output = B;

    /// The bucket of the interval starting at `start`; panics if there is none (tests).
    fn index(&self, start: &i64) -> &B {
        self.get(start).expect("no bucket at that interval start")
    }
}

/// Re-keys a time-ordered map with `key` (monotonic), merging in order the entries that
/// get one key: the coarsening of every series (`MAX_SERIES_INTERVALS`), here and in
/// lnetcap-rpc.
pub fn regroup_by<B: Copy>(map: &mut BTreeMap<i64, B>, key: impl Fn(i64) -> i64, merge: impl Fn(B, B) -> B) {
    *map = regroup_pairs(std::mem::take(map), key, merge).into_iter().collect();
}

/// Time-ordered (key, value) pairs re-keyed with `key` (monotonic), the values of one new
/// key merged in order; the result is in key order.
fn regroup_pairs<B: Copy>(
    pairs: impl IntoIterator<Item = (i64, B)>,
    key: impl Fn(i64) -> i64,
    merge: impl Fn(B, B) -> B,
) -> Vec<(i64, B)> {
    let mut out: Vec<(i64, B)> = Vec::new();
    for (k, b) in pairs {
        let k = key(k);
        match out.last_mut() {
            Some((last, acc)) if *last == k => *acc = merge(*acc, b),
            _ => out.push((k, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A series holds what a map from each sample's interval start to its samples
        /// holds, for samples mostly in time order with some from earlier intervals,
        /// negative times included, and runs of samples going backwards long enough to
        /// turn it into a BTreeMap; `regroup` to a coarser interval gives each coarse
        /// interval the samples of the fine ones it covers, in order.
        #[test]
        fn test_series_is_the_map_of_its_intervals(
            steps in proptest::collection::vec(proptest::prop_oneof![4 => -40i64..60, 1 => -20i64..-7], 1..400),
            start in -500i64..500,
            factor in 1i64..6,
        ) {
            let ns = 7;
            let mut series: Series<(i64, u32)> = Series::new();
            let mut model: BTreeMap<i64, (i64, u32)> = BTreeMap::new();
            let mut t = start;
            for (i, d) in steps.iter().enumerate() {
                t += d;
                let f = |b: &mut (i64, u32)| *b = (b.0 + t, b.1 + i as u32);
                series.slot(t, ns, || (0, 0), f);
                f(model.entry(t.div_euclid(ns) * ns).or_default());
            }
            let got: Vec<_> = series.iter().map(|(k, v)| (*k, *v)).collect();
            proptest::prop_assert_eq!(&got, &model.clone().into_iter().collect::<Vec<_>>());
            for (k, v) in &model {
                proptest::prop_assert_eq!(series.get(k), Some(v));
            }
            let merge = |a: (i64, u32), b: (i64, u32)| (a.0 * 3 + b.0, a.1 + b.1);
            series.regroup(ns * factor, merge);
            let mut coarse: BTreeMap<i64, (i64, u32)> = BTreeMap::new();
            for (k, v) in model {
                let c = k.div_euclid(ns * factor) * ns * factor;
                coarse.entry(c).and_modify(|a| *a = merge(*a, v)).or_insert(v);
            }
            let got: Vec<_> = series.iter().map(|(k, v)| (*k, *v)).collect();
            proptest::prop_assert_eq!(got, coarse.into_iter().collect::<Vec<_>>());
        }
    }

    /// A clock that steps back an interval a sample: the vector takes the first
    /// `MAX_SHIFT` + 1 buckets, then the series is a map; in time order it stays a vector.
    #[test]
    fn test_a_clock_going_backwards_turns_the_series_into_a_map() {
        let mut s: Series<u32> = Series::new();
        for i in 0..=MAX_SHIFT as i64 {
            s.slot(-10 * i, 10, || 0, |b| *b += 1);
        }
        assert!(matches!(s, Series::Flat(_)), "{} buckets moved at most {MAX_SHIFT}", s.len());
        s.slot(-10 * (MAX_SHIFT as i64 + 1), 10, || 0, |b| *b += 1);
        assert!(matches!(s, Series::Tree(_)));
        assert_eq!(s.len(), MAX_SHIFT + 2);
        assert_eq!(s.values().sum::<u32>(), MAX_SHIFT as u32 + 2);
        let mut forward: Series<u32> = Series::new();
        for i in 0..10_000 {
            forward.slot(i * 3, 10, || 0, |b| *b += 1);
        }
        assert!(matches!(forward, Series::Flat(_)));
        assert_eq!(forward.len(), 3_000);
        assert_eq!(forward[&0], 4);
        assert_eq!(forward[&29_990], 3);
    }
}
