//! The one error type of `idmint-engine`: what issuing, starting and stopping can run into.
//! It names what went wrong and carries the facts; it chooses no status code (a front end,
//! such as `idmint-server`, maps it to its protocol's).

/// Everything the engine can run into: a call for IDs, a start or a stop.
///
/// Messages are lower-case and carry the facts.
///
/// # Example
///
/// ```
/// use idmint_engine::Error;
///
/// let err = Error::UnknownNamespace("orders".into());
/// assert_eq!(err.to_string(), "no namespace `orders`");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A count, shard key or sink is out of range or does not fit the namespace.
    #[error("{0}")]
    BadRequest(String),
    /// The namespace does not exist (namespaces are configured, never created on demand).
    #[error("no namespace `{0}`")]
    UnknownNamespace(String),
    /// The namespace holds no generator ID right now (starting, or claiming again).
    #[error("namespace `{0}` is not ready to issue ids")]
    NotReady(String),
    /// Issuing would go past the durably stored high-water mark; the engine is extending it.
    #[error("namespace `{namespace}` cannot issue ids until its high-water mark is extended")]
    WindowExhausted {
        /// The namespace.
        namespace: String,
        /// How long until the extension is expected, in ms.
        retry_after_ms: u64,
    },
    /// The generator asked to wait longer than a call may.
    #[error("namespace `{namespace}` is busy: the next id is {wait_ms} ms away")]
    Busy {
        /// The namespace.
        namespace: String,
        /// How long the next ID is away, in ms.
        wait_ms: u64,
    },
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Refused to start: the stored high-water mark is further ahead of the clock than allowed.
    #[error(
        "namespace `{namespace}`: the stored high-water mark is {ahead_ms} ms ahead of the clock (limit {limit_ms} ms); check the clock, or start with allow_ahead to run ahead of it"
    )]
    MarkTooFarAhead {
        /// The namespace.
        namespace: String,
        /// How far ahead the mark is, in ms.
        ahead_ms: u64,
        /// The configured limit, in ms.
        limit_ms: u64,
    },
    /// The namespace's public IDs cannot hold the next ID: it needs the top bits that carry
    /// the key version, so the layout has run out under them.
    #[error("namespace `{namespace}` cannot make public ids any more: {reason}")]
    PublicIdsExhausted {
        /// The namespace.
        namespace: String,
        /// Why.
        reason: String,
    },
    /// A coordination or store failure (claims, marks; segments, counters, Redis).
    #[error(transparent)]
    Coord(#[from] idmint_coord::Error),
    /// A failure of the core (layouts, generators).
    #[error(transparent)]
    Core(#[from] idmint_core::Error),
}
