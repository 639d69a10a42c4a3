//! Seeded randomness of the simulated world: a stream for building it
//! ([`Stream`], a SplitMix64 sequence) and stateless
//! coins keyed by what happens ([`coin`]), so every contender of one run
//! meets the same luck for the same attempt whatever it did before.

/// Mixes one 64-bit word (the SplitMix64 finalizer).
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform number in `[0, 1)` determined by `keys` alone (53 random bits).
pub fn coin(keys: &[u64]) -> f64 {
    let mut h = 0x5EED_u64;
    for k in keys {
        h = mix64(h ^ k);
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// A standard normal determined by `keys` alone (Box–Muller on two coins).
pub fn coin_normal(keys: &[u64]) -> f64 {
    let mut k = keys.to_vec();
    k.push(1);
    let u1 = coin(&k).max(1e-300);
    k.push(2);
    let u2 = coin(&k);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The SplitMix64 increment (the golden ratio in 64 bits).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// A seeded stream of numbers (world building and the baselines' draws):
/// SplitMix64 (Steele, Lea, Flood 2014), whose output is [`mix64`] of its
/// state before each step.
#[derive(Debug, Clone)]
pub struct Stream {
    state: u64,
}

impl Stream {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Stream {
        Stream { state: mix64(seed) }
    }

    /// The next 64 random bits.
    fn next_u64(&mut self) -> u64 {
        let out = mix64(self.state);
        self.state = self.state.wrapping_add(GOLDEN);
        out
    }

    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi)`.
    pub fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Whether an event of probability `p` happened.
    pub fn chance(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    /// Uniform in `0..n` (`n` ≥ 1; 0 reads as 1).
    pub fn below(&mut self, n: usize) -> usize {
        // Multiply-shift: bias below n / 2^64.
        ((self.next_u64() as u128 * n.max(1) as u128) >> 64) as usize
    }

    /// A standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Exponential with mean `mean` (> 0).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).max(1e-300).ln()
    }

    /// Gamma(shape, 1) by Marsaglia–Tsang (shape > 0; below 1 by the boost
    /// `Gamma(a) = Gamma(a + 1)·U^(1/a)`).
    pub fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            let u = self.uniform().max(1e-300);
            return self.gamma(shape + 1.0) * u.powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = self.uniform().max(1e-300);
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    /// Beta(a, b) from two gammas (a, b > 0).
    pub fn beta(&mut self, a: f64, b: f64) -> f64 {
        let x = self.gamma(a);
        let y = self.gamma(b);
        if x + y > 0.0 {
            x / (x + y)
        } else {
            0.5
        }
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_splitmix64() {
        // Reference values of SplitMix64 from state 0 (the original paper's code).
        let mut s = Stream { state: 0 };
        assert_eq!(s.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(s.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut t = Stream::new(7);
        for n in 1..200 {
            assert!(t.below(n) < n);
        }
        assert_eq!(t.below(0), 0, "0 reads as 1");
    }

    #[test]
    fn coins_are_keyed_and_uniform_enough() {
        assert_eq!(coin(&[1, 2, 3]), coin(&[1, 2, 3]));
        assert_ne!(coin(&[1, 2, 3]), coin(&[1, 2, 4]));
        let n = 20_000;
        let mean: f64 = (0..n).map(|i| coin(&[7, i])).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        let z: f64 = (0..n).map(|i| coin_normal(&[9, i]).powi(2)).sum::<f64>() / n as f64;
        assert!((z - 1.0).abs() < 0.05, "variance {z}");
    }

    #[test]
    fn beta_has_its_mean() {
        let mut s = Stream::new(3);
        let n = 20_000;
        let m: f64 = (0..n).map(|_| s.beta(2.0, 6.0)).sum::<f64>() / n as f64;
        assert!((m - 0.25).abs() < 0.01, "{m}");
        let m: f64 = (0..n).map(|_| s.beta(1.0, 1.0)).sum::<f64>() / n as f64;
        assert!((m - 0.5).abs() < 0.01, "{m}");
    }
}
