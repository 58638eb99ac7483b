//! Persistent counters, and the DecimalId source built on them (elfo's book,
//! "ID generation"): a launch ID from one counter at every start, a generator ID
//! from another at every start and whenever the DecimalId counter runs out. This module owns
//! the [`CounterStore`] contract and [`DecimalIds`]; the ID arithmetic stays in
//! `idmint_core::DecimalIdGenerator`.
//!
//! | store | counters live in | feature |
//! | --- | --- | --- |
//! | [`FileStore`](crate::FileStore) | `counters/<name>.json`, replaced atomically under `flock` | always |
//! | [`MemoryStore`](crate::MemoryStore) | a map (tests) | always |
//! | `PostgresStore` | a row of `idmint_counters`, bumped by one atomic statement | `postgres` |
//! | `EtcdStore` | a key, bumped by a transaction that compares its mod revision | `etcd` |

use std::{
    fmt,
    sync::{Arc, Mutex, MutexGuard},
};

use arc_swap::ArcSwap;
use idmint_core::{DecimalId, DecimalIdBatch, DecimalIdGenerator};

use crate::{Error, segment::MAX_SEGMENT_ID};

/// Durable, atomic counters, each counting up from 1 and never wrapping.
///
/// Implementations must make [`next`](Self::next) an atomic increment, durable before it
/// returns, so that no value is ever returned twice for one name (by any process, across
/// crashes); a failed or abandoned call may skip a value, never repeat one.
///
/// # Example
///
/// ```
/// use idmint_coord::{CounterStore, Error, MemoryStore};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let counters = MemoryStore::new();
/// assert_eq!(counters.next("launch", 2).await?, 1);
/// assert_eq!(counters.next("launch", 2).await?, 2);
/// assert!(matches!(counters.next("launch", 2).await, Err(Error::Exhausted { max: 2, .. })));
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
#[async_trait::async_trait]
pub trait CounterStore: Send + Sync + fmt::Debug {
    /// The backend's name, for logs and metrics (`file`, `memory`, `postgres`, `etcd`).
    fn name(&self) -> &'static str;

    /// Increments the counter `name` (which starts at 0) and returns its new value, in
    /// `1..=max`, durable before it returns.
    ///
    /// # Errors
    ///
    /// [`Error::Exhausted`] when the counter is already at `max` (it stays there: it never
    /// wraps); [`Error::InvalidRequest`] for a name that is not 1 to 64 characters of `a-z`,
    /// `0-9`, `-` and `_`, or a `max` above `2^63 − 1`; [`Error::Io`], [`Error::Corrupt`],
    /// [`Error::NotDurable`] or [`Error::Unavailable`] when the store could not (or may not)
    /// have counted.
    async fn next(&self, name: &str, max: u64) -> Result<u64, Error>;

    /// Raises the counter `name` to `value` (in `1..=max`) and returns it, durable before it
    /// returns, when the counter is below `value`; otherwise writes nothing. A value the
    /// caller chose (a DecimalId launch ID from deployment config) is so taken at most once,
    /// by any process, and never after [`next`](Self::next) has counted past it.
    ///
    /// # Errors
    ///
    /// [`Error::Taken`] when the counter is already at `value` or above;
    /// [`Error::InvalidRequest`] for an invalid name, a `value` of 0 or above `max`, or a
    /// `max` above `2^63 − 1`; the store's errors as for [`next`](Self::next).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_coord::{CounterStore, Error, MemoryStore};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let counters = MemoryStore::new();
    /// assert_eq!(counters.take("launch", 7, 99_999).await?, 7);
    /// assert!(matches!(counters.take("launch", 7, 99_999).await, Err(Error::Taken { current: 7, .. })));
    /// assert_eq!(counters.next("launch", 99_999).await?, 8);
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    async fn take(&self, name: &str, value: u64, max: u64) -> Result<u64, Error>;
}

/// Checks a counter request: a valid name and `max <= 2^63 − 1` (every store keeps values in a
/// signed 64-bit integer).
pub(crate) fn check_counter_request(name: &str, max: u64) -> Result<(), Error> {
    crate::segment::check_name("counter", name)?;
    if max > MAX_SEGMENT_ID {
        return Err(Error::InvalidRequest(format!(
            "a counter's maximum must be at most {MAX_SEGMENT_ID}, not {max}"
        )));
    }
    Ok(())
}

/// Checks a [`CounterStore::take`] request: a valid counter request and `value` in `1..=max`.
pub(crate) fn check_take_request(name: &str, value: u64, max: u64) -> Result<(), Error> {
    check_counter_request(name, max)?;
    if !(1..=max).contains(&value) {
        return Err(Error::InvalidRequest(format!(
            "a value taken from counter `{name}` must be 1 to {max}, not {value}"
        )));
    }
    Ok(())
}

