//! The randomness battery of `idmint analyze`, as pure functions over a bit sequence: the
//! NIST SP 800-22 subset (frequency, block frequency, runs, longest run of ones, serial,
//! approximate entropy, cumulative sums), per-bit-position bias over the IDs, and `ent`'s byte
//! statistics (entropy, chi-square, serial correlation). Each test gives its statistic and a
//! p-value: the probability that truly random bits give a result at least this extreme.

use statrs::function::{erf::erfc, gamma::gamma_ur};

/// The bits under test: each ID's domain bits, most significant first, concatenated.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bits {
    /// One bit per element, 0 or 1.
    bits: Vec<u8>,
    /// Bits per ID.
    width: usize,
}

impl Bits {
    /// The low `width` bits of each value, most significant first.
    pub(crate) fn from_values(values: &[u128], width: usize) -> Bits {
        let mut bits = Vec::with_capacity(values.len() * width);
        for &value in values {
            bits.extend((0..width).rev().map(|i| ((value >> i) & 1) as u8));
        }
        Bits { bits, width }
    }

    pub(crate) fn len(&self) -> usize {
        self.bits.len()
    }

    /// The bits packed into bytes, most significant first; a last partial byte is dropped.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.bits.chunks_exact(8).map(|c| c.iter().fold(0, |byte, &b| byte << 1 | b)).collect()
    }
}

/// One statistic and its p-value (`None`: reported, not tested).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Outcome {
    pub(crate) name: &'static str,
    pub(crate) statistic: f64,
    pub(crate) p_value: Option<f64>,
    /// What the statistic is, and any parameter of the test.
    pub(crate) detail: String,
}

fn tested(name: &'static str, statistic: f64, p_value: f64, detail: String) -> Outcome {
    Outcome { name, statistic, p_value: Some(p_value.clamp(0.0, 1.0)), detail }
}

/// The upper regularized incomplete gamma function Q(a, x) (NIST's `igamc`).
fn igamc(a: f64, x: f64) -> f64 {
    if x <= 0.0 { 1.0 } else { gamma_ur(a, x) }
}

