//! `idmint convert`: writes IDs of any form `decode --layout auto` reads in another form (uuid,
//! ulid, typeid with or without a prefix, decimal, hex); and [`Forms`], the text forms of a
//! 128-bit ID that `decode` shows.

use std::{io::Write, str::FromStr};

use anyhow::{anyhow, bail};
use idmint_core::{
    AnyId, Candidate, Clock, FieldValue, Format, SystemClock, Text128, TypePrefix, detect,
};
use serde::Serialize;

use crate::decode::{each_id, shorten};

/// The arguments of `idmint convert`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Each ID is read as `idmint decode --layout auto` reads it (a UUID, ULID,
TypeID, KSUID, ..., or an ID of a built-in layout in its usual form), and the best candidate is
converted; a decimal above 2^64 - 1 is read as a 128-bit ID. uuid, ulid and typeid need a
128-bit ID; decimal and hex take 64-bit and 128-bit IDs (hex with every digit: 16 or 32). `--to typeid` keeps the prefix of a TypeID given (none for
other forms); `--to typeid:PREFIX` writes that prefix.

Examples:
  idmint convert --to uuid user_01h455vb4pex5vsknk084sn02q
  idmint convert --to typeid:user 01890a5d-ac96-774b-bcce-b302099a8057
  idmint convert --to decimal 01H455VB4PEX5VSKNK084SN02Q
  idmint gen --layout uuid7 -n 3 | idmint convert --to ulid")]
pub(crate) struct Args {
    /// The form to write: uuid, ulid, typeid (the input's prefix, if any), typeid:PREFIX,
    /// decimal or hex.
    #[arg(long, value_name = "FORM")]
    to: Target,

    /// The IDs to convert. With none, or `-`, they are read from stdin, one per line (blank
    /// lines are skipped).
    #[arg(value_name = "ID")]
    ids: Vec<String>,
}

/// A form `--to` names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// The hyphenated UUID.
    Uuid,
    /// A ULID.
    Ulid,
    /// A TypeID: with this prefix, or with the input's (`None`).
    TypeId(Option<TypePrefix>),
    /// Decimal digits.
    Decimal,
    /// Lower-case hex, every digit of the ID's width.
    Hex,
}

impl FromStr for Target {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "uuid" => Ok(Target::Uuid),
            "ulid" => Ok(Target::Ulid),
            "typeid" => Ok(Target::TypeId(None)),
            "decimal" => Ok(Target::Decimal),
            "hex" => Ok(Target::Hex),
            _ => match text.strip_prefix("typeid:") {
                Some("") => Err("an empty prefix; write `typeid` alone".to_owned()),
                Some(prefix) => {
                    prefix.parse().map(|p| Target::TypeId(Some(p))).map_err(|e| e.to_string())
                }
                None => Err(format!(
                    "unknown form `{text}`; expected uuid, ulid, typeid, typeid:PREFIX, decimal or hex"
                )),
            },
        }
    }
}

/// Runs `idmint convert`: every ID given, or every line of stdin, one line out per ID. Stops at
/// the first ID that does not convert, naming it.
pub(crate) fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    let now_ms = SystemClock.now_ms();
    each_id(&args.ids, out, |text, out| {
        writeln!(out, "{}", convert(text, &args.to, now_ms)?)?;
        Ok(())
    })
}

/// `text` in the form `to`.
fn convert(text: &str, to: &Target, now_ms: u64) -> anyhow::Result<String> {
    let shown = shorten(text);
    // A decimal above 2^64 - 1 is a 128-bit ID (what `--to decimal` writes of one); detection
    // reads decimals only as 64-bit IDs.
    if let Some(wide) = wide_decimal(text) {
        return write_wide(wide, to, None);
    }
    let candidates = detect(text, now_ms).map_err(|err| anyhow!("cannot convert: {err}"))?;
    let Some(best) = candidates.first() else {
        bail!("cannot convert `{shown}`: no format fits it");
    };
    let Some(value) = best.value else {
        bail!(
            "cannot convert `{shown}`: it reads as a {} ID, which has neither 64 nor 128 bits",
            best.layout
        );
    };
    match (value, to) {
        (AnyId::U128(wide), _) => write_wide(wide, to, typeid_prefix(best)),
        (AnyId::U64(_), Target::Decimal) => write(value, Format::Decimal),
        (AnyId::U64(_), Target::Hex) => write(value, Format::Hex),
        (AnyId::U64(_), Target::Uuid | Target::Ulid | Target::TypeId(_)) => bail!(
            "cannot convert `{shown}` to {}: it reads as a 64-bit {} ID; uuid, ulid and typeid hold 128-bit IDs (decimal and hex take both)",
            to.name(),
            best.layout
        ),
    }
}

