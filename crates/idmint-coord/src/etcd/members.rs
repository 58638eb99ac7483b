//! Health-tracked etcd members: one `idmint_etcd::Client` per member (each on its single
//! endpoint), the member list read at connect so that one endpoint is enough, and every
//! request routed to a healthy member, moved at once to another when it fails or does not
//! answer within a short per-attempt deadline (DESIGN.md, "How does idmint ride out a failed or
//! paused etcd member?"). A member that failed is skipped until a background probe (a
//! linearizable read, which needs the member to have a leader) answers again.
//!
//! An `idmint_etcd::Client` given several endpoints balances over them with no health
//! tracking, as etcd's own clients do; with the cfg `idmint_negative_controls`,
//! [`Members::round_robin`] keeps that behaviour as a negative control.

use std::{
    future::Future,
    sync::{Arc, Mutex, MutexGuard, RwLock, Weak},
    time::{Duration, Instant},
};

use idmint_etcd::{Client, ConnectOptions, GetOptions};
use tokio::sync::watch;

use crate::Error;

/// Between two probes of a failed member.
/// The backend name in errors, logs and `Coordinator::name`.
pub(super) const BACKEND: &str = "etcd";

const PROBE_EVERY: Duration = Duration::from_millis(50);
/// After every member failed once in a request: a short pause before the next round (an etcd
/// member without a leader answers at once, so rounds during an election would spin).
const ROUND_PAUSE: Duration = Duration::from_millis(25);
/// The member list is read again at most this often (after a member failed).
const REFRESH_EVERY: Duration = Duration::from_secs(5);
/// The key the probes read (count only): any key does, the read is what counts.
const PROBE_KEY: &str = "idmint-probe";

/// The deadlines of a member set.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// The deadline of a request's first attempt on one member; round `r` (every member tried
    /// `r` times already) gets `(r + 1) ×` this.
    pub(crate) attempt: Duration,
    /// All attempts of one request together.
    pub(crate) request: Duration,
    /// Connecting.
    pub(crate) connect: Duration,
}

impl Timing {
    /// The first attempt's deadline for a request timeout: 1/20 of it, between 50 ms and 1 s
    /// (250 ms for the default 5 s; DESIGN.md gives the arithmetic).
    pub(crate) fn new(request: Duration, connect: Duration) -> Self {
        let attempt = (request / 20).clamp(Duration::from_millis(50), Duration::from_secs(1));
        Timing { attempt: attempt.min(request), request, connect }
    }
}

/// The deadline of an attempt in `round` (every member tried `round` times already) of a
/// request whose first attempts get `attempt`, with `left` of the request's time left.
fn attempt_in(attempt: Duration, round: u32, left: Duration) -> Duration {
    attempt.saturating_mul(round.saturating_add(1)).min(left)
}

/// One etcd member (or, in the round-robin control, the one balanced client).
pub(crate) struct Member {
    /// The client URL this client dials.
    endpoint: String,
    client: Client,
    state: Mutex<Health>,
}

#[derive(Debug, Clone, Copy)]
struct Health {
    healthy: bool,
    probing: bool,
    /// The etcd member ID, 0 while unknown.
    id: u64,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("endpoint", &self.endpoint)
            .field("state", &*self.state())
            .finish_non_exhaustive()
    }
}

impl Member {
    fn new(endpoint: String, client: Client, healthy: bool, id: u64) -> Arc<Self> {
        Arc::new(Member {
            endpoint,
            client,
            state: Mutex::new(Health { healthy, probing: false, id }),
        })
    }

    fn state(&self) -> MutexGuard<'_, Health> {
        // Every update is a plain assignment of a few fields: a poisoned lock is fine.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A clone of this member's client.
    pub(crate) fn client(&self) -> Client {
        self.client.clone()
    }

    /// Whether requests may go here (no failure since the last good probe).
    pub(crate) fn is_healthy(&self) -> bool {
        self.state().healthy
    }
}

/// The members of one etcd cluster, with their health.
#[derive(Debug)]
pub(crate) struct Members {
    /// The given endpoints first, then members found in the member list.
    list: RwLock<Vec<Arc<Member>>>,
    /// The member that answered last: tried first.
    preferred: Mutex<Option<Arc<Member>>>,
    timing: Timing,
    connect_options: ConnectOptions,
    /// Off in the round-robin control: one balanced client, one attempt per request.
    failover: bool,
    /// Counts members coming back; an attempt on a failed member is abandoned when it moves.
    recovered: watch::Sender<u64>,
    last_refresh: Mutex<Option<Instant>>,
    me: Weak<Members>,
}

