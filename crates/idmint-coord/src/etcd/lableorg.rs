//! The [`Scheme::LableOrg`](super::Scheme::LableOrg) claim procedure: LableOrg's
//! `uniqueid-etcd` `ResourceClaim`, byte for byte as LableOrg's `uniqueid-etcd` writes them, with idmint's
//! own fenced mark on keys LableOrg never reads.
//!
//! It must not change anything LableOrg reads: `cluster-id`, the lock, and `pool/` keys with
//! empty values on a 5 s lease.

use std::collections::HashSet;

use idmint_etcd::{Compare, CompareOp, LockOptions};

use crate::{
    ClaimRequest, Error, GeneratorIds,
    etcd::{Created, Inner, Taken, lease::Lease, unavailable},
};

/// LableOrg's lease TTL for pool claims, in seconds.
pub(super) const LEASE_TTL_SECS: i64 = 5;
/// Generator IDs per cluster ID.
const GENERATORS_PER_CLUSTER: u64 = 2048;
/// The key listing the cluster IDs.
const CLUSTER_ID_KEY: &str = "cluster-id";
/// The lock held while scanning the pool.
const LOCK_NAME: &str = "unique-id-resource-lock";
/// Where claims live.
const POOL: &str = "pool/";

/// Claims a free `pool/<cluster>:<generator>` key under `root` (the LableOrg namespace) on
/// `lease` (TTL 5 s, already kept alive), and reads idmint's mark for it. On error the caller
/// revokes the lease, which also drops the lock if unlocking failed.
pub(super) async fn claim(
    inner: &Inner,
    root: &str,
    request: &ClaimRequest,
    lease: &Lease,
) -> Result<Taken, Error> {
    let clusters = cluster_ids(inner, root).await?;
    // LableOrg's order: cluster IDs as listed, then generator IDs ascending; only the pairs
    // whose identity (`cluster·2048 + generator`) the request accepts.
    let accepts = |identity: u64| request.generator_ids.contains(identity);
    let mut distinct = HashSet::new();
    let candidates: Vec<(u64, u64)> = clusters
        .iter()
        .filter(|&&c| distinct.insert(c))
        .flat_map(|&c| (0..GENERATORS_PER_CLUSTER).map(move |g| (c, g)))
        .filter(|&(c, g)| accepts(identity(c, g)))
        .collect();
    if candidates.is_empty() {
        return Err(Error::InvalidRequest(format!(
            "the cluster ids {clusters:?} in {root}{CLUSTER_ID_KEY} give no generator id that \
             {:?} accepts",
            request.generator_ids
        )));
    }
    let scanned = scan(inner, root, request, clusters.len(), &candidates, lease);
    locked(inner, root, lease, scanned).await
}

fn identity(cluster: u64, generator: u64) -> u64 {
    cluster.saturating_mul(GENERATORS_PER_CLUSTER).saturating_add(generator)
}

