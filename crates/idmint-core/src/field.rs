//! The named values of a layout's fields: [`FieldValue`] (what `encode` takes and `decode`
//! gives), [`FieldInfo`] and [`Segment`] (what `explain` shows), and the reader every layout
//! takes its named values from.

use std::fmt;

use crate::{error::Error, pack::low_mask};

/// What a field of a [`BitLayout`](crate::BitLayout) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum FieldRole {
    /// Ticks since the layout's epoch. A generator fills it from the clock.
    Time,
    /// A counter that tells apart IDs of the same tick. A generator fills it.
    Sequence,
    /// Part of the generator's identity (datacenter, worker, shard, ...). Fixed per generator.
    Node,
    /// Any other field, set by a layout-specific generator (for example TraceId's chunk number).
    Other,
}

/// The value of one field, as given to `encode` or returned by `decode`.
///
/// # Example
///
/// ```
/// use idmint_core::FieldValue;
///
/// assert_eq!(FieldValue::Number(7).to_string(), "7");
/// assert_eq!(FieldValue::Text("spread".into()).to_string(), "spread");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldValue {
    /// A number (most fields).
    Number(u64),
    /// Text: LableOrg's `mode` (`spread` or `time-sequential`) and HotGuid's `process`
    /// (10 hex digits).
    Text(String),
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldValue::Number(n) => write!(f, "{n}"),
            FieldValue::Text(t) => f.write_str(t),
        }
    }
}

/// One field of a layout, as `idmint explain` and the server describe it.
///
/// # Example
///
/// ```
/// use idmint_core::Layout;
///
/// let layout = Layout::builtin("snowflake")?;
/// let worker = layout.fields().into_iter().find(|f| f.name == "worker").unwrap();
/// assert_eq!((worker.bits, worker.max), (5, 31));
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct FieldInfo {
    /// The field's name.
    pub name: String,
    /// Its width in bits (for DecimalId: the bits its range needs).
    pub bits: u32,
    /// Its smallest value.
    pub min: u64,
    /// Its largest value.
    pub max: u64,
    /// What it holds.
    pub role: FieldRole,
    /// For text fields, the accepted values or their form.
    pub text: Option<&'static str>,
}

impl FieldInfo {
    /// A numeric field.
    pub(crate) fn number(name: &str, bits: u32, min: u64, max: u64, role: FieldRole) -> Self {
        FieldInfo { name: name.to_owned(), bits, min, max, role, text: None }
    }

    /// A text field of `bits` bits whose accepted values `form` describes.
    pub(crate) fn text(name: &str, bits: u32, role: FieldRole, form: &'static str) -> Self {
        FieldInfo {
            name: name.to_owned(),
            bits,
            min: 0,
            max: low_mask(bits),
            role,
            text: Some(form),
        }
    }
}

/// Whether a field is a node field: the fields a generator takes.
pub(crate) fn is_node(field: &FieldInfo) -> bool {
    field.role == FieldRole::Node
}

/// A named number, as `decode` returns it.
pub(crate) fn num(name: &str, value: u64) -> (String, FieldValue) {
    (name.to_owned(), FieldValue::Number(value))
}

/// A run of bits in an ID's diagram, most significant first.
///
/// # Example
///
/// ```
/// use idmint_core::Layout;
///
/// let segments = Layout::builtin("lable")?.segments().unwrap();
/// assert_eq!(segments.iter().map(|s| s.width()).sum::<u32>(), 64);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Segment {
    /// What the bits hold.
    pub label: String,
    /// The highest bit.
    pub msb: u32,
    /// The lowest bit.
    pub lsb: u32,
}

impl Segment {
    pub(crate) fn new(label: impl Into<String>, msb: u32, lsb: u32) -> Self {
        Segment { label: label.into(), msb, lsb }
    }

    /// How many bits the segment covers.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Layout;
    ///
    /// let segments = Layout::builtin("snowflake")?.segments().unwrap();
    /// assert_eq!(segments[0].width(), 1);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn width(&self) -> u32 {
        self.msb - self.lsb + 1
    }
}

/// Takes named values out of a list, refusing unknown and duplicate names.
pub(crate) struct FieldReader {
    layout: String,
    values: Vec<(String, FieldValue)>,
}

impl FieldReader {
    /// Checks `given` against a layout's `fields`: every name must be a field the caller may
    /// set (`allowed`), and no name may come twice.
    pub(crate) fn checked(
        layout: &str,
        fields: &[FieldInfo],
        given: &[(String, FieldValue)],
        allowed: impl Fn(&FieldInfo) -> bool,
    ) -> Result<Self, Error> {
        let expected = || {
            fields
                .iter()
                .filter(|f| allowed(f))
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        for (i, (name, _)) in given.iter().enumerate() {
            if fields.iter().any(|f| f.name == *name && !allowed(f)) {
                return Err(Error::InvalidFieldValue {
                    field: name.clone(),
                    reason: format!(
                        "it is set by the generator; the fields that can be given are: {}",
                        expected()
                    ),
                });
            }
            if !fields.iter().any(|f| f.name == *name && allowed(f)) {
                return Err(Error::UnknownField {
                    layout: layout.to_owned(),
                    field: name.clone(),
                    expected: expected(),
                });
            }
            if given[..i].iter().any(|(other, _)| other == name) {
                return Err(given_twice(name));
            }
        }
        Ok(FieldReader { layout: layout.to_owned(), values: given.to_vec() })
    }

    fn take(&mut self, name: &str) -> Option<FieldValue> {
        let i = self.values.iter().position(|(n, _)| n == name)?;
        Some(self.values.swap_remove(i).1)
    }

    fn missing(&self, name: &str) -> Error {
        Error::MissingField { layout: self.layout.clone(), field: name.to_owned() }
    }

    /// Refuses a value for `name`: the generator ID already sets that field.
    pub(crate) fn refuse(&self, name: &str) -> Result<(), Error> {
        match self.values.iter().any(|(n, _)| n == name) {
            true => Err(given_twice(name)),
            false => Ok(()),
        }
    }

    /// The value of a field set by the generator ID (`from_id`), or given by name, or `default`.
    pub(crate) fn node(
        &mut self,
        name: &str,
        from_id: Option<u64>,
        default: u64,
    ) -> Result<u64, Error> {
        match from_id {
            Some(value) => self.refuse(name).map(|()| value),
            None => self.number_or(name, default),
        }
    }

    pub(crate) fn number(&mut self, name: &str) -> Result<u64, Error> {
        self.number_opt(name)?.ok_or_else(|| self.missing(name))
    }

    pub(crate) fn number_or(&mut self, name: &str, default: u64) -> Result<u64, Error> {
        Ok(self.number_opt(name)?.unwrap_or(default))
    }

    fn number_opt(&mut self, name: &str) -> Result<Option<u64>, Error> {
        match self.take(name) {
            None => Ok(None),
            Some(FieldValue::Number(n)) => Ok(Some(n)),
            Some(FieldValue::Text(t)) => Err(Error::InvalidFieldValue {
                field: name.to_owned(),
                reason: format!("`{t}` is not a number"),
            }),
        }
    }

    pub(crate) fn text(&mut self, name: &str) -> Result<String, Error> {
        self.text_or(name)?.ok_or_else(|| self.missing(name))
    }

    pub(crate) fn text_or(&mut self, name: &str) -> Result<Option<String>, Error> {
        Ok(self.take(name).map(|v| v.to_string()))
    }
}

fn given_twice(name: &str) -> Error {
    Error::InvalidFieldValue { field: name.to_owned(), reason: "given twice".into() }
}
