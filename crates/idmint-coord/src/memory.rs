//! The in-memory backend: the reference implementation of the [`Coordinator`] contract, for
//! tests. Clones share one store, so each clone stands for one server process.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

use tokio::sync::watch;

use crate::{Claim, ClaimRequest, ClaimState, Coordinator, Error};

/// An in-memory coordinator. Clones share the same claims and marks.
///
/// Each clone stands for one server process: dropping it ends the claims it took, as a crash
/// ends a process's file locks, and the marks stay. Nothing survives the real process; use it
/// for tests. [`revoke`](Self::revoke) takes a claim away from its holder, as an expired lease
/// would.
///
/// # Example
///
/// ```
/// use idmint_coord::{ClaimRequest, ClaimState, Coordinator, Error, GeneratorIds, MemoryCoordinator};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let server_a = MemoryCoordinator::new();
/// let server_b = server_a.clone();
/// let request = ClaimRequest::new("default", GeneratorIds::Fixed(3), "snowflake");
/// let claim = server_a.claim(&request).await?;
/// assert!(matches!(server_b.claim(&request).await, Err(Error::Conflict { .. })));
///
/// assert!(server_a.revoke("default", 3));
/// assert_eq!(claim.state(), ClaimState::Lost);
/// assert!(matches!(server_a.store_mark(&claim, 1).await, Err(Error::ClaimLost { .. })));
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Default)]
pub struct MemoryCoordinator {
    inner: Arc<Mutex<Inner>>,
    /// Which "process" this handle is; its claims end when it is dropped.
    process: u64,
}

impl Clone for MemoryCoordinator {
    fn clone(&self) -> Self {
        let process = {
            let mut inner = self.lock();
            inner.next_process += 1;
            inner.next_process
        };
        MemoryCoordinator { inner: Arc::clone(&self.inner), process }
    }
}

impl Drop for MemoryCoordinator {
    fn drop(&mut self) {
        let process = self.process;
        self.lock().claims.retain(|_, held| {
            let keep = held.process != process;
            if !keep {
                held.state.send_replace(ClaimState::Lost);
            }
            keep
        });
    }
}

#[derive(Debug, Default)]
struct Inner {
    next_token: u64,
    next_process: u64,
    /// Live claims by (namespace, generator ID).
    claims: HashMap<(String, u64), Held>,
    /// Stored marks and the layout they were written for.
    marks: HashMap<(String, u64), (u64, String)>,
}

#[derive(Debug)]
struct Held {
    token: u64,
    process: u64,
    holder: String,
    fingerprint: String,
    state: watch::Sender<ClaimState>,
}

impl MemoryCoordinator {
    /// An empty store.
    pub fn new() -> Self {
        MemoryCoordinator::default()
    }

    /// Takes the claim on (namespace, generator ID) away from its holder, whose claim turns
    /// [`ClaimState::Lost`]. Returns whether there was such a claim.
    pub fn revoke(&self, namespace: &str, generator_id: u64) -> bool {
        let held = self.lock().claims.remove(&(namespace.to_owned(), generator_id));
        held.map(|h| h.state.send_replace(ClaimState::Lost)).is_some()
    }

    /// The stored mark of a generator ID, if any.
    pub fn mark(&self, namespace: &str, generator_id: u64) -> Option<u64> {
        self.lock().marks.get(&(namespace.to_owned(), generator_id)).map(|m| m.0)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the maps consistent (every update is one
        // insert or remove), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The (namespace, generator ID) key of a claim, if it is still the live claim.
    fn held_key(inner: &Inner, claim: &Claim) -> Result<(String, u64), Error> {
        let key = (claim.namespace().to_owned(), claim.generator_id());
        match inner.claims.get(&key) {
            Some(held) if held.token == claim.token() => Ok(key),
            _ => Err(Error::ClaimLost {
                namespace: claim.namespace().to_owned(),
                generator_id: claim.generator_id(),
            }),
        }
    }
}

#[async_trait::async_trait]
impl Coordinator for MemoryCoordinator {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn claim(&self, request: &ClaimRequest) -> Result<Claim, Error> {
        request.check()?;
        let mut inner = self.lock();
        let mut last_holder = None;
        for generator_id in request.generator_ids.candidates() {
            let key = (request.namespace.clone(), generator_id);
            if let Some(held) = inner.claims.get(&key) {
                last_holder = Some((generator_id, held.holder.clone()));
                continue;
            }
            let mark_ms = match inner.marks.get(&key) {
                Some((_, stored)) if *stored != request.layout_fingerprint => {
                    return Err(Error::LayoutChanged {
                        namespace: request.namespace.clone(),
                        stored: stored.clone(),
                        expected: request.layout_fingerprint.clone(),
                    });
                }
                Some((mark, _)) => Some(*mark),
                None => None,
            };
            inner.next_token += 1;
            let token = inner.next_token;
            let (state, receiver) = watch::channel(ClaimState::Held { until: None });
            let held = Held {
                token,
                process: self.process,
                holder: request.holder.clone(),
                fingerprint: request.layout_fingerprint.clone(),
                state,
            };
            inner.claims.insert(key, held);
            return Ok(Claim::new(&request.namespace, generator_id, mark_ms, token, receiver));
        }
        Err(match (request.generator_ids, last_holder) {
            (crate::GeneratorIds::Fixed(generator_id), Some((_, holder))) => {
                Error::Conflict { namespace: request.namespace.clone(), generator_id, holder }
            }
            (ids, _) => {
                Error::PoolExhausted { namespace: request.namespace.clone(), size: ids.count() }
            }
        })
    }

    async fn store_mark(&self, claim: &Claim, mark_ms: u64) -> Result<(), Error> {
        let mut inner = self.lock();
        let key = Self::held_key(&inner, claim)?;
        if let Some(&(stored_ms, _)) = inner.marks.get(&key)
            && mark_ms < stored_ms
        {
            return Err(Error::MarkRegressed { offered_ms: mark_ms, stored_ms });
        }
        let fingerprint = inner.claims[&key].fingerprint.clone();
        inner.marks.insert(key, (mark_ms, fingerprint));
        Ok(())
    }

    async fn release(&self, claim: &Claim) -> Result<(), Error> {
        let mut inner = self.lock();
        if let Ok(key) = Self::held_key(&inner, claim) {
            inner.claims.remove(&key);
        }
        Ok(())
    }
}
