//! Public IDs: a keyed permutation of a layout's own domain, so that IDs handed out look random
//! and reveal nothing (time, node, rate) without the key, yet stay unique, fit the same column,
//! and map back exactly. [`PublicIds`] permutes with FF1 (NIST SP 800-38G, AES-256, radix 2,
//! the `fpe` crate) or, where only looks matter, with multiplicative hashing (an odd multiplier
//! mod 2^n: looks random, **not secret**).
//!
//! | domain | the layout's IDs | public IDs |
//! | --- | --- | --- |
//! | 63 bits, 0 excluded (snowflake, sonyflake, icicle, trace-id, sequence, ...) | 1..=2^63−1 | 1..=2^63−1 |
//! | 53 bits, 0 excluded (js53) | 1..=2^53−1 | 1..=2^53−1 |
//! | 64 bits (flake, lable) | 0..=2^64−1 | 0..=2^64−1 |
//! | 128 bits (hot-guid) | 128 bits | 128 bits |
//!
//! **Key versions cost bits.** With `version_bits = k` (0 to 4), the top k bits of a public
//! ID carry the key version in clear and the rest is the permutation of an ID that must fit
//! below them: two keys' permutations of one domain would collide, so a version outside the
//! ID cannot keep public IDs unique across a rotation. k = 0 (the default) allows one key for
//! the life of the IDs; each version bit halves the IDs a layout can issue (snowflake: 69
//! years become 34.8 with k = 1). FF1 keeps 0 out of a domain that excludes it by cycle-walking
//! (it re-encrypts the rare 0), so the map stays a bijection of 1..2^n−1.

use std::collections::BTreeMap;

use aes::Aes256;
use fpe::ff1::{FF1, FlexibleNumeralString};

use crate::{any::AnyId, error::Error, layout::Layout};

/// How public IDs are made.
///
/// # Example
///
/// ```
/// use idmint_core::PublicIdMethod;
///
/// assert_eq!("ff1".parse::<PublicIdMethod>()?, PublicIdMethod::Ff1);
/// assert!(!PublicIdMethod::Multiply.is_secret());
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum PublicIdMethod {
    /// FF1 (NIST SP 800-38G) with AES-256 over the binary domain: reversible only with the key.
    Ff1,
    /// An odd multiplier mod 2^n, with its inverse: looks random, not secret (the multiplier
    /// can be recovered from two IDs and their public forms).
    Multiply,
}

impl PublicIdMethod {
    /// Whether the permutation is a keyed cipher (only FF1 is).
    pub fn is_secret(self) -> bool {
        self == PublicIdMethod::Ff1
    }

    /// Its name in key files.
    pub fn name(self) -> &'static str {
        match self {
            PublicIdMethod::Ff1 => "ff1",
            PublicIdMethod::Multiply => "multiply",
        }
    }
}

impl std::str::FromStr for PublicIdMethod {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        [PublicIdMethod::Ff1, PublicIdMethod::Multiply]
            .into_iter()
            .find(|m| m.name() == text)
            .ok_or_else(|| Error::InvalidConfig(format!("unknown public id method `{text}`")))
    }
}

/// One key of a [`PublicIdKeys`] set.
#[derive(Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct PublicIdKey {
    /// The version, `0..2^version_bits`.
    pub version: u8,
    /// FF1: 32 bytes (an AES-256 key); multiply: the odd multiplier, 16 bytes big-endian (its
    /// low n bits are used). In hex in key files.
    #[cfg_attr(feature = "serde", serde(with = "hex_bytes"))]
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for PublicIdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicIdKey").field("version", &self.version).finish_non_exhaustive()
    }
}

/// A key file: the method, how many bits carry the version, the active version and the keys.
///
/// # Example
///
/// ```
/// use idmint_core::{PublicIdKey, PublicIdKeys, PublicIdMethod};
///
/// let keys = PublicIdKeys {
///     method: PublicIdMethod::Ff1,
///     version_bits: 0,
///     active: 0,
///     keys: vec![PublicIdKey { version: 0, secret: vec![7; 32] }],
/// };
/// assert!(keys.check().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct PublicIdKeys {
    /// FF1 or multiply.
    pub method: PublicIdMethod,
    /// How many top bits of a public ID carry the key version: 0 to 4.
    pub version_bits: u32,
    /// The version that makes new public IDs.
    pub active: u8,
    /// Every version that can still be revealed.
    pub keys: Vec<PublicIdKey>,
}

