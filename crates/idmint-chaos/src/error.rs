//! [`ChaosError`]: the harness's one error enum: what went wrong while running a scenario or
//! reading a history (a failed check is not an error: it is a report).

use idmint_coord::testing::HarnessError;

/// Why the harness could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChaosError {
    /// A service harness (etcd) failed.
    #[error("service harness: {0}")]
    Harness(#[from] HarnessError),
    /// A local file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An `idmint serve` process did not start or misbehaved.
    #[error("{0}")]
    Server(String),
    /// A history file is not what the harness writes.
    #[error("{path}:{line}: {reason}")]
    History {
        /// The file.
        path: String,
        /// The line (1-based).
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The command line asked for something that does not exist.
    #[error("{0}")]
    Usage(String),
}

impl ChaosError {
    /// An [`ChaosError::Io`] with its context.
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ChaosError {
        let context = context.into();
        move |source| ChaosError::Io { context, source }
    }
}
