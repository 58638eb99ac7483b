//! The text a namespace writes its IDs in: [`IdForm`], a form the APIs and the CLI take by name
//! (every [`Format`], `ulid` and `typeid`), and [`IdText`], a form resolved for one layout and
//! an optional TypeID prefix, which writes IDs and reads them back, refusing another prefix.

use std::{fmt, str::FromStr};

use crate::{
    any::AnyId,
    error::Error,
    format::Format,
    layout::Layout,
    text128::{Text128, TypePrefix},
};

/// A text form by name: a [`Format`], or one of the two 128-bit forms that are not plain
/// numbers, `ulid` and `typeid` ([`Text128`]).
///
/// # Example
///
/// ```
/// use idmint_core::{Format, IdForm};
///
/// assert_eq!("typeid".parse::<IdForm>()?, IdForm::TypeId);
/// assert_eq!("uuid".parse::<IdForm>()?, IdForm::Format(Format::Uuid));
/// assert_eq!(IdForm::Ulid.to_string(), "ulid");
/// assert!("guid".parse::<IdForm>().is_err());
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdForm {
    /// A plain format (`decimal`, `hex`, ..., `uuid`).
    Format(Format),
    /// A ULID: 26 upper-case Crockford base32 characters of a 128-bit ID.
    Ulid,
    /// A TypeID: the namespace's prefix, `_`, and 26 lower-case characters of a 128-bit ID;
    /// for a 64-bit layout with a prefix, the prefix, `_` and the layout's usual text.
    TypeId,
}

impl IdForm {
    /// Every name [`FromStr`] takes: the format names, then `ulid` and `typeid`.
    ///
    /// # Example
    ///
    /// ```
    /// assert!(idmint_core::IdForm::NAMES.contains(&"typeid"));
    /// ```
    pub const NAMES: [&'static str; 12] = [
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
        "ulid",
        "typeid",
    ];

    /// The form's name.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::IdForm::TypeId.name(), "typeid");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            IdForm::Format(format) => format.name(),
            IdForm::Ulid => "ulid",
            IdForm::TypeId => "typeid",
        }
    }
}

impl fmt::Display for IdForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IdForm {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        match text {
            "ulid" => Ok(IdForm::Ulid),
            "typeid" => Ok(IdForm::TypeId),
            _ => text.parse::<Format>().map(IdForm::Format).map_err(|_| Error::UnknownForm {
                name: text.to_owned(),
                names: IdForm::NAMES.join(", "),
            }),
        }
    }
}

/// The text of one layout's IDs in one form, with the namespace's TypeID prefix if it has one.
///
/// | layout | prefix | form | text |
/// | --- | --- | --- | --- |
/// | 128-bit | none | default | the layout's default format (`uuid` for `uuid7`) |
/// | 128-bit | `user` | default or `typeid` | `user_01h455vb4pex5vsknk084sn02q` |
/// | 128-bit | any | `ulid`, `uuid`, a format | that form, without the prefix |
/// | 64-bit | none | default | the layout's default format |
/// | 64-bit | `user` | default or `typeid` | `user_` and the layout's default text |
/// | 64-bit | any | a format | that format, without the prefix |
/// | 64-bit | any | `ulid`; `typeid` without a prefix; `uuid` | refused ([`Error::UnsupportedForm`]) |
///
/// Reading a prefixed form refuses another prefix, or none, with
/// [`Error::TypePrefixMismatch`], naming both.
///
/// # Example
///
/// ```
/// use idmint_core::{AnyId, IdForm, IdText, Layout, TypePrefix};
///
/// let user = TypePrefix::new("user")?;
/// let snowflake = Layout::builtin("snowflake")?;
/// let text = IdText::new(&snowflake, Some(&user), None)?;
/// assert_eq!(text.write(AnyId::U64(42))?, "user_42");
/// assert_eq!(text.parse(&snowflake, "user_42")?, AnyId::U64(42));
/// let err = text.parse(&snowflake, "order_42").unwrap_err();
/// assert_eq!(err.to_string(), "TypeID prefix `order` where `user` was expected");
/// assert!(IdText::new(&snowflake, Some(&user), Some(IdForm::Ulid)).is_err());
///
/// let uuid7 = Layout::builtin("uuid7")?;
/// let text = IdText::new(&uuid7, Some(&user), None)?;
/// let id = AnyId::U128(0x01890a5d_ac96_774b_bcce_b302099a8057);
/// assert_eq!(text.write(id)?, "user_01h455vb4pex5vsknk084sn02q");
/// assert_eq!(text.name(), "typeid");
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdText {
    rule: Rule,
    /// Negative control: read any prefix ([`IdText::without_prefix_check`]).
    #[cfg(idmint_negative_controls)]
    any_prefix: bool,
}

