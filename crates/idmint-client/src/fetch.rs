//! What the clients of one builder share, and a fetch from it: `count` IDs from one endpoint
//! after another, with retries, failover and ejection as `retry` decides, each batch checked
//! against the layout the endpoint described and the batches it sent before.

use std::sync::{Mutex, MutexGuard};

use idmint_core::AnyId;
use idmint_proto::NamespaceInfo;
use tokio::{task::JoinHandle, time::Instant};

use crate::{
    buffer::Buffer,
    endpoints::Endpoints,
    error::{Error, ErrorKind},
    order::{self, Order},
    retry::{self, Decision, Failure, Jitter, Policy},
    sequencer::Arrival,
    transport::{CallError, Endpoint, Transport},
};

/// What the clients of one builder share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) endpoints: Vec<Endpoint>,
    pub(crate) transport: Transport,
    pub(crate) policy: Policy,
    /// Endpoint health and what each endpoint said: only between requests, never held across
    /// an await.
    pub(crate) route: Mutex<Route>,
    pub(crate) namespace: String,
    pub(crate) batch_size: usize,
    /// Refills in flight at most.
    pub(crate) pipeline: usize,
    pub(crate) max_batch: usize,
    pub(crate) buffer: Buffer,
    pub(crate) task: Mutex<Option<JoinHandle<()>>>,
}

/// Routing state, behind one lock.
#[derive(Debug)]
pub(crate) struct Route {
    endpoints: Endpoints,
    known: Vec<Known>,
    /// The layout fingerprint of the first endpoint that described the namespace.
    fingerprint: Option<String>,
    jitter: Jitter,
}

/// What the client knows about the namespace at one endpoint.
#[derive(Debug, Clone, Default)]
struct Known {
    /// From `GET /v1/namespaces`, once.
    layout: Option<LayoutAt>,
    /// The largest ID of the prefetched batches from this endpoint.
    last: Option<AnyId>,
}

/// The parts of a [`NamespaceInfo`] the client uses.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LayoutAt {
    id_bits: u32,
    order: Order,
    generator_id: Option<u64>,
}

impl Route {
    /// The routing state of `count` endpoints, none of them described yet. Clients start at
    /// different endpoints (drawn from `jitter`), so they do not all load the first one.
    pub(crate) fn new(count: usize, mut jitter: Jitter) -> Self {
        let start = usize::try_from(jitter.next() % count as u64).unwrap_or(0);
        Route {
            endpoints: Endpoints::new(count, start),
            known: vec![Known::default(); count],
            fingerprint: None,
            jitter,
        }
    }
}

impl Shared {
    fn route(&self) -> MutexGuard<'_, Route> {
        self.route.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn lock_task(&self) -> MutexGuard<'_, Option<JoinHandle<()>>> {
        self.task.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Fetches `count` IDs with retries and failover (see the crate docs). `prefetch` marks
    /// the refill task's requests, whose batches are also checked against the endpoint's
    /// earlier ones. `shard_key` asks for IDs with that shard key (a `hot-guid` namespace).
    pub(crate) async fn fetch(
        &self,
        count: usize,
        prefetch: bool,
        shard_key: Option<u32>,
    ) -> Result<Arrival, Error> {
        let decision = retry::first(&mut self.route().endpoints, Instant::now());
        let mut attempt = 1;
        let Decision::Retry { mut endpoint, mut wait } = decision else {
            unreachable!("the first attempt is always made")
        };
        loop {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let timeout = self.policy.timeout;
            let result = match tokio::time::timeout(
                timeout,
                self.attempt(endpoint, count, prefetch, shard_key),
            )
            .await
            {
                Ok(result) => result,
                Err(_) => Err(CallError::Retry(Failure::Timeout(timeout))),
            };
            let failure = match result {
                Ok(ids) => {
                    self.route().endpoints.succeeded(endpoint);
                    return Ok(ids);
                }
                Err(CallError::Fatal(error)) => {
                    if matches!(
                        error.kind(),
                        ErrorKind::NotMonotonic { .. } | ErrorKind::Protocol { .. }
                    ) {
                        // A server that misbehaves gets others' requests for a while.
                        let policy = &self.policy;
                        self.route().endpoints.failed(
                            endpoint,
                            Instant::now(),
                            None,
                            &policy.ejection,
                        );
                    }
                    return Err(error);
                }
                Err(CallError::Retry(failure)) => failure,
            };
            let decision = {
                let mut route = self.route();
                let random = route.jitter.next();
                retry::after_failure(
                    &self.policy,
                    &mut route.endpoints,
                    endpoint,
                    &failure,
                    attempt,
                    Instant::now(),
                    random,
                )
            };
            match decision {
                Decision::Retry { endpoint: next, wait: pause } => {
                    endpoint = next;
                    wait = pause;
                    attempt += 1;
                }
                Decision::GiveUp => {
                    let last = failure.describe(&self.endpoints[endpoint].base);
                    return Err(ErrorKind::Unavailable { attempts: attempt, last }.into());
                }
            }
        }
    }

