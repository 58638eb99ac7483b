//! A raw HTTP/2 client over a blocking socket, for tests that must send what no well-behaved
//! client would: requests whose message never arrives, more streams than the server allows,
//! streams reset as soon as they are opened, connections that never open a stream. Headers
//! are HPACK literals without Huffman coding (RFC 7541, section 6.2.2); only the frame
//! headers of the server's answers are read, never its HPACK.

use std::{
    io::{self, Read, Write},
    net::{SocketAddr, TcpStream},
    time::{Duration, Instant},
};

/// The client connection preface (RFC 9113, section 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Frame types (RFC 9113, section 6): DATA.
pub const DATA: u8 = 0;
/// The frame type HEADERS.
pub const HEADERS: u8 = 1;
/// The frame type RST_STREAM.
pub const RST_STREAM: u8 = 3;
/// The frame type SETTINGS.
pub const SETTINGS: u8 = 4;
/// The frame type PING.
pub const PING: u8 = 6;
/// The frame type GOAWAY.
pub const GOAWAY: u8 = 7;
/// Frame flags: END_STREAM.
pub const END_STREAM: u8 = 0x1;
/// The flag ACK (of SETTINGS and PING).
pub const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
/// The SETTINGS parameter MAX_CONCURRENT_STREAMS.
pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
/// The error code REFUSED_STREAM.
pub const REFUSED_STREAM: u32 = 0x7;

/// One frame.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a small frame").to_be_bytes();
    let mut out = vec![len[1], len[2], len[3], kind, flags];
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The connection preface and an empty SETTINGS frame: what a client sends first.
pub fn hello() -> Vec<u8> {
    [PREFACE, &frame(SETTINGS, 0, 0, &[])].concat()
}

/// An HPACK string literal, not Huffman coded (lengths under 127 only).
fn literal(out: &mut Vec<u8>, text: &str) {
    out.push(u8::try_from(text.len()).expect("a short literal"));
    out.extend_from_slice(text.as_bytes());
}

/// The HEADERS frame of a POST to `path` with this `content-type` on `stream` (odd),
/// ending the stream when `end_stream` (a request without a body).
pub fn request(stream: u32, path: &str, content_type: &str, end_stream: bool) -> Vec<u8> {
    request_with(stream, path, content_type, &[], end_stream)
}

/// [`request`] with extra headers (lower-case names).
pub fn request_with(
    stream: u32,
    path: &str,
    content_type: &str,
    extra: &[(&str, &str)],
    end_stream: bool,
) -> Vec<u8> {
    // :method POST and :scheme http are entries 3 and 6 of the static table.
    let mut block = vec![0x83, 0x86];
    // Literals without indexing, names from the static table: :path (4), :authority (1),
    // content-type (31, over the 4-bit prefix: 15 then 16).
    block.push(0x04);
    literal(&mut block, path);
    block.push(0x01);
    literal(&mut block, "localhost");
    block.extend_from_slice(&[0x0f, 0x10]);
    literal(&mut block, content_type);
    block.push(0x00);
    literal(&mut block, "te");
    literal(&mut block, "trailers");
    for (name, value) in extra {
        block.push(0x00);
        literal(&mut block, name);
        literal(&mut block, value);
    }
    let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
    frame(HEADERS, flags, stream, &block)
}

/// A gRPC request to `idmint.v1.IdMint/Next` whose message never arrives: HEADERS, no DATA.
pub fn stalled_next(stream: u32) -> Vec<u8> {
    request(stream, "/idmint.v1.IdMint/Next", "application/grpc", false)
}

/// A whole gRPC request: HEADERS, then one DATA frame with `messages` (each gets its 5-byte
/// prefix), ending the stream.
pub fn call(stream: u32, path: &str, content_type: &str, messages: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    for message in messages {
        body.push(0);
        body.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
        body.extend_from_slice(message);
    }
    [request(stream, path, content_type, false), frame(DATA, END_STREAM, stream, &body)].concat()
}

/// RST_STREAM with CANCEL.
pub fn reset(stream: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &8_u32.to_be_bytes())
}

/// A frame the server sent.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The frame type ([`DATA`], [`HEADERS`], ...).
    pub kind: u8,
    /// The flags ([`END_STREAM`], [`ACK`], ...).
    pub flags: u8,
    /// The stream identifier (0 for the connection).
    pub stream: u32,
    /// The payload, unread.
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY frame.
    pub fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            RST_STREAM => 0,
            GOAWAY => 4,
            _ => return None,
        };
        let bytes = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes(bytes.try_into().ok()?))
    }

    /// The value of a parameter in a SETTINGS frame.
    pub fn setting(&self, id: u16) -> Option<u32> {
        if self.kind != SETTINGS {
            return None;
        }
        self.payload.chunks_exact(6).find_map(|entry| {
            (u16::from_be_bytes([entry[0], entry[1]]) == id)
                .then(|| u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]))
        })
    }
}

/// A raw HTTP/2 connection.
pub struct Conn {
    /// The socket, for writes the methods do not cover.
    pub stream: TcpStream,
}

impl Conn {
    /// Connects and sends the preface.
    pub fn open(addr: SocketAddr) -> io::Result<Conn> {
        Conn::from_stream(TcpStream::connect(addr)?)
    }

    /// Sends the preface on a connected socket.
    pub fn from_stream(mut stream: TcpStream) -> io::Result<Conn> {
        stream.set_nodelay(true)?;
        stream.write_all(&hello())?;
        Ok(Conn { stream })
    }

    /// Reads until the server's SETTINGS frame, acknowledges it (so that its limits are in
    /// force), and returns it.
    pub fn handshake(&mut self, timeout: Duration) -> io::Result<Frame> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.read(deadline)? {
                None => return Err(io::ErrorKind::UnexpectedEof.into()),
                Some(f) if f.kind == SETTINGS && f.flags & ACK == 0 => {
                    self.send(&frame(SETTINGS, ACK, 0, &[]))?;
                    return Ok(f);
                }
                Some(_) => {}
            }
        }
    }

    /// Sends bytes (frames).
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The next frame, waiting at most until `deadline`; `Ok(None)` when the server closed
    /// the connection, an error of kind `TimedOut`/`WouldBlock` when the deadline passed.
    pub fn read(&mut self, deadline: Instant) -> io::Result<Option<Frame>> {
        let mut head = [0_u8; 9];
        if !self.read_exact(&mut head, deadline)? {
            return Ok(None);
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0; len];
        if !self.read_exact(&mut payload, deadline)? {
            return Ok(None);
        }
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        Ok(Some(Frame { kind: head[3], flags: head[4], stream, payload }))
    }

    fn read_exact(&mut self, buf: &mut [u8], deadline: Instant) -> io::Result<bool> {
        let mut at = 0;
        while at < buf.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.stream.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
            match self.stream.read(&mut buf[at..]) {
                Ok(0) => return Ok(false),
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Sends a PING and reads frames until its ACK: every frame the server sent before it
    /// answered the PING (which it does after handling what was sent before it). None when
    /// the server closed the connection first (with the frames read until then).
    pub fn sync(&mut self, timeout: Duration) -> io::Result<(Vec<Frame>, bool)> {
        let payload = *b"idmsync!";
        self.send(&frame(PING, 0, 0, &payload))?;
        let deadline = Instant::now() + timeout;
        let mut frames = Vec::new();
        loop {
            match self.read(deadline)? {
                None => return Ok((frames, false)),
                Some(f) if f.kind == PING && f.flags & ACK != 0 && f.payload == payload => {
                    return Ok((frames, true));
                }
                Some(f) => frames.push(f),
            }
        }
    }
}
