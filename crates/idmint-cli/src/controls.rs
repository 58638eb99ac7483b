//! The hidden `--unsafe-no-…` flags of `idmint serve`: negative controls that switch one
//! protection off, so that the tests and the chaos harness can show they would catch what it
//! lets through. Each exists only in a build with its test-only cargo feature
//! (`test-no-fence`, `test-no-durable-mark`, `test-no-clock-guard`, `test-no-restore-guard`,
//! `test-no-redis-guard`, `test-no-promotion-bump`, `test-no-pg-fence`),
//! which no build that serves enables. This file declares and checks them; `serve.rs` passes
//! each to its backend under the same feature.

use anyhow::ensure;

/// The flags (each hidden, each present only with its feature).
#[derive(Debug, Default, clap::Args)]
pub(crate) struct ControlArgs {
    /// TESTS ONLY (feature `test-no-fence`): the etcd coordinator without its fence, so that
    /// tests can show they catch the duplicates it lets through. Never use it to serve.
    #[cfg(feature = "test-no-fence")]
    #[arg(long, hide = true)]
    unsafe_no_fence: bool,
    /// TESTS ONLY (feature `test-no-durable-mark`): claims of the embedded store ignore stored
    /// marks, the chaos harness's negative control. Never use it to serve.
    #[cfg(feature = "test-no-durable-mark")]
    #[arg(long, hide = true)]
    unsafe_no_durable_mark: bool,
    /// TESTS ONLY (feature `test-no-clock-guard`): logical time follows the wall clock back,
    /// the chaos harness's negative control. Never use it to serve.
    #[cfg(feature = "test-no-clock-guard")]
    #[arg(long, hide = true)]
    unsafe_no_clock_guard: bool,
    /// TESTS ONLY (feature `test-no-restore-guard`): the etcd coordinator trusts marks on any
    /// cluster, e.g. one restored from an old snapshot. Never use it to serve.
    #[cfg(feature = "test-no-restore-guard")]
    #[arg(long, hide = true)]
    unsafe_no_restore_guard: bool,
    /// TESTS ONLY (feature `test-no-redis-guard`): the icicle client's failover guard accepts
    /// every batch, the chaos harness's negative control. Never use it to serve.
    #[cfg(feature = "test-no-redis-guard")]
    #[arg(long, hide = true)]
    unsafe_no_redis_guard: bool,
    /// TESTS ONLY (feature `test-no-promotion-bump`): the Postgres store raises nothing when it
    /// finds a promoted standby, the chaos harness's negative control. Never use it to serve.
    #[cfg(feature = "test-no-promotion-bump")]
    #[arg(long, hide = true)]
    unsafe_no_promotion_bump: bool,
    /// TESTS ONLY (feature `test-no-pg-fence`): the Postgres coordinator without its fence
    /// (claims skip the exclusive check, mark writes the epoch compare). Never use it to serve.
    #[cfg(feature = "test-no-pg-fence")]
    #[arg(long, hide = true)]
    unsafe_no_pg_fence: bool,
}

/// Which protections are off (all on in every build without the test features).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Controls {
    /// The etcd fence.
    pub(crate) no_fence: bool,
    /// The embedded store's durable marks.
    pub(crate) no_durable_mark: bool,
    /// The etcd restore guard.
    pub(crate) no_restore_guard: bool,
    /// The icicle client's failover guard.
    pub(crate) no_redis_guard: bool,
    /// The Postgres store's post-promotion bump.
    pub(crate) no_promotion_bump: bool,
    /// The Postgres coordinator's fence.
    pub(crate) no_pg_fence: bool,
}

impl ControlArgs {
    /// The controls asked for, checked against the store (`etcd`: whether it is etcd), with
    /// a loud error line for each. The clock guard is process-wide and switched off here.
    pub(crate) fn apply(&self, etcd: bool) -> anyhow::Result<Controls> {
        #[cfg_attr(
            not(any(
                feature = "test-no-fence",
                feature = "test-no-durable-mark",
                feature = "test-no-restore-guard",
                feature = "test-no-redis-guard",
                feature = "test-no-promotion-bump",
                feature = "test-no-pg-fence"
            )),
            allow(unused_mut)
        )]
        let mut controls = Controls::default();
        #[cfg(feature = "test-no-fence")]
        {
            controls.no_fence = self.unsafe_no_fence;
        }
        #[cfg(feature = "test-no-durable-mark")]
        {
            controls.no_durable_mark = self.unsafe_no_durable_mark;
        }
        #[cfg(feature = "test-no-restore-guard")]
        {
            controls.no_restore_guard = self.unsafe_no_restore_guard;
        }
        #[cfg(feature = "test-no-redis-guard")]
        {
            controls.no_redis_guard = self.unsafe_no_redis_guard;
        }
        #[cfg(feature = "test-no-promotion-bump")]
        {
            controls.no_promotion_bump = self.unsafe_no_promotion_bump;
        }
        #[cfg(feature = "test-no-pg-fence")]
        {
            controls.no_pg_fence = self.unsafe_no_pg_fence;
        }
        ensure!(!controls.no_fence || etcd, "--unsafe-no-fence needs --etcd");
        ensure!(!controls.no_restore_guard || etcd, "--unsafe-no-restore-guard needs --etcd");
        ensure!(
            !controls.no_durable_mark || !etcd,
            "--unsafe-no-durable-mark is for the embedded store"
        );
        #[cfg(feature = "test-no-clock-guard")]
        if self.unsafe_no_clock_guard {
            tracing::error!(
                "UNSAFE: --unsafe-no-clock-guard: time follows the clock back; a negative control for tests only"
            );
            idmint_core::disable_clock_guard_for_tests();
        }
        Ok(controls)
    }
}
