//! The key-value calls' options and transactions ([`GetOptions`], [`PutOptions`],
//! [`DeleteOptions`], [`Txn`] of [`Compare`]s and [`TxnOp`]s, answered by
//! [`TxnOpResponse`]s), and the accessors of the messages they return.

use crate::proto::{
    etcdserverpb::{
        Compare as PbCompare, DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse,
        RangeRequest, RangeResponse, RequestOp, ResponseHeader, TxnRequest, TxnResponse,
        compare::{CompareResult, CompareTarget, TargetUnion},
        request_op::Request,
        response_op::Response,
    },
    mvccpb::KeyValue,
};

/// The end of the range of every key that starts with `key`: `key` with its last byte below
/// 0xff raised by one and what follows dropped (etcd's `clientv3.GetPrefixRangeEnd`); `\0`,
/// every key, when there is no such byte.
fn prefix_end(key: &[u8]) -> Vec<u8> {
    let mut end = key.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// Options of [`Client::get`](crate::Client::get) and [`TxnOp::get`].
///
/// # Example
///
/// ```
/// let options = idmint_etcd::GetOptions::new().with_prefix().with_keys_only();
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Default)]
pub struct GetOptions {
    prefix: bool,
    keys_only: bool,
    count_only: bool,
    revision: i64,
}

impl GetOptions {
    /// A read of one key, at the newest revision.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::GetOptions::new();
    /// # let _ = options;
    /// ```
    pub fn new() -> Self {
        GetOptions::default()
    }

    /// Every key that starts with the key given.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::GetOptions::new().with_prefix();
    /// # let _ = options;
    /// ```
    pub fn with_prefix(mut self) -> Self {
        self.prefix = true;
        self
    }

    /// Keys and their revisions, without values.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::GetOptions::new().with_keys_only();
    /// # let _ = options;
    /// ```
    pub fn with_keys_only(mut self) -> Self {
        self.keys_only = true;
        self
    }

    /// Only the count of keys (the answer's `count`), no keys.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::GetOptions::new().with_count_only();
    /// # let _ = options;
    /// ```
    pub fn with_count_only(mut self) -> Self {
        self.count_only = true;
        self
    }

    /// The keys as they were at `revision` (0 or less: the newest).
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::GetOptions::new().with_revision(12);
    /// # let _ = options;
    /// ```
    pub fn with_revision(mut self, revision: i64) -> Self {
        self.revision = revision;
        self
    }

    pub(crate) fn request(self, key: Vec<u8>) -> RangeRequest {
        RangeRequest {
            range_end: if self.prefix { prefix_end(&key) } else { Vec::new() },
            key,
            revision: self.revision,
            keys_only: self.keys_only,
            count_only: self.count_only,
            ..RangeRequest::default()
        }
    }
}

/// Options of [`Client::put`](crate::Client::put) and [`TxnOp::put`].
///
/// # Example
///
/// ```
/// let options = idmint_etcd::PutOptions::new().with_lease(0x694d_7b5a_0d1c_2a07);
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Default)]
pub struct PutOptions {
    lease: i64,
}

impl PutOptions {
    /// A key on no lease.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::PutOptions::new();
    /// # let _ = options;
    /// ```
    pub fn new() -> Self {
        PutOptions::default()
    }

    /// The key lives on lease `id`: revoking or expiring it deletes the key.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::PutOptions::new().with_lease(7);
    /// # let _ = options;
    /// ```
    pub fn with_lease(mut self, id: i64) -> Self {
        self.lease = id;
        self
    }

    pub(crate) fn request(self, key: Vec<u8>, value: Vec<u8>) -> PutRequest {
        PutRequest { key, value, lease: self.lease, ..PutRequest::default() }
    }
}

/// Options of [`Client::delete`](crate::Client::delete) and [`TxnOp::delete`].
///
/// # Example
///
/// ```
/// let options = idmint_etcd::DeleteOptions::new().with_prefix();
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    prefix: bool,
}

impl DeleteOptions {
    /// A delete of one key.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::DeleteOptions::new();
    /// # let _ = options;
    /// ```
    pub fn new() -> Self {
        DeleteOptions::default()
    }

