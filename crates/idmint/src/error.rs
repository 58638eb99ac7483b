//! The one error type of `idmint`: what building a [`Minter`](crate::Minter) and minting can
//! run into, each with a message that says what to do.

use std::path::Path;

/// Everything building, using and closing a [`Minter`](crate::Minter) can run into.
///
/// # Example
///
/// ```
/// use idmint::Error;
///
/// let err = Error::Forked { parent: 10, child: 11 };
/// assert!(err.to_string().contains("pid 11 is a fork of pid 10"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The settings are invalid (builder, configuration file or environment).
    #[error("invalid settings: {0}")]
    Config(String),
    /// The configuration file cannot be read or parsed.
    #[error("cannot use the configuration file {path}: {reason}")]
    ConfigFile {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A store's URL cannot be used.
    #[error("invalid store url `{url}`: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// Why it is refused.
        reason: String,
    },
    /// The store (Postgres) did not answer.
    #[error("the store cannot be reached: {reason}; check that it runs and that the url is right")]
    Unreachable {
        /// What failed.
        reason: String,
    },
    /// The data directory cannot be created or written.
    #[error(
        "the data directory {path} is not writable: {reason}; give a directory this process can \
         write with `data_dir`"
    )]
    DataDirNotWritable {
        /// The directory.
        path: String,
        /// The operating system's error.
        reason: String,
    },
    /// The data directory belongs to another user: its claims and marks are someone else's.
    #[error(
        "the data directory {path} is owned by user {owner}, not by this process's user {me}; run \
         as its owner, or give another directory"
    )]
    DataDirOwned {
        /// The directory.
        path: String,
        /// Its owner's user ID.
        owner: u32,
        /// This process's user ID.
        me: u32,
    },
    /// No namespace of that name is configured.
    #[error("no namespace `{name}`; this minter has {known}")]
    UnknownNamespace {
        /// The name asked for (cut to 64 characters).
        name: String,
        /// The namespaces it has, comma-separated.
        known: String,
    },
    /// The minter was built with [`OnFork::Refuse`](crate::OnFork::Refuse) and is used in a
    /// forked child.
    #[error(
        "pid {child} is a fork of pid {parent}, which built this minter with OnFork::Refuse: it \
         may not issue from its parent's claim; build a new minter in the child, or use \
         OnFork::Claim"
    )]
    Forked {
        /// The process that built the minter.
        parent: u32,
        /// This process.
        child: u32,
    },
    /// The minter was closed ([`Minter::close`](crate::Minter::close)).
    #[error("the minter is closed")]
    Closed,
    /// The blocking handle could not start its runtime.
    #[error("cannot start the blocking handle's runtime: {0}")]
    Runtime(String),
    /// An ID is not of the type asked for ([`Minter::next_as`](crate::Minter::next_as)), or a
    /// layout failed.
    #[error(transparent)]
    Core(#[from] idmint_core::Error),
    /// A coordination failure (claims, marks).
    #[error(transparent)]
    Coord(idmint_coord::Error),
    /// The engine refused (not ready, busy, an invalid configuration, ...).
    #[error(transparent)]
    Engine(idmint_engine::Error),
}

impl From<idmint_coord::Error> for Error {
    fn from(e: idmint_coord::Error) -> Self {
        match e {
            idmint_coord::Error::Unavailable { .. } => Error::Unreachable { reason: e.to_string() },
            idmint_coord::Error::InvalidRequest(reason) if reason.contains("connection string") => {
                Error::BadUrl { url: String::new(), reason }
            }
            e => Error::Coord(e),
        }
    }
}

impl From<idmint_engine::Error> for Error {
    fn from(e: idmint_engine::Error) -> Self {
        match e {
            idmint_engine::Error::Coord(e) => Error::from(e),
            idmint_engine::Error::Core(e) => Error::Core(e),
            e => Error::Engine(e),
        }
    }
}

impl Error {
    /// [`Error::DataDirNotWritable`] for `path`.
    pub(crate) fn not_writable(path: &Path, reason: impl std::fmt::Display) -> Error {
        Error::DataDirNotWritable { path: path.display().to_string(), reason: reason.to_string() }
    }
}
