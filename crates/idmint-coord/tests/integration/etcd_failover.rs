//! One etcd member of three killed (SIGKILL) or paused (SIGSTOP), a follower or the leader,
//! while a claim's mark is stored every 100 ms (as a server's window task extends it) and the
//! claims are listed 20 times (as `idmint lease list` does, each time with a new connection):
//! with health-tracked members the fault is invisible (≥ 99.9 % of mark writes answered, the
//! longest gap ≤ 0.5 s for a follower and ≤ 2 s for a leader, the claim never lost, 20 of 20
//! listings), and the round-robin negative control, idmint's earlier client, misses
//! these targets in the same scenario.
//!
//! A third test slows an election past the claim's next keep-alive (the leader paused, a
//! second member paused beside it for 2–3 s): the claim must be renewed within 200 ms of the
//! cluster serving again.
//!
//! Each fault is held `IDMINT_ETCD_FAULT_HOLD_S` seconds (default 10; 30 in the full run). The
//! failover coordinator is given only the endpoint of the member that fails, so it must find
//! the others in the member list and is sure to be using the member the fault hits.
//!
//! The tests run on demand, not in `scripts/test-all`: their verdicts are wall-clock gaps and
//! shares on a shared 2-core machine, and etcd itself can end the claim. On CI's busy machine
//! a 10 s leader pause once cost the claim (91.8 % of mark writes answered: the claim ended
//! about 0.2 s after the leader resumed). The cause is etcd's (DESIGN.md, "How does idmint
//! ride out a failed or paused etcd member?"): etcd 3.4.23, as Debian packages it, lets a leader
//! that resumes after a pause revoke the leases it takes for expired (etcd-io/etcd#15247).
//! A lost claim is reported with how it ended: by etcd while keep-alives were
//! acknowledged, or at its local deadline. Run them with
//! `IDMINT_NEGATIVE_CONTROLS=1 cargo test -p idmint-coord --features etcd,test-util --test integration etcd_failover -- --ignored --test-threads=1`.

#![cfg(all(feature = "etcd", feature = "test-util", idmint_negative_controls))]

use std::{
    process::Command,
    time::{Duration, Instant},
};

use idmint_coord::{
    ClaimRequest, ClaimState, Coordinator, Error, EtcdCoordinator, EtcdOptions, GeneratorIds,
    testing::{self, EtcdCluster},
};

/// One cluster at a time: the measured gaps must not include another test's etcd start.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Between two mark writes.
const PERIOD: Duration = Duration::from_millis(100);
/// Listings during each fault.
const LISTINGS: usize = 20;
/// Mark writes before the fault, and measured after it ends.
const WARM_UP: Duration = Duration::from_secs(1);
const TAIL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Follower,
    Leader,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// SIGKILL.
    Kill,
    /// SIGSTOP, SIGCONT at the end.
    Stop,
}

#[derive(Debug, Clone, Copy)]
struct Fault {
    role: Role,
    how: How,
}

const FAULTS: [Fault; 4] = [
    Fault { role: Role::Follower, how: How::Kill },
    Fault { role: Role::Leader, how: How::Kill },
    Fault { role: Role::Follower, how: How::Stop },
    Fault { role: Role::Leader, how: How::Stop },
];

impl Fault {
    /// The longest gap allowed between two answered mark writes: a leader loss includes
    /// etcd's election (1-2 s with its default 1 s election timeout).
    fn gap_target(self) -> Duration {
        match self.role {
            Role::Follower => Duration::from_millis(500),
            Role::Leader => Duration::from_secs(2),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `EtcdCoordinator::connect`: health-tracked members.
    Failover,
    /// `EtcdCoordinator::connect_round_robin`: the negative control.
    RoundRobin,
}

/// How a claim ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Before its local deadline: etcd revoked or expired its lease although keep-alives were
    /// acknowledged (a paused etcd leader can do this when it resumes, etcd-io/etcd#15247).
    ByEtcd,
    /// At its local deadline: no keep-alive was acknowledged in time.
    Lapsed,
}

/// Watches a claim until it ends, and tells how.
async fn how_it_ends(mut watch: tokio::sync::watch::Receiver<ClaimState>) -> Option<Ended> {
    let mut until = None;
    loop {
        match *watch.borrow_and_update() {
            ClaimState::Held { until: later } => until = later,
            ClaimState::Lost => {
                let ahead = until.is_some_and(|until| Instant::now() < until);
                return Some(if ahead { Ended::ByEtcd } else { Ended::Lapsed });
            }
        }
        watch.changed().await.ok()?;
    }
}

/// What one fault did to one kind of client.
#[derive(Debug)]
struct Measured {
    calls: usize,
    answered: usize,
    longest_gap: Duration,
    lost: bool,
    /// How the claim ended, if it did.
    ended: Option<Ended>,
    listed: usize,
    first_error: Option<String>,
}

impl Measured {
    fn share(&self) -> f64 {
        self.answered as f64 / self.calls.max(1) as f64
    }

