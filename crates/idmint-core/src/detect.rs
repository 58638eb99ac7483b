//! Naming an ID of unknown origin: [`detect`] reads a text as every format it can be (idmint's
//! built-in layouts, and the formats of the private `formats` table: UUID v1–v8, ULID, KSUID,
//! xid, ObjectId, SCRU128, TSID, Discord, Instagram and Mastodon IDs, and TypeIDs), and ranks the readings
//! by how plausible they are.
//!
//! # Ranking
//!
//! Each candidate gets a score, highest first:
//! - **+3000** when the format has marker bits and they match (a UUID's version and variant,
//!   the Nil and Max UUIDs): 6 fixed bits are evidence no time can outweigh;
//! - **2000 to 2999** for a time inside [2000-01-01T00:00:00Z, now + 1 day], more the closer it
//!   is to now (2999 at now, 2000 at the window's far end);
//! - **1000** for a layout without time, or whose time wraps and is read relative to now (it
//!   says nothing about the ID);
//! - **0** for a time outside that window (before 2000, more than a day ahead, before 1970).
//!
//! Ties keep a text in its format's usual form first (a 64-bit layout read as hex when it
//! prints decimal comes after), then the table's order.

mod formats;
mod radix;

use crate::{
    any::AnyId, error::Error, field::FieldValue, format::Format, layout::Layout,
    text128::TypePrefix, uuid7::Uuid7,
};

use formats::{KNOWN, Known, Text};

/// 2000-01-01T00:00:00Z in Unix ms: the earliest time [`detect`] takes as plausible.
///
/// # Example
///
/// ```
/// assert_eq!(idmint_core::format_rfc3339_ms(idmint_core::PLAUSIBLE_FROM_MS), "2000-01-01T00:00:00.000Z");
/// ```
pub const PLAUSIBLE_FROM_MS: u64 = 946_684_800_000;

/// How far after now a time is still plausible (clocks disagree): one day.
const AHEAD_MS: u64 = 86_400_000;

/// One reading of an ID: a format it fits, its fields and time, and how plausible it is.
///
/// # Example
///
/// ```
/// let best = &idmint_core::detect("01ARZ3NDEKTSV4RRFFQ69G5FAV", 1_700_000_000_000)?[0];
/// assert_eq!(best.layout, "ulid");
/// assert_eq!(best.time_ms, Some(1_469_922_850_259));
/// assert_eq!(best.fields[0].name, "timestamp");
/// assert_eq!(best.fields[0].bits, Some(48));
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Candidate {
    /// The format's name: an idmint layout (`snowflake`, `hot-guid`, ...) or another format
    /// (`uuid-v7`, `ulid`, `discord`, ...).
    pub layout: String,
    /// What the format is, in one line.
    pub about: String,
    /// The ID as text: an idmint layout's usual form, else the text given.
    pub id: String,
    /// The ID as an integer of its width, for 64-bit and 128-bit formats; `None` for the other
    /// widths (xid's and ObjectId's 96 bits, KSUID's 160).
    pub value: Option<AnyId>,
    /// The fields, most significant first. Values wider than 64 bits are hex text.
    pub fields: Vec<DetectedField>,
    /// When the ID was made, in Unix ms; `None` for formats without time (or before 1970).
    pub time_ms: Option<u64>,
    /// The rank (see the module's ranking rule): higher is more plausible.
    pub score: u32,
    /// Why the candidate has its score.
    pub reason: String,
}

/// A field of a [`Candidate`].
///
/// # Example
///
/// ```
/// use idmint_core::{FieldValue, detect};
///
/// let v7 = &detect("017F22E2-79B0-7CC3-98C4-DC0C0C07398F", 1_700_000_000_000)?[0];
/// let version = v7.fields.iter().find(|f| f.name == "version").unwrap();
/// assert_eq!((&version.value, version.bits), (&FieldValue::Number(7), Some(4)));
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DetectedField {
    /// The field's name.
    pub name: String,
    /// Its value: a number up to 64 bits, else hex text.
    pub value: FieldValue,
    /// Its width in bits, for bit layouts (`None` for `decimal-id`'s decimal digits).
    pub bits: Option<u32>,
}

