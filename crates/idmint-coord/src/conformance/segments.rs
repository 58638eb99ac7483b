//! The conformance suite every [`SegmentStore`] backend runs in its tests, in the style of the
//! coordinator's: one public async function per rule of the contract.
//!
//! Each function takes a factory that returns a new handle on the *same* store, standing for
//! one more process (a clone of a `MemoryStore`, a second `FileStore` on the same directory, a
//! second Postgres connection or etcd client). Namespaces are fixed names, so give each call a
//! fresh store.
//!
//! The rules are those of the trait: ranges of one namespace are disjoint and increasing, hold
//! exactly `step` IDs within `1..=`[`MAX_SEGMENT_ID`], and are durable before they return. The
//! contract lets a failed attempt waste IDs, so only a quiet, one-caller sequence is held to
//! exact values; concurrent fetches are held to disjointness.

use std::{collections::HashSet, ops::Range, sync::Arc};

use crate::{Error, MAX_SEGMENT_ID, SegmentStore, conformance::eight_tasks_on_four_handles};

/// A factory of handles on one store.
pub type Handles<'a> = &'a (dyn Fn() -> Arc<dyn SegmentStore> + Sync);

/// Runs every check below, in order.
///
/// # Panics
///
/// On the first broken rule, saying which.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::{MemoryStore, SegmentStore, conformance::segments};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let handles = move || Arc::new(store.clone()) as Arc<dyn SegmentStore>;
/// segments::run_all(&handles).await;
/// # });
/// ```
pub async fn run_all(handles: Handles<'_>) {
    ranges_hold_their_step_and_increase(handles).await;
    namespaces_are_independent(handles).await;
    handles_share_one_sequence(handles).await;
    concurrent_fetches_never_share_an_id(handles).await;
    ranges_outlive_their_handle(handles).await;
    invalid_requests_are_refused(handles).await;
    the_id_space_ends_at_max_segment_id(handles).await;
}

/// Checks one range of a sequence: exactly `step` IDs, within `1..=MAX_SEGMENT_ID`, after
/// `after` (the end of the previous range of the namespace, 1 for none).
fn check_range(what: &str, range: &Range<u64>, step: u64, after: u64) {
    assert_eq!(
        range.end.checked_sub(range.start),
        Some(step),
        "{what}: {range:?} has not {step} ids"
    );
    assert!(range.start >= 1 && range.end <= MAX_SEGMENT_ID + 1, "{what}: {range:?} out of bounds");
    assert!(range.start >= after, "{what}: {range:?} does not start after {after}");
}

/// A fresh namespace's first range starts at 1; each range holds exactly its step, whatever
/// the step, and starts where the one before ended (one caller, nothing failed: no gap).
pub async fn ranges_hold_their_step_and_increase(handles: Handles<'_>) {
    let store = handles();
    let mut after = 1;
    for step in [1, 5, 100, 3, 1_000] {
        let range = store.next_range("steps", step).await.expect("range");
        check_range("steps", &range, step, after);
        assert_eq!(range.start, after, "a quiet caller's ranges follow each other");
        after = range.end;
    }
}

/// Each namespace has its own sequence: fetching from one moves no other.
pub async fn namespaces_are_independent(handles: Handles<'_>) {
    let store = handles();
    let first = store.next_range("first-ns", 10).await.expect("first namespace");
    let second = store.next_range("second-ns", 10).await.expect("second namespace");
    assert_eq!((first.clone(), second), (1..11, 1..11), "two fresh namespaces");
    let again = store.next_range("first-ns", 10).await.expect("first namespace again");
    assert_eq!(again, 11..21, "the first namespace goes on where it was");
}

/// Two handles (two processes) taking turns draw from one sequence: no range repeats or
/// overlaps another's.
pub async fn handles_share_one_sequence(handles: Handles<'_>) {
    let (a, b) = (handles(), handles());
    let mut after = 1;
    for turn in 0..10 {
        let store = if turn % 2 == 0 { &a } else { &b };
        let range = store.next_range("shared", 7).await.expect("range");
        check_range(&format!("turn {turn}"), &range, 7, after);
        after = range.end;
    }
}

/// Eight tasks on four handles fetch at once: every ID is handed out at most once, and every
/// range holds its step.
pub async fn concurrent_fetches_never_share_an_id(handles: Handles<'_>) {
    let fetch = |store: Arc<dyn SegmentStore>| async move {
        store.next_range("concurrent", 7).await.expect("range")
    };
    let mut seen = HashSet::new();
    for ranges in eight_tasks_on_four_handles(handles, 25, fetch).await {
        let mut after = 1;
        for range in ranges {
            check_range("a concurrent fetch", &range, 7, after);
            after = range.end;
            for id in range {
                assert!(seen.insert(id), "id {id} was handed out twice");
            }
        }
    }
    assert_eq!(seen.len(), 8 * 25 * 7);
}

/// What a handle handed out stays handed out after every handle is gone (a restart): a new
/// handle starts above it.
pub async fn ranges_outlive_their_handle(handles: Handles<'_>) {
    let store = handles();
    let before = store.next_range("durable", 50).await.expect("range");
    drop(store);
    let after = handles().next_range("durable", 50).await.expect("range after a restart");
    check_range("after a restart", &after, 50, before.end);
}

