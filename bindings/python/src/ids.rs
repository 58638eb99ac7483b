//! IDs between Rust and Python: the forms a call returns (`int`, `uuid.UUID`, `str` in a
//! text form), reading an ID given as `int`, `str` or `uuid.UUID`, and the module functions
//! that work on IDs without a minter (`decode`, `layouts`, `explain`, `obfuscate`, `reveal`),
//! each calling the library functions behind the CLI command of the same name.

use idmint_core::{
    AnyId, Clock, FieldValue, IdForm, IdText, Layout, PublicIds, SystemClock, Text128, TypePrefix,
    detect,
};
use pyo3::{
    prelude::*,
    sync::PyOnceLock,
    types::{PyDict, PyInt, PyList, PyString},
};

use crate::errors::{self, Class};

/// `uuid.UUID`, looked up once.
static UUID: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The form a call returns its IDs in.
#[derive(Debug, Clone)]
pub(crate) enum Form {
    /// A Python `int` (the decimal form's value).
    Int,
    /// A `uuid.UUID` (128-bit IDs).
    Uuid,
    /// A `str` in a text form of the layout (TypeID, ULID, hex, base62, ...).
    Text(IdText),
}

impl Form {
    /// The form named `name` for `layout`'s IDs with `prefix` (`None`: the namespace's usual
    /// form: `int` for a decimal layout, `uuid.UUID` for UUIDs, else its text). Besides the
    /// text forms (`IdForm::NAMES`), `int` names the integer.
    pub(crate) fn of(
        layout: &Layout,
        prefix: Option<&TypePrefix>,
        name: Option<&str>,
    ) -> PyResult<Form> {
        let form = match name {
            Some("int") => return Ok(Form::Int),
            Some(name) => Some(name.parse::<IdForm>().map_err(|e| errors::core(&e))?),
            None => None,
        };
        let text = IdText::new(layout, prefix, form).map_err(|e| errors::core(&e))?;
        Ok(match text.name() {
            "decimal" => Form::Int,
            "uuid" => Form::Uuid,
            _ => Form::Text(text),
        })
    }

    /// The form named `name` for IDs whose layout is not known (a client's): `int` (the
    /// default for 64-bit IDs), `uuid` (the default for 128-bit IDs), `ulid`, or a format.
    pub(crate) fn for_bits(bits: u32, name: Option<&str>) -> PyResult<Form> {
        let name = name.unwrap_or(if bits == 128 { "uuid" } else { "int" });
        if name == "int" {
            return Ok(Form::Int);
        }
        let layout = Layout::builtin(if bits == 128 { "uuid7" } else { "snowflake" })
            .map_err(|e| errors::core(&e))?;
        Form::of(&layout, None, Some(name))
    }

    /// `id` in this form.
    pub(crate) fn to_py(&self, py: Python<'_>, id: AnyId) -> PyResult<Py<PyAny>> {
        match self {
            Form::Int => int(py, id),
            Form::Uuid => uuid(py, id),
            Form::Text(text) => {
                Ok(PyString::new(py, &text.write(id).map_err(|e| errors::core(&e))?)
                    .into_any()
                    .unbind())
            }
        }
    }

    /// `ids` in this form, as a list.
    pub(crate) fn list(&self, py: Python<'_>, ids: &[AnyId]) -> PyResult<Py<PyList>> {
        let list = PyList::empty(py);
        for &id in ids {
            list.append(self.to_py(py, id)?)?;
        }
        Ok(list.unbind())
    }
}

/// `id` as a Python `int`.
pub(crate) fn int(py: Python<'_>, id: AnyId) -> PyResult<Py<PyAny>> {
    Ok(match id {
        AnyId::U64(v) => v.into_pyobject(py)?.into_any().unbind(),
        AnyId::U128(v) => v.into_pyobject(py)?.into_any().unbind(),
    })
}

