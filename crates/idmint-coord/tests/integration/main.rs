//! The integration tests of idmint-coord, in one binary (one link of the dependency tree
//! instead of one per file): each module is one backend or concern, against real etcd,
//! Postgres and Redis servers started on free loopback ports by `idmint_coord::testing`. A new
//! area is a new file here and a `mod` line below; a test is named `<module>::<test>`
//! (`cargo test -p idmint-coord --all-features --test integration etcd::`).
//!
//! The multi-process segment tests run this binary again as child processes, naming the test
//! `segments::worker_process_entry`. The etcd member faults (`etcd_failover`) are `#[ignore]`d
//! and run on demand, one at a time (`-- --ignored --test-threads=1 etcd_failover`).

mod common;

mod counters;
mod datadir;
mod etcd;
mod etcd_failover;
mod etcd_restore;
mod icicle;
mod postgres_coordinator;
mod promotion;
mod segments;
mod takeover;