/// The result of one attempt.
enum Attempt<T> {
    Done(T),
    /// Not this member's fault: the request itself failed.
    Refused(idmint_etcd::Error),
    /// The member failed or did not answer in time: try another.
    Failed(String),
}

impl Members {
    /// Connects a client per endpoint, checks which answer, and adds the members the cluster's
    /// member list names that no endpoint reaches. Fails when no endpoint answers.
    pub(crate) async fn connect(endpoints: &[String], timing: Timing) -> Result<Arc<Self>, Error> {
        let connect_options = connect_options(&timing);
        let mut given: Vec<String> = Vec::new();
        for endpoint in endpoints {
            let url = normalize(endpoint);
            if !given.contains(&url) {
                given.push(url);
            }
        }
        let mut clients = Vec::new();
        for url in &given {
            clients.push(single_client(url, &connect_options).await?);
        }
        let started = Instant::now();
        let mut statuses = tokio::task::JoinSet::new();
        for (index, client) in clients.iter().enumerate() {
            let mut client = client.clone();
            statuses.spawn(async move { (index, client.status().await) });
        }
        let mut answered: Vec<Option<u64>> = vec![None; given.len()];
        let mut first = None;
        let mut last_error = String::from("no answer");
        let mut deadline = started + timing.connect;
        loop {
            let next = tokio::time::timeout_at(deadline.into(), statuses.join_next()).await;
            let Ok(Some(joined)) = next else { break };
            match joined {
                Ok((index, Ok(status))) => {
                    answered[index] = Some(status.header().map_or(0, |h| h.member_id()));
                    if first.is_none() {
                        first = Some(index);
                        // The others get one attempt's time more; those that do not answer
                        // are probed in the background.
                        deadline = deadline.min(Instant::now() + timing.attempt);
                    }
                }
                Ok((index, Err(e))) => last_error = format!("{}: {e}", given[index]),
                Err(e) => last_error = e.to_string(),
            }
        }
        statuses.abort_all();
        let Some(first) = first else {
            let waited = started.elapsed().min(timing.connect);
            return Err(unavailable(format!(
                "cannot reach {}: {last_error} (waited {waited:?})",
                endpoints.join(",")
            )));
        };
        let list: Vec<Arc<Member>> = given
            .iter()
            .zip(clients)
            .zip(&answered)
            .map(|((url, client), id)| {
                Member::new(url.clone(), client, id.is_some(), id.unwrap_or(0))
            })
            .collect();
        let preferred = Arc::clone(&list[first]);
        let members = Arc::new_cyclic(|me| Members {
            list: RwLock::new(list),
            preferred: Mutex::new(Some(preferred)),
            timing,
            connect_options,
            failover: true,
            recovered: watch::Sender::new(0),
            last_refresh: Mutex::new(None),
            me: me.clone(),
        });
        for member in members.snapshot() {
            if !member.is_healthy() {
                members.start_probe(&member);
            }
        }
        members.refresh().await;
        Ok(members)
    }

    /// **The round-robin control** (cfg `idmint_negative_controls`): one `idmint_etcd::Client`
    /// balanced over every endpoint, with no health tracking, one attempt per request under the
    /// whole request timeout, as idmint did before it tracked members.
    #[cfg(idmint_negative_controls)]
    pub(crate) async fn round_robin(
        endpoints: &[String],
        timing: Timing,
    ) -> Result<Arc<Self>, Error> {
        let connect_options = connect_options(&timing);
        let client = tokio::time::timeout(timing.connect, async {
            let mut client = Client::connect(endpoints, Some(connect_options.clone())).await?;
            client.status().await?;
            Ok::<_, idmint_etcd::Error>(client)
        })
        .await
        .map_err(|_| {
            unavailable(format!(
                "cannot reach {}: no answer within {:?}",
                endpoints.join(","),
                timing.connect
            ))
        })?
        .map_err(|e| unavailable(format!("cannot reach {}: {e}", endpoints.join(","))))?;
        let member = Member::new(endpoints.join(","), client, true, 0);
        Ok(Arc::new_cyclic(|me| Members {
            list: RwLock::new(vec![Arc::clone(&member)]),
            preferred: Mutex::new(Some(member)),
            timing,
            connect_options,
            failover: false,
            recovered: watch::Sender::new(0),
            last_refresh: Mutex::new(None),
            me: me.clone(),
        }))
    }

    /// The deadlines in use.
    pub(crate) fn timing(&self) -> Timing {
        self.timing
    }