/// `id` as a `uuid.UUID` (a 64-bit ID in the low bits).
fn uuid(py: Python<'_>, id: AnyId) -> PyResult<Py<PyAny>> {
    let class = UUID.get_or_try_init(py, || {
        py.import("uuid").and_then(|m| m.getattr("UUID")).map(Bound::unbind)
    })?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("int", int(py, id)?)?;
    Ok(class.bind(py).call((), Some(&kwargs))?.unbind())
}

/// An ID given to a function: `int`, `uuid.UUID`, or text; and how to answer in kind.
#[derive(Debug)]
pub(crate) enum Given {
    /// An `int`, of 64 or 128 bits.
    Int(AnyId),
    /// A `uuid.UUID`.
    Uuid(u128),
    /// Text.
    Text(String),
}

impl Given {
    /// Reads `obj`.
    pub(crate) fn read(obj: &Bound<'_, PyAny>) -> PyResult<Given> {
        if let Ok(text) = obj.cast::<PyString>() {
            return Ok(Given::Text(text.to_cow()?.into_owned()));
        }
        if let Ok(int) = obj.cast::<PyInt>() {
            return match int.extract::<u64>() {
                Ok(v) => Ok(Given::Int(AnyId::U64(v))),
                Err(_) => match int.extract::<u128>() {
                    Ok(v) => Ok(Given::Int(AnyId::U128(v))),
                    Err(_) => {
                        Err(Class::Decode.err(format!("{int} is not a 64-bit or 128-bit id")))
                    }
                },
            };
        }
        let is_uuid = UUID
            .get_or_try_init(obj.py(), || {
                obj.py().import("uuid").and_then(|m| m.getattr("UUID")).map(Bound::unbind)
            })
            .and_then(|class| obj.is_instance(class.bind(obj.py())))?;
        if is_uuid {
            return Ok(Given::Uuid(obj.getattr("int")?.extract()?));
        }
        Err(Class::Request
            .err(format!("an id is an int, a str or a uuid.UUID, not {}", obj.get_type().name()?)))
    }

    /// The ID as `layout`'s (text in its usual form, or with `prefix`'s TypeID).
    fn id_of(&self, layout: &Layout, prefix: Option<&TypePrefix>) -> PyResult<AnyId> {
        let id = match self {
            Given::Int(AnyId::U64(v)) if layout.id_bits() == 128 => AnyId::U128((*v).into()),
            Given::Int(id) => *id,
            Given::Uuid(v) => AnyId::U128(*v),
            Given::Text(text) => {
                let usual = IdText::new(layout, prefix, None).map_err(|e| errors::core(&e))?;
                return usual.parse(layout, text).map_err(|e| {
                    Class::Decode.err(format!("cannot decode `{text}` as {}: {e}", layout.name()))
                });
            }
        };
        if id.bits() != layout.id_bits() {
            return Err(Class::Decode.err(format!(
                "{} is not a {} id: it has more than {} bits",
                show(id),
                layout.name(),
                layout.id_bits()
            )));
        }
        Ok(id)
    }

    /// `id` in the kind this was given in (text in `layout`'s usual form).
    fn answer(&self, py: Python<'_>, layout: &Layout, id: AnyId) -> PyResult<Py<PyAny>> {
        match self {
            Given::Int(_) => int(py, id),
            Given::Uuid(_) => uuid(py, id),
            Given::Text(_) => Form::of(layout, None, None).and_then(|form| match form {
                Form::Text(_) => form.to_py(py, id),
                _ => Form::Text(IdText::new(layout, None, None).map_err(|e| errors::core(&e))?)
                    .to_py(py, id),
            }),
        }
    }
}

fn show(id: AnyId) -> String {
    match id {
        AnyId::U64(v) => v.to_string(),
        AnyId::U128(v) => v.to_string(),
    }
}

/// A built-in layout by name.
pub(crate) fn builtin(name: &str) -> PyResult<Layout> {
    Layout::builtin(name).map_err(|e| errors::core(&e))
}

