//! Segments: IDs produced by a database ("IDs produced by DB" in elfo's book, Leaf-segment). A
//! [`SegmentStore`] hands out disjoint, increasing ranges of positive IDs, durably; a
//! [`SegmentAllocator`] serves IDs from them in memory, fetching the next range in the
//! background. This module owns the store contract and the allocator; it knows nothing of
//! snowflake layouts, clocks (except to size ranges) or claims.
//!
//! | store | where ranges live | processes sharing a namespace |
//! | --- | --- | --- |
//! | [`FileStore`] | one JSON file per namespace, replaced atomically under an exclusive `flock` | any number on one machine |
//! | [`MemoryStore`] | a map | tasks of one process (tests) |
//! | `PostgresStore` (feature `postgres`) | one row per namespace, bumped by one atomic statement | any number, anywhere |
//!
//! Why IDs are never handed out twice: a store moves a namespace's high-water mark (`max_id`)
//! up by a range's length in one durable, atomic step and returns the range only after that
//! step is durable; the mark never goes down. So every range lies above every range handed out
//! before it, whichever process asked. A crash loses at most the ranges the allocator held
//! (the current one and the one fetched ahead): gaps, never duplicates (RELIABILITY.md,
//! F11, F12).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use idmint_coord::{MemoryStore, SegmentAllocator, SegmentOptions};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = Arc::new(MemoryStore::new());
//! let ids = SegmentAllocator::new(store, "orders", SegmentOptions::default())?;
//! let first = ids.next().await?;
//! assert_eq!(first, 1);
//! assert!(ids.next().await? > first);
//! # Ok::<(), idmint_coord::Error>(())
//! # }).unwrap();
//! ```

mod allocator;
pub(crate) mod file;
mod memory;

use std::{fmt, ops::Range};

pub use self::{
    allocator::{SegmentAllocator, SegmentOptions, SegmentStats},
    file::FileStore,
    memory::MemoryStore,
};
use crate::Error;

/// The largest ID a segment store hands out: `2^63 − 1` (`i64::MAX`), so that every ID fits a
/// signed 64-bit column, as elfo's book recommends. The smallest is 1.
pub const MAX_SEGMENT_ID: u64 = i64::MAX as u64;

/// A durable source of ID ranges, one sequence per namespace.
///
/// Implementations must hand out, for each namespace, ranges that are disjoint and increasing
/// (each starts after the end of every range returned before, to any caller, in any process),
/// that contain exactly `step` IDs, all within `1..=`[`MAX_SEGMENT_ID`], and that are durable
/// before they are returned: after a crash of the store or the caller, no range returned
/// before can be returned again. A failed or abandoned call may waste IDs, never repeat them.
/// [`SegmentAllocator`] holds a `Arc<dyn SegmentStore>`.
///
/// # Example
///
/// ```
/// use idmint_coord::{FileStore, SegmentStore};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = std::env::temp_dir().join(format!("idmint-segment-doc-{}", std::process::id()));
/// let store = FileStore::open(&dir)?;
/// let a = store.next_range("orders", 100).await?;
/// let b = store.next_range("orders", 100).await?;
/// assert_eq!(a.end - a.start, 100);
/// assert!(b.start >= a.end);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
#[async_trait::async_trait]
pub trait SegmentStore: Send + Sync + fmt::Debug {
    /// The backend's name, for logs and metrics (`file`, `memory`, `postgres`).
    fn name(&self) -> &'static str;

    /// The next `step` IDs of `namespace`, as a half-open range, durable before it returns.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for a namespace that is not 1 to 64 characters of `a-z`,
    /// `0-9`, `-` and `_`, or a step of 0 or above [`MAX_SEGMENT_ID`]; [`Error::Exhausted`]
    /// when the range would pass [`MAX_SEGMENT_ID`] (nothing is handed out);
    /// [`Error::NotDurable`], [`Error::Io`], [`Error::Corrupt`] or [`Error::Unavailable`]
    /// when the store could not (or may not) have stored the range.
    async fn next_range(&self, namespace: &str, step: u64) -> Result<Range<u64>, Error>;
}

