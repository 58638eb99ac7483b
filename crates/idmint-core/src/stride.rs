//! Generator strides: the generator IDs a fleet may claim when deployment config fixes part of
//! a layout's identity (a datacenter, a cluster), found by reading the identity as a
//! mixed-radix number ([`crate::Layout::generator_ids_with`]).

use crate::{error::Error, field::FieldValue};

/// Generator IDs `first`, `first + step`, … (`count` of them): those a fleet may claim when
/// deployment config fixes part of the identity
/// ([`Layout::generator_ids_with`](crate::Layout::generator_ids_with)).
///
/// # Example
///
/// ```
/// let ids = idmint_core::GeneratorStride { first: 5, step: 16, count: 3 };
/// assert_eq!(ids.ids().collect::<Vec<_>>(), [5, 21, 37]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneratorStride {
    /// The first (lowest) generator ID.
    pub first: u64,
    /// The distance between two generator IDs.
    pub step: u64,
    /// How many there are.
    pub count: u64,
}

impl GeneratorStride {
    /// The generator IDs, lowest first.
    ///
    /// # Example
    ///
    /// ```
    /// let all = idmint_core::GeneratorStride { first: 0, step: 1, count: 4 };
    /// assert_eq!(all.ids().last(), Some(3));
    /// ```
    pub fn ids(self) -> impl Iterator<Item = u64> {
        (0..self.count).map(move |i| self.first + i * self.step)
    }
}

/// The generator IDs of a layout named `name`, with `count` generator IDs and the identity
/// `identity` gives each, whose identity has the `fixed` values, as a [`GeneratorStride`]; the
/// rules and errors are [`crate::Layout::generator_ids_with`]'s.
pub(crate) fn generator_ids_with(
    name: &str,
    count: u64,
    fixed: &[(String, FieldValue)],
    identity: impl Fn(u64) -> Result<Vec<(String, FieldValue)>, Error>,
) -> Result<GeneratorStride, Error> {
    if count == 0 {
        return Err(Error::InvalidConfig(format!("layout `{name}` has no generator ids")));
    }
    if fixed.is_empty() {
        return Ok(GeneratorStride { first: 0, step: 1, count });
    }
    // The identity is a mixed-radix number whose digits are the fields, in an order each
    // layout chooses (`lable` puts the cluster above its generator_id). A field's span is
    // its largest value (at the last ID) less its smallest (at ID 0), plus one; its weight
    // is found by reading the identity at the weights found so far: ID 1 moves the
    // least significant field, ID `span` of that field moves the next one, and so on.
    let (lo, hi) = (identity(0)?, identity(count - 1)?);
    let number = |value: &FieldValue| match value {
        FieldValue::Number(n) => Some(*n),
        _ => None,
    };
    let not_plain = || {
        Error::InvalidConfig(format!(
            "the identity of layout `{}` is not one number read field by field",
            name
        ))
    };
    let mut spans = Vec::with_capacity(lo.len());
    for ((name, low), (_, high)) in lo.iter().zip(&hi) {
        match (number(low), number(high)) {
            (Some(low), Some(high)) if high >= low => spans.push((name, low, high - low + 1)),
            _ => return Err(not_plain()),
        }
    }
    // Field indices from the least significant, and each one's weight.
    let mut weights: Vec<Option<u64>> = vec![None; spans.len()];
    let mut order = Vec::with_capacity(spans.len());
    let mut weight = 1_u64;
    for k in 0..spans.len() {
        if spans[k].2 == 1 {
            weights[k] = Some(0);
        }
    }
    while weight < count {
        let at = identity(weight)?;
        let moved = (0..spans.len())
            .find(|&k| weights[k].is_none() && number(&at[k].1) == Some(spans[k].1 + 1))
            .ok_or_else(not_plain)?;
        weights[moved] = Some(weight);
        order.push(moved);
        weight = weight.checked_mul(spans[moved].2).ok_or_else(not_plain)?;
    }
    if weight != count {
        return Err(not_plain());
    }
    let mut values: Vec<Option<u64>> = vec![None; spans.len()];
    for (name, value) in fixed {
        let k = spans.iter().position(|s| s.0 == name).ok_or_else(|| Error::UnknownField {
            layout: name.to_owned(),
            field: name.clone(),
            expected: spans.iter().map(|s| s.0.as_str()).collect::<Vec<_>>().join(", "),
        })?;
        let (_, low, span) = spans[k];
        let v = number(value).ok_or_else(|| Error::InvalidFieldValue {
            field: name.clone(),
            reason: "a generator identity field takes a number".to_owned(),
        })?;
        if !(low..low + span).contains(&v) {
            return Err(Error::out_of_range(name, v, low, low + span - 1));
        }
        values[k] = Some(v - low);
    }
    // The free fields, from the least significant: adjacent in the radix order, they make
    // one progression.
    let free: Vec<usize> = order.iter().copied().filter(|&k| values[k].is_none()).collect();
    let positions: Vec<usize> =
        free.iter().filter_map(|k| order.iter().position(|o| o == k)).collect();
    if positions.windows(2).any(|pair| pair[1] != pair[0] + 1) {
        return Err(Error::InvalidConfig(format!(
            "fixing {} of layout `{}` leaves the free identity fields apart; fix fields so \
             that those left free are adjacent",
            fixed.iter().map(|(n, _)| format!("`{n}`")).collect::<Vec<_>>().join(", "),
            name
        )));
    }
    let weight_of = |k: usize| weights[k].unwrap_or(0);
    let first = (0..spans.len()).filter_map(|k| values[k].map(|v| v * weight_of(k))).sum();
    let step = free.first().map_or(1, |&k| weight_of(k));
    let count = free.iter().map(|&k| spans[k].2).product();
    Ok(GeneratorStride { first, step, count })
}
