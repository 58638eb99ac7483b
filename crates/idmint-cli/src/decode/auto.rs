//! `idmint decode --layout auto`: asks the core's `detect` what each ID is, and prints the best
//! candidate's table and the other candidates one line each, or one JSON object per ID with
//! every candidate, best first (and a 128-bit ID's other text forms). The recognising and ranking
//! are the core's.

use std::io::Write;

use idmint_core::{Candidate, Layout, detect, format_rfc3339_ms};
use serde::Serialize;

use super::{Fields, number_of};
use crate::convert::Forms;

/// The `--layout` value that asks for recognition.
pub(super) const AUTO: &str = "auto";

/// What `decode --layout auto --json` prints for one ID: the best candidate's reading, then
/// every candidate (the best one too), best first.
#[derive(Serialize)]
struct Auto<'a> {
    layout: &'a str,
    id: &'a str,
    time: Option<String>,
    fields: Fields<'a>,
    /// A 128-bit ID's text forms; left out for other widths.
    #[serde(skip_serializing_if = "Option::is_none")]
    forms: Option<Forms>,
    candidates: Vec<Reading<'a>>,
}

/// One candidate in `candidates`.
#[derive(Serialize)]
struct Reading<'a> {
    layout: &'a str,
    about: &'a str,
    id: &'a str,
    time: Option<String>,
    fields: Fields<'a>,
    score: u32,
    reason: &'a str,
}

impl<'a> Reading<'a> {
    fn of(candidate: &'a Candidate) -> Self {
        Reading {
            layout: &candidate.layout,
            about: &candidate.about,
            id: &candidate.id,
            time: candidate.time_ms.map(format_rfc3339_ms),
            fields: fields(candidate),
            score: candidate.score,
            reason: &candidate.reason,
        }
    }
}

/// A reading's fields as a JSON object, most significant first, by the rule of
/// [`super::Fields`]: a field is a string when its width (or, for `decimal-id`'s digits, its
/// layout's range) allows values above 2^53 - 1.
fn fields(candidate: &Candidate) -> Fields<'_> {
    let infos = Layout::builtin(&candidate.layout).map(|l| l.fields()).unwrap_or_default();
    Fields::new(
        candidate
            .fields
            .iter()
            .map(|field| {
                let max = match field.bits {
                    Some(bits) if bits >= 64 => u64::MAX,
                    Some(bits) => (1 << bits) - 1,
                    None => infos
                        .iter()
                        .find(|f| f.name == field.name)
                        .map_or_else(|| number_of(&field.value), |f| f.max),
                };
                (field.name.as_str(), &field.value, max)
            })
            .collect(),
    )
}

/// Recognises one ID and writes it: a JSON line, or a table (after a blank line unless it is
/// the first).
pub(super) fn write(
    text: &str,
    now_ms: u64,
    json: bool,
    first: &mut bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let candidates = detect(text, now_ms)?;
    let Some(best) = candidates.first() else {
        // `detect` answers an error rather than no candidate; say so all the same.
        anyhow::bail!("no format fits `{text}`");
    };
    if json {
        let auto = Auto {
            layout: &best.layout,
            id: &best.id,
            time: best.time_ms.map(format_rfc3339_ms),
            fields: fields(best),
            forms: Forms::of_candidate(best),
            candidates: candidates.iter().map(Reading::of).collect(),
        };
        serde_json::to_writer(&mut *out, &auto)?;
        writeln!(out)?;
        return Ok(());
    }
    if !*first {
        writeln!(out)?;
    }
    *first = false;
    write_table(best, &candidates[1..], out)
}

/// The best candidate as `name  value` lines, then the others, one line each.
fn write_table(best: &Candidate, others: &[Candidate], out: &mut dyn Write) -> anyhow::Result<()> {
    let mut rows: Vec<(&str, String)> = vec![
        ("layout", best.layout.clone()),
        ("about", best.about.clone()),
        ("id", best.id.clone()),
    ];
    if let Some(ms) = best.time_ms {
        rows.push(("time", format_rfc3339_ms(ms)));
    }
    rows.push(("score", format!("{} ({})", best.score, best.reason)));
    let values: Vec<String> = best.fields.iter().map(|f| f.value.to_string()).collect();
    let value_pad = values.iter().map(String::len).max().unwrap_or(0);
    for (field, value) in best.fields.iter().zip(values) {
        let value = match field.bits {
            Some(bits) => format!("{value:<value_pad$}  ({bits} bits)"),
            None => value,
        };
        rows.push((&field.name, value));
    }
    if let Some(forms) = Forms::of_candidate(best) {
        rows.extend(forms.rows());
    }
    let pad = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, value) in rows {
        writeln!(out, "{name:<pad$}  {value}")?;
    }
    if others.is_empty() {
        return Ok(());
    }
    writeln!(out, "other candidates, best first:")?;
    let name_pad = others.iter().map(|c| c.layout.len()).max().unwrap_or(0);
    for other in others {
        let time = other.time_ms.map_or_else(|| "-".to_owned(), format_rfc3339_ms);
        writeln!(
            out,
            "  {:<name_pad$}  {time:<24}  score {:>4}  {}",
            other.layout, other.score, other.reason
        )?;
    }
    Ok(())
}