    /// One attempt on one endpoint: learn the layout (once), fetch, check. A prefetched batch
    /// must start above every batch that had arrived from the endpoint when it was asked for
    /// (refills in flight at once may interleave; see `sequencer`).
    async fn attempt(
        &self,
        index: usize,
        count: usize,
        prefetch: bool,
        shard_key: Option<u32>,
    ) -> Result<Arrival, CallError> {
        let endpoint = &self.endpoints[index];
        let (cached, previous) = {
            let route = self.route();
            (route.known[index].layout.clone(), route.known[index].last)
        };
        let layout = match cached {
            Some(layout) => layout,
            None => self.learn_layout(index).await?,
        };
        let ids = self.transport.batch(endpoint, count, layout.id_bits, shard_key).await?;
        let not_monotonic = |(previous, next)| -> Error {
            ErrorKind::NotMonotonic { endpoint: endpoint.base.clone(), previous, next }.into()
        };
        order::check_batch(&ids, layout.order).map_err(not_monotonic)?;
        let ordered = layout.order == Order::Increasing;
        let arrival = |ids| Ok(Arrival { endpoint: index, ids, ordered });
        if !prefetch || !ordered {
            return arrival(ids);
        }
        let (Some(first), Some(last)) = (ids.first(), ids.last()) else {
            return arrival(ids);
        };
        let mut another_generator = false;
        if let Some(previous) = previous.filter(|&p| first <= p) {
            // Lower than before: fine only if the server now holds another generator ID
            // (it restarted and claimed a different one), whose IDs start afresh.
            let now = self.learn_layout(index).await?;
            if now.generator_id == layout.generator_id {
                return Err(not_monotonic((previous, first)).into());
            }
            another_generator = true;
        }
        let known = &mut self.route().known[index];
        known.last = if another_generator { Some(last) } else { known.last.max(Some(last)) };
        arrival(ids)
    }

    /// Reads the namespace's description from an endpoint and remembers it.
    async fn learn_layout(&self, index: usize) -> Result<LayoutAt, CallError> {
        let endpoint = &self.endpoints[index];
        let info = self.transport.namespace_info(endpoint, &self.namespace).await?;
        let Some(info) = info else {
            // Not listed: let the server say so in its own words (404 unknown_namespace).
            self.transport.batch(endpoint, 1, 64, None).await?;
            let message = format!("namespace `{}` is not listed by /v1/namespaces", self.namespace);
            let error =
                Error::from(ErrorKind::Protocol { endpoint: endpoint.base.clone(), message });
            return Err(error.into());
        };
        let layout = self.check_layout(endpoint, &info)?;
        self.route().known[index].layout = Some(layout.clone());
        Ok(layout)
    }

    fn check_layout(&self, endpoint: &Endpoint, info: &NamespaceInfo) -> Result<LayoutAt, Error> {
        if info.id_bits != 64 && info.id_bits != 128 {
            return Err(ErrorKind::Protocol {
                endpoint: endpoint.base.clone(),
                message: format!("ids of {} bits are not supported", info.id_bits),
            }
            .into());
        }
        let mut route = self.route();
        match &route.fingerprint {
            Some(expected) if *expected != info.fingerprint => {
                return Err(ErrorKind::LayoutMismatch {
                    namespace: self.namespace.clone(),
                    endpoint: endpoint.base.clone(),
                    expected: expected.clone(),
                    found: info.fingerprint.clone(),
                }
                .into());
            }
            Some(_) => {}
            None => route.fingerprint = Some(info.fingerprint.clone()),
        }
        Ok(LayoutAt {
            id_bits: info.id_bits,
            order: order::order_of(info),
            generator_id: info.generator_id,
        })
    }
}
