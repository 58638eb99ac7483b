//! The edges where idmint reads what the original programs print or read: go-flakeid's
//! unpadded `%x` hex (also after `0x`), Sonyflake v2's start rounding and wide time ranges, and the N, B, P and X forms of .NET's `Guid.Parse` for HotGuid (each names
//! the same ID as the canonical form; other texts are still refused), a TraceId a little ahead
//! of the clock, and TraceId's counter 0.

use idmint_core::{AnyId, Format, Layout, TraceId, TraceIdParts};

/// One text of one layout, and the canonical text it must equal (`None`: it must be refused).
struct Case {
    layout: &'static str,
    format: Format,
    text: &'static str,
    same_as: Option<&'static str>,
}

#[track_caller]
fn check(cases: &[Case]) {
    for case in cases {
        let layout = Layout::builtin(case.layout).expect("a built-in layout");
        let parsed = layout.parse(case.text, case.format);
        match case.same_as {
            Some(canonical) => {
                let want = layout.parse(canonical, case.format).expect("the canonical form");
                assert_eq!(parsed.ok(), Some(want), "{} {}", case.layout, case.text);
            }
            None => assert!(parsed.is_err(), "{} {} must be refused", case.layout, case.text),
        }
    }
}

#[test]
fn go_flakeid_unpadded_hex() {
    let hex = |text, same_as| Case { layout: "flake", format: Format::Hex, text, same_as };
    check(&[
        // go-flakeid's README prints `fmt.Printf("%x", id)`: no leading zeros.
        hex("1530d02cb005000", Some("01530d02cb005000")),
        hex("1530D02CB005000", Some("01530d02cb005000")),
        hex("5", Some("0000000000000005")),
        hex("0", Some("0000000000000000")),
        hex("597ed977c6ce7005", Some("597ed977c6ce7005")),
        // What `%x` never prints: leading zeros short of 16 digits, too many digits, no digits.
        hex("01530d02cb005000", Some("01530d02cb005000")),
        hex("0530d02cb005000", None),
        hex("597ed977c6ce70051", None),
        hex("", None),
        // `%#x` and `0x%x` put 0x in front; after it, the same rules.
        hex("0x1530d02cb005000", Some("01530d02cb005000")),
        hex("0X1530D02CB005000", Some("01530d02cb005000")),
        hex("0x0", Some("0000000000000000")),
        hex("0x", None),
        hex("0x01530d02cb005000", None),
        hex("0x0530d02cb005000", None),
        hex("00x1530d02cb005000", None),
    ]);
    assert_eq!(
        Layout::builtin("flake").and_then(|l| l.parse("1530d02cb005000", Format::Hex)).ok(),
        Some(AnyId::U64(0x0153_0d02_cb00_5000))
    );
    // The other layouts keep their exact widths.
    let snowflake = Case { layout: "snowflake", format: Format::Hex, text: "5", same_as: None };
    check(&[snowflake]);
}

#[test]
fn dotnet_guid_forms_of_hot_guid() {
    const D: &str = "61ff0f80-981e-12e9-3401-e241d0000000";
    let guid = |text, same_as| Case { layout: "hot-guid", format: Format::Uuid, text, same_as };
    check(&[
        guid("61ff0f80981e12e93401e241d0000000", Some(D)),
        guid("{61ff0f80-981e-12e9-3401-e241d0000000}", Some(D)),
        guid("(61FF0F80-981E-12E9-3401-E241D0000000)", Some(D)),
        guid("{0x61ff0f80,0x981e,0x12e9,{0x34,0x01,0xe2,0x41,0xd0,0x00,0x00,0x00}}", Some(D)),
        guid("{0X61FF0F80,0X981E,0X12E9,{0X34,0X01,0XE2,0X41,0XD0,0X00,0X00,0X00}}", Some(D)),
        // Broken shapes.
        guid("{61ff0f80-981e-12e9-3401-e241d0000000)", None),
        guid("61ff0f80981e12e93401e241d000000", None),
        guid("{0x61ff0f80,0x981e,0x12e9,{0x34,0x01,0xe2,0x41,0xd0,0x00,0x00}}", None),
        guid("{0x61ff0f8,0x981e,0x12e9,{0x34,0x01,0xe2,0x41,0xd0,0x00,0x00,0x00}}", None),
        guid("{61ff0f80,0x981e,0x12e9,{0x34,0x01,0xe2,0x41,0xd0,0x00,0x00,0x00}}", None),
        guid("[61ff0f80-981e-12e9-3401-e241d0000000]", None),
    ]);
}

/// A TraceId's 25-bit seconds read near a clock: ahead of it by up to a day is the near future
/// (a server whose clock is ahead, or that issues above a stored mark after a restart), more
/// is one period (2^25 s, about 388 days) back.
#[test]
fn trace_id_seconds_near_the_clock() {
    const NOW_S: u64 = 1_800_000_000;
    let period = 1 << TraceId::TIMESTAMP_BITS;
    for (issued_s, read_as) in [
        (NOW_S, NOW_S),
        (NOW_S - 10, NOW_S - 10),
        (NOW_S + 3, NOW_S + 3),
        (NOW_S + TraceId::FUTURE_SECS, NOW_S + TraceId::FUTURE_SECS),
        (NOW_S + TraceId::FUTURE_SECS + 1, NOW_S + TraceId::FUTURE_SECS + 1 - period),
        (NOW_S - period + TraceId::FUTURE_SECS + 1, NOW_S - period + TraceId::FUTURE_SECS + 1),
    ] {
        let parts =
            TraceIdParts { timestamp: issued_s % period, node_no: 1, chunk_no: 0, counter: 1 };
        let id = TraceId::from_parts(parts).expect("an id");
        assert_eq!(id.unix_secs_near(NOW_S * 1000 + 999), read_as, "issued at {issued_s}");
        let layout = Layout::builtin("trace-id").expect("trace-id");
        let ms = layout.time_ms(AnyId::U64(id.to_raw()), NOW_S * 1000).expect("a time");
        assert_eq!(ms, Some(read_as * 1000), "issued at {issued_s}");
    }
}

