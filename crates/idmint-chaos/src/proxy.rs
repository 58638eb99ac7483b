//! A TCP proxy on a free loopback port in front of one target (an etcd member, a server), the
//! partition nemesis: it passes bytes, delays them, or blackholes them (reads nothing and
//! sends nothing, so peers see silence, not a reset), as etcd's robustness tests do on
//! loopback. New connections are accepted in every mode.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use crate::error::ChaosError;

/// `mode`: pass.
const PASS: u64 = 0;
/// `mode`: blackhole.
const BLACKHOLE: u64 = u64::MAX;

/// A running proxy; dropping the runtime that runs it stops it.
#[derive(Debug, Clone)]
pub(crate) struct Proxy {
    /// Where clients connect.
    pub(crate) addr: SocketAddr,
    /// 0: pass; `u64::MAX`: blackhole; else a delay in ms.
    mode: Arc<AtomicU64>,
}

impl Proxy {
    /// Starts a proxy to `target` on `runtime`.
    pub(crate) fn start(
        runtime: &tokio::runtime::Handle,
        target: SocketAddr,
    ) -> Result<Proxy, ChaosError> {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").map_err(ChaosError::io("bind a proxy"))?;
        listener.set_nonblocking(true).map_err(ChaosError::io("bind a proxy"))?;
        let addr = listener.local_addr().map_err(ChaosError::io("bind a proxy"))?;
        let mode = Arc::new(AtomicU64::new(PASS));
        let proxy = Proxy { addr, mode: Arc::clone(&mode) };
        runtime.spawn(async move {
            let Ok(listener) = TcpListener::from_std(listener) else { return };
            while let Ok((inbound, _)) = listener.accept().await {
                let mode = Arc::clone(&mode);
                tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(target).await else { return };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let (in_read, in_write) = inbound.into_split();
                    let (out_read, out_write) = outbound.into_split();
                    tokio::select! {
                        () = pipe(in_read, out_write, Arc::clone(&mode)) => {}
                        () = pipe(out_read, in_write, mode) => {}
                    }
                });
            }
        });
        Ok(proxy)
    }

    /// Passes bytes again.
    pub(crate) fn heal(&self) {
        self.mode.store(PASS, Ordering::SeqCst);
    }

    /// Stops passing bytes (both ways), without closing connections.
    pub(crate) fn blackhole(&self) {
        self.mode.store(BLACKHOLE, Ordering::SeqCst);
    }

    /// Delays every chunk by `ms`.
    pub(crate) fn delay(&self, ms: u64) {
        self.mode.store(ms.clamp(1, BLACKHOLE - 1), Ordering::SeqCst);
    }
}

/// Copies one direction. While blackholed nothing is read; a chunk is written under the mode
/// in force when it arrived: held back while blackholed, delayed by the delay, so that a mode
/// takes effect on the very next chunk (a pipe waiting in `read` when the mode changed
/// included).
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mode: Arc<AtomicU64>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        while mode.load(Ordering::SeqCst) == BLACKHOLE {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        loop {
            match mode.load(Ordering::SeqCst) {
                PASS => break,
                // A chunk read just before a blackhole began is held back until it heals.
                BLACKHOLE => tokio::time::sleep(Duration::from_millis(10)).await,
                ms => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    break;
                }
            }
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{Read, Write},
        net::{TcpListener, TcpStream},
        time::Duration,
    };

    use super::Proxy;

    /// An echo server on a free port, on its own thread.
    fn echo() -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut stream = stream;
                    let mut buffer = [0u8; 64];
                    while let Ok(n) = stream.read(&mut buffer) {
                        if n == 0 || stream.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    /// Sends one byte and reads `echoes` bytes back within `limit`: whether they came.
    fn round_trip(stream: &mut TcpStream, limit: Duration, echoes: usize) -> bool {
        stream.set_read_timeout(Some(limit)).expect("timeout");
        let mut bytes = vec![0u8; echoes];
        stream.write_all(b"x").is_ok()
            && stream.read_exact(&mut bytes).is_ok()
            && bytes.iter().all(|b| *b == b'x')
    }

    #[test]
    fn a_proxy_passes_blackholes_and_heals_one_connection() {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let proxy = Proxy::start(runtime.handle(), echo()).expect("proxy");
        let mut stream = TcpStream::connect(proxy.addr).expect("connect");
        assert!(round_trip(&mut stream, Duration::from_secs(5), 1), "pass");
        proxy.blackhole();
        assert!(!round_trip(&mut stream, Duration::from_millis(300), 1), "blackholed");
        proxy.heal();
        // The byte held back during the blackhole arrives first, then the new one.
        assert!(round_trip(&mut stream, Duration::from_secs(5), 2), "healed");
        proxy.delay(50);
        let started = std::time::Instant::now();
        assert!(round_trip(&mut stream, Duration::from_secs(5), 1), "delayed");
        assert!(started.elapsed() >= Duration::from_millis(50), "{:?}", started.elapsed());
    }
}
