//! The one error type of `idmint-server`, and the one place where errors, the engine's
//! among them, become HTTP (and gRPC) status codes, stable error codes and `Retry-After`
//! hints.

/// Everything a request or the server itself can run into.
///
/// Messages are lower-case and carry the facts. [`Error::status`] and [`Error::code`] decide
/// what a client sees; nothing else in the crate chooses status codes.
///
/// # Example
///
/// ```
/// use idmint_server::Error;
///
/// let err = Error::UnknownNamespace("orders".into());
/// assert_eq!(err.status(), 404);
/// assert_eq!(err.code(), "unknown_namespace");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter or body is malformed or out of range.
    #[error("{0}")]
    BadRequest(String),
    /// The namespace does not exist (namespaces are configured, never created on demand).
    #[error("no namespace `{0}`")]
    UnknownNamespace(String),
    /// The namespace needs a bearer token and none was given.
    #[error("namespace `{0}` needs a bearer token")]
    Unauthorized(String),
    /// The bearer token is not this namespace's.
    #[error("the token is not valid for namespace `{0}`")]
    Forbidden(String),
    /// The request body is larger than the limit.
    #[error("request body larger than {limit} bytes")]
    PayloadTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The request's header (request line and header fields) is larger than the limit.
    #[error("request header larger than {limit} bytes")]
    HeaderTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The request target (path and query string) is longer than the HTTP stack takes.
    #[error("request target too long")]
    UriTooLong,
    /// The route does not exist.
    #[error("no such route: {0}")]
    NotFound(String),
    /// The method is not allowed on this route.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// The `Accept` header allows none of the media types the route answers in.
    #[error("not acceptable: this route answers in {0}")]
    NotAcceptable(&'static str),
    /// The request is in a media type or a content coding this server does not read: a gRPC
    /// call whose `content-type` is not gRPC's, or whose `grpc-encoding` is not `identity`.
    #[error("unsupported media type: {0}")]
    UnsupportedMediaType(String),
    /// The namespace holds no generator ID right now (starting, or claiming again).
    #[error("namespace `{0}` is not ready to issue ids")]
    NotReady(String),
    /// Issuing would go past the durably stored high-water mark; the server is extending it.
    #[error("namespace `{namespace}` cannot issue ids until its high-water mark is extended")]
    WindowExhausted {
        /// The namespace.
        namespace: String,
        /// A hint for `Retry-After`, in ms.
        retry_after_ms: u64,
    },
    /// The generator asked to wait longer than a request may.
    #[error("namespace `{namespace}` is busy: the next id is {wait_ms} ms away")]
    Busy {
        /// The namespace.
        namespace: String,
        /// How long the next ID is away, in ms.
        wait_ms: u64,
    },
    /// The server is shutting down.
    #[error("the server is shutting down")]
    ShuttingDown,
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
    /// A coordination or store failure (claims, marks; segments, counters, Redis). A store
    /// that ran out of IDs ([`idmint_coord::Error::Exhausted`]) is 503 with the code
    /// `exhausted` and no `Retry-After`: retrying will not help, an operator must act.
    #[error(transparent)]
    Coord(#[from] idmint_coord::Error),
    /// A failure of the core (layouts, generators).
    #[error(transparent)]
    Core(#[from] idmint_core::Error),
    /// A listener or I/O failure. The message carries the operating system's error once (it
    /// is not also the source, so a chain of causes does not repeat it).
    #[error("{context}: {os}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        os: std::io::Error,
    },
    /// An error of the engine that this server does not name (the engine's error enum is
    /// `#[non_exhaustive]`; every error it has today has its own variant here).
    #[error(transparent)]
    Engine(idmint_engine::Error),
}

/// Every error of the engine as the variant of the same name: the engine chooses no status
/// code, and [`Error::status`] is where one is chosen.
///
/// # Example
///
/// ```
/// use idmint_server::Error;
///
/// let error = Error::from(idmint_engine::Error::NotReady("orders".into()));
/// assert!(matches!(&error, Error::NotReady(ns) if ns == "orders"));
/// assert_eq!((error.status(), error.code()), (503, "not_ready"));
/// ```
impl From<idmint_engine::Error> for Error {
    fn from(error: idmint_engine::Error) -> Self {
        use idmint_engine::Error as E;
        match error {
            E::BadRequest(message) => Error::BadRequest(message),
            E::UnknownNamespace(name) => Error::UnknownNamespace(name),
            E::NotReady(name) => Error::NotReady(name),
            E::WindowExhausted { namespace, retry_after_ms } => {
                Error::WindowExhausted { namespace, retry_after_ms }
            }
            E::Busy { namespace, wait_ms } => Error::Busy { namespace, wait_ms },
            E::Config(message) => Error::Config(message),
            E::MarkTooFarAhead { namespace, ahead_ms, limit_ms } => {
                Error::MarkTooFarAhead { namespace, ahead_ms, limit_ms }
            }
            E::PublicIdsExhausted { namespace, reason } => {
                Error::PublicIdsExhausted { namespace, reason }
            }
            E::Coord(error) => Error::Coord(error),
            E::Core(error) => Error::Core(error),
            other => Error::Engine(other),
        }
    }
}

impl Error {
    /// The HTTP status code for this error: 4xx for what the client can fix, 503 when the
    /// server cannot safely issue now, 500 only for failures of the server itself.
    pub fn status(&self) -> u16 {
        match self {
            Error::BadRequest(_) => 400,
            Error::Unauthorized(_) => 401,
            Error::Forbidden(_) => 403,
            Error::UnknownNamespace(_) | Error::NotFound(_) => 404,
            Error::MethodNotAllowed => 405,
            Error::NotAcceptable(_) => 406,
            Error::UnsupportedMediaType(_) => 415,
            Error::PayloadTooLarge { .. } => 413,
            Error::UriTooLong => 414,
            Error::HeaderTooLarge { .. } => 431,
            Error::NotReady(_)
            | Error::WindowExhausted { .. }
            | Error::Busy { .. }
            | Error::ShuttingDown
            | Error::PublicIdsExhausted { .. }
            | Error::Coord(_) => 503,
            Error::Core(core) => core_status(core),
            Error::Config(_)
            | Error::MarkTooFarAhead { .. }
            | Error::Io { .. }
            | Error::Engine(_) => 500,
        }
    }

    /// The stable, machine-readable error code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::BadRequest(_) => "bad_request",
            Error::UnknownNamespace(_) => "unknown_namespace",
            Error::Unauthorized(_) => "unauthorized",
            Error::Forbidden(_) => "forbidden",
            Error::PayloadTooLarge { .. } => "payload_too_large",
            Error::HeaderTooLarge { .. } => "header_too_large",
            Error::UriTooLong => "uri_too_long",
            Error::NotFound(_) => "not_found",
            Error::MethodNotAllowed => "method_not_allowed",
            Error::NotAcceptable(_) => "not_acceptable",
            Error::UnsupportedMediaType(_) => "unsupported_media_type",
            Error::NotReady(_) => "not_ready",
            Error::WindowExhausted { .. } => "window_exhausted",
            Error::Busy { .. } => "busy",
            Error::ShuttingDown => "shutting_down",
            Error::PublicIdsExhausted { .. } => "layout_exhausted",
            Error::Config(_) => "config",
            Error::MarkTooFarAhead { .. } => "mark_too_far_ahead",
            Error::Coord(idmint_coord::Error::Exhausted { .. }) => "exhausted",
            Error::Coord(_) => "coordination_unavailable",
            Error::Core(core) => core_code(core),
            Error::Io { .. } => "io",
            Error::Engine(_) => "internal",
        }
    }

    /// For 503 answers: how long the client should wait before retrying, in whole seconds
    /// (the `Retry-After` header). None for an exhausted store: waiting does not help.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_server::Error;
    ///
    /// let exhausted = Error::Coord(idmint_coord::Error::Exhausted { what: "counter", name: "orders-launch".into(), max: 99_999 });
    /// assert_eq!((exhausted.status(), exhausted.code(), exhausted.retry_after_secs()), (503, "exhausted", None));
    /// assert_eq!(Error::NotReady("orders".into()).retry_after_secs(), Some(1));
    /// ```
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Error::Coord(idmint_coord::Error::Exhausted { .. }) => None,
            Error::WindowExhausted { retry_after_ms, .. } => {
                Some(retry_after_ms.div_ceil(1000).max(1))
            }
            Error::Busy { wait_ms, .. } => Some(wait_ms.div_ceil(1000).max(1)),
            _ if self.status() == 503 => Some(1),
            _ => None,
        }
    }

    /// The gRPC status code number (`tonic::Code` as `i32`) for this error.
    pub fn grpc_code(&self) -> i32 {
        // Numbers from the gRPC spec: 3 INVALID_ARGUMENT, 5 NOT_FOUND, 7 PERMISSION_DENIED,
        // 8 RESOURCE_EXHAUSTED, 12 UNIMPLEMENTED, 13 INTERNAL, 14 UNAVAILABLE,
        // 16 UNAUTHENTICATED, 9 FAILED_PRECONDITION.
        match self.status() {
            400 | 406 => 3,
            401 => 16,
            403 => 7,
            404 => 5,
            405 | 415 => 12,
            413 | 414 | 431 => 8,
            409 => 9,
            503 => 14,
            _ => 13,
        }
    }

    /// The JSON body of this error, the one shape every HTTP error answer has:
    /// `{"error":{"code":…,"message":…}}`. Built only here; the HTTP API's responses and the
    /// answers that replace hyper's bare errors both use it.
    pub(crate) fn body(&self) -> idmint_proto::ErrorResponse {
        idmint_proto::ErrorResponse {
            error: idmint_proto::ErrorDetail {
                code: self.code().to_owned(),
                message: self.to_string(),
            },
        }
    }

    /// The error for a request the HTTP stack (hyper) refused before idmint's code saw it,
    /// by the status hyper chose: 431 for a header over `header_limit` bytes, 414 for a
    /// request target too long, 400 for malformed framing (request line, header syntax,
    /// version).
    pub(crate) fn from_http_stack(status: u16, header_limit: usize) -> Self {
        match status {
            431 => Error::HeaderTooLarge { limit: header_limit },
            414 => Error::UriTooLong,
            _ => Error::BadRequest("malformed HTTP request".into()),
        }
    }

    /// The error for a gRPC request message that tonic could not decode: over the size
    /// limit (tonic's RESOURCE_EXHAUSTED or OUT_OF_RANGE) it is [`Error::PayloadTooLarge`],
    /// anything else (bytes that are not the message: a truncated varint, a wrong wire type,
    /// invalid UTF-8) is [`Error::BadRequest`].
    #[cfg(feature = "grpc")]
    pub(crate) fn from_grpc_decode(status: &tonic::Status, limit: usize) -> Self {
        match status.code() {
            tonic::Code::ResourceExhausted | tonic::Code::OutOfRange => {
                Error::PayloadTooLarge { limit }
            }
            _ => Error::BadRequest(format!("malformed request message: {}", status.message())),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { context: context.into(), os: source }
    }
}

