//! Reading what an icicle node answers: the script's five numbers, the `INFO` fields of the
//! failover guard, and the IDs they make. No I/O.

use idmint_core::{Icicle, IcicleParts};
use redis::Value;

use super::{MAX_SHARD, guard::Lineage};

/// The script's reply: `{start_sequence, end_sequence, logical_shard_id, time_secs,
/// time_micros}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScriptReply {
    /// The first sequence of the range.
    pub(crate) start: i64,
    /// The last sequence of the range (inclusive).
    pub(crate) end: i64,
    /// The node's logical shard ID, −1 when missing.
    pub(crate) shard: i64,
    /// The node's `TIME`, seconds.
    pub(crate) secs: i64,
    /// The node's `TIME`, microseconds within the second.
    pub(crate) micros: i64,
}

impl ScriptReply {
    /// Reads the script's reply.
    ///
    /// # Errors
    ///
    /// A description of the unexpected reply.
    pub(crate) fn parse(value: &Value) -> Result<ScriptReply, String> {
        let unexpected = || format!("unexpected script reply {value:?}");
        let Value::Array(items) = value else { return Err(unexpected()) };
        let numbers: Vec<i64> = items
            .iter()
            .map(|item| match item {
                Value::Int(n) => Some(*n),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(unexpected)?;
        let [start, end, shard, secs, micros] = numbers[..] else { return Err(unexpected()) };
        Ok(ScriptReply { start, end, shard, secs, micros })
    }

    /// The logical shard, when it is one a generator may use (1..=1023).
    pub(crate) fn valid_shard(&self) -> Option<u16> {
        (1..=MAX_SHARD).contains(&self.shard).then_some(self.shard as u16)
    }

    /// The node's time in Unix ms, as icicle computes it: `secs · 1000 + micros / 1000`.
    ///
    /// # Errors
    ///
    /// A description, for a negative or overflowing time.
    pub(crate) fn time_ms(&self) -> Result<u64, String> {
        let ms = self
            .secs
            .checked_mul(1000)
            .and_then(|ms| ms.checked_add(self.micros / 1000))
            .filter(|_| (0..1_000_000).contains(&self.micros));
        ms.and_then(|ms| u64::try_from(ms).ok())
            .ok_or_else(|| format!("invalid node time {} s {} µs", self.secs, self.micros))
    }

    /// One ID per sequence value `start..=end`, for `shard` at `time_ms`.
    ///
    /// # Errors
    ///
    /// A description, for a range outside 0..=4095 or a time outside icicle's 41 bits.
    pub(crate) fn ids(&self, shard: u16, time_ms: u64) -> Result<Vec<Icicle>, String> {
        let max = Icicle::MAX_SEQUENCE as i64;
        if !(0 <= self.start && self.start <= self.end && self.end <= max) {
            return Err(format!(
                "sequence range {}..={} is not inside 0..={max} (is `{}` corrupt?)",
                self.start,
                self.end,
                super::SEQUENCE_KEY
            ));
        }
        let timestamp = time_ms.checked_sub(Icicle::EPOCH_MS).ok_or_else(|| {
            format!("node time {time_ms} ms is before icicle's epoch {}", Icicle::EPOCH_MS)
        })?;
        (self.start..=self.end)
            .map(|sequence| {
                let parts =
                    IcicleParts { timestamp, shard: shard.into(), sequence: sequence as u64 };
                Icicle::from_parts(parts).map_err(|e| format!("cannot build an id: {e}"))
            })
            .collect()
    }
}

/// The value of `field` in an `INFO` reply (`field:value` lines).
pub(crate) fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines().find_map(|line| {
        let value = line.strip_prefix(field)?.strip_prefix(':')?;
        Some(value.trim().to_owned())
    })
}

/// The text of an `INFO` reply.
pub(crate) fn info_text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::VerbatimString { text, .. } | Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

/// How many of the node's replicas are online (the `slaveN:…,state=online,…` lines of `INFO
/// replication`): replicas still in their first synchronisation are not counted, since `WAIT`
/// cannot count them yet. 0 on a replica or a standalone node.
pub(crate) fn replicas(replication: &Value) -> u64 {
    let Some(text) = info_text(replication) else { return 0 };
    let online = text.lines().filter(|line| {
        line.strip_prefix("slave").and_then(|rest| rest.split_once(':')).is_some_and(
            |(n, fields)| {
                n.bytes().all(|b| b.is_ascii_digit())
                    && fields.split(',').any(|f| f == "state=online")
            },
        )
    });
    online.count() as u64
}

/// The lineage from the replies to `INFO server` and `INFO replication`.
///
/// # Errors
///
/// A description, when a field is missing.
pub(crate) fn lineage(server: &Value, replication: &Value) -> Result<Lineage, String> {
    let field = |value: &Value, section: &str, name: &str| {
        info_text(value)
            .and_then(|text| info_field(&text, name))
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("`INFO {section}` has no `{name}`"))
    };
    Ok(Lineage {
        run_id: field(server, "server", "run_id")?,
        replid: field(replication, "replication", "master_replid")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(start: i64, end: i64, shard: i64) -> ScriptReply {
        ScriptReply { start, end, shard, secs: 1_700_000_000, micros: 123_999 }
    }

    #[test]
    fn parses_the_five_numbers() {
        let value = Value::Array([1, 9, 7, 1_700_000_000, 5].map(Value::Int).to_vec());
        assert_eq!(
            ScriptReply::parse(&value),
            Ok(ScriptReply { start: 1, end: 9, shard: 7, secs: 1_700_000_000, micros: 5 })
        );
        for bad in [
            Value::Nil,
            Value::Array([1, 2, 3, 4].map(Value::Int).to_vec()),
            Value::Array(vec![
                Value::Int(1),
                Value::Nil,
                Value::Int(1),
                Value::Int(1),
                Value::Int(1),
            ]),
        ] {
            assert!(ScriptReply::parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn shards_outside_1_to_1023_are_invalid() {
        let cases = [(-1, None), (0, None), (1, Some(1)), (1023, Some(1023)), (1024, None)];
        for (shard, valid) in cases {
            assert_eq!(reply(0, 0, shard).valid_shard(), valid, "{shard}");
        }
    }

    #[test]
    fn time_is_seconds_and_truncated_microseconds() {
        assert_eq!(reply(0, 0, 1).time_ms(), Ok(1_700_000_000_123));
        let bad = ScriptReply { micros: 1_000_000, ..reply(0, 0, 1) };
        assert!(bad.time_ms().is_err());
        let negative = ScriptReply { secs: -1, ..reply(0, 0, 1) };
        assert!(negative.time_ms().is_err());
    }

    #[test]
    fn ids_cover_the_range_in_order() {
        let ids = reply(4001, 4095, 7).ids(7, 1_700_000_000_123).expect("ids");
        assert_eq!(ids.len(), 95);
        let first = ids[0].into_parts();
        assert_eq!(
            first,
            IcicleParts {
                timestamp: 1_700_000_000_123 - Icicle::EPOCH_MS,
                shard: 7,
                sequence: 4001
            }
        );
        assert_eq!(ids[94].into_parts().sequence, 4095);
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(ids[0].timestamp_ms(), 1_700_000_000_123);
    }

    #[test]
    fn bad_ranges_and_times_make_no_ids() {
        for (start, end) in [(-5, 3), (5, 4), (0, 4096)] {
            assert!(reply(start, end, 1).ids(1, 1_700_000_000_000).is_err(), "{start}..={end}");
        }
        assert!(reply(0, 0, 1).ids(1, Icicle::EPOCH_MS - 1).is_err());
        assert!(reply(0, 0, 1).ids(1, Icicle::EPOCH_MS + (1 << 41)).is_err());
    }

    #[test]
    fn reads_info_fields() {
        let server =
            Value::BulkString(b"# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\n".to_vec());
        let replication = Value::BulkString(
            b"# Replication\r\nrole:master\r\nmaster_replid:def\r\nmaster_replid2:000\r\n".to_vec(),
        );
        let lineage = lineage(&server, &replication).expect("lineage");
        assert_eq!((lineage.run_id.as_str(), lineage.replid.as_str()), ("abc", "def"));
        assert!(super::lineage(&Value::Nil, &replication).is_err());
        assert_eq!(replicas(&replication), 0, "no connected_slaves field");
        let two = Value::BulkString(
            b"# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
              slave0:ip=127.0.0.1,port=7302,state=online,offset=9,lag=0\r\n\
              slave1:ip=127.0.0.1,port=7303,state=wait_bgsave,offset=0,lag=0\r\n\
              slave2:ip=127.0.0.1,port=7304,state=online,offset=9,lag=1\r\n"
                .to_vec(),
        );
        assert_eq!(replicas(&two), 2, "online replicas only");
        assert_eq!(
            info_field("master_replid2:x\nmaster_replid:y", "master_replid"),
            Some("y".into())
        );
    }
}
