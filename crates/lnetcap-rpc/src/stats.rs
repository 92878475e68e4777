//! Bounded-memory statistics: log-bucketed quantiles, Lustre rpc_stats histograms, and
//! time-weighted step functions (things in flight) fed by out-of-order events.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use lnetcap_tcp::headvec::HeadVec;
use serde::Serialize;

use crate::limits::MAX_PENDING_STEPS;

pub use lnetcap_tcp::stats::Quantiles;

/// Lustre's linear histogram (`lprocfs_oh_tally`): bucket = value, capped at 31.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LinearHist(pub BTreeMap<u32, u64>);

impl LinearHist {
    /// Tallies a value.
    pub fn tally(&mut self, v: u64) {
        *self.0.entry(v.min(31) as u32).or_default() += 1;
    }
}

/// Lustre's log2 histogram (`lprocfs_oh_tally_log2`): the row is the smallest power of two
/// ≥ the value (1, 2, 4, ...; 0 for 0), as `rpc_stats` prints its "pages per rpc" and
/// latency rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Log2Hist(pub BTreeMap<u64, u64>);

impl Log2Hist {
    /// Row label for a value.
    pub fn row(v: u64) -> u64 {
        if v <= 1 {
            v
        } else {
            1u64 << (64 - (v - 1).leading_zeros()).min(62)
        }
    }

    /// Tallies a value.
    pub fn tally(&mut self, v: u64) {
        *self.0.entry(Self::row(v)).or_default() += 1;
    }
}

/// Shortest time a level must be held to be an interval's maximum.
const MIN_LEVEL_SPAN_NS: i64 = 10_000;

/// Per-interval summary of a step function.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct IntervalLevel {
    /// Time-weighted mean over the covered part of the interval.
    pub mean: f64,
    /// Largest level reached.
    pub max: i64,
}

/// Steps (time, delta) waiting to be applied, given back in (time, delta) order. Most come
/// in time order or a few places from it (messages in flight overlap by a round trip):
/// those join a sorted run, at its back or a few places before. An RPC's end is scheduled
/// when the RPC is reported, seconds after its start and far behind the run's back; RPCs
/// are reported about in the order they end, so those ends join a second sorted run the
/// same way. Only steps out of order in both wait in a heap. A heap alone cost a logarithm
/// of all the steps of the reorder horizon per step; with a heap for the ends and a
/// `VecDeque` for the run, a metadata capture's steps cost 250 instructions each (on a
/// capture shorter than the reorder horizon every step waits until the end).
#[derive(Debug, Clone, Default)]
struct StepQueue {
    run: Run,
    behind: Run,
    late: BinaryHeap<Reverse<(i64, i64)>>,
}

/// Steps in (time, delta) order: a [`HeadVec`], whose insertion a few places from the back
/// is one short move, where a `VecDeque`'s handled its wrapping. Steps given back are kept
/// at its front until they are at least [`RUN_KEEP_GIVEN`] and half of it (a few in tests,
/// whose queues are short).
type Run = HeadVec<(i64, i64), RUN_KEEP_GIVEN>;

/// See [`Run`].
const RUN_KEEP_GIVEN: usize = if cfg!(test) { 8 } else { 1024 };

/// Places before a run's back a step may be inserted at (a shift of at most this many).
const NEAR: usize = 16;

/// Inserts `s` into `run` if its place is at the back or at most [`NEAR`] places before.
#[inline]
fn join(run: &mut Run, s: (i64, i64)) -> bool {
    let v = run.live();
    let n = v.len();
    if n == 0 || v[n - 1] <= s {
        run.push_back(s);
        return true;
    }
    let stop = n.saturating_sub(NEAR);
    let mut i = n - 1;
    while i > stop && v[i - 1] > s {
        i -= 1;
    }
    let fits = i == 0 || v[i - 1] <= s;
    if fits {
        run.insert(i, s);
    }
    fits
}

impl StepQueue {
    /// Steps held.
    fn len(&self) -> usize {
        self.run.live().len() + self.behind.live().len() + self.late.len()
    }

