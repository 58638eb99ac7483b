//! Arbitrary input never panics: text in any format for any layout, any 64- or 128-bit value,
//! any RFC 3339-like text, any custom layout configuration and any generator configuration.
//! Errors are fine; what is accepted must also read back the same.

use idmint_core::{
    AnyId, BitLayout, DecimalId, FieldConfig, FieldRole, Flake, Format, GeneratorConfig, HotGuid,
    Icicle, Js53, Lable, LableMode, Layout, LayoutConfig, Snowflake, Sonyflake, TraceId,
    TraceIdValidator, detect, format_rfc3339_ms, parse_rfc3339_ms,
};
use proptest::{prelude::*, sample::select};

use crate::common::{custom_layout, short_lived_layout};

fn any_layout() -> impl Strategy<Value = Layout> {
    let mut layouts: Vec<Layout> = Layout::builtins()
        .iter()
        .map(|(name, _)| Layout::builtin(name).expect("a built-in layout"))
        .collect();
    layouts.push(Layout::custom(custom_layout()));
    layouts.push(Layout::custom(short_lived_layout()));
    layouts.push(Layout::builtin("flake").and_then(|l| l.with_epoch(u64::MAX)).expect("an epoch"));
    select(layouts)
}

fn any_format() -> impl Strategy<Value = Format> {
    select(Format::ALL.to_vec())
}

/// Characters that matter to the parsers, and some that are several bytes long.
fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        any::<char>(),
        select("0189aAfFzZoOiIlLuU-_+/=:. TtZz\u{e9}\u{20ac}\u{1d11e}".chars().collect::<Vec<_>>())
    ]
}

/// `text` with characters replaced, inserted or removed (positions taken modulo the length).
fn mutate(text: String, edits: Vec<(usize, u8, char)>) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for (at, how, c) in edits {
        let at = at % (chars.len() + 1);
        match how % 3 {
            0 if at < chars.len() => chars[at] = c,
            1 => chars.insert(at, c),
            _ if at < chars.len() => {
                chars.remove(at);
            }
            _ => chars.push(c),
        }
    }
    chars.into_iter().collect()
}

fn edits() -> impl Strategy<Value = Vec<(usize, u8, char)>> {
    prop::collection::vec((any::<usize>(), any::<u8>(), tricky_char()), 0..4)
}

/// Random text, text of a format's alphabet, and valid IDs of every format slightly damaged.
fn any_text() -> impl Strategy<Value = String> {
    let near_valid = (any::<u128>(), any::<bool>(), any_format(), edits()).prop_map(
        |(value, wide, format, edits)| {
            let text =
                if wide { format.encode_u128(value) } else { format.encode_u64(value as u64) };
            mutate(text.unwrap_or_default(), edits)
        },
    );
    prop_oneof![
        "\\PC{0,48}",
        "[0-9a-zA-Z+/=_-]{0,45}",
        "[01]{60,130}",
        "[0-9a-fA-F-]{30,40}",
        near_valid,
    ]
}

