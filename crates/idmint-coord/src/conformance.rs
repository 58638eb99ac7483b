//! The conformance suite every [`Coordinator`] backend runs in its tests (object_store's
//! `integration.rs` pattern): one public async function per behaviour of the contract.
//!
//! The store traits have suites of their own in the same style: [`segments`] for every
//! [`SegmentStore`](crate::SegmentStore) and [`counters`] for every
//! [`CounterStore`](crate::CounterStore).
//!
//! Each function takes a factory that returns a new handle on the *same* store, standing for
//! one more server process (a clone of a `MemoryCoordinator`, a second `FileCoordinator` on
//! the same directory, a second etcd client). Namespaces are fixed names, so give each call a
//! fresh store.

pub mod counters;
pub mod segments;

use std::{collections::HashSet, sync::Arc};

use crate::{ClaimRequest, ClaimState, Coordinator, Error, GeneratorIds};

/// A factory of handles on one store.
pub type Handles<'a> = &'a (dyn Fn() -> Arc<dyn Coordinator> + Sync);

/// Runs every check below, in order.
///
/// # Panics
///
/// On the first broken rule, saying which.
pub async fn run_all(handles: Handles<'_>) {
    fixed_claims_are_exclusive(handles).await;
    pool_claims_are_distinct_and_never_wrap(handles).await;
    stride_claims_stay_in_their_stride(handles).await;
    concurrent_cold_starts_get_distinct_ids(handles).await;
    marks_survive_release_and_are_read_by_the_next_holder(handles).await;
    marks_never_go_down(handles).await;
    release_frees_only_its_own_claim(handles).await;
    released_claims_cannot_store(handles).await;
    layout_changes_are_refused(handles).await;
    invalid_requests_are_refused(handles).await;
}

/// Eight tasks on four handles from `handles`, started at once, each making `calls` calls of
/// `call` in turn: what each task got, in its order. The store suites' concurrency rules.
pub(crate) async fn eight_tasks_on_four_handles<S, T, F>(
    handles: &(dyn Fn() -> Arc<S> + Sync),
    calls: usize,
    call: fn(Arc<S>) -> F,
) -> Vec<Vec<T>>
where
    S: ?Sized + Send + Sync + 'static,
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let stores: Vec<_> = (0..4).map(|_| handles()).collect();
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let store = Arc::clone(&stores[task % stores.len()]);
            tokio::spawn(async move {
                let mut got = Vec::with_capacity(calls);
                for _ in 0..calls {
                    got.push(call(Arc::clone(&store)).await);
                }
                got
            })
        })
        .collect();
    let mut all = Vec::with_capacity(tasks.len());
    for task in tasks {
        all.push(task.await.expect("task"));
    }
    all
}

