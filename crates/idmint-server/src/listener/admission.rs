//! Admission: the caps on open connections (`max_connections`, lowered to fit the open-files
//! limit, and `max_connections_per_ip`), counted over both ports in one registry; at the cap,
//! the connection idle the longest is shed for the new one.

use std::{
    collections::HashMap,
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex, MutexGuard},
};

use super::watchdog::{Conn, Deadlines};
use idmint_engine::ServerConfig;

use crate::{Server, metrics::Refusal};

/// The one admission of both ports: their caps, the deadlines every connection gets, and the
/// open connections they count.
pub(super) struct Admission {
    caps: Caps,
    deadlines: Arc<Deadlines>,
    pub(super) connections: Arc<Connections>,
}

impl Admission {
    pub(super) fn new(config: &ServerConfig) -> Self {
        Admission {
            caps: Caps::new(config),
            deadlines: Arc::new(Deadlines::new(config)),
            connections: Arc::new(Connections::default()),
        }
    }

    /// Registers a new connection from `peer` ([`Connections::admit`]).
    pub(super) fn admit(&self, peer: SocketAddr, server: &Server) -> Result<Arc<Conn>, Refusal> {
        self.connections.admit(peer, &self.caps, &self.deadlines, server)
    }
}

/// The caps on open connections, from [`ServerConfig`].
#[derive(Debug)]
struct Caps {
    max: usize,
    per_ip: Option<usize>,
}

impl Caps {
    fn new(config: &ServerConfig) -> Self {
        Caps {
            max: connection_cap(config.max_connections, open_files_limit()),
            per_ip: config.max_connections_per_ip.filter(|&cap| cap > 0),
        }
    }
}

/// File descriptors kept out of `max_connections`: the listeners, data files, coordinator
/// connections, and the accept that sheds an idle connection to make room for a new one.
const FD_RESERVE: usize = 64;

/// The soft limit on open files of this process (`RLIMIT_NOFILE`), from `/proc/self/limits`;
/// None where that file is missing or says unlimited.
fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find_map(|line| line.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// `max_connections`, lowered to fit the open-files limit: at the limit, the accept loop
/// sheds an idle connection for a new one while it can still accept, instead of failing to
/// accept (EMFILE) with every descriptor held by connections that never send a request.
fn connection_cap(configured: usize, open_files: Option<usize>) -> usize {
    let Some(files) = open_files else { return configured };
    let budget = files.saturating_sub(FD_RESERVE).max(1);
    if budget < configured {
        tracing::warn!(
            max_connections = configured,
            open_files_limit = files,
            cap = budget,
            "max_connections lowered to fit the open-files limit (ulimit -n), less {FD_RESERVE} for files and accepts"
        );
    }
    configured.min(budget)
}

/// The open connections, by ID, and how many each IP address holds.
#[derive(Debug, Default)]
pub(super) struct Connections {
    inner: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    open: HashMap<u64, Arc<Conn>>,
    per_ip: HashMap<IpAddr, usize>,
    next_id: u64,
}

impl Registry {
    fn forget(&mut self, conn: &Conn) -> bool {
        if self.open.remove(&conn.id).is_none() {
            return false;
        }
        if let Some(count) = self.per_ip.get_mut(&conn.peer.ip()) {
            *count -= 1;
            if *count == 0 {
                self.per_ip.remove(&conn.peer.ip());
            }
        }
        true
    }
}

impl Connections {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new connection from `peer`: refused over the per-IP cap; at the limit, the
    /// connection idle the longest is shed to make room, and without one it is refused.
    fn admit(
        &self,
        peer: SocketAddr,
        caps: &Caps,
        deadlines: &Arc<Deadlines>,
        server: &Server,
    ) -> Result<Arc<Conn>, Refusal> {
        let mut registry = self.lock();
        let from_ip = registry.per_ip.get(&peer.ip()).copied().unwrap_or(0);
        if caps.per_ip.is_some_and(|cap| from_ip >= cap) {
            return Err(Refusal::PerIp);
        }
        if registry.open.len() >= caps.max {
            let victim = registry
                .open
                .values()
                .filter_map(|conn| conn.idle_since().map(|since| (since, conn.id)))
                .min()
                .and_then(|(_, id)| registry.open.get(&id).cloned());
            let Some(victim) = victim else { return Err(Refusal::Limit) };
            registry.forget(&victim);
            server.http_metrics().connection_gone();
            victim.shed.cancel();
        }
        registry.next_id += 1;
        let conn = Arc::new(Conn::new(registry.next_id, peer, Arc::clone(deadlines)));
        registry.open.insert(conn.id, Arc::clone(&conn));
        *registry.per_ip.entry(peer.ip()).or_insert(0) += 1;
        server.http_metrics().connection_opened();
        Ok(conn)
    }

    /// Forgets a connection that ended (once; a shed one is already forgotten).
    pub(super) fn remove(&self, conn: &Conn, server: &Server) {
        if self.lock().forget(conn) {
            server.http_metrics().connection_gone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_connections_fits_the_open_files_limit() {
        let check = |configured, files, want| {
            assert_eq!(connection_cap(configured, files), want, "{configured} with {files:?}");
        };
        check(10_000, None, 10_000);
        check(10_000, Some(1_024), 960);
        check(500, Some(1_024), 500);
        check(10_000, Some(1_048_576), 10_000);
        check(10, Some(20), 1);
        // This process's own limit is read (Linux).
        assert!(open_files_limit().is_some_and(|n| n > 0));
    }
}
