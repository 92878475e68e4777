//! Bounded-memory statistics shared by the layers above: a quantile sketch.

use std::collections::BTreeMap;

/// Quantiles over positive values with ~0.5 % relative error, in memory bounded by the
/// value range (not the count): values are kept in geometric buckets.
#[derive(Debug, Clone, Default)]
pub struct Quantiles {
    buckets: BTreeMap<i32, u64>,
    zeros: u64,
    count: u64,
    max: f64,
    min: f64,
    sum: f64,
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
            *self.buckets.entry((v.ln() / RATIO.ln()).floor() as i32).or_default() += 1;
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
        for (&b, &n) in &o.buckets {
            *self.buckets.entry(b).or_default() += n;
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
        for (&b, &n) in &self.buckets {
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
