//! A small seeded random source for scenarios and the reliability harnesses.
//!
//! They need repeatable choices from a seed (how a store file is damaged,
//! which lifecycle steps a harness child takes, when it is killed, which
//! racer gets which outcome), not statistical or cryptographic quality.
//! SplitMix64 is ten lines and well studied, so it is written here instead
//! of adding a dependency.

/// SplitMix64: a 64-bit state stepped by a constant and mixed on output.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number uniform in `0..bound`; `0` when `bound` is `0`.
    pub fn below(&mut self, bound: u64) -> u64 {
        // Lemire's multiply-shift: the high half of a 128-bit product.
        let wide = u128::from(self.next_u64()) * u128::from(bound);
        u64::try_from(wide >> 64).unwrap_or(0)
    }

    /// An index uniform in `0..len`; `0` when `len` is `0`.
    pub fn index(&mut self, len: usize) -> usize {
        usize::try_from(self.below(len as u64)).unwrap_or(0)
    }

    /// True with probability `numerator / denominator`.
    pub fn chance(&mut self, numerator: u64, denominator: u64) -> bool {
        self.below(denominator) < numerator
    }

    /// An independent generator seeded from this one.
    pub fn fork(&mut self) -> Self {
        Self::new(self.next_u64())
    }

    /// Shuffles `items` in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for last in (1..items.len()).rev() {
            let pick = self.index(last + 1);
            items.swap(last, pick);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let first: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let second: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let other: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(first, second);
        assert_ne!(first, other);
    }

    #[test]
    fn below_stays_in_range_and_reaches_both_ends() {
        let mut rng = Rng::new(1);
        let draws: Vec<u64> = (0..2000).map(|_| rng.below(10)).collect();
        assert!(draws.iter().all(|&d| d < 10));
        assert!(draws.contains(&0));
        assert!(draws.contains(&9));
        assert_eq!(rng.below(0), 0);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut rng = Rng::new(3);
        let mut items: Vec<u32> = (0..50).collect();
        rng.shuffle(&mut items);
        assert_ne!(items, (0..50).collect::<Vec<_>>());
        items.sort_unstable();
        assert_eq!(items, (0..50).collect::<Vec<_>>());
    }
}
