//! What a namespace issues from: one [`Issuer`] per source, each in its own file under
//! `issuer/` (`generator.rs`; the store sources `segment.rs`, `counters.rs` and `redis.rs`,
//! which share the health and probing of `store.rs`). The namespace picks the issuer of its
//! source and routes every call to it.

pub(crate) mod active;
pub(crate) mod counters;
pub(crate) mod current;
pub(crate) mod generator;
pub(crate) mod redis;
pub(crate) mod segment;
pub(crate) mod store;
pub(crate) mod turns;

use std::{fmt, future::Future, pin::Pin, sync::Arc, time::Duration};

use idmint_coord::Coordinator;
use idmint_core::{AnyBatch, AnyId, Layout};
use tokio_util::sync::CancellationToken;

use crate::{
    Backends, Error, NamespaceConfig, ServerConfig, Source, clock::Clocks,
    metrics::NamespaceMetrics,
};

/// A boxed future, so that [`Issuer`] can be a trait object.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What every issuer of a namespace knows about it.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) layout: Layout,
    pub(crate) source: Source,
    pub(crate) config: NamespaceConfig,
    pub(crate) metrics: NamespaceMetrics,
}

/// Where a namespace's IDs come from: a generator on a claimed generator ID, or a store.
pub(crate) trait Issuer: fmt::Debug + Send + Sync {
    /// Makes the issuer ready: claims a generator ID and stores the first window, or starts
    /// the store.
    fn activate<'a>(
        &'a self,
        backends: &'a Backends,
        clocks: &'a Clocks,
        server: &'a ServerConfig,
    ) -> BoxFuture<'a, Result<(), Error>>;

    /// The background task until `shutdown`: extends the window and claims again, or starts
    /// and probes the store.
    fn maintain(
        self: Arc<Self>,
        backends: Backends,
        clocks: Arc<Clocks>,
        server: Arc<ServerConfig>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, ()>;

    /// Whether it can issue now.
    fn is_ready(&self, clocks: &Clocks) -> bool;

    /// The generator ID in use, if any.
    fn generator_id(&self) -> Option<u64>;

    /// Every generator ID in use: more than one for a namespace with `generators` above 1.
    fn generator_ids(&self) -> Vec<u64> {
        self.generator_id().into_iter().collect()
    }

    /// How far the IDs run ahead of the wall clock read now, in ms: the time in the newest ID
    /// issued, or the logical time of the next one if later, minus the wall clock (0 if not
    /// ahead); the largest over the generators. 0 for sources without a logical clock.
    fn ahead_of_wall_ms(&self, _clocks: &Clocks) -> u64 {
        0
    }

    /// One ID at once, when one is ready without waiting (the common case of a call for one
    /// ID; the namespace counts it); otherwise whether one is due within a tick, or the call
    /// must go down [`issue_into`](Self::issue_into), which waits, extends or refuses as it
    /// must. With `count`, an ID served is counted as one call for one ID (`single_ids`); the
    /// namespace passes `false` when it may still refuse the ID, and counts it itself.
    fn try_issue_one(&self, _clocks: &Clocks, _count: bool) -> Quick {
        Quick::Slow
    }

    /// Appends `count` IDs to `ids` in increasing order, waiting at most `max_wait_ms`. On an
    /// error the caller drops what it got (a store issuer leaves `ids` as it was).
    fn issue_into<'a>(
        &'a self,
        clocks: &'a Clocks,
        count: u64,
        max_wait_ms: u64,
        ids: &'a mut dyn IdSink,
    ) -> BoxFuture<'a, Result<(), Error>>;

    /// As [`issue_into`](Self::issue_into), every ID with `shard_key` in place of the
    /// namespace's own (a layout whose IDs carry one: `hot-guid`, from a generator). Other
    /// issuers refuse it; the namespace checks the layout first.
    fn issue_keyed_into<'a>(
        &'a self,
        _clocks: &'a Clocks,
        _count: u64,
        _shard_key: u32,
        _max_wait_ms: u64,
        _ids: &'a mut dyn IdSink,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async { Err(Error::BadRequest("this source takes no shard key".into())) })
    }

    /// Stops issuing; persists and releases what needs it.
    fn deactivate<'a>(
        &'a self,
        coordinator: &'a dyn Coordinator,
    ) -> BoxFuture<'a, Result<(), Error>>;
}

