//! The gRPC contract `idmint.v1` (feature `grpc`): the messages, client and server that
//! tonic-prost-build generates from `proto/idmint/v1/idmint.proto`, and conversions between
//! them and the JSON types and IDs. Data and conversions only: no I/O, no issuing.
//!
//! 64-bit IDs travel packed in [`IdBatch::ids`] (8 bytes each); 128-bit IDs (hot-guid) travel
//! in [`IdBatch::ids128`], 16 big-endian bytes per ID, one after another. [`IdBatch::u128s`]
//! and [`IdBatch::from_u128s`] convert. A request with `encoding` set to
//! [`IdEncoding::PackedBe`] gets every ID in [`IdBatch::packed`] instead: fixed-width
//! big-endian integers of [`IdBatch::id_bytes`] (8 or 16) bytes each; [`IdBatch::packed_u64s`]
//! and [`IdBatch::u128s`] read them.
//!
//! # Example
//!
//! ```
//! use idmint_proto::grpc::{BatchRequest, IdMintClient};
//!
//! /// 100 IDs from the default namespace of a server started with `--grpc-listen`.
//! async fn hundred_ids(url: String) -> Result<Vec<u64>, Box<dyn std::error::Error>> {
//!     let mut client = IdMintClient::connect(url).await?;
//!     let request = BatchRequest { count: 100, ..BatchRequest::default() };
//!     let batch = client.batch(request).await?;
//!     Ok(batch.into_inner().ids)
//! }
//! ```

/// The code tonic-prost-build generates; documented by the comments of the .proto file.
#[allow(missing_docs, unreachable_pub, clippy::all)]
mod generated {
    tonic::include_proto!("idmint.v1");
}

pub use generated::{
    BatchRequest, DecodeRequest, DecodeResponse, Field, IdBatch, IdEncoding, ListNamespacesRequest,
    ListNamespacesResponse, NamespaceInfo, NextRequest, NextResponse, StreamRequest, field,
    id_mint_client,
    id_mint_client::IdMintClient,
    id_mint_server,
    id_mint_server::{IdMint, IdMintServer},
    next_response,
};

/// The fully qualified name of the service, as health checks and reflection name it.
///
/// # Example
///
/// ```
/// use tonic::server::NamedService;
///
/// type Server = idmint_proto::grpc::IdMintServer<()>;
/// assert_eq!(<Server as NamedService>::NAME, idmint_proto::grpc::SERVICE_NAME);
/// ```
pub const SERVICE_NAME: &str = "idmint.v1.IdMint";

/// The bytes of one 128-bit ID in [`IdBatch::ids128`] and [`next_response::Id::U128`].
///
/// # Example
///
/// ```
/// use idmint_proto::grpc::{ID128_BYTES, IdBatch};
///
/// assert_eq!(IdBatch::from_u128s([1, 2]).ids128.len(), 2 * ID128_BYTES);
/// ```
pub const ID128_BYTES: usize = 16;

impl IdBatch {
    /// A batch of 128-bit IDs, each written as 16 big-endian bytes.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_proto::grpc::IdBatch;
    ///
    /// let batch = IdBatch::from_u128s([1u128, 2]);
    /// assert_eq!(batch.ids128.len(), 32);
    /// assert_eq!(batch.ids128[15], 1);
    /// ```
    pub fn from_u128s(ids: impl IntoIterator<Item = u128>) -> Self {
        let ids = ids.into_iter();
        let mut bytes = Vec::with_capacity(ids.size_hint().0 * ID128_BYTES);
        for id in ids {
            bytes.extend_from_slice(&id.to_be_bytes());
        }
        IdBatch { ids128: bytes, ..IdBatch::default() }
    }

    /// A packed batch ([`IdEncoding::PackedBe`]): `packed` holds IDs of `id_bytes` bytes
    /// each, big-endian, one after another.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_proto::grpc::IdBatch;
    ///
    /// let bytes: Vec<u8> = [5u64, 9].iter().flat_map(|id| id.to_be_bytes()).collect();
    /// let batch = IdBatch::from_packed_be(bytes, 8);
    /// assert_eq!(batch.packed_u64s().collect::<Vec<_>>(), [5, 9]);
    /// assert!(batch.ids.is_empty() && batch.ids128.is_empty());
    /// ```
    pub fn from_packed_be(packed: Vec<u8>, id_bytes: u32) -> Self {
        IdBatch { packed, id_bytes, ..IdBatch::default() }
    }

    /// The 64-bit IDs of a packed batch ([`IdEncoding::PackedBe`], `id_bytes` 8), in order;
    /// nothing for a batch of another encoding or width. A trailing partial ID (a malformed
    /// message) is ignored.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_proto::grpc::IdBatch;
    ///
    /// let batch = IdBatch::from_packed_be(258u64.to_be_bytes().to_vec(), 8);
    /// assert_eq!(batch.packed_u64s().collect::<Vec<_>>(), [258]);
    /// assert_eq!(IdBatch { ids: vec![1], ..IdBatch::default() }.packed_u64s().len(), 0);
    /// ```
    pub fn packed_u64s(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        crate::be_u64s(if self.id_bytes == 8 { self.packed.as_slice() } else { &[] })
    }