/// The standard normal distribution function.
fn phi(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// Frequency (monobit), SP 800-22 §2.1.
pub(crate) fn frequency(bits: &Bits) -> Outcome {
    let n = bits.len() as f64;
    let sum: i64 = bits.bits.iter().map(|&b| if b == 1 { 1 } else { -1 }).sum();
    let s_obs = (sum as f64).abs() / n.sqrt();
    let detail = format!("|S_n|/sqrt(n), S_n = {sum}");
    tested("frequency (monobit)", s_obs, erfc(s_obs / std::f64::consts::SQRT_2), detail)
}

/// Frequency within 128-bit blocks, §2.2.
pub(crate) fn block_frequency(bits: &Bits) -> Outcome {
    const M: usize = 128;
    let blocks = bits.len() / M;
    let chi: f64 = bits
        .bits
        .chunks_exact(M)
        .map(|block| {
            let pi = block.iter().map(|&b| f64::from(b)).sum::<f64>() / M as f64;
            (pi - 0.5).powi(2)
        })
        .sum::<f64>()
        * 4.0
        * M as f64;
    let detail = format!("chi-square over {blocks} blocks of {M} bits");
    tested("block frequency", chi, igamc(blocks as f64 / 2.0, chi / 2.0), detail)
}

/// Runs, §2.3 (0 when the frequency prerequisite fails, as NIST's code does).
pub(crate) fn runs(bits: &Bits) -> Outcome {
    let n = bits.len() as f64;
    let pi = bits.bits.iter().map(|&b| f64::from(b)).sum::<f64>() / n;
    let v = 1 + bits.bits.windows(2).filter(|w| w[0] != w[1]).count();
    let detail = format!("runs V_n = {v}, ones = {pi:.6}");
    if (pi - 0.5).abs() >= 2.0 / n.sqrt() {
        return tested("runs", v as f64, 0.0, format!("{detail}: frequency prerequisite fails"));
    }
    let p = erfc(
        (v as f64 - 2.0 * n * pi * (1.0 - pi)).abs() / (2.0 * (2.0 * n).sqrt() * pi * (1.0 - pi)),
    );
    tested("runs", v as f64, p, detail)
}

/// The longest run of ones in a block, §2.4, with the block sizes and class probabilities of
/// NIST's reference code (more digits than the document's table).
pub(crate) fn longest_run(bits: &Bits) -> Outcome {
    let n = bits.len();
    let (m, lowest, probabilities): (usize, usize, &[f64]) = if n >= 750_000 {
        (10_000, 10, &[0.0882, 0.2092, 0.2483, 0.1933, 0.1208, 0.0675, 0.0727])
    } else if n >= 6_272 {
        (
            128,
            4,
            &[
                0.117_403_578_8,
                0.242_955_959,
                0.249_363_483,
                0.175_177_06,
                0.102_701_071,
                0.112_398_847,
            ],
        )
    } else {
        (8, 1, &[0.214_843_75, 0.367_187_5, 0.230_468_75, 0.1875])
    };
    let classes = probabilities.len();
    let mut counts = vec![0_u64; classes];
    let blocks = n / m;
    for block in bits.bits.chunks_exact(m) {
        let (mut longest, mut current) = (0_usize, 0_usize);
        for &b in block {
            current = if b == 1 { current + 1 } else { 0 };
            longest = longest.max(current);
        }
        let class = longest.saturating_sub(lowest).min(classes - 1);
        counts[class] += 1;
    }
    let chi: f64 = counts
        .iter()
        .zip(probabilities)
        .map(|(&v, &p)| {
            let expected = blocks as f64 * p;
            (v as f64 - expected).powi(2) / expected
        })
        .sum();
    let k = (classes - 1) as f64;
    let detail = format!("chi-square over {blocks} blocks of {m} bits");
    tested("longest run of ones", chi, igamc(k / 2.0, chi / 2.0), detail)
}

/// Counts of every overlapping `m`-bit pattern, the sequence wrapped around (§2.11, §2.12).
fn pattern_counts(bits: &Bits, m: usize) -> Vec<u64> {
    let mut counts = vec![0_u64; 1 << m];
    if m == 0 {
        counts[0] = bits.len() as u64;
        return counts;
    }
    let n = bits.len();
    let mask = (1_usize << m) - 1;
    let mut pattern = 0_usize;
    for i in 0..m - 1 {
        pattern = (pattern << 1 | usize::from(bits.bits[i])) & mask;
    }
    for i in 0..n {
        pattern = (pattern << 1 | usize::from(bits.bits[(i + m - 1) % n])) & mask;
        counts[pattern] += 1;
    }
    counts
}

/// The pattern size of the serial test: NIST's m < ⌊log2 n⌋ − 2, at most 16.
fn serial_m(n: usize) -> usize {
    (n.max(2).ilog2() as usize).saturating_sub(3).clamp(3, 16)
}

/// Serial, §2.11: two p-values, reported as two outcomes.
pub(crate) fn serial(bits: &Bits) -> [Outcome; 2] {
    let n = bits.len() as f64;
    let m = serial_m(bits.len());
    let psi = |m: usize| -> f64 {
        let counts = pattern_counts(bits, m);
        let sum: f64 = counts.iter().map(|&c| (c as f64).powi(2)).sum();
        (1_u64 << m) as f64 / n * sum - n
    };
    let (p0, p1, p2) = (psi(m), psi(m - 1), psi(m - 2));
    let del1 = p0 - p1;
    let del2 = p0 - 2.0 * p1 + p2;
    let a1 = (1_u64 << (m - 2)) as f64;
    let a2 = (1_u64 << (m - 3)) as f64;
    [
        tested("serial (1)", del1, igamc(a1, del1 / 2.0), format!("delta psi^2, m = {m}")),
        tested("serial (2)", del2, igamc(a2, del2 / 2.0), format!("delta^2 psi^2, m = {m}")),
    ]
}

/// Approximate entropy, §2.12 (NIST's m < ⌊log2 n⌋ − 5, at most 10).
pub(crate) fn approximate_entropy(bits: &Bits) -> Outcome {
    let n = bits.len() as f64;
    let m = (bits.len().max(2).ilog2() as usize).saturating_sub(6).clamp(2, 10);
    let phi_m = |m: usize| -> f64 {
        pattern_counts(bits, m)
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| {
                let p = c as f64 / n;
                p * p.ln()
            })
            .sum()
    };
    let apen = phi_m(m) - phi_m(m + 1);
    let chi = 2.0 * n * (std::f64::consts::LN_2 - apen);
    let p = igamc((1_u64 << (m - 1)) as f64, chi / 2.0);
    tested("approximate entropy", chi, p, format!("chi-square, m = {m}, ApEn = {apen:.8}"))
}