/// Reads `cluster-id` (comma-separated integers, trimmed), writing `0` when it is absent.
async fn cluster_ids(inner: &Inner, root: &str) -> Result<Vec<u64>, Error> {
    let key = format!("{root}{CLUSTER_ID_KEY}");
    // LableOrg writes "0" when the key is absent; a create-if-absent transaction stores the
    // same bytes without overwriting a list written concurrently.
    let txn = idmint_etcd::Txn::new()
        .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
        .and_then([idmint_etcd::TxnOp::put(key.as_str(), "0", None)])
        .or_else([idmint_etcd::TxnOp::get(key.as_str(), None)]);
    let response = inner
        .members
        .run("read cluster ids", |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
        .await?;
    if response.succeeded() {
        return Ok(vec![0]);
    }
    let value = super::ranges(&response).into_iter().next().flatten().map(|kv| kv.value);
    let text = String::from_utf8_lossy(value.as_deref().unwrap_or_default()).into_owned();
    parse_cluster_ids(&text)
        .map_err(|reason| Error::Corrupt { path: format!("etcd key {key}"), reason })
}

/// Parses LableOrg's cluster-ID list: integers separated by commas, each trimmed. Repeats are
/// kept: LableOrg counts them when it decides whether the pool is full.
fn parse_cluster_ids(text: &str) -> Result<Vec<u64>, String> {
    text.split(',')
        .map(|part| {
            part.trim()
                .parse::<u64>()
                .map_err(|_| format!("`{}` in `{text}` is not a cluster id", part.trim()))
        })
        .collect()
}

/// Takes the resource lock on `lease`, runs `work` (the pool scan), unlocks.
async fn locked<T>(
    inner: &Inner,
    root: &str,
    lease: &Lease,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let lock_name = format!("{root}{LOCK_NAME}");
    let options = LockOptions::new().with_lease(lease.id);
    // Waiting for the lock is normal, so an attempt may take the whole lock timeout; a repeat
    // (after a member failed) asks for the same key, named after the lease, again.
    let timeout = inner.options.lock_timeout;
    let locked = inner
        .members
        .run_within("lock", timeout, timeout, |mut c| {
            let (name, options) = (lock_name.clone(), options.clone());
            async move { c.lock(name, Some(options)).await }
        })
        .await?;
    let done = work.await;
    let key = locked.key().to_vec();
    let unlocked = inner
        .members
        .run("unlock", |mut c| {
            let key = key.clone();
            async move { c.unlock(key).await }
        })
        .await;
    let value = done?;
    unlocked?;
    Ok(value)
}

/// Under the lock: list `pool/`, refuse when it is full, else claim the first free candidate.
async fn scan(
    inner: &Inner,
    root: &str,
    request: &ClaimRequest,
    cluster_count: usize,
    candidates: &[(u64, u64)],
    lease: &Lease,
) -> Result<Taken, Error> {
    let pool = format!("{root}{POOL}");
    let listed: HashSet<String> = inner.list_keys(&pool).await?.into_iter().collect();
    let exhausted = || Error::PoolExhausted {
        namespace: request.namespace.clone(),
        size: candidates.len() as u64,
    };
    // LableOrg counts every key under `pool/`, whatever cluster it belongs to.
    if listed.len() as u64 >= GENERATORS_PER_CLUSTER * cluster_count as u64 {
        return Err(exhausted());
    }
    let mut last_holder = None;
    for &(cluster, generator) in candidates {
        let name = format!("{cluster}:{generator}");
        let fixed = matches!(request.generator_ids, GeneratorIds::Fixed(_));
        // A fixed ID is tried even when listed, to name its holder in the error.
        if listed.contains(&name) && !fixed {
            continue;
        }
        let claim_key = format!("{pool}{name}");
        let mark_key = format!("{root}idmint/mark/{name}");
        let holder_key = format!("{root}idmint/holder/{name}");
        let absent = Compare::version(claim_key.as_str(), CompareOp::Equal, 0);
        let holder = Some((holder_key.as_str(), request.holder.as_bytes()));
        match inner.create_claim(absent, &claim_key, b"", lease, &mark_key, holder).await? {
            Created::Mine { epoch, mark } => {
                let mark = inner.parse_mark(&mark_key, mark, request)?;
                let generator_id = identity(cluster, generator);
                return Ok(Taken { generator_id, claim_key, mark_key, epoch, mark });
            }
            Created::Taken { holder } => last_holder = Some(holder),
        }
    }
    Err(match (request.generator_ids, last_holder) {
        (GeneratorIds::Fixed(generator_id), Some(holder)) => {
            Error::Conflict { namespace: request.namespace.clone(), generator_id, holder }
        }
        (GeneratorIds::Fixed(_), None) => unavailable("the fixed pool key was not claimed".into()),
        _ => exhausted(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_trimmed_comma_separated_integers() {
        assert_eq!(parse_cluster_ids("0"), Ok(vec![0]));
        assert_eq!(parse_cluster_ids("12, 13"), Ok(vec![12, 13]));
        assert_eq!(parse_cluster_ids(" 4 ,5,4"), Ok(vec![4, 5, 4]));
        assert!(parse_cluster_ids("").is_err());
        assert!(parse_cluster_ids("1,,2").is_err());
        assert!(parse_cluster_ids("-1").is_err());
        assert!(parse_cluster_ids("x").is_err());
    }

    #[test]
    fn identities_follow_the_lable_layout() {
        assert_eq!(identity(0, 0), 0);
        assert_eq!(identity(4, 2047), 10_239);
        assert_eq!(identity(5, 0), 10_240);
    }
}