    /// The 128-bit IDs of the batch, in order: from `ids128`, or from `packed` when
    /// `id_bytes` is 16. A trailing partial ID (a malformed message) is ignored.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_proto::grpc::IdBatch;
    ///
    /// let batch = IdBatch::from_u128s([u128::MAX, 7]);
    /// assert_eq!(batch.u128s().collect::<Vec<_>>(), [u128::MAX, 7]);
    /// ```
    pub fn u128s(&self) -> impl ExactSizeIterator<Item = u128> + '_ {
        crate::be_u128s(if self.id_bytes == 16 { &self.packed } else { &self.ids128 })
    }

    /// How many IDs the batch holds, of either width.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_proto::grpc::IdBatch;
    ///
    /// assert_eq!(IdBatch::from_u128s([1, 2, 3]).len(), 3);
    /// assert_eq!(IdBatch { ids: vec![9], ..IdBatch::default() }.len(), 1);
    /// assert_eq!(IdBatch::from_packed_be(vec![0; 24], 8).len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        let packed = match usize::try_from(self.id_bytes) {
            Ok(width) if width > 0 => self.packed.len() / width,
            _ => 0,
        };
        self.ids.len() + self.ids128.len() / ID128_BYTES + packed
    }

    /// Whether the batch holds no ID.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_proto::grpc::IdBatch;
    ///
    /// assert!(IdBatch::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl NextResponse {
    /// The ID of a 64-bit layout.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_proto::grpc::{NextResponse, next_response::Id};
    ///
    /// let response = NextResponse { id: Some(Id::U64(42)), ..NextResponse::default() };
    /// assert_eq!(response.id_u64(), Some(42));
    /// assert_eq!(response.id_u128(), None);
    /// ```
    pub fn id_u64(&self) -> Option<u64> {
        match self.id {
            Some(next_response::Id::U64(id)) => Some(id),
            _ => None,
        }
    }

    /// The ID of a 128-bit layout (16 big-endian bytes on the wire).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_proto::grpc::{NextResponse, next_response::Id};
    ///
    /// let response =
    ///     NextResponse { id: Some(Id::U128(7u128.to_be_bytes().to_vec())), ..NextResponse::default() };
    /// assert_eq!(response.id_u128(), Some(7));
    /// ```
    pub fn id_u128(&self) -> Option<u128> {
        match &self.id {
            Some(next_response::Id::U128(bytes)) => {
                <[u8; ID128_BYTES]>::try_from(bytes.as_slice()).ok().map(u128::from_be_bytes)
            }
            _ => None,
        }
    }
}

/// Implements `From` both ways between two structs with the same fields, moving each field
/// across, with the docs given for each direction.
macro_rules! same_fields {
    (
        $(#[$a_to_b:meta])* $a:ident => $(#[$b_to_a:meta])* $b:path { $($field:ident),* $(,)? }
    ) => {
        impl From<$a> for $b {
            $(#[$a_to_b])*
            fn from(value: $a) -> Self {
                $b { $($field: value.$field),* }
            }
        }

        impl From<$b> for $a {
            $(#[$b_to_a])*
            fn from(value: $b) -> Self {
                $a { $($field: value.$field),* }
            }
        }
    };
}

same_fields! {
    /// # Example
    ///
    /// ```
    /// use idmint_proto::grpc;
    ///
    /// let info = grpc::NamespaceInfo { name: "orders".into(), ..grpc::NamespaceInfo::default() };
    /// assert_eq!(idmint_proto::NamespaceInfo::from(info).name, "orders");
    /// ```
    NamespaceInfo =>
    /// # Example
    ///
    /// ```
    /// use idmint_proto::grpc;
    ///
    /// let json: idmint_proto::NamespaceInfo = serde_json::from_str(
    ///     r#"{"name":"default","layout":"snowflake","fingerprint":"f","id_bits":64,
    ///     "js_safe":false,"default_format":"decimal","generator_id":0,"ready":true,
    ///     "runs_out":null,"ids_per_second":4096000,"generators":1024,"auth":false}"#,
    /// )?;
    /// let info = grpc::NamespaceInfo::from(json.clone());
    /// assert_eq!(info.generator_id, Some(0));
    /// assert_eq!(idmint_proto::NamespaceInfo::from(info), json);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    crate::NamespaceInfo {
        name,
        layout,
        fingerprint,
        id_bits,
        js_safe,
        default_format,
        generator_id,
        ready,
        runs_out,
        ids_per_second,
        generators,
        auth,
        source,
        order,
        generator_ids,
        type_prefix,
    }
}

impl From<(String, crate::FieldJson)> for Field {
    /// # Example
    ///
    /// ```
    /// use idmint_proto::{FieldJson, grpc::{Field, field::Value}};
    ///
    /// let field = Field::from(("worker".to_owned(), FieldJson::Number(3)));
    /// assert_eq!(field.value, Some(Value::Number(3)));
    /// ```
    fn from((name, value): (String, crate::FieldJson)) -> Self {
        let value = match value {
            crate::FieldJson::Number(n) => field::Value::Number(n),
            crate::FieldJson::Text(t) => field::Value::Text(t),
        };
        Field { name, value: Some(value) }
    }
}
