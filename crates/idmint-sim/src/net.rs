//! One simulated machine's condition as the network sees it: paused or crashed, and whether
//! its links to etcd and to clients are up, refuse, or swallow packets.

use std::sync::Arc;

use tokio::sync::watch;

/// What a link does with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Delivered.
    Up,
    /// Refused at once (connection refused, a reset).
    Refuse,
    /// Held until the link heals or the sender gives up (a black hole; TCP retransmits
    /// deliver it late if the link heals in time).
    Hang,
}

/// The state of one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineState {
    /// Stopped (SIGSTOP, a VM pause, a long GC): sends and handles nothing until resumed.
    pub paused: bool,
    /// Dead: never sends or answers again (its next incarnation is a new machine state).
    pub crashed: bool,
    /// The link to etcd.
    pub etcd: Link,
    /// The link to clients.
    pub clients: Link,
    /// How far the machine's monotonic clock lags real time: the length of its suspensions
    /// (`CLOCK_MONOTONIC` stops while a VM is suspended). Only its etcd client's keep-alive
    /// deadline reads it.
    pub mono_lag_ms: u64,
}

/// A shared handle on one machine's state; waiters wake when it changes.
///
/// # Example
///
/// ```
/// use idmint_sim::{Link, Machine};
///
/// let machine = Machine::new();
/// machine.update(|s| s.etcd = Link::Hang);
/// assert_eq!(machine.state().etcd, Link::Hang);
/// ```
#[derive(Debug, Clone)]
pub struct Machine(Arc<watch::Sender<MachineState>>);

impl Default for Machine {
    fn default() -> Self {
        Machine::new()
    }
}

impl Machine {
    /// A running machine with every link up.
    pub fn new() -> Self {
        let state = MachineState {
            paused: false,
            crashed: false,
            etcd: Link::Up,
            clients: Link::Up,
            mono_lag_ms: 0,
        };
        Machine(Arc::new(watch::channel(state).0))
    }

    /// Whether two handles are the same machine state.
    pub fn same(&self, other: &Machine) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The current state.
    pub fn state(&self) -> MachineState {
        *self.0.borrow()
    }

    /// Changes the state and wakes every waiter.
    pub fn update(&self, change: impl FnOnce(&mut MachineState)) {
        self.0.send_modify(change);
    }

    /// The machine's monotonic clock: real (simulated) time minus its suspensions.
    pub fn mono_now(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() - std::time::Duration::from_millis(self.state().mono_lag_ms)
    }

    /// When the machine's monotonic clock will read `local`, in simulated time.
    pub fn real_instant(&self, local: tokio::time::Instant) -> tokio::time::Instant {
        local + std::time::Duration::from_millis(self.state().mono_lag_ms)
    }

    /// Returns once the machine runs (not paused); never returns if it crashed.
    pub async fn running(&self) {
        let mut rx = self.0.subscribe();
        let ok = rx.wait_for(|s| !s.paused && !s.crashed).await.is_ok();
        drop(rx);
        if !ok {
            std::future::pending::<()>().await;
        }
    }

    /// Waits until `link` of the machine is up or `until` passes; returns whether it is up.
    pub async fn link_up(
        &self,
        link: impl Fn(&MachineState) -> Link,
        until: tokio::time::Instant,
    ) -> bool {
        let mut rx = self.0.subscribe();
        let up = tokio::time::timeout_at(until, rx.wait_for(|s| link(s) == Link::Up)).await;
        matches!(up, Ok(Ok(_)))
    }
}
