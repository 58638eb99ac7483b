//! Every case of `testdata/seed-vectors.json` (upstream tests and documentation), run through
//! the run-time [`Layout`] API: encode, format, parse, decode and refusals.

use idmint_core::{Error, FieldValue, Format, Layout};
use serde_json::Value;

const VECTORS: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/seed-vectors.json"));

/// What one case of the file asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `fields` and `id` describe the same ID: encode, format, parse and decode must agree.
    Pair,
    /// `"op": "encode", "expect": "error"`: the fields must be refused as out of range.
    EncodeRefusal,
    /// `"op": "decode", "expect": "error"`: the text must be refused.
    DecodeRefusal,
}

#[test]
fn seed_vectors() {
    let cases: Vec<Value> = serde_json::from_str(VECTORS).expect("seed-vectors.json is JSON");
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    for case in &cases {
        let label = format!("case n={} `{}`", case["n"], case["name"].as_str().unwrap_or("?"));
        match check(case) {
            Ok(kind) => checked.push(kind),
            Err(why) => failures.push(format!("{label}: {why}")),
        }
    }
    assert!(failures.is_empty(), "{} failing case(s):\n{}", failures.len(), failures.join("\n"));
    assert_eq!(checked.len(), cases.len(), "every case of the file is checked");
    for kind in [Kind::Pair, Kind::EncodeRefusal, Kind::DecodeRefusal] {
        assert!(checked.contains(&kind), "the file has no {kind:?} case any more");
    }
}

/// Checks one case, whatever its kind.
fn check(case: &Value) -> Result<Kind, String> {
    let layout = layout_of(case)?;
    let format = match case.get("format") {
        Some(name) => {
            name.as_str().ok_or("`format` is not a string")?.parse::<Format>().map_err(s)?
        }
        None => layout.default_format(),
    };
    let expect_error = match case.get("expect").and_then(Value::as_str) {
        None => false,
        Some("error") => true,
        Some(other) => return Err(format!("unknown expectation `{other}`")),
    };
    match (expect_error, case.get("op").and_then(Value::as_str)) {
        (false, _) => {
            check_pair(&layout, format, fields_of(case)?, id_of(case)?).map(|()| Kind::Pair)
        }
        (true, Some("encode")) => {
            check_encode_refusal(&layout, fields_of(case)?).map(|()| Kind::EncodeRefusal)
        }
        (true, Some("decode")) => {
            check_decode_refusal(&layout, format, id_of(case)?).map(|()| Kind::DecodeRefusal)
        }
        (true, op) => Err(format!("unknown refusal op {op:?}")),
    }
}

/// Fields → ID → text equals the case's text; text → ID → fields equals the case's fields.
fn check_pair(
    layout: &Layout,
    format: Format,
    fields: Vec<(String, FieldValue)>,
    id_text: &str,
) -> Result<(), String> {
    let encoded = layout.encode(&fields).map_err(|e| format!("encode: {e}"))?;
    let written = layout.format(encoded, format).map_err(|e| format!("format: {e}"))?;
    if written != id_text {
        return Err(format!("encoded as `{written}`, expected `{id_text}`"));
    }
    let parsed = layout.parse(id_text, format).map_err(|e| format!("parse: {e}"))?;
    if parsed != encoded {
        return Err(format!("parsed as {parsed:?}, encoded as {encoded:?}"));
    }
    let decoded = layout.decode(parsed).map_err(|e| format!("decode: {e}"))?;
    let mut missing: Vec<&str> = fields.iter().map(|(name, _)| name.as_str()).collect();
    for (name, value) in &decoded {
        let Some(want) = fields.iter().find(|(n, _)| n == name).map(|(_, v)| v) else {
            return Err(format!("decode gave field `{name}`, which the case does not have"));
        };
        if value != want {
            return Err(format!("field `{name}` decoded as {value:?}, expected {want:?}"));
        }
        missing.retain(|n| n != name);
    }
    if !missing.is_empty() {
        return Err(format!("decode did not give the fields {missing:?}"));
    }
    Ok(())
}

/// Encoding must fail with `FieldOutOfRange` naming one of the case's fields and its value.
fn check_encode_refusal(layout: &Layout, fields: Vec<(String, FieldValue)>) -> Result<(), String> {
    match layout.encode(&fields) {
        Ok(id) => Err(format!("encoded as {id:?} instead of being refused")),
        Err(Error::FieldOutOfRange { field, value, min, max }) => {
            let given = fields.iter().find(|(name, _)| *name == field).map(|(_, v)| v);
            if given != Some(&FieldValue::Number(value)) {
                return Err(format!(
                    "the error names `{field}` = {value}, the case gave {given:?}"
                ));
            }
            if (min..=max).contains(&value) {
                return Err(format!("the error says {value} is out of {min}..={max}"));
            }
            Ok(())
        }
        Err(other) => Err(format!("refused with {other:?}, expected FieldOutOfRange")),
    }
}

/// Parsing (which decodes) must fail, with a message.
fn check_decode_refusal(layout: &Layout, format: Format, id_text: &str) -> Result<(), String> {
    match layout.parse(id_text, format) {
        Ok(id) => Err(format!("parsed as {id:?} instead of being refused")),
        Err(e) if e.to_string().is_empty() => Err(format!("{e:?} has an empty message")),
        Err(_) => Ok(()),
    }
}

fn layout_of(case: &Value) -> Result<Layout, String> {
    let name = case["layout"].as_str().ok_or("`layout` is not a string")?;
    let layout = Layout::builtin(name).map_err(s)?;
    match case.get("args").and_then(|args| args.get("epoch")) {
        None => Ok(layout),
        Some(epoch) => layout.with_epoch(epoch.as_u64().ok_or("`epoch` is not a u64")?).map_err(s),
    }
}

fn fields_of(case: &Value) -> Result<Vec<(String, FieldValue)>, String> {
    let object = case["fields"].as_object().ok_or("`fields` is not an object")?;
    object
        .iter()
        .map(|(name, value)| match value {
            Value::String(text) => Ok((name.clone(), FieldValue::Text(text.clone()))),
            other => match other.as_u64() {
                Some(n) => Ok((name.clone(), FieldValue::Number(n))),
                None => Err(format!("field `{name}` is neither a u64 nor a string: {other}")),
            },
        })
        .collect()
}

fn id_of(case: &Value) -> Result<&str, String> {
    case["id"].as_str().ok_or_else(|| "`id` is not a string".to_owned())
}

fn s(e: Error) -> String {
    e.to_string()
}