fn field_value(py: Python<'_>, value: &FieldValue) -> PyResult<Py<PyAny>> {
    Ok(match value {
        FieldValue::Number(n) => n.into_pyobject(py)?.into_any().unbind(),
        FieldValue::Text(t) => PyString::new(py, t).into_any().unbind(),
    })
}

/// A 128-bit ID's text forms, as `idmint decode` shows them.
fn forms<'py>(
    py: Python<'py>,
    id: AnyId,
    prefix: Option<&TypePrefix>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let AnyId::U128(value) = id else { return Ok(None) };
    let forms = PyDict::new(py);
    forms.set_item("uuid", Text128::Uuid.write(value))?;
    forms.set_item("ulid", Text128::Ulid.write(value))?;
    forms.set_item("typeid", Text128::TypeId(prefix.cloned().unwrap_or_default()).write(value))?;
    forms.set_item("decimal", value.to_string())?;
    forms.set_item("hex", format!("{value:032x}"))?;
    Ok(Some(forms))
}

/// `idmint decode` for one ID: the fields, the time (in Unix ms; the Python wrapper adds a
/// `datetime`), a 128-bit ID's other forms, and with `layout="auto"` every candidate that
/// `detect` finds, best first.
#[pyfunction]
#[pyo3(signature = (id, layout = "auto", type_prefix = None))]
pub(crate) fn _decode<'py>(
    py: Python<'py>,
    id: &Bound<'py, PyAny>,
    layout: &str,
    type_prefix: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let given = Given::read(id)?;
    let now_ms = SystemClock.now_ms();
    let out = PyDict::new(py);
    if layout == "auto" {
        let text = match &given {
            Given::Int(id) => show(*id),
            Given::Uuid(v) => Text128::Uuid.write(*v),
            Given::Text(text) => text.clone(),
        };
        let candidates = detect(&text, now_ms).map_err(|e| errors::core(&e))?;
        let list = PyList::empty(py);
        for candidate in &candidates {
            let reading = PyDict::new(py);
            reading.set_item("layout", &candidate.layout)?;
            reading.set_item("about", &candidate.about)?;
            reading.set_item("id", &candidate.id)?;
            reading.set_item("value", candidate.value.map(|v| int(py, v)).transpose()?)?;
            reading.set_item("time_ms", candidate.time_ms)?;
            let fields = PyDict::new(py);
            for field in &candidate.fields {
                fields.set_item(&field.name, field_value(py, &field.value)?)?;
            }
            reading.set_item("fields", fields)?;
            reading.set_item("score", candidate.score)?;
            reading.set_item("reason", &candidate.reason)?;
            let prefix = candidate
                .fields
                .iter()
                .find(|f| f.name == "prefix" && candidate.layout == "typeid")
                .and_then(|f| match &f.value {
                    FieldValue::Text(text) => TypePrefix::new(text).ok(),
                    FieldValue::Number(_) => None,
                });
            let forms = match candidate.value {
                Some(value) => forms(py, value, prefix.as_ref())?,
                None => None,
            };
            reading.set_item("forms", forms)?;
            list.append(reading)?;
        }
        let Some(best) = list.iter().next() else {
            return Err(Class::Decode.err(format!("no format fits `{text}`")));
        };
        out.update(best.cast::<PyDict>()?.as_mapping())?;
        out.del_item("score")?;
        out.del_item("reason")?;
        out.set_item("candidates", list)?;
        return Ok(out);
    }
    let layout = builtin(layout)?;
    let prefix = type_prefix.map(TypePrefix::new).transpose().map_err(|e| errors::core(&e))?;
    let id = given.id_of(&layout, prefix.as_ref())?;
    let usual = IdText::new(&layout, prefix.as_ref(), None).map_err(|e| errors::core(&e))?;
    out.set_item("layout", layout.name())?;
    out.set_item(
        "about",
        Layout::builtins().iter().find(|(n, _)| *n == layout.name()).map(|(_, a)| *a),
    )?;
    out.set_item("id", usual.write(id).map_err(|e| errors::core(&e))?)?;
    out.set_item("value", int(py, id)?)?;
    out.set_item("time_ms", layout.time_ms(id, now_ms).map_err(|e| errors::core(&e))?)?;
    let fields = PyDict::new(py);
    for (name, value) in layout.decode(id).map_err(|e| errors::core(&e))? {
        fields.set_item(name, field_value(py, &value)?)?;
    }
    out.set_item("fields", fields)?;
    out.set_item("forms", forms(py, id, usual.prefix())?)?;
    Ok(out)
}

