//! `idmint-etcd`: idmint's etcd v3 client, generated from etcd's own `.proto` files (vendored
//! in `proto/`, from etcd v3.4.23) by protox and tonic-prost-build, so that no build needs
//! protoc. It offers exactly the calls idmint makes, in the shapes idmint uses them:
//!
//! - KV: [`Client::get`] (with [`GetOptions`]: prefix, keys only, count only, a past
//!   revision), [`Client::put`] (on a lease: [`PutOptions`]), [`Client::delete`] (a prefix:
//!   [`DeleteOptions`]) and [`Client::txn`] ([`Txn`]: [`Compare`]s of version, create
//!   revision, mod revision, value or lease, then [`TxnOp`]s, read back as [`TxnOpResponse`]s);
//! - leases: [`Client::lease_grant`], [`Client::lease_keep_alive`] (a [`LeaseKeeper`] and its
//!   [`LeaseKeepAliveStream`]), [`Client::lease_revoke`] and [`Client::lease_time_to_live`];
//! - the cluster: [`Client::member_list`] and [`Client::status`] (one member's);
//! - the lock service: [`Client::lock`] (on a lease: [`LockOptions`]) and [`Client::unlock`].
//!
//! A [`Client`] balances over the endpoints it is given, as etcd's own Go client does; idmint
//! keeps one client per member and moves requests between them itself (DESIGN.md, "How does
//! idmint ride out a failed or paused etcd member?"). Every failed call is an [`Error`];
//! [`Error::status`] gives etcd's gRPC status, whose code tells a member that cannot serve
//! (`Unavailable`, `DeadlineExceeded`, ...) from a refused request (`NotFound`,
//! `InvalidArgument`, `FailedPrecondition`, ...). [`ConnectOptions`] sets the timeouts,
//! HTTP/2 keep-alive pings, and etcd's `hasleader` requirement. Plain `http://` endpoints only:
//! no TLS stack is built, and no authentication is sent.
//!
//! ```no_run
//! use idmint_etcd::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let mut client = Client::connect(["http://127.0.0.1:2379"], None).await?;
//! let lease = client.lease_grant(10).await?;
//! let txn = Txn::new()
//!     .when([Compare::create_revision("app/claim/7", CompareOp::Equal, 0)])
//!     .and_then([TxnOp::put("app/claim/7", "me", Some(PutOptions::new().with_lease(lease.id())))])
//!     .or_else([TxnOp::get("app/claim/7", None)]);
//! let answer = client.txn(txn).await?;
//! println!("claimed: {}", answer.succeeded());
//! # Ok::<(), idmint_etcd::Error>(())
//! # }).unwrap();
//! ```

mod client;
mod error;
mod kv;
mod lease;

/// etcd's messages and gRPC clients as generated from the vendored `.proto` files, one module
/// per protobuf package. The calls of [`Client`] return these messages; their
/// accessors (`kvs()`, `header()`, `ttl()`, ...) are this crate's.
///
/// # Example
///
/// ```
/// use idmint_etcd::proto::mvccpb::KeyValue;
///
/// let kv = KeyValue { key: b"a".to_vec(), create_revision: 5, ..KeyValue::default() };
/// assert_eq!((kv.key(), kv.create_revision()), (&b"a"[..], 5));
/// ```
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic, rust_2018_idioms)]
pub mod proto {
    /// etcd's `mvccpb` package: keys and their revisions.
    pub mod mvccpb {
        include!(concat!(env!("OUT_DIR"), "/mvccpb.rs"));
    }
    /// etcd's `authpb` package: users and roles (named by the `etcdserverpb` messages).
    pub mod authpb {
        include!(concat!(env!("OUT_DIR"), "/authpb.rs"));
    }
    /// etcd's `etcdserverpb` package: the KV, Watch, Lease, Cluster, Maintenance and Auth
    /// services.
    pub mod etcdserverpb {
        include!(concat!(env!("OUT_DIR"), "/etcdserverpb.rs"));
    }
    /// etcd's `v3lockpb` package: the lock service.
    pub mod v3lockpb {
        include!(concat!(env!("OUT_DIR"), "/v3lockpb.rs"));
    }
}

pub use crate::{
    client::{Client, ConnectOptions},
    error::Error,
    kv::{Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse},
    lease::{LeaseKeepAliveStream, LeaseKeeper, LockOptions},
    proto::{
        etcdserverpb::{
            DeleteRangeResponse, LeaseGrantResponse, LeaseKeepAliveResponse, LeaseRevokeResponse,
            LeaseTimeToLiveResponse, Member, MemberListResponse, PutResponse, RangeResponse,
            ResponseHeader, StatusResponse, TxnResponse,
        },
        mvccpb::KeyValue,
        v3lockpb::{LockResponse, UnlockResponse},
    },
};