    /// Every target, or what was missed.
    fn misses(&self, fault: Fault) -> Vec<String> {
        let mut missed = Vec::new();
        if self.share() < 0.999 {
            missed.push(format!("{:.2} % answered", 100.0 * self.share()));
        }
        if self.longest_gap > fault.gap_target() {
            missed.push(format!("a gap of {:?} > {:?}", self.longest_gap, fault.gap_target()));
        }
        match (self.lost, self.ended) {
            (false, _) => {}
            (true, Some(Ended::ByEtcd)) => missed.push(
                "the claim was lost: etcd ended its lease while keep-alives were acknowledged"
                    .into(),
            ),
            (true, _) => {
                missed.push("the claim was lost: no keep-alive acknowledged in time".into())
            }
        }
        if self.listed < LISTINGS {
            missed.push(format!("{} of {LISTINGS} listings", self.listed));
        }
        missed
    }
}

/// The server's defaults: a 10 s lease, a 1 s margin, a 5 s request timeout.
fn options() -> EtcdOptions {
    EtcdOptions { prefix: "failover/".into(), ..EtcdOptions::default() }
}

fn hold() -> Duration {
    let seconds = std::env::var("IDMINT_ETCD_FAULT_HOLD_S").ok().map(|s| {
        s.parse::<u64>().unwrap_or_else(|_| panic!("IDMINT_ETCD_FAULT_HOLD_S={s} is not seconds"))
    });
    Duration::from_secs(seconds.unwrap_or(10))
}

async fn connect(kind: Kind, endpoints: &[String]) -> Result<EtcdCoordinator, Error> {
    match kind {
        Kind::Failover => EtcdCoordinator::connect(endpoints, options()).await,
        Kind::RoundRobin => EtcdCoordinator::connect_round_robin(endpoints, options()).await,
    }
}

/// A member stopped with SIGSTOP; continued (SIGCONT) when dropped, also on a panic.
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Stopped {
        let status = Command::new("kill").args(["-STOP", &pid.to_string()]).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -STOP {pid}");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.0.to_string()]).status();
    }
}

/// Lists the claims as `idmint lease list` does: a new connection, the keys, each claim's
/// lease. Whether all of it answered.
async fn list_claims(kind: Kind, endpoints: &[String]) -> Result<(), Error> {
    let coordinator = connect(kind, endpoints).await?;
    let keys = coordinator.read_prefix("failover/").await?;
    let mut claims = 0;
    for kv in keys.iter().filter(|kv| kv.lease != 0) {
        let ttl = coordinator.lease_time_to_live(kv.lease).await?;
        assert!(ttl.left_s > 0, "the claim's lease is alive");
        claims += 1;
    }
    assert_eq!(claims, 1, "one claim is held");
    Ok(())
}

