//! Claims of generator IDs, the contract every backend keeps: what a server asks for
//! ([`GeneratorIds`], [`ClaimRequest`]), what it holds ([`Claim`], [`ClaimState`]), what a
//! shared store records of itself ([`Lineage`]), and the [`Coordinator`] trait.

use std::{fmt, time::Instant};

use tokio::sync::watch;

use crate::Error;

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
    /// Any generator ID in `0..count`, the lowest free one first (on a shared store, claimants
    /// that meet spread out after it: [`Probe`](crate::Probe)). If all are held, the claim
    /// fails; it never wraps around.
    Pool {
        /// How many generator IDs the layout has.
        count: u64,
    },
    /// Any of `first`, `first + step`, … (`count` of them), the lowest free one first (as a
    /// pool's, spread out after a conflict on a shared store): the
    /// generator IDs whose identity has the fields deployment config fixes (a datacenter, a
    /// LableOrg cluster), from `idmint_core::Layout::generator_ids_with`.
    Stride {
        /// The lowest generator ID.
        first: u64,
        /// The distance between two.
        step: u64,
        /// How many there are.
        count: u64,
    },
}

impl GeneratorIds {
    /// The generator IDs to try, in order.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_coord::GeneratorIds;
    ///
    /// let cluster = GeneratorIds::Stride { first: 5, step: 16, count: 3 };
    /// assert_eq!(cluster.candidates().collect::<Vec<_>>(), vec![5, 21, 37]);
    /// ```
    pub fn candidates(self) -> impl Iterator<Item = u64> {
        let (first, step, count) = self.progression();
        (0..count).map(move |i| first + i * step)
    }

    /// Whether `generator_id` is one of them.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_coord::GeneratorIds;
    ///
    /// let cluster = GeneratorIds::Stride { first: 5, step: 16, count: 3 };
    /// assert!(cluster.contains(21) && !cluster.contains(22) && !cluster.contains(53));
    /// ```
    pub fn contains(self, generator_id: u64) -> bool {
        let (first, step, count) = self.progression();
        generator_id >= first
            && (generator_id - first).is_multiple_of(step.max(1))
            && (generator_id - first) / step.max(1) < count
    }

    /// How many generator IDs there are.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_coord::GeneratorIds::Pool { count: 1 << 40 }.count(), 1 << 40);
    /// ```
    pub fn count(self) -> u64 {
        self.progression().2
    }

    /// `(first, step, count)` of every kind.
    fn progression(self) -> (u64, u64, u64) {
        match self {
            GeneratorIds::Fixed(id) => (id, 1, 1),
            GeneratorIds::Pool { count } => (0, 1, count),
            GeneratorIds::Stride { first, step, count } => (first, step, count),
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

    /// Checks the request as every backend must before claiming: the namespace name (which
    /// backends use in file names and keys) and the generator IDs (not empty, within 64 bits,
    /// none twice).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`], saying which.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_coord::{ClaimRequest, GeneratorIds};
    ///
    /// assert!(ClaimRequest::new("orders", GeneratorIds::Pool { count: 8 }, "snowflake").check().is_ok());
    /// let repeats = GeneratorIds::Stride { first: 5, step: 0, count: 2 };
    /// assert!(ClaimRequest::new("orders", repeats, "snowflake").check().is_err());
    /// assert!(ClaimRequest::new("Orders!", GeneratorIds::Fixed(1), "snowflake").check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), Error> {
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
        let (first, step, count) = self.generator_ids.progression();
        if count == 0 {
            return Err(Error::InvalidRequest("a generator-ID pool must not be empty".into()));
        }
        if step == 0
            || (count - 1).checked_mul(step).and_then(|span| span.checked_add(first)).is_none()
        {
            return Err(Error::InvalidRequest(format!(
                "generator IDs {first} + k·{step} for k below {count} do not fit 64 bits, or repeat"
            )));
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

    /// Raises the mark the claim starts above to at least `mark_ms` (a mark remembered
    /// elsewhere, higher than the store's).
    pub(crate) fn raise_mark(&mut self, mark_ms: u64) {
        self.mark_ms = Some(self.mark_ms.map_or(mark_ms, |mark| mark.max(mark_ms)));
    }
}

/// What a shared store (etcd) records of itself, so that a server can tell whether it claims
/// on the store it used before ([`Remembered`](crate::Remembered)).
///
/// # Example
///
/// ```
/// use idmint_coord::Lineage;
///
/// let lineage = Lineage {
///     store: "etcd cluster 8e9e05c52164694d, prefix idmint/".into(),
///     recorded: true,
///     adopted_ms: None,
/// };
/// assert!(lineage.recorded);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lineage {
    /// Which store, for people and for comparison: for etcd, its cluster ID and prefix.
    pub store: String,
    /// Whether the store records itself yet: `false` for a store that holds no idmint marks
    /// (new, wiped, or another one), whose first claim will record it.
    pub recorded: bool,
    /// Set when an operator adopted the store (`idmint lease adopt-cluster`): the floor that
    /// adoption raised every mark to (Unix ms).
    #[serde(default)]
    pub adopted_ms: Option<u64>,
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

    /// The shared store's record of itself, read now; `None` (the default) for a store that
    /// lives in this process or on this machine and needs no remembering.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when the store cannot be read; [`Error::Corrupt`] when its
    /// record is not one idmint wrote.
    async fn lineage(&self) -> Result<Option<Lineage>, Error> {
        Ok(None)
    }
}
