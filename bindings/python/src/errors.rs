//! The one place where Rust errors become Python exceptions: each error of the `idmint` crate
//! (and of its client, and of the core's decoding) is given the class of `idmint.errors` that
//! says what went wrong, with the message the CLI prints for it.

use pyo3::{prelude::*, sync::PyOnceLock, types::PyType};

/// The exception classes, looked up once in `idmint.errors` (where they are defined, with
/// their docstrings and bases).
static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The classes of `idmint.errors`, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// `Error`: the base class.
    Error,
    /// `ConfigError`: invalid settings, a bad configuration file, a store URL that cannot be used.
    Config,
    /// `NamespaceError`: no such namespace.
    Namespace,
    /// `StoreError`: the store (data directory, Postgres, etcd) cannot be reached or used.
    Store,
    /// `ClockError`: the clock went back, or is outside the layout's range.
    Clock,
    /// `ExhaustedError`: the layout, the window or the pool has no ID left for now.
    Exhausted,
    /// `UnavailableError`: not ready yet, busy, or no server answered.
    Unavailable,
    /// `ForkedError`: a forked child may not use its parent's minter.
    Forked,
    /// `ClosedError`: used after `close()`.
    Closed,
    /// `DecodeError`: the ID or text does not read as asked.
    Decode,
    /// `RequestError`: an argument is refused (a count, a format for this layout).
    Request,
    /// `ClientError`: a server answered something the client refuses.
    Client,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Error => "Error",
            Class::Config => "ConfigError",
            Class::Namespace => "NamespaceError",
            Class::Store => "StoreError",
            Class::Clock => "ClockError",
            Class::Exhausted => "ExhaustedError",
            Class::Unavailable => "UnavailableError",
            Class::Forked => "ForkedError",
            Class::Closed => "ClosedError",
            Class::Decode => "DecodeError",
            Class::Request => "RequestError",
            Class::Client => "ClientError",
        }
    }

    /// The exception of this class with `message`.
    pub(crate) fn err(self, message: impl Into<String>) -> PyErr {
        let message = message.into();
        Python::attach(|py| {
            let class = MODULE
                .get_or_try_init(py, || py.import("idmint.errors").map(Bound::unbind))
                .and_then(|m| m.bind(py).getattr(self.name()))
                .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
            match class {
                Ok(class) => PyErr::from_type(class, message),
                Err(e) => e,
            }
        })
    }
}

/// An error of the `idmint` crate as its exception.
pub(crate) fn minter(e: &idmint::Error) -> PyErr {
    use idmint::Error as E;
    let class = match e {
        E::Config(_) | E::ConfigFile { .. } | E::BadUrl { .. } => Class::Config,
        E::Unreachable { .. } | E::DataDirNotWritable { .. } | E::DataDirOwned { .. } => {
            Class::Store
        }
        E::UnknownNamespace { .. } => Class::Namespace,
        E::Forked { .. } => Class::Forked,
        E::Closed => Class::Closed,
        E::Core(e) => core_class(e),
        E::Coord(e) => coord_class(e),
        E::Engine(e) => engine_class(e),
        _ => Class::Error,
    };
    class.err(e.to_string())
}

/// An error of the core (decoding, formats, layouts) as its exception.
pub(crate) fn core(e: &idmint_core::Error) -> PyErr {
    core_class(e).err(e.to_string())
}

/// An error of the engine (the key files of public IDs) as its exception.
pub(crate) fn engine(e: &idmint_engine::Error) -> PyErr {
    engine_class(e).err(e.to_string())
}

/// An error of idmint-client as its exception.
pub(crate) fn client(e: &idmint::client::Error) -> PyErr {
    use idmint::client::ErrorKind as K;
    let class = match e.kind() {
        K::Config(_) => Class::Config,
        K::Unavailable { .. } => Class::Unavailable,
        K::Closed => Class::Closed,
        K::Rejected { status: 404, .. } => Class::Namespace,
        K::Rejected { status: 503 | 429, .. } => Class::Unavailable,
        _ => Class::Client,
    };
    class.err(e.to_string())
}

fn core_class(e: &idmint_core::Error) -> Class {
    use idmint_core::Error as E;
    match e {
        E::ClockBackward { .. } | E::BeforeEpoch { .. } => Class::Clock,
        E::TimeExhausted { .. } | E::WindowExhausted { .. } | E::CounterExhausted { .. } => {
            Class::Exhausted
        }
        E::UnknownLayout { .. }
        | E::InvalidLayout(_)
        | E::InvalidConfig(_)
        | E::UnknownFormat(_)
        | E::UnknownForm { .. } => Class::Config,
        E::UnsupportedFormat { .. } | E::UnsupportedForm { .. } | E::EmptyBatch => Class::Request,
        E::RandomUnavailable(_) => Class::Error,
        _ => Class::Decode,
    }
}

fn coord_class(e: &idmint_coord::Error) -> Class {
    match e {
        idmint_coord::Error::PoolExhausted { .. } => Class::Exhausted,
        idmint_coord::Error::InvalidRequest(_) => Class::Config,
        _ => Class::Store,
    }
}

fn engine_class(e: &idmint_engine::Error) -> Class {
    use idmint_engine::Error as E;
    match e {
        E::BadRequest(_) => Class::Request,
        E::UnknownNamespace(_) => Class::Namespace,
        E::NotReady(_) | E::Busy { .. } => Class::Unavailable,
        E::WindowExhausted { .. } | E::PublicIdsExhausted { .. } => Class::Exhausted,
        E::MarkTooFarAhead { .. } => Class::Clock,
        E::Config(_) => Class::Config,
        E::Coord(e) => coord_class(e),
        E::Core(e) => core_class(e),
        _ => Class::Error,
    }
}
