//! Text forms of IDs: decimal, hex, binary, base64 (two kinds), Crockford base32, base62, UUID
//! and .NET byte order, each with a strict parser.

use std::{fmt, str::FromStr};

use crate::Error;

/// A text form of an ID.
///
/// | name | 64-bit example | notes |
/// | --- | --- | --- |
/// | `decimal` | `5828128208445124609` | digits only |
/// | `hex` | `50e1abba11ce3001` | lower-case, zero-padded to the ID's width (16 or 32 digits) |
/// | `binary` | `1010…0001` | no leading zeros, as Go's `%b` |
/// | `base64le` | `BXDOxnfZflk=` | standard base64 of the little-endian bytes (go-flakeid's README) |
/// | `base64url` | `UOGruhHOMAE` | URL-safe base64 of the big-endian bytes, unpadded |
/// | `base32` | `51GTXEH4SX00H` | Crockford, fixed width (13 or 26), sorts like the number |
/// | `base62` | `6wOnC8E9z7L` | `0-9A-Za-z`, fixed width (11 or 22), sorts like the number |
/// | `uuid` | `01020304-0605-0807-090a-0b0c100f0e0d` | 128-bit IDs only |
/// | `bytes` | `0403020105060708090a0b0c100f0e0d` | 128-bit: the 16 bytes in .NET `Guid.ToByteArray()` order; 64-bit: big-endian, as `hex` |
///
/// # Example
///
/// ```
/// use idmint_core::Format;
///
/// let format: Format = "base64le".parse()?;
/// assert_eq!(format.encode_u64(6448830824900882437)?, "BXDOxnfZflk=");
/// assert_eq!(format.parse_u64("BXDOxnfZflk=")?, 6448830824900882437);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Base 10, digits only.
    Decimal,
    /// Base 16, lower-case, zero-padded to the ID's full width.
    Hex,
    /// Base 2 without leading zeros.
    Binary,
    /// Standard base64 (with padding) of the little-endian bytes.
    Base64Le,
    /// URL-safe base64 (no padding) of the big-endian bytes.
    Base64Url,
    /// Crockford base32, fixed width, order-preserving.
    Base32,
    /// Base 62 (`0-9A-Za-z`), fixed width, order-preserving.
    Base62,
    /// An RFC 4122-style hyphenated string of a 128-bit value.
    Uuid,
    /// The bytes as hex: .NET `Guid.ToByteArray()` order for 128-bit IDs, big-endian for 64-bit.
    Bytes,
}

impl Format {
    /// Every format, in the order of the table above.
    pub const ALL: [Format; 9] = [
        Format::Decimal,
        Format::Hex,
        Format::Binary,
        Format::Base64Le,
        Format::Base64Url,
        Format::Base32,
        Format::Base62,
        Format::Uuid,
        Format::Bytes,
    ];

    /// The names accepted by [`FromStr`], in the order of [`ALL`](Self::ALL).
    pub const NAMES: [&'static str; 9] =
        ["decimal", "hex", "binary", "base64le", "base64url", "base32", "base62", "uuid", "bytes"];

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
    /// ```
    pub fn supports(self, bits: u32) -> bool {
        match self {
            Format::Uuid => bits == 128,
            _ => bits == 64 || bits == 128,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
