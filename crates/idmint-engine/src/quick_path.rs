//! [`QuickPath`]: the one-ID path of one namespace, held, so that a caller that issues from
//! that namespace often reaches its generator without a lookup or an indirect call
//! (DESIGN.md, "How does a call for one ID stay cheap?").

use std::sync::Arc;

use crate::{Quick, clock::Clocks, issuer::generator::GeneratorIssuer};

/// A namespace's one-ID path, from [`Engine::quick_path`](crate::Engine::quick_path): the
/// answer of [`Engine::try_issue_one`](crate::Engine::try_issue_one) for that namespace, with
/// its generator issuer and the engine's clocks held (no search of the namespaces, no
/// `dyn Issuer`). It holds no claim of its own: after the engine's shutdown it answers
/// [`Quick::Slow`], and the full path says why.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::MemoryCoordinator;
/// use idmint_core::SystemClock;
/// use idmint_engine::{Engine, Quick, ServerConfig};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
/// let quick = engine.quick_path(engine.namespace("default")?).expect("a generator namespace");
/// assert!(matches!(quick.try_issue_one(), Quick::Done(_) | Quick::NextTick));
/// engine.shutdown().await?;
/// assert!(matches!(quick.try_issue_one(), Quick::Slow));
/// # Ok::<(), idmint_engine::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct QuickPath {
    issuer: Arc<GeneratorIssuer>,
    clocks: Arc<Clocks>,
}

impl std::fmt::Debug for QuickPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuickPath").field("clocks", &self.clocks).finish_non_exhaustive()
    }
}

impl QuickPath {
    pub(crate) fn new(issuer: Arc<GeneratorIssuer>, clocks: Arc<Clocks>) -> Self {
        QuickPath { issuer, clocks }
    }

    /// One ID at once, as [`Engine::try_issue_one`](crate::Engine::try_issue_one) gives it for
    /// this namespace: [`Quick::Done`] with the ID, [`Quick::NextTick`] when the tick's
    /// sequence is used up, or [`Quick::Slow`] for the full path. Inlined whole into the
    /// caller: one frame from the caller to the generator's compare-and-swap.
    ///
    /// # Example
    ///
    /// As [`QuickPath`]'s.
    #[inline(always)]
    pub fn try_issue_one(&self) -> Quick {
        self.issuer.try_issue_one_inline(&self.clocks, true)
    }
}
