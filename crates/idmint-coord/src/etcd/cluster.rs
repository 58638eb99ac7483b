//! The restore guard (RELIABILITY.md, "etcd restored from a snapshot (T21)"): the etcd cluster ID that the marks were written on,
//! recorded in one key, so that marks restored from a snapshot, or copied into another
//! cluster, are refused until an operator raises every one of them ([`adopt`]).
//!
//! etcd gives a cluster restored from a snapshot a new cluster ID (`etcdctl snapshot restore`
//! derives it from the new members and cluster token), and every response header carries the
//! ID of the cluster that answered. The key `<prefix>cluster` (both schemes) holds the ID the
//! marks belong to; a claim reads it and refuses ([`Error::ClusterChanged`]) when another
//! cluster answers, and a mark write whose answer comes from another cluster than the claim's
//! is refused the same way, so a server that outlives a restore stops extending its window.

use idmint_etcd::{Compare, CompareOp, GetOptions, Txn, TxnOp};
use serde::{Deserialize, Serialize};

use super::{Inner, MarkValue, Scheme, decode_mark, ranges};
use crate::{Error, Lineage};

/// The JSON value of the cluster key.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterValue {
    /// The etcd cluster ID, in hex as `etcdctl endpoint status` prints it.
    cluster_id: String,
    /// Set by [`adopt`]: the floor every mark was raised to (Unix ms). A server whose data
    /// directory remembers another store takes an adopted one (see `remembered.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    adopted_ms: Option<u64>,
}

/// What the cluster key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Recorded {
    cluster_id: u64,
    adopted_ms: Option<u64>,
}

/// What [`EtcdCoordinator::adopt_cluster`](crate::EtcdCoordinator::adopt_cluster) did.
///
/// # Example
///
/// ```
/// use idmint_coord::Adopted;
///
/// let adopted = Adopted { recorded: Some(0xa1), live: 0xb2, raised: 3, kept: 1 };
/// assert_eq!(adopted.raised + adopted.kept, 4);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adopted {
    /// The cluster ID the marks were recorded under before (`None`: none was recorded).
    pub recorded: Option<u64>,
    /// The cluster ID recorded now: the cluster that answered.
    pub live: u64,
    /// Marks raised to the floor.
    pub raised: u64,
    /// Marks already at or above it.
    pub kept: u64,
}

/// The key that records the cluster.
pub(super) fn key(prefix: &str) -> String {
    format!("{prefix}cluster")
}

fn encode(cluster_id: u64, adopted_ms: Option<u64>) -> String {
    // A struct of a string and a number cannot fail to serialise.
    serde_json::to_string(&ClusterValue { cluster_id: format!("{cluster_id:x}"), adopted_ms })
        .unwrap_or_default()
}

fn parse(key: &str, value: &[u8]) -> Result<Recorded, Error> {
    let corrupt = |reason: String| Error::Corrupt { path: format!("etcd key {key}"), reason };
    let value: ClusterValue = serde_json::from_slice(value).map_err(|e| corrupt(e.to_string()))?;
    let cluster_id = u64::from_str_radix(&value.cluster_id, 16).map_err(|_| {
        corrupt(format!("cluster_id `{}` is not a hex cluster ID", value.cluster_id))
    })?;
    Ok(Recorded { cluster_id, adopted_ms: value.adopted_ms })
}

/// The cluster's record of itself, for a server's memory of where it claims
/// ([`crate::Remembered`]): the recorded cluster ID (or, when none is recorded, the live one)
/// and the prefix.
pub(super) async fn lineage(inner: &Inner) -> Result<Lineage, Error> {
    let key = key(&inner.options.prefix);
    let response = get(inner, "read the cluster key", &key, None).await?;
    let live = response.header().map_or(0, |h| h.cluster_id());
    let recorded = response.kvs().first().map(|kv| parse(&key, kv.value())).transpose()?;
    let cluster_id = recorded.map_or(live, |r| r.cluster_id);
    Ok(Lineage {
        store: format!("etcd cluster {cluster_id:016x}, prefix {}", inner.options.prefix),
        recorded: recorded.is_some(),
        adopted_ms: recorded.and_then(|r| r.adopted_ms),
    })
}