/// Every format `text` can be an ID of, most plausible first (see the module's ranking rule).
/// `now_ms` is the current time in Unix ms: it sets the plausible window and resolves times
/// that wrap.
///
/// # Errors
///
/// [`Error::Unrecognized`] when `text` fits no format, naming every format tried.
///
/// # Example
///
/// ```
/// use idmint_core::{detect, format_rfc3339_ms};
///
/// // Discord's documentation example: a bare integer fits many layouts, all listed.
/// let candidates = detect("175928847299117063", 1_700_000_000_000)?;
/// let discord = candidates.iter().find(|c| c.layout == "discord").unwrap();
/// assert_eq!(format_rfc3339_ms(discord.time_ms.unwrap()), "2016-04-30T11:18:25.796Z");
/// assert!(candidates.iter().any(|c| c.layout == "snowflake"));
/// assert!(candidates.windows(2).all(|w| w[0].score >= w[1].score));
/// assert!(detect("not an id", 1_700_000_000_000).is_err());
/// # Ok::<(), idmint_core::Error>(())
/// ```
pub fn detect(text: &str, now_ms: u64) -> Result<Vec<Candidate>, Error> {
    let text = text.trim();
    // (candidate, in its usual form)
    let mut found: Vec<(Candidate, bool)> = Vec::new();
    for known in KNOWN {
        if known.fallback
            && found.iter().any(|(c, _)| {
                KNOWN.iter().any(|k| k.name == c.layout && same_form(&k.text, &known.text))
            })
        {
            continue;
        }
        if let Some(candidate) =
            known.read(text).and_then(|bytes| reading(known, text, &bytes, now_ms))
        {
            found.push((candidate, true));
        }
    }
    if let Ok((prefix, value)) = crate::text128::parse_typeid(text) {
        found.push((typeid_reading(text, &prefix, value, now_ms), true));
    }
    for (name, _) in Layout::builtins() {
        let layout = Layout::builtin(name)?;
        let usual = layout.default_format();
        let mut forms = vec![(usual, true)];
        // A 64-bit layout read as hex too, when the text cannot be decimal.
        if layout.id_bits() == 64
            && usual != Format::Hex
            && text.bytes().any(|c| c.is_ascii_hexdigit() && !c.is_ascii_digit())
        {
            forms.push((Format::Hex, false));
        }
        for (format, is_usual) in forms {
            if let Ok(id) = layout.parse(text, format) {
                found.push((layout_reading(&layout, id, format, is_usual, now_ms)?, is_usual));
            }
        }
    }
    if found.is_empty() {
        let tried: Vec<&str> = KNOWN
            .iter()
            .map(|k| k.name)
            .chain(Layout::builtins().iter().map(|(name, _)| *name))
            .collect();
        return Err(Error::Unrecognized { text: shorten(text), tried: tried.join(", ") });
    }
    // Stable: equal ranks keep the table's order.
    found.sort_by(|(a, a_usual), (b, b_usual)| b.score.cmp(&a.score).then(b_usual.cmp(a_usual)));
    Ok(found.into_iter().map(|(candidate, _)| candidate).collect())
}

/// Whether two formats write text the same way (the same kind of [`Text`]).
fn same_form(a: &Text, b: &Text) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// When an ID was made, as far as its format tells.
enum Timing {
    /// The format has no time.
    None,
    /// A time that depends on `now` (wrapping seconds): no evidence either way.
    Relative(u64),
    /// A time in Unix ms.
    At(u64),
    /// A time that Unix ms cannot hold (before 1970).
    Before1970,
}

/// A candidate of a format of the table, if its marker bits, where it has some, match.
fn reading(known: &Known, text: &str, bytes: &[u8], now_ms: u64) -> Option<Candidate> {
    let bits = known.bits();
    let mut from = 0;
    let mut values: Vec<(&str, u32, u128)> = Vec::new();
    for &(name, width) in known.fields {
        values.push((name, width, radix::field(bytes, bits, from, width)));
        from += width;
    }
    let value_of = |name: &str| values.iter().find(|(n, _, _)| *n == name).map(|&(_, w, v)| (w, v));
    for (name, want) in known.fixed {
        if value_of(name).map(|(_, v)| v) != Some(*want) {
            return None;
        }
    }
    let timing = match &known.time {
        None => Timing::None,
        Some(time) => {
            let mut ticks: i128 = 0;
            for part in time.parts {
                let (width, value) = value_of(part)?;
                ticks = (ticks << width) | value as i128;
            }
            let ms = time.epoch_ms + ticks * time.num / time.den;
            u64::try_from(ms).map_or(Timing::Before1970, Timing::At)
        }
    };
    let fields = values
        .iter()
        .map(|&(name, width, value)| DetectedField {
            name: name.to_owned(),
            value: match u64::try_from(value) {
                Ok(n) if width <= 64 => FieldValue::Number(n),
                _ => FieldValue::Text(format!("{value:0w$x}", w = width.div_ceil(4) as usize)),
            },
            bits: Some(width),
        })
        .collect();
    let (score, reason) = rank(!known.fixed.is_empty(), &timing, now_ms);
    let id = match known.text {
        Text::Uuid => text.to_ascii_lowercase(),
        _ => text.to_owned(),
    };
    let value = match bits {
        64 | 128 => {
            let n = bytes.iter().fold(0u128, |n, &b| (n << 8) | u128::from(b));
            Some(if bits == 64 { AnyId::U64(n as u64) } else { AnyId::U128(n) })
        }
        _ => None,
    };
    Some(Candidate {
        layout: known.name.to_owned(),
        about: known.about.to_owned(),
        id,
        value,
        fields,
        time_ms: time_of(&timing),
        score,
        reason,
    })
}

