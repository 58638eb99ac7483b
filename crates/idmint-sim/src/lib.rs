//! `idmint-sim`: a deterministic simulation of idmint's fleet protocol (RELIABILITY.md, T22).
//!
//! Real [`idmint_server::Server`]s, with their real generators, window task and claim-loss
//! handling, run on simulated machines against [`SimEtcd`], a model of etcd's leases,
//! revisions and compare-and-swap mark writes reached through the real
//! [`idmint_coord::Coordinator`] trait ([`SimCoordinator`]). Clients record every
//! acknowledged batch; a nemesis partitions machines from etcd or from clients (refused or
//! black-holed), pauses them past the lease TTL, steps their wall clocks back and forth and
//! crashes or restarts them. Everything runs in tokio's paused time on one thread, and every
//! random choice comes from one seed ([`Rng`]), so a seed replays the same run.
//!
//! After each run, [`run_seed`]'s [`Report`] says whether the invariants held: no ID
//! acknowledged twice, IDs increasing per client, server process and generator, and every
//! ID's time at or below a mark its issuer stored while it held the claim.
//! `EtcdOptions::fence = false` removes the fence (the negative control).
//!
//! Nothing here changes the protocol's code: the simulation uses the server's public API only.
//!
//! # Example
//!
//! ```
//! use idmint_sim::{SimOptions, run_seed};
//!
//! let options = SimOptions { duration: std::time::Duration::from_secs(3), ..SimOptions::default() };
//! let report = run_seed(42, &options);
//! assert!(report.ok(), "{report}");
//! // The seed fixes the faults; the whole history too when built with `--cfg tokio_unstable`.
//! assert_eq!(report.nemeses, run_seed(42, &options).nemeses);
//! ```

mod check;
mod clock;
mod etcd;
mod fleet;
mod net;
mod rng;
mod world;

pub use crate::{
    check::{Ack, Report},
    clock::SimClock,
    etcd::{ClaimStats, EtcdOptions, MarkWrite, SimCoordinator, SimEtcd},
    fleet::{FleetOptions, FleetReport, quantile, run_fleet},
    net::{Link, Machine, MachineState},
    rng::Rng,
    world::{NAMESPACE, SimOptions, run_seed},
};