/// Checks that the cluster answering is the one the marks were written on, recording it when
/// none is recorded yet (a new cluster, or marks written before idmint recorded clusters).
/// Returns the live cluster ID.
pub(super) async fn verify(inner: &Inner) -> Result<u64, Error> {
    let key = key(&inner.options.prefix);
    let response = get(inner, "read the cluster key", &key, None).await?;
    let live = response.header().map_or(0, |h| h.cluster_id());
    if !inner.restore_guarded() {
        return Ok(live);
    }
    let recorded = match response.kvs().first() {
        Some(kv) => parse(&key, kv.value())?.cluster_id,
        None => {
            let txn = Txn::new()
                .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(key.as_str(), encode(live, None), None)])
                .or_else([TxnOp::get(key.as_str(), None)]);
            let response = txn_call(inner, "record the cluster", txn).await?;
            match ranges(&response).first().cloned().flatten() {
                Some(kv) if !response.succeeded() => parse(&key, &kv.value)?.cluster_id,
                _ => live,
            }
        }
    };
    if recorded != live {
        return Err(Error::ClusterChanged { key, recorded, live });
    }
    Ok(live)
}

/// Checks the cluster that answered a mark write against the claim's.
pub(super) fn check_answer(inner: &Inner, claim_cluster: u64, answered: u64) -> Result<(), Error> {
    if inner.restore_guarded() && answered != claim_cluster {
        return Err(Error::ClusterChanged {
            key: key(&inner.options.prefix),
            recorded: claim_cluster,
            live: answered,
        });
    }
    Ok(())
}

/// Whether the rest of a key, below the prefix that [`mark_keys`] returns, names a mark.
type IsMark = fn(&str) -> bool;

/// The key prefix under which the scheme keeps its marks, and whether a key below it is a mark.
fn mark_keys(scheme: &Scheme, prefix: &str) -> Result<(String, IsMark), Error> {
    match scheme {
        // `<prefix><namespace>/mark/<id>`
        Scheme::Native => Ok((prefix.to_owned(), |rest| {
            rest.rsplit_once("/mark/").is_some_and(|(ns, id)| {
                !ns.is_empty() && !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())
            })
        })),
        Scheme::LableOrg { namespace_prefix } if !namespace_prefix.contains("{namespace}") => {
            Ok((format!("{namespace_prefix}idmint/mark/"), |rest| !rest.is_empty()))
        }
        Scheme::LableOrg { .. } => Err(Error::InvalidRequest(
            "adopt-cluster cannot list the marks of a LableOrg prefix with {namespace}: run it once per namespace, with that namespace's prefix".into(),
        )),
    }
}