/// A candidate of an idmint layout, for an ID that parsed and decoded in `format`.
fn layout_reading(
    layout: &Layout,
    id: AnyId,
    format: Format,
    usual: bool,
    now_ms: u64,
) -> Result<Candidate, Error> {
    let infos = if layout.segments().is_some() { layout.fields() } else { Vec::new() };
    let fields = layout
        .decode(id)?
        .into_iter()
        .map(|(name, value)| {
            let bits = infos.iter().find(|f| f.name == name).map(|f| f.bits);
            DetectedField { name, value, bits }
        })
        .collect();
    // A time that moves when `now` moves (trace-id's wrapping seconds) is no evidence.
    const TEN_YEARS_MS: u64 = 3_652 * 86_400_000;
    let timing = match layout.time_ms(id, now_ms)? {
        None => Timing::None,
        Some(ms) if layout.time_ms(id, now_ms.saturating_add(TEN_YEARS_MS))? != Some(ms) => {
            Timing::Relative(ms)
        }
        Some(ms) => Timing::At(ms),
    };
    let (score, mut reason) = rank(false, &timing, now_ms);
    if !usual {
        reason.push_str(&format!(
            "; read as {format}, not the layout's usual {}",
            layout.default_format()
        ));
    }
    Ok(Candidate {
        layout: layout.name().to_owned(),
        about: Layout::builtins()
            .iter()
            .find(|(name, _)| *name == layout.name())
            .map_or_else(String::new, |(_, about)| (*about).to_owned()),
        id: layout.format(id, layout.default_format())?,
        value: Some(id),
        fields,
        time_ms: time_of(&timing),
        score,
        reason,
    })
}

/// A candidate for a TypeID: its prefix, and its UUID's RFC 9562 fields when the UUID is a
/// version 7 (whose marker bits and time then rank it), else the UUID as hex.
fn typeid_reading(text: &str, prefix: &TypePrefix, value: u128, now_ms: u64) -> Candidate {
    let field =
        |name: &str, value: FieldValue, bits| DetectedField { name: name.to_owned(), value, bits };
    let mut fields = vec![field("prefix", FieldValue::Text(prefix.as_str().to_owned()), None)];
    let (marker, timing) = match Uuid7::from_u128(value) {
        Ok(id) => {
            let bits = |shift: u32, width: u32| (value >> shift) as u64 & ((1 << width) - 1);
            fields.extend([
                field("unix_ts_ms", FieldValue::Number(id.unix_ms()), Some(48)),
                field("version", FieldValue::Number(bits(76, 4)), Some(4)),
                field("rand_a", FieldValue::Number(bits(64, 12)), Some(12)),
                field("variant", FieldValue::Number(bits(62, 2)), Some(2)),
                field("rand_b", FieldValue::Number(bits(0, 62)), Some(62)),
            ]);
            (true, Timing::At(id.unix_ms()))
        }
        Err(_) => {
            fields.push(field("uuid", FieldValue::Text(format!("{value:032x}")), Some(128)));
            (false, Timing::None)
        }
    };
    let (score, why) = rank(marker, &timing, now_ms);
    let what = if marker { "a UUIDv7" } else { "a UUID of another version" };
    Candidate {
        layout: "typeid".to_owned(),
        about: "TypeID (jetify-com/typeid 0.3): a type prefix, `_`, and a UUID as 26 lower-case base32 characters".to_owned(),
        id: text.to_owned(),
        value: Some(AnyId::U128(value)),
        fields,
        time_ms: time_of(&timing),
        score,
        reason: format!("TypeID with prefix `{prefix}` holding {what}; {why}"),
    }
}

/// The time to show.
fn time_of(timing: &Timing) -> Option<u64> {
    match *timing {
        Timing::Relative(ms) | Timing::At(ms) => Some(ms),
        Timing::None | Timing::Before1970 => None,
    }
}

/// The score and its reason, by the module's ranking rule.
fn rank(marker: bool, timing: &Timing, now_ms: u64) -> (u32, String) {
    let until = now_ms.saturating_add(AHEAD_MS);
    let (points, why) = match *timing {
        Timing::None => (1000, "no time field".to_owned()),
        Timing::Relative(_) => (1000, "its time wraps and is read relative to now".to_owned()),
        Timing::Before1970 => (0, "time before 1970".to_owned()),
        Timing::At(ms) if ms < PLAUSIBLE_FROM_MS => (0, "time before 2000".to_owned()),
        Timing::At(ms) if ms > until => (0, "time more than a day after now".to_owned()),
        Timing::At(ms) => {
            let span = u128::from((until - PLAUSIBLE_FROM_MS).max(1));
            let distance = u128::from(ms.abs_diff(now_ms)).min(span);
            let closeness = 999 - distance * 999 / span;
            (2000 + closeness as u32, "time inside [2000-01-01, now + 1 day]".to_owned())
        }
    };
    if marker { (points + 3000, format!("marker bits match; {why}")) } else { (points, why) }
}

