//! `idmint-coord`: who may issue which IDs. Exclusive claims on generator IDs, and a durable
//! high-water mark per generator ID, behind one [`Coordinator`] trait.
//!
//! A server claims a generator ID for a namespace, reads the mark the last holder left, starts
//! strictly above it, and before it issues IDs with time `t` it stores a mark `≥ t`. So two
//! holders of one generator ID never issue the same time, even across crashes, restarts and
//! clock steps (`reliability.md` §3, "window fence").
//!
//! Backends:
//!
//! | backend | claims | marks | use |
//! | --- | --- | --- | --- |
//! | [`FileCoordinator`] | an exclusive `flock` per (directory, namespace, generator ID) | a JSON file, written with fsync and an atomic rename | one machine, the default |
//! | [`MemoryCoordinator`] | a map | a map | tests; the reference implementation |
//! | `EtcdCoordinator` (feature `etcd`) | a key per (namespace, generator ID) on the claim's own etcd lease, created by a create-if-absent transaction; its create revision is the fencing token | a plain key, written by a transaction that compares the claim's token and the mark's last revision | several servers; `Scheme::LableOrg` shares LableOrg's `uniqueid-etcd` pool |
//!
//! Every backend passes the same conformance suite (`conformance`, feature `test-util`);
//! `testing` (same feature) starts real services such as etcd for those tests.
//!
//! # Example
//!
//! ```
//! use idmint_coord::{ClaimRequest, Coordinator, GeneratorIds, MemoryCoordinator};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let coordinator = MemoryCoordinator::new();
//! let request = ClaimRequest::new("orders", GeneratorIds::Pool { count: 1024 }, "snowflake");
//! let claim = coordinator.claim(&request).await?;
//! assert_eq!(claim.generator_id(), 0);
//! assert_eq!(claim.mark_ms(), None);
//! coordinator.store_mark(&claim, 1_700_000_003_000).await?;
//! coordinator.release(&claim).await?;
//!
//! let again = coordinator.claim(&request).await?;
//! assert_eq!(again.mark_ms(), Some(1_700_000_003_000));
//! # Ok::<(), idmint_coord::Error>(())
//! # }).unwrap();
//! ```

#[cfg(feature = "test-util")]
pub mod conformance;
mod error;
#[cfg(feature = "etcd")]
mod etcd;
mod file;
mod memory;
#[cfg(feature = "test-util")]
pub mod testing;

use std::{fmt, time::Instant};

use tokio::sync::watch;

#[cfg(feature = "etcd")]
pub use crate::etcd::{EtcdCoordinator, EtcdOptions, Scheme};
pub use crate::{error::Error, file::FileCoordinator, memory::MemoryCoordinator};

/// Which generator IDs a claimant accepts.
///
/// # Example
///
/// ```
/// use idmint_coord::GeneratorIds;
///
/// assert_eq!(GeneratorIds::Fixed(7).candidates().collect::<Vec<_>>(), vec![7]);
/// assert_eq!(GeneratorIds::Pool { count: 3 }.candidates().collect::<Vec<_>>(), vec![0, 1, 2]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeneratorIds {
    /// Exactly this generator ID (static configuration). If it is held, the claim fails.
    Fixed(u64),
    /// Any generator ID in `0..count`, the lowest free one first. If all are held, the claim
    /// fails; it never wraps around.
    Pool {
        /// How many generator IDs the layout has.
        count: u64,
    },
}

impl GeneratorIds {
    /// The generator IDs to try, in order.
    pub fn candidates(self) -> impl Iterator<Item = u64> {
        match self {
            GeneratorIds::Fixed(id) => id..id.saturating_add(1),
            GeneratorIds::Pool { count } => 0..count,
        }
    }
}

/// What a server asks for when it starts issuing a namespace's IDs.
///
/// # Example
///
/// ```
/// use idmint_coord::{ClaimRequest, GeneratorIds};
///
/// let request = ClaimRequest::new("default", GeneratorIds::Fixed(0), "snowflake")
///     .with_holder("host-a pid 42");
/// assert_eq!(request.holder, "host-a pid 42");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The namespace: 1 to 64 characters of `a-z`, `0-9`, `-` and `_`.
    pub namespace: String,
    /// Which generator IDs are acceptable.
    pub generator_ids: GeneratorIds,
    /// Identifies the layout (name, epoch, tick, widths). A mark written under another layout
    /// is refused: its times would mean something else.
    pub layout_fingerprint: String,
    /// Who is claiming, as shown to a claimant that finds the generator ID taken.
    pub holder: String,
}

impl ClaimRequest {
    /// A request with a holder description of this process (`pid N`).
    pub fn new(namespace: &str, generator_ids: GeneratorIds, layout_fingerprint: &str) -> Self {
        ClaimRequest {
            namespace: namespace.to_owned(),
            generator_ids,
            layout_fingerprint: layout_fingerprint.to_owned(),
            holder: format!("pid {}", std::process::id()),
        }
    }