    fn push(&mut self, s: (i64, i64)) {
        if !join(&mut self.run, s) && !join(&mut self.behind, s) {
            self.late.push(Reverse(s));
        }
    }

    /// The first step, and where it is (0: the run, 1: the second run, 2: the heap).
    #[inline]
    fn first(&self) -> Option<((i64, i64), u8)> {
        let mut best = self.run.front().map(|&x| (x, 0));
        if let Some(&x) = self.behind.front() {
            if best.is_none_or(|(b, _)| x < b) {
                best = Some((x, 1));
            }
        }
        if let Some(&Reverse(x)) = self.late.peek() {
            if best.is_none_or(|(b, _)| x < b) {
                best = Some((x, 2));
            }
        }
        best
    }

    fn peek(&self) -> Option<(i64, i64)> {
        self.first().map(|(x, _)| x)
    }

    /// Removes and gives back the first step if it is at or before `watermark`.
    fn pop_upto(&mut self, watermark: i64) -> Option<(i64, i64)> {
        let (s, at) = self.first().filter(|(s, _)| s.0 <= watermark)?;
        match at {
            0 => self.run.pop_front(),
            1 => self.behind.pop_front(),
            _ => {
                self.late.pop();
            }
        }
        Some(s)
    }
}

/// What one `StepSeries::advance` accumulates before it writes to the maps: the time at
/// each level below [`Pending::LEVELS`] and the summary of the interval being filled.
struct Pending {
    time_at: [i64; Pending::LEVELS],
    /// Bit l: level l has time in `time_at`.
    levels: u64,
    interval: Option<(i64, (f64, i64, i64))>,
}

impl Pending {
    const LEVELS: usize = 64;
}

impl Default for Pending {
    fn default() -> Self {
        Self { time_at: [0; Pending::LEVELS], levels: 0, interval: None }
    }
}

/// A count that steps up and down over time (RPCs in flight, messages in flight), fed with
/// +1/−1 events that may arrive out of time order within a reorder horizon.
#[derive(Debug, Clone)]
pub struct StepSeries {
    steps: StepQueue,
    level: i64,
    last_t: Option<i64>,
    /// Total time (ns) spent at each level.
    pub time_at: BTreeMap<i64, i64>,
    /// Highest level.
    pub max: i64,
    /// At every +1 step, the level after it (Lustre's "rpcs in flight" histogram).
    pub at_increase: LinearHist,
    interval_ns: i64,
    intervals: BTreeMap<i64, (f64, i64, i64)>,
    tolerance_ns: i64,
    /// Steps it holds at most ([`StepSeries::with_cap`]).
    cap: usize,
    /// Steps applied before their watermark, more than `cap` being held.
    pub applied_early: u64,
}

/// Steps a series holds unless told ([`MAX_PENDING_STEPS`]; a few in tests).
const PENDING_CAP: usize = if cfg!(test) { 64 } else { MAX_PENDING_STEPS };

impl StepSeries {
    /// A series summarised per `interval_ns`.
    pub fn new(interval_ns: i64) -> Self {
        Self {
            tolerance_ns: 0,
            steps: StepQueue::default(),
            level: 0,
            last_t: None,
            time_at: BTreeMap::new(),
            max: 0,
            at_increase: LinearHist::default(),
            interval_ns: interval_ns.max(1),
            intervals: BTreeMap::new(),
            cap: PENDING_CAP,
            applied_early: 0,
        }
    }

    /// Holds at most `cap` steps (at least one): past that the earliest are applied
    /// before their watermark (`applied_early`).
    pub fn with_cap(mut self, cap: usize) -> Self {
        self.cap = cap.max(1);
        self
    }

    /// Times reconstructed from another vantage point carry an error of a few hundred µs; a
    /// slot freed and taken again within `tolerance_ns` must not count twice. Increases are
    /// applied `tolerance_ns` late (a bias of that much per interval, ≤ 1 % of the
    /// millisecond-scale intervals this is used for).
    pub fn with_tolerance(mut self, tolerance_ns: i64) -> Self {
        self.tolerance_ns = tolerance_ns.max(0);
        self
    }

