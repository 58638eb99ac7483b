//! Text forms of 128-bit IDs beyond [`Format`]: [`Text128`] (the hyphenated UUID, ULID and
//! TypeID), and [`TypePrefix`], a TypeID prefix checked against the TypeID specification
//! (jetify-com/typeid, `spec/README.md`, version 0.3).

use std::{fmt, str::FromStr};

use crate::{error::Error, format::Format};

/// The TypeID suffix alphabet: Crockford base32 in lower case.
const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
/// Characters of a TypeID suffix.
const SUFFIX_LEN: usize = 26;
/// The longest prefix.
const MAX_PREFIX_LEN: usize = 63;

/// Suffix digit values; lower-case Crockford only, no aliases (the spec refuses `i`, `l`, `o`,
/// `u`, upper case and hyphens).
static VALUES: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < ALPHABET.len() {
        table[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// A TypeID prefix, checked: 0 to 63 characters of `a-z` and `_`, starting and ending with a
/// letter when not empty (TypeID specification 0.3).
///
/// # Example
///
/// ```
/// use idmint_core::TypePrefix;
///
/// assert_eq!(TypePrefix::new("user")?.as_str(), "user");
/// assert!(TypePrefix::new("pre_fix").is_ok());
/// assert!(TypePrefix::new("User").is_err());
/// assert!(TypePrefix::new("_user").is_err());
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TypePrefix(String);

impl TypePrefix {
    /// Checks `prefix`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidTypeId`] saying which rule it breaks.
    ///
    /// # Example
    ///
    /// ```
    /// let err = idmint_core::TypePrefix::new("us3r").unwrap_err();
    /// assert_eq!(err.to_string(), "invalid TypeID: the prefix `us3r` has `3` at character 3; only a-z and _ are allowed");
    /// ```
    pub fn new(prefix: &str) -> Result<Self, Error> {
        let bad = |reason: String| Err(Error::InvalidTypeId(reason));
        if prefix.len() > MAX_PREFIX_LEN {
            return bad(format!(
                "the prefix has {} characters; at most {MAX_PREFIX_LEN}",
                prefix.chars().count()
            ));
        }
        if let Some((i, c)) =
            prefix.chars().enumerate().find(|(_, c)| !matches!(c, 'a'..='z' | '_'))
        {
            return bad(format!(
                "the prefix `{}` has `{}` at character {}; only a-z and _ are allowed",
                prefix.escape_debug(),
                c.escape_debug(),
                i + 1
            ));
        }
        if prefix.starts_with('_') || prefix.ends_with('_') {
            return bad(format!("the prefix `{prefix}` starts or ends with `_`"));
        }
        Ok(TypePrefix(prefix.to_owned()))
    }

    /// The prefix.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::TypePrefix::default().as_str(), "");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the prefix is empty (the TypeID is then its suffix alone).
    ///
    /// # Example
    ///
    /// ```
    /// assert!(idmint_core::TypePrefix::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for TypePrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for TypePrefix {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        TypePrefix::new(text)
    }
}

/// How a 128-bit ID is written: the hyphenated UUID, a ULID, or a TypeID with a prefix.
///
/// | form | example |
/// | --- | --- |
/// | `Uuid` | `01890a5d-ac96-774b-bcce-b302099a8057` |
/// | `Ulid` | `01H455VB4PEX5VSKNK084SN02Q` (26 Crockford base32 characters, upper case) |
/// | `TypeId` | `user_01h455vb4pex5vsknk084sn02q` (prefix, `_`, 26 lower-case characters) |
///
/// All three hold the same 128 bits. Parsing a ULID ignores case and reads Crockford's aliases;
/// parsing a TypeID is as strict as its specification, and refuses another prefix than the
/// expected one, naming both.
///
/// # Example
///
/// ```
/// use idmint_core::{Text128, TypePrefix};
///
/// let value = 0x01890a5d_ac96_774b_bcce_b302099a8057;
/// let typeid = Text128::TypeId(TypePrefix::new("user")?);
/// assert_eq!(typeid.write(value), "user_01h455vb4pex5vsknk084sn02q");
/// assert_eq!(typeid.parse("user_01h455vb4pex5vsknk084sn02q")?, value);
/// let err = typeid.parse("order_01h455vb4pex5vsknk084sn02q").unwrap_err();
/// assert_eq!(err.to_string(), "TypeID prefix `order` where `user` was expected");
/// assert_eq!(Text128::Ulid.write(value), "01H455VB4PEX5VSKNK084SN02Q");
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Text128 {
    /// The canonical hyphenated UUID, lower case.
    Uuid,
    /// A ULID: 26 Crockford base32 characters, upper case.
    Ulid,
    /// A TypeID with this prefix (empty: the suffix alone).
    TypeId(TypePrefix),
}

impl Text128 {
    /// Writes `value`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Text128;
    ///
    /// assert_eq!(Text128::Uuid.write(1), "00000000-0000-0000-0000-000000000001");
    /// ```
    pub fn write(&self, value: u128) -> String {
        match self {
            Text128::Uuid => uuid_text(value),
            Text128::Ulid => ulid_text(value),
            Text128::TypeId(prefix) => typeid_text(prefix, value),
        }
    }

    /// Reads a value written in this form.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidText`] for a bad UUID or ULID, [`Error::InvalidTypeId`] for a bad TypeID,
    /// [`Error::TypePrefixMismatch`] for a TypeID with another prefix.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Text128;
    ///
    /// assert_eq!(Text128::Ulid.parse("0000000000000000000000000A")?, 10);
    /// assert!(Text128::Ulid.parse("8ZZZZZZZZZZZZZZZZZZZZZZZZZ").is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn parse(&self, text: &str) -> Result<u128, Error> {
        match self {
            Text128::Uuid => Format::Uuid.parse_u128(text),
            Text128::Ulid => Format::Base32.parse_u128(text),
            Text128::TypeId(expected) => {
                let (prefix, value) = parse_typeid(text)?;
                if prefix != *expected {
                    return Err(Error::TypePrefixMismatch {
                        expected: expected.0.clone(),
                        found: prefix.0,
                    });
                }
                Ok(value)
            }
        }
    }
}

