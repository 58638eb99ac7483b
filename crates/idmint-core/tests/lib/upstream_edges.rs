//! The edges where idmint reads what the original programs print or read, beyond its own strict
//! text forms: go-flakeid's unpadded `%x` hex, and the N, B, P and X forms of .NET's
//! `Guid.Parse` for HotGuid. Each form must name the same ID as the canonical one, and a text
//! that is none of them is still refused.

use idmint_core::{AnyId, Format, Layout};

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
        hex("0x1530d02cb005000", None),
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
