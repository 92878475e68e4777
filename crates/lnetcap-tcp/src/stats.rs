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

/// The bucket of `v`: `floor(ln(v) / ln(RATIO))`, exactly as that expression computes it
/// (the reference, [`bucket_exact`]), mostly without its logarithm: a table logarithm
/// (256 entries) and four terms of a series give `ln(v)` to ~1e-12, so the quotient
/// `t` is within [`BUCKET_SLACK`] of the reference's wherever it lies; only when `t` is
/// that close to an integer (about one value in 500,000) is the reference asked. On the
/// header-only bench capture the logarithm was 1.2 % of a one-thread `analyze`'s time.
#[inline]
fn bucket_of(v: f64) -> i32 {
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    // Zero, subnormals, infinities, NaN and negative values: the reference.
    if exp == 0 || exp == 0x7ff || bits >> 63 != 0 {
        return bucket_exact(v);
    }
    let t = log_table();
    let frac = bits & ((1 << 52) - 1);
    let (inv, ln_head) = t.entries[(frac >> 44) as usize];
    // v = 2^e * m, m in [1, 2); m = head * (1 + r), 0 <= r < 1/256 (up to rounding).
    let m = f64::from_bits((1023 << 52) | frac);
    let r = m * inv - 1.0;
    let ln_m = ln_head + r * (1.0 - r * (0.5 - r * (1.0 / 3.0 - r * 0.25)));
    let q = (f64::from(exp - 1023) * std::f64::consts::LN_2 + ln_m) * t.inv_ln_ratio;
    let f = floor_small(q);
    let off = q - f;
    if off > BUCKET_SLACK && off < 1.0 - BUCKET_SLACK {
        f as i32
    } else {
        bucket_exact(v)
    }
}

/// `q.floor()` for `|q| < 2^63` (here `|q|` is at most ~71,000), without the call of
/// libm's `floor` that baseline x86-64 (no SSE4.1 `roundsd`) makes of it: the integer part
/// truncates toward zero, one less below zero when `q` has a fraction (`-0.0` gives `0.0`:
/// the same bucket and fraction).
#[inline(always)]
fn floor_small(q: f64) -> f64 {
    let t = q as i64 as f64;
    if t > q {
        t - 1.0
    } else {
        t
    }
}

/// The reference bucket of `v` (see [`bucket_of`]).
#[inline(never)]
fn bucket_exact(v: f64) -> i32 {
    (v.ln() / RATIO.ln()).floor() as i32
}

/// How close to an integer [`bucket_of`]'s quotient may be before it asks the reference.
/// Both quotients are within ~1e-10 of the true one for any finite value (the series'
/// next term is below 2e-13, each logarithm within an ulp, the quotient at most ~71,000,
/// an ulp of it 1.5e-11), so 1e-6 leaves them no integer to fall on either side of.
const BUCKET_SLACK: f64 = 1e-6;

/// `1/head` and `ln(head)` for `head = 1 + i/256`, and `1/ln(RATIO)`.
struct LogTable {
    entries: [(f64, f64); 256],
    inv_ln_ratio: f64,
}

fn log_table() -> &'static LogTable {
    static TABLE: std::sync::LazyLock<LogTable> = std::sync::LazyLock::new(|| {
        let mut entries = [(0.0, 0.0); 256];
        for (i, e) in entries.iter_mut().enumerate() {
            let head = 1.0 + i as f64 / 256.0;
            *e = (1.0 / head, head.ln());
        }
        LogTable { entries, inv_ln_ratio: 1.0 / RATIO.ln() }
    });
    &TABLE
}

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
            self.buckets.add(bucket_of(v), 1);
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

    /// `floor_small` is `floor` on both sides of zero, at integers and beside them, and at
    /// the quotients' extremes.
    #[test]
    fn floor_small_is_floor() {
        let mut xs = vec![0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 71_000.25, -71_000.25, 1e15 + 0.5, -(1e15 + 0.5)];
        for i in -3000..3000 {
            let x = f64::from(i) * 0.37;
            xs.extend([x, f64::from(i), f64::from(i).next_up(), f64::from(i).next_down()]);
        }
        for x in xs {
            // Equal as numbers: -0.0 gives 0.0, a sign neither `as i32` nor `q - f` sees.
            assert_eq!(floor_small(x), x.floor(), "{x:e}");
        }
    }

    /// The fast bucket is the reference's at and beside every boundary from 1e-13 to
    /// 1e13 (where the quotient is nearest an integer and the reference is asked), and
    /// at the extremes.
    #[test]
    fn buckets_at_their_boundaries_are_the_references() {
        let mut asked = 0;
        for i in -3010..3010 {
            let mut x = RATIO.powi(i);
            for _ in 0..4 {
                x = x.next_down();
            }
            for _ in 0..9 {
                assert_eq!(bucket_of(x), bucket_exact(x), "{x:e} (near bucket {i})");
                x = x.next_up();
            }
            let q = x.ln() / RATIO.ln();
            asked += usize::from((q - q.round()).abs() <= BUCKET_SLACK);
        }
        assert!(asked > 5000, "the values straddle the boundaries ({asked})");
        for x in [f64::MIN_POSITIVE, 5e-324, 1e-310, f64::MAX, f64::INFINITY, 1.0, 2.0, 1e-9, 0.0, -1.0, f64::NAN] {
            assert_eq!(bucket_of(x), bucket_exact(x), "{x:e}");
        }
    }

    proptest::proptest! {
        /// The fast bucket is the reference's for any finite positive value.
        #[test]
        fn test_buckets_are_the_references(bits in 1u64..0x7ff0_0000_0000_0000) {
            let x = f64::from_bits(bits);
            proptest::prop_assert_eq!(bucket_of(x), bucket_exact(x), "{:e}", x);
        }

        /// ... and for values of the sizes latencies and windows have.
        #[test]
        fn test_everyday_buckets_are_the_references(x in 1e-9f64..1e12) {
            proptest::prop_assert_eq!(bucket_of(x), bucket_exact(x), "{:e}", x);
        }

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
