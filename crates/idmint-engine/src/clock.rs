//! The server's clocks: an injectable wall clock, the monotonic clock that logical time
//! follows (tokio's, so tests with paused time stay consistent), and precise waits for the
//! next tick of that clock (`ticker.rs`).

use std::sync::{
    Arc,
    atomic::{AtomicI64, Ordering},
};

use idmint_core::{Clock, SystemClock};
use tokio::time::Instant;

use crate::ticker::Ticker;

/// A shareable wall clock.
pub type WallClock = Arc<dyn Clock + Send + Sync>;

/// The clocks of one engine: its wall clock, the monotonic origin logical time follows, and
/// precise waits for a tick boundary ([`Engine::clocks`](crate::Engine::clocks)).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::MemoryCoordinator;
/// use idmint_core::ManualClock;
/// use idmint_engine::{Engine, ServerConfig};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let wall = Arc::new(ManualClock::new(1_700_000_000_000));
/// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), wall).await?;
/// assert_eq!(engine.clocks().wall_ms(), 1_700_000_000_000);
/// engine.shutdown().await?;
/// # Ok::<(), idmint_engine::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct Clocks {
    wall: WallClock,
    /// Whether `wall` is the system clock, read then without the indirect call.
    system: bool,
    start: Instant,
    ticker: Arc<Ticker>,
}

impl std::fmt::Debug for Clocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clocks").field("wall_ms", &self.wall_ms()).finish()
    }
}

impl Clocks {
    pub(crate) fn new(wall: WallClock) -> Self {
        Clocks { system: wall.is_system(), wall, start: Instant::now(), ticker: Arc::default() }
    }

    /// The wall clock's reading, in ms since the Unix epoch.
    #[inline(always)]
    pub fn wall_ms(&self) -> u64 {
        if self.system { SystemClock.now_ms() } else { self.wall.now_ms() }
    }

    /// Milliseconds since the server started, from a clock that never steps.
    pub(crate) fn mono_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Waits until the monotonic clock has moved `ms` milliseconds past its current
    /// millisecond: to the exact boundary where [`Clocks::mono_ms`] reaches that value, not
    /// `ms` from now (see `ticker.rs`). Fails with the wait in ms, without waiting, when that
    /// instant is after `deadline`.
    pub(crate) async fn wait_ticks(&self, ms: u64, deadline: Instant) -> Result<(), u64> {
        let target = self.mono_ms().saturating_add(ms);
        let at = self.start + std::time::Duration::from_millis(target);
        if at > deadline {
            return Err(ms);
        }
        self.ticker.wait_until(at).await;
        Ok(())
    }

    /// How this process describes itself to a claimant that finds its generator ID taken.
    pub(crate) fn holder_description(&self) -> String {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "localhost".to_owned());
        format!(
            "idmint pid {} on {host}, since {}",
            std::process::id(),
            idmint_core::format_rfc3339_ms(self.wall_ms())
        )
    }
}

/// The system clock shifted by an adjustable offset: a wall clock that tests can step back
/// and forth without touching the machine's clock.
///
/// # Example
///
/// ```
/// use idmint_core::{Clock, SystemClock};
/// use idmint_engine::OffsetClock;
///
/// let clock = OffsetClock::new(-60_000);
/// assert!(clock.now_ms() + 59_000 < SystemClock.now_ms());
/// clock.set_offset_ms(0);
/// assert!(clock.now_ms() + 1_000 > SystemClock.now_ms());
/// ```
#[derive(Debug, Default)]
pub struct OffsetClock {
    offset_ms: AtomicI64,
}

impl OffsetClock {
    /// The system clock plus `offset_ms` (negative for a clock that is behind).
    pub fn new(offset_ms: i64) -> Self {
        OffsetClock { offset_ms: AtomicI64::new(offset_ms) }
    }

    /// Steps the clock to a new offset from the system clock.
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::SeqCst);
    }
}

impl Clock for OffsetClock {
    fn now_ms(&self) -> u64 {
        let now = SystemClock.now_ms();
        now.saturating_add_signed(self.offset_ms.load(Ordering::SeqCst))
    }
}
