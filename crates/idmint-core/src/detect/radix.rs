//! Reading the text alphabets of other ID formats (hex, Crockford base32, base32hex, base36,
//! base62, decimal) into big-endian bytes of a fixed width, and reading bit fields out of them.
//! Strict: a digit outside the alphabet or a value wider than the width is `None`, never a
//! panic and never a truncated value.

/// An alphabet: the value of one ASCII character, or `None` if it is not a digit of it.
pub(super) type Digit = fn(u8) -> Option<u8>;

/// Hexadecimal, either case.
pub(super) fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Crockford's base32 (`0-9A-Z` without `I L O U`), either case, as ULID and TSID write it.
pub(super) fn crockford(c: u8) -> Option<u8> {
    const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let upper = c.to_ascii_uppercase();
    ALPHABET.iter().position(|&a| a == upper).map(|p| p as u8)
}

/// RFC 4648's base32hex (`0-9a-v`), lower case only, as xid writes it.
pub(super) fn base32hex_lower(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'v' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Base36 (`0-9A-Z`), either case, as SCRU128 writes it.
pub(super) fn base36(c: u8) -> Option<u8> {
    (c as char).to_digit(36).map(|d| d as u8)
}

/// Base62 (`0-9A-Za-z`, digits, then upper, then lower case), as KSUID writes it.
pub(super) fn base62(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'A'..=b'Z' => Some(c - b'A' + 10),
        b'a'..=b'z' => Some(c - b'a' + 36),
        _ => None,
    }
}

/// Decimal digits.
pub(super) fn decimal(c: u8) -> Option<u8> {
    c.is_ascii_digit().then(|| c - b'0')
}

/// `text`, a number in base `radix` written with `digit`, as `bits` bits in big-endian bytes
/// (`bits` rounded up to whole bytes). `None` for an empty text, a character outside the
/// alphabet, or a value that needs more than `bits` bits.
pub(super) fn number(text: &str, radix: u32, digit: Digit, bits: u32) -> Option<Vec<u8>> {
    if text.is_empty() {
        return None;
    }
    let mut out = vec![0u8; bits.div_ceil(8) as usize];
    for c in text.bytes() {
        let mut carry = u32::from(digit(c)?);
        for byte in out.iter_mut().rev() {
            let v = u32::from(*byte) * radix + carry;
            *byte = (v & 0xff) as u8;
            carry = v >> 8;
        }
        if carry != 0 {
            return None;
        }
    }
    let spare = out.len() as u32 * 8 - bits;
    if spare > 0 && out[0] >> (8 - spare) != 0 {
        return None;
    }
    Some(out)
}

/// The bits `[from, from + width)` of `bytes`, counted from the most significant bit of the
/// first byte whose `bits` are in use (`bits` as given to [`number`]); `width` ≤ 128.
pub(super) fn field(bytes: &[u8], bits: u32, from: u32, width: u32) -> u128 {
    let spare = bytes.len() as u32 * 8 - bits;
    let mut value: u128 = 0;
    for i in 0..width {
        let bit = spare + from + i;
        let byte = bytes[(bit / 8) as usize];
        value = (value << 1) | u128::from((byte >> (7 - bit % 8)) & 1);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_reads_each_alphabet_and_refuses_overflow() {
        let check = |text: &str, radix, digit: Digit, bits, want: Option<&[u8]>| {
            assert_eq!(number(text, radix, digit, bits).as_deref(), want, "{text}");
        };
        check("ff", 16, hex, 8, Some(&[0xff]));
        check("100", 16, hex, 8, None);
        check("FZ", 32, crockford, 9, Some(&[0x01, 0xff]));
        check("fz", 32, crockford, 9, Some(&[0x01, 0xff]));
        check("G0", 32, crockford, 9, None);
        check("iI", 32, crockford, 10, None);
        check("zz", 62, base62, 12, Some(&[0x0f, 0x03]));
        check("v", 32, base32hex_lower, 5, Some(&[0x1f]));
        check("V", 32, base32hex_lower, 5, None);
        check("", 10, decimal, 8, None);
    }

    #[test]
    fn field_counts_from_the_first_used_bit() {
        // 10 bits in use: 0b11_1111_0000.
        let bytes = [0x03, 0xf0];
        assert_eq!(field(&bytes, 10, 0, 2), 0b11);
        assert_eq!(field(&bytes, 10, 2, 8), 0b1111_0000);
    }
}