    /// Widens the tolerance (never narrows it), for a series whose delay estimate became
    /// known after it was created.
    pub fn widen_tolerance(&mut self, tolerance_ns: i64) {
        self.tolerance_ns = self.tolerance_ns.max(tolerance_ns);
    }

    /// Keeps the series at `interval_ns` (a multiple of the current interval) from now
    /// on: the per-interval summaries kept so far are merged into the coarser ones.
    pub fn coarsen(&mut self, interval_ns: i64) {
        let old = self.interval_ns;
        self.interval_ns = interval_ns.max(1);
        regroup_index(&mut self.intervals, old, self.interval_ns, |a, b| (a.0 + b.0, a.1.max(b.1), a.2 + b.2));
    }

    /// Schedules a whole interval [start, end): the tolerance never makes it negative.
    pub fn push_interval(&mut self, start: i64, end: i64) {
        // At least 1 ns, so that the interval's own increase comes before its decrease.
        let end = end.max(start + 1);
        let lag = self.tolerance_ns.min((end - start) / 2);
        self.steps.push((start + lag, 1));
        self.steps.push((end, -1));
    }

    /// Schedules an increase at `t`, late by the tolerance but by at most `max_lag`, and
    /// returns the time it takes effect (a matching decrease must not come before it).
    pub fn push_up(&mut self, t: i64, max_lag: i64) -> i64 {
        let t = t + self.tolerance_ns.min(max_lag.max(0));
        self.steps.push((t, 1));
        t
    }

    /// Schedules a step of `delta` at time `t` (increases `tolerance_ns` late).
    pub fn push(&mut self, t: i64, delta: i64) {
        let t = if delta > 0 { t + self.tolerance_ns } else { t };
        // Ordered by (time, delta): at equal times decreases come first.
        self.steps.push((t, delta));
    }

    fn account(&mut self, acc: &mut Pending, from: i64, to: i64) {
        if to <= from {
            return;
        }
        match usize::try_from(self.level) {
            Ok(l) if l < Pending::LEVELS => {
                acc.time_at[l] += to - from;
                acc.levels |= 1 << l;
            }
            _ => *self.time_at.entry(self.level).or_default() += to - from,
        }
        let mut a = from;
        while a < to {
            let idx = a.div_euclid(self.interval_ns);
            let end = ((idx + 1) * self.interval_ns).min(to);
            let e = match &mut acc.interval {
                Some((i, e)) if *i == idx => e,
                open => {
                    // Times only grow: the interval before is done for this call.
                    if let Some((i, e)) = open.take() {
                        self.intervals.insert(i, e);
                    }
                    let e = self.intervals.get(&idx).copied().unwrap_or((0.0, 0, 0));
                    &mut open.insert((idx, e)).1
                }
            };
            e.0 += self.level as f64 * (end - a) as f64;
            // A level reached for an instant (messages sharing one timestamp) is not a
            // maximum of the interval.
            if end - a >= MIN_LEVEL_SPAN_NS {
                e.1 = e.1.max(self.level);
            }
            e.2 += end - a;
            a = end;
        }
    }

    /// Applies every step at or before `watermark` (steps are sorted by time; at equal times
    /// decreases go first, so a slot freed and reused at one instant does not count twice),
    /// and the earliest beyond its cap held (`applied_early`). The time at each
    /// level and the interval summaries accumulate in `Pending` and are written to the maps
    /// once per call (the same sums, added in the same order).
    pub fn advance(&mut self, watermark: i64) {
        let mut over = self.steps.len().saturating_sub(self.cap);
        if over == 0 && self.steps.peek().is_none_or(|(t, _)| t > watermark) {
            return;
        }
        let mut acc = Pending::default();
        loop {
            let next = if over > 0 {
                over -= 1;
                self.steps.pop_upto(i64::MAX)
            } else {
                self.steps.pop_upto(watermark)
            };
            let Some((t, delta)) = next else { break };
            self.applied_early += u64::from(t > watermark);
            if let Some(l) = self.last_t {
                self.account(&mut acc, l, t);
            }
            self.last_t = Some(self.last_t.map_or(t, |l| l.max(t)));
            self.level += delta;
            if delta > 0 {
                self.at_increase.tally(self.level.max(0) as u64);
            }
            self.max = self.max.max(self.level);
        }
        let mut levels = acc.levels;
        while levels != 0 {
            let l = levels.trailing_zeros() as usize;
            *self.time_at.entry(l as i64).or_default() += acc.time_at[l];
            levels &= levels - 1;
        }
        if let Some((i, e)) = acc.interval {
            self.intervals.insert(i, e);
        }
    }