/// The built-in layouts: name to description, as `idmint layouts` lists them.
#[pyfunction]
pub(crate) fn layouts(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for (name, description) in Layout::builtins() {
        out.set_item(*name, *description)?;
    }
    Ok(out)
}

/// `idmint explain LAYOUT --json` as JSON text (the Python wrapper reads it into a dict): the
/// layout, its width, order, bit segments, fields, capacity and lifetime warnings.
#[pyfunction]
pub(crate) fn _explain(layout: &str) -> PyResult<String> {
    let layout = builtin(layout)?;
    let capacity = layout.capacity();
    let warnings = capacity.warnings(layout.name(), SystemClock.now_ms());
    let value = serde_json::json!({
        "layout": layout.name(),
        "bits": layout.id_bits(),
        "order": layout.order().name(),
        "segments": layout.segments(),
        "fields": layout.fields(),
        "capacity": capacity,
        "warnings": warnings,
    });
    Ok(value.to_string())
}

/// `idmint obfuscate` (`forward`) or `idmint reveal` of one ID with a key file.
fn map_public(
    py: Python<'_>,
    id: &Bound<'_, PyAny>,
    key_file: &std::path::Path,
    layout: &str,
    forward: bool,
) -> PyResult<Py<PyAny>> {
    let given = Given::read(id)?;
    let layout = builtin(layout)?;
    let keys = idmint_engine::load_public_id_keys(key_file).map_err(|e| errors::engine(&e))?;
    let ids = PublicIds::new(&layout, &keys).map_err(|e| errors::core(&e))?;
    let value = match (&given, forward) {
        // A public ID need not decode as a layout ID; only its width and domain count.
        (Given::Text(text), false) => {
            let format = layout.default_format();
            layout.parse(text, format).or_else(|_| match layout.id_bits() {
                128 => format.parse_u128(text).map(AnyId::U128),
                _ => format.parse_u64(text).map(AnyId::U64),
            })
        }
        .map_err(|e| Class::Decode.err(format!("`{text}` is not a {} id: {e}", layout.name())))?,
        _ => given.id_of(&layout, None)?,
    };
    let mapped = if forward { ids.obfuscate(value) } else { ids.reveal(value) }
        .map_err(|e| errors::core(&e))?;
    match &given {
        Given::Text(_) => Ok(PyString::new(
            py,
            &layout.format(mapped, layout.default_format()).map_err(|e| errors::core(&e))?,
        )
        .into_any()
        .unbind()),
        _ => given.answer(py, &layout, mapped),
    }
}

/// The public ID of `id` (`idmint obfuscate --key-file KEY_FILE --layout LAYOUT`), in the kind
/// it was given in.
#[pyfunction]
#[pyo3(signature = (id, *, key_file, layout = "snowflake"))]
pub(crate) fn obfuscate(
    py: Python<'_>,
    id: &Bound<'_, PyAny>,
    key_file: std::path::PathBuf,
    layout: &str,
) -> PyResult<Py<PyAny>> {
    map_public(py, id, &key_file, layout, true)
}

/// The ID behind a public ID (`idmint reveal --key-file KEY_FILE --layout LAYOUT`), in the
/// kind it was given in.
#[pyfunction]
#[pyo3(signature = (id, *, key_file, layout = "snowflake"))]
pub(crate) fn reveal(
    py: Python<'_>,
    id: &Bound<'_, PyAny>,
    key_file: std::path::PathBuf,
    layout: &str,
) -> PyResult<Py<PyAny>> {
    map_public(py, id, &key_file, layout, false)
}