/// Runs `rule` on a task of its own and returns its panic message; fails when the rule
/// passes. The store suites' negative controls.
#[cfg(test)]
pub(crate) async fn panic_message(rule: impl Future<Output = ()> + Send + 'static) -> String {
    let error = tokio::spawn(rule).await.expect_err("the rule must fail");
    let panic = error.into_panic();
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

fn request(namespace: &str, ids: GeneratorIds) -> ClaimRequest {
    ClaimRequest::new(namespace, ids, "test-layout")
}

/// A fixed generator ID held by one handle is refused to another, with the holder named, and
/// can be claimed again once released.
pub async fn fixed_claims_are_exclusive(handles: Handles<'_>) {
    let (a, b) = (handles(), handles());
    let req = request("exclusive", GeneratorIds::Fixed(5)).with_holder("server a");
    let claim = a.claim(&req).await.expect("first claim");
    assert_eq!(claim.generator_id(), 5);
    assert_eq!(claim.namespace(), "exclusive");
    assert!(matches!(claim.state(), ClaimState::Held { .. }));
    match b.claim(&req.clone().with_holder("server b")).await {
        Err(Error::Conflict { generator_id: 5, holder, .. }) => {
            assert!(holder.contains("server a"), "holder `{holder}` should name server a")
        }
        other => panic!("a second claim on a held generator id must conflict, got {other:?}"),
    }
    // Another namespace is independent.
    b.claim(&request("exclusive-other", GeneratorIds::Fixed(5))).await.expect("other namespace");
    a.release(&claim).await.expect("release");
    let again = b.claim(&req).await.expect("claim after release");
    assert_eq!(again.generator_id(), 5);
}

/// Pool claims by several handles get distinct IDs, lowest first, and a full pool is refused
/// instead of wrapping around.
pub async fn pool_claims_are_distinct_and_never_wrap(handles: Handles<'_>) {
    let req = request("pool", GeneratorIds::Pool { count: 3 });
    let mut claims = Vec::new();
    for _ in 0..3 {
        let handle = handles();
        let claim = handle.claim(&req).await.expect("claim from a pool with room");
        claims.push((handle, claim));
    }
    let ids: Vec<u64> = claims.iter().map(|(_, c)| c.generator_id()).collect();
    assert_eq!(ids, vec![0, 1, 2], "pool claims take the lowest free id");
    match handles().claim(&req).await {
        Err(Error::PoolExhausted { size: 3, .. }) => {}
        other => panic!("a full pool must be refused, got {other:?}"),
    }
    let (handle, claim) = claims.remove(1);
    handle.release(&claim).await.expect("release");
    assert_eq!(handles().claim(&req).await.expect("claim freed id").generator_id(), 1);
}

/// Claims from a stride (a datacenter or cluster fixed by config) take its IDs lowest first
/// and never one outside it, even where lower IDs are free; a full stride is refused; a stride
/// that repeats or overflows is an invalid request.
pub async fn stride_claims_stay_in_their_stride(handles: Handles<'_>) {
    let req = request("stride", GeneratorIds::Stride { first: 5, step: 16, count: 3 });
    let mut claims = Vec::new();
    for _ in 0..3 {
        let handle = handles();
        let claim = handle.claim(&req).await.expect("claim from a stride with room");
        claims.push((handle, claim));
    }
    let ids: Vec<u64> = claims.iter().map(|(_, c)| c.generator_id()).collect();
    assert_eq!(ids, vec![5, 21, 37], "stride claims take its lowest free id");
    match handles().claim(&req).await {
        Err(Error::PoolExhausted { size: 3, .. }) => {}
        other => panic!("a full stride must be refused, got {other:?}"),
    }
    let (handle, claim) = claims.remove(1);
    handle.release(&claim).await.expect("release");
    assert_eq!(handles().claim(&req).await.expect("claim freed id").generator_id(), 21);
    for bad in [
        GeneratorIds::Stride { first: 5, step: 0, count: 2 },
        GeneratorIds::Stride { first: 5, step: 16, count: 0 },
        GeneratorIds::Stride { first: u64::MAX - 1, step: 16, count: 2 },
    ] {
        match handles().claim(&request("stride", bad)).await {
            Err(Error::InvalidRequest(_)) => {}
            other => panic!("{bad:?} must be refused, got {other:?}"),
        }
    }
}

/// Ten claimants starting at once get ten distinct generator IDs.
pub async fn concurrent_cold_starts_get_distinct_ids(handles: Handles<'_>) {
    let req = request("cold-start", GeneratorIds::Pool { count: 10 });
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let handle = handles();
            let req = req.clone();
            tokio::spawn(async move {
                let claim = handle.claim(&req).await.expect("claim");
                (claim.generator_id(), handle, claim)
            })
        })
        .collect();
    let mut seen = HashSet::new();
    let mut keep = Vec::new();
    for task in tasks {
        let (id, handle, claim) = task.await.expect("task");
        assert!(seen.insert(id), "generator id {id} was handed out twice");
        keep.push((handle, claim));
    }
    assert_eq!(seen.len(), 10);
}

/// A stored mark outlives its claim, and the next holder reads it.
pub async fn marks_survive_release_and_are_read_by_the_next_holder(handles: Handles<'_>) {
    let (a, b) = (handles(), handles());
    let req = request("marks", GeneratorIds::Fixed(0));
    let claim = a.claim(&req).await.expect("claim");
    assert_eq!(claim.mark_ms(), None, "a fresh generator id has no mark");
    a.store_mark(&claim, 1_000).await.expect("store");
    a.store_mark(&claim, 4_000).await.expect("raise");
    a.release(&claim).await.expect("release");
    let next = b.claim(&req).await.expect("next holder");
    assert_eq!(next.mark_ms(), Some(4_000));
    // Dropping a claim without releasing it (a crash) keeps the mark as well.
    b.store_mark(&next, 9_000).await.expect("store");
    drop(next);
    drop(b);
    let third = handles().claim(&req).await.expect("claim after a dropped handle");
    assert_eq!(third.mark_ms(), Some(9_000));
}

/// A mark below the stored one is refused and does not change it.
pub async fn marks_never_go_down(handles: Handles<'_>) {
    let a = handles();
    let req = request("monotone", GeneratorIds::Fixed(1));
    let claim = a.claim(&req).await.expect("claim");
    a.store_mark(&claim, 5_000).await.expect("store");
    match a.store_mark(&claim, 4_999).await {
        Err(Error::MarkRegressed { offered_ms: 4_999, stored_ms: 5_000 }) => {}
        other => panic!("a lower mark must be refused, got {other:?}"),
    }
    a.store_mark(&claim, 5_000).await.expect("an equal mark is fine");
    a.release(&claim).await.expect("release");
    assert_eq!(handles().claim(&req).await.expect("claim").mark_ms(), Some(5_000));
}

