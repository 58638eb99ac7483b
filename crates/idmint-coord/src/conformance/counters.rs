//! The conformance suite every [`CounterStore`] backend runs in its tests, in the style of the
//! coordinator's: one public async function per rule of the contract.
//!
//! Each function takes a factory that returns a new handle on the *same* store, standing for
//! one more process (a clone of a `MemoryStore`, a second `FileStore` on the same directory, a
//! second Postgres connection or etcd client). Counter names are fixed, so give each call a
//! fresh store.
//!
//! The rules are those of the trait: each counter counts up from 1 by one atomic, durable
//! step, stops at the caller's maximum and never wraps. The contract lets a failed attempt skip
//! a value, so only a quiet, one-caller sequence is held to exact values; concurrent
//! increments are held to distinct values.

use std::{collections::HashSet, sync::Arc};

use crate::{CounterStore, Error, MAX_SEGMENT_ID, conformance::eight_tasks_on_four_handles};

/// A factory of handles on one store.
pub type Handles<'a> = &'a (dyn Fn() -> Arc<dyn CounterStore> + Sync);

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
/// use idmint_coord::{CounterStore, MemoryStore, conformance::counters};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let handles = move || Arc::new(store.clone()) as Arc<dyn CounterStore>;
/// counters::run_all(&handles).await;
/// # });
/// ```
pub async fn run_all(handles: Handles<'_>) {
    counters_count_up_from_one(handles).await;
    counters_are_independent(handles).await;
    counters_stop_at_their_maximum_and_never_wrap(handles).await;
    handles_share_one_counter(handles).await;
    concurrent_increments_never_share_a_value(handles).await;
    values_outlive_their_handle(handles).await;
    invalid_requests_are_refused(handles).await;
    chosen_values_are_taken_once(handles).await;
    concurrent_takes_never_share_a_value(handles).await;
}

/// A new counter's first value is 1, and each call adds one.
pub async fn counters_count_up_from_one(handles: Handles<'_>) {
    let store = handles();
    for want in 1..=5 {
        assert_eq!(store.next("count", 100).await.expect("next"), want, "counter `count`");
    }
}

/// Each name has its own counter: counting one moves no other.
pub async fn counters_are_independent(handles: Handles<'_>) {
    let store = handles();
    assert_eq!(store.next("one", 10).await.expect("one"), 1);
    assert_eq!(store.next("one", 10).await.expect("one"), 2);
    assert_eq!(store.next("two", 10).await.expect("two"), 1, "a fresh name starts at 1");
    assert_eq!(store.next("one", 10).await.expect("one"), 3, "`one` goes on where it was");
}

/// A counter at its maximum is refused, stays refused, and never wraps to small values; a
/// larger maximum lets it go on from where it is; a maximum of 0 is refused at once.
pub async fn counters_stop_at_their_maximum_and_never_wrap(handles: Handles<'_>) {
    let store = handles();
    for want in 1..=3 {
        assert_eq!(store.next("capped", 3).await.expect("below the maximum"), want);
    }
    for _ in 0..2 {
        match store.next("capped", 3).await {
            Err(e @ Error::Exhausted { max: 3, .. }) => {
                assert!(e.to_string().contains("counter `capped` is exhausted"), "{e}")
            }
            other => panic!("a counter at its maximum must stay exhausted, got {other:?}"),
        }
    }
    assert_eq!(store.next("capped", 4).await.expect("a larger maximum"), 4);
    match store.next("zero", 0).await {
        Err(Error::Exhausted { max: 0, .. }) => {}
        other => panic!("a maximum of 0 must be refused as exhausted, got {other:?}"),
    }
}

/// Two handles (two processes) taking turns count one counter.
pub async fn handles_share_one_counter(handles: Handles<'_>) {
    let (a, b) = (handles(), handles());
    for want in 1..=6 {
        let store = if want % 2 == 0 { &a } else { &b };
        assert_eq!(store.next("turns", 100).await.expect("next"), want, "turn {want}");
    }
}

