//! [`MemoryStore`]: segments and counters in a map, the reference implementation of
//! [`SegmentStore`] and [`CounterStore`], for tests. Nothing survives the process.

use std::{
    collections::HashMap,
    ops::Range,
    sync::{Arc, Mutex, MutexGuard},
};

use crate::{
    CounterStore, Error, SegmentStore,
    counter::{check_counter_request, check_take_request, taken_after},
    segment::{check_range_request, counter_after, range_after},
};

/// Segments and counters in memory. Clones share one store, so each clone can stand for one
/// more process.
///
/// # Example
///
/// ```
/// use idmint_coord::{CounterStore, MemoryStore, SegmentStore};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let other = store.clone();
/// assert_eq!(store.next_range("orders", 10).await?, 1..11);
/// assert_eq!(other.next_range("orders", 5).await?, 11..16);
/// assert_eq!(store.next("launch", 99_999).await?, 1);
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<Cells>>,
}

/// The last ID handed out per namespace, and the value per counter.
#[derive(Debug, Default)]
struct Cells {
    segments: HashMap<String, u64>,
    counters: HashMap<String, u64>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn cells(&self) -> MutexGuard<'_, Cells> {
        // Every update is a single insert, so a poisoned lock is fine.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait::async_trait]
impl SegmentStore for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn next_range(&self, namespace: &str, step: u64) -> Result<Range<u64>, Error> {
        check_range_request(namespace, step)?;
        let mut cells = self.cells();
        let max_id = cells.segments.get(namespace).copied().unwrap_or(0);
        let (range, new_max) = range_after(namespace, max_id, step)?;
        cells.segments.insert(namespace.to_owned(), new_max);
        Ok(range)
    }
}

#[async_trait::async_trait]
impl CounterStore for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn next(&self, name: &str, max: u64) -> Result<u64, Error> {
        check_counter_request(name, max)?;
        let mut cells = self.cells();
        let value = counter_after(name, cells.counters.get(name).copied().unwrap_or(0), max)?;
        cells.counters.insert(name.to_owned(), value);
        Ok(value)
    }

    async fn take(&self, name: &str, value: u64, max: u64) -> Result<u64, Error> {
        check_take_request(name, value, max)?;
        let mut cells = self.cells();
        let value = taken_after(name, cells.counters.get(name).copied().unwrap_or(0), value)?;
        cells.counters.insert(name.to_owned(), value);
        Ok(value)
    }
}
