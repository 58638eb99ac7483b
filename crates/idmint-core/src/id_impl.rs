//! The trait impls every 64-bit ID newtype shares: conversions, text, serde and generation.
//!
//! Each layout type writes its own `from_raw` (validation differs per layout), `to_raw` and
//! `DEFAULT_FORMAT`; this macro derives the rest from those three, so the rules for text and
//! serde are the same for every layout.

/// Implements `TryFrom<u64>`, `From<T> for u64`, `TryFrom<AnyId>`, `From<T> for AnyId`, `Display`/`FromStr` (in the layout's default
/// format), `to_text`/`parse_text`, serde (as a string) and `GeneratedId` for a 64-bit ID type.
macro_rules! u64_id {
    ($ty:ident) => {
        impl TryFrom<u64> for $ty {
            type Error = crate::Error;

            fn try_from(raw: u64) -> Result<Self, crate::Error> {
                $ty::from_raw(raw)
            }
        }

        impl From<$ty> for u64 {
            fn from(id: $ty) -> u64 {
                id.to_raw()
            }
        }

        impl TryFrom<crate::AnyId> for $ty {
            type Error = crate::Error;

            /// The ID of this layout held by an [`AnyId`](crate::AnyId): a 64-bit value that
            /// is valid for the layout.
            #[inline]
            fn try_from(id: crate::AnyId) -> Result<Self, crate::Error> {
                $ty::from_raw(id.u64_for(stringify!($ty))?)
            }
        }

        impl From<$ty> for crate::AnyId {
            fn from(id: $ty) -> crate::AnyId {
                crate::AnyId::U64(id.to_raw())
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let mut text = String::new();
                $ty::DEFAULT_FORMAT.write_u64(self.to_raw(), &mut text).map_err(|_| std::fmt::Error)?;
                f.write_str(&text)
            }
        }

        impl std::str::FromStr for $ty {
            type Err = crate::Error;

            fn from_str(text: &str) -> Result<Self, crate::Error> {
                $ty::parse_text(text, $ty::DEFAULT_FORMAT)
            }
        }

        impl $ty {
            #[doc = concat!("Writes the ID in `format`.")]
            ///
            /// # Errors
            ///
            /// [`Error::UnsupportedFormat`](crate::Error::UnsupportedFormat) for a format that
            /// cannot hold 64-bit values (`uuid`).
            ///
            /// # Example
            ///
            /// ```
            #[doc = concat!("use idmint_core::{Format, ", stringify!($ty), "};")]
            ///
            #[doc = concat!("let id = ", stringify!($ty), "::EXAMPLE;")]
            #[doc = concat!("let text = id.to_text(Format::Base62)?;")]
            #[doc = concat!("assert_eq!(", stringify!($ty), "::parse_text(&text, Format::Base62)?, id);")]
            /// # Ok::<(), idmint_core::Error>(())
            /// ```
            pub fn to_text(self, format: crate::Format) -> Result<String, crate::Error> {
                format.encode_u64(self.to_raw())
            }

            #[doc = concat!("Parses an ID written in `format`, and checks it is a valid `", stringify!($ty), "`.")]
            ///
            /// # Errors
            ///
            /// [`Error::InvalidText`](crate::Error::InvalidText) for text that is not a number in
            /// that format, and the layout's own errors for a number that is not a valid ID.
            ///
            /// # Example
            ///
            /// ```
            #[doc = concat!("use idmint_core::{Format, ", stringify!($ty), "};")]
            ///
            #[doc = concat!("let id = ", stringify!($ty), "::EXAMPLE;")]
            #[doc = concat!("assert_eq!(", stringify!($ty), "::parse_text(&id.to_string(), ", stringify!($ty), "::DEFAULT_FORMAT)?, id);")]
            #[doc = concat!("assert!(", stringify!($ty), "::parse_text(\"not an id\", Format::Decimal).is_err());")]
            /// # Ok::<(), idmint_core::Error>(())
            /// ```
            pub fn parse_text(text: &str, format: crate::Format) -> Result<Self, crate::Error> {
                $ty::from_raw(format.parse_u64(text)?)
            }
        }

        impl crate::generator::GeneratedId for $ty {
            #[inline]
            fn from_generated(raw: u64) -> Self {
                $ty::from_generated_raw(raw)
            }
        }

        #[cfg(feature = "serde")]
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        #[cfg(feature = "serde")]
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any(crate::id_impl::U64IdVisitor::<$ty>::new())
            }
        }
    };
}

