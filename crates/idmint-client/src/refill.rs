//! The refill task: keeps the prefetch buffer above its low-water mark with up to `pipeline`
//! fetches in flight, and hands their IDs to the buffer in order through the sequencer.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::{error::ErrorKind, fetch::Shared, sequencer::Sequencer};

/// The refill task: when the buffer asks, it sends refills until `pipeline` are in flight;
/// as they come back, the sequencer says which IDs may be handed out, in order, and those are
/// delivered. Ends when `stop` is cancelled (the last client clone was dropped); the requests
/// in flight are then aborted.
pub(crate) async fn refill(shared: Arc<Shared>, stop: CancellationToken) {
    let mut sequencer = Sequencer::new(shared.endpoints.len());
    let mut fetches = tokio::task::JoinSet::new();
    let mut tickets = std::collections::HashMap::new();
    let mut wanted = std::pin::pin!(shared.buffer.wanted());
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            () = &mut wanted => wanted.set(shared.buffer.wanted()),
            Some(done) = fetches.join_next_with_id() => {
                let (id, result) = match done {
                    Ok((id, result)) => (id, result),
                    Err(failed) => {
                        let message = format!("a refill task ended: {failed}");
                        (failed.id(), Err(ErrorKind::Internal(message).into()))
                    }
                };
                let Some(ticket) = tickets.remove(&id) else { continue };
                let (arrival, error) = match result {
                    Ok(arrival) => (Some(arrival), None),
                    Err(error) => (None, Some(error)),
                };
                let released = sequencer.arrive(ticket, arrival);
                for ids in released.batches {
                    shared.buffer.deliver(Ok(ids));
                }
                if let Some((endpoint, id)) = released.repeated {
                    // Two batches of one endpoint held the same ID: handed out once, reported.
                    let endpoint = shared.endpoints[endpoint].base.clone();
                    let error = ErrorKind::NotMonotonic { endpoint, previous: id, next: id };
                    shared.buffer.deliver(Err(error.into()));
                }
                if let Some(error) = error {
                    shared.buffer.deliver(Err(error));
                }
            }
        }
        if shared.buffer.is_wanted() {
            // At most `pipeline` refills in flight, and no more than `pipeline + 1` batches'
            // worth waiting (fetched ahead, held back by the sequencer, or on their way).
            let limit = (shared.pipeline + 1) * shared.batch_size;
            let waiting = |s: &Sequencer| {
                shared.buffer.ahead() + s.held() + s.in_flight() * shared.batch_size
            };
            while sequencer.in_flight() < shared.pipeline && waiting(&sequencer) < limit {
                let ticket = sequencer.send();
                let shared = Arc::clone(&shared);
                let task =
                    fetches.spawn(async move { shared.fetch(shared.batch_size, true, None).await });
                tickets.insert(task.id(), ticket);
            }
        }
    }
    fetches.abort_all();
    shared.buffer.close();
}