/// Checks a namespace or counter name, which stores use in file names, keys and rows: 1 to 64
/// characters of `a-z`, `0-9`, `-` and `_` (the rule of claim namespaces).
pub(crate) fn check_name(what: &str, name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidRequest(format!(
            "{what} `{name}` must be 1 to 64 characters of a-z, 0-9, `-` or `_`"
        )))
    }
}

/// Checks a range request: a valid namespace and a step in `1..=MAX_SEGMENT_ID`.
pub(crate) fn check_range_request(namespace: &str, step: u64) -> Result<(), Error> {
    check_name("segment namespace", namespace)?;
    if step == 0 || step > MAX_SEGMENT_ID {
        return Err(Error::InvalidRequest(format!(
            "a segment step must be 1 to {MAX_SEGMENT_ID}, not {step}"
        )));
    }
    Ok(())
}

/// The range after a namespace's mark `max_id` (the last ID handed out, 0 for none), and the
/// new mark; [`Error::Exhausted`] when it would pass [`MAX_SEGMENT_ID`]. For stores that do
/// the arithmetic themselves (files, memory).
pub(crate) fn range_after(
    namespace: &str,
    max_id: u64,
    step: u64,
) -> Result<(Range<u64>, u64), Error> {
    match max_id.checked_add(step) {
        Some(new_max) if new_max <= MAX_SEGMENT_ID => Ok((max_id + 1..new_max + 1, new_max)),
        _ => Err(Error::Exhausted {
            what: "segment namespace",
            name: namespace.to_owned(),
            max: MAX_SEGMENT_ID,
        }),
    }
}

/// The value after a counter's current value, or [`Error::Exhausted`] at `max`.
pub(crate) fn counter_after(name: &str, value: u64, max: u64) -> Result<u64, Error> {
    if value >= max {
        return Err(Error::Exhausted { what: "counter", name: name.to_owned(), max });
    }
    Ok(value + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(max_id: u64, step: u64, expected: Option<(Range<u64>, u64)>) {
        let got = range_after("ns", max_id, step).ok();
        assert_eq!(got, expected, "range after {max_id} with step {step}");
    }

    #[test]
    fn ranges_follow_the_mark_and_stop_at_the_maximum() {
        check(0, 10, Some((1..11, 10)));
        check(10, 1, Some((11..12, 11)));
        check(
            MAX_SEGMENT_ID - 5,
            5,
            Some((MAX_SEGMENT_ID - 4..MAX_SEGMENT_ID + 1, MAX_SEGMENT_ID)),
        );
        check(MAX_SEGMENT_ID - 5, 6, None);
        check(MAX_SEGMENT_ID, 1, None);
        check(u64::MAX, 1, None);
    }

    #[test]
    fn names_follow_the_namespace_rule() {
        for (name, ok) in
            [("orders", true), ("a-b_9", true), ("", false), ("Orders", false), ("a/b", false)]
        {
            assert_eq!(check_name("namespace", name).is_ok(), ok, "{name:?}");
        }
        assert!(check_name("namespace", &"a".repeat(64)).is_ok());
        assert!(check_name("namespace", &"a".repeat(65)).is_err());
        assert!(check_range_request("ns", 0).is_err());
        assert!(check_range_request("ns", MAX_SEGMENT_ID + 1).is_err());
    }

    #[test]
    fn counters_stop_at_their_maximum() {
        assert_eq!(counter_after("c", 0, 3).ok(), Some(1));
        assert_eq!(counter_after("c", 2, 3).ok(), Some(3));
        assert!(matches!(counter_after("c", 3, 3), Err(Error::Exhausted { max: 3, .. })));
        assert!(counter_after("c", 0, 0).is_err());
    }
}