/// A text of decimal digits whose value needs more than 64 bits and fits in 128.
fn wide_decimal(text: &str) -> Option<u128> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u128>().ok().filter(|&value| value > u128::from(u64::MAX))
}

/// A 128-bit ID in the form `to`; a TypeID with the prefix `to` names, else `read_prefix`.
fn write_wide(wide: u128, to: &Target, read_prefix: Option<TypePrefix>) -> anyhow::Result<String> {
    let text = match to {
        Target::Decimal => write(AnyId::U128(wide), Format::Decimal)?,
        Target::Hex => write(AnyId::U128(wide), Format::Hex)?,
        Target::Uuid => Text128::Uuid.write(wide),
        Target::Ulid => Text128::Ulid.write(wide),
        Target::TypeId(prefix) => {
            Text128::TypeId(prefix.clone().or(read_prefix).unwrap_or_default()).write(wide)
        }
    };
    Ok(text)
}

impl Target {
    /// The form's name, as `--to` takes it (without a prefix).
    fn name(&self) -> &'static str {
        match self {
            Target::Uuid => "uuid",
            Target::Ulid => "ulid",
            Target::TypeId(_) => "typeid",
            Target::Decimal => "decimal",
            Target::Hex => "hex",
        }
    }
}

/// The prefix of a TypeID reading (its `prefix` field), if the reading is one.
fn typeid_prefix(candidate: &Candidate) -> Option<TypePrefix> {
    let prefix = candidate.fields.iter().find(|f| f.name == "prefix")?;
    match (&*candidate.layout, &prefix.value) {
        ("typeid", FieldValue::Text(text)) => text.parse().ok(),
        _ => None,
    }
}

/// `value` in `format`.
fn write(value: AnyId, format: Format) -> anyhow::Result<String> {
    let mut out = String::new();
    value.write(format, &mut out)?;
    Ok(out)
}

/// The text forms of a 128-bit ID, as `decode` shows them, in this order.
#[derive(Debug, Serialize)]
pub(crate) struct Forms {
    uuid: String,
    ulid: String,
    /// With the prefix the ID was read with, if any.
    typeid: String,
    /// A string: a 128-bit number is far above what JSON readers hold exactly.
    decimal: String,
    /// Lower case, 32 digits.
    hex: String,
}

impl Forms {
    /// The forms of `id` if it has 128 bits (its TypeID with `prefix`, if given), else `None`.
    pub(crate) fn of(id: AnyId, prefix: Option<&TypePrefix>) -> Option<Self> {
        let AnyId::U128(value) = id else {
            return None;
        };
        Some(Forms {
            uuid: Text128::Uuid.write(value),
            ulid: Text128::Ulid.write(value),
            typeid: Text128::TypeId(prefix.cloned().unwrap_or_default()).write(value),
            decimal: value.to_string(),
            hex: format!("{value:032x}"),
        })
    }

    /// The forms of a reading of `decode --layout auto`, if it has 128 bits (a TypeID's with
    /// its prefix).
    pub(crate) fn of_candidate(candidate: &Candidate) -> Option<Self> {
        Forms::of(candidate.value?, typeid_prefix(candidate).as_ref())
    }

    /// The forms as table rows, `name  value`.
    pub(crate) fn rows(self) -> [(&'static str, String); 5] {
        [
            ("uuid", self.uuid),
            ("ulid", self.ulid),
            ("typeid", self.typeid),
            ("decimal", self.decimal),
            ("hex", self.hex),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--to` values: every form, a prefix, and refusals that say what is accepted.
    #[test]
    fn targets_parse() {
        let check = |text: &str, want: Result<Target, &str>| match (text.parse::<Target>(), want) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
            (Err(got), Err(want)) => assert!(got.contains(want), "{text}: {got}"),
            (got, want) => panic!("{text}: {got:?}, expected {want:?}"),
        };
        let user = TypePrefix::new("user").unwrap();
        check("uuid", Ok(Target::Uuid));
        check("ulid", Ok(Target::Ulid));
        check("typeid", Ok(Target::TypeId(None)));
        check("typeid:user", Ok(Target::TypeId(Some(user))));
        check("decimal", Ok(Target::Decimal));
        check("hex", Ok(Target::Hex));
        check("typeid:", Err("an empty prefix"));
        check("typeid:User", Err("only a-z and _ are allowed"));
        check("guid", Err("unknown form `guid`; expected uuid, ulid"));
    }
}