/// Cumulative sums, §2.13, forward and backward.
pub(crate) fn cumulative_sums(bits: &Bits) -> [Outcome; 2] {
    let n = bits.len() as f64;
    // The sums' bounds as NIST's reference code computes them: integer division, truncating.
    let count = bits.len() as i64;
    let p_value = |z: f64| -> f64 {
        let sqrt_n = n.sqrt();
        let zi = z as i64;
        let mut sum1 = 0.0;
        let start = (-count / zi + 1) / 4;
        let end = (count / zi - 1) / 4;
        for k in start..=end {
            let k = k as f64;
            sum1 += phi((4.0 * k + 1.0) * z / sqrt_n) - phi((4.0 * k - 1.0) * z / sqrt_n);
        }
        let mut sum2 = 0.0;
        let start = (-count / zi - 3) / 4;
        for k in start..=end {
            let k = k as f64;
            sum2 += phi((4.0 * k + 3.0) * z / sqrt_n) - phi((4.0 * k + 1.0) * z / sqrt_n);
        }
        1.0 - sum1 + sum2
    };
    let max_excursion = |forward: bool| -> f64 {
        let (mut s, mut z) = (0_i64, 0_i64);
        let mut step = |b: u8| {
            s += if b == 1 { 1 } else { -1 };
            z = z.max(s.abs());
        };
        if forward {
            bits.bits.iter().for_each(|&b| step(b));
        } else {
            bits.bits.iter().rev().for_each(|&b| step(b));
        }
        z.max(1) as f64
    };
    let (forward, backward) = (max_excursion(true), max_excursion(false));
    [
        tested("cumulative sums (forward)", forward, p_value(forward), "max |S_k|".into()),
        tested("cumulative sums (backward)", backward, p_value(backward), "max |S_k|".into()),
    ]
}

/// Per-bit-position bias: for each of the `width` positions of an ID, how far its count of
/// ones is from half the IDs. The statistic is the worst position's |z|; its p-value is
/// Bonferroni-corrected for the number of positions.
pub(crate) fn bit_positions(bits: &Bits) -> Outcome {
    let width = bits.width.max(1);
    let ids = bits.len() / width;
    let mut ones = vec![0_u64; width];
    for id in bits.bits.chunks_exact(width) {
        for (count, &b) in ones.iter_mut().zip(id) {
            *count += u64::from(b);
        }
    }
    let (worst, z) = ones
        .iter()
        .map(|&c| (2.0 * c as f64 - ids as f64).abs() / (ids as f64).sqrt())
        .enumerate()
        .fold((0, 0.0), |best, (i, z)| if z > best.1 { (i, z) } else { best });
    let p = (erfc(z / std::f64::consts::SQRT_2) * width as f64).min(1.0);
    let bit = width - 1 - worst;
    let share = ones[worst] as f64 / ids.max(1) as f64;
    let detail = format!("worst |z| of {width} positions: bit {bit}, ones {share:.6}");
    tested("bit positions", z, p, detail)
}

