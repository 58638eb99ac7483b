//! The integration tests of `idmint`, one binary with a module per area (the fork test is a
//! binary of its own: it forks, so no other test's thread may run beside it).

mod etcd;
mod minter;
mod postgres;
mod processes;
