//! The store of source `counters`: DecimalIds whose launch and generator IDs come from
//! persistent counters (`DecimalIds`).

use idmint_coord::{DecimalIdIssuer, DecimalIds};

use crate::{
    Backends, Error,
    issuer::{BoxFuture, IdSink, Shared, store::Store},
};

/// A namespace's DecimalId issuer.
#[derive(Debug)]
pub(crate) struct Counters {
    issuer: DecimalIdIssuer,
    backend: &'static str,
}

impl Store for Counters {
    /// Takes this start's launch ID and a generator ID from the counters.
    fn start<'a>(ns: &'a Shared, backends: &'a Backends) -> BoxFuture<'a, Result<Self, Error>> {
        Box::pin(async move {
            let counters = backends
                .counters
                .clone()
                .ok_or_else(|| crate::backends::missing_store(&ns.name, ns.source))?;
            let backend = counters.name();
            let (launch, generator) = ns.config.counter_names();
            let options = ns.config.decimal_options();
            let issuer = DecimalIds::start(counters, &launch, &generator, options).await?;
            tracing::info!(namespace = %ns.name, launch_id = issuer.launch_id(), generator_id = issuer.generator_id(), counters = backend, "decimal-id launch recorded");
            Ok(Counters { issuer, backend })
        })
    }

    fn backend(&self) -> &'static str {
        self.backend
    }

    fn generator_id(&self) -> Option<u64> {
        Some(self.issuer.generator_id())
    }

    fn fill<'a>(&'a self, count: u64, ids: &'a mut dyn IdSink) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            // A DecimalId batch comes from one generator ID. When the issuer switches to the
            // next generator ID during a request (its counter part ran out), the IDs taken from
            // the old one are larger than the new one's: they are dropped (a gap) and the
            // request is served from the new generator ID alone, which has room for it
            // (`max_counter` is at least `max_batch`).
            let start = ids.len();
            let mut left = count;
            let mut last = None;
            while left > 0 {
                let chunk: Vec<u64> =
                    self.issuer.next_batch(left).await?.map(|id| id.to_raw()).collect();
                if let (Some(last), Some(&first)) = (last, chunk.first())
                    && first <= last
                {
                    ids.truncate(start);
                    left = count;
                }
                left -= chunk.len() as u64;
                last = chunk.last().copied();
                ids.take_u64(&mut chunk.into_iter());
            }
            Ok(())
        })
    }
}