    /// Whether requests move between members (off only in the round-robin control).
    pub(crate) fn fails_over(&self) -> bool {
        self.failover
    }

    fn snapshot(&self) -> Vec<Arc<Member>> {
        self.list.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The members in the order to try them: the preferred one (if healthy), the other healthy
    /// ones, then the failed ones (a last resort: one may be back before its probe says so).
    pub(crate) fn order(&self) -> Vec<Arc<Member>> {
        let list = self.snapshot();
        let preferred = self.preferred.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let start =
            preferred.and_then(|p| list.iter().position(|m| Arc::ptr_eq(m, &p))).unwrap_or(0);
        let mut rotated: Vec<Arc<Member>> =
            list.iter().cycle().skip(start).take(list.len()).cloned().collect();
        // Stable: healthy members keep their rotated order ahead of failed ones.
        rotated.sort_by_key(|m| !m.is_healthy());
        rotated
    }

    /// The member to use now: the preferred one if healthy, else the next healthy one.
    pub(crate) fn pick(&self) -> Arc<Member> {
        // `connect` never builds an empty list, and members are only removed while others stay.
        self.order().into_iter().next().expect("an etcd member set is never empty")
    }

    /// Records a good answer from `member`: it is healthy and preferred.
    pub(crate) fn succeeded(&self, member: &Arc<Member>) {
        if !self.failover {
            return;
        }
        let mut preferred = self.preferred.lock().unwrap_or_else(|p| p.into_inner());
        if preferred.as_ref().is_none_or(|p| !Arc::ptr_eq(p, member)) {
            *preferred = Some(Arc::clone(member));
        }
    }

    /// Records a failure of `member`: it is skipped until its probe answers.
    pub(crate) fn failed(&self, member: &Arc<Member>, reason: &str) {
        if !self.failover {
            return;
        }
        let was_healthy = std::mem::replace(&mut member.state().healthy, false);
        if was_healthy {
            tracing::warn!(endpoint = %member.endpoint, reason, "etcd member failed; requests go to the other members until it answers again");
        }
        self.start_probe(member);
        self.refresh_in_background();
    }

    /// Starts probing a failed member, unless a probe runs already.
    fn start_probe(&self, member: &Arc<Member>) {
        {
            let mut state = member.state();
            if state.probing {
                return;
            }
            state.probing = true;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            member.state().probing = false;
            return;
        };
        runtime.spawn(probe(self.me.clone(), Arc::clone(member), self.timing));
    }

    /// Reads the member list again in the background, at most every [`REFRESH_EVERY`].
    fn refresh_in_background(&self) {
        {
            let mut last = self.last_refresh.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < REFRESH_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let me = self.me.clone();
        runtime.spawn(async move {
            if let Some(members) = me.upgrade() {
                members.refresh().await;
            }
        });
    }

    /// Reads the member list and adds the members no known client reaches (a learner, or a
    /// member that advertises no client URL yet, is left out); drops known members that left
    /// the cluster. Errors are ignored: the members known keep serving.
    async fn refresh(&self) {
        if !self.failover {
            return;
        }
        *self.last_refresh.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        let listed = self
            .run_within(
                "list the etcd members",
                self.timing.attempt,
                self.timing.request.min(self.timing.connect),
                |mut c| async move { c.member_list().await },
            )
            .await;
        let Ok(listed) = listed else { return };
        let mut new = Vec::new();
        let known = self.snapshot();
        let ids: Vec<u64> = listed.members().iter().map(|m| m.id()).collect();
        for member in listed.members() {
            if member.is_learner() || member.client_urls().is_empty() {
                continue;
            }
            let urls: Vec<String> = member.client_urls().iter().map(|u| normalize(u)).collect();
            let reached = known.iter().any(|k| {
                let id = k.state().id;
                id == member.id() || (id == 0 && urls.contains(&k.endpoint))
            });
            if reached {
                continue;
            }
            if let Ok(client) = single_client(&urls[0], &self.connect_options).await {
                new.push(Member::new(urls[0].clone(), client, false, member.id()));
            }
        }
        {
            let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
            let before = list.len();
            // A member removed from the cluster is dropped, unless it is the last one known.
            list.retain(|m| {
                let id = m.state().id;
                id == 0 || ids.contains(&id)
            });
            if list.is_empty() {
                *list = known.clone();
            }
            if list.len() != before {
                tracing::info!(
                    members = list.len(),
                    "etcd members that left the cluster are no longer used"
                );
            }
            list.extend(new.iter().cloned());
        }
        for member in &new {
            tracing::info!(endpoint = %member.endpoint, "etcd member found in the member list");
            self.start_probe(member);
        }
    }

    /// Runs one request with failover under the request timeout, mapping its errors into
    /// [`Error::Unavailable`].
    pub(crate) async fn run<T, F, Fut>(&self, what: &str, op: F) -> Result<T, Error>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, idmint_etcd::Error>>,
    {
        self.run_within(what, self.timing.attempt, self.timing.request, op).await
    }

    /// Runs one request: on the preferred healthy member first, and when an attempt fails for
    /// the member's sake (no connection, no leader, no answer within the attempt's deadline),
    /// at once on the next member, until `total` is used up. An error that is the request's
    /// own (a lease not found, a bad argument) ends it. `op` must be safe to repeat: reads are,
    /// and every transaction idmint sends compares revisions, so a repeat of one that landed
    /// fails its compare and reads back what the first did (DESIGN.md).
    pub(crate) async fn run_within<T, F, Fut>(
        &self,
        what: &str,
        attempt: Duration,
        total: Duration,
        op: F,
    ) -> Result<T, Error>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, idmint_etcd::Error>>,
    {
        self.run_on(what, attempt, total, op).await.map(|(_, value)| value)
    }

    /// [`run_within`](Self::run_within), also giving the member that answered (a stream
    /// opened there stays with it).
    pub(crate) async fn run_on<T, F, Fut>(
        &self,
        what: &str,
        attempt: Duration,
        total: Duration,
        mut op: F,
    ) -> Result<(Arc<Member>, T), Error>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, idmint_etcd::Error>>,
    {
        if !self.failover {
            let member = self.pick();
            return match tokio::time::timeout(total, op(member.client())).await {
                Ok(Ok(value)) => Ok((member, value)),
                Ok(Err(e)) => Err(unavailable(format!("{what} failed: {e}"))),
                Err(_) => Err(unavailable(format!("{what} got no answer within {total:?}"))),
            };
        }
        let end = Instant::now() + total;
        let mut last = String::from("no member was tried");
        let mut round = 0_u32;
        loop {
            for member in self.order() {
                let left = end.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(unavailable(format!(
                        "{what} got no answer from any etcd member within {total:?} (last: {last})"
                    )));
                }
                let deadline = attempt_in(attempt, round, left);
                match self.attempt(&member, deadline, op(member.client())).await {
                    Attempt::Done(value) => {
                        self.succeeded(&member);
                        return Ok((member, value));
                    }
                    Attempt::Refused(e) => {
                        self.succeeded(&member);
                        return Err(unavailable(format!("{what} failed: {e}")));
                    }
                    Attempt::Failed(reason) => {
                        self.failed(&member, &reason);
                        last = format!("{}: {reason}", member.endpoint);
                    }
                }
            }
            // Every member failed once: pause briefly, or until one is back.
            let left = end.saturating_duration_since(Instant::now());
            let mut back = self.recovered.subscribe();
            let _ = tokio::time::timeout(ROUND_PAUSE.min(left), back.changed()).await;
            round = round.saturating_add(1);
        }
    }

    /// One attempt on `member` within `deadline`; an attempt on a failed member is abandoned
    /// as soon as another member comes back.
    async fn attempt<T>(
        &self,
        member: &Member,
        deadline: Duration,
        request: impl Future<Output = Result<T, idmint_etcd::Error>>,
    ) -> Attempt<T> {
        let mut back = self.recovered.subscribe();
        let last_resort = !member.is_healthy();
        let recovered = async {
            if last_resort {
                let _ = back.changed().await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            answer = tokio::time::timeout(deadline, request) => match answer {
                Ok(Ok(value)) => Attempt::Done(value),
                Ok(Err(e)) if is_member_fault(&e) => Attempt::Failed(e.to_string()),
                Ok(Err(e)) => Attempt::Refused(e),
                Err(_) => Attempt::Failed(format!("no answer within {deadline:?}")),
            },
            () = recovered => Attempt::Failed("another member is back".into()),
        }
    }
}

/// Probes a failed member every [`PROBE_EVERY`] with a linearizable read until it answers,
/// then marks it healthy. Ends when the member set is dropped.
async fn probe(members: Weak<Members>, member: Arc<Member>, timing: Timing) {
    let timeout = timing.attempt.saturating_mul(2).min(timing.request);
    let options = GetOptions::new().with_count_only();
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        if members.strong_count() == 0 {
            return;
        }
        let mut client = member.client();
        let read = client.get(PROBE_KEY, Some(options.clone()));
        if let Ok(Ok(_)) = tokio::time::timeout(timeout, read).await {
            {
                let mut state = member.state();
                state.healthy = true;
                state.probing = false;
            }
            tracing::info!(endpoint = %member.endpoint, "etcd member answers again");
            if let Some(members) = members.upgrade() {
                members.recovered.send_modify(|n| *n += 1);
            }
            return;
        }
    }
}

/// Whether an error says the member cannot serve now (so the request goes to another), rather
/// than that the request itself is refused.
pub(crate) fn is_member_fault(error: &idmint_etcd::Error) -> bool {
    use idmint_etcd::Error as E;
    use tonic::Code;
    match error {
        // The transport's own failures (no connection, a reset stream, a per-request timeout)
        // reach us as these codes too.
        E::Status(status) => matches!(
            status.code(),
            Code::Unavailable
                | Code::DeadlineExceeded
                | Code::Unknown
                | Code::Internal
                | Code::Cancelled
                | Code::Aborted
                | Code::ResourceExhausted
        ),
        // A keep-alive stream that ended or closed: its member went away.
        E::KeepAlive(_) => true,
        // etcd answered: the lease is gone, or the request itself was bad.
        E::LeaseNotFound(_) | E::InvalidArgs(_) => false,
        _ => false,
    }
}

fn connect_options(timing: &Timing) -> ConnectOptions {
    ConnectOptions::new()
        .with_connect_timeout(timing.connect.min(timing.request))
        // HTTP/2 pings notice a dead member even while a keep-alive stream is idle.
        .with_keep_alive(Duration::from_secs(1), timing.request)
        // Fail fast on a member that lost its leader instead of hanging.
        .with_require_leader(true)
}

/// A client of one endpoint. `Client::connect` dials lazily; only a malformed URL fails here.
async fn single_client(url: &str, options: &ConnectOptions) -> Result<Client, Error> {
    Client::connect([url], Some(options.clone()))
        .await
        .map_err(|e| Error::InvalidRequest(format!("etcd endpoint `{url}`: {e}")))
}

/// `host:port` as `http://host:port`, without a trailing `/`, to compare endpoints with the
/// member list's client URLs.
fn normalize(endpoint: &str) -> String {
    let trimmed = endpoint.trim().trim_end_matches('/');
    if trimmed.contains("://") { trimmed.to_owned() } else { format!("http://{trimmed}") }
}

fn unavailable(reason: String) -> Error {
    Error::Unavailable { backend: BACKEND, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_grow_per_round_within_the_request_timeout() {
        let timing = Timing::new(Duration::from_secs(5), Duration::from_secs(5));
        assert_eq!(timing.attempt, Duration::from_millis(250));
        let left = timing.request;
        assert_eq!(attempt_in(timing.attempt, 0, left), Duration::from_millis(250));
        assert_eq!(attempt_in(timing.attempt, 3, left), Duration::from_secs(1));
        assert_eq!(attempt_in(timing.attempt, 1_000, left), Duration::from_secs(5));
        let short = Timing::new(Duration::from_millis(400), Duration::from_secs(1));
        assert_eq!(short.attempt, Duration::from_millis(50));
        let long = Timing::new(Duration::from_secs(60), Duration::from_secs(1));
        assert_eq!(long.attempt, Duration::from_secs(1));
    }

    #[test]
    fn endpoints_compare_as_urls() {
        for (given, want) in [
            ("127.0.0.1:2379", "http://127.0.0.1:2379"),
            ("http://127.0.0.1:2379/", "http://127.0.0.1:2379"),
            (" https://etcd-0:2379 ", "https://etcd-0:2379"),
        ] {
            assert_eq!(normalize(given), want, "{given}");
        }
    }

    #[test]
    fn member_faults_move_the_request_and_refusals_do_not() {
        use idmint_etcd::Error as E;
        let status = |code| E::from(tonic::Status::new(code, "x"));
        for (error, fault) in [
            (status(tonic::Code::Unavailable), true),
            (status(tonic::Code::DeadlineExceeded), true),
            (status(tonic::Code::Cancelled), true),
            (status(tonic::Code::NotFound), false),
            (status(tonic::Code::InvalidArgument), false),
            (status(tonic::Code::FailedPrecondition), false),
            (E::LeaseNotFound(7), false),
            (E::KeepAlive("the keep-alive stream is closed".into()), true),
            (E::InvalidArgs("x".into()), false),
        ] {
            assert_eq!(is_member_fault(&error), fault, "{error}");
        }
    }
}
