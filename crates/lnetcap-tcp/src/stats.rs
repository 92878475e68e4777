//! Bounded-memory statistics shared by the layers above: a quantile sketch.

use std::collections::BTreeMap;

use either::Either;

/// Quantiles over positive values with ~0.5 % relative error, in memory bounded by the
/// value range (not the count): values are kept in geometric buckets.
#[derive(Debug, Clone, Default)]
pub struct Quantiles {
    buckets: Buckets,
    zeros: u64,
    count: u64,
    max: f64,
    min: f64,
    sum: f64,
}

/// A run of buckets is counted in a vector while it is at most this long, or at most
/// [`DENSE_PER_BUCKET`] times the buckets with a count: 256 bytes, or 16 bytes a bucket
/// counted (a map's node holds 11 at about 20 bytes each). Past it, or past a count of
/// 2^32 − 1 in one bucket, the buckets go to a map.
const DENSE_MIN_SPAN: usize = 64;
/// See [`DENSE_MIN_SPAN`].
const DENSE_PER_BUCKET: usize = 4;

/// A sketch's bucket counts: a vector over the run of buckets from the lowest to the
/// highest seen while the run is short or mostly counted (an add is an index, where a
/// map's was a search of its nodes: 130 instructions a value, half of it the search),
/// else a map.
#[derive(Debug, Clone)]
enum Buckets {
    /// `counts[i]` is bucket `base + i`; `used` buckets have a count.
    Dense {
        base: i32,
        counts: Vec<u32>,
        used: usize,
    },
    Map(BTreeMap<i32, u64>),
}

impl Default for Buckets {
    fn default() -> Self {
        Buckets::Dense { base: 0, counts: Vec::new(), used: 0 }
    }
}

impl Buckets {
    /// Adds `n` to bucket `b`.
    #[inline]
    fn add(&mut self, b: i32, n: u64) {
        match self {
            Buckets::Dense { base, counts, .. } => {
                let i = usize::try_from(i64::from(b) - i64::from(*base)).ok();
                if let Some(c) = i.and_then(|i| counts.get_mut(i)).filter(|c| **c > 0) {
                    if let Some(x) = u32::try_from(n).ok().and_then(|n| c.checked_add(n)) {
                        *c = x;
                        return;
                    }
                }
            }
            Buckets::Map(m) => {
                *m.entry(b).or_default() += n;
                return;
            }
        }
        self.add_slow(b, n);
    }

    /// [`Buckets::add`] of a vector's bucket without a count yet, or of a count past its
    /// width.
    #[cold]
    #[inline(never)]
    fn add_slow(&mut self, b: i32, n: u64) {
        if let Buckets::Dense { base, counts, used } = self {
            let (lo, hi) =
                if counts.is_empty() { (b, b) } else { (b.min(*base), b.max(*base + counts.len() as i32 - 1)) };
            let span = (i64::from(hi) - i64::from(lo) + 1) as usize;
            let old = usize::try_from(i64::from(b) - i64::from(*base)).ok().and_then(|i| counts.get(i)).copied();
            let fits = u32::try_from(n).is_ok_and(|n| old.is_none_or(|c| c.checked_add(n).is_some()));
            let used_after = *used + usize::from(old.is_none_or(|c| c == 0));
            if fits && span <= DENSE_MIN_SPAN.max(DENSE_PER_BUCKET * used_after) {
                if counts.is_empty() {
                    *base = b;
                }
                if lo < *base {
                    counts.splice(0..0, std::iter::repeat_n(0, (*base - lo) as usize));
                    *base = lo;
                }
                counts.resize(span, 0);
                counts[(b - *base) as usize] += n as u32;
                *used = used_after;
                return;
            }
            let map = self.iter().collect();
            *self = Buckets::Map(map);
        }
        if let Buckets::Map(m) = self {
            *m.entry(b).or_default() += n;
        }
    }