/// RFC 3339-like text: valid renderings damaged, and well-formed text with wild numbers.
fn any_time_text() -> impl Strategy<Value = String> {
    let damaged = (any::<u64>(), edits())
        .prop_map(|(ms, edits)| mutate(format_rfc3339_ms(ms % 300_000_000_000_000), edits));
    // One character swapped for a multi-byte one: byte positions and character positions part.
    let wide = (any::<u64>(), any::<usize>(), select(vec!['\u{e9}', '\u{20ac}', '\u{1d11e}']))
        .prop_map(|(ms, at, c)| {
            mutate(format_rfc3339_ms(ms % 300_000_000_000_000), vec![(at, 0, c)])
        });
    prop_oneof![
        damaged,
        wide,
        "[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,12})?(Z|z|[+-][0-9]{2}:[0-9]{2})",
        "\\PC{18,26}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// `Layout::parse` in any format, and every other text parser, on arbitrary text.
    #[test]
    fn parsing_any_text(layout in any_layout(), format in any_format(), text in any_text()) {
        if let Ok(id) = layout.parse(&text, format) {
            // What is accepted is a valid ID that writes and reads back the same.
            layout.decode(id)?;
            let written = layout.format(id, format)?;
            prop_assert_eq!(layout.parse(&written, format)?, id);
        }
        let _ = format.parse_u64(&text);
        let _ = format.parse_u128(&text);
        let _ = text.parse::<Snowflake>();
        let _ = text.parse::<Sonyflake>();
        let _ = text.parse::<Icicle>();
        let _ = text.parse::<Js53>();
        let _ = text.parse::<Flake>();
        let _ = text.parse::<Lable>();
        let _ = text.parse::<TraceId>();
        let _ = text.parse::<DecimalId>();
        let _ = text.parse::<HotGuid>();
        let _ = text.parse::<Format>();
        let _ = text.parse::<LableMode>();
        let _ = Layout::builtin(&text);
        let _ = parse_rfc3339_ms(&text);
    }

    /// `detect` (`decode --layout auto`) on arbitrary text and text of the other formats'
    /// alphabets, with any clock: candidates or an error, best first, never a panic.
    #[test]
    fn detecting_any_text(
        text in prop_oneof![
            any_text(),
            "[0-9A-Za-z]{12,28}",
            "[0-9a-v]{19,21}",
            "(urn:uuid:|\\{)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\\}?",
            "[0-9]{1,22}",
        ],
        now in prop_oneof![any::<u64>(), 1_600_000_000_000u64..1_900_000_000_000],
    ) {
        match detect(&text, now) {
            Ok(candidates) => {
                prop_assert!(!candidates.is_empty());
                prop_assert!(candidates.windows(2).all(|w| w[0].score >= w[1].score));
            }
            Err(err) => prop_assert!(err.to_string().contains("tried: ")),
        }
    }

    /// RFC 3339 parsing of damaged and wild times; what is accepted renders back to itself.
    #[test]
    fn parsing_any_time(text in any_time_text()) {
        if let Ok(ms) = parse_rfc3339_ms(&text) {
            prop_assert_eq!(parse_rfc3339_ms(&format_rfc3339_ms(ms)), Ok(ms));
        }
    }

    /// Decoding any value, for every layout and every typed ID.
    #[test]
    fn decoding_any_value(layout in any_layout(), narrow in any::<u64>(), wide in any::<u128>(), now in any::<u64>()) {
        for id in [AnyId::U64(narrow), AnyId::U128(wide)] {
            if layout.decode(id).is_ok() {
                let _ = layout.time_ms(id, now)?;
            }
        }
        let _ = Snowflake::from_raw(narrow).map(|id| (id.into_parts(), id.timestamp_ms()));
        let _ = Sonyflake::from_raw(narrow).map(|id| (id.into_parts(), id.timestamp_ms()));
        let _ = Icicle::from_raw(narrow).map(|id| (id.into_parts(), id.timestamp_ms()));
        let _ = Js53::from_raw(narrow).map(|id| (id.into_parts(), id.timestamp_ms()));
        let _ = Flake::from_raw(narrow).map(|id| (id.into_parts(), id.timestamp_ms(now)));
        let _ = Lable::from_raw(narrow).map(Lable::into_parts);
        let _ = TraceId::from_raw(narrow).map(|id| (id.into_parts(), id.unix_secs_near(now)));
        let _ = DecimalId::from_raw(narrow).map(DecimalId::into_parts);
        let _ = TraceIdValidator::default().max_time_difference_secs(now).validate(narrow, now);
        let guid = HotGuid::from_u128(wide);
        let _ = (guid.into_parts(), guid.to_sql_guid_bytes(), guid.shard_key(), guid.unix_timestamp());
    }

    /// Any custom layout configuration is validated without panicking, and a layout it
    /// accepts can be explained, encoded and generated.
    #[test]
    fn layout_configs(config in layout_config(), now in any::<u64>(), raw in any::<u64>()) {
        if let Ok(bits) = BitLayout::try_from(config) {
            let layout = Layout::custom(bits.clone());
            let _ = (bits.capacity(), layout.fields(), layout.segments(), layout.capacity());
            let _ = layout.decode(AnyId::U64(raw)).map(|fields| layout.encode(&fields));
            if let Ok(generator) = layout.generator(&[], &GeneratorConfig::default()) {
                let _ = generator.next(now);
                let _ = generator.next_batch(now, 3).map(|n| n.map(Iterator::count));
                let _ = generator.set_ceiling_ms(now);
            }
        }
    }

    /// Any generator configuration and any clock readings.
    #[test]
    fn generator_configs(
        layout in any_layout(),
        config in generator_config(),
        readings in prop::collection::vec((any::<u64>(), 1..5u64), 1..6),
    ) {
        if let Ok(generator) = layout.generator(&[], &config) {
            for (now, n) in readings {
                let _ = generator.next(now);
                let _ = generator.next_batch(now, n).map(|next| next.map(Iterator::count));
                let _ = generator.set_ceiling_ms(now / 2);
                let _ = generator.last_ms();
            }
        }
    }
}

fn wild_u64() -> impl Strategy<Value = u64> {
    prop_oneof![any::<u64>(), Just(0), Just(1), Just(u64::MAX), 0..10_000u64]
}

fn generator_config() -> impl Strategy<Value = GeneratorConfig> {
    (wild_u64(), wild_u64(), prop::option::of(wild_u64())).prop_map(
        |(max_backward_ms, borrow_ms, start_above_ms)| GeneratorConfig {
            max_backward_ms,
            borrow_ms,
            start_above_ms,
        },
    )
}

fn layout_config() -> impl Strategy<Value = LayoutConfig> {
    let width = || prop_oneof![0..=64u32, any::<u32>(), Just(u32::MAX), Just(u32::MAX / 2 + 1)];
    let role =
        select(vec![FieldRole::Time, FieldRole::Sequence, FieldRole::Node, FieldRole::Other]);
    let name = || prop_oneof!["[a-z_-]{0,6}", "\\PC{0,6}", Just("timestamp".to_owned())];
    let field =
        (name(), width(), role).prop_map(|(name, bits, role)| FieldConfig { name, bits, role });
    let epoch = prop::option::of(prop_oneof![any_time_text(), "\\PC{0,30}"]);
    (
        name(),
        prop_oneof![Just(63u32), Just(64), width()],
        epoch,
        prop::option::of(wild_u64()),
        wild_u64(),
        prop::collection::vec(field, 0..6),
    )
        .prop_map(|(name, bits, epoch, epoch_ms, tick_ms, fields)| LayoutConfig {
            name,
            bits,
            epoch,
            epoch_ms,
            tick_ms,
            fields,
        })
}