    /// The same request with another holder description.
    pub fn with_holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = holder.into();
        self
    }

    /// Checks the namespace name, which backends use in file names and keys.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let ok = !self.namespace.is_empty()
            && self.namespace.len() <= 64
            && self
                .namespace
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !ok {
            return Err(Error::InvalidRequest(format!(
                "namespace `{}` must be 1 to 64 characters of a-z, 0-9, `-` or `_`",
                self.namespace
            )));
        }
        if let GeneratorIds::Pool { count: 0 } = self.generator_ids {
            return Err(Error::InvalidRequest("a generator-ID pool must not be empty".into()));
        }
        Ok(())
    }
}

/// Whether a claim is still held, as far as its backend knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimState {
    /// Held; with a lease-based backend, only until the given instant unless renewed.
    Held {
        /// When the claim lapses unless renewed (computed from the send time of the last
        /// acknowledged renewal, minus a margin), or `None` if it never lapses by itself.
        until: Option<Instant>,
    },
    /// Lost: another holder may take the generator ID. Serve only inside the window already
    /// stored, then claim again.
    Lost,
}

/// An exclusive claim on one generator ID of one namespace.
///
/// Dropping it without [`Coordinator::release`] is allowed (a crash does the same): file
/// claims end with the process, lease claims when their lease expires. The mark stays.
#[derive(Debug)]
pub struct Claim {
    namespace: String,
    generator_id: u64,
    mark_ms: Option<u64>,
    token: u64,
    state: watch::Receiver<ClaimState>,
}

impl Claim {
    pub(crate) fn new(
        namespace: &str,
        generator_id: u64,
        mark_ms: Option<u64>,
        token: u64,
        state: watch::Receiver<ClaimState>,
    ) -> Self {
        Claim { namespace: namespace.to_owned(), generator_id, mark_ms, token, state }
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The claimed generator ID.
    pub fn generator_id(&self) -> u64 {
        self.generator_id
    }

    /// The high-water mark the claim started with (Unix ms), if one was stored: every ID this
    /// holder issues must lie in a tick that starts after it.
    pub fn mark_ms(&self) -> Option<u64> {
        self.mark_ms
    }

    /// The claim's current state.
    pub fn state(&self) -> ClaimState {
        *self.state.borrow()
    }

    /// A receiver that sees every change of the claim's state.
    pub fn watch(&self) -> watch::Receiver<ClaimState> {
        self.state.clone()
    }

    /// The backend's handle for this claim.
    pub(crate) fn token(&self) -> u64 {
        self.token
    }
}

/// A store of generator-ID claims and high-water marks.
///
/// Implementations must make claims exclusive (two live claims never share a namespace and
/// generator ID), make [`store_mark`](Self::store_mark) durable before it returns, refuse it
/// for a claim that is no longer held, and never lower a stored mark. `idmint-server` holds a
/// `Arc<dyn Coordinator>`.
#[async_trait::async_trait]
pub trait Coordinator: Send + Sync + fmt::Debug {
    /// The backend's name, for logs and metrics (`file`, `memory`, `etcd`).
    fn name(&self) -> &'static str;

    /// Claims one generator ID for `request.namespace`, exclusively, and reads its mark.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] when a fixed generator ID is held, [`Error::PoolExhausted`] when
    /// every ID of a pool is held, [`Error::LayoutChanged`] when the stored mark was written
    /// under another layout, [`Error::InvalidRequest`], [`Error::Io`] or
    /// [`Error::Unavailable`].
    async fn claim(&self, request: &ClaimRequest) -> Result<Claim, Error>;

    /// Durably stores `mark_ms` as the claim's high-water mark. Only after this returns may
    /// IDs with times up to `mark_ms` be issued.
    ///
    /// # Errors
    ///
    /// [`Error::ClaimLost`] when the claim is no longer held (nothing is written),
    /// [`Error::MarkRegressed`] when `mark_ms` is below the stored mark, [`Error::Io`] or
    /// [`Error::Unavailable`] when the write may not have happened.
    async fn store_mark(&self, claim: &Claim, mark_ms: u64) -> Result<(), Error>;

    /// Gives the generator ID back; the claim can no longer store marks. The mark stays for
    /// the next holder. Releasing a claim twice is harmless.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] or [`Error::Unavailable`]; the claim ends anyway.
    async fn release(&self, claim: &Claim) -> Result<(), Error>;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::{Coordinator, FileCoordinator, MemoryCoordinator, conformance};

    #[tokio::test]
    async fn memory_backend_passes_the_conformance_suite() {
        let store = MemoryCoordinator::new();
        let handles = move || Arc::new(store.clone()) as Arc<dyn Coordinator>;
        conformance::run_all(&handles).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn file_backend_passes_the_conformance_suite() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().to_path_buf();
        let handles =
            move || Arc::new(FileCoordinator::open(&path).expect("open")) as Arc<dyn Coordinator>;
        conformance::run_all(&handles).await;
    }
}
