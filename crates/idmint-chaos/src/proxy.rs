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

/// Copies one direction, obeying the mode before reading each chunk.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mode: Arc<AtomicU64>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        loop {
            match mode.load(Ordering::SeqCst) {
                PASS => break,
                BLACKHOLE => tokio::time::sleep(Duration::from_millis(10)).await,
                ms => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    break;
                }
            }
        }
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // A chunk read just before a blackhole began is held back until it heals.
        while mode.load(Ordering::SeqCst) == BLACKHOLE {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