/// What a call for one ID found without waiting ([`Engine::try_issue_one`](crate::Engine::try_issue_one)).
#[derive(Debug)]
pub enum Quick {
    /// The ID. A call that would be refused takes the full path ([`Quick::Slow`]), which
    /// refuses it with the error and counts it: the answer stays one word and a tag.
    Done(AnyId),
    /// The tick's IDs are used up: one is due within a tick. The full path waits for it,
    /// first come, first served with the other calls that wait; a caller that spins and tries
    /// again instead is in no queue, and comes after the calls that are.
    NextTick,
    /// The call takes the full path ([`Engine::issue_one`](crate::Engine::issue_one)): it
    /// waits for a claim or a window, or behind calls that wait already, or is refused.
    Slow,
}

/// The first wait between attempts to claim a generator ID (or start a store) again; the
/// longest is `ServerConfig::claim_retry_ms`.
pub(crate) const RECLAIM_BACKOFF_MIN: Duration = Duration::from_millis(50);

/// The waits of a background task that retries while it fails: from
/// [`RECLAIM_BACKOFF_MIN`], doubling up to `ServerConfig::claim_retry_ms`, with one warning per
/// streak of failures and the rest at debug level (a spare waiting for a generator ID would
/// otherwise log every attempt).
pub(crate) struct Backoff {
    first: Duration,
    longest: Duration,
    next: Duration,
    /// Whether the current streak of failures was logged as a warning already.
    warned: bool,
}

impl Backoff {
    pub(crate) fn new(server: &ServerConfig) -> Self {
        let longest = Duration::from_millis(server.claim_retry_ms);
        let first = RECLAIM_BACKOFF_MIN.min(longest);
        Backoff { first, longest, next: first, warned: false }
    }

    /// The wait before the next attempt.
    pub(crate) fn wait(&self) -> Duration {
        self.next
    }

    /// An attempt worked: the next streak of failures starts over.
    pub(crate) fn succeeded(&mut self) {
        self.next = self.first;
        self.warned = false;
    }

    /// Logs a failed attempt (`what` failed) and returns the wait before the next one; the
    /// wait after that is twice as long, up to the limit.
    pub(crate) fn failed(&mut self, namespace: &str, error: &Error, what: &str) -> Duration {
        if !std::mem::replace(&mut self.warned, true) {
            tracing::warn!(namespace, error = %error, "{what}; retrying");
        } else {
            tracing::debug!(namespace, error = %error, "{what}; retrying");
        }
        let wait = self.next;
        self.next = (self.next * 2).min(self.longest);
        wait
    }
}

/// Checks a batch size, the one rule for every API: 1..=`max_batch`.
pub(crate) fn check_count(count: u64, max_batch: u64) -> Result<u64, Error> {
    match count {
        1.. if count <= max_batch => Ok(count),
        _ => Err(count_error(max_batch)),
    }
}

/// The error of a batch size that is not 1..=`max_batch` (for a front end that refuses a
/// count before it reaches the engine, such as one that is not a number).
///
/// # Example
///
/// ```
/// let error = idmint_engine::count_error(1000);
/// assert_eq!(error.to_string(), "`count` must be a whole number from 1 to 1000");
/// ```
pub fn count_error(max_batch: u64) -> Error {
    Error::BadRequest(format!("`count` must be a whole number from 1 to {max_batch}"))
}

/// A batch count (already checked against `max_batch`) as a length, and the capacity to set
/// aside for it: the one conversion of a count, so every issuer reserves alike.
pub(crate) fn count_len(count: u64) -> (usize, usize) {
    let len = usize::try_from(count).unwrap_or(usize::MAX);
    (len, len.min(1 << 20))
}