/// How [`IdText`] writes an ID.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// A plain format.
    Plain(Format),
    /// A 128-bit form (ULID, TypeID).
    Wide(Text128),
    /// A 64-bit ID in a format behind a prefix and `_`.
    Prefixed(TypePrefix, Format),
}

impl IdText {
    /// The text of `layout`'s IDs in `form` (`None`: the namespace's default, the TypeID when
    /// it has a prefix) for a namespace with `prefix`.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedForm`] when the form cannot hold the layout's IDs: `uuid` and `ulid`
    /// on a 64-bit layout, `typeid` on a 64-bit layout without a prefix.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{IdForm, IdText, Layout};
    ///
    /// let err = IdText::new(&Layout::builtin("snowflake")?, None, Some(IdForm::Ulid)).unwrap_err();
    /// assert_eq!(err.to_string(), "format `ulid` needs a 128-bit layout; `snowflake` ids have 64 bits");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn new(
        layout: &Layout,
        prefix: Option<&TypePrefix>,
        form: Option<IdForm>,
    ) -> Result<Self, Error> {
        let prefix = prefix.filter(|p| !p.is_empty());
        let wide = layout.id_bits() == 128;
        let refuse = |form: IdForm, needs: &'static str| Error::UnsupportedForm {
            form: form.name(),
            needs,
            layout: layout.name().to_owned(),
            bits: layout.id_bits(),
        };
        let form = form.unwrap_or(match prefix {
            Some(_) => IdForm::TypeId,
            None => IdForm::Format(layout.default_format()),
        });
        let rule = match form {
            IdForm::Format(format) if format.supports(layout.id_bits()) => Rule::Plain(format),
            IdForm::Format(_) | IdForm::Ulid if !wide => {
                return Err(refuse(form, "a 128-bit layout"));
            }
            IdForm::Format(format) => Rule::Plain(format),
            IdForm::Ulid => Rule::Wide(Text128::Ulid),
            IdForm::TypeId if wide => {
                Rule::Wide(Text128::TypeId(prefix.cloned().unwrap_or_default()))
            }
            IdForm::TypeId => match prefix {
                Some(prefix) => Rule::Prefixed(prefix.clone(), layout.default_format()),
                None => return Err(refuse(form, "a 128-bit layout or a type prefix")),
            },
        };
        Ok(IdText {
            rule,
            #[cfg(idmint_negative_controls)]
            any_prefix: false,
        })
    }

    /// Negative control: the same text, reading any prefix (or none) as if it were the
    /// expected one, so that a test shows its cases need the prefix check to be refused.
    /// Compiled only under `--cfg idmint_negative_controls`.
    ///
    /// # Example
    ///
    /// ```
    /// # #[cfg(idmint_negative_controls)] {
    /// use idmint_core::{AnyId, IdText, Layout, TypePrefix};
    ///
    /// let snowflake = Layout::builtin("snowflake").unwrap();
    /// let user = TypePrefix::new("user").unwrap();
    /// let text = IdText::new(&snowflake, Some(&user), None).unwrap().without_prefix_check();
    /// assert_eq!(text.parse(&snowflake, "order_42").unwrap(), AnyId::U64(42));
    /// # }
    /// ```
    #[cfg(idmint_negative_controls)]
    #[must_use]
    pub fn without_prefix_check(self) -> Self {
        IdText { any_prefix: true, ..self }
    }

    /// The text with another prefix taken as this one's, for the negative control.
    #[cfg(idmint_negative_controls)]
    fn as_if_expected<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        let Some(expected) = self.prefix().filter(|_| self.any_prefix) else {
            return text.into();
        };
        let rest = match &self.rule {
            Rule::Prefixed(_, format) => match found_prefix(text, *format) {
                "" => text,
                found => &text[found.len() + 1..],
            },
            _ => text.rsplit_once('_').map_or(text, |(_, rest)| rest),
        };
        match expected.is_empty() {
            true => rest.to_owned().into(),
            false => format!("{expected}_{rest}").into(),
        }
    }

    /// The name of the form this text is in (`typeid`, `uuid`, `decimal`, ...).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{IdText, Layout};
    ///
    /// assert_eq!(IdText::new(&Layout::builtin("uuid7")?, None, None)?.name(), "uuid");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn name(&self) -> &'static str {
        match &self.rule {
            Rule::Plain(format) => format.name(),
            Rule::Wide(Text128::Ulid) => "ulid",
            Rule::Wide(_) | Rule::Prefixed(..) => "typeid",
        }
    }

    /// The prefix this text writes and expects, if any.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{IdText, Layout, TypePrefix};
    ///
    /// let user = TypePrefix::new("user")?;
    /// let text = IdText::new(&Layout::builtin("js53")?, Some(&user), None)?;
    /// assert_eq!(text.prefix(), Some(&user));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn prefix(&self) -> Option<&TypePrefix> {
        match &self.rule {
            Rule::Wide(Text128::TypeId(prefix)) | Rule::Prefixed(prefix, _) => Some(prefix),
            _ => None,
        }
    }

    /// Appends `id` in this form to `out`.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedFormat`] when `id` is of another width than the layout's.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, IdForm, IdText, Layout};
    ///
    /// let text = IdText::new(&Layout::builtin("uuid7")?, None, Some(IdForm::Ulid))?;
    /// let mut out = String::new();
    /// text.write_into(AnyId::U128(10), &mut out)?;
    /// assert_eq!(out, "0000000000000000000000000A");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn write_into(&self, id: AnyId, out: &mut String) -> Result<(), Error> {
        match (&self.rule, id) {
            (Rule::Plain(format), id) => id.write(*format, out),
            (Rule::Wide(text), AnyId::U128(value)) => {
                out.push_str(&text.write(value));
                Ok(())
            }
            (Rule::Prefixed(prefix, format), id @ AnyId::U64(_)) => {
                out.push_str(prefix.as_str());
                out.push('_');
                id.write(*format, out)
            }
            (Rule::Wide(_), AnyId::U64(_)) => {
                Err(Error::UnsupportedFormat { format: Format::Uuid, bits: 64 })
            }
            (Rule::Prefixed(_, format), AnyId::U128(_)) => {
                Err(Error::UnsupportedFormat { format: *format, bits: 128 })
            }
        }
    }

    /// `id` in this form.
    ///
    /// # Errors
    ///
    /// As [`write_into`](Self::write_into).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, IdText, Layout};
    ///
    /// let text = IdText::new(&Layout::builtin("uuid7")?, None, None)?;
    /// assert_eq!(text.write(AnyId::U128(1))?, "00000000-0000-0000-0000-000000000001");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn write(&self, id: AnyId) -> Result<String, Error> {
        let mut out = String::new();
        self.write_into(id, &mut out).map(|()| out)
    }

    /// Reads an ID of `layout` in this form and checks it is one of the layout's IDs (as
    /// [`Layout::parse`], whose upstream forms a plain format also reads).
    ///
    /// # Errors
    ///
    /// [`Error::TypePrefixMismatch`] for another prefix or none where one is expected; the
    /// errors of the form's parser and of the layout's validation.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, IdForm, IdText, Layout, TypePrefix};
    ///
    /// let uuid7 = Layout::builtin("uuid7")?;
    /// let text = IdText::new(&uuid7, Some(&TypePrefix::new("user")?), Some(IdForm::TypeId))?;
    /// let id = text.parse(&uuid7, "user_01h455vb4pex5vsknk084sn02q")?;
    /// assert_eq!(id, AnyId::U128(0x01890a5d_ac96_774b_bcce_b302099a8057));
    /// assert!(text.parse(&uuid7, "01h455vb4pex5vsknk084sn02q").is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn parse(&self, layout: &Layout, text: &str) -> Result<AnyId, Error> {
        #[cfg(idmint_negative_controls)]
        let text = &*self.as_if_expected(text);
        match &self.rule {
            Rule::Plain(format) => layout.parse(text, *format),
            Rule::Prefixed(prefix, format) => layout.parse(strip(prefix, text, *format)?, *format),
            Rule::Wide(_) => {
                let id = self.parse_value(text)?;
                layout.decode(id)?;
                Ok(id)
            }
        }
    }

    /// Reads a value in this form without checking it against a layout (a public ID, which
    /// need not be a valid layout ID itself). Its width is the form's: 128 bits for `uuid`,
    /// `ulid` and a 128-bit TypeID, 64 for a prefixed 64-bit text, and for a plain format the
    /// width of `bits`.
    ///
    /// # Errors
    ///
    /// As [`parse`](Self::parse), without the layout's validation.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, IdText, Layout, TypePrefix};
    ///
    /// let text = IdText::new(&Layout::builtin("snowflake")?, Some(&TypePrefix::new("user")?), None)?;
    /// assert_eq!(text.parse_value_of(64, "user_7")?, AnyId::U64(7));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn parse_value_of(&self, bits: u32, text: &str) -> Result<AnyId, Error> {
        #[cfg(idmint_negative_controls)]
        let text = &*self.as_if_expected(text);
        match &self.rule {
            Rule::Plain(format) => AnyId::parse(text, *format, bits),
            Rule::Prefixed(prefix, format) => {
                AnyId::parse(strip(prefix, text, *format)?, *format, 64)
            }
            Rule::Wide(_) => self.parse_value(text),
        }
    }

    /// A 128-bit form's value.
    fn parse_value(&self, text: &str) -> Result<AnyId, Error> {
        match &self.rule {
            Rule::Wide(form) => form.parse(text).map(AnyId::U128),
            Rule::Plain(format) => AnyId::parse(text, *format, 128),
            Rule::Prefixed(_, format) => {
                Err(Error::UnsupportedFormat { format: *format, bits: 128 })
            }
        }
    }
}