/// Bad namespaces and steps are refused, and refusing one takes nothing from the sequence.
pub async fn invalid_requests_are_refused(handles: Handles<'_>) {
    let store = handles();
    let first = store.next_range("valid", 4).await.expect("range");
    let long = "x".repeat(65);
    let bad = [("", 1), ("UPPER", 1), ("a/b", 1), ("..", 1), (long.as_str(), 1)];
    let steps = [("valid", 0), ("valid", MAX_SEGMENT_ID + 1), ("valid", u64::MAX)];
    for (namespace, step) in bad.into_iter().chain(steps) {
        match store.next_range(namespace, step).await {
            Err(Error::InvalidRequest(_)) => {}
            other => panic!("namespace {namespace:?} step {step} must be refused, got {other:?}"),
        }
    }
    let next = store.next_range("valid", 4).await.expect("range");
    assert_eq!(next.start, first.end, "a refused request takes no ids");
}

/// The last ID is [`MAX_SEGMENT_ID`]: a range that would pass it is refused with nothing
/// handed out, the range that ends exactly there is handed out, and then the namespace stays
/// exhausted, never wrapping to small IDs.
pub async fn the_id_space_ends_at_max_segment_id(handles: Handles<'_>) {
    let store = handles();
    let big = store.next_range("last", MAX_SEGMENT_ID - 100).await.expect("a huge range");
    check_range("a huge range", &big, MAX_SEGMENT_ID - 100, 1);
    let left = MAX_SEGMENT_ID + 1 - big.end;
    let exhausted = |got: Result<Range<u64>, Error>, what: &str| match got {
        Err(Error::Exhausted { max: MAX_SEGMENT_ID, .. }) => {}
        other => panic!("{what} must be refused as exhausted, got {other:?}"),
    };
    exhausted(store.next_range("last", left + 1).await, "a range past the last id");
    let last = store.next_range("last", left).await.expect("the range up to the last id");
    assert_eq!(last, big.end..MAX_SEGMENT_ID + 1, "the last range");
    exhausted(store.next_range("last", 1).await, "a range after the last id");
    exhausted(handles().next_range("last", 1).await, "a range after the last id, restarted");
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::{MemoryStore, conformance::panic_message};

    /// A broken backend for the negative controls: a map of marks in memory.
    #[derive(Debug, Default)]
    struct Broken {
        marks: Mutex<std::collections::HashMap<String, u64>>,
        /// Reads the mark, lets other tasks run, then writes mark + step: a read-modify-write
        /// that is not atomic, as a store without a transaction or a compare would do.
        racy: bool,
        /// Starts each range at the mark instead of after it: each range overlaps the last ID of
        /// the one before.
        overlapping: bool,
    }

    impl Broken {
        fn mark(&self, namespace: &str) -> u64 {
            *self.marks.lock().expect("lock").get(namespace).unwrap_or(&0)
        }
    }

    #[async_trait::async_trait]
    impl SegmentStore for Broken {
        fn name(&self) -> &'static str {
            "broken"
        }

        async fn next_range(&self, namespace: &str, step: u64) -> Result<Range<u64>, Error> {
            crate::segment::check_range_request(namespace, step)?;
            let mark = self.mark(namespace);
            if self.racy {
                tokio::task::yield_now().await;
            }
            let (range, new_mark) = crate::segment::range_after(namespace, mark, step)?;
            self.marks.lock().expect("lock").insert(namespace.to_owned(), new_mark);
            Ok(if self.overlapping { range.start - 1..range.end - 1 } else { range })
        }
    }

    /// Runs `property` on `store` and returns its panic message; fails when it passes.
    async fn caught<F>(store: Broken, property: fn(Handles<'static>) -> F) -> String
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let store = Arc::new(store);
        let handles: &'static (dyn Fn() -> Arc<dyn SegmentStore> + Sync) =
            Box::leak(Box::new(move || Arc::clone(&store) as Arc<dyn SegmentStore>));
        panic_message(property(handles)).await
    }

    #[tokio::test]
    async fn the_memory_store_passes() {
        let store = MemoryStore::new();
        let handles = move || Arc::new(store.clone()) as Arc<dyn SegmentStore>;
        run_all(&handles).await;
    }

    /// Negative control: a store whose read-modify-write is not atomic hands one range to two
    /// tasks at once, and the concurrency rule catches it.
    #[tokio::test]
    async fn a_racy_store_is_caught() {
        let store = Broken { racy: true, ..Broken::default() };
        let message = caught(store, concurrent_fetches_never_share_an_id).await;
        assert!(message.contains("handed out twice"), "{message}");
    }

    /// Negative control: a store whose ranges overlap by one ID is caught by the first rule.
    #[tokio::test]
    async fn an_overlapping_store_is_caught() {
        let store = Broken { overlapping: true, ..Broken::default() };
        let message = caught(store, ranges_hold_their_step_and_increase).await;
        assert!(
            message.contains("out of bounds") || message.contains("does not start"),
            "{message}"
        );
    }

    /// The broken store without its faults passes the rules its faults break: the controls
    /// fail because of the fault, not because of the test store.
    #[tokio::test]
    async fn the_broken_store_without_faults_passes() {
        let store = Arc::new(Broken::default());
        let handles = move || Arc::clone(&store) as Arc<dyn SegmentStore>;
        ranges_hold_their_step_and_increase(&handles).await;
        concurrent_fetches_never_share_an_id(&handles).await;
    }
}