/// Where issued IDs go ([`Engine::issue_into`](crate::Engine::issue_into)): `AnyId`s
/// (`Vec<AnyId>`), the bare `u64`s of a 64-bit layout (`Vec<u64>`), or fixed-width big-endian
/// bytes ([`BeBytes`]). Lengths count IDs, not bytes. A generator's batches arrive whole
/// (`take`), and the bare-`u64` and byte sinks drain them in bulk. Sealed: these three are
/// the sinks.
///
/// # Example
///
/// ```
/// use idmint_engine::{BeBytes, IdSink};
///
/// let sink = BeBytes::new(128);
/// assert_eq!(sink.len(), 0);
/// assert!(sink.holds(128) && Vec::<u64>::new().holds(64) && !Vec::<u64>::new().holds(128));
/// ```
pub trait IdSink: Send + sealed::Sealed {
    /// The IDs held.
    fn len(&self) -> usize;
    /// Whether it holds no ID.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Sets room aside for `additional` more IDs.
    fn reserve(&mut self, additional: usize);
    /// Appends a generator's batch.
    fn take(&mut self, batch: AnyBatch);
    /// Appends one ID.
    fn push(&mut self, id: AnyId);
    /// IDs of a 64-bit store source.
    fn take_u64(&mut self, ids: &mut dyn Iterator<Item = u64>);
    /// Keeps the first `len` IDs.
    fn truncate(&mut self, len: usize);
    /// Whether it can hold the IDs of a layout `id_bits` wide.
    fn holds(&self, _id_bits: u32) -> bool {
        true
    }
    /// Replaces each ID from the `start`-th on with `map(id)` (public IDs), in place.
    fn publish_from(&mut self, start: usize, map: &mut Publish<'_>) -> Result<(), Error>;
}

/// What [`IdSink::publish_from`] does to each ID: its public form.
pub type Publish<'a> = dyn FnMut(AnyId) -> Result<AnyId, Error> + 'a;

/// Seals [`IdSink`]: the engine's own three sinks are the only ones.
mod sealed {
    #[allow(unreachable_pub, reason = "the seal of a public trait, named nowhere else")]
    pub trait Sealed {}
    impl Sealed for Vec<idmint_core::AnyId> {}
    impl Sealed for Vec<u64> {}
    impl Sealed for super::BeBytes {}
}

impl IdSink for Vec<AnyId> {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn reserve(&mut self, additional: usize) {
        Vec::reserve(self, additional);
    }

    fn take(&mut self, batch: AnyBatch) {
        self.extend(batch);
    }

    fn push(&mut self, id: AnyId) {
        Vec::push(self, id);
    }

    fn take_u64(&mut self, ids: &mut dyn Iterator<Item = u64>) {
        self.extend(ids.map(AnyId::U64));
    }

    fn truncate(&mut self, len: usize) {
        Vec::truncate(self, len);
    }

    fn publish_from(&mut self, start: usize, map: &mut Publish<'_>) -> Result<(), Error> {
        for id in &mut self[start..] {
            *id = map(*id)?;
        }
        Ok(())
    }
}

impl IdSink for Vec<u64> {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn reserve(&mut self, additional: usize) {
        Vec::reserve(self, additional);
    }

    fn take_u64(&mut self, ids: &mut dyn Iterator<Item = u64>) {
        self.extend(ids);
    }

    fn truncate(&mut self, len: usize) {
        Vec::truncate(self, len);
    }

    fn take(&mut self, batch: AnyBatch) {
        // Only 64-bit layouts issue into `u64`s (`Engine::issue_into` asks `holds` first),
        // so the refusal of a 128-bit batch cannot happen; were it to, the IDs are dropped
        // (a gap), never truncated to 64 bits.
        if let Err(e) = batch.extend_u64s(self) {
            tracing::error!(error = %e, "a 128-bit batch was issued into 64-bit ids");
        }
    }

    fn push(&mut self, id: AnyId) {
        // As `take`: a 128-bit ID is dropped, never truncated.
        match id {
            AnyId::U64(id) => Vec::push(self, id),
            AnyId::U128(_) => tracing::error!("a 128-bit id was issued into 64-bit ids"),
        }
    }

