//! The one error type of `idmint-client`: an [`Error`] that is one pointer wide (so
//! `Result<AnyId, Error>` stays small on `next()`'s hot path), around an [`ErrorKind`] that
//! says what went wrong from the caller's side. Which failures are retried is decided in
//! `retry`, not here.

use idmint_core::AnyId;

/// Everything a client call can run into: see [`ErrorKind`] through [`Error::kind`].
///
/// Messages are lower-case and carry the facts. Errors are `Clone`: one failed refill of the
/// prefetch buffer is reported to every caller that was waiting for it.
///
/// # Example
///
/// ```
/// use idmint_client::{Error, ErrorKind};
///
/// let err = Error::from(ErrorKind::Rejected {
///     endpoint: "http://127.0.0.1:8080".into(),
///     status: 404,
///     code: "unknown_namespace".into(),
///     message: "no namespace `orders`".into(),
/// });
/// assert_eq!(err.code(), Some("unknown_namespace"));
/// assert!(matches!(err.kind(), ErrorKind::Rejected { status: 404, .. }));
/// assert_eq!(
///     err.to_string(),
///     "http://127.0.0.1:8080 refused the request (404 unknown_namespace): no namespace `orders`"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(transparent)]
pub struct Error(Box<ErrorKind>);

impl Error {
    /// What went wrong.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_client::{Error, ErrorKind};
    ///
    /// assert_eq!(Error::from(ErrorKind::Closed).kind(), &ErrorKind::Closed);
    /// ```
    pub fn kind(&self) -> &ErrorKind {
        &self.0
    }

    /// The server's error code, for [`ErrorKind::Rejected`].
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_client::{Error, ErrorKind};
    ///
    /// assert_eq!(Error::from(ErrorKind::Closed).code(), None);
    /// ```
    pub fn code(&self) -> Option<&str> {
        match self.kind() {
            ErrorKind::Rejected { code, .. } => Some(code),
            _ => None,
        }
    }
}

impl From<ErrorKind> for Error {
    #[cold]
    fn from(kind: ErrorKind) -> Self {
        Error(Box::new(kind))
    }
}

/// What went wrong, in the words of [`Error`]'s message.
///
/// # Example
///
/// ```
/// use idmint_client::ErrorKind;
///
/// assert_eq!(ErrorKind::Closed.to_string(), "the client is closed");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The builder's settings are invalid (no endpoint, an `https` URL, a bad namespace, ...).
    #[error("invalid client configuration: {0}")]
    Config(String),
    /// A server refused the request with an error the client must not retry (every 4xx, and
    /// 5xx other than 502, 503 and 504). Carries the server's own code and message.
    #[error("{endpoint} refused the request ({status} {code}): {message}")]
    Rejected {
        /// The endpoint that answered.
        endpoint: String,
        /// The HTTP status code.
        status: u16,
        /// The server's stable error code (`unauthorized`, `unknown_namespace`, ...), or
        /// `http_<status>` when the body was not an idmint error.
        code: String,
        /// The server's message.
        message: String,
    },
    /// Every attempt failed with a failure that is safe to retry (connection refused or
    /// reset, timeout, 502/503/504), and the attempts ran out.
    #[error("no endpoint could serve the request after {attempts} attempts; the last: {last}")]
    Unavailable {
        /// How many attempts were made.
        attempts: u32,
        /// What the last attempt ran into.
        last: String,
    },
    /// A server answered 200 with a body the client does not understand.
    #[error("{endpoint} sent a response the client does not understand: {message}")]
    Protocol {
        /// The endpoint that answered.
        endpoint: String,
        /// What is wrong with it.
        message: String,
    },
    /// A server handed out IDs out of order: within one batch, or below an earlier batch of
    /// the same generator. None of the batch's IDs are handed out.
    #[error("ids from {endpoint} went backwards: {next} came after {previous}")]
    NotMonotonic {
        /// The endpoint that answered.
        endpoint: String,
        /// The earlier ID.
        previous: AnyId,
        /// The later ID, which is not greater.
        next: AnyId,
    },
    /// Two endpoints describe the namespace with different layouts, so their IDs could
    /// collide.
    #[error(
        "namespace `{namespace}` has layout `{found}` at {endpoint} but `{expected}` elsewhere"
    )]
    LayoutMismatch {
        /// The namespace.
        namespace: String,
        /// The endpoint that differs.
        endpoint: String,
        /// The layout fingerprint seen first.
        expected: String,
        /// The layout fingerprint at `endpoint`.
        found: String,
    },
    /// [`Client::next_as`](crate::Client::next_as) got an ID that is not of the type asked
    /// for (another layout, or another width). The ID is not handed out again: a gap.
    #[error("id {id} is not a {target}: {reason}")]
    WrongType {
        /// The ID the server issued.
        id: AnyId,
        /// The type asked for.
        target: &'static str,
        /// Why it does not convert.
        reason: String,
    },
    /// The client was closed with [`Client::close`](crate::Client::close).
    #[error("the client is closed")]
    Closed,
    /// A refill failed inside the client itself (its task panicked): a bug in the client, never
    /// a server's doing. Nothing of that refill is handed out.
    #[error("a refill failed inside the client: {0}")]
    Internal(String),
    /// The client was built outside a tokio runtime.
    #[error("the client must be built inside a tokio runtime (or use `build_blocking`)")]
    NoRuntime,
}
