//! The table of ID formats idmint does not generate but recognises: each entry describes
//! itself (name, text form, bit fields most significant first, marker bits, time rule), so
//! that [`detect`](super::detect) names no format. Sources: RFC 9562 (UUID), the ULID, KSUID,
//! xid, SCRU128 and TSID specifications, MongoDB's ObjectId reference, and the published bit
//! layouts of Discord, Instagram and Mastodon IDs (Twitter's is idmint's own `snowflake`).

use super::radix::{self, Digit};

/// How a format writes its IDs as text.
#[derive(Debug, Clone, Copy)]
pub(super) enum Text {
    /// RFC 9562's `8-4-4-4-12` hex form, also with braces, a `urn:uuid:` prefix, or as 32 hex
    /// digits without hyphens.
    Uuid,
    /// A number of exactly `chars` digits of `radix` in the alphabet `digit`; `pad` low bits
    /// (zero in canonical text) follow the ID's bits, as in base32 bit streams.
    Digits { chars: usize, radix: u32, digit: Digit, pad: u32 },
    /// A decimal integer up to `u64::MAX` (snowflake variants are written this way).
    Decimal,
}

/// When an ID was made, from its fields: `epoch_ms + value · num / den` in Unix ms, where
/// `value` is the named fields put side by side, most significant first.
#[derive(Debug)]
pub(super) struct Time {
    pub(super) parts: &'static [&'static str],
    pub(super) epoch_ms: i128,
    pub(super) num: i128,
    pub(super) den: i128,
}

/// One format: its fields' widths add up to its width in bits.
#[derive(Debug)]
pub(super) struct Known {
    pub(super) name: &'static str,
    pub(super) about: &'static str,
    pub(super) text: Text,
    pub(super) fields: &'static [(&'static str, u32)],
    /// Fields that must hold these values (UUID version and variant): a match is evidence.
    pub(super) fixed: &'static [(&'static str, u128)],
    pub(super) time: Option<Time>,
    /// Listed only when no other format of the same text form matched (the catch-all UUID).
    pub(super) fallback: bool,
}

impl Known {
    /// The format's width in bits.
    pub(super) fn bits(&self) -> u32 {
        self.fields.iter().map(|(_, w)| w).sum()
    }

    /// The ID's bits, big-endian, if `text` is in this format's text form.
    pub(super) fn read(&self, text: &str) -> Option<Vec<u8>> {
        let bits = self.bits();
        match self.text {
            Text::Uuid => uuid_hex(text).and_then(|hex| radix::number(&hex, 16, radix::hex, bits)),
            Text::Decimal => {
                (text.len() <= 20).then_some(())?;
                radix::number(text, 10, radix::decimal, bits)
            }
            Text::Digits { chars, radix, digit, pad } => {
                (text.len() == chars).then_some(())?;
                let padded = radix::number(text, radix, digit, bits + pad)?;
                if pad == 0 {
                    return Some(padded);
                }
                if radix::field(&padded, bits + pad, bits, pad) != 0 {
                    return None;
                }
                // Padded formats are whole bytes wide (see the test `every_format_is_whole`).
                let out = (0..bits / 8)
                    .map(|i| radix::field(&padded, bits + pad, i * 8, 8) as u8)
                    .collect();
                Some(out)
            }
        }
    }
}

/// The 32 hex digits of a UUID's text forms, or `None`.
fn uuid_hex(text: &str) -> Option<String> {
    let text = text.strip_prefix("urn:uuid:").unwrap_or(text);
    let text = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')).unwrap_or(text);
    let hyphens: Vec<usize> = text.match_indices('-').map(|(i, _)| i).collect();
    match (text.len(), &hyphens[..]) {
        (32, []) | (36, [8, 13, 18, 23]) => Some(text.replace('-', "")),
        _ => None,
    }
}

/// The UUID fields every RFC 9562 layout shares: 48 bits, version, 12 bits, variant, 62 bits.
macro_rules! uuid {
    ($name:literal, $about:literal, $version:literal, [$a:literal, $b:literal, $c:literal], $time:expr) => {
        Known {
            name: $name,
            about: $about,
            text: Text::Uuid,
            fields: &[($a, 48), ("version", 4), ($b, 12), ("variant", 2), ($c, 62)],
            fixed: &[("version", $version), ("variant", 0b10)],
            time: $time,
            fallback: false,
        }
    };
}

/// 100 ns intervals since 1582-10-15 (the Gregorian reform), UUID v1's and v6's clock.
const GREGORIAN_EPOCH_MS: i128 = -12_219_292_800_000;