/// Eight tasks on four handles count at once: no value is returned twice, and every value is
/// within `1..=max`.
pub async fn concurrent_increments_never_share_a_value(handles: Handles<'_>) {
    let next = |store: Arc<dyn CounterStore>| async move {
        store.next("concurrent", 1_000).await.expect("next")
    };
    let mut seen = HashSet::new();
    for values in eight_tasks_on_four_handles(handles, 25, next).await {
        for pair in values.windows(2) {
            assert!(pair[0] < pair[1], "one caller's values increase: {pair:?}");
        }
        for value in values {
            assert!((1..=1_000).contains(&value), "value {value} out of 1..=1000");
            assert!(seen.insert(value), "value {value} was returned twice");
        }
    }
    assert_eq!(seen.len(), 8 * 25);
}

/// A value once returned stays counted after every handle is gone (a restart).
pub async fn values_outlive_their_handle(handles: Handles<'_>) {
    let store = handles();
    for _ in 0..3 {
        store.next("durable", 100).await.expect("next");
    }
    drop(store);
    assert_eq!(handles().next("durable", 100).await.expect("after a restart"), 4);
}

/// Bad names and maximums are refused, and refusing one counts nothing.
pub async fn invalid_requests_are_refused(handles: Handles<'_>) {
    let store = handles();
    assert_eq!(store.next("valid", 10).await.expect("next"), 1);
    let long = "x".repeat(65);
    let bad = [("", 10), ("Bad Name", 10), ("a/b", 10), ("..", 10), (long.as_str(), 10)];
    let maximums = [("valid", MAX_SEGMENT_ID + 1), ("valid", u64::MAX)];
    for (name, max) in bad.into_iter().chain(maximums) {
        match store.next(name, max).await {
            Err(Error::InvalidRequest(_)) => {}
            other => panic!("name {name:?} max {max} must be refused, got {other:?}"),
        }
    }
    assert_eq!(store.next("valid", 10).await.expect("next"), 2, "a refused request counts nothing");
}

/// A value chosen by the caller is taken once: again, below the counter, or after `next`
/// counted past it, it is refused with the counter's value, and a refusal writes nothing.
/// `next` goes on above a taken value; bad values are refused.
pub async fn chosen_values_are_taken_once(handles: Handles<'_>) {
    let (a, b) = (handles(), handles());
    assert_eq!(a.take("chosen", 5, 100).await.expect("a fresh counter"), 5);
    for (store, value) in [(&a, 5), (&b, 5), (&b, 3)] {
        match store.take("chosen", value, 100).await {
            Err(Error::Taken { value: v, current: 5, .. }) if v == value => {}
            other => panic!("{value} must be refused at 5, got {other:?}"),
        }
    }
    assert_eq!(b.next("chosen", 100).await.expect("next"), 6, "a refusal writes nothing");
    match a.take("chosen", 6, 100).await {
        Err(Error::Taken { current: 6, .. }) => {}
        other => panic!("a value `next` returned must be refused, got {other:?}"),
    }
    assert_eq!(b.take("chosen", 40, 100).await.expect("above the counter"), 40);
    assert_eq!(a.next("chosen", 100).await.expect("next"), 41);
    for (value, max) in [(0, 100), (101, 100), (1, MAX_SEGMENT_ID + 1)] {
        match a.take("chosen", value, max).await {
            Err(Error::InvalidRequest(_)) => {}
            other => panic!("value {value} of max {max} must be refused, got {other:?}"),
        }
    }
    assert_eq!(a.next("chosen", 100).await.expect("next"), 42, "a refused request counts nothing");
}

