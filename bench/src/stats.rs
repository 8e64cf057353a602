//! Sample summaries (median, p99) and a small deterministic random source.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Median and 99th percentile of a set of timings, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Summary {
    /// How many timings.
    pub samples: usize,
    /// The median, µs.
    pub median_us: f64,
    /// The 99th percentile (nearest rank), µs.
    pub p99_us: f64,
    /// The mean, µs.
    pub mean_us: f64,
    /// The slowest, µs.
    pub max_us: f64,
}

impl Summary {
    /// Summarises `timings`; all zero when there are none.
    pub fn of(timings: &[Duration]) -> Self {
        let mut sorted: Vec<f64> = timings.iter().map(|t| t.as_secs_f64() * 1e6).collect();
        sorted.sort_by(f64::total_cmp);
        Self {
            samples: sorted.len(),
            median_us: percentile(&sorted, 50.0),
            p99_us: percentile(&sorted, 99.0),
            mean_us: ratio(sorted.iter().sum(), sorted.len() as f64),
            max_us: sorted.last().copied().unwrap_or(0.0),
        }
    }
}

/// The nearest-rank percentile of sorted values; 0 when empty.
pub(crate) fn percentile(sorted: &[f64], pct: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((pct / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `a / b`, or 0 when `b` is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

/// xorshift64*: a fast, seeded random source, so every run samples the
/// same keys in the same order.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced by a fixed odd constant).
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// A value in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound.max(1)
    }
}

/// A count as the report writes it: 1000 -> "1k", 1000000 -> "1M".
pub fn short(n: u64) -> String {
    if n >= 1_000_000 && n % 1_000_000 == 0 {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n % 1_000 == 0 {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_p99_use_nearest_rank() {
        let timings: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        let summary = Summary::of(&timings);
        assert_eq!(summary.samples, 100);
        assert_eq!(summary.median_us, 50.0);
        assert_eq!(summary.p99_us, 99.0);
        let one = Summary::of(&[Duration::from_micros(7)]);
        assert_eq!((one.median_us, one.p99_us), (7.0, 7.0));
        assert_eq!(Summary::of(&[]).median_us, 0.0);
    }

    #[test]
    fn rng_stays_below_its_bound_and_repeats_per_seed() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..1000 {
            let value = a.below(10);
            assert!(value < 10);
            assert_eq!(value, b.below(10));
        }
    }
}
