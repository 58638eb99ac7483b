//! The hidden `--unsafe-no-…` flags of `idmint serve` (and the clock guard's of `idmint gen`
//! on a store): negative controls that switch one protection off, so that the tests and the
//! chaos harness can show they would catch what it lets through. They exist only in a binary
//! compiled with `--cfg idmint_negative_controls`, which `build.rs` sets when the build's
//! environment has `IDMINT_NEGATIVE_CONTROLS=1` (`scripts/test-all` and the unsafe binary of
//! `scripts/chaos`), never through a cargo feature, so no dependent and no `--all-features`
//! build has them (DESIGN.md, "Negative controls behind a cfg"); those of a backend also need
//! its feature. `scripts/no-hidden-controls` checks that
//! a binary has none of them. This file declares and checks them; `serve.rs` passes each to its
//! backend under the same cfg.

use anyhow::ensure;

/// The flags (each hidden, each present only under the cfg and, for a backend's, its feature).
#[derive(Debug, Default, clap::Args)]
pub(crate) struct ControlArgs {
    /// TESTS ONLY (cfg `idmint_negative_controls`, feature `etcd`): the etcd coordinator without
    /// its fence, so that tests can show they catch the duplicates it lets through. Never use it
    /// to serve.
    #[cfg(all(idmint_negative_controls, feature = "etcd"))]
    #[arg(long, hide = true)]
    unsafe_no_fence: bool,
    /// TESTS ONLY (cfg `idmint_negative_controls`): claims of the embedded store ignore stored
    /// marks, the chaos harness's negative control. Never use it to serve.
    #[cfg(idmint_negative_controls)]
    #[arg(long, hide = true)]
    unsafe_no_durable_mark: bool,
    /// TESTS ONLY (cfg `idmint_negative_controls`): logical time follows the wall clock back,
    /// the chaos harness's negative control. Never use it to serve.
    #[cfg(idmint_negative_controls)]
    #[arg(long, hide = true)]
    unsafe_no_clock_guard: bool,
    /// TESTS ONLY (cfg `idmint_negative_controls`, feature `etcd`): the etcd coordinator trusts
    /// marks on any cluster, e.g. one restored from an old snapshot. Never use it to serve.
    #[cfg(all(idmint_negative_controls, feature = "etcd"))]
    #[arg(long, hide = true)]
    unsafe_no_restore_guard: bool,
    /// TESTS ONLY (cfg `idmint_negative_controls`, feature `redis`): the icicle client's failover
    /// guard accepts every batch, the chaos harness's negative control. Never use it to serve.
    #[cfg(all(idmint_negative_controls, feature = "redis"))]
    #[arg(long, hide = true)]
    unsafe_no_redis_guard: bool,
    /// TESTS ONLY (cfg `idmint_negative_controls`, feature `redis`): the icicle client's failover
    /// guard ignores the mark shared through Redis and waits for no replica, so each server
    /// protects only the milliseconds it saw (the chaos harness's negative control). Never use
    /// it to serve.
    #[cfg(all(idmint_negative_controls, feature = "redis"))]
    #[arg(long, hide = true)]
    unsafe_no_shared_redis_guard: bool,
    /// TESTS ONLY (cfg `idmint_negative_controls`, feature `postgres`): the Postgres store raises
    /// nothing when it finds a promoted standby, the chaos harness's negative control. Never use
    /// it to serve.
    #[cfg(all(idmint_negative_controls, feature = "postgres"))]
    #[arg(long, hide = true)]
    unsafe_no_promotion_bump: bool,
    /// TESTS ONLY (cfg `idmint_negative_controls`, feature `postgres`): the Postgres coordinator
    /// without its fence (claims skip the exclusive check, mark writes the epoch compare). Never
    /// use it to serve.
    #[cfg(all(idmint_negative_controls, feature = "postgres"))]
    #[arg(long, hide = true)]
    unsafe_no_pg_fence: bool,
}

/// Which protections are off (all on in every build without `idmint_negative_controls`).
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
    /// The icicle guard's mark shared through Redis.
    pub(crate) no_shared_redis_guard: bool,
    /// The Postgres store's post-promotion bump.
    pub(crate) no_promotion_bump: bool,
    /// The Postgres coordinator's fence.
    pub(crate) no_pg_fence: bool,
}

impl ControlArgs {
    /// The controls asked for, checked against the store (`etcd`: whether it is etcd), with
    /// a loud error line for each. The clock guard is process-wide and switched off here.
    pub(crate) fn apply(&self, etcd: bool) -> anyhow::Result<Controls> {
        #[cfg_attr(not(idmint_negative_controls), allow(unused_mut))]
        let mut controls = Controls::default();
        #[cfg(all(idmint_negative_controls, feature = "etcd"))]
        {
            controls.no_fence = self.unsafe_no_fence;
        }
        #[cfg(idmint_negative_controls)]
        {
            controls.no_durable_mark = self.unsafe_no_durable_mark;
        }
        #[cfg(all(idmint_negative_controls, feature = "etcd"))]
        {
            controls.no_restore_guard = self.unsafe_no_restore_guard;
        }
        #[cfg(all(idmint_negative_controls, feature = "redis"))]
        {
            controls.no_redis_guard = self.unsafe_no_redis_guard;
            controls.no_shared_redis_guard = self.unsafe_no_shared_redis_guard;
        }
        #[cfg(all(idmint_negative_controls, feature = "postgres"))]
        {
            controls.no_promotion_bump = self.unsafe_no_promotion_bump;
        }
        #[cfg(all(idmint_negative_controls, feature = "postgres"))]
        {
            controls.no_pg_fence = self.unsafe_no_pg_fence;
        }
        ensure!(!controls.no_fence || etcd, "--unsafe-no-fence needs --etcd");
        ensure!(!controls.no_restore_guard || etcd, "--unsafe-no-restore-guard needs --etcd");
        ensure!(
            !controls.no_durable_mark || !etcd,
            "--unsafe-no-durable-mark is for the embedded store"
        );
        #[cfg(idmint_negative_controls)]
        if self.unsafe_no_clock_guard {
            tracing::error!("{NO_CLOCK_GUARD}");
            idmint_core::disable_clock_guard_for_tests();
        }
        Ok(controls)
    }
}

/// The line said when the clock guard is switched off.
#[cfg(idmint_negative_controls)]
const NO_CLOCK_GUARD: &str = "UNSAFE: --unsafe-no-clock-guard: time follows the clock back; a negative control for tests only";

/// The hidden flag of `idmint gen` on a store: its embedded minter issues under the same
/// clock guard as `idmint serve`, switched off by the same flag (the chaos harness's
/// `embedded-fleet` control).
#[derive(Debug, Default, clap::Args)]
pub(crate) struct GenControlArgs {
    /// TESTS ONLY (cfg `idmint_negative_controls`): logical time follows the wall clock back,
    /// the chaos harness's negative control. Never use it to mint.
    #[cfg(idmint_negative_controls)]
    #[arg(long, hide = true)]
    unsafe_no_clock_guard: bool,
}

impl GenControlArgs {
    /// Switches the clock guard off when asked, with a loud line on stderr (`gen` has no log).
    pub(crate) fn apply(&self) {
        #[cfg(idmint_negative_controls)]
        if self.unsafe_no_clock_guard {
            #[allow(clippy::print_stderr, reason = "the one line that must not be missed")]
            {
                eprintln!("{NO_CLOCK_GUARD}");
            }
            idmint_core::disable_clock_guard_for_tests();
        }
    }
}