/// The rule of [`CounterStore::take`] on a counter at `current`: `value` if it is above.
pub(crate) fn taken_after(name: &str, current: u64, value: u64) -> Result<u64, Error> {
    if current >= value {
        return Err(Error::Taken { name: name.to_owned(), value, current });
    }
    Ok(value)
}

/// Settings of a [`DecimalIdIssuer`].
///
/// # Example
///
/// ```
/// use idmint_coord::DecimalIdOptions;
///
/// // Tests: switch to a new generator ID after every 1,000 IDs.
/// let options = DecimalIdOptions { max_counter: Some(1_000), ..DecimalIdOptions::default() };
/// assert_eq!(DecimalIdOptions::default().max_counter, None);
/// // A launch ID from deployment config, taken once.
/// let launch = DecimalIdOptions { launch_id: Some(4_210), ..DecimalIdOptions::default() };
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecimalIdOptions {
    /// How many IDs one generator ID issues before the next is taken: `None` for the layout's
    /// 922,337,202; a smaller number only to test the switch.
    pub max_counter: Option<u64>,
    /// This start's launch ID, 1 to 99,999, as the deployment's launch log gives it: taken
    /// from the launch counter with [`CounterStore::take`], so it is refused if an earlier
    /// start (or another process) used it or one above it. `None` takes the counter's next
    /// value.
    pub launch_id: Option<u64>,
}

/// Starts DecimalId sources (elfo's book). See [`DecimalIds::start`].
#[derive(Debug)]
pub enum DecimalIds {}

impl DecimalIds {
    /// Takes this start's launch ID (1 to 99,999: the `launch_name` counter's next value, or
    /// [`DecimalIdOptions::launch_id`] if it is above every launch counted so far) and a
    /// generator ID (0 to 99,999: the `generator_name` counter's next value minus one), and
    /// returns a source of DecimalIds for them.
    ///
    /// Whenever a generator ID's counter part runs out, the source takes the next generator ID
    /// from `generator_name` and goes on with counter 1. Since no generator ID is ever taken
    /// twice (the counters never wrap), no two sources ever share a (generator ID, counter)
    /// pair: IDs are unique across processes, restarts and crashes. They are monotonic per
    /// generator ID (the book's *sharded monotonicity*), not across a switch. A crash wastes
    /// the rest of the generator ID in use; a start takes one launch ID and one generator ID.
    ///
    /// # Errors
    ///
    /// [`Error::Exhausted`] once 99,999 launches (or 100,000 generator IDs) have been counted;
    /// [`Error::InvalidRequest`] for invalid names or `max_counter`; the store's errors.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::{DecimalIdOptions, DecimalIds, MemoryStore};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let counters = Arc::new(MemoryStore::new());
    /// let options = DecimalIdOptions { max_counter: Some(2), ..DecimalIdOptions::default() };
    /// let ids = DecimalIds::start(counters.clone(), "launch", "generator", options.clone()).await?;
    /// assert_eq!((ids.launch_id(), ids.generator_id()), (1, 0));
    /// assert_eq!(ids.next().await?.to_raw(), 1_00000_00001);
    /// assert_eq!(ids.next().await?.to_raw(), 2_00000_00001);
    /// // The counter part ran out: generator ID 1 takes over.
    /// assert_eq!(ids.next().await?.to_raw(), 1_00001_00001);
    ///
    /// // A restart gets a new launch ID and a new generator ID.
    /// let again = DecimalIds::start(counters, "launch", "generator", options).await?;
    /// assert_eq!((again.launch_id(), again.generator_id()), (2, 2));
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn start(
        counters: Arc<dyn CounterStore>,
        launch_name: &str,
        generator_name: &str,
        options: DecimalIdOptions,
    ) -> Result<DecimalIdIssuer, Error> {
        crate::segment::check_name("counter", launch_name)?;
        crate::segment::check_name("counter", generator_name)?;
        if let Some(max) = options.max_counter
            && !(DecimalId::MIN_COUNTER..=DecimalId::MAX_COUNTER).contains(&max)
        {
            return Err(Error::InvalidRequest(format!(
                "max_counter must be 1 to {}, not {max}",
                DecimalId::MAX_COUNTER
            )));
        }
        let launch_id = match options.launch_id {
            Some(chosen) => counters.take(launch_name, chosen, DecimalId::MAX_LAUNCH_ID).await?,
            None => counters.next(launch_name, DecimalId::MAX_LAUNCH_ID).await?,
        };
        let first = take_generator(&*counters, generator_name, launch_id, &options).await?;
        Ok(DecimalIdIssuer {
            counters,
            generator_name: generator_name.to_owned(),
            options,
            launch_id,
            taken: Mutex::new(vec![first.generator_id]),
            current: ArcSwap::from_pointee(first),
            switching: tokio::sync::Mutex::new(()),
        })
    }
}