    /// Every key that starts with the key given.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::DeleteOptions::new().with_prefix();
    /// # let _ = options;
    /// ```
    pub fn with_prefix(mut self) -> Self {
        self.prefix = true;
        self
    }

    pub(crate) fn request(self, key: Vec<u8>) -> DeleteRangeRequest {
        DeleteRangeRequest {
            range_end: if self.prefix { prefix_end(&key) } else { Vec::new() },
            key,
            ..DeleteRangeRequest::default()
        }
    }
}

/// How a [`Compare`] compares.
///
/// # Example
///
/// ```
/// use idmint_etcd::{Compare, CompareOp};
///
/// let absent = Compare::create_revision("app/a", CompareOp::Equal, 0);
/// # let _ = absent;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// The key's field equals the value.
    Equal,
    /// The key's field is greater.
    Greater,
    /// The key's field is less.
    Less,
    /// The key's field differs.
    NotEqual,
}

impl From<CompareOp> for CompareResult {
    fn from(op: CompareOp) -> Self {
        match op {
            CompareOp::Equal => CompareResult::Equal,
            CompareOp::Greater => CompareResult::Greater,
            CompareOp::Less => CompareResult::Less,
            CompareOp::NotEqual => CompareResult::NotEqual,
        }
    }
}

/// One condition of a [`Txn`]: a field of one key compared with a value (a key that does not
/// exist has version, create revision and mod revision 0).
///
/// # Example
///
/// ```
/// use idmint_etcd::{Compare, CompareOp};
///
/// let mine = Compare::mod_revision("app/mark", CompareOp::Equal, 42);
/// # let _ = mine;
/// ```
#[derive(Debug, Clone)]
pub struct Compare(PbCompare);

impl Compare {
    fn new(key: Vec<u8>, op: CompareOp, target: CompareTarget, value: TargetUnion) -> Self {
        Compare(PbCompare {
            result: CompareResult::from(op).into(),
            target: target.into(),
            key,
            target_union: Some(value),
            range_end: Vec::new(),
        })
    }

    /// The key's version (writes since its creation; 0: absent).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_etcd::{Compare, CompareOp};
    ///
    /// let absent = Compare::version("app/a", CompareOp::Equal, 0);
    /// # let _ = absent;
    /// ```
    pub fn version(key: impl Into<Vec<u8>>, op: CompareOp, version: i64) -> Self {
        Compare::new(key.into(), op, CompareTarget::Version, TargetUnion::Version(version))
    }

    /// The revision that created the key (0: absent).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_etcd::{Compare, CompareOp};
    ///
    /// let epoch = Compare::create_revision("app/claim", CompareOp::Equal, 17);
    /// # let _ = epoch;
    /// ```
    pub fn create_revision(key: impl Into<Vec<u8>>, op: CompareOp, revision: i64) -> Self {
        let target = TargetUnion::CreateRevision(revision);
        Compare::new(key.into(), op, CompareTarget::Create, target)
    }

    /// The revision of the key's last write (0: absent).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_etcd::{Compare, CompareOp};
    ///
    /// let unchanged = Compare::mod_revision("app/mark", CompareOp::Equal, 42);
    /// # let _ = unchanged;
    /// ```
    pub fn mod_revision(key: impl Into<Vec<u8>>, op: CompareOp, revision: i64) -> Self {
        Compare::new(key.into(), op, CompareTarget::Mod, TargetUnion::ModRevision(revision))
    }

    /// The key's value.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_etcd::{Compare, CompareOp};
    ///
    /// let same = Compare::value("app/a", CompareOp::Equal, "1");
    /// # let _ = same;
    /// ```
    pub fn value(key: impl Into<Vec<u8>>, op: CompareOp, value: impl Into<Vec<u8>>) -> Self {
        Compare::new(key.into(), op, CompareTarget::Value, TargetUnion::Value(value.into()))
    }

    /// The lease the key lives on (0: none).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_etcd::{Compare, CompareOp};
    ///
    /// let on_mine = Compare::lease("app/claim", CompareOp::Equal, 7);
    /// # let _ = on_mine;
    /// ```
    pub fn lease(key: impl Into<Vec<u8>>, op: CompareOp, lease: i64) -> Self {
        Compare::new(key.into(), op, CompareTarget::Lease, TargetUnion::Lease(lease))
    }
}