/// The hyphenated UUID of `value`.
fn uuid_text(value: u128) -> String {
    // `Format::encode_u128` never fails.
    Format::Uuid.encode_u128(value).unwrap_or_default()
}

/// The ULID of `value`.
fn ulid_text(value: u128) -> String {
    Format::Base32.encode_u128(value).unwrap_or_default()
}

/// The TypeID of `value` with `prefix`.
///
/// # Example
///
/// ```
/// use idmint_core::{TypePrefix, typeid_text};
///
/// assert_eq!(typeid_text(&TypePrefix::default(), 32), "00000000000000000000000010");
/// ```
pub fn typeid_text(prefix: &TypePrefix, value: u128) -> String {
    let mut out = String::with_capacity(prefix.0.len() + 1 + SUFFIX_LEN);
    if !prefix.is_empty() {
        out.push_str(&prefix.0);
        out.push('_');
    }
    for i in (0..SUFFIX_LEN).rev() {
        // 26 digits of 5 bits: the first holds the top 3 bits (130 − 128 = 2 bits of padding).
        let digit = (value >> (5 * i)) & 0x1f;
        out.push(char::from(ALPHABET[digit as usize]));
    }
    out
}

/// Reads a TypeID as its specification says: the prefix is what comes before the last `_`
/// (none without one), the suffix 26 lower-case Crockford base32 characters of at most 128
/// bits.
///
/// # Errors
///
/// [`Error::InvalidTypeId`] saying what is wrong.
///
/// # Example
///
/// ```
/// use idmint_core::parse_typeid;
///
/// let (prefix, value) = parse_typeid("pre_fix_00000000000000000000000010")?;
/// assert_eq!((prefix.as_str(), value), ("pre_fix", 32));
/// assert!(parse_typeid("_00000000000000000000000000").is_err());
/// # Ok::<(), idmint_core::Error>(())
/// ```
pub fn parse_typeid(text: &str) -> Result<(TypePrefix, u128), Error> {
    let (prefix, suffix) = match text.rfind('_') {
        Some(0) => {
            return Err(Error::InvalidTypeId(
                "the text starts with `_`: an empty prefix has no separator".into(),
            ));
        }
        Some(at) => (TypePrefix::new(&text[..at])?, &text[at + 1..]),
        None => (TypePrefix::default(), text),
    };
    Ok((prefix, parse_suffix(suffix)?))
}