/// The gRPC status of an error (feature `grpc`): the code of [`Error::grpc_code`], the message,
/// and as metadata the stable error code (`idmint-error`) and, for UNAVAILABLE, the seconds to
/// wait (`retry-after`).
///
/// # Example
///
/// ```
/// use idmint_server::Error;
///
/// let status = tonic::Status::from(Error::UnknownNamespace("orders".into()));
/// assert_eq!(status.code(), tonic::Code::NotFound);
/// assert_eq!(status.message(), "no namespace `orders`");
/// assert_eq!(status.metadata().get("idmint-error").unwrap(), "unknown_namespace");
/// ```
#[cfg(feature = "grpc")]
impl From<Error> for tonic::Status {
    fn from(error: Error) -> Self {
        let code = tonic::Code::from_i32(error.grpc_code());
        if code == tonic::Code::Internal {
            tracing::error!(error = %error, "call failed");
        }
        let mut metadata = tonic::metadata::MetadataMap::new();
        metadata.insert("idmint-error", tonic::metadata::MetadataValue::from_static(error.code()));
        if let Some(secs) = error.retry_after_secs() {
            metadata.insert("retry-after", secs.into());
        }
        tonic::Status::with_metadata(code, error.to_string(), metadata)
    }
}

/// Core errors that reach a request: bad input is the client's, clock and window trouble means
/// the server cannot issue safely now.
fn core_status(core: &idmint_core::Error) -> u16 {
    use idmint_core::Error as E;
    match core {
        E::ClockBackward { .. }
        | E::WindowExhausted { .. }
        | E::BeforeEpoch { .. }
        | E::TimeExhausted { .. }
        | E::CounterExhausted { .. } => 503,
        E::InvalidConfig(_) | E::InvalidLayout(_) => 500,
        _ => 400,
    }
}

fn core_code(core: &idmint_core::Error) -> &'static str {
    use idmint_core::Error as E;
    match core {
        E::ClockBackward { .. } => "clock_backward",
        E::WindowExhausted { .. } => "window_exhausted",
        E::BeforeEpoch { .. } => "clock_before_epoch",
        E::TimeExhausted { .. } => "layout_exhausted",
        E::CounterExhausted { .. } => "counter_exhausted",
        E::InvalidConfig(_) | E::InvalidLayout(_) => "config",
        E::InvalidText { .. } | E::UnsupportedFormat { .. } | E::UnknownFormat(_) => "invalid_id",
        E::Zero | E::HighestBitSet | E::InvalidTimestamp | E::InvalidId { .. } => "invalid_id",
        E::FieldOutOfRange { .. } | E::InvalidTypeId(_) => "invalid_id",
        // An ID of another namespace's type (an order ID where a user ID belongs).
        E::TypePrefixMismatch { .. } => "type_prefix_mismatch",
        // `format` names a form this namespace cannot write (`ulid` on a 64-bit layout).
        E::UnknownForm { .. } | E::UnsupportedForm { .. } => "bad_request",
        _ => "bad_request",
    }
}