/// Every format recognised besides idmint's own layouts, in the order candidates of equal
/// rank are listed.
pub(super) const KNOWN: &[Known] = &[
    Known {
        name: "uuid-nil",
        about: "RFC 9562 Nil UUID (all zero)",
        text: Text::Uuid,
        fields: &[("value", 128)],
        fixed: &[("value", 0)],
        time: None,
        fallback: false,
    },
    Known {
        name: "uuid-max",
        about: "RFC 9562 Max UUID (all one)",
        text: Text::Uuid,
        fields: &[("value", 128)],
        fixed: &[("value", u128::MAX)],
        time: None,
        fallback: false,
    },
    Known {
        name: "uuid-v1",
        about: "RFC 9562 UUID version 1: Gregorian 100 ns time (low field first), clock sequence, node",
        text: Text::Uuid,
        fields: &[
            ("time_low", 32),
            ("time_mid", 16),
            ("version", 4),
            ("time_high", 12),
            ("variant", 2),
            ("clock_seq", 14),
            ("node", 48),
        ],
        fixed: &[("version", 1), ("variant", 0b10)],
        time: Some(Time {
            parts: &["time_high", "time_mid", "time_low"],
            epoch_ms: GREGORIAN_EPOCH_MS,
            num: 1,
            den: 10_000,
        }),
        fallback: false,
    },
    Known {
        name: "uuid-v2",
        about: "DCE Security UUID version 2: local ID in place of the low time bits, local domain",
        text: Text::Uuid,
        fields: &[
            ("local_id", 32),
            ("time_mid", 16),
            ("version", 4),
            ("time_high", 12),
            ("variant", 2),
            ("clock_seq", 6),
            ("local_domain", 8),
            ("node", 48),
        ],
        fixed: &[("version", 2), ("variant", 0b10)],
        time: None,
        fallback: false,
    },
    uuid!(
        "uuid-v3",
        "RFC 9562 UUID version 3: MD5 of a name",
        3,
        ["md5_high", "md5_mid", "md5_low"],
        None
    ),
    uuid!(
        "uuid-v4",
        "RFC 9562 UUID version 4: random",
        4,
        ["random_a", "random_b", "random_c"],
        None
    ),
    uuid!(
        "uuid-v5",
        "RFC 9562 UUID version 5: SHA-1 of a name",
        5,
        ["sha1_high", "sha1_mid", "sha1_low"],
        None
    ),
    Known {
        name: "uuid-v6",
        about: "RFC 9562 UUID version 6: Gregorian 100 ns time (high field first), clock sequence, node",
        text: Text::Uuid,
        fields: &[
            ("time_high", 32),
            ("time_mid", 16),
            ("version", 4),
            ("time_low", 12),
            ("variant", 2),
            ("clock_seq", 14),
            ("node", 48),
        ],
        fixed: &[("version", 6), ("variant", 0b10)],
        time: Some(Time {
            parts: &["time_high", "time_mid", "time_low"],
            epoch_ms: GREGORIAN_EPOCH_MS,
            num: 1,
            den: 10_000,
        }),
        fallback: false,
    },
    uuid!(
        "uuid-v7",
        "RFC 9562 UUID version 7: 48-bit Unix ms, then random",
        7,
        ["unix_ts_ms", "rand_a", "rand_b"],
        Some(Time { parts: &["unix_ts_ms"], epoch_ms: 0, num: 1, den: 1 })
    ),
    uuid!(
        "uuid-v8",
        "RFC 9562 UUID version 8: custom",
        8,
        ["custom_a", "custom_b", "custom_c"],
        None
    ),
    Known {
        name: "uuid",
        about: "a UUID of another version or variant (not RFC 9562's)",
        text: Text::Uuid,
        fields: &[("high", 48), ("version", 4), ("mid", 12), ("variant", 3), ("low", 61)],
        fixed: &[],
        time: None,
        fallback: true,
    },
    Known {
        name: "ulid",
        about: "ULID: 48-bit Unix ms, 80 random bits; 26 Crockford base32 characters",
        text: Text::Digits { chars: 26, radix: 32, digit: radix::crockford, pad: 0 },
        fields: &[("timestamp", 48), ("randomness", 80)],
        fixed: &[],
        time: Some(Time { parts: &["timestamp"], epoch_ms: 0, num: 1, den: 1 }),
        fallback: false,
    },
    Known {
        name: "ksuid",
        about: "Segment KSUID: 32-bit seconds since 2014-05-13 (1.4e9), 128-bit payload; 27 base62 characters",
        text: Text::Digits { chars: 27, radix: 62, digit: radix::base62, pad: 0 },
        fields: &[("timestamp", 32), ("payload", 128)],
        fixed: &[],
        time: Some(Time { parts: &["timestamp"], epoch_ms: 1_400_000_000_000, num: 1000, den: 1 }),
        fallback: false,
    },
    Known {
        name: "xid",
        about: "rs/xid: 32-bit Unix seconds, 24-bit machine, 16-bit pid, 24-bit counter; 20 base32hex characters",
        text: Text::Digits { chars: 20, radix: 32, digit: radix::base32hex_lower, pad: 4 },
        fields: &[("timestamp", 32), ("machine", 24), ("pid", 16), ("counter", 24)],
        fixed: &[],
        time: Some(Time { parts: &["timestamp"], epoch_ms: 0, num: 1000, den: 1 }),
        fallback: false,
    },
    Known {
        name: "objectid",
        about: "MongoDB ObjectId: 32-bit Unix seconds, 40-bit random value, 24-bit counter; 24 hex digits",
        text: Text::Digits { chars: 24, radix: 16, digit: radix::hex, pad: 0 },
        fields: &[("timestamp", 32), ("random", 40), ("counter", 24)],
        fixed: &[],
        time: Some(Time { parts: &["timestamp"], epoch_ms: 0, num: 1000, den: 1 }),
        fallback: false,
    },
    Known {
        name: "xid-hex",
        about: "rs/xid's 12 bytes in hex (the same bytes as an ObjectId)",
        text: Text::Digits { chars: 24, radix: 16, digit: radix::hex, pad: 0 },
        fields: &[("timestamp", 32), ("machine", 24), ("pid", 16), ("counter", 24)],
        fixed: &[],
        time: Some(Time { parts: &["timestamp"], epoch_ms: 0, num: 1000, den: 1 }),
        fallback: false,
    },
    Known {
        name: "scru128",
        about: "SCRU128: 48-bit Unix ms, 24-bit counter_hi, 24-bit counter_lo, 32-bit entropy; 25 base36 characters",
        text: Text::Digits { chars: 25, radix: 36, digit: radix::base36, pad: 0 },
        fields: &[("timestamp", 48), ("counter_hi", 24), ("counter_lo", 24), ("entropy", 32)],
        fixed: &[],
        time: Some(Time { parts: &["timestamp"], epoch_ms: 0, num: 1, den: 1 }),
        fallback: false,
    },
    Known {
        name: "tsid",
        about: "TSID: 42-bit ms since 2020-01-01, 22-bit random (node and counter); 13 Crockford base32 characters",
        text: Text::Digits { chars: 13, radix: 32, digit: radix::crockford, pad: 0 },
        fields: &[("timestamp", 42), ("random", 22)],
        fixed: &[],
        time: Some(Time { parts: &["timestamp"], epoch_ms: 1_577_836_800_000, num: 1, den: 1 }),
        fallback: false,
    },
    Known {
        name: "tsid-number",
        about: "TSID as a 64-bit integer (its toLong form)",
        text: Text::Decimal,
        fields: &[("timestamp", 42), ("random", 22)],
        fixed: &[],
        time: Some(Time { parts: &["timestamp"], epoch_ms: 1_577_836_800_000, num: 1, den: 1 }),
        fallback: false,
    },
    Known {
        name: "discord",
        about: "Discord snowflake: 42-bit ms since 2015-01-01, 5-bit worker, 5-bit process, 12-bit increment",
        text: Text::Decimal,
        fields: &[("timestamp", 42), ("worker", 5), ("process", 5), ("increment", 12)],
        fixed: &[],
        time: Some(Time { parts: &["timestamp"], epoch_ms: 1_420_070_400_000, num: 1, den: 1 }),
        fallback: false,
    },
    Known {
        name: "instagram",
        about: "Instagram ID: 41-bit ms since 2011-08-24T21:07:01.721Z, 13-bit shard, 10-bit sequence",
        text: Text::Decimal,
        fields: &[("timestamp", 41), ("shard", 13), ("sequence", 10)],
        fixed: &[],
        time: Some(Time { parts: &["timestamp"], epoch_ms: 1_314_220_021_721, num: 1, den: 1 }),
        fallback: false,
    },
    Known {
        name: "mastodon",
        about: "Mastodon ID: 48-bit Unix ms, 16-bit sequence",
        text: Text::Decimal,
        fields: &[("timestamp", 48), ("sequence", 16)],
        fixed: &[],
        time: Some(Time { parts: &["timestamp"], epoch_ms: 0, num: 1, den: 1 }),
        fallback: false,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_is_whole() {
        for known in KNOWN {
            assert_eq!(known.bits() % 8, 0, "{}", known.name);
            for (name, _) in known.fixed {
                assert!(known.fields.iter().any(|(f, _)| f == name), "{}: {name}", known.name);
            }
            for part in known.time.iter().flat_map(|t| t.parts) {
                assert!(known.fields.iter().any(|(f, _)| f == part), "{}: {part}", known.name);
            }
        }
    }

    #[test]
    fn uuid_text_forms() {
        let check = |text: &str, ok: bool| assert_eq!(uuid_hex(text).is_some(), ok, "{text}");
        check("017f22e2-79b0-7cc3-98c4-dc0c0c07398f", true);
        check("{017f22e2-79b0-7cc3-98c4-dc0c0c07398f}", true);
        check("urn:uuid:017f22e2-79b0-7cc3-98c4-dc0c0c07398f", true);
        check("017f22e279b07cc398c4dc0c0c07398f", true);
        check("017f22e2-79b07-cc3-98c4-dc0c0c07398f", false);
        check("017f22e2-79b0-7cc3-98c4-dc0c0c07398", false);
    }
}