    /// (bucket, count) of the buckets with a count, ascending.
    fn iter(&self) -> impl Iterator<Item = (i32, u64)> + '_ {
        match self {
            Buckets::Dense { base, counts, .. } => Either::Left(
                counts.iter().enumerate().filter(|(_, &c)| c > 0).map(move |(i, &c)| (*base + i as i32, u64::from(c))),
            ),
            Buckets::Map(m) => Either::Right(m.iter().map(|(&b, &n)| (b, n))),
        }
    }
}

const RATIO: f64 = 1.01;

impl Quantiles {
    /// Adds a value (negative values count as 0).
    pub fn add(&mut self, v: f64) {
        let v = v.max(0.0);
        if self.count == 0 || v > self.max {
            self.max = v;
        }
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        self.count += 1;
        self.sum += v;
        if v < 1e-9 {
            self.zeros += 1;
        } else {
            self.buckets.add((v.ln() / RATIO.ln()).floor() as i32, 1);
        }
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// Largest value (exact).
    pub fn max(&self) -> Option<f64> {
        (self.count > 0).then_some(self.max)
    }

    /// Smallest value (exact).
    pub fn min(&self) -> Option<f64> {
        (self.count > 0).then_some(self.min)
    }

    /// Adds every value of another sketch.
    pub fn merge(&mut self, o: &Quantiles) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 || o.max > self.max {
            self.max = o.max;
        }
        if self.count == 0 || o.min < self.min {
            self.min = o.min;
        }
        self.count += o.count;
        self.sum += o.sum;
        self.zeros += o.zeros;
        for (b, n) in o.buckets.iter() {
            self.buckets.add(b, n);
        }
    }

    /// The q-quantile (nearest rank), within the bucket precision; exact at 0 and 1.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        if rank >= self.count {
            return Some(self.max);
        }
        let mut seen = self.zeros;
        if seen >= rank {
            return Some(0.0);
        }
        for (b, n) in self.buckets.iter() {
            seen += n;
            if seen >= rank {
                // Geometric middle of the bucket, clamped to the exact extremes.
                let v = RATIO.powf(f64::from(b) + 0.5);
                return Some(v.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The buckets, a vector or a map, hold what a map of every bucket holds, in
        /// order: values clustered (the vector), spread over a range that turns it into
        /// a map, and counts added in bulk past a vector's width (`merge`).
        #[test]
        fn test_buckets_are_a_map(
            spread in 0i32..40,
            adds in proptest::collection::vec((-3000i32..3000, proptest::bool::weighted(0.03), 0u64..20), 0..300)
        ) {
            let (mut b, mut m) = (Buckets::default(), BTreeMap::new());
            for (k, outlier, bulk) in adds {
                let k = if outlier { k } else { 1000 + k % (1 + spread * 4) };
                let n = if bulk == 0 { u64::from(u32::MAX) - 1 } else { bulk };
                b.add(k, n);
                *m.entry(k).or_insert(0u64) += n;
                proptest::prop_assert_eq!(b.iter().collect::<Vec<_>>(), m.iter().map(|(&k, &n)| (k, n)).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn test_quantiles_within_half_a_percent_and_merge() {
        let mut a = Quantiles::default();
        let mut b = Quantiles::default();
        for i in 1..=1000u32 {
            let v = f64::from(i) * 1000.0;
            if i % 2 == 0 {
                a.add(v)
            } else {
                b.add(v)
            }
        }
        a.merge(&b);
        assert_eq!(a.count(), 1000);
        assert_eq!(a.min(), Some(1000.0));
        assert_eq!(a.max(), Some(1_000_000.0));
        let p50 = a.quantile(0.5).unwrap();
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.006, "{p50}");
        let p95 = a.quantile(0.95).unwrap();
        assert!((p95 - 950_000.0).abs() / 950_000.0 < 0.006, "{p95}");
        assert!((a.mean().unwrap() - 500_500.0).abs() < 1e-6);
        assert_eq!(Quantiles::default().quantile(0.5), None);
    }
}
