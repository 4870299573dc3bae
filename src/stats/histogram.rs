//! A log-linear histogram of durations (HdrHistogram's layout, coarse):
//! values below 16 ns are exact; above, each power of two is split into 16
//! buckets, so a reported percentile is within 1/16 (6.25%) of the truth.
//! 64 powers x 16 = 1,024 counters, 8 KiB, no allocation after creation;
//! recording is a `leading_zeros`, two shifts and an add.

use std::fmt;
use std::time::Duration;

const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = 64 * SUB;

/// A histogram of nanosecond durations with percentiles; from
/// [`Stats`](super::Stats) (`sched_delay`, `dispatch_time`).
///
/// ```
/// use std::time::Duration;
/// use deliloop::stats::Histogram;
///
/// let mut h = Histogram::new();
/// for us in 1..=1000 {
///     h.record(Duration::from_micros(us));
/// }
/// assert_eq!(h.count(), 1000);
/// let p50 = h.p50().as_micros();
/// assert!((470..=530).contains(&p50), "{p50}");
/// assert!(h.p99() <= h.p999() && h.p999() <= h.max());
/// assert_eq!(h.max(), Duration::from_micros(1000));
/// ```
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    count: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for Histogram {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.max == other.max && self.counts == other.counts
    }
}

impl Eq for Histogram {}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("p50", &self.p50())
            .field("p99", &self.p99())
            .field("p999", &self.p999())
            .field("max", &self.max())
            .finish()
    }
}

fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let power = 63 - ns.leading_zeros(); // >= SUB_BITS
    let sub = (ns >> (power - SUB_BITS)) as usize & (SUB - 1);
    ((power - SUB_BITS + 1) as usize) * SUB + sub
}

/// The largest value that falls in bucket `b`.
fn bucket_top(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let power = (b / SUB) as u32 + SUB_BITS - 1;
    let sub = (b % SUB) as u64;
    let base = (1u64 << power) | (sub << (power - SUB_BITS));
    base.saturating_add((1u64 << (power - SUB_BITS)) - 1)
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            count: 0,
            max: 0,
            sum: 0,
        }
    }

    /// Adds one value.
    pub fn record(&mut self, d: Duration) {
        self.record_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    #[inline]
    pub(crate) fn record_ns(&mut self, ns: u64) {
        self.counts[bucket(ns)] += 1;
        self.count += 1;
        self.max = self.max.max(ns);
        self.sum += ns as u128;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The mean, or zero if empty.
    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.sum / self.count as u128) as u64)
    }

    /// The value at quantile `q` (0.0 to 1.0): the top of the bucket where
    /// the quantile falls, capped at the largest value seen.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(bucket_top(b).min(self.max));
            }
        }
        Duration::from_nanos(self.max)
    }

    /// The median.
    pub fn p50(&self) -> Duration {
        self.quantile(0.5)
    }

    /// The 99th percentile.
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }

    /// The 99.9th percentile.
    pub fn p999(&self) -> Duration {
        self.quantile(0.999)
    }

    /// The largest value recorded.
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_tight() {
        let mut last = 0;
        for ns in [0u64, 1, 15, 16, 17, 31, 32, 100, 1_000, 1 << 40, u64::MAX] {
            let b = bucket(ns);
            assert!(b >= last);
            last = b;
            assert!(bucket_top(b) >= ns, "{ns}");
            assert!(ns < 16 || bucket_top(b) - ns <= ns / 16, "{ns}");
        }
    }
}
