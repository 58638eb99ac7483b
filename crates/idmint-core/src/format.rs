//! Text forms of IDs: decimal, hex, binary, base64 (two kinds), Crockford base32, base62, UUID
//! and .NET byte order, each with a strict parser.
//!
//! The parsers accept exactly what the encoders write, give or take the spellings each format
//! documents: letter case (hex, `uuid`, `bytes`, base32), leading zeros (decimal, binary) and
//! Crockford's aliases (base32). Nothing is trimmed, and no prefix, sign or separator is
//! skipped. Positions in error messages count characters from 1.

use std::{fmt, str::FromStr};

use base64::{
    DecodeError, DecodeSliceError, Engine as _,
    engine::general_purpose::{GeneralPurpose, STANDARD, URL_SAFE_NO_PAD},
};

use crate::Error;

/// A text form of an ID.
///
/// The examples are the 64-bit ID `5828128208445124609` (from go-flakeid's README) in each form.
///
/// | name | 64-bit example | notes |
/// | --- | --- | --- |
/// | `decimal` | `5828128208445124609` | digits only |
/// | `hex` | `50e1abba11ce3001` | lower-case, zero-padded to the ID's width (16 or 32 digits) |
/// | `binary` | `101000011100001101010111011101000010001110011100011000000000001` | no leading zeros, as Go's `%b` |
/// | `base64le` | `ATDOEbqr4VA=` | standard base64 of the little-endian bytes (go-flakeid's README) |
/// | `base64url` | `UOGruhHOMAE` | URL-safe base64 of the big-endian bytes, unpadded |
/// | `base32` | `51RDBQ88WWC01` | Crockford, fixed width (13 or 26), sorts like the number |
/// | `base62` | `6wWt7PwWTz7` | `0-9A-Za-z`, fixed width (11 or 22), sorts like the number |
/// | `uuid` | (none) | 128-bit IDs only, e.g. `01020304-0605-0807-090a-0b0c100f0e0d` |
/// | `bytes` | `50e1abba11ce3001` | 128-bit: the 16 bytes in .NET `Guid.ToByteArray()` order; 64-bit: big-endian, as `hex` |
/// | `sqlguid-bytes` | (none) | 128-bit IDs only: the 16 bytes of HotGuid's `ToSqlGuid`, which SQL Server sorts like the ID |
///
/// # Example
///
/// ```
/// use idmint_core::Format;
///
/// let format: Format = "base64le".parse()?;
/// assert_eq!(format.encode_u64(6448830824900882437)?, "BXDOxnfZflk=");
/// assert_eq!(format.parse_u64("BXDOxnfZflk=")?, 6448830824900882437);
/// assert_eq!(Format::Base32.encode_u64(5828128208445124609)?, "51RDBQ88WWC01");
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Base 10, digits only.
    ///
    /// Parsing accepts leading zeros, but no sign, space or separator.
    Decimal,
    /// Base 16, lower-case, zero-padded to the ID's full width.
    ///
    /// Parsing needs exactly 16 or 32 digits, in either case, without `0x`.
    Hex,
    /// Base 2 without leading zeros, as Go's `%b`; zero is `0`.
    ///
    /// Parsing accepts 1 to 64 (or 128) digits, leading zeros included.
    Binary,
    /// Standard base64 (with padding) of the little-endian bytes.
    ///
    /// Parsing needs the canonical text: 12 (or 24) characters, padding included, and no bits
    /// set beyond the value's bytes.
    Base64Le,
    /// URL-safe base64 (no padding) of the big-endian bytes.
    ///
    /// Parsing needs the canonical text: 11 (or 22) characters, no padding, and no bits set
    /// beyond the value's bytes.
    Base64Url,
    /// Crockford base32, fixed width, order-preserving: 13 (or 26) upper-case characters.
    ///
    /// Parsing needs the full width, ignores case and reads Crockford's aliases `O` as `0` and
    /// `I` and `L` as `1`; it refuses `U` and hyphens.
    Base32,
    /// Base 62 (`0-9A-Za-z`), fixed width, order-preserving: 11 (or 22) characters, left-padded
    /// with `0`.
    ///
    /// Parsing needs the full width; case matters.
    Base62,
    /// An RFC 4122-style hyphenated string of a 128-bit value: 8-4-4-4-12 lower-case hex digits
    /// of the big-endian bytes.
    ///
    /// Parsing accepts either case, and nothing around the 36 characters (no braces, no
    /// `urn:uuid:`).
    Uuid,
    /// The bytes as hex: .NET `Guid.ToByteArray()` order for 128-bit IDs, big-endian for 64-bit.
    ///
    /// For 128-bit IDs the big-endian bytes `b0..b15` (those of the [`Uuid`](Self::Uuid)
    /// text) are written as `b3 b2 b1 b0 b5 b4 b7 b6 b8..b15`. Parsing needs exactly 32 (or 16)
    /// hex digits, in either case.
    Bytes,
    /// The bytes of HotGuid's `ToSqlGuid` as hex: 128-bit IDs only. With `g` the
    /// `Guid.ToByteArray()` bytes (those of [`Bytes`](Self::Bytes)), the bytes are
    /// `g[12..=15] g[10..=11] g[8..=9] g7 g6 g3 g2 g1 g0 g5 g4`, so that SQL Server, which
    /// compares a `uniqueidentifier` by bytes 10..=15, then 8..=9, 6..=7, 4..=5, 0..=3, sorts
    /// them as the IDs sort; `new SqlGuid(bytes)` takes them as they are. Parsing needs
    /// exactly 32 hex digits, in either case.
    SqlGuidBytes,
}

impl Format {
    /// Every format, in the order of the table above.
    pub const ALL: [Format; 10] = [
        Format::Decimal,
        Format::Hex,
        Format::Binary,
        Format::Base64Le,
        Format::Base64Url,
        Format::Base32,
        Format::Base62,
        Format::Uuid,
        Format::Bytes,
        Format::SqlGuidBytes,
    ];

    /// The names accepted by [`FromStr`], in the order of [`ALL`](Self::ALL).
    pub const NAMES: [&'static str; 10] = [
        "decimal",
        "hex",
        "binary",
        "base64le",
        "base64url",
        "base32",
        "base62",
        "uuid",
        "bytes",
        "sqlguid-bytes",
    ];