/// Runs one fault against one kind of client.
async fn measure(fault: Fault, kind: Kind) -> Option<Measured> {
    let mut cluster = testing::available(EtcdCluster::start(3).await)?;
    let leader = cluster.leader().await.expect("a leader");
    let victim = match fault.role {
        Role::Leader => leader,
        Role::Follower => (leader + 1) % 3,
    };
    let all = cluster.endpoints();
    let given = match kind {
        Kind::Failover => vec![cluster.endpoint(victim)],
        Kind::RoundRobin => all.clone(),
    };
    let coordinator = connect(kind, &given).await.expect("connect");
    let request = ClaimRequest::new("ids", GeneratorIds::Fixed(0), "failover-layout");
    let claim = coordinator.claim(&request).await.expect("claim");
    let ending = tokio::spawn(how_it_ends(claim.watch()));
    let mut mark = 1_000;
    let mut successes = Vec::new();
    let warm = Instant::now() + WARM_UP;
    while Instant::now() < warm {
        mark += 1;
        coordinator.store_mark(&claim, mark).await.expect("mark writes before the fault");
        successes.push(Instant::now());
        tokio::time::sleep(PERIOD).await;
    }

    let hold = hold();
    let started = Instant::now();
    let mut stopped = None;
    match fault.how {
        How::Kill => cluster.kill(victim).expect("kill the member"),
        How::Stop => {
            let pid = cluster.member_pids()[victim].expect("the member runs");
            stopped = Some(Stopped::new(pid));
        }
    }
    let listings = tokio::spawn({
        let all = all.clone();
        async move {
            let mut listed = 0;
            let mut first_error = None;
            for i in 0..LISTINGS {
                let at = started + hold.mul_f64(i as f64 / LISTINGS as f64);
                tokio::time::sleep_until(at.into()).await;
                match list_claims(kind, &all).await {
                    Ok(()) => listed += 1,
                    Err(e) => {
                        first_error.get_or_insert_with(|| format!("listing: {e}"));
                    }
                }
            }
            (listed, first_error)
        }
    });
    let (mut calls, mut answered, mut first_error, mut lost) = (0, 0, None, false);
    let end = started + hold + TAIL;
    let mut next = started;
    while Instant::now() < end {
        if stopped.is_some() && Instant::now() >= started + hold {
            stopped = None;
        }
        calls += 1;
        mark += 1;
        match coordinator.store_mark(&claim, mark).await {
            Ok(()) => {
                answered += 1;
                successes.push(Instant::now());
            }
            Err(e) => {
                lost |= matches!(e, Error::ClaimLost { .. });
                first_error.get_or_insert_with(|| format!("mark: {e}"));
            }
        }
        next += PERIOD;
        tokio::time::sleep_until(next.max(Instant::now()).into()).await;
    }
    drop(stopped);
    successes.push(Instant::now());
    let longest_gap = successes.windows(2).map(|pair| pair[1] - pair[0]).max().unwrap_or_default();
    lost |= claim.state() == ClaimState::Lost;
    let (listed, listing_error) = listings.await.expect("the listings ran");
    let ended = if lost {
        ending.await.expect("the claim's watch ran")
    } else {
        ending.abort();
        None
    };
    Some(Measured {
        calls,
        answered,
        longest_gap,
        lost,
        ended,
        listed,
        first_error: first_error.or(listing_error),
    })
}