/// Eight tasks on four handles each try to take the values 1 to 25 at once: no value is
/// taken twice, and each task's values increase.
pub async fn concurrent_takes_never_share_a_value(handles: Handles<'_>) {
    let take = |store: Arc<dyn CounterStore>| async move {
        let mut got = Vec::new();
        for value in 1..=25 {
            match store.take("race", value, 100).await {
                Ok(taken) => got.push(taken),
                Err(Error::Taken { .. }) => {}
                Err(e) => panic!("take {value}: {e}"),
            }
        }
        got
    };
    let mut seen = HashSet::new();
    for values in eight_tasks_on_four_handles(handles, 1, take).await.into_iter().flatten() {
        for pair in values.windows(2) {
            assert!(pair[0] < pair[1], "one caller's values increase: {pair:?}");
        }
        for value in values {
            assert!(seen.insert(value), "value {value} was taken twice");
        }
    }
    assert!(!seen.is_empty(), "some value was taken");
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::{MemoryStore, conformance::panic_message};

    /// A broken backend for the negative control: counters in memory that wrap to 1 after
    /// their maximum, as a modulo or an unchecked reset would.
    #[derive(Debug, Default)]
    struct Wrapping {
        values: Mutex<std::collections::HashMap<String, u64>>,
    }

    #[async_trait::async_trait]
    impl CounterStore for Wrapping {
        fn name(&self) -> &'static str {
            "wrapping"
        }

        async fn next(&self, name: &str, max: u64) -> Result<u64, Error> {
            crate::counter::check_counter_request(name, max)?;
            let mut values = self.values.lock().expect("lock");
            let value = values.entry(name.to_owned()).or_insert(0);
            *value = if *value >= max { 1 } else { *value + 1 };
            Ok(*value)
        }

        /// Broken too: sets the value whatever the counter holds (last writer wins).
        async fn take(&self, name: &str, value: u64, max: u64) -> Result<u64, Error> {
            crate::counter::check_take_request(name, value, max)?;
            self.values.lock().expect("lock").insert(name.to_owned(), value);
            Ok(value)
        }
    }

    #[tokio::test]
    async fn the_memory_store_passes() {
        let store = MemoryStore::new();
        let handles = move || Arc::new(store.clone()) as Arc<dyn CounterStore>;
        run_all(&handles).await;
    }

    /// Negative control: a store that wraps at the maximum is caught by the maximum rule.
    #[tokio::test]
    async fn a_wrapping_store_is_caught() {
        let store = Arc::new(Wrapping::default());
        let handles: &'static (dyn Fn() -> Arc<dyn CounterStore> + Sync) =
            Box::leak(Box::new(move || Arc::clone(&store) as Arc<dyn CounterStore>));
        let message = panic_message(counters_stop_at_their_maximum_and_never_wrap(handles)).await;
        assert!(message.contains("must stay exhausted"), "{message}");
    }

    /// Negative control: a store whose `take` overwrites is caught by the take rule.
    #[tokio::test]
    async fn an_overwriting_take_is_caught() {
        let store = Arc::new(Wrapping::default());
        let handles: &'static (dyn Fn() -> Arc<dyn CounterStore> + Sync) =
            Box::leak(Box::new(move || Arc::clone(&store) as Arc<dyn CounterStore>));
        let message = panic_message(chosen_values_are_taken_once(handles)).await;
        assert!(message.contains("must be refused at 5"), "{message}");
        let store = Arc::new(Wrapping::default());
        let handles: &'static (dyn Fn() -> Arc<dyn CounterStore> + Sync) =
            Box::leak(Box::new(move || Arc::clone(&store) as Arc<dyn CounterStore>));
        let message = panic_message(concurrent_takes_never_share_a_value(handles)).await;
        assert!(message.contains("was taken twice"), "{message}");
    }

    /// The same store, below its maximums, passes the other rules: the control fails because
    /// of the wrap, not because of the test store.
    #[tokio::test]
    async fn the_wrapping_store_passes_below_its_maximum() {
        let store = Arc::new(Wrapping::default());
        let handles = move || Arc::clone(&store) as Arc<dyn CounterStore>;
        counters_count_up_from_one(&handles).await;
        concurrent_increments_never_share_a_value(&handles).await;
    }
}