    /// Applies every pending step.
    pub fn finish(&mut self) {
        self.advance(i64::MAX);
    }

    /// Time-weighted mean level over the time from the first step to the last.
    pub fn mean(&self) -> f64 {
        let total: i64 = self.time_at.values().sum();
        if total == 0 {
            return 0.0;
        }
        self.time_at.iter().map(|(l, t)| *l as f64 * *t as f64).sum::<f64>() / total as f64
    }

    /// Time-weighted mean over [a, b).
    pub fn mean_between(&self, a: i64, b: i64) -> f64 {
        let (mut s, mut t) = (0.0, 0i64);
        for (&idx, &(sum, _, cov)) in
            self.intervals.range(a.div_euclid(self.interval_ns)..=b.div_euclid(self.interval_ns))
        {
            let _ = idx;
            s += sum;
            t += cov;
        }
        if t == 0 {
            0.0
        } else {
            s / t as f64
        }
    }

    /// Per-interval levels: (interval start ns, level).
    pub fn intervals(&self) -> impl Iterator<Item = (i64, IntervalLevel)> + '_ {
        self.intervals.iter().map(|(&i, &(sum, max, cov))| {
            (i * self.interval_ns, IntervalLevel { mean: if cov > 0 { sum / cov as f64 } else { 0.0 }, max })
        })
    }

    /// The highest level held for at least `min_ns` in all (levels reached only for an
    /// instant — several messages stamped with one segment's time — do not count).
    pub fn sustained_max(&self, min_ns: i64) -> i64 {
        let mut acc = 0;
        for (&l, &t) in self.time_at.iter().rev() {
            acc += t;
            if acc >= min_ns {
                return l.max(0);
            }
        }
        0
    }

    /// Current level.
    pub fn level(&self) -> i64 {
        self.level
    }
}