/// Releasing one claim frees only that generator ID; the handle's other claims stay usable.
pub async fn release_frees_only_its_own_claim(handles: Handles<'_>) {
    let (a, b) = (handles(), handles());
    let req = request("released", GeneratorIds::Fixed(2));
    let claim = a.claim(&req).await.expect("claim");
    let other = a.claim(&request("released", GeneratorIds::Fixed(3))).await.expect("claim 3");
    a.release(&claim).await.expect("release");
    let fresh = b.claim(&req).await.expect("claim by b");
    b.store_mark(&fresh, 7_000).await.expect("b stores");
    // `a` still holds generator 3, and can store its mark.
    a.store_mark(&other, 1).await.expect("a can store for what it holds");
    match b.claim(&request("released", GeneratorIds::Fixed(3))).await {
        Err(Error::Conflict { generator_id: 3, .. }) => {}
        other => panic!("generator 3 is still held by a, got {other:?}"),
    }
    b.release(&fresh).await.expect("release");
    assert_eq!(handles().claim(&req).await.expect("claim").mark_ms(), Some(7_000));
}

/// A released claim can no longer store marks, even while nobody else holds the generator ID.
pub async fn released_claims_cannot_store(handles: Handles<'_>) {
    let a = handles();
    let req = request("gone", GeneratorIds::Fixed(4));
    let claim = a.claim(&req).await.expect("claim");
    a.store_mark(&claim, 2_000).await.expect("store");
    a.release(&claim).await.expect("release");
    match a.store_mark(&claim, 3_000).await {
        Err(Error::ClaimLost { generator_id: 4, .. }) => {}
        other => panic!("a released claim must not store, got {other:?}"),
    }
    // Releasing twice is harmless.
    a.release(&claim).await.expect("second release");
    assert_eq!(handles().claim(&req).await.expect("claim").mark_ms(), Some(2_000));
}

/// A mark written under one layout is refused to a claimant with another.
pub async fn layout_changes_are_refused(handles: Handles<'_>) {
    let a = handles();
    let old = ClaimRequest::new("layout", GeneratorIds::Fixed(0), "layout-v1");
    let claim = a.claim(&old).await.expect("claim");
    a.store_mark(&claim, 1_000).await.expect("store");
    a.release(&claim).await.expect("release");
    let new = ClaimRequest::new("layout", GeneratorIds::Fixed(0), "layout-v2");
    match handles().claim(&new).await {
        Err(Error::LayoutChanged { stored, expected, .. }) => {
            assert_eq!((stored.as_str(), expected.as_str()), ("layout-v1", "layout-v2"))
        }
        other => panic!("a changed layout must be refused, got {other:?}"),
    }
    // The old layout can still claim it.
    handles().claim(&old).await.expect("same layout");
}

/// Bad namespaces and empty pools are refused before anything is stored.
pub async fn invalid_requests_are_refused(handles: Handles<'_>) {
    let a = handles();
    for namespace in ["", "UPPER", "a/b", "..", &"x".repeat(65)] {
        match a.claim(&request(namespace, GeneratorIds::Fixed(0))).await {
            Err(Error::InvalidRequest(_)) => {}
            other => panic!("namespace {namespace:?} must be refused, got {other:?}"),
        }
    }
    match a.claim(&request("empty", GeneratorIds::Pool { count: 0 })).await {
        Err(Error::InvalidRequest(_)) => {}
        other => panic!("an empty pool must be refused, got {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Claim, MemoryCoordinator};

    /// A broken backend for the negative control: a memory coordinator that reads a stride
    /// as a pool of as many IDs from 0, as a backend that knew only pools would.
    #[derive(Debug, Clone, Default)]
    struct StrideBlind(MemoryCoordinator);

    #[async_trait::async_trait]
    impl Coordinator for StrideBlind {
        fn name(&self) -> &'static str {
            "stride-blind"
        }

        async fn claim(&self, request: &ClaimRequest) -> Result<Claim, Error> {
            let mut request = request.clone();
            if let GeneratorIds::Stride { count, .. } = request.generator_ids {
                request.generator_ids = GeneratorIds::Pool { count };
            }
            self.0.claim(&request).await
        }

        async fn store_mark(&self, claim: &Claim, mark_ms: u64) -> Result<(), Error> {
            self.0.store_mark(claim, mark_ms).await
        }

        async fn release(&self, claim: &Claim) -> Result<(), Error> {
            self.0.release(claim).await
        }
    }

    /// Negative control: a backend that claims outside the stride is caught by the stride
    /// rule, and passes the pool rule (the control fails for the stride, not the shim).
    #[tokio::test]
    async fn a_backend_blind_to_strides_is_caught() {
        let store = StrideBlind::default();
        let handles: &'static (dyn Fn() -> Arc<dyn Coordinator> + Sync) =
            Box::leak(Box::new(move || Arc::new(store.clone()) as Arc<dyn Coordinator>));
        let message = panic_message(stride_claims_stay_in_their_stride(handles)).await;
        assert!(message.contains("stride claims take its lowest free id"), "{message}");
        pool_claims_are_distinct_and_never_wrap(handles).await;
    }
}