/// Raises every mark to at least `floor_ms`, then records the cluster that answers as the one
/// the marks belong to. Run with every server stopped: a mark that changes meanwhile stops it
/// with an error (run it again). Marks keep their layout; none goes down.
pub(super) async fn adopt(inner: &Inner, floor_ms: u64) -> Result<Adopted, Error> {
    let (prefix, is_mark) = mark_keys(&inner.options.scheme, &inner.options.prefix)?;
    let key = key(&inner.options.prefix);
    let found = get(inner, "read the cluster key", &key, None).await?;
    let live = found.header().map_or(0, |h| h.cluster_id());
    let recorded =
        found.kvs().first().map(|kv| parse(&key, kv.value())).transpose()?.map(|r| r.cluster_id);
    let listing =
        get(inner, "list the marks", &prefix, Some(GetOptions::new().with_prefix())).await?;
    let (mut raised, mut kept) = (0, 0);
    for kv in listing.kvs() {
        let name = String::from_utf8_lossy(kv.key()).into_owned();
        if !name.strip_prefix(prefix.as_str()).is_some_and(is_mark) {
            continue;
        }
        let mark = decode_mark(&name, kv.value())?;
        if mark.mark_ms >= floor_ms {
            kept += 1;
            continue;
        }
        let value =
            serde_json::to_vec(&MarkValue { mark_ms: floor_ms, layout: mark.layout }).map_err(
                |e| Error::Corrupt { path: format!("etcd key {name}"), reason: e.to_string() },
            )?;
        let txn = Txn::new()
            .when([Compare::mod_revision(name.as_str(), CompareOp::Equal, kv.mod_revision())])
            .and_then([TxnOp::put(name.as_str(), value.clone(), None)])
            .or_else([TxnOp::get(name.as_str(), None)]);
        let response = txn_call(inner, "raise a mark", txn).await?;
        // A repeat of a raise that landed (its answer was lost) finds its own value.
        let landed =
            ranges(&response).first().cloned().flatten().is_some_and(|kv| kv.value == value);
        if !response.succeeded() && !landed {
            return Err(Error::InvalidRequest(format!(
                "the mark {name} changed while adopting the cluster: stop every server, then run it again"
            )));
        }
        raised += 1;
    }
    let record = match found.kvs().first() {
        Some(kv) => Compare::mod_revision(key.as_str(), CompareOp::Equal, kv.mod_revision()),
        None => Compare::create_revision(key.as_str(), CompareOp::Equal, 0),
    };
    let adopted = encode(live, Some(floor_ms));
    let txn = Txn::new()
        .when([record])
        .and_then([TxnOp::put(key.as_str(), adopted.as_str(), None)])
        .or_else([TxnOp::get(key.as_str(), None)]);
    let response = txn_call(inner, "record the cluster", txn).await?;
    let landed = ranges(&response)
        .first()
        .cloned()
        .flatten()
        .is_some_and(|kv| kv.value == adopted.as_bytes());
    if !response.succeeded() && !landed {
        return Err(Error::InvalidRequest(format!(
            "{key} changed while adopting the cluster: run it again"
        )));
    }
    Ok(Adopted { recorded, live, raised, kept })
}

/// A read through the members.
async fn get(
    inner: &Inner,
    what: &str,
    key: &str,
    options: Option<GetOptions>,
) -> Result<idmint_etcd::RangeResponse, Error> {
    inner
        .members
        .run(what, |mut c| {
            let options = options.clone();
            async move { c.get(key, options).await }
        })
        .await
}

/// A transaction through the members (each of ours compares revisions, so a repeat is safe).
async fn txn_call(inner: &Inner, what: &str, txn: Txn) -> Result<idmint_etcd::TxnResponse, Error> {
    inner
        .members
        .run(what, |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_values_round_trip_and_bad_ones_are_refused() {
        for id in [1, 0xdead_beef, u64::MAX] {
            for adopted_ms in [None, Some(7)] {
                let recorded = Recorded { cluster_id: id, adopted_ms };
                assert_eq!(parse("k", encode(id, adopted_ms).as_bytes()).ok(), Some(recorded));
            }
        }
        for bad in
            [&b"{}"[..], b"{\"cluster_id\":\"xyz\"}", b"7", b"{\"cluster_id\":\"1\",\"x\":1}"]
        {
            assert!(matches!(parse("k", bad), Err(Error::Corrupt { .. })), "{bad:?}");
        }
    }

    #[test]
    fn only_mark_keys_are_raised() {
        let (prefix, is_mark) = mark_keys(&Scheme::Native, "idmint/").expect("native");
        assert_eq!(prefix, "idmint/");
        for (rest, want) in [
            ("orders/mark/7", true),
            ("a/b/mark/1023", true),
            ("orders/claim/7", false),
            ("cluster", false),
            ("orders/mark/", false),
            ("/mark/3", false),
            ("orders/mark/x", false),
        ] {
            assert_eq!(is_mark(rest), want, "{rest}");
        }
        let lable = Scheme::LableOrg { namespace_prefix: "unique-id/".into() };
        assert_eq!(mark_keys(&lable, "idmint/").expect("lable").0, "unique-id/idmint/mark/");
        let per_namespace = Scheme::LableOrg { namespace_prefix: "u/{namespace}/".into() };
        assert!(mark_keys(&per_namespace, "idmint/").is_err());
    }
}