/// The largest `version_bits`.
pub const MAX_VERSION_BITS: u32 = 4;

impl PublicIdKeys {
    /// Checks the set: versions fit `version_bits` and are distinct, the active one is there,
    /// and each secret has its method's length (and a multiplier is odd).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] naming what is wrong.
    pub fn check(&self) -> Result<(), Error> {
        let bad = |reason: String| Err(Error::InvalidConfig(format!("public id keys: {reason}")));
        if self.version_bits > MAX_VERSION_BITS {
            return bad(format!(
                "version_bits must be 0 to {MAX_VERSION_BITS}, not {}",
                self.version_bits
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for key in &self.keys {
            if u32::from(key.version) >= 1 << self.version_bits {
                return bad(format!(
                    "version {} does not fit {} bits",
                    key.version, self.version_bits
                ));
            }
            if !seen.insert(key.version) {
                return bad(format!("version {} is given twice", key.version));
            }
            let want = match self.method {
                PublicIdMethod::Ff1 => 32,
                PublicIdMethod::Multiply => 16,
            };
            if key.secret.len() != want {
                return bad(format!(
                    "the {} key of version {} must be {want} bytes, not {}",
                    self.method.name(),
                    key.version,
                    key.secret.len()
                ));
            }
            if self.method == PublicIdMethod::Multiply && key.secret[15] & 1 == 0 {
                return bad(format!("the multiplier of version {} must be odd", key.version));
            }
        }
        if !seen.contains(&self.active) {
            return bad(format!("the active version {} has no key", self.active));
        }
        Ok(())
    }
}

/// One version's permutation of `bits`-bit values.
enum Permutation {
    Ff1(Box<FF1<Aes256>>),
    Multiply { multiplier: u128, inverse: u128 },
}

/// A layout's public IDs under a key set: [`obfuscate`](Self::obfuscate) and
/// [`reveal`](Self::reveal) are inverse bijections of the layout's domain.
///
/// # Example
///
/// ```
/// use idmint_core::{AnyId, Layout, PublicIdKey, PublicIdKeys, PublicIdMethod, PublicIds};
///
/// let keys = PublicIdKeys {
///     method: PublicIdMethod::Ff1,
///     version_bits: 0,
///     active: 0,
///     keys: vec![PublicIdKey { version: 0, secret: vec![7; 32] }],
/// };
/// let ids = PublicIds::new(&Layout::builtin("snowflake")?, &keys)?;
/// let id = AnyId::U64(1_541_815_603_606_036_480);
/// let public = ids.obfuscate(id)?;
/// assert_ne!(public, id);
/// assert_eq!(ids.reveal(public)?, id);
/// # Ok::<(), idmint_core::Error>(())
/// ```
pub struct PublicIds {
    method: PublicIdMethod,
    /// The layout's domain bits, and whether 0 is out of it.
    domain_bits: u32,
    no_zero: bool,
    version_bits: u32,
    active: u8,
    versions: BTreeMap<u8, Permutation>,
    wide: bool,
}

impl std::fmt::Debug for PublicIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicIds")
            .field("method", &self.method)
            .field("domain_bits", &self.domain_bits)
            .field("version_bits", &self.version_bits)
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
}

impl PublicIds {
    /// Public IDs of `layout` under `keys`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a bad key set, or a permuted width below FF1's minimum
    /// domain (20 bits).
    pub fn new(layout: &Layout, keys: &PublicIdKeys) -> Result<Self, Error> {
        keys.check()?;
        let domain_bits = domain_bits(layout);
        let no_zero = layout.decode(zero(layout)).is_err();
        let bits = domain_bits - keys.version_bits;
        if bits < 20 {
            return Err(Error::InvalidConfig(format!(
                "{} permuted bits are too few for public ids (20 at least)",
                bits
            )));
        }
        let mask = low_mask(bits);
        let mut versions = BTreeMap::new();
        for key in &keys.keys {
            let permutation = match keys.method {
                PublicIdMethod::Ff1 => Permutation::Ff1(Box::new(
                    FF1::<Aes256>::new(&key.secret, 2)
                        .map_err(|e| Error::InvalidConfig(format!("ff1: {e}")))?,
                )),
                PublicIdMethod::Multiply => {
                    let bytes: [u8; 16] = key
                        .secret
                        .as_slice()
                        .try_into()
                        .map_err(|_| Error::InvalidConfig("a multiplier is 16 bytes".into()))?;
                    let multiplier = u128::from_be_bytes(bytes) & mask;
                    Permutation::Multiply { multiplier, inverse: inverse_odd(multiplier) & mask }
                }
            };
            versions.insert(key.version, permutation);
        }
        Ok(PublicIds {
            method: keys.method,
            domain_bits,
            no_zero,
            version_bits: keys.version_bits,
            active: keys.active,
            versions,
            wide: layout.id_bits() == 128,
        })
    }

    /// The method in use.
    pub fn method(&self) -> PublicIdMethod {
        self.method
    }

    /// The public form of a layout ID, under the active key.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideDomain`] for an ID outside the domain (0 where it is excluded, or above
    /// the bits left under the version bits).
    pub fn obfuscate(&self, id: AnyId) -> Result<AnyId, Error> {
        let x = self.value(id)?;
        let bits = self.permuted_bits();
        if x.checked_shr(bits).unwrap_or(0) != 0 {
            return Err(Error::OutsideDomain { value: x.to_string(), bits });
        }
        let permutation = &self.versions[&self.active];
        let y = self.walk(permutation, x, true)?;
        Ok(self.any(u128::from(self.active).checked_shl(bits).unwrap_or(0) | y))
    }

    /// The layout ID behind a public one, under the version its top bits name.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideDomain`] for a value outside the domain, [`Error::UnknownKeyVersion`]
    /// for one whose version has no key here.
    pub fn reveal(&self, public: AnyId) -> Result<AnyId, Error> {
        let y = self.value(public)?;
        let bits = self.permuted_bits();
        let version = u8::try_from(y.checked_shr(bits).unwrap_or(0)).unwrap_or(u8::MAX);
        let permutation =
            self.versions.get(&version).ok_or(Error::UnknownKeyVersion { version })?;
        let x = self.walk(permutation, y & low_mask(bits), false)?;
        Ok(self.any(x))
    }

    fn permuted_bits(&self) -> u32 {
        self.domain_bits - self.version_bits
    }

    fn value(&self, id: AnyId) -> Result<u128, Error> {
        let x = match (id, self.wide) {
            (AnyId::U64(v), false) => u128::from(v),
            (AnyId::U128(v), true) => v,
            (AnyId::U64(v), true) => u128::from(v),
            (AnyId::U128(v), false) => v,
        };
        if (x == 0 && self.no_zero) || (self.domain_bits < 128 && x >> self.domain_bits != 0) {
            return Err(Error::OutsideDomain { value: x.to_string(), bits: self.domain_bits });
        }
        Ok(x)
    }

    fn any(&self, value: u128) -> AnyId {
        if self.wide { AnyId::U128(value) } else { AnyId::U64(value as u64) }
    }

    /// One permutation step, repeated while it lands on 0 in a domain without 0 (cycle
    /// walking: the cycle through 0 is shortened by skipping it, which keeps a bijection).
    fn walk(&self, permutation: &Permutation, x: u128, forward: bool) -> Result<u128, Error> {
        let bits = self.permuted_bits();
        let mut y = apply(permutation, x, bits, forward)?;
        while y == 0 && self.no_zero {
            y = apply(permutation, y, bits, forward)?;
        }
        Ok(y)
    }
}

fn apply(permutation: &Permutation, x: u128, bits: u32, forward: bool) -> Result<u128, Error> {
    match permutation {
        Permutation::Multiply { multiplier, inverse } => {
            let factor = if forward { multiplier } else { inverse };
            Ok(x.wrapping_mul(*factor) & low_mask(bits))
        }
        Permutation::Ff1(ff1) => {
            let digits: Vec<u16> = (0..bits).rev().map(|i| ((x >> i) & 1) as u16).collect();
            let numerals = FlexibleNumeralString::from(digits);
            let out =
                if forward { ff1.encrypt(&[], &numerals) } else { ff1.decrypt(&[], &numerals) }
                    .map_err(|e| Error::InvalidConfig(format!("ff1: {e}")))?;
            Ok(Vec::<u16>::from(out).into_iter().fold(0, |v, d| v << 1 | u128::from(d)))
        }
    }
}

/// The bits an ID of the layout can vary: its width less the bits its diagram fixes at 0 on top.
pub(crate) fn domain_bits(layout: &Layout) -> u32 {
    let width = layout.id_bits();
    let mut top = width;
    let mut segments = layout.segments().unwrap_or_default();
    segments.sort_by_key(|s| std::cmp::Reverse(s.msb));
    for s in segments {
        if s.msb + 1 != top || s.label != "0" {
            break;
        }
        top = s.lsb;
    }
    top
}

fn zero(layout: &Layout) -> AnyId {
    if layout.id_bits() == 128 { AnyId::U128(0) } else { AnyId::U64(0) }
}

fn low_mask(bits: u32) -> u128 {
    if bits >= 128 { u128::MAX } else { (1 << bits) - 1 }
}

/// The inverse of an odd number mod 2^128 (Newton's iteration doubles the correct bits).
fn inverse_odd(a: u128) -> u128 {
    let mut x = a; // correct to 3 bits for any odd a
    for _ in 0..7 {
        x = x.wrapping_mul(2u128.wrapping_sub(a.wrapping_mul(x)));
    }
    x
}

#[cfg(feature = "serde")]
mod hex_bytes {
    //! Byte strings as lowercase hex in key files.

    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        if text.len() % 2 != 0 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(D::Error::custom("a key is an even number of hex digits"));
        }
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).map_err(D::Error::custom))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NIST SP 800-38G's FF1 samples 7 to 9 (AES-256), through the same `fpe` FF1 we use.
    #[test]
    fn nist_ff1_samples_7_to_9() {
        let key: Vec<u8> = [
            0x2B, 0x7E, 0x15, 0x16, 0x28, 0xAE, 0xD2, 0xA6, 0xAB, 0xF7, 0x15, 0x88, 0x09, 0xCF,
            0x4F, 0x3C, 0xEF, 0x43, 0x59, 0xD8, 0xD5, 0x80, 0xAA, 0x4F, 0x7F, 0x03, 0x6D, 0x6F,
            0x04, 0xFC, 0x6A, 0x94,
        ]
        .to_vec();
        let digits = |text: &str| -> Vec<u16> {
            text.chars().map(|c| c.to_digit(36).expect("a base-36 digit") as u16).collect()
        };
        for (radix, tweak, pt, ct) in [
            (10, &b""[..], "0123456789", "6657667009"),
            (10, b"9876543210", "0123456789", "1001623463"),
            (36, b"7777pqrs777", "0123456789abcdefghi", "xs8a0azh2avyalyzuwd"),
        ] {
            let ff1 = FF1::<Aes256>::new(&key, radix).expect("ff1");
            let out = ff1.encrypt(tweak, &FlexibleNumeralString::from(digits(pt))).expect("enc");
            let out = Vec::<u16>::from(out);
            assert_eq!(out, digits(ct), "sample {pt} radix {radix}");
            let back = ff1.decrypt(tweak, &FlexibleNumeralString::from(out)).expect("dec");
            assert_eq!(Vec::<u16>::from(back), digits(pt));
        }
    }

    #[test]
    fn odd_inverses() {
        for a in [1_u128, 3, 0x9e37_79b9_7f4a_7c15, u128::MAX] {
            assert_eq!(a.wrapping_mul(inverse_odd(a)), 1, "{a:#x}");
        }
    }
}
