//! Leases of the etcd backend: granting, the keep-alive task that publishes each claim's local
//! deadline, and revocation. The deadline is computed from the *send* time of the last
//! acknowledged keep-alive (DESIGN.md, "How does fleet mode on etcd stay unique when leases lie?"), never from the receive time.
//! Keep-alives go to a healthy member; a stream on a member that fails or does not answer
//! within an attempt's deadline is dropped and opened again on another one at once.

use std::{
    collections::BTreeSet,
    sync::{
        Arc, LazyLock, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use idmint_etcd::{Client, LeaseKeepAliveStream, LeaseKeeper};

use super::members::{BACKEND, Member, Members, is_member_fault};
use tokio::sync::watch;

use crate::{ClaimState, Error};

/// What a lease needs of its coordinator's settings.
#[derive(Debug, Clone, Copy)]
pub(super) struct LeaseOptions {
    /// Subtracted from every deadline (`EtcdOptions::margin`).
    pub(super) margin: Duration,
    /// The whole budget of one request (`EtcdOptions::request_timeout`).
    pub(super) request_timeout: Duration,
}

/// What the coordinator does when a keep-alive ends by itself (the lease expired or was
/// lost): forget the claim of this token and revoke this lease. Given as a callback, so that
/// leases know nothing of the coordinator that holds them.
pub(super) type OnEnd = Arc<dyn Fn(u64, i64) + Send + Sync>;

/// Claim tokens, unique in the process, so that a claim handed to the wrong coordinator is
/// simply not found there.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// A granted lease.
#[derive(Debug, Clone, Copy)]
pub(super) struct Lease {
    pub(super) id: i64,
    /// The TTL etcd granted (it raises TTLs below its minimum).
    pub(super) ttl: Duration,
    /// When the grant request was sent: etcd started the TTL no earlier.
    pub(super) sent: Instant,
}

impl Lease {
    /// The deadline the grant itself gives.
    fn first_deadline(&self, options: LeaseOptions) -> Instant {
        deadline(self.sent, self.ttl, options.margin)
    }
}

/// `send time + TTL − margin`.
fn deadline(sent: Instant, ttl: Duration, margin: Duration) -> Instant {
    sent + ttl.saturating_sub(margin)
}

/// A lease kept alive by its own task from the moment it is granted, and the state that task
/// publishes for the claim made on it.
#[derive(Debug)]
pub(super) struct Kept {
    pub(super) lease: Lease,
    /// The token of the claim made on this lease.
    pub(super) token: u64,
    pub(super) state: watch::Sender<ClaimState>,
    /// Test hook: the keep-alive task acts as if its process were paused.
    pub(super) paused: AtomicBool,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Kept {
    /// Stops the keep-alive task and publishes `Lost`. The caller revokes the lease.
    pub(super) fn end_here(&self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
        self.state.send_replace(ClaimState::Lost);
    }
}

/// Grants a lease of `ttl_secs` and starts keeping it alive. The receiver is the future
/// claim's state; dropping every receiver ends the keep-alive and revokes the lease once the
/// claim is recorded. `on_end` runs when the keep-alive ends by itself.
pub(super) async fn start(
    members: &Arc<Members>,
    options: LeaseOptions,
    ttl_secs: i64,
    on_end: OnEnd,
) -> Result<(Arc<Kept>, watch::Receiver<ClaimState>), Error> {
    let lease = grant(members, ttl_secs).await?;
    let first = lease.first_deadline(options);
    let (state, receiver) = watch::channel(ClaimState::Held { until: Some(first) });
    let kept = Arc::new(Kept {
        lease,
        token: NEXT_TOKEN.fetch_add(1, Ordering::Relaxed),
        state,
        paused: AtomicBool::new(false),
        task: Mutex::new(None),
    });
    let times = LeaseTimes::new(options, lease.ttl);
    let members = Arc::clone(members);
    let task = tokio::spawn(keep_alive(on_end, members, Arc::clone(&kept), times));
    *kept.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task.abort_handle());
    Ok((kept, receiver))
}

/// Grants a lease of `ttl_secs`.
async fn grant(members: &Members, ttl_secs: i64) -> Result<Lease, Error> {
    let sent = Instant::now();
    // A grant repeated after a lost answer may leave the first lease unused: it expires.
    let response =
        members.run("lease grant", |mut c| async move { c.lease_grant(ttl_secs).await }).await?;
    if !response.error().is_empty() || response.ttl() <= 0 {
        return Err(Error::Unavailable {
            backend: BACKEND,
            reason: format!("lease grant refused: {}", response.error().to_lowercase()),
        });
    }
    Ok(Lease { id: response.id(), ttl: Duration::from_secs(response.ttl().unsigned_abs()), sent })
}

/// Logs that etcd ended a claim's lease before the claim's local deadline, as `found` showed:
/// etcd revoked it, or expired it by a clock of its own (a paused etcd leader can revoke the
/// leases it takes for expired when it resumes, etcd-io/etcd#15247; DESIGN.md, "How does
/// idmint ride out a failed or paused etcd member?").
pub(super) fn gone_in_etcd(id: i64, found: &str) {
    tracing::warn!(
        lease = %format!("{id:x}"),
        "{found} found the claim's etcd lease gone while its keep-alives were acknowledged: etcd revoked or expired it; the claim is lost"
    );
}

/// Revokes a lease and waits for the answer; errors are ignored (the lease expires anyway).
pub(super) async fn revoke(members: &Members, id: i64) {
    let _ = members.run("lease revoke", |mut c| async move { c.lease_revoke(id).await }).await;
}

/// Whether an error reason says the lease no longer exists.
pub(super) fn is_not_found(reason: &str) -> bool {
    reason.contains("lease not found")
}

/// Revocations started in the background and not finished yet, by sequence number.
static REVOKING: LazyLock<watch::Sender<BTreeSet<u64>>> =
    LazyLock::new(|| watch::Sender::new(BTreeSet::new()));
static NEXT_REVOCATION: AtomicU64 = AtomicU64::new(0);

/// Removes a revocation from [`REVOKING`] however its task ends (even when its runtime shuts
/// down first).
struct Revoking(u64);

impl Drop for Revoking {
    fn drop(&mut self) {
        REVOKING.send_modify(|pending| {
            pending.remove(&self.0);
        });
    }
}

/// Revokes a lease without waiting, where no `.await` is possible (`Drop`). Without a Tokio
/// runtime nothing is done: the lease expires after its TTL.
pub(super) fn revoke_in_background(members: &Arc<Members>, id: i64) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    let sequence = NEXT_REVOCATION.fetch_add(1, Ordering::SeqCst);
    REVOKING.send_modify(|pending| {
        pending.insert(sequence);
    });
    let guard = Revoking(sequence);
    let members = Arc::clone(members);
    runtime.spawn(async move {
        let _guard = guard;
        let _ = members.run("lease revoke", |mut c| async move { c.lease_revoke(id).await }).await;
    });
}

/// Waits, at most `limit`, until every background revocation started before this call ended.
pub(super) async fn await_earlier_revocations(limit: Duration) {
    let horizon = NEXT_REVOCATION.load(Ordering::SeqCst);
    let mut pending = REVOKING.subscribe();
    let done = |p: &BTreeSet<u64>| p.first().is_none_or(|&first| first >= horizon);
    let _ = tokio::time::timeout(limit, pending.wait_for(done)).await;
}

/// The timing of one lease's keep-alives.
#[derive(Debug, Clone, Copy)]
struct LeaseTimes {
    /// The granted TTL.
    ttl: Duration,
    /// Between keep-alives: TTL/3.
    period: Duration,
    /// The pause before trying again when no member would open a keep-alive stream (one
    /// refused it); a failed keep-alive itself is sent again at once.
    retry: Duration,
    margin: Duration,
    request_timeout: Duration,
}

impl LeaseTimes {
    fn new(options: LeaseOptions, ttl: Duration) -> Self {
        LeaseTimes {
            ttl,
            period: ttl / 3,
            retry: (ttl / 20).clamp(Duration::from_millis(50), Duration::from_millis(500)),
            margin: options.margin,
            request_timeout: options.request_timeout,
        }
    }
}

/// The outcome of one keep-alive.
enum Renewed {
    /// Acknowledged: the lease lives at least this long after the request was sent.
    Alive(Duration),
    /// etcd says the lease no longer exists (expired or revoked).
    Gone,
}

/// An open keep-alive stream. Responses arrive in request order; after a timeout the stream is
/// dropped, so that a late answer is never taken for a newer request.
type Stream = (LeaseKeeper, LeaseKeepAliveStream);

/// One keep-alive on an open stream.
async fn renew_on((keeper, responses): &mut Stream) -> Result<Renewed, String> {
    keeper.keep_alive().await.map_err(|e| e.to_string())?;
    match responses.message().await.map_err(|e| e.to_string())? {
        Some(response) if response.ttl() > 0 => {
            Ok(Renewed::Alive(Duration::from_secs(response.ttl().unsigned_abs())))
        }
        Some(_) => Ok(Renewed::Gone),
        None => Err("the keep-alive stream ended".into()),
    }
}

/// Opens a keep-alive stream on a member, which sends one keep-alive and reads its answer
/// (without its TTL, which is the granted one); `None` when etcd says the lease is gone.
async fn open(mut client: Client, id: i64) -> Result<Option<Stream>, idmint_etcd::Error> {
    match client.lease_keep_alive(id).await {
        Ok(opened) => Ok(Some(opened)),
        Err(e) if !is_member_fault(&e) && is_not_found(&e.to_string()) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Keeps one claim's lease alive until the claim ends, publishing its deadline.
///
/// Every TTL/3 it sends a keep-alive on its stream, opened on a healthy member; an
/// acknowledged one moves the deadline to `send time + TTL − margin`. A keep-alive that fails
/// or gets no answer within an attempt's deadline marks its member failed and drops the
/// stream, and a new stream is opened at once as every request is sent
/// ([`Members::run_on`]): on the healthy members first, then on the failed ones with deadlines
/// growing each round, abandoning an attempt on a failed member as soon as another comes
/// back, until the claim's deadline. A stream whose member another request found failed is
/// moved before its next keep-alive. At the deadline, or when etcd says the lease is gone, the
/// claim turns [`ClaimState::Lost`], is forgotten and its lease revoked. When every receiver of
/// the claim's state is dropped (the claim was dropped without release), the lease is revoked.
/// `release` and `Drop` abort the task.
async fn keep_alive(on_end: OnEnd, members: Arc<Members>, held: Arc<Kept>, times: LeaseTimes) {
    let (lease, token) = (held.lease, held.token);
    let mut until = deadline(lease.sent, times.ttl, times.margin);
    let mut next = lease.sent + times.period;
    let mut stream: Option<(Arc<Member>, Stream)> = None;
    // One attempt: 1/20 of the request timeout; the whole timeout without failover.
    let attempt =
        if members.fails_over() { members.timing().attempt } else { times.request_timeout };
    loop {
        let lapsed = tokio::select! {
            () = held.state.closed() => {
                on_end(token, lease.id);
                return;
            }
            () = tokio::time::sleep_until(until.into()) => true,
            () = tokio::time::sleep_until(next.into()) => false,
        };
        if held.paused.load(Ordering::SeqCst) {
            // As if the process were stopped: no keep-alives, no news, until the claim goes.
            held.state.closed().await;
            on_end(token, lease.id);
            return;
        }
        if lapsed {
            tracing::warn!(
                lease = %format!("{:x}", lease.id),
                "no keep-alive of the claim's etcd lease was acknowledged before the claim's deadline; the claim is lost"
            );
            held.state.send_replace(ClaimState::Lost);
            on_end(token, lease.id);
            return;
        }
        let sent = Instant::now();
        let mut renewed = None;
        if let Some((member, mut open)) = stream.take().filter(|(member, _)| member.is_healthy()) {
            let budget = attempt.min(until.saturating_duration_since(sent));
            match tokio::time::timeout(budget, renew_on(&mut open)).await {
                Ok(Ok(outcome)) => {
                    members.succeeded(&member);
                    stream = Some((member, open));
                    renewed = Some(outcome);
                }
                Ok(Err(reason)) => {
                    members.failed(&member, &format!("keep-alive failed: {reason}"));
                }
                Err(_) => {
                    members.failed(&member, &format!("keep-alive got no answer within {budget:?}"));
                }
            }
        }
        if renewed.is_none() {
            // No stream, or it failed: open one on whichever member answers, within the
            // claim's deadline (at most the request timeout without failover).
            let mut total = until.saturating_duration_since(Instant::now());
            if !members.fails_over() {
                total = total.min(times.request_timeout);
            }
            let id = lease.id;
            match members.run_on("lease keep-alive", attempt, total, |c| open(c, id)).await {
                Ok((member, Some(open))) => {
                    stream = Some((member, open));
                    renewed = Some(Renewed::Alive(lease.ttl));
                }
                Ok((_, None)) => renewed = Some(Renewed::Gone),
                // No member answered before the deadline (the next turn finds it passed), or
                // the request was refused: try again after a pause.
                Err(_) => next = Instant::now() + times.retry,
            }
        }
        match renewed {
            Some(Renewed::Alive(ttl)) => {
                until = deadline(sent, ttl, times.margin);
                held.state.send_replace(ClaimState::Held { until: Some(until) });
                next = sent + times.period;
            }
            Some(Renewed::Gone) => {
                gone_in_etcd(lease.id, "a keep-alive");
                held.state.send_replace(ClaimState::Lost);
                on_end(token, lease.id);
                return;
            }
            None => {}
        }
    }
}