/// `ent`'s statistics over the bytes: entropy (bits per byte, reported), chi-square of the
/// byte counts (255 degrees of freedom) and the serial correlation of consecutive bytes
/// (the last paired with the first, as `ent` does; tested as |r|·sqrt(n) against a normal).
pub(crate) fn bytes(bytes: &[u8]) -> [Outcome; 3] {
    let n = bytes.len() as f64;
    let mut counts = [0_u64; 256];
    for &b in bytes {
        counts[usize::from(b)] += 1;
    }
    let entropy: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum();
    let expected = n / 256.0;
    let chi: f64 = counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
    let scc = serial_correlation(bytes);
    let z = scc.abs() * n.sqrt();
    [
        Outcome {
            name: "byte entropy",
            statistic: entropy,
            p_value: None,
            detail: "bits per byte (8 is the most)".into(),
        },
        tested(
            "byte chi-square",
            chi,
            igamc(255.0 / 2.0, chi / 2.0),
            "255 degrees of freedom".into(),
        ),
        tested(
            "byte serial correlation",
            scc,
            erfc(z / std::f64::consts::SQRT_2),
            "consecutive bytes, wrapped".into(),
        ),
    ]
}

/// `ent`'s serial correlation coefficient.
fn serial_correlation(bytes: &[u8]) -> f64 {
    let n = bytes.len() as f64;
    let (mut t1, mut t2, mut t3) = (0.0, 0.0, 0.0);
    for (i, &b) in bytes.iter().enumerate() {
        let u = f64::from(b);
        let next = f64::from(bytes[(i + 1) % bytes.len()]);
        t1 += u * next;
        t2 += u;
        t3 += u * u;
    }
    let denominator = n * t3 - t2 * t2;
    if denominator == 0.0 { 1.0 } else { (n * t1 - t2 * t2) / denominator }
}

/// Every test of the battery over `bits`.
pub(crate) fn run_all(bits: &Bits) -> Vec<Outcome> {
    let mut outcomes = vec![frequency(bits), block_frequency(bits), runs(bits), longest_run(bits)];
    outcomes.extend(serial(bits));
    outcomes.push(approximate_entropy(bits));
    outcomes.extend(cumulative_sums(bits));
    outcomes.push(bit_positions(bits));
    outcomes.extend(bytes(&bits.bytes()));
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NIST SP 800-22's worked examples (§2.x.8), with the p-values it prints.
    #[test]
    fn nist_examples() {
        let eps = |text: &str| Bits {
            bits: text.bytes().filter(|b| *b == b'0' || *b == b'1').map(|b| b - b'0').collect(),
            width: 1,
        };
        let close = |got: Option<f64>, want: f64| got.is_some_and(|p| (p - want).abs() < 5e-6);
        // §2.1.8: 1011010101, p = 0.527089.
        assert!(close(frequency(&eps("1011010101")).p_value, 0.527089));
        // §2.3.8: 1001101011, p = 0.147232.
        assert!(close(runs(&eps("1001101011")).p_value, 0.147232));
        // §2.13.8 (forward): 1011010111, p = 0.4116588.
        assert!(close(cumulative_sums(&eps("1011010111"))[0].p_value, 0.4116588));
        // §2.11.8: 0011011101 with m = 3, p = 0.808792 and 0.670320.
        let [one, two] = serial(&eps("0011011101"));
        assert!(close(one.p_value, 0.808792) && close(two.p_value, 0.670320), "{one:?} {two:?}");
        // §2.4.8: 128 bits in blocks of 8, p = 0.180609.
        let long = "11001100000101010110110001001100111000000000001001001101010100010001\
                    001111010110100000001101011111001100111001101101100010110010";
        assert!(close(longest_run(&eps(long)).p_value, 0.180609), "{:?}", longest_run(&eps(long)));
    }

    #[test]
    fn ent_figures_of_simple_streams() {
        // Every byte value once: entropy 8, chi-square 0.
        let all: Vec<u8> = (0..=255).collect();
        let [entropy, chi, _] = bytes(&all);
        assert!((entropy.statistic - 8.0).abs() < 1e-12);
        assert!(chi.statistic.abs() < 1e-12);
        // One value repeated: entropy 0.
        assert!(bytes(&[7; 64])[0].statistic.abs() < 1e-12);
    }

    #[test]
    fn bits_pack_most_significant_first() {
        let bits = Bits::from_values(&[0b101, 0b011], 3);
        assert_eq!(bits.bits, vec![1, 0, 1, 0, 1, 1]);
        let bits = Bits::from_values(&[0xa5, 0x0f], 8);
        assert_eq!(bits.bytes(), vec![0xa5, 0x0f]);
    }
}
