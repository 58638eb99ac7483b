//! The store of source `redis`: icicle IDs made by icicle's Lua script on Redis nodes
//! (`IcicleClient`, feature `redis`). Without the feature the source cannot start.

#[cfg(feature = "redis")]
use idmint_coord::IcicleClient;

use crate::{
    Backends, Error,
    issuer::{BoxFuture, IdSink, Shared, store::Store},
};

/// A namespace's icicle client.
#[derive(Debug)]
pub(crate) struct Redis {
    #[cfg(feature = "redis")]
    client: IcicleClient,
}

impl Store for Redis {
    /// Makes one ID, so that a start with no Redis node answering fails.
    fn start<'a>(ns: &'a Shared, backends: &'a Backends) -> BoxFuture<'a, Result<Self, Error>> {
        Box::pin(async move {
            #[cfg(feature = "redis")]
            {
                let client = backends
                    .redis
                    .clone()
                    .ok_or_else(|| crate::backends::missing_store(&ns.name, ns.source))?;
                client.generate().await?;
                Ok(Redis { client })
            }
            #[cfg(not(feature = "redis"))]
            {
                let _ = backends;
                Err(crate::backends::missing_store(&ns.name, ns.source))
            }
        })
    }

    fn backend(&self) -> &'static str {
        "redis"
    }

    #[cfg(feature = "redis")]
    fn fill<'a>(&'a self, count: u64, ids: &'a mut dyn IdSink) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            // One Redis call makes at most 4,094 IDs, and fewer when the node's sequence rolls
            // over (the client discards a rolling call's range); calls go round-robin over the nodes, each with its own clock, so the IDs are
            // sorted before they leave.
            let client = &self.client;
            let (want, capacity) = crate::issuer::count_len(count);
            let mut got: Vec<u64> = Vec::with_capacity(capacity);
            while got.len() < want {
                let n = (want - got.len()).min(IcicleClient::MAX_BATCH);
                got.extend(client.generate_batch(n).await?.into_iter().map(|id| id.to_raw()));
            }
            got.sort_unstable();
            if let Some(pair) = got.windows(2).find(|w| w[0] == w[1]) {
                // Two nodes with one shard ID, or a node that lost its sequence: refuse rather
                // than hand out a duplicate.
                return Err(Error::Coord(idmint_coord::Error::Corrupt {
                    path: format!("icicle nodes {}", client.nodes().join(",")),
                    reason: format!("id {} was generated twice in one batch", pair[0]),
                }));
            }
            ids.take_u64(&mut got.into_iter());
            Ok(())
        })
    }

    #[cfg(not(feature = "redis"))]
    fn fill<'a>(
        &'a self,
        _count: u64,
        _ids: &'a mut dyn IdSink,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async { Err(Error::Config("source `redis` needs feature `redis`".to_owned())) })
    }
}

/// Whether a store's failure at start may clear up by itself: a Redis node down.
#[cfg(feature = "redis")]
pub(crate) fn may_answer_later(error: &Error) -> bool {
    matches!(error, Error::Coord(idmint_coord::Error::AttemptsExhausted { .. }))
}

/// Whether a store's failure at start may clear up by itself: never, without Redis.
#[cfg(not(feature = "redis"))]
pub(crate) fn may_answer_later(_error: &Error) -> bool {
    false
}
