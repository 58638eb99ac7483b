//! The decoder of the `Stream` call's messages in the load client: a message that holds only
//! `repeated fixed64 ids` (what idmint sends by default) is read with one loop over its bytes,
//! and anything else goes to prost unchanged.
//!
//! Why: the load client shares the two cores with the server it measures, and prost reads a
//! packed `repeated fixed64` one ID at a time through `Buf` (30 % of the client's CPU samples on
//! `wide`), while ferroid's chunks and idmint's packed bytes are read with one slice loop. The
//! same work per ID on every side leaves the server the same CPU.

use bytes::{Buf, Bytes};
use idmint_proto::grpc::{IdBatch, StreamRequest};
use prost::Message;
use tonic::{
    Status,
    codec::{Codec, DecodeBuf, Decoder},
};
use tonic_prost::ProstCodec;

/// The tag of field 1 (`ids`) as a length-delimited (packed) field.
const IDS_PACKED_TAG: u8 = 1 << 3 | 2;

/// Encodes `StreamRequest` with prost, decodes `IdBatch` with [`decode_batch`].
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BatchCodec;

impl Codec for BatchCodec {
    type Encode = StreamRequest;
    type Decode = IdBatch;
    type Encoder = <ProstCodec<StreamRequest, IdBatch> as Codec>::Encoder;
    type Decoder = BatchDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<StreamRequest, IdBatch>::default().encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        BatchDecoder
    }
}

/// The decoding half of [`BatchCodec`].
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BatchDecoder;

impl Decoder for BatchDecoder {
    type Item = IdBatch;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<IdBatch>, Status> {
        let message = src.copy_to_bytes(src.remaining());
        decode_batch(message).map(Some).map_err(|e| Status::internal(e.to_string()))
    }
}

/// One `IdBatch` from its protobuf bytes: what prost decodes, always.
pub(crate) fn decode_batch(message: Bytes) -> Result<IdBatch, prost::DecodeError> {
    match only_ids(&message) {
        Some(ids) => Ok(IdBatch { ids, ..IdBatch::default() }),
        None => IdBatch::decode(message),
    }
}

/// The IDs of a message made of exactly one packed `ids` field of whole IDs; `None` for any
/// other message (which prost then reads, or refuses).
fn only_ids(message: &[u8]) -> Option<Vec<u64>> {
    let (&tag, mut rest) = message.split_first()?;
    if tag != IDS_PACKED_TAG {
        return None;
    }
    let len = prost::encoding::decode_varint(&mut rest).ok()?;
    if usize::try_from(len).ok()? != rest.len() || rest.len() % 8 != 0 {
        return None;
    }
    Some(le_u64s(rest).collect())
}

/// The 64-bit IDs of little-endian bytes (8 per ID: protobuf's `fixed64`, and ferroid's
/// chunks), in order; a trailing partial ID is ignored, as in `idmint_proto::be_u64s`.
pub(crate) fn le_u64s(bytes: &[u8]) -> impl ExactSizeIterator<Item = u64> + '_ {
    bytes.chunks_exact(8).map(|chunk| {
        let mut id = [0; 8];
        id.copy_from_slice(chunk);
        u64::from_le_bytes(id)
    })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use idmint_proto::grpc::IdBatch;
    use proptest::prelude::*;
    use prost::Message;

    use super::decode_batch;

    /// `decode_batch` on `bytes` answers exactly what prost answers.
    fn check(bytes: Vec<u8>) {
        let ours = decode_batch(Bytes::from(bytes.clone())).map_err(|e| e.to_string());
        let prost = IdBatch::decode(bytes.as_slice()).map_err(|e| e.to_string());
        assert_eq!(ours, prost, "{bytes:02x?}");
    }

    fn encoded(batch: &IdBatch) -> Vec<u8> {
        batch.encode_to_vec()
    }

    #[test]
    fn every_message_form_reads_as_prost_reads_it() {
        let ids = |ids: Vec<u64>| IdBatch { ids, ..IdBatch::default() };
        for bytes in [
            encoded(&ids(vec![1, u64::MAX, 0x0102_0304_0506_0708])),
            encoded(&ids(Vec::new())),
            encoded(&ids((0..4096).map(|i| i << 22 | 7).collect())),
            encoded(&IdBatch { packed: vec![1; 16], id_bytes: 8, ..IdBatch::default() }),
            encoded(&IdBatch { ids128: vec![2; 16], ..IdBatch::default() }),
            encoded(&IdBatch { ids: vec![5], packed: vec![1; 8], ..IdBatch::default() }),
            // The same IDs unpacked (field 1 as fixed64, one tag per ID): legal protobuf.
            vec![0x09, 1, 0, 0, 0, 0, 0, 0, 0, 0x09, 2, 0, 0, 0, 0, 0, 0, 0],
            // Packed, then a second packed run: prost appends it.
            vec![0x0a, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0x0a, 8, 2, 0, 0, 0, 0, 0, 0, 0],
            // A partial ID, a length past the end, a truncated length: prost refuses them.
            vec![0x0a, 7, 1, 0, 0, 0, 0, 0, 0],
            vec![0x0a, 16, 1, 0, 0, 0, 0, 0, 0, 0],
            vec![0x0a, 0x80],
        ] {
            check(bytes);
        }
    }

    proptest! {
        #[test]
        fn any_ids_round_trip(ids in proptest::collection::vec(any::<u64>(), 0..600)) {
            let batch = IdBatch { ids, ..IdBatch::default() };
            prop_assert_eq!(decode_batch(Bytes::from(encoded(&batch))).ok(), Some(batch));
        }
    }
}