    fn holds(&self, id_bits: u32) -> bool {
        id_bits == 64
    }

    fn publish_from(&mut self, start: usize, map: &mut Publish<'_>) -> Result<(), Error> {
        for id in &mut self[start..] {
            match map(AnyId::U64(*id))? {
                AnyId::U64(v) => *id = v,
                AnyId::U128(_) => {
                    return Err(Error::Config("a 64-bit layout made a 128-bit public id".into()));
                }
            }
        }
        Ok(())
    }
}

/// IDs as fixed-width big-endian bytes, one after another: 8 bytes per ID of a 64-bit
/// layout, 16 per ID of a 128-bit one. What packed gRPC batches and
/// `application/octet-stream` HTTP batches carry; filled through [`AnyBatch::write_be`], with
/// no `AnyId` and no dispatch per ID.
///
/// # Example
///
/// ```
/// let bytes = idmint_engine::BeBytes::new(64);
/// assert_eq!((bytes.width(), bytes.bytes.len()), (8, 0));
/// ```
#[derive(Debug)]
pub struct BeBytes {
    /// The IDs' bytes, one ID after another.
    pub bytes: Vec<u8>,
    /// The bytes of one ID: 8 or 16.
    width: usize,
}

impl BeBytes {
    /// An empty buffer for IDs of a layout `id_bits` wide.
    pub fn new(id_bits: u32) -> Self {
        BeBytes { bytes: Vec::new(), width: if id_bits == 128 { 16 } else { 8 } }
    }

    /// The bytes of one ID.
    pub fn width(&self) -> usize {
        self.width
    }
}

impl IdSink for BeBytes {
    fn len(&self) -> usize {
        self.bytes.len() / self.width
    }

    fn reserve(&mut self, additional: usize) {
        self.bytes.reserve(additional.saturating_mul(self.width));
    }

    fn take(&mut self, batch: AnyBatch) {
        batch.write_be(&mut self.bytes);
    }

    fn push(&mut self, id: AnyId) {
        match id {
            AnyId::U64(id) => self.take_u64(&mut std::iter::once(id)),
            AnyId::U128(id) if self.width == 16 => self.bytes.extend_from_slice(&id.to_be_bytes()),
            AnyId::U128(_) => tracing::error!("a 128-bit id was issued into 8-byte ids"),
        }
    }

    fn take_u64(&mut self, ids: &mut dyn Iterator<Item = u64>) {
        for id in ids {
            if self.width == 8 {
                self.bytes.extend_from_slice(&id.to_be_bytes());
            } else {
                self.bytes.extend_from_slice(&u128::from(id).to_be_bytes());
            }
        }
    }

    fn truncate(&mut self, len: usize) {
        self.bytes.truncate(len.saturating_mul(self.width));
    }

    fn publish_from(&mut self, start: usize, map: &mut Publish<'_>) -> Result<(), Error> {
        let start = start.saturating_mul(self.width);
        let width = self.width;
        for chunk in self.bytes[start..].chunks_exact_mut(width) {
            let id = match <[u8; 8]>::try_from(&*chunk) {
                Ok(bytes) => AnyId::U64(u64::from_be_bytes(bytes)),
                Err(_) => AnyId::U128(u128::from_be_bytes(
                    chunk.try_into().map_err(|_| Error::Config("a partial packed id".into()))?,
                )),
            };
            match (map(id)?, width) {
                (AnyId::U64(v), 8) => chunk.copy_from_slice(&v.to_be_bytes()),
                (AnyId::U128(v), 16) => chunk.copy_from_slice(&v.to_be_bytes()),
                _ => return Err(Error::Config("a public id changed its width".into())),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one rule of a batch size, for every API: 1..=`max_batch`.
    #[test]
    fn counts_are_checked_against_max_batch() {
        let check = |count: u64, ok: bool| {
            assert_eq!(check_count(count, 100_000).is_ok(), ok, "{count}");
        };
        check(1, true);
        check(100_000, true);
        check(0, false);
        check(100_001, false);
        check(u64::MAX, false);
    }
}