    /// The format's name.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Format::Base32.name(), "base32");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Format::Decimal => "decimal",
            Format::Hex => "hex",
            Format::Binary => "binary",
            Format::Base64Le => "base64le",
            Format::Base64Url => "base64url",
            Format::Base32 => "base32",
            Format::Base62 => "base62",
            Format::Uuid => "uuid",
            Format::Bytes => "bytes",
            Format::SqlGuidBytes => "sqlguid-bytes",
        }
    }

    /// Whether the format can represent IDs of `bits` bits (64 or 128).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Format;
    ///
    /// assert!(!Format::Uuid.supports(64));
    /// assert!(Format::Uuid.supports(128));
    /// assert!(!Format::SqlGuidBytes.supports(64));
    /// ```
    pub fn supports(self, bits: u32) -> bool {
        match self {
            Format::Uuid | Format::SqlGuidBytes => bits == 128,
            _ => bits == 64 || bits == 128,
        }
    }

    /// Writes `value` as a new string.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedFormat`] for [`Format::Uuid`], which needs 128 bits.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Format;
    ///
    /// assert_eq!(Format::Hex.encode_u64(255)?, "00000000000000ff");
    /// assert_eq!(Format::Binary.encode_u64(5)?, "101");
    /// assert_eq!(Format::Base62.encode_u64(61)?, "0000000000z");
    /// assert!(Format::Uuid.encode_u64(1).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn encode_u64(self, value: u64) -> Result<String, Error> {
        let mut out = String::with_capacity(self.max_len(64));
        self.write_u64(value, &mut out)?;
        Ok(out)
    }

    /// Appends `value` to `out`, without allocating beyond growing `out`.
    ///
    /// This is the fast path for printing many IDs: reuse one `String` and clear it between
    /// IDs, or let it collect one ID per line. On error nothing is appended.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedFormat`] for [`Format::Uuid`], which needs 128 bits.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Format;
    ///
    /// let mut out = String::new();
    /// for id in [1, 22, 333] {
    ///     Format::Decimal.write_u64(id, &mut out)?;
    ///     out.push('\n');
    /// }
    /// assert_eq!(out, "1\n22\n333\n");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn write_u64(self, value: u64, out: &mut String) -> Result<(), Error> {
        match self {
            Format::Decimal => write_decimal_u64(value, out),
            Format::Hex | Format::Bytes => write_hex_u64(value, out),
            Format::Binary => write_binary(u128::from(value), out),
            Format::Base64Le => STANDARD.encode_string(value.to_le_bytes(), out),
            Format::Base64Url => URL_SAFE_NO_PAD.encode_string(value.to_be_bytes(), out),
            Format::Base32 => write_base32(u128::from(value), 64, out),
            Format::Base62 => write_base62_u64(value, out),
            Format::Uuid | Format::SqlGuidBytes => {
                return Err(Error::UnsupportedFormat { format: self, bits: 64 });
            }
        }
        Ok(())
    }

    /// Reads a 64-bit value written in this format.
    ///
    /// The parser is strict: see the notes on each variant for exactly what it accepts.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidText`] saying what is wrong with `text` (a character, the length, a value
    /// that needs more than 64 bits, non-canonical base64); [`Error::UnsupportedFormat`] for
    /// [`Format::Uuid`].
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Format;
    ///
    /// assert_eq!(Format::Hex.parse_u64("cb54ecf2840a0015")?, 0xcb54_ecf2_840a_0015);
    /// assert_eq!(Format::Base32.parse_u64("51rdbq88wwcoi")?, 5828128208445124609);
    ///
    /// let err = Format::Hex.parse_u64("00ff").unwrap_err();
    /// assert_eq!(err.to_string(), "invalid hex id: expected 16 hex digits, found 4");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn parse_u64(self, text: &str) -> Result<u64, Error> {
        if !self.supports(64) {
            return Err(Error::UnsupportedFormat { format: self, bits: 64 });
        }
        let value = self.parse_bits(text, 64)?;
        u64::try_from(value).map_err(|_| too_big(self, 64))
    }

    /// Writes a 128-bit `value` as a new string.
    ///
    /// Every format supports 128-bit values; the fixed-width ones are twice as wide as for
    /// 64-bit values.
    ///
    /// # Errors
    ///
    /// None today; the `Result` matches [`encode_u64`](Self::encode_u64) and leaves room for
    /// formats that cannot represent 128-bit values.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Format;
    ///
    /// let id = 0x0102_0304_0605_0807_090a_0b0c_100f_0e0d_u128;
    /// assert_eq!(Format::Uuid.encode_u128(id)?, "01020304-0605-0807-090a-0b0c100f0e0d");
    /// assert_eq!(Format::Bytes.encode_u128(id)?, "0403020105060708090a0b0c100f0e0d");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn encode_u128(self, value: u128) -> Result<String, Error> {
        let mut out = String::with_capacity(self.max_len(128));
        self.write_u128(value, &mut out);
        Ok(out)
    }

    /// Reads a 128-bit value written in this format.
    ///
    /// The parser is strict: see the notes on each variant for exactly what it accepts.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidText`] saying what is wrong with `text` (a character, the length, a value
    /// that needs more than 128 bits, non-canonical base64, a misplaced hyphen).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Format;
    ///
    /// let id = Format::Uuid.parse_u128("01020304-0605-0807-090A-0B0C100F0E0D")?;
    /// assert_eq!(Format::Bytes.parse_u128("0403020105060708090a0b0c100f0e0d")?, id);
    /// assert!(Format::Uuid.parse_u128("{01020304-0605-0807-090a-0b0c100f0e0d}").is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn parse_u128(self, text: &str) -> Result<u128, Error> {
        self.parse_bits(text, 128)
    }

    /// The longest text the format writes for a `bits`-bit value (64 or 128).
    fn max_len(self, bits: u32) -> usize {
        match self {
            // u64::MAX and u128::MAX have 20 and 39 digits.
            Format::Decimal if bits > 64 => 39,
            Format::Decimal => 20,
            Format::Hex | Format::Bytes => hex_digits(bits),
            Format::SqlGuidBytes => hex_digits(128),
            Format::Binary => bits as usize,
            Format::Base64Le | Format::Base64Url => base64_len(self, bits),
            Format::Base32 => base32_width(bits),
            Format::Base62 => base62_width(bits),
            Format::Uuid => UUID_LEN,
        }
    }

    /// Appends a 128-bit `value`; every format supports 128 bits.
    fn write_u128(self, value: u128, out: &mut String) {
        match self {
            Format::Decimal => write_decimal_u128(value, out),
            Format::Hex => write_hex_u128(value, out),
            Format::Binary => write_binary(value, out),
            Format::Base64Le => STANDARD.encode_string(value.to_le_bytes(), out),
            Format::Base64Url => URL_SAFE_NO_PAD.encode_string(value.to_be_bytes(), out),
            Format::Base32 => write_base32(value, 128, out),
            Format::Base62 => write_base62_u128(value, out),
            Format::Uuid => write_uuid(value, out),
            Format::Bytes => write_hex_u128(guid_byte_order(value), out),
            Format::SqlGuidBytes => write_hex_u128(sql_guid_order(value), out),
        }
    }

    /// Parses `text` as a value of at most `bits` bits (64 or 128; `uuid` only 128).
    fn parse_bits(self, text: &str, bits: u32) -> Result<u128, Error> {
        if text.is_empty() {
            return Err(Error::text(self, "text is empty"));
        }
        match self {
            Format::Decimal => parse_decimal(self, text, bits),
            Format::Hex => parse_hex(self, text, hex_digits(bits)),
            Format::Binary => parse_binary(self, text, bits),
            Format::Base64Le | Format::Base64Url => parse_base64(self, text, bits),
            Format::Base32 => parse_base32(self, text, bits),
            Format::Base62 => parse_base62(self, text, bits),
            Format::Uuid => parse_uuid(self, text),
            Format::Bytes => {
                let value = parse_hex(self, text, hex_digits(bits))?;
                Ok(if bits > 64 { guid_byte_order(value) } else { value })
            }
            Format::SqlGuidBytes => {
                parse_hex(self, text, hex_digits(128)).map(sql_guid_order_inverse)
            }
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// Serialized as its name (`"hex"`, `"base64le"`, ...), as `--format` and `format=` take it.
///
/// # Example
///
/// ```
/// use idmint_core::Format;
///
/// assert_eq!(serde_json::to_string(&Format::Base62)?, r#""base62""#);
/// assert_eq!(serde_json::from_str::<Format>(r#""hex""#)?, Format::Hex);
/// assert!(serde_json::from_str::<Format>(r#""nope""#).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[cfg(feature = "serde")]
impl serde::Serialize for Format {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Format {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for Format {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| Error::UnknownFormat(s.to_owned()))
    }
}

/// Lower-case hex digits.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Crockford's base32 alphabet: digits and upper-case letters without I, L, O and U.
const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Base 62 in ASCII order, so that fixed-width strings sort like the numbers.
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Marks a byte that is not a digit in a decoding table.
const NOT_A_DIGIT: u8 = 0xff;

/// Crockford base32 digit values, with lower case and the aliases O→0, I→1, L→1; U is refused.
static CROCKFORD_VALUES: [u8; 256] = {
    let mut table = [NOT_A_DIGIT; 256];
    let mut i = 0;
    while i < CROCKFORD.len() {
        table[CROCKFORD[i] as usize] = i as u8;
        table[CROCKFORD[i].to_ascii_lowercase() as usize] = i as u8;
        i += 1;
    }
    table[b'O' as usize] = 0;
    table[b'o' as usize] = 0;
    table[b'I' as usize] = 1;
    table[b'i' as usize] = 1;
    table[b'L' as usize] = 1;
    table[b'l' as usize] = 1;
    table
};

/// Hex digit values, either case.
static HEX_VALUES: [u8; 256] = {
    let mut table = [NOT_A_DIGIT; 256];
    let mut i = 0;
    while i < HEX_DIGITS.len() {
        table[HEX_DIGITS[i] as usize] = i as u8;
        table[HEX_DIGITS[i].to_ascii_uppercase() as usize] = i as u8;
        i += 1;
    }
    table
};

/// Base 62 digit values.
static BASE62_VALUES: [u8; 256] = {
    let mut table = [NOT_A_DIGIT; 256];
    let mut i = 0;
    while i < BASE62.len() {
        table[BASE62[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// `00`, `01`, …, `99`: two decimal digits per step halves the divisions.
static DECIMAL_PAIRS: [u8; 200] = {
    let mut table = [0; 200];
    let mut i = 0;
    while i < 100 {
        table[2 * i] = b'0' + (i / 10) as u8;
        table[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    table
};

/// The length of a hyphenated UUID.
const UUID_LEN: usize = 36;

/// The 0-based indexes of the hyphens in a UUID.
const UUID_HYPHENS: [usize; 4] = [8, 13, 18, 23];

/// Hex digits of a `bits`-bit value: 16 or 32.
fn hex_digits(bits: u32) -> usize {
    bits as usize / 4
}

/// Crockford base32 width for `bits` bits: 13 or 26.
fn base32_width(bits: u32) -> usize {
    (bits as usize).div_ceil(5)
}

/// Base 62 width for `bits` bits: 11 or 22.
fn base62_width(bits: u32) -> usize {
    if bits > 64 { 22 } else { 11 }
}

/// Base64 length of a `bits`-bit value, with padding for `base64le`: 12 or 24, 11 or 22.
fn base64_len(format: Format, bits: u32) -> usize {
    let bytes = bits as usize / 8;
    if format == Format::Base64Le { bytes.div_ceil(3) * 4 } else { (bytes * 8).div_ceil(6) }
}

/// Appends ASCII bytes that an encoder wrote.
fn push_ascii(out: &mut String, ascii: &[u8]) {
    out.push_str(std::str::from_utf8(ascii).expect("encoders write ASCII"));
}

/// Writes `value` in decimal right-aligned at the end of `buf`; returns where the digits start.
///
/// `buf` must have room for the digits (20 bytes always do).
fn fill_decimal(mut value: u64, buf: &mut [u8]) -> usize {
    let mut start = buf.len();
    // Four digits per division, then two at a time from the table.
    while value >= 10_000 {
        let four = (value % 10_000) as usize;
        value /= 10_000;
        start -= 4;
        buf[start..start + 2].copy_from_slice(decimal_pair(four / 100));
        buf[start + 2..start + 4].copy_from_slice(decimal_pair(four % 100));
    }
    let mut value = value as usize;
    if value >= 100 {
        start -= 2;
        buf[start..start + 2].copy_from_slice(decimal_pair(value % 100));
        value /= 100;
    }
    if value >= 10 {
        start -= 2;
        buf[start..start + 2].copy_from_slice(decimal_pair(value));
    } else {
        start -= 1;
        buf[start] = b'0' + value as u8;
    }
    start
}

/// The two digits of `n` (below 100).
fn decimal_pair(n: usize) -> &'static [u8] {
    &DECIMAL_PAIRS[2 * n..2 * n + 2]
}

fn write_decimal_u64(value: u64, out: &mut String) {
    let mut buf = [0; 20];
    let start = fill_decimal(value, &mut buf);
    push_ascii(out, &buf[start..]);
}

fn write_decimal_u128(value: u128, out: &mut String) {
    /// 10^19, the largest power of ten that fits in a `u64`.
    const CHUNK: u128 = 10_000_000_000_000_000_000;
    let mut buf = [b'0'; 39];
    let mut end = buf.len();
    let mut rest = value;
    // Peel off 19 digits at a time with one `u128` division, then use `u64` arithmetic.
    loop {
        match u64::try_from(rest) {
            Ok(head) => {
                let start = fill_decimal(head, &mut buf[..end]);
                push_ascii(out, &buf[start..]);
                return;
            }
            Err(_) => {
                let chunk = (rest % CHUNK) as u64;
                rest /= CHUNK;
                // The chunk is zero-padded to 19 digits: `buf` starts out as all '0'.
                let start = fill_decimal(chunk, &mut buf[..end]);
                debug_assert!(start >= end - 19);
                end -= 19;
            }
        }
    }
}

fn write_hex_u64(value: u64, out: &mut String) {
    let mut buf = [0; 16];
    for (i, slot) in buf.iter_mut().enumerate() {
        *slot = HEX_DIGITS[(value >> (60 - 4 * i)) as usize & 0xf];
    }
    push_ascii(out, &buf);
}

fn write_hex_u128(value: u128, out: &mut String) {
    write_hex_u64((value >> 64) as u64, out);
    write_hex_u64(value as u64, out);
}

/// Binary without leading zeros; zero is `0`.
fn write_binary(value: u128, out: &mut String) {
    let mut buf = [b'0'; 128];
    let len = (128 - value.leading_zeros() as usize).max(1);
    // Shifting `u64` halves is much cheaper than shifting a `u128` by a variable amount.
    let (high, low) = ((value >> 64) as u64, value as u64);
    for (i, slot) in buf[..len].iter_mut().rev().enumerate() {
        let bit = if i < 64 { low >> i } else { high >> (i - 64) };
        *slot = b'0' + (bit & 1) as u8;
    }
    push_ascii(out, &buf[..len]);
}

fn write_base32(value: u128, bits: u32, out: &mut String) {
    let mut buf = [0; 26];
    let width = base32_width(bits);
    for (i, slot) in buf[..width].iter_mut().rev().enumerate() {
        *slot = CROCKFORD[(value >> (5 * i)) as usize & 31];
    }
    push_ascii(out, &buf[..width]);
}

fn write_base62_u64(mut value: u64, out: &mut String) {
    let mut buf = [0; 11];
    for slot in buf.iter_mut().rev() {
        *slot = BASE62[(value % 62) as usize];
        value /= 62;
    }
    push_ascii(out, &buf);
}

fn write_base62_u128(mut value: u128, out: &mut String) {
    let mut buf = [0; 22];
    for slot in buf.iter_mut().rev() {
        *slot = BASE62[(value % 62) as usize];
        value /= 62;
    }
    push_ascii(out, &buf);
}

/// 8-4-4-4-12 lower-case hex of the big-endian bytes.
fn write_uuid(value: u128, out: &mut String) {
    let mut buf = [b'-'; UUID_LEN];
    let mut at = 0;
    for (i, byte) in value.to_be_bytes().into_iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            at += 1;
        }
        buf[at] = HEX_DIGITS[usize::from(byte >> 4)];
        buf[at + 1] = HEX_DIGITS[usize::from(byte & 0xf)];
        at += 2;
    }
    push_ascii(out, &buf);
}

/// The SqlGuid bytes of a 128-bit value, as one big-endian `u128`: HotGuid's `ToSqlGuid`
/// permutation of the `ToByteArray()` bytes (see [`Format::SqlGuidBytes`]).
fn sql_guid_order(value: u128) -> u128 {
    let g = guid_byte_order(value).to_be_bytes();
    u128::from_be_bytes(SQL_GUID_ORDER.map(|i| g[i]))
}

/// The inverse of [`sql_guid_order`]: the value whose SqlGuid bytes are `sql`'s.
fn sql_guid_order_inverse(sql: u128) -> u128 {
    let sql = sql.to_be_bytes();
    let mut g = [0; 16];
    for (at, &from) in SQL_GUID_ORDER.iter().enumerate() {
        g[from] = sql[at];
    }
    guid_byte_order(u128::from_be_bytes(g))
}

/// `SQL_GUID_ORDER[i]` is the `ToByteArray()` index of SqlGuid byte `i` (HotGuid's
/// `ToSqlGuid` map).
const SQL_GUID_ORDER: [usize; 16] = [12, 13, 14, 15, 10, 11, 8, 9, 7, 6, 3, 2, 1, 0, 5, 4];

/// Swaps between the UUID's big-endian byte order and .NET `Guid.ToByteArray()` order.
///
/// .NET stores the first three groups (4, 2 and 2 bytes) little-endian, so the big-endian bytes
/// `b0..b15` become `b3 b2 b1 b0 b5 b4 b7 b6 b8..b15`. The swap is its own inverse.
fn guid_byte_order(value: u128) -> u128 {
    let b = value.to_be_bytes();
    u128::from_be_bytes([
        b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6], b[8], b[9], b[10], b[11], b[12], b[13],
        b[14], b[15],
    ])
}

/// The error for the character that starts at byte `at` of `text`.
#[cold]
fn invalid_char(format: Format, text: &str, at: usize) -> Error {
    let (before, rest) = text.split_at_checked(at).unwrap_or((text, ""));
    let position = before.chars().count() + 1;
    match rest.chars().next() {
        Some(c) => Error::text(
            format,
            format!("invalid character `{}` at position {position}", c.escape_debug()),
        ),
        None => Error::text(format, format!("invalid character at position {position}")),
    }
}

/// The error for a value that needs more than `bits` bits.
#[cold]
fn too_big(format: Format, bits: u32) -> Error {
    Error::text(format, format!("value does not fit in {bits} bits"))
}

/// Refuses the first byte of `text` that is not `allowed`.
///
/// `allowed` only accepts ASCII, so the first refused byte starts a character.
fn check_chars(format: Format, text: &str, allowed: impl Fn(u8) -> bool) -> Result<(), Error> {
    match text.bytes().position(|b| !allowed(b)) {
        Some(at) => Err(invalid_char(format, text, at)),
        None => Ok(()),
    }
}

/// The largest value of `bits` bits.
fn max_value(bits: u32) -> u128 {
    u128::MAX >> (128 - bits)
}

fn parse_decimal(format: Format, text: &str, bits: u32) -> Result<u128, Error> {
    check_chars(format, text, |b| b.is_ascii_digit())?;
    if bits <= 64 {
        // `u64` arithmetic is much cheaper than `u128`.
        return text
            .bytes()
            .try_fold(0_u64, |value, b| {
                value.checked_mul(10).and_then(|value| value.checked_add(u64::from(b - b'0')))
            })
            .map(u128::from)
            .ok_or_else(|| too_big(format, bits));
    }
    text.bytes()
        .try_fold(0_u128, |value, b| {
            value.checked_mul(10).and_then(|value| value.checked_add(u128::from(b - b'0')))
        })
        .ok_or_else(|| too_big(format, bits))
}

/// Exactly `digits` hex digits, either case.
fn parse_hex(format: Format, text: &str, digits: usize) -> Result<u128, Error> {
    check_chars(format, text, |b| HEX_VALUES[usize::from(b)] != NOT_A_DIGIT)?;
    if text.len() != digits {
        return Err(Error::text(
            format,
            format!("expected {digits} hex digits, found {}", text.len()),
        ));
    }
    Ok(text.bytes().fold(0, |value, b| (value << 4) | hex_value(b)))
}

/// The value of an ASCII hex digit (either case); the caller has checked that `b` is one.
fn hex_value(b: u8) -> u128 {
    u128::from(HEX_VALUES[usize::from(b)])
}

fn parse_binary(format: Format, text: &str, bits: u32) -> Result<u128, Error> {
    check_chars(format, text, |b| b == b'0' || b == b'1')?;
    if text.len() > bits as usize {
        return Err(Error::text(
            format,
            format!("expected 1 to {bits} binary digits, found {}", text.len()),
        ));
    }
    Ok(text.bytes().fold(0, |value, b| (value << 1) | u128::from(b - b'0')))
}

/// Base64 of the 8 or 16 bytes, canonical: padding exactly as the encoder writes it (`base64le`)
/// or none at all (`base64url`), and no bits set beyond the value's bytes.
fn parse_base64(format: Format, text: &str, bits: u32) -> Result<u128, Error> {
    let (engine, symbols): (&GeneralPurpose, [u8; 2]) = match format {
        Format::Base64Le => (&STANDARD, *b"+/"),
        _ => (&URL_SAFE_NO_PAD, *b"-_"),
    };
    // `=` gets past this check so that the length and padding errors can speak of it.
    check_chars(format, text, |b| b.is_ascii_alphanumeric() || symbols.contains(&b) || b == b'=')?;
    let len = base64_len(format, bits);
    if text.len() != len {
        let padding = match (format, bits) {
            (Format::Base64Le, 64) => "including `=` padding",
            (Format::Base64Le, _) => "including `==` padding",
            _ => "without padding",
        };
        return Err(Error::text(
            format,
            format!("expected {len} characters {padding}, found {}", text.len()),
        ));
    }
    let bytes = bits as usize / 8;
    let mut buf = [0_u8; 24];
    let decoded = engine.decode_slice(text, &mut buf).map_err(|err| match err {
        DecodeSliceError::DecodeError(err) => base64_error(format, text, err),
        DecodeSliceError::OutputSliceTooSmall => {
            Error::text(format, format!("decodes to more than {} bytes", buf.len()))
        }
    })?;
    if decoded != bytes {
        return Err(Error::text(format, format!("decodes to {decoded} bytes, expected {bytes}")));
    }
    let value = if bits > 64 {
        let array: [u8; 16] = buf[..16].try_into().expect("16 bytes");
        if format == Format::Base64Le {
            u128::from_le_bytes(array)
        } else {
            u128::from_be_bytes(array)
        }
    } else {
        let array: [u8; 8] = buf[..8].try_into().expect("8 bytes");
        u128::from(if format == Format::Base64Le {
            u64::from_le_bytes(array)
        } else {
            u64::from_be_bytes(array)
        })
    };
    Ok(value)
}

/// Says what the base64 decoder found wrong, with positions counted from 1.
#[cold]
fn base64_error(format: Format, text: &str, err: DecodeError) -> Error {
    match err {
        DecodeError::InvalidByte(at, b'=') => Error::text(
            format,
            format!("misplaced `=` padding at position {}", char_position(text, at)),
        ),
        DecodeError::InvalidByte(at, _) => invalid_char(format, text, at),
        DecodeError::InvalidLength(symbols) => {
            Error::text(format, format!("{symbols} base64 symbols do not make whole bytes"))
        }
        DecodeError::InvalidLastSymbol(offset, symbol) => Error::text(
            format,
            format!(
                "non-canonical base64: the last symbol `{}` at position {} has unused bits set",
                char::from(symbol).escape_debug(),
                char_position(text, offset)
            ),
        ),
        DecodeError::InvalidPadding if format == Format::Base64Url => {
            Error::text(format, "unexpected `=` padding")
        }
        DecodeError::InvalidPadding => Error::text(format, "non-canonical `=` padding"),
    }
}

/// The 1-based character position of byte `at` of `text`.
fn char_position(text: &str, at: usize) -> usize {
    text.get(..at).map_or(at, |before| before.chars().count()) + 1
}

/// Fixed-width Crockford base32, case-insensitive, with the aliases O→0 and I, L→1.
fn parse_base32(format: Format, text: &str, bits: u32) -> Result<u128, Error> {
    check_chars(format, text, |b| CROCKFORD_VALUES[usize::from(b)] != NOT_A_DIGIT)?;
    let width = base32_width(bits);
    if text.len() != width {
        return Err(Error::text(
            format,
            format!("expected {width} characters, found {}", text.len()),
        ));
    }
    // The first character carries the top `bits - 5 * (width - 1)` bits: 4 of 64, 3 of 128.
    let top_bits = bits as usize - 5 * (width - 1);
    let first = text.as_bytes()[0];
    let max_first = (1 << top_bits) - 1;
    if CROCKFORD_VALUES[usize::from(first)] > max_first {
        return Err(Error::text(
            format,
            format!(
                "value does not fit in {bits} bits: the first character `{}` is above `{}`",
                char::from(first),
                char::from(CROCKFORD[usize::from(max_first)])
            ),
        ));
    }
    Ok(text.bytes().fold(0, |value, b| (value << 5) | u128::from(CROCKFORD_VALUES[usize::from(b)])))
}

/// Fixed-width base 62.
fn parse_base62(format: Format, text: &str, bits: u32) -> Result<u128, Error> {
    check_chars(format, text, |b| b.is_ascii_alphanumeric())?;
    let width = base62_width(bits);
    if text.len() != width {
        return Err(Error::text(
            format,
            format!("expected {width} characters, found {}", text.len()),
        ));
    }
    let max = max_value(bits);
    text.bytes().try_fold(0_u128, |value, b| {
        value
            .checked_mul(62)
            .and_then(|value| value.checked_add(u128::from(BASE62_VALUES[usize::from(b)])))
            .filter(|&value| value <= max)
            .ok_or_else(|| too_big(format, bits))
    })
}

/// Hex as Go's `%x` prints it: 1 to `bits`/4 digits (either case), no leading zero unless the
/// value is 0 (go-flakeid's own text, e.g. its README's `1530d02cb005000`), optionally after
/// the `0x` or `0X` that `%#x` and a `0x%x` format put in front.
pub(crate) fn parse_unpadded_hex(text: &str, bits: u32) -> Result<u128, Error> {
    let format = Format::Hex;
    let text = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")).unwrap_or(text);
    check_chars(format, text, |b| HEX_VALUES[usize::from(b)] != NOT_A_DIGIT)?;
    let most = hex_digits(bits);
    if text.is_empty() || text.len() > most {
        return Err(Error::text(
            format,
            format!("expected 1 to {most} hex digits, found {}", text.len()),
        ));
    }
    if text.len() > 1 && text.starts_with('0') {
        return Err(Error::text(
            format,
            format!(
                "expected {most} hex digits, or fewer without leading zeros, found {}",
                text.len()
            ),
        ));
    }
    Ok(text.bytes().fold(0, |value, b| (value << 4) | hex_value(b)))
}

/// The other forms .NET's `Guid.Parse` reads (the D form, 8-4-4-4-12, is [`Format::Uuid`]):
/// N (32 digits), B (`{D}`), P (`(D)`) and X (`{0x8,0x4,0x4,{0x2,0x2,0x2,0x2,0x2,0x2,0x2,0x2}}`,
/// each number of exactly that many digits). All name the same 128-bit value as the D form
/// of the same digits. `None` when `text` has none of these shapes.
pub(crate) fn parse_guid_forms(text: &str) -> Option<Result<u128, Error>> {
    let format = Format::Uuid;
    let bracketed =
        |open: &str, close: &str| text.strip_prefix(open).and_then(|t| t.strip_suffix(close));
    if text.len() == 32 {
        return Some(parse_hex(format, text, 32));
    }
    if let Some(d) = bracketed("{", "}").filter(|d| !d.starts_with("0x") && !d.starts_with("0X")) {
        return Some(parse_uuid(format, d));
    }
    if let Some(d) = bracketed("(", ")") {
        return Some(parse_uuid(format, d));
    }
    let inner = bracketed("{", "}}")?;
    let (head, tail) = inner.split_once(",{")?;
    let numbers: Vec<&str> = head.split(',').chain(tail.split(',')).collect();
    let widths = [8, 4, 4, 2, 2, 2, 2, 2, 2, 2, 2];
    if numbers.len() != widths.len() {
        return Some(Err(Error::text(
            format,
            format!("expected 11 numbers in the X form, found {}", numbers.len()),
        )));
    }
    let mut value = 0_u128;
    for (number, width) in numbers.into_iter().zip(widths) {
        let digits = number.strip_prefix("0x").or_else(|| number.strip_prefix("0X"));
        let Some(digits) = digits else {
            return Some(Err(Error::text(format, format!("expected 0x before `{number}`"))));
        };
        match parse_hex(format, digits, width) {
            Ok(part) => value = (value << (4 * width)) | part,
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(value))
}

/// 8-4-4-4-12 hex digits (either case) with hyphens, nothing around them.
fn parse_uuid(format: Format, text: &str) -> Result<u128, Error> {
    check_chars(format, text, |b| HEX_VALUES[usize::from(b)] != NOT_A_DIGIT || b == b'-')?;
    if text.len() != UUID_LEN {
        return Err(Error::text(
            format,
            format!("expected {UUID_LEN} characters in 8-4-4-4-12 form, found {}", text.len()),
        ));
    }
    let mut value = 0;
    for (i, b) in text.bytes().enumerate() {
        match (UUID_HYPHENS.contains(&i), b == b'-') {
            (true, true) => {}
            (false, false) => value = (value << 4) | hex_value(b),
            (true, false) => {
                return Err(Error::text(
                    format,
                    format!("expected `-` at position {}, found `{}`", i + 1, char::from(b)),
                ));
            }
            (false, true) => {
                return Err(Error::text(format, format!("unexpected `-` at position {}", i + 1)));
            }
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A value of one of the two widths.
    #[derive(Debug, Clone, Copy)]
    enum Value {
        W64(u64),
        W128(u128),
    }

    use Value::{W64, W128};

    /// The go-flakeid README's example ID, used in the doc table of [`Format`].
    const FLAKE: u64 = 5_828_128_208_445_124_609;

    /// The UUID vector: its bytes in .NET order are `0403020105060708090a0b0c100f0e0d`.
    const GUID: u128 = 0x0102_0304_0605_0807_090a_0b0c_100f_0e0d;

    /// Encodes `value` to exactly `text` (through every writer) and parses `text` back to it.
    fn check(format: Format, value: Value, text: &str) {
        match value {
            W64(value) => {
                assert_eq!(format.encode_u64(value).as_deref(), Ok(text), "{format} {value}");
                let mut out = String::from("id: ");
                format.write_u64(value, &mut out).unwrap();
                assert_eq!(out, format!("id: {text}"), "{format} {value}");
                assert_eq!(format.parse_u64(text), Ok(value), "{format} {text:?}");
            }
            W128(value) => {
                assert_eq!(format.encode_u128(value).as_deref(), Ok(text), "{format} {value}");
                assert_eq!(format.parse_u128(text), Ok(value), "{format} {text:?}");
            }
        }
    }

    #[test]
    fn encodes_and_parses_the_vectors() {
        let ones_64 = "1".repeat(64);
        let ones_128 = "1".repeat(128);
        let two_to_64 = format!("1{}", "0".repeat(64));
        let cases: &[(Format, Value, &str)] = &[
            // The doc table of `Format`.
            (Format::Decimal, W64(FLAKE), "5828128208445124609"),
            (Format::Hex, W64(FLAKE), "50e1abba11ce3001"),
            (
                Format::Binary,
                W64(FLAKE),
                "101000011100001101010111011101000010001110011100011000000000001",
            ),
            (Format::Base64Le, W64(FLAKE), "ATDOEbqr4VA="),
            (Format::Base64Url, W64(FLAKE), "UOGruhHOMAE"),
            (Format::Base32, W64(FLAKE), "51RDBQ88WWC01"),
            (Format::Base62, W64(FLAKE), "6wWt7PwWTz7"),
            (Format::Bytes, W64(FLAKE), "50e1abba11ce3001"),
            // go-flakeid's README: base64 of the little-endian bytes.
            (Format::Base64Le, W64(6_448_830_824_900_882_437), "BXDOxnfZflk="),
            (Format::Hex, W64(6_448_830_824_900_882_437), "597ed977c6ce7005"),
            // go-flakeid's README, `%b` of timestamp 1537521690763 (epoch 0) and 590836890763
            // (epoch 2000-01-01), counter 1.
            (
                Format::Binary,
                W64(6_448_833_377_654_013_953),
                "101100101111110110110111100101000100010110000000000000000000001",
            ),
            (
                Format::Binary,
                W64(2_478_149_534_274_813_953),
                "10001001100100001001111101111100100010110000000000000000000001",
            ),
            (
                Format::Binary,
                W64(6_448_832_347_327_447_041),
                "101100101111110110110101101101000111110100000000100000000000001",
            ),
            // LableOrg: hex of the 8 bytes.
            (Format::Hex, W64(0xcb54_ecf2_840a_0015), "cb54ecf2840a0015"),
            (Format::Hex, W64(0x0000_0000_0022_0000), "0000000000220000"),
            // 64-bit edges.
            (Format::Decimal, W64(0), "0"),
            (Format::Decimal, W64(1), "1"),
            (Format::Decimal, W64(9), "9"),
            (Format::Decimal, W64(10), "10"),
            (Format::Decimal, W64(100), "100"),
            (Format::Decimal, W64(u64::MAX), "18446744073709551615"),
            (Format::Hex, W64(0), "0000000000000000"),
            (Format::Hex, W64(1), "0000000000000001"),
            (Format::Hex, W64(u64::MAX), "ffffffffffffffff"),
            (Format::Binary, W64(0), "0"),
            (Format::Binary, W64(1), "1"),
            (Format::Binary, W64(u64::MAX), &ones_64),
            (Format::Base64Le, W64(0), "AAAAAAAAAAA="),
            (Format::Base64Le, W64(1), "AQAAAAAAAAA="),
            (Format::Base64Le, W64(u64::MAX), "//////////8="),
            (Format::Base64Url, W64(0), "AAAAAAAAAAA"),
            (Format::Base64Url, W64(1), "AAAAAAAAAAE"),
            (Format::Base64Url, W64(u64::MAX), "__________8"),
            (Format::Base32, W64(0), "0000000000000"),
            (Format::Base32, W64(1), "0000000000001"),
            (Format::Base32, W64(31), "000000000000Z"),
            (Format::Base32, W64(32), "0000000000010"),
            (Format::Base32, W64(u64::MAX), "FZZZZZZZZZZZZ"),
            (Format::Base62, W64(0), "00000000000"),
            (Format::Base62, W64(1), "00000000001"),
            (Format::Base62, W64(61), "0000000000z"),
            (Format::Base62, W64(62), "00000000010"),
            (Format::Base62, W64(u64::MAX), "LygHa16AHYF"),
            (Format::Bytes, W64(0), "0000000000000000"),
            (Format::Bytes, W64(u64::MAX), "ffffffffffffffff"),
            // The UUID and .NET byte order vector.
            (Format::Uuid, W128(GUID), "01020304-0605-0807-090a-0b0c100f0e0d"),
            (Format::Bytes, W128(GUID), "0403020105060708090a0b0c100f0e0d"),
            // HotGuid's `ToSqlGuid` of the same: `g[12..=15] g[10..=11] g[8..=9] g7 g6 g3..g0 g5 g4`.
            (Format::SqlGuidBytes, W128(GUID), "100f0e0d0b0c090a0807010203040605"),
            (Format::SqlGuidBytes, W128(0), "00000000000000000000000000000000"),
            (Format::SqlGuidBytes, W128(u128::MAX), "ffffffffffffffffffffffffffffffff"),
            (Format::Hex, W128(GUID), "0102030406050807090a0b0c100f0e0d"),
            (Format::Base64Le, W128(GUID), "DQ4PEAwLCgkHCAUGBAMCAQ=="),
            (Format::Base64Url, W128(GUID), "AQIDBAYFCAcJCgsMEA8ODQ"),
            (Format::Base32, W128(GUID), "01081G81G5103GJ2GB1G80Y3GD"),
            (Format::Base62, W128(GUID), "01tuWckprc6HL1QwTzeQXt"),
            (Format::Decimal, W128(GUID), "1339673755506439136966050542764625421"),
            // 128-bit edges.
            (Format::Decimal, W128(0), "0"),
            (Format::Decimal, W128(1), "1"),
            (Format::Decimal, W128(u128::from(u64::MAX)), "18446744073709551615"),
            (Format::Decimal, W128(1 << 64), "18446744073709551616"),
            (Format::Decimal, W128(10_u128.pow(19)), "10000000000000000000"),
            (Format::Decimal, W128(10_u128.pow(38) + 1), "100000000000000000000000000000000000001"),
            (Format::Decimal, W128(u128::MAX), "340282366920938463463374607431768211455"),
            (Format::Hex, W128(0), "00000000000000000000000000000000"),
            (Format::Hex, W128(1), "00000000000000000000000000000001"),
            (Format::Hex, W128(u128::MAX), "ffffffffffffffffffffffffffffffff"),
            (Format::Binary, W128(0), "0"),
            (Format::Binary, W128(1), "1"),
            (Format::Binary, W128(1 << 64), &two_to_64),
            (Format::Binary, W128(u128::MAX), &ones_128),
            (Format::Base64Le, W128(0), "AAAAAAAAAAAAAAAAAAAAAA=="),
            (Format::Base64Le, W128(1), "AQAAAAAAAAAAAAAAAAAAAA=="),
            (Format::Base64Le, W128(u128::MAX), "/////////////////////w=="),
            (Format::Base64Url, W128(0), "AAAAAAAAAAAAAAAAAAAAAA"),
            (Format::Base64Url, W128(1), "AAAAAAAAAAAAAAAAAAAAAQ"),
            (Format::Base64Url, W128(u128::MAX), "_____________________w"),
            (Format::Base32, W128(0), "00000000000000000000000000"),
            (Format::Base32, W128(1), "00000000000000000000000001"),
            (Format::Base32, W128(u128::MAX), "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"),
            (Format::Base62, W128(0), "0000000000000000000000"),
            (Format::Base62, W128(1), "0000000000000000000001"),
            (Format::Base62, W128(u128::MAX), "7n42DGM5Tflk9n8mt7Fhc7"),
            (Format::Uuid, W128(0), "00000000-0000-0000-0000-000000000000"),
            (Format::Uuid, W128(1), "00000000-0000-0000-0000-000000000001"),
            (Format::Uuid, W128(u128::MAX), "ffffffff-ffff-ffff-ffff-ffffffffffff"),
            (Format::Bytes, W128(0), "00000000000000000000000000000000"),
            (Format::Bytes, W128(1), "00000000000000000000000000000001"),
            (Format::Bytes, W128(1 << 96), "01000000000000000000000000000000"),
            (Format::Bytes, W128(u128::MAX), "ffffffffffffffffffffffffffffffff"),
        ];
        for &(format, value, text) in cases {
            check(format, value, text);
        }
    }

    #[test]
    fn accepts_the_documented_spellings() {
        let padded_five = format!("{}101", "0".repeat(61));
        let cases: &[(Format, Value, &str)] = &[
            (Format::Decimal, W64(7), "007"),
            (Format::Decimal, W64(u64::MAX), "000018446744073709551615"),
            (Format::Decimal, W128(0), "0000"),
            (Format::Hex, W64(0xcb54_ecf2_840a_0015), "CB54ECF2840A0015"),
            (Format::Hex, W64(0xcb54_ecf2_840a_0015), "Cb54eCf2840A0015"),
            (Format::Binary, W64(5), &padded_five),
            (Format::Binary, W64(0), "00"),
            (Format::Base32, W64(FLAKE), "51rdbq88wwc01"),
            (Format::Base32, W64(FLAKE), "51RDBQ88WWCOI"),
            (Format::Base32, W64(FLAKE), "51rdbq88wwcol"),
            (Format::Base32, W64(FLAKE), "51RDBQ88WWCoL"),
            (Format::Base32, W64(0), "ooooooooooooo"),
            (Format::Base32, W64(u64::MAX), "fzzzzzzzzzzzz"),
            (Format::Uuid, W128(GUID), "01020304-0605-0807-090A-0B0C100F0E0D"),
            (Format::Bytes, W128(GUID), "0403020105060708090A0B0C100F0E0D"),
        ];
        for &(format, value, text) in cases {
            match value {
                W64(value) => assert_eq!(format.parse_u64(text), Ok(value), "{format} {text:?}"),
                W128(value) => assert_eq!(format.parse_u128(text), Ok(value), "{format} {text:?}"),
            }
        }
    }

    #[test]
    fn refuses_bad_text_and_says_why() {
        let ones_65 = "1".repeat(65);
        let zero_and_64_ones = format!("0{}", "1".repeat(64));
        let ones_129 = "1".repeat(129);
        let cases: &[(Format, u32, &str, &str)] = &[
            // Decimal.
            (Format::Decimal, 64, "-1", "invalid character `-` at position 1"),
            (Format::Decimal, 64, "+1", "invalid character `+` at position 1"),
            (Format::Decimal, 64, " 1", "invalid character ` ` at position 1"),
            (Format::Decimal, 64, "1 ", "invalid character ` ` at position 2"),
            (Format::Decimal, 64, "1_000", "invalid character `_` at position 2"),
            (Format::Decimal, 64, "1\n", "invalid character `\\n` at position 2"),
            (Format::Decimal, 64, "0é1", "invalid character `é` at position 2"),
            (Format::Decimal, 64, "１", "invalid character `１` at position 1"),
            (Format::Decimal, 64, "18446744073709551616", "value does not fit in 64 bits"),
            (Format::Decimal, 64, "99999999999999999999999", "value does not fit in 64 bits"),
            (
                Format::Decimal,
                128,
                "340282366920938463463374607431768211456",
                "value does not fit in 128 bits",
            ),
            // Hex.
            (Format::Hex, 64, "00ff", "expected 16 hex digits, found 4"),
            (Format::Hex, 64, "597ed977c6ce70051", "expected 16 hex digits, found 17"),
            (Format::Hex, 64, "0x597ed977c6ce7005", "invalid character `x` at position 2"),
            (Format::Hex, 64, "597ed977c6ce700g", "invalid character `g` at position 16"),
            (Format::Hex, 64, "597ed977c6ce7005 ", "invalid character ` ` at position 17"),
            (Format::Hex, 64, "éé597ed977c6ce70!", "invalid character `é` at position 1"),
            (Format::Hex, 128, "597ed977c6ce7005", "expected 32 hex digits, found 16"),
            // Binary.
            (Format::Binary, 64, "102", "invalid character `2` at position 3"),
            (Format::Binary, 64, "0b101", "invalid character `b` at position 2"),
            (Format::Binary, 64, &ones_65, "expected 1 to 64 binary digits, found 65"),
            (Format::Binary, 64, &zero_and_64_ones, "expected 1 to 64 binary digits, found 65"),
            (Format::Binary, 128, &ones_129, "expected 1 to 128 binary digits, found 129"),
            // Base64 of the little-endian bytes.
            (
                Format::Base64Le,
                64,
                "BXDOxnfZflk",
                "expected 12 characters including `=` padding, found 11",
            ),
            (
                Format::Base64Le,
                64,
                "BXDOxnfZflk==",
                "expected 12 characters including `=` padding, found 13",
            ),
            (
                Format::Base64Le,
                128,
                "AAAAAAAAAAAAAAAAAAAAAA=",
                "expected 24 characters including `==` padding, found 23",
            ),
            (
                Format::Base64Le,
                64,
                "BXDOxnfZfll=",
                "non-canonical base64: the last symbol `l` at position 11 has unused bits set",
            ),
            (
                Format::Base64Le,
                128,
                "/////////////////////x==",
                "non-canonical base64: the last symbol `x` at position 22 has unused bits set",
            ),
            (Format::Base64Le, 64, "BXDO=nfZflk=", "misplaced `=` padding at position 5"),
            (Format::Base64Le, 64, "BXDOxnfZfl-=", "invalid character `-` at position 11"),
            (Format::Base64Le, 64, "AAAAAAAAAA==", "decodes to 7 bytes, expected 8"),
            (Format::Base64Le, 64, "AAAAAAAAAAAA", "decodes to 9 bytes, expected 8"),
            // URL-safe base64 of the big-endian bytes.
            (
                Format::Base64Url,
                64,
                "UOGruhHOMAE=",
                "expected 11 characters without padding, found 12",
            ),
            (Format::Base64Url, 64, "UOGruhHOMA=", "unexpected `=` padding"),
            (
                Format::Base64Url,
                64,
                "UOGruhHOMAF",
                "non-canonical base64: the last symbol `F` at position 11 has unused bits set",
            ),
            (Format::Base64Url, 64, "UOGruhHOMA+", "invalid character `+` at position 11"),
            (Format::Base64Url, 64, "UOGruh/OMAE", "invalid character `/` at position 7"),
            (
                Format::Base64Url,
                128,
                "UOGruhHOMAE",
                "expected 22 characters without padding, found 11",
            ),
            // Crockford base32.
            (Format::Base32, 64, "51RDBQ88WWC0U", "invalid character `U` at position 13"),
            (Format::Base32, 64, "51RDBQ88WWC0u", "invalid character `u` at position 13"),
            (Format::Base32, 64, "51RDB-Q88WWC01", "invalid character `-` at position 6"),
            (Format::Base32, 64, "51RDBQ88WWC0", "expected 13 characters, found 12"),
            (Format::Base32, 64, "051RDBQ88WWC01", "expected 13 characters, found 14"),
            (
                Format::Base32,
                64,
                "G000000000000",
                "value does not fit in 64 bits: the first character `G` is above `F`",
            ),
            (
                Format::Base32,
                64,
                "z000000000000",
                "value does not fit in 64 bits: the first character `z` is above `F`",
            ),
            (
                Format::Base32,
                128,
                "80000000000000000000000000",
                "value does not fit in 128 bits: the first character `8` is above `7`",
            ),
            // Base 62.
            (Format::Base62, 64, "LygHa16AHYG", "value does not fit in 64 bits"),
            (Format::Base62, 64, "zzzzzzzzzzz", "value does not fit in 64 bits"),
            (Format::Base62, 128, "7n42DGM5Tflk9n8mt7Fhc8", "value does not fit in 128 bits"),
            (Format::Base62, 64, "6wWt7PwWTz", "expected 11 characters, found 10"),
            (Format::Base62, 64, "06wWt7PwWTz7", "expected 11 characters, found 12"),
            (Format::Base62, 64, "6wWt7PwWTz_", "invalid character `_` at position 11"),
            // UUID.
            (
                Format::Uuid,
                128,
                "0102030406050807090a0b0c100f0e0d",
                "expected 36 characters in 8-4-4-4-12 form, found 32",
            ),
            (
                Format::Uuid,
                128,
                "01020304-0605-0807-090a0b0c100f0e0d",
                "expected 36 characters in 8-4-4-4-12 form, found 35",
            ),
            (
                Format::Uuid,
                128,
                "01020304-0605-0807-090a0-b0c100f0e0d",
                "expected `-` at position 24, found `0`",
            ),
            (
                Format::Uuid,
                128,
                "0102030-40605-0807-090a-0b0c100f0e0d",
                "unexpected `-` at position 8",
            ),
            (
                Format::Uuid,
                128,
                "{01020304-0605-0807-090a-0b0c100f0e0d}",
                "invalid character `{` at position 1",
            ),
            (
                Format::Uuid,
                128,
                "urn:uuid:01020304-0605-0807-090a-0b0c100f0e0d",
                "invalid character `u` at position 1",
            ),
            (
                Format::Uuid,
                128,
                "01020304-0605-0807-090a-0b0c100f0e0g",
                "invalid character `g` at position 36",
            ),
            // .NET byte order.
            (Format::Bytes, 128, "0403020105060708", "expected 32 hex digits, found 16"),
            (
                Format::Bytes,
                128,
                "04030201-0506-0708-090a-0b0c100f0e0d",
                "invalid character `-` at position 9",
            ),
            (
                Format::Bytes,
                64,
                "0403020105060708090a0b0c100f0e0d",
                "expected 16 hex digits, found 32",
            ),
        ];
        for &(format, bits, text, reason) in cases {
            let result = match bits {
                64 => format.parse_u64(text).map(u128::from),
                _ => format.parse_u128(text),
            };
            assert_eq!(result, Err(Error::text(format, reason)), "{format} {bits} {text:?}");
        }
        // The empty string, in every format and width.
        for format in Format::ALL {
            let empty = Err(Error::text(format, "text is empty"));
            if format.supports(64) {
                assert_eq!(format.parse_u64("").map(u128::from), empty, "{format}");
            }
            assert_eq!(format.parse_u128(""), empty, "{format}");
        }
    }

    #[test]
    fn uuid_refuses_64_bit_values() {
        let unsupported = Error::UnsupportedFormat { format: Format::Uuid, bits: 64 };
        assert_eq!(Format::Uuid.encode_u64(1), Err(unsupported.clone()));
        assert_eq!(Format::Uuid.parse_u64("1"), Err(unsupported.clone()));
        let mut out = String::from("kept");
        assert_eq!(Format::Uuid.write_u64(1, &mut out), Err(unsupported.clone()));
        assert_eq!(out, "kept");
        assert_eq!(unsupported.to_string(), "format `uuid` cannot represent 64-bit ids");
        let sql = Error::UnsupportedFormat { format: Format::SqlGuidBytes, bits: 64 };
        assert_eq!(Format::SqlGuidBytes.encode_u64(1), Err(sql.clone()));
        assert_eq!(Format::SqlGuidBytes.parse_u64("1"), Err(sql.clone()));
        assert_eq!(sql.to_string(), "format `sqlguid-bytes` cannot represent 64-bit ids");
        assert_eq!(
            Format::Hex.parse_u64("00ff").unwrap_err().to_string(),
            "invalid hex id: expected 16 hex digits, found 4"
        );
    }

    #[test]
    fn lengths_match_the_widths() {
        for format in Format::ALL {
            if format.supports(64) {
                for value in [0, 1, u64::MAX] {
                    let len = format.encode_u64(value).unwrap().len();
                    assert!(len <= format.max_len(64), "{format} {value}");
                }
                assert_eq!(format.encode_u64(u64::MAX).unwrap().len(), format.max_len(64));
            }
            assert_eq!(format.encode_u128(u128::MAX).unwrap().len(), format.max_len(128));
        }
    }

    /// The spelling the encoder writes for text a parser accepted.
    fn canonical(format: Format, text: &str) -> String {
        match format {
            Format::Decimal | Format::Binary => match text.trim_start_matches('0') {
                "" => "0".to_owned(),
                digits => digits.to_owned(),
            },
            Format::Hex | Format::Uuid | Format::Bytes | Format::SqlGuidBytes => {
                text.to_ascii_lowercase()
            }
            Format::Base32 => text.to_ascii_uppercase().replace('O', "0").replace(['I', 'L'], "1"),
            Format::Base64Le | Format::Base64Url | Format::Base62 => text.to_owned(),
        }
    }

    /// Parses `text` at both widths; whatever is accepted must be a spelling of its value.
    fn parse_is_sound(format: Format, text: &str) -> Result<(), TestCaseError> {
        // `uuid` refuses every 64-bit parse.
        if let Ok(value) = format.parse_u64(text) {
            prop_assert_eq!(format.encode_u64(value).unwrap(), canonical(format, text));
        }
        if let Ok(value) = format.parse_u128(text) {
            prop_assert_eq!(format.encode_u128(value).unwrap(), canonical(format, text));
        }
        Ok(())
    }

    fn any_format() -> impl Strategy<Value = Format> {
        prop::sample::select(Format::ALL.to_vec())
    }

    /// Values of every magnitude, not just large ones.
    fn any_u64() -> impl Strategy<Value = u64> {
        (any::<u64>(), 0..64_u32).prop_map(|(value, shift)| value >> shift)
    }

    fn any_u128() -> impl Strategy<Value = u128> {
        (any::<u128>(), 0..128_u32).prop_map(|(value, shift)| value >> shift)
    }

    /// Strings over the formats' alphabets, near the formats' lengths.
    fn alphabet_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[0-9]{0,45}",
            "[01]{0,130}",
            "[0-9a-fA-F]{14,34}",
            "[0-9a-fA-F-]{30,40}",
            "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-fA-F]{4}-[0-9a-f-]{4}-[0-9a-f]{11,13}",
            "[0-9A-Za-z]{10,27}",
            "[0-9A-HJKMNP-TV-Za-z]{12,27}",
            "[A-Za-z0-9+/]{10,24}={0,3}",
            "[A-Za-z0-9_-]{10,24}={0,2}",
            "[A-Za-z0-9+/=_-]{0,30}",
        ]
    }

    proptest! {
        #[test]
        fn round_trips_64_bit_values(format in any_format(), value in any_u64()) {
            if !format.supports(64) {
                prop_assert!(format.encode_u64(value).is_err());
            } else {
                let text = format.encode_u64(value).unwrap();
                prop_assert_eq!(format.parse_u64(&text), Ok(value));
                let mut out = String::from("x");
                format.write_u64(value, &mut out).unwrap();
                prop_assert_eq!(&out[1..], text.as_str());
                // A 64-bit value reads back the same as a 128-bit one where the text allows:
                // the formats without a fixed width.
                if matches!(format, Format::Decimal | Format::Binary) {
                    prop_assert_eq!(format.parse_u128(&text), Ok(u128::from(value)));
                }
            }
        }

        #[test]
        fn round_trips_128_bit_values(format in any_format(), value in any_u128()) {
            let text = format.encode_u128(value).unwrap();
            prop_assert_eq!(format.parse_u128(&text), Ok(value));
        }

        #[test]
        fn decimal_and_hex_agree_with_std(value in any::<u128>()) {
            prop_assert_eq!(Format::Decimal.encode_u128(value).unwrap(), value.to_string());
            prop_assert_eq!(Format::Hex.encode_u128(value).unwrap(), format!("{value:032x}"));
            prop_assert_eq!(Format::Binary.encode_u128(value).unwrap(), format!("{value:b}"));
            let small = value as u64;
            prop_assert_eq!(Format::Decimal.encode_u64(small).unwrap(), small.to_string());
            prop_assert_eq!(Format::Hex.encode_u64(small).unwrap(), format!("{small:016x}"));
            prop_assert_eq!(Format::Binary.encode_u64(small).unwrap(), format!("{small:b}"));
        }

        #[test]
        fn base32_and_base62_sort_like_the_numbers(
            a in any_u64(),
            b in any_u64(),
            c in any_u128(),
            d in any_u128(),
        ) {
            for format in [Format::Base32, Format::Base62] {
                let (ta, tb) = (format.encode_u64(a).unwrap(), format.encode_u64(b).unwrap());
                prop_assert_eq!(a.cmp(&b), ta.cmp(&tb), "{} {} {}", format, ta, tb);
                let (tc, td) = (format.encode_u128(c).unwrap(), format.encode_u128(d).unwrap());
                prop_assert_eq!(c.cmp(&d), tc.cmp(&td), "{} {} {}", format, tc, td);
            }
        }

        #[test]
        fn parse_never_panics_on_any_string(format in any_format(), text in any::<String>()) {
            parse_is_sound(format, &text)?;
        }

        #[test]
        fn parse_never_panics_on_alphabet_strings(
            format in any_format(),
            text in alphabet_text(),
        ) {
            parse_is_sound(format, &text)?;
        }

        #[test]
        fn parse_is_strict_on_near_misses(
            format in any_format(),
            value in any::<u128>(),
            at in any::<prop::sample::Index>(),
            replacement in prop::char::range('+', 'z'),
            edit in 0..3_u8,
        ) {
            let mut text = format.encode_u128(value).unwrap();
            if format.supports(64) && value & 1 == 0 {
                text = format.encode_u64(value as u64).unwrap();
            }
            let at = at.index(text.len());
            match edit {
                0 => text.replace_range(at..=at, replacement.encode_utf8(&mut [0; 4])),
                1 => text.insert(at, replacement),
                _ => {
                    text.remove(at);
                }
            }
            parse_is_sound(format, &text)?;
        }
    }
}