/// The text after `prefix` and `_`; another prefix, or none, is
/// [`Error::TypePrefixMismatch`]. The prefix found is the longest run before a `_` that is a
/// TypeID prefix and leaves text `format` reads (a 64-bit layout's text may hold `_`, as
/// base64url does), else the longest that is a TypeID prefix (another namespace's TypeID);
/// with none, the text has no prefix.
fn strip<'a>(prefix: &TypePrefix, text: &'a str, format: Format) -> Result<&'a str, Error> {
    if let Some(rest) = text.strip_prefix(prefix.as_str()).and_then(|r| r.strip_prefix('_')) {
        return Ok(rest);
    }
    let found = found_prefix(text, format);
    Err(Error::TypePrefixMismatch {
        expected: prefix.as_str().to_owned(),
        found: found.chars().take(63).collect(),
    })
}

/// The prefix `text` has, as [`strip`] finds it; empty for none.
fn found_prefix(text: &str, format: Format) -> &str {
    let separators = || text.char_indices().filter(|&(_, c)| c == '_').map(|(at, _)| at).rev();
    let is_prefix = |at: usize| TypePrefix::new(&text[..at]).is_ok_and(|p| !p.is_empty());
    separators()
        .find(|&at| is_prefix(at) && AnyId::parse(&text[at + 1..], format, 64).is_ok())
        .or_else(|| separators().find(|&at| is_prefix(at)))
        .map_or("", |at| &text[..at])
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any text, read in every form of a 64-bit and a 128-bit layout, with and without a
        /// prefix, is an ID or an error, never a panic; and what is read writes back to a text
        /// that reads as the same ID.
        #[test]
        fn reading_any_text_never_panics(text in "[a-z_0-9A-Z-]{0,40}|order_[0-9]{1,20}|user_[0-7][0-9a-z]{25}") {
            let user = TypePrefix::new("user").unwrap();
            for layout in ["snowflake", "uuid7"] {
                let layout = Layout::builtin(layout).unwrap();
                for prefix in [None, Some(&user)] {
                    for form in IdForm::NAMES.iter().map(|n| n.parse::<IdForm>().ok()).chain([None]) {
                        let Ok(form) = IdText::new(&layout, prefix, form) else { continue };
                        if let Ok(id) = form.parse(&layout, &text) {
                            let written = form.write(id).unwrap();
                            prop_assert_eq!(form.parse(&layout, &written).unwrap(), id);
                        }
                        let _ = form.parse_value_of(layout.id_bits(), &text);
                    }
                }
            }
        }
    }

    /// Every format's name is a form's, in the same order, and each name reads back.
    #[test]
    fn form_names_are_the_format_names_then_ulid_and_typeid() {
        assert_eq!(IdForm::NAMES[..Format::NAMES.len()], Format::NAMES);
        for name in IdForm::NAMES {
            assert_eq!(name.parse::<IdForm>().map(IdForm::name), Ok(name));
        }
    }

    #[test]
    fn forms_apply_where_they_can_hold_the_ids() {
        let user = TypePrefix::new("user").unwrap();
        let check = |layout: &str, prefix: Option<&TypePrefix>, form: Option<&str>, want: &str| {
            let layout = Layout::builtin(layout).unwrap();
            let form = form.map(|f| f.parse::<IdForm>().unwrap());
            let got = IdText::new(&layout, prefix, form)
                .map_or_else(|e| format!("refused: {e}"), |t| t.name().to_owned());
            assert_eq!(got, want, "{} {prefix:?} {form:?}", layout.name());
        };
        check("uuid7", None, None, "uuid");
        check("uuid7", Some(&user), None, "typeid");
        check("uuid7", Some(&user), Some("uuid"), "uuid");
        check("uuid7", None, Some("ulid"), "ulid");
        check("uuid7", None, Some("typeid"), "typeid");
        check("hot-guid", None, Some("typeid"), "typeid");
        check("snowflake", None, None, "decimal");
        check("snowflake", Some(&user), None, "typeid");
        check("snowflake", Some(&user), Some("hex"), "hex");
        check(
            "snowflake",
            Some(&user),
            Some("ulid"),
            "refused: format `ulid` needs a 128-bit layout; `snowflake` ids have 64 bits",
        );
        check(
            "snowflake",
            None,
            Some("typeid"),
            "refused: format `typeid` needs a 128-bit layout or a type prefix; `snowflake` ids have 64 bits",
        );
        check(
            "js53",
            None,
            Some("uuid"),
            "refused: format `uuid` needs a 128-bit layout; `js53` ids have 64 bits",
        );
    }

    /// Every text of another type, of both widths, is refused by the prefix check, and read
    /// as the expected type without it (the negative control, under
    /// `--cfg idmint_negative_controls`): the cases need the check to be refused.
    #[test]
    fn another_types_ids_are_refused_only_by_the_prefix_check() {
        let user = TypePrefix::new("user").unwrap();
        let cases = [
            ("snowflake", "order_42"),
            ("snowflake", "42"),
            ("snowflake", "pre_fix_42"),
            ("uuid7", "order_01h455vb4pex5vsknk084sn02q"),
            ("uuid7", "01h455vb4pex5vsknk084sn02q"),
        ];
        let refused = |text: &IdText, layout: &Layout, input: &str| {
            matches!(text.parse(layout, input), Err(Error::TypePrefixMismatch { .. }))
        };
        for (layout, input) in cases {
            let layout = Layout::builtin(layout).unwrap();
            let text = IdText::new(&layout, Some(&user), None).unwrap();
            assert!(refused(&text, &layout, input), "{input} was taken as a user id");
            #[cfg(idmint_negative_controls)]
            {
                let unchecked = text.without_prefix_check();
                assert!(!refused(&unchecked, &layout, input), "{input}: the control refused it");
                assert!(unchecked.parse(&layout, input).is_ok(), "{input}");
            }
        }
    }

    #[test]
    fn prefixed_64_bit_text_refuses_other_prefixes_naming_both() {
        let user = TypePrefix::new("user").unwrap();
        let layout = Layout::builtin("snowflake").unwrap();
        let text = IdText::new(&layout, Some(&user), None).unwrap();
        let check = |input: &str, want: Result<u64, &str>| {
            let got = text.parse(&layout, input).map_err(|e| e.to_string());
            assert_eq!(got, want.map(AnyId::U64).map_err(str::to_owned), "{input:?}");
        };
        check("user_42", Ok(42));
        check("order_42", Err("TypeID prefix `order` where `user` was expected"));
        check("pre_fix_42", Err("TypeID prefix `pre_fix` where `user` was expected"));
        check("42", Err("TypeID prefix none where `user` was expected"));
        check("user42", Err("TypeID prefix none where `user` was expected"));
        check("user_x", Err("invalid decimal id: invalid character `x` at position 1"));
        check(
            "pre_fix_01h455vb4pex5vsknk084sn02q",
            Err("TypeID prefix `pre_fix` where `user` was expected"),
        );
    }
}
