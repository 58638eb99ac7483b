//! The one error type of `idmint-coord`, named for what went wrong from the caller's side.

use std::{io, sync::Arc};

/// Everything that can go wrong while claiming generator IDs or storing marks.
///
/// Backend errors are mapped into these categories; the native error, where there is one, is
/// kept as the source.
///
/// # Example
///
/// ```
/// use idmint_coord::Error;
///
/// let err = Error::PoolExhausted { namespace: "orders".into(), size: 1024 };
/// assert_eq!(err.to_string(), "every generator id of namespace `orders` is claimed (pool of 1024)");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The generator ID is claimed by someone else.
    #[error(
        "generator id {generator_id} of namespace `{namespace}` is already claimed by {holder}"
    )]
    Conflict {
        /// The namespace.
        namespace: String,
        /// The generator ID.
        generator_id: u64,
        /// Who holds it, as they described themselves.
        holder: String,
    },
    /// Every generator ID of the pool is claimed.
    #[error("every generator id of namespace `{namespace}` is claimed (pool of {size})")]
    PoolExhausted {
        /// The namespace.
        namespace: String,
        /// How many generator IDs the pool has.
        size: u64,
    },
    /// The claim is no longer held, so nothing was stored.
    #[error(
        "the claim on generator id {generator_id} of namespace `{namespace}` is no longer held"
    )]
    ClaimLost {
        /// The namespace.
        namespace: String,
        /// The generator ID.
        generator_id: u64,
    },
    /// A mark below the stored one was offered; marks never go down.
    #[error("mark {offered_ms} is below the stored mark {stored_ms}; marks never go down")]
    MarkRegressed {
        /// The mark that was offered.
        offered_ms: u64,
        /// The stored mark.
        stored_ms: u64,
    },
    /// The stored mark was written under another layout.
    #[error(
        "the mark of namespace `{namespace}` was written for layout `{stored}`, not `{expected}`; move it aside to start over"
    )]
    LayoutChanged {
        /// The namespace.
        namespace: String,
        /// The fingerprint stored with the mark.
        stored: String,
        /// The fingerprint of the layout in use.
        expected: String,
    },
    /// The request itself is invalid.
    #[error("invalid claim request: {0}")]
    InvalidRequest(String),
    /// Stored data could not be read back.
    #[error("corrupt coordination data in {path}: {reason}")]
    Corrupt {
        /// Where the data is.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A local file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        #[source]
        source: Arc<io::Error>,
    },
    /// The coordination service could not be reached, or did not answer in time.
    #[error("{backend} is unavailable: {reason}")]
    Unavailable {
        /// The backend.
        backend: &'static str,
        /// What happened.
        reason: String,
    },
}

impl Error {
    /// Builds [`Error::Io`].
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io { context: context.into(), source: Arc::new(source) }
    }
}