/// The value of a TypeID suffix.
fn parse_suffix(suffix: &str) -> Result<u128, Error> {
    let bad = |reason: String| Err(Error::InvalidTypeId(reason));
    if let Some((i, c)) =
        suffix.chars().enumerate().find(|&(_, c)| !c.is_ascii() || VALUES[c as usize] == 0xff)
    {
        return bad(format!(
            "the suffix has `{}` at character {}; only 0-9 and a-z without i, l, o and u are allowed",
            c.escape_debug(),
            i + 1
        ));
    }
    if suffix.len() != SUFFIX_LEN {
        return bad(format!("the suffix has {} characters; it needs {SUFFIX_LEN}", suffix.len()));
    }
    if suffix.as_bytes()[0] > b'7' {
        return bad(format!(
            "the suffix starts with `{}`: above `7`, it needs more than 128 bits",
            char::from(suffix.as_bytes()[0])
        ));
    }
    Ok(suffix.bytes().fold(0, |value, b| value << 5 | u128::from(VALUES[usize::from(b)])))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Each text form refuses what it must, with a reason that says why.
    #[test]
    fn bad_text_is_refused_with_a_reason() {
        let user = Text128::TypeId(TypePrefix::new("user").unwrap());
        let check = |form: &Text128, text: &str, reason: &str| {
            let err = form.parse(text).unwrap_err().to_string();
            assert!(err.contains(reason), "{form:?} {text:?}: {err}");
        };
        check(
            &user,
            "order_01h455vb4pex5vsknk084sn02q",
            "prefix `order` where `user` was expected",
        );
        check(&user, "01h455vb4pex5vsknk084sn02q", "prefix none where `user` was expected");
        check(&user, "user_01H455VB4PEX5VSKNK084SN02Q", "the suffix has `H` at character 3");
        check(&user, "user_81h455vb4pex5vsknk084sn02q", "more than 128 bits");
        check(&user, "user_01h455vb4pex5vsknk084sn02", "25 characters");
        check(&user, "_01h455vb4pex5vsknk084sn02q", "starts with `_`");
        check(&Text128::Ulid, "01H455VB4PEX5VSKNK084SN02", "expected 26 characters");
        check(&Text128::Uuid, "01890a5d-ac96-774b-bcce-b302099a805", "uuid");
    }

    #[test]
    fn every_alphabet_character_reads_back() {
        for (i, &c) in ALPHABET.iter().enumerate() {
            assert_eq!(usize::from(VALUES[usize::from(c)]), i);
        }
        assert_eq!(VALUES.iter().filter(|&&v| v != 0xff).count(), 32);
    }

    proptest! {
        #[test]
        fn typeid_parse_never_panics(text in any::<String>()) {
            let _ = parse_typeid(&text);
        }

        #[test]
        fn prefix_and_value_round_trip(prefix in "([a-z]([a-z_]{0,61}[a-z])?)?", value in any::<u128>()) {
            let prefix = TypePrefix::new(&prefix).unwrap();
            let text = typeid_text(&prefix, value);
            prop_assert_eq!(parse_typeid(&text).unwrap(), (prefix, value));
        }
    }
}
