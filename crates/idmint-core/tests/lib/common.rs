//! Helpers shared by the test modules: named field values and the custom layouts under test.

use idmint_core::{BitLayout, FieldConfig, FieldRole, FieldValue, LayoutConfig};

/// A numeric field value, as `Layout::encode` takes it.
pub(crate) fn num(name: &str, value: u64) -> (String, FieldValue) {
    (name.to_owned(), FieldValue::Number(value))
}

/// A text field value (`mode`, `process`), as `Layout::encode` takes it.
pub(crate) fn text(name: &str, value: &str) -> (String, FieldValue) {
    (name.to_owned(), FieldValue::Text(value.to_owned()))
}

/// A custom layout of odd shape: 64 bits (bit 63 used), a node field above the time field,
/// the sequence above another node field, and 4-ms ticks.
pub(crate) fn custom_config() -> LayoutConfig {
    LayoutConfig {
        name: "orders".into(),
        bits: 64,
        epoch: Some("2024-01-01T00:00:00Z".into()),
        epoch_ms: None,
        tick_ms: 4,
        fields: vec![
            FieldConfig { name: "region".into(), bits: 3, role: FieldRole::Node },
            FieldConfig { name: "timestamp".into(), bits: 41, role: FieldRole::Time },
            FieldConfig { name: "sequence".into(), bits: 10, role: FieldRole::Sequence },
            FieldConfig { name: "worker".into(), bits: 10, role: FieldRole::Node },
        ],
    }
}

/// [`custom_config`] validated.
pub(crate) fn custom_layout() -> BitLayout {
    BitLayout::try_from(custom_config()).expect("the custom layout is valid")
}

/// A custom 63-bit layout whose 20-bit time field runs out about 17 minutes after its epoch.
pub(crate) fn short_lived_layout() -> BitLayout {
    BitLayout::try_from(LayoutConfig {
        name: "short-lived".into(),
        bits: 63,
        epoch: None,
        epoch_ms: Some(1_700_000_000_000),
        tick_ms: 1,
        fields: vec![
            FieldConfig { name: "timestamp".into(), bits: 20, role: FieldRole::Time },
            FieldConfig { name: "node".into(), bits: 31, role: FieldRole::Node },
            FieldConfig { name: "sequence".into(), bits: 12, role: FieldRole::Sequence },
        ],
    })
    .expect("the short-lived layout is valid")
}
