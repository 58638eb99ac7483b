//! The socket of an HTTP connection: it tells the watchdog about every read, and writes
//! idmint's JSON error in place of the bare answers hyper writes on its own (a header over the
//! limit, a request target too long, a request that does not parse).

use std::{
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
};

use super::watchdog::Conn;
use crate::{Error, Server};

/// The largest HTTP/1 read buffer, which bounds the size of a request header (bytes).
pub(crate) const MAX_HEADER_BYTES: usize = 16 * 1024;

/// The socket of an HTTP connection: tells the watchdog about every read, and writes
/// idmint's JSON error in place of the bare error answers hyper writes on its own.
pub(super) struct Tracked {
    stream: TcpStream,
    conn: Arc<Conn>,
    server: Arc<Server>,
    /// A replacement answer still to be written, and how much of it is.
    out: Vec<u8>,
    written: usize,
}

impl Tracked {
    pub(super) fn new(stream: TcpStream, conn: Arc<Conn>, server: Arc<Server>) -> Self {
        Tracked { stream, conn, server, out: Vec::new(), written: 0 }
    }

    /// Writes what is left of a replacement answer.
    fn poll_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.out.len() {
            let n = ready!(Pin::new(&mut self.stream).poll_write(cx, &self.out[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.out.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// The status of an answer hyper writes on its own, if `buf` is one: an HTTP/1 head of
    /// status 400, 414 or 431 without a `content-type` (every answer of idmint's has one).
    fn stack_answer(buf: &[u8]) -> Option<u16> {
        let status = buf.strip_prefix(b"HTTP/1.")?.get(2..5)?;
        let status = std::str::from_utf8(status).ok()?.parse::<u16>().ok()?;
        if ![400, 414, 431].contains(&status) {
            return None;
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
        let typed = buf[..end].to_ascii_lowercase().windows(14).any(|w| w == b"\ncontent-type:");
        (!typed).then_some(status)
    }
}

/// idmint's JSON error as a whole HTTP/1.1 response that closes the connection.
fn error_response(error: &Error) -> Vec<u8> {
    let body = serde_json::to_string(&error.body()).unwrap_or_default();
    let status = error.status();
    let reason = axum::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.stream).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            self.conn.read();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_out(cx))?;
        if let Some(status) = Tracked::stack_answer(buf) {
            let error = Error::from_http_stack(status, MAX_HEADER_BYTES);
            self.server.http_metrics().record(error.status());
            self.out = error_response(&error);
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_out(cx))?;
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_out(cx))?;
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only hyper's own bare answers are replaced: never a response of idmint's, which always
    /// has a `content-type`, and never a success.
    #[test]
    fn only_the_bare_answers_of_hyper_are_replaced() {
        let check = |bytes: &[u8], want: Option<u16>| {
            assert_eq!(Tracked::stack_answer(bytes), want, "{}", String::from_utf8_lossy(bytes));
        };
        check(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n",
            Some(431),
        );
        check(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n", Some(400));
        check(b"HTTP/1.1 414 URI Too Long\r\n\r\n", Some(414));
        check(b"HTTP/1.0 400 Bad Request\r\n\r\n", Some(400));
        check(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}", None);
        check(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n\r\n", None);
        check(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", None);
        check(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n", None);
        check(b"HTTP/1.1 431 partial head", None);
        check(b"\x00\x00\x12\x04", None);
    }

    #[test]
    fn the_replacement_is_a_whole_json_answer_that_closes() {
        let text = String::from_utf8(error_response(&Error::from_http_stack(431, 16_384))).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{head}");
        assert!(head.contains("\r\nconnection: close") && head.contains("application/json"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"]["code"], "header_too_large");
    }
}