/// DecimalIds for one start (launch) of a process; see [`DecimalIds::start`].
///
/// The hot path is `DecimalIdGenerator`'s lock-free counter; only a switch of generator ID
/// takes a lock and a store call.
pub struct DecimalIdIssuer {
    counters: Arc<dyn CounterStore>,
    generator_name: String,
    options: DecimalIdOptions,
    launch_id: u64,
    current: ArcSwap<Current>,
    /// Serialises switches of generator ID.
    switching: tokio::sync::Mutex<()>,
    /// Every generator ID taken, in order.
    taken: Mutex<Vec<u64>>,
}

/// The generator in use and its generator ID.
#[derive(Debug)]
struct Current {
    generator_id: u64,
    generator: DecimalIdGenerator,
}

impl fmt::Debug for DecimalIdIssuer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecimalIdIssuer")
            .field("counters", &self.counters.name())
            .field("launch_id", &self.launch_id)
            .field("generator_id", &self.generator_id())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl DecimalIdIssuer {
    /// This start's launch ID.
    pub fn launch_id(&self) -> u64 {
        self.launch_id
    }

    /// The generator ID in use.
    pub fn generator_id(&self) -> u64 {
        self.current.load().generator_id
    }

    /// Every generator ID this source has taken, in order (the last is in use).
    pub fn generator_ids(&self) -> Vec<u64> {
        self.taken().clone()
    }

    /// The next ID.
    ///
    /// # Errors
    ///
    /// When the generator ID in use has run out and no new one can be taken: the counter
    /// store's error, [`Error::Exhausted`] after 100,000 generator IDs. Nothing is lost: the
    /// next call tries again.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::{DecimalIdOptions, DecimalIds, MemoryStore};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let ids = DecimalIds::start(Arc::new(MemoryStore::new()), "l", "g", DecimalIdOptions::default()).await?;
    /// assert!(ids.next().await? < ids.next().await?);
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn next(&self) -> Result<DecimalId, Error> {
        loop {
            let current = self.current.load();
            match current.generator.next() {
                Ok(id) => return Ok(id),
                Err(idmint_core::Error::CounterExhausted { .. }) => {
                    let used_up = arc_swap::Guard::into_inner(current);
                    self.switch(&used_up).await?;
                }
                Err(e) => return Err(unexpected(e)),
            }
        }
    }

    /// Up to `n` consecutive IDs of one generator ID (fewer when it is about to run out, never
    /// none).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for `n == 0`; otherwise as [`next`](Self::next).
    pub async fn next_batch(&self, n: u64) -> Result<DecimalIdBatch, Error> {
        if n == 0 {
            return Err(Error::InvalidRequest("a batch must ask for at least one id".into()));
        }
        loop {
            let current = self.current.load();
            match current.generator.next_batch(n) {
                Ok(batch) => return Ok(batch),
                Err(idmint_core::Error::CounterExhausted { .. }) => {
                    let used_up = arc_swap::Guard::into_inner(current);
                    self.switch(&used_up).await?;
                }
                Err(e) => return Err(unexpected(e)),
            }
        }
    }

    fn taken(&self) -> MutexGuard<'_, Vec<u64>> {
        self.taken.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Replaces the used-up generator with one on a new generator ID, unless another caller
    /// already did.
    #[cold]
    async fn switch(&self, used_up: &Arc<Current>) -> Result<(), Error> {
        let _switching = self.switching.lock().await;
        if !Arc::ptr_eq(&self.current.load(), used_up) {
            return Ok(());
        }
        let next =
            take_generator(&*self.counters, &self.generator_name, self.launch_id, &self.options)
                .await?;
        self.taken().push(next.generator_id);
        self.current.store(Arc::new(next));
        Ok(())
    }
}

/// Takes a new generator ID from `counters` and builds its generator.
async fn take_generator(
    counters: &dyn CounterStore,
    generator_name: &str,
    launch_id: u64,
    options: &DecimalIdOptions,
) -> Result<Current, Error> {
    let value = counters.next(generator_name, DecimalId::MAX_GENERATOR_ID + 1).await?;
    let generator_id = value - 1;
    let mut generator = DecimalIdGenerator::new(generator_id, launch_id).map_err(unexpected)?;
    if let Some(max) = options.max_counter {
        generator = generator.with_max_counter(max).map_err(unexpected)?;
    }
    Ok(Current { generator_id, generator })
}

/// An error from the core that the checks above rule out.
fn unexpected(e: idmint_core::Error) -> Error {
    Error::InvalidRequest(format!("decimal-id generator: {e}"))
}