/// One operation of a [`Txn`].
///
/// # Example
///
/// ```
/// use idmint_etcd::TxnOp;
///
/// let ops = [TxnOp::put("app/a", "1", None), TxnOp::get("app/b", None)];
/// # let _ = ops;
/// ```
#[derive(Debug, Clone)]
pub struct TxnOp(RequestOp);

impl TxnOp {
    /// A write, as [`Client::put`](crate::Client::put).
    ///
    /// # Example
    ///
    /// ```
    /// let op = idmint_etcd::TxnOp::put("app/a", "1", None);
    /// # let _ = op;
    /// ```
    pub fn put(
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        options: Option<PutOptions>,
    ) -> Self {
        let put = options.unwrap_or_default().request(key.into(), value.into());
        TxnOp(RequestOp { request: Some(Request::RequestPut(put)) })
    }

    /// A read, as [`Client::get`](crate::Client::get).
    ///
    /// # Example
    ///
    /// ```
    /// let op = idmint_etcd::TxnOp::get("app/a", None);
    /// # let _ = op;
    /// ```
    pub fn get(key: impl Into<Vec<u8>>, options: Option<GetOptions>) -> Self {
        let range = options.unwrap_or_default().request(key.into());
        TxnOp(RequestOp { request: Some(Request::RequestRange(range)) })
    }

    /// A delete, as [`Client::delete`](crate::Client::delete).
    ///
    /// # Example
    ///
    /// ```
    /// let op = idmint_etcd::TxnOp::delete("app/a", None);
    /// # let _ = op;
    /// ```
    pub fn delete(key: impl Into<Vec<u8>>, options: Option<DeleteOptions>) -> Self {
        let delete = options.unwrap_or_default().request(key.into());
        TxnOp(RequestOp { request: Some(Request::RequestDeleteRange(delete)) })
    }
}

/// A transaction: if every compare holds, the `and_then` operations run, else the `or_else`
/// ones, all at one revision.
///
/// # Example
///
/// ```
/// use idmint_etcd::{Compare, CompareOp, Txn, TxnOp};
///
/// let txn = Txn::new()
///     .when([Compare::create_revision("app/a", CompareOp::Equal, 0)])
///     .and_then([TxnOp::put("app/a", "1", None)])
///     .or_else([TxnOp::get("app/a", None)]);
/// # let _ = txn;
/// ```
#[derive(Debug, Clone, Default)]
pub struct Txn(TxnRequest);

impl Txn {
    /// An empty transaction (no compares: its `and_then` operations run).
    ///
    /// # Example
    ///
    /// ```
    /// let txn = idmint_etcd::Txn::new().and_then([idmint_etcd::TxnOp::put("a", "1", None)]);
    /// # let _ = txn;
    /// ```
    pub fn new() -> Self {
        Txn::default()
    }

    /// Adds compares; all must hold for the `and_then` branch.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_etcd::{Compare, CompareOp, Txn};
    ///
    /// let txn = Txn::new().when([Compare::version("a", CompareOp::Equal, 0)]);
    /// # let _ = txn;
    /// ```
    pub fn when(mut self, compares: impl Into<Vec<Compare>>) -> Self {
        self.0.compare.extend(compares.into().into_iter().map(|c| c.0));
        self
    }

    /// Adds operations run when every compare holds.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_etcd::{Txn, TxnOp};
    ///
    /// let txn = Txn::new().and_then([TxnOp::put("a", "1", None)]);
    /// # let _ = txn;
    /// ```
    pub fn and_then(mut self, ops: impl Into<Vec<TxnOp>>) -> Self {
        self.0.success.extend(ops.into().into_iter().map(|op| op.0));
        self
    }

    /// Adds operations run when a compare fails.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_etcd::{Txn, TxnOp};
    ///
    /// let txn = Txn::new().or_else([TxnOp::get("a", None)]);
    /// # let _ = txn;
    /// ```
    pub fn or_else(mut self, ops: impl Into<Vec<TxnOp>>) -> Self {
        self.0.failure.extend(ops.into().into_iter().map(|op| op.0));
        self
    }

