//! The one error of this crate: a bad argument found before sending, etcd's gRPC status, or
//! a lease keep-alive that ended.

/// Why an etcd call failed.
///
/// # Example
///
/// ```
/// use idmint_etcd::Error;
///
/// let refused = Error::from(tonic::Status::not_found("etcdserver: requested lease not found"));
/// assert_eq!(refused.status().map(|s| s.code()), Some(tonic::Code::NotFound));
/// assert!(Error::LeaseNotFound(7).to_string().contains("lease not found"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument was refused before anything was sent (an endpoint that is not a URL, an
    /// `https://` endpoint, no endpoint at all).
    #[error("invalid argument: {0}")]
    InvalidArgs(String),
    /// etcd (or the transport on the way to it) answered with a gRPC status: its code tells a
    /// member that cannot serve now from a refused request.
    #[error("etcd answered {}: {}", .0.code(), .0.message())]
    Status(Box<tonic::Status>),
    /// A keep-alive found the lease gone (etcd answered with a TTL of 0: expired or revoked).
    #[error("lease not found: {0:x}")]
    LeaseNotFound(i64),
    /// A keep-alive stream ended or could not be written to (the member went away).
    #[error("lease keep-alive failed: {0}")]
    KeepAlive(String),
}

impl Error {
    /// etcd's gRPC status, when it answered with one.
    ///
    /// # Example
    ///
    /// ```
    /// let error = idmint_etcd::Error::from(tonic::Status::unavailable("no leader"));
    /// assert_eq!(error.status().map(|s| s.code()), Some(tonic::Code::Unavailable));
    /// ```
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            Error::Status(status) => Some(status),
            _ => None,
        }
    }
}

impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Self {
        Error::Status(Box::new(status))
    }
}
