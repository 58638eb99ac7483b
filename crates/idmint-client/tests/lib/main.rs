//! Integration tests of `idmint-client`: one test binary, one module per behaviour, against
//! in-process idmint servers (and small fake servers where a real one cannot misbehave on
//! demand). No test sleeps: the only waits are bounded timeouts that the client itself runs.
//!
//! | module | what it checks |
//! | --- | --- |
//! | `binary` | batches are read in binary (big-endian, count and width headers checked), JSON from older servers, anything else refused |
//! | `failover` | three servers, one stopped mid-run: the client keeps serving, no duplicates |
//! | `retries` | 503 then healthy is retried; 4xx is not; out-of-order batches are refused |
//! | `timeouts` | an endpoint that accepts but never answers is left within the timeout |
//! | `prefetch` | `next()` is served from memory; unique, ordered IDs; `batch`, `close` |
//! | `shard_keys` | `next_with_shard_key` and `batch_with_shard_key`: the key in every ID, refusals not retried |
//! | `blocking` | the blocking facade from a plain thread |
//! | `builder` | settings are checked |
//! | `tls` | `https://` through a TLS front, with a private root; refused without it (feature `rustls`) |

mod binary;
#[cfg(feature = "blocking")]
mod blocking;
mod builder;
mod failover;
mod prefetch;
mod retries;
mod shard_keys;
mod support;
mod timeouts;
#[cfg(feature = "rustls")]
mod tls;