    pub(crate) fn into_request(self) -> TxnRequest {
        self.0
    }
}

/// The answer to one [`TxnOp`], in the order of the branch that ran.
///
/// # Example
///
/// ```
/// use idmint_etcd::{TxnOpResponse, TxnResponse};
///
/// let answer = TxnResponse::default();
/// for op in answer.op_responses() {
///     if let TxnOpResponse::Get(read) = op {
///         println!("{} keys", read.kvs().len());
///     }
/// }
/// ```
#[derive(Debug, Clone)]
pub enum TxnOpResponse {
    /// A read's keys.
    Get(RangeResponse),
    /// A write's answer.
    Put(PutResponse),
    /// A delete's answer.
    Delete(DeleteRangeResponse),
    /// A nested transaction's answer.
    Txn(TxnResponse),
}

impl ResponseHeader {
    /// The ID of the cluster that answered.
    pub fn cluster_id(&self) -> u64 {
        self.cluster_id
    }

    /// The ID of the member that answered.
    pub fn member_id(&self) -> u64 {
        self.member_id
    }

    /// The store's revision when the request was applied.
    pub fn revision(&self) -> i64 {
        self.revision
    }
}

impl KeyValue {
    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The value (empty when read with keys only).
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// The value as UTF-8 text.
    ///
    /// # Errors
    ///
    /// When the value is not UTF-8.
    pub fn value_str(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.value)
    }

    /// The lease the key lives on, 0 for none.
    pub fn lease(&self) -> i64 {
        self.lease
    }

    /// The revision that created the key.
    pub fn create_revision(&self) -> i64 {
        self.create_revision
    }

    /// The revision of the key's last write.
    pub fn mod_revision(&self) -> i64 {
        self.mod_revision
    }

    /// Writes since the key's creation.
    pub fn version(&self) -> i64 {
        self.version
    }
}

impl RangeResponse {
    /// The answering member's header.
    pub fn header(&self) -> Option<&ResponseHeader> {
        self.header.as_ref()
    }

    /// The keys read (none when counting only).
    pub fn kvs(&self) -> &[KeyValue] {
        &self.kvs
    }
}

impl TxnResponse {
    /// The answering member's header (its revision is the transaction's).
    pub fn header(&self) -> Option<&ResponseHeader> {
        self.header.as_ref()
    }

    /// Whether every compare held (the `and_then` branch ran).
    pub fn succeeded(&self) -> bool {
        self.succeeded
    }

    /// The answers of the branch that ran, in order.
    pub fn op_responses(&self) -> Vec<TxnOpResponse> {
        self.responses
            .iter()
            .filter_map(|op| match op.response.clone()? {
                Response::ResponseRange(r) => Some(TxnOpResponse::Get(r)),
                Response::ResponsePut(r) => Some(TxnOpResponse::Put(r)),
                Response::ResponseDeleteRange(r) => Some(TxnOpResponse::Delete(r)),
                Response::ResponseTxn(r) => Some(TxnOpResponse::Txn(r)),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_end_where_etcd_ends_them() {
        assert_eq!(prefix_end(b"a/"), b"a0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }

    #[test]
    fn transactions_keep_their_branches_in_order() {
        let txn = Txn::new()
            .when([Compare::create_revision("k", CompareOp::Equal, 0)])
            .and_then([TxnOp::put("k", "v", Some(PutOptions::new().with_lease(7)))])
            .or_else(vec![
                TxnOp::get("k", None),
                TxnOp::delete("p/", Some(DeleteOptions::new().with_prefix())),
            ])
            .into_request();
        assert_eq!(txn.compare.len(), 1);
        assert_eq!(txn.compare[0].target_union, Some(TargetUnion::CreateRevision(0)));
        assert_eq!(txn.compare[0].result, i32::from(CompareResult::Equal));
        match &txn.success[0].request {
            Some(Request::RequestPut(put)) => {
                assert_eq!((put.key.as_slice(), put.lease), (&b"k"[..], 7))
            }
            other => panic!("{other:?}"),
        }
        match &txn.failure[1].request {
            Some(Request::RequestDeleteRange(d)) => assert_eq!(d.range_end, b"p0"),
            other => panic!("{other:?}"),
        }
    }
}
