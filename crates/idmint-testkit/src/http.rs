//! A minimal HTTP/1.1 client over `std::net::TcpStream`, for black-box tests of the service:
//! requests are written byte for byte (so tests can send what no real client would), and
//! responses are read whole, with their status, headers and body.

use std::{
    io::{self, BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

/// How long any single connect, read or write may take before the test fails.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body (chunked bodies are decoded).
    pub body: Vec<u8>,
}

impl Response {
    /// The first header of this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy, for messages).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics with the response if it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("body is not JSON ({e}): {} {:?} {}", self.status, self.headers, self.text())
        })
    }

    /// Panics unless the status is 200.
    pub fn ok(self) -> Self {
        assert_eq!(self.status, 200, "expected 200: {}", self.text());
        self
    }

    /// The IDs of a batch answer (`{"ids": ["1", ...]}`), each a decimal string, as integers.
    pub fn ids(&self) -> Vec<u64> {
        let json = self.ok_json();
        let ids = json["ids"].as_array().unwrap_or_else(|| panic!("no `ids`: {json}"));
        ids.iter().map(decimal).collect()
    }

    /// The ID of a single answer (`{"id": "1"}`), a decimal string, as an integer.
    pub fn id(&self) -> u64 {
        decimal(&self.ok_json()["id"])
    }

    fn ok_json(&self) -> serde_json::Value {
        assert_eq!(self.status, 200, "expected 200: {}", self.text());
        self.json()
    }
}

/// A JSON string of decimal digits, as an integer; panics on anything else.
pub fn decimal(value: &serde_json::Value) -> u64 {
    let text = value.as_str().unwrap_or_else(|| panic!("id is not a JSON string: {value}"));
    assert!(
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()),
        "id is not a decimal string: {text:?}"
    );
    text.parse().unwrap_or_else(|e| panic!("id {text:?} is not a u64: {e}"))
}

/// One keep-alive connection.
#[derive(Debug)]
pub struct Connection {
    reader: BufReader<TcpStream>,
}

impl Connection {
    /// Connects, with timeouts on every read and write.
    pub fn open(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Connection { reader: BufReader::new(stream) })
    }

    /// Sends a request and reads its response.
    pub fn send(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> io::Result<Response> {
        self.send_raw(&request_bytes(method, target, headers, body))
    }

    /// `GET target`.
    pub fn get(&mut self, target: &str) -> io::Result<Response> {
        self.send("GET", target, &[], None)
    }

    /// Writes `bytes` as they are and reads one response.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<Response> {
        self.reader.get_mut().write_all(bytes)?;
        self.reader.get_mut().flush()?;
        read_response(&mut self.reader)
    }

    /// The underlying stream.
    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }
}

/// The bytes of a request: request line, `Host`, the given headers, `Content-Length` when
/// there is a body, and the body.
pub fn request_bytes(
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\nHost: idmint.test\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body.unwrap_or_default());
    bytes
}

/// Sends one request on a new connection.
pub fn send(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> io::Result<Response> {
    Connection::open(addr)?.send(method, target, headers, body)
}

/// `GET target` on a new connection; panics if the exchange fails.
pub fn get(addr: SocketAddr, target: &str) -> Response {
    send(addr, "GET", target, &[], None)
        .unwrap_or_else(|e| panic!("GET {target} on {addr} failed: {e}"))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Reads a status line, headers and a body (by `Content-Length`, chunked, or to the end).
fn read_response(reader: &mut BufReader<TcpStream>) -> io::Result<Response> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed before a response",
        ));
    }
    let status = line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| line.strip_prefix("HTTP/1.0 "))
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| invalid(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(invalid("connection closed inside the headers".into()));
        }
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.is_empty() {
            break;
        }
        let (name, value) =
            trimmed.split_once(':').ok_or_else(|| invalid(format!("bad header {trimmed:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size_text = line.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    line.clear();
                    if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            line.clear();
            reader.read_line(&mut line)?;
        }
    } else if let Some(length) = header("content-length") {
        let length: usize =
            length.parse().map_err(|_| invalid(format!("bad content-length {length:?}")))?;
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else if !(status == 204 || status == 304 || (100..200).contains(&status)) {
        reader.read_to_end(&mut body)?;
    }
    Ok(Response { status, headers, body })
}