/// The text of an unrecognised ID as the error shows it: at most 40 characters.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_764_000_000_000; // 2025-11-24

    #[test]
    fn rank_follows_the_rule() {
        let check = |marker, timing: Timing, want: u32| {
            assert_eq!(rank(marker, &timing, NOW).0, want);
        };
        check(false, Timing::At(NOW), 2999);
        check(false, Timing::At(PLAUSIBLE_FROM_MS - 1), 0);
        check(false, Timing::At(NOW + AHEAD_MS + 1), 0);
        let span = NOW + AHEAD_MS - PLAUSIBLE_FROM_MS;
        check(false, Timing::At(NOW + AHEAD_MS), 2999 - (AHEAD_MS * 999 / span) as u32);
        check(
            false,
            Timing::At(PLAUSIBLE_FROM_MS),
            2999 - ((NOW - PLAUSIBLE_FROM_MS) * 999 / span) as u32,
        );
        check(false, Timing::None, 1000);
        check(false, Timing::Relative(NOW), 1000);
        check(true, Timing::None, 4000);
        check(false, Timing::Before1970, 0);
        // Any clock, however wild, ranks without overflow.
        assert_eq!(rank(false, &Timing::At(u64::MAX), u64::MAX).0, 2999);
        assert_eq!(rank(false, &Timing::At(PLAUSIBLE_FROM_MS), u64::MAX).0, 2000);
        assert_eq!(rank(false, &Timing::At(PLAUSIBLE_FROM_MS), 0).0, 0);
    }

    /// A TypeID is named with its prefix and its UUID's fields; a v7 one ranks first, by its
    /// marker bits and time; one of another version is still named, below; a bad one is not.
    #[test]
    fn typeids_are_recognised_and_ranked() {
        let found = detect("user_01h455vb4pex5vsknk084sn02q", NOW).unwrap();
        let best = &found[0];
        assert_eq!((best.layout.as_str(), best.time_ms), ("typeid", Some(1_688_096_058_518)));
        assert!(best.score >= 3000, "{best:?}");
        assert_eq!(best.fields[0].value, FieldValue::Text("user".into()));
        assert!(best.reason.contains("prefix `user`"), "{}", best.reason);
        let other = detect("prefix_0123456789abcdefghjkmnpqrs", NOW).unwrap();
        assert_eq!((other[0].layout.as_str(), other[0].score), ("typeid", 1000));
        // Without a prefix the text is a ULID too: both readings are listed.
        let bare = detect("01h455vb4pex5vsknk084sn02q", NOW).unwrap();
        let names: Vec<_> = bare.iter().map(|c| c.layout.as_str()).collect();
        assert!(names.contains(&"typeid") && names.contains(&"ulid"), "{names:?}");
        assert_eq!(bare[0].layout, "typeid", "the v7 marker bits rank it first");
        assert!(detect("User_01h455vb4pex5vsknk084sn02q", NOW).is_err());
    }

    /// Every reading carries the ID as an integer, the same whatever form the text is in;
    /// formats of other widths carry none.
    #[test]
    fn readings_carry_the_id_as_an_integer() {
        let v7 = Some(AnyId::U128(0x01890a5d_ac96_774b_bcce_b302099a8057));
        let discord = Some(AnyId::U64(175_928_847_299_117_063));
        let check = |text: &str, layout: &str, want: Option<AnyId>| {
            let found = detect(text, NOW).unwrap();
            let reading = found.iter().find(|c| c.layout == layout);
            let reading = reading.unwrap_or_else(|| panic!("{text}: no {layout} in {found:?}"));
            assert_eq!(reading.value, want, "{text} as {layout}");
        };
        check("user_01h455vb4pex5vsknk084sn02q", "typeid", v7);
        check("01H455VB4PEX5VSKNK084SN02Q", "ulid", v7);
        check("01890a5d-ac96-774b-bcce-b302099a8057", "uuid-v7", v7);
        check("01890A5D-AC96-774B-BCCE-B302099A8057", "uuid7", v7);
        check("175928847299117063", "discord", discord);
        check("175928847299117063", "snowflake", discord);
        check("9m4e2mr0ui3e8a215n4g", "xid", None);
        check("0ujtsYcgvSTl8PAuAdqWYSMnLOv", "ksuid", None);
    }
}
