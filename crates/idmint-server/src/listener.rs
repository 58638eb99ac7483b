//! The listeners and the shutdown sequence: [`serve`], `serve_grpc`, `serve_all` and
//! [`bind`]; the one accept loop of both ports; and the hygiene of every connection. One idea
//! a file, each importing only the ones below it:
//!
//! - `accept.rs`: the serve functions, the ports, the accept loop and the shutdown sequence;
//! - `admission.rs`: the caps on open connections, counted over both ports, and shedding;
//! - `watchdog.rs`: each connection's deadlines and the task that closes it when one passes;
//! - `socket.rs`: the socket wrapper that notes reads and rewrites hyper's own error answers.
//!
//! # One admission for both ports
//!
//! The HTTP port and the gRPC port are served by the same accept loop (`accept::accept`), each
//! with its own router and HTTP/2 windows (`accept::Port`), but through one admission: one registry
//! of open connections, so `max_connections` and `max_connections_per_ip` count the
//! connections of both ports together, and one watchdog per connection with the same
//! deadlines. A gRPC call is a request like any other: its message must arrive within
//! `body_timeout_ms`, and a connection with no call in flight is idle.
//!
//! # Connection hygiene
//!
//! Each connection has a watchdog, on the task that serves it, that closes it when:
//!
//! - its first byte has not arrived `first_byte_timeout_ms` after accept;
//! - the header of its first request is not complete `header_timeout_ms` after accept (of a
//!   later request: after that request's first byte);
//! - a request body is not complete `body_timeout_ms` after its header (a body trickling in
//!   one byte at a time);
//! - it has been idle (no request in flight) for `idle_timeout_ms` since its last response.
//!
//! At `max_connections`, a new connection makes room by closing the connection idle the
//! longest (no request in flight: never sent a byte, between keep-alive requests, or still
//! sending a header); with none idle, the new connection is closed at once, as is one over
//! `max_connections_per_ip`. `max_connections` is lowered to the open-files limit less
//! `admission::FD_RESERVE`, so the loop can always accept the connection that sheds an idle one. The
//! watchdog sees the connection through `socket::Tracked`, the socket wrapper that notes each read,
//! and through the service, which notes each request and body.
//!
//! # Errors of the HTTP stack
//!
//! hyper answers some malformed requests itself, before idmint's code sees them: a header
//! over the limit (431), a request target too long (414), and a request line or header that
//! does not parse (400). No request is in flight then, so `socket::Tracked` recognises the answer
//! hyper writes and writes idmint's JSON error of the same status instead
//! (`Error::from_http_stack`), with `Connection: close`.

mod accept;
mod admission;
mod socket;
mod watchdog;

#[cfg(feature = "grpc")]
pub(crate) use accept::Port;
pub use accept::{bind, bind_with_backlog, serve};
#[cfg(feature = "grpc")]
pub use accept::{serve_all, serve_grpc};