/// What decoding accepts, encoding packs back, counter 0 included; only 0 and bit 63 are
/// refused (elfo's validator's rules).
#[test]
fn trace_id_decode_and_encode_agree_on_counter_0() {
    let layout = Layout::builtin("trace-id").expect("trace-id");
    for raw in [1_u64 << 38, (5 << 38) | (7 << 22) | (9 << 10), 1 << 22, 1 << 10, 1] {
        let fields = layout.decode(AnyId::U64(raw)).expect("decodes");
        assert_eq!(layout.encode(&fields).ok(), Some(AnyId::U64(raw)), "{raw:#x}");
    }
    let zero = TraceIdParts { timestamp: 0, node_no: 0, chunk_no: 0, counter: 0 };
    assert_eq!(TraceId::from_parts(zero), Err(idmint_core::Error::Zero));
    assert_eq!(TraceId::from_raw(1 << 63), Err(idmint_core::Error::HighestBitSet));
}

/// Sonyflake counts `floor(now / 10 ms) − floor(start / 10 ms)`: a start time that is not a
/// multiple of the unit is rounded down, for generating and for decoding alike.
#[test]
fn sonyflake_start_time_rounds_down_to_its_unit() {
    const START: u64 = 1_409_529_600_000;
    let node = [("machine".to_string(), idmint_core::FieldValue::Number(1))];
    for (start, now, elapsed) in [
        (START + 7, START + 13, 1),
        (START + 7, START + 9, 0),
        (START + 9, START + 10, 1),
        (START, START + 13, 1),
    ] {
        let layout =
            Layout::builtin("sonyflake").and_then(|l| l.with_epoch(start)).expect("layout");
        assert_eq!(layout.epoch_ms(), Some(START), "start {start}");
        let config = idmint_core::GeneratorConfig::default();
        let id = layout.generator(&node, &config).expect("generator").next(now).expect("next");
        let id = id.ready().expect("an id at once");
        let fields = layout.decode(id).expect("decodes");
        assert_eq!(fields[0], crate::common::num("timestamp", elapsed), "start {start}, now {now}");
        assert_eq!(layout.time_ms(id, now).expect("time"), Some(START + 10 * elapsed));
    }
}

/// Sonyflake v2 as upstream's `v2` package treats a start that is not a whole time unit: it
/// counts `floor(now / unit) − floor(start / unit)`, so ID 16777215 (time 0, sequence 255,
/// machine 65535) under start 1735689600005 is 2025-01-01T00:00:00.000Z, through `with_epoch`
/// (the CLI's `--epoch`) as through the settings. The negative control is the unrounded epoch.
#[test]
fn sonyflake_v2_rounds_a_start_down_to_its_unit_however_it_is_set() {
    use idmint_core::SonyflakeV2;
    let start = 1_735_689_600_005;
    let by_epoch =
        Layout::builtin("sonyflake-v2").and_then(|l| l.with_epoch(start)).expect("epoch");
    let by_settings = SonyflakeV2 { start_ms: Some(start), ..SonyflakeV2::default() };
    let by_settings = Layout::custom(by_settings.bit_layout().expect("settings"));
    for layout in [&by_epoch, &by_settings] {
        assert_eq!(
            layout.time_ms(AnyId::U64(16_777_215), 0).expect("time"),
            Some(1_735_689_600_000)
        );
    }
    let unrounded = idmint_core::SonyflakeV2::LAYOUT.epoch_ms() + 5;
    assert_ne!(Some(unrounded), by_epoch.time_ms(AnyId::U64(16_777_215), 0).expect("time"));
}

/// Settings upstream accepts whose time range runs past 64-bit Unix milliseconds are accepted
/// too: they encode and decode, and their capacity has no end. An ID whose time lies past the
/// last 64-bit millisecond has no Unix time, rather than a wrapped one.
#[test]
fn sonyflake_v2_accepts_what_upstream_accepts() {
    use idmint_core::{FieldValue, SonyflakeV2};
    // (bits_sequence, bits_machine_id, time_unit_ms)
    for (sequence, machine, unit) in [(1, 1, 10), (4, 4, 1_000), (1, 1, 3_600_000)] {
        let settings = SonyflakeV2 {
            bits_sequence: sequence,
            bits_machine_id: machine,
            time_unit_ms: unit,
            ..SonyflakeV2::default()
        };
        let bits = settings.bit_layout().unwrap_or_else(|e| panic!("{settings:?}: {e}"));
        assert_eq!(bits.capacity().end_ms, None, "{settings:?}");
        let layout = Layout::custom(bits);
        let fields = [("time", 3), ("sequence", 1), ("machine", 1)]
            .map(|(name, value)| (name.to_string(), FieldValue::Number(value)));
        let id = layout.encode(&fields).expect("encode");
        assert_eq!(layout.decode(id).expect("decode"), fields.to_vec(), "{settings:?}");
        let start = SonyflakeV2::DEFAULT_START_MS - SonyflakeV2::DEFAULT_START_MS % unit;
        assert_eq!(layout.time_ms(id, 0).expect("time"), Some(start + 3 * unit));
        let past = AnyId::U64(u64::MAX >> 1);
        assert_eq!(layout.time_ms(past, 0).expect("time"), None, "{settings:?}: past u64 ms");
    }
}
