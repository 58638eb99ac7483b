//! The store of source `segment`: plain increasing integers from ranges of a segment store
//! (Postgres, or the file store), handed out by a `SegmentAllocator`.

use idmint_coord::SegmentAllocator;

use crate::{
    Backends, Error,
    issuer::{BoxFuture, IdSink, Shared, store::Store},
};

/// A namespace's segment allocator.
#[derive(Debug)]
pub(crate) struct Segment {
    allocator: SegmentAllocator,
    backend: &'static str,
}

impl Store for Segment {
    /// The allocator fetches nothing yet.
    fn start<'a>(ns: &'a Shared, backends: &'a Backends) -> BoxFuture<'a, Result<Self, Error>> {
        Box::pin(async move {
            let store = backends
                .segments
                .clone()
                .ok_or_else(|| crate::backends::missing_store(&ns.name, ns.source))?;
            let backend = store.name();
            let allocator = SegmentAllocator::new(store, &ns.name, ns.config.segment_options())
                .map_err(|e| Error::Config(format!("namespace `{}`: {e}", ns.name)))?;
            Ok(Segment { allocator, backend })
        })
    }

    fn backend(&self) -> &'static str {
        self.backend
    }

    fn fill<'a>(&'a self, count: u64, ids: &'a mut dyn IdSink) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let mut left = count;
            while left > 0 {
                let mut range = self.allocator.next_batch(left).await?;
                left -= range.end - range.start;
                ids.take_u64(&mut range);
            }
            Ok(())
        })
    }
}
