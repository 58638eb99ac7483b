//! icicle-compatible IDs from Redis nodes (feature `redis`): intenthq's icicle v2 Lua script,
//! byte for byte, run with `EVALSHA` on a round-robin of nodes (or on the primary Redis
//! Sentinel names), plus a failover guard that icicle lacks. It does not claim generator IDs and does not implement [`Coordinator`]: each
//! Redis node is its own generator, identified by the logical shard ID an operator stored in
//! it.
//!
//! # How it works
//!
//! Each node holds three keys: `icicle-generator-logical-shard-id` (set once by an operator,
//! see [`IcicleClient::set_shard`]), `icicle-generator-sequence` (a rolling counter) and
//! `icicle-generator-lock` (set for 1 ms when the sequence rolls over). The script reserves a
//! range of the sequence and returns it with the shard and the node's `TIME`; the client packs
//! one [`Icicle`] per sequence value. Java icicle clients and this one share the script (same
//! SHA1) and the keys, so they can use the same nodes side by side.
//!
//! Why it is best-effort, how the client's failover guard narrows the hazard and what it
//! cannot cover are documented on [`IcicleClient`], the public face of this module; the
//! guard's bookkeeping is in `guard`, reply parsing in `reply`.
//!
//! [`Coordinator`]: crate::Coordinator

mod client;
mod guard;
mod reply;
mod rollover;

use idmint_core::Icicle;

pub use self::client::{IcicleClient, IcicleOptions};
use crate::Error;

/// icicle v2.0.1's `icicle-core/src/main/resources/id-generation.lua` as icicle's Java client
/// sends it. The file ends with a newline, which the client drops when it reads the resource
/// line by line and joins the lines with `\n`; these 2,769 bytes are the file without that
/// newline, so their SHA1 is [`SCRIPT_SHA1`] (`594c06c1…`, the SHA1 reported for the joined
/// lines in icicle's script), the one `SCRIPT LOAD` returns and Java clients `EVALSHA`,
/// and both share the script on the same nodes. The file's own 2,770 bytes, with the newline,
/// hash to `4accfeb94a7dbef408149b4af1ddd530b859f190` (git blob `ca5c18bc…`); idmint never
/// sends that form.
///
/// Origin: <https://github.com/intenthq/icicle>, tag 2.0.1 (commit 64f436a), file
/// `icicle-core/src/main/resources/id-generation.lua`. Kept unchanged in its own file because
/// its hash is part of the protocol. Its licence:
///
/// The MIT License (MIT)
///
/// Copyright (c) 2015 - 2017 Intent HQ
///
/// Permission is hereby granted, free of charge, to any person obtaining a copy
/// of this software and associated documentation files (the "Software"), to deal
/// in the Software without restriction, including without limitation the rights
/// to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
/// copies of the Software, and to permit persons to whom the Software is
/// furnished to do so, subject to the following conditions:
///
/// The above copyright notice and this permission notice shall be included in
/// all copies or substantial portions of the Software.
///
/// THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
/// IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
/// FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
/// AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
/// LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
/// OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN
/// THE SOFTWARE.
pub(crate) const SCRIPT: &str = include_str!("icicle/id-generation.lua");

/// The SHA1 of [`SCRIPT`], as `SCRIPT LOAD` returns it and `EVALSHA` takes it.
pub(crate) const SCRIPT_SHA1: &str = "594c06c1a007e4c734680d6e4711e67334507564";

/// The error reply of the script while the lock key is set.
pub(crate) const LOCK_ERROR: &str = "Icicle: Cannot generate ID, waiting for lock to expire.";

/// The key holding a node's logical shard ID.
pub(crate) const SHARD_KEY: &str = "icicle-generator-logical-shard-id";

/// The key the script sets for 1 ms on a rollover, and the guard sets to fence a node.
pub(crate) const LOCK_KEY: &str = "icicle-generator-lock";

/// The key of the rolling sequence.
pub(crate) const SEQUENCE_KEY: &str = "icicle-generator-sequence";

/// The key of a node's shared mark: the highest millisecond (Unix ms, a decimal string) any
/// idmint client recorded on the node before handing IDs out. It lives beside icicle's keys,
/// which it leaves alone, and replication carries it to the replica a failover promotes.
pub(crate) const MARK_KEY: &str = "idmint-icicle-mark-ms";

/// Raises [`MARK_KEY`] to the node's `TIME` (in ms) and returns the mark as it stood before,
/// 0 when there was none. Run right after icicle's script in the same pipeline, so the time it
/// records is at or after the millisecond of that call's IDs. (`replicate_commands` lets a
/// Redis before 5 write after `TIME`; later ones always replicate a script's effects.)
pub(crate) const MARK_SCRIPT: &str = "pcall(redis.replicate_commands) \
     local t = redis.call('TIME') \
     local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
     local last = tonumber(redis.call('GET', KEYS[1])) or 0 \
     if now > last then redis.call('SET', KEYS[1], string.format('%.0f', now)) end \
     return last";

/// The largest batch the script serves in one call (its sequence has 4096 values).
pub(crate) const MAX_BATCH: usize = 1 << Icicle::SEQUENCE_BITS;

/// The largest logical shard ID (10 bits).
pub(crate) const MAX_SHARD: i64 = (1 << Icicle::SHARD_BITS) - 1;

/// A node's URL without its password, for messages.
pub(crate) fn display_node(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
            format!("{scheme}://{host}")
        }
        None => url.to_owned(),
    }
}

/// [`Error::Unavailable`] for the Redis backend.
pub(crate) fn unavailable(node: &str, reason: impl std::fmt::Display) -> Error {
    Error::Unavailable { backend: "redis", reason: format!("icicle node {node}: {reason}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        let cases = [
            ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/"),
            ("redis://:secret@host:1/0", "redis://host:1/0"),
            ("redis://user:p@ss@host", "redis://host"),
            ("host:6379", "host:6379"),
        ];
        for (url, shown) in cases {
            assert_eq!(display_node(url), shown, "{url}");
        }
    }

    #[test]
    fn the_script_file_is_the_upstream_text() {
        // The full check (SHA1) is in tests/integration/icicle.rs; here, the cheap invariants that an
        // editor could break: no trailing newline, the upstream first line and the lock text.
        assert!(SCRIPT.starts_with("local lock_key = 'icicle-generator-lock'\n"));
        assert!(SCRIPT.ends_with("tonumber(time[2])\n}"));
        assert!(SCRIPT.contains(LOCK_ERROR));
        assert_eq!(SCRIPT.len(), 2769);
    }
}