/// Re-keys a map by interval index (`t.div_euclid(from_ns)`) to indexes of `to_ns`, a
/// multiple of `from_ns`, merging in time order the entries that fall in one new interval.
pub fn regroup_index<V: Copy>(map: &mut BTreeMap<i64, V>, from_ns: i64, to_ns: i64, merge: impl Fn(V, V) -> V) {
    if from_ns == to_ns {
        return;
    }
    lnetcap_tcp::series::regroup_by(map, |i| i.saturating_mul(from_ns).div_euclid(to_ns), merge);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval's (index, level × time, max, covered time).
    type Interval = (i64, f64, i64, i64);

    /// The series as the maps were kept before `Pending`: every step's time at its level
    /// and in its intervals added to the maps at once.
    fn reference(steps: &[(i64, i64)], interval_ns: i64) -> (BTreeMap<i64, i64>, Vec<Interval>) {
        let mut sorted = steps.to_vec();
        sorted.sort_unstable();
        let (mut time_at, mut intervals) = (BTreeMap::new(), BTreeMap::<i64, (f64, i64, i64)>::new());
        let (mut level, mut last) = (0i64, None::<i64>);
        for (t, d) in sorted {
            if let Some(from) = last.filter(|&l| t > l) {
                *time_at.entry(level).or_default() += t - from;
                let mut a = from;
                while a < t {
                    let idx = a.div_euclid(interval_ns);
                    let end = ((idx + 1) * interval_ns).min(t);
                    let e = intervals.entry(idx).or_insert((0.0, 0, 0));
                    e.0 += level as f64 * (end - a) as f64;
                    if end - a >= MIN_LEVEL_SPAN_NS {
                        e.1 = e.1.max(level);
                    }
                    e.2 += end - a;
                    a = end;
                }
            }
            last = Some(last.map_or(t, |l| l.max(t)));
            level += d;
        }
        (time_at, intervals.into_iter().map(|(i, e)| (i, e.0, e.1, e.2)).collect())
    }

    proptest::proptest! {
        /// Applied in any number of calls (watermarks anywhere), the series keeps the time at
        /// each level and the interval summaries the reference keeps, to the bit: levels
        /// below and above the 64 `Pending` holds, negative ones, steps at one instant, and
        /// spans across intervals.
        #[test]
        fn test_step_series_sums_as_the_reference(
            steps in proptest::collection::vec((0i64..3_000_000, proptest::sample::select(vec![-1i64, 1, 1, 40, -40])), 0..120),
            cuts in proptest::collection::vec(0i64..3_000_000, 0..6),
        ) {
            let interval_ns = 250_000;
            let mut s = StepSeries::new(interval_ns);
            for &(t, d) in &steps {
                s.push(t, d);
            }
            let mut cuts = cuts;
            cuts.sort_unstable();
            for c in cuts {
                s.advance(c);
            }
            s.finish();
            let (time_at, intervals) = reference(&steps, interval_ns);
            proptest::prop_assert_eq!(&s.time_at, &time_at);
            let got: Vec<Interval> = s.intervals.iter().map(|(&i, &e)| (i, e.0, e.1, e.2)).collect();
            proptest::prop_assert_eq!(got, intervals);
        }

        /// Steps that come in time order, applied with watermarks anywhere behind them (far
        /// behind: more than `PENDING_CAP` wait, and the earliest are applied early), sum as
        /// the reference: no step comes later for a time before those applied, so applying
        /// them early changes nothing, and the queue never holds more than the cap.
        #[test]
        fn test_steps_in_order_applied_early_sum_as_the_reference(
            gaps in proptest::collection::vec((0i64..40_000, proptest::sample::select(vec![-1i64, 1, 1, 3])), 0..400),
            lags in proptest::collection::vec(0i64..3_000_000, 1..8),
        ) {
            let interval_ns = 250_000;
            let mut s = StepSeries::new(interval_ns);
            let (mut t, mut steps) = (0i64, Vec::new());
            for (k, &(gap, d)) in gaps.iter().enumerate() {
                t += gap;
                steps.push((t, d));
                s.push(t, d);
                s.advance(t - lags[k % lags.len()]);
                proptest::prop_assert!(s.steps.len() <= PENDING_CAP);
            }
            s.finish();
            let (time_at, intervals) = reference(&steps, interval_ns);
            proptest::prop_assert_eq!(&s.time_at, &time_at);
            let got: Vec<Interval> = s.intervals.iter().map(|(&i, &e)| (i, e.0, e.1, e.2)).collect();
            proptest::prop_assert_eq!(got, intervals);
        }

        /// The step queue gives back any pushes in sorted order, as a heap would: steps in
        /// order, a few places out of it, in a second ordered stream far behind, anywhere,
        /// and ties, popped in between.
        #[test]
        fn test_step_queue_is_a_priority_queue(
            ops in proptest::collection::vec((0i64..2000, -1i64..=1, 0usize..6, proptest::bool::weighted(0.2)), 0..400)
        ) {
            let (mut q, mut h) = (StepQueue::default(), BinaryHeap::new());
            for (k, (t, d, back, pop)) in ops.into_iter().enumerate() {
                // Mostly rising with the index, some a few places back, some rising in a
                // stream of their own far behind (RPCs' ends), some anywhere.
                let t = match back {
                    0 => t,
                    4 => k as i64 * 4 - 1000 - t % 3,
                    _ => k as i64 * 4 - t % (8 * back as i64),
                };
                q.push((t, d));
                h.push(Reverse((t, d)));
                if pop {
                    let first = h.peek().map(|r| r.0);
                    proptest::prop_assert_eq!(q.peek(), first);
                    // Not before the watermark: stays.
                    if let Some((t, _)) = first {
                        proptest::prop_assert_eq!(q.pop_upto(t - 1), None);
                    }
                    proptest::prop_assert_eq!(q.pop_upto(i64::MAX), first);
                    h.pop();
                }
            }
            while let Some(Reverse(x)) = h.pop() {
                proptest::prop_assert_eq!(q.peek(), Some(x));
                proptest::prop_assert_eq!(q.pop_upto(x.0), Some(x));
            }
            proptest::prop_assert_eq!(q.peek(), None);
            proptest::prop_assert_eq!(q.pop_upto(i64::MAX), None);
        }
    }

    /// Past the cap the earliest steps are applied before the watermark and counted; a
    /// step that comes later for a time before them counts at the time reached.
    #[test]
    fn test_a_full_series_applies_its_earliest_steps_early() {
        let mut s = StepSeries::new(1_000);
        // 74 intervals [100k, 100k + 50): 148 steps, 84 over the cap of 64.
        for k in 0..PENDING_CAP as i64 / 2 + 42 {
            s.push_interval(100 * k, 100 * k + 50);
        }
        s.advance(i64::MIN);
        assert_eq!(s.steps.len(), PENDING_CAP);
        assert_eq!(s.applied_early, 84);
        // The first 42 intervals applied whole, the last ending at 4,150.
        assert_eq!((s.level(), s.max), (0, 1));
        assert_eq!(s.time_at.get(&1), Some(&(42 * 50)));
        // A step for time 120 comes after the series reached 4,150: the earliest held, it
        // is applied at once (65 held), and level 1 counts from 4,150.
        s.push(120, 1);
        s.advance(i64::MIN);
        assert_eq!(s.applied_early, 85);
        assert_eq!(s.level(), 1);
        s.finish();
        // The other 32 intervals on top of it: level 2 for 50 each, level 1 for the 50
        // before each of them.
        assert_eq!(s.time_at.get(&1), Some(&(42 * 50 + 32 * 50)));
        assert_eq!(s.time_at.get(&2), Some(&(32 * 50)));
        assert_eq!(s.max, 2);
    }

    #[test]
    fn test_log2_rows_match_lustre() {
        // lprocfs_oh_tally_log2: fls(value - 1) → rows 1, 2, 4, ...
        assert_eq!(Log2Hist::row(1), 1);
        assert_eq!(Log2Hist::row(2), 2);
        assert_eq!(Log2Hist::row(3), 4);
        assert_eq!(Log2Hist::row(256), 256);
        assert_eq!(Log2Hist::row(257), 512);
    }

    #[test]
    fn test_step_series_out_of_order() {
        let mut s = StepSeries::new(10);
        // Two overlapping intervals [0, 30) and [10, 20), pushed out of order.
        s.push(10, 1);
        s.push(30, -1);
        s.push(0, 1);
        s.push(20, -1);
        s.finish();
        assert_eq!(s.max, 2);
        assert_eq!(s.time_at.get(&2), Some(&10));
        assert_eq!(s.time_at.get(&1), Some(&20));
        assert!((s.mean() - 40.0 / 30.0).abs() < 1e-9);
        assert_eq!(s.at_increase.0.get(&1), Some(&1));
        assert_eq!(s.at_increase.0.get(&2), Some(&1));
    }

    #[test]
    fn test_quantiles_close_to_exact() {
        let mut q = Quantiles::default();
        let mut v: Vec<f64> = (1..=1000).map(|i| f64::from(i) * 37.0 % 1009.0 + 1.0).collect();
        for x in &v {
            q.add(*x);
        }
        v.sort_by(f64::total_cmp);
        for p in [0.5, 0.95, 0.99] {
            let exact = v[((p * 1000.0) as usize).saturating_sub(1)];
            let got = q.quantile(p).unwrap();
            assert!((got - exact).abs() / exact < 0.02, "p{p}: {got} vs {exact}");
        }
        assert_eq!(q.max(), Some(v[999]));
    }
}