pub(crate) use u64_id;

/// Defines `from_raw`, `to_raw` and `from_generated_raw` for a `NonZeroU64` newtype whose
/// `LAYOUT` constant is a [`BitLayout`](crate::BitLayout), then the shared impls of `u64_id!`.
macro_rules! nonzero_bit_id {
    ($ty:ident) => {
        impl $ty {
            /// Checks a raw value against the layout (bit 63 clear in a 63-bit layout, every
            /// field in range) and refuses 0.
            ///
            /// # Errors
            ///
            /// [`Error::HighestBitSet`](crate::Error::HighestBitSet),
            /// [`Error::FieldOutOfRange`](crate::Error::FieldOutOfRange) or
            /// [`Error::InvalidId`](crate::Error::InvalidId) for 0.
            ///
            /// # Example
            ///
            /// ```
            #[doc = concat!("use idmint_core::", stringify!($ty), ";")]
            ///
            #[doc = concat!("let id = ", stringify!($ty), "::EXAMPLE;")]
            #[doc = concat!("assert_eq!(", stringify!($ty), "::from_raw(id.to_raw())?, id);")]
            #[doc = concat!("assert!(", stringify!($ty), "::from_raw(0).is_err());")]
            /// # Ok::<(), idmint_core::Error>(())
            /// ```
            #[inline]
            pub fn from_raw(raw: u64) -> Result<Self, crate::Error> {
                crate::id_impl::nonzero(&Self::LAYOUT, raw).map($ty)
            }

            /// The raw value.
            ///
            /// # Example
            ///
            /// ```
            #[doc = concat!("use idmint_core::", stringify!($ty), ";")]
            ///
            #[doc = concat!("assert_ne!(", stringify!($ty), "::EXAMPLE.to_raw(), 0);")]
            /// ```
            pub const fn to_raw(self) -> u64 {
                self.0.get()
            }

            fn from_generated_raw(raw: u64) -> Self {
                $ty(crate::id_impl::generated_nonzero(raw))
            }
        }

        impl crate::generator::Sealed for $ty {
            const SHAPE: Option<crate::pack::Shape> = Some($ty::LAYOUT.compiled_shape());
        }

        crate::id_impl::u64_id!($ty);
    };
}

pub(crate) use nonzero_bit_id;

/// Validates `raw` against `layout` and refuses 0. Inlined, so that a constant layout folds.
#[inline]
pub(crate) fn nonzero(
    layout: &crate::BitLayout,
    raw: u64,
) -> Result<std::num::NonZeroU64, crate::Error> {
    layout.validate(raw)?;
    std::num::NonZeroU64::new(raw).ok_or_else(|| crate::Error::InvalidId {
        layout: layout.name().to_owned(),
        reason: "0 is not an id; ids start at 1",
    })
}

/// A generated raw ID as `NonZeroU64`. The generator never issues the pair (tick 0, sequence 0)
/// and every layout that uses this keeps a zero node and sequence at zero bits, so a generated
/// ID is never 0; the fallback exists only to avoid a panic path.
#[inline]
pub(crate) fn generated_nonzero(raw: u64) -> std::num::NonZeroU64 {
    debug_assert_ne!(raw, 0);
    std::num::NonZeroU64::new(raw).unwrap_or(std::num::NonZeroU64::MIN)
}

/// Accepts an ID as a string in its default format, or as a JSON integer.
#[cfg(feature = "serde")]
pub(crate) struct U64IdVisitor<T>(std::marker::PhantomData<T>);

#[cfg(feature = "serde")]
impl<T> U64IdVisitor<T> {
    pub(crate) fn new() -> Self {
        U64IdVisitor(std::marker::PhantomData)
    }
}

#[cfg(feature = "serde")]
impl<T> serde::de::Visitor<'_> for U64IdVisitor<T>
where
    T: std::str::FromStr<Err = crate::Error> + TryFrom<u64, Error = crate::Error>,
{
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an id as a string (or an integer)")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<T, E> {
        text.parse().map_err(E::custom)
    }

    fn visit_u64<E: serde::de::Error>(self, raw: u64) -> Result<T, E> {
        T::try_from(raw).map_err(E::custom)
    }

    fn visit_i64<E: serde::de::Error>(self, raw: i64) -> Result<T, E> {
        let raw = u64::try_from(raw).map_err(|_| E::custom("an id cannot be negative"))?;
        T::try_from(raw).map_err(E::custom)
    }
}