/// Runs every fault with one kind of client; returns what each missed.
#[expect(clippy::print_stderr, reason = "the test reports what it measured")]
async fn check(kind: Kind) -> Option<Vec<(Fault, Vec<String>)>> {
    let _serial = SERIAL.lock().await;
    let mut verdicts = Vec::new();
    for fault in FAULTS {
        let measured = measure(fault, kind).await?;
        let missed = measured.misses(fault);
        eprintln!(
            "{kind:?} {:?} {:?} held {:?}: {}/{} mark writes ({:.2} %), longest gap {:?}, \
             lost {}, {}/{LISTINGS} listings; missed: {missed:?}; first error: {:?}",
            fault.role,
            fault.how,
            hold(),
            measured.answered,
            measured.calls,
            100.0 * measured.share(),
            measured.longest_gap,
            measured.lost,
            measured.listed,
            measured.first_error,
        );
        verdicts.push((fault, missed));
    }
    Some(verdicts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "on demand: wall-clock targets (see the module doc)"]
async fn one_member_down_is_invisible_with_health_tracked_members() {
    let Some(verdicts) = check(Kind::Failover).await else { return };
    for (fault, missed) in verdicts {
        assert!(missed.is_empty(), "{fault:?}: missed {missed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "on demand: the negative control of the test above"]
async fn the_round_robin_control_misses_the_targets() {
    let Some(verdicts) = check(Kind::RoundRobin).await else { return };
    for (fault, missed) in verdicts {
        assert!(!missed.is_empty(), "{fault:?}: the round-robin client met every target");
    }
}

/// How long the slow-election test holds a second member (a follower) paused beside the
/// leader: no election can finish before it resumes.
const HELD_BACK: [Duration; 3] =
    [Duration::from_millis(2_000), Duration::from_millis(2_500), Duration::from_millis(3_000)];

/// The longest a claim may go unrenewed once the cluster serves again: a probe's period
/// (50 ms) and a round's pause (25 ms), with room for a loaded machine.
const RENEWAL_LAG: Duration = Duration::from_millis(200);

/// What the slow-election test saw, from the moment the leader was paused.
#[derive(Debug)]
struct Election {
    /// The first mark write answered after the pause: the cluster serves again.
    back: Option<Duration>,
    /// The first renewal of the claim after the pause.
    renewed: Option<Duration>,
    /// The claim's deadline when the leader was paused.
    deadline: Duration,
}

/// The leader paused just before the claim's next keep-alive, with a follower paused beside
/// it for `held_back`, as an election slowed by a busy machine would be.
async fn slow_election(held_back: Duration) -> Option<Election> {
    use std::sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    };
    let cluster = testing::available(EtcdCluster::start(3).await)?;
    let leader = cluster.leader().await.expect("a leader");
    let follower = (leader + 1) % 3;
    let pids = cluster.member_pids();
    let coordinator =
        Arc::new(connect(Kind::Failover, &[cluster.endpoint(leader)]).await.expect("connect"));
    let request = ClaimRequest::new("ids", GeneratorIds::Fixed(0), "failover-layout");
    let claim = Arc::new(coordinator.claim(&request).await.expect("claim"));
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let writer = tokio::spawn({
        let (coordinator, claim) = (Arc::clone(&coordinator), Arc::clone(&claim));
        let (stop, answered) = (Arc::clone(&stop), Arc::clone(&answered));
        async move {
            let mut mark = 1_000;
            while !stop.load(Ordering::SeqCst) {
                mark += 1;
                if coordinator.store_mark(&claim, mark).await.is_ok() {
                    answered.lock().expect("not poisoned").push(Instant::now());
                }
                tokio::time::sleep(PERIOD).await;
            }
        }
    });
    // After a renewal, the next keep-alive goes a third of the TTL after it was sent:
    // `until − (TTL − margin) + TTL/3`.
    let options = options();
    let ttl = Duration::from_secs(options.lease_ttl_secs.into());
    let mut watch = claim.watch();
    watch.borrow_and_update();
    watch.changed().await.expect("a renewal");
    let ClaimState::Held { until: Some(until) } = *watch.borrow_and_update() else {
        panic!("the claim is held with a deadline");
    };
    let next_keep_alive = until - (ttl - options.margin) + ttl / 3;
    tokio::time::sleep_until((next_keep_alive - Duration::from_millis(100)).into()).await;
    let paused = Instant::now();
    let renewals = tokio::spawn(async move {
        loop {
            watch.changed().await.ok()?;
            match *watch.borrow_and_update() {
                ClaimState::Held { until: Some(later) } if later > until => {
                    return Some(Instant::now());
                }
                ClaimState::Lost => return None,
                ClaimState::Held { .. } => {}
            }
        }
    });
    let stopped_leader = Stopped::new(pids[leader].expect("the leader runs"));
    let stopped_follower = Stopped::new(pids[follower].expect("the follower runs"));
    tokio::time::sleep(held_back).await;
    drop(stopped_follower);
    tokio::time::sleep_until((until + Duration::from_secs(1)).into()).await;
    drop(stopped_leader);
    stop.store(true, Ordering::SeqCst);
    writer.await.expect("the mark writes ran");
    let renewed = tokio::time::timeout(Duration::from_millis(10), renewals)
        .await
        .ok()
        .and_then(|joined| joined.expect("the renewal watch ran"));
    let back = answered.lock().expect("not poisoned").iter().find(|&&at| at > paused).copied();
    Some(Election {
        back: back.map(|at| at - paused),
        renewed: renewed.map(|at| at - paused),
        deadline: until - paused,
    })
}

/// An election slowed past the claim's next keep-alive (the leader paused, a second member
/// paused beside it for 2–3 s): the claim is renewed within [`RENEWAL_LAG`] of the cluster
/// serving again, and so kept whenever that is before its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "on demand: wall-clock targets (see the module doc)"]
#[expect(clippy::print_stderr, reason = "the test reports what it measured")]
async fn a_slow_election_costs_the_claim_no_more_than_its_length() {
    let _serial = SERIAL.lock().await;
    for held_back in HELD_BACK {
        let Some(seen) = slow_election(held_back).await else { return };
        eprintln!("slow election, a follower held back {held_back:?}: {seen:?}");
        let back = seen.back.expect("the cluster served again while the mark writes ran");
        assert!(back + RENEWAL_LAG < seen.deadline, "the cluster came back too late to judge");
        let renewed = seen.renewed.expect("the claim was renewed");
        assert!(renewed < back + RENEWAL_LAG, "renewed {renewed:?}, the cluster back at {back:?}");
    }
}
