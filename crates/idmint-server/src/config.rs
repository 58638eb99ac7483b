//! The server's configuration: plain data (serde, so it loads from TOML), validated once when
//! the server starts. Every field documents its default.

use std::collections::BTreeMap;

use idmint_core::{BitLayout, FieldValue, Layout, LayoutConfig};
use serde::{Deserialize, Serialize};

use crate::Error;

/// How a server runs: its namespaces and its limits.
///
/// # Example
///
/// ```
/// use idmint_server::{NamespaceConfig, ServerConfig};
///
/// let config: ServerConfig = serde_json::from_str(
///     r#"{"window_ms": 5000, "namespaces": [{"name": "orders", "layout": "js53"}]}"#,
/// )?;
/// assert_eq!(config.window_ms, 5000);
/// assert_eq!(config.max_batch, 100_000);
/// assert_eq!(config.namespaces[0], NamespaceConfig { layout: "js53".into(), ..NamespaceConfig::named("orders") });
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The namespaces. Default: none given means one namespace, `default`, with the
    /// `snowflake` layout.
    pub namespaces: Vec<NamespaceConfig>,
    /// How far ahead of the clock the high-water mark is stored, in ms. IDs are issued only
    /// inside this window; it is extended in the background when half of it is left.
    /// Default: 3000 (PD's TSO window).
    pub window_ms: u64,
    /// Refuse to start when a stored mark is further ahead of the clock than this, in ms.
    /// Default: 86,400,000 (24 h).
    pub max_ahead_ms: u64,
    /// Start anyway when a stored mark is further ahead than `max_ahead_ms`; IDs then carry
    /// times ahead of the clock. Default: false.
    pub allow_ahead: bool,
    /// The largest batch one request may ask for. Default: 100,000.
    pub max_batch: u64,
    /// The largest request body, in bytes. Default: 65,536.
    pub max_body_bytes: usize,
    /// How long a request may wait for the generator (a used-up tick, a window being
    /// extended) before it is answered with 503, in ms. Default: 1000.
    pub max_wait_ms: u64,
    /// How long shutdown waits for in-flight requests, in ms. Default: 10,000.
    pub drain_ms: u64,
    /// When a namespace finds no generator ID free at start (every ID of its pool is held, or
    /// its fixed ID is) or its coordinator does not answer, start anyway with that namespace
    /// not ready (`/readyz` answers 503) and keep claiming in the background: a spare, which
    /// takes over the generator ID of a server that stops or loses its claim, above that ID's
    /// stored mark. Default: false (refuse to start).
    pub wait_for_claim: bool,
    /// The longest wait between attempts to claim a generator ID while a namespace holds none
    /// (a spare waiting, or a server that lost its claim), in ms. Attempts back off from 50 ms
    /// up to this. Default: 2000.
    pub claim_retry_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            namespaces: Vec::new(),
            window_ms: 3_000,
            max_ahead_ms: 86_400_000,
            allow_ahead: false,
            max_batch: 100_000,
            max_body_bytes: 65_536,
            max_wait_ms: 1_000,
            drain_ms: 10_000,
            wait_for_claim: false,
            claim_retry_ms: 2_000,
        }
    }
}

/// One namespace: a name, a layout, and its own generator.
///
/// # Example
///
/// ```
/// use idmint_server::NamespaceConfig;
///
/// let ns = NamespaceConfig { generator_id: Some(7), ..NamespaceConfig::named("orders") };
/// assert_eq!(ns.layout, "snowflake");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NamespaceConfig {
    /// The name: 1 to 64 characters of `a-z`, `0-9`, `-`, `_`. Default: `default`.
    pub name: String,
    /// A built-in layout (`idmint layouts` lists them). Default: `snowflake`.
    pub layout: String,
    /// A custom layout instead of a built-in one (the same table as a layout file).
    /// Default: none.
    pub custom_layout: Option<LayoutConfig>,
    /// Another epoch in Unix ms, for layouts that take one. Default: the layout's.
    pub epoch_ms: Option<u64>,
    /// A fixed generator ID (see `idmint explain`: 0..generators). Default: none, which takes
    /// the lowest free one.
    pub generator_id: Option<u64>,
    /// Fixed values of node fields that are not part of the generator's identity: LableOrg's
    /// `mode`, HotGuid's `shard_key`, DecimalId's `launch_id`. Default: none.
    pub fields: BTreeMap<String, FieldSetting>,
    /// A bearer token that requests for this namespace must carry. Default: none (open).
    pub token: Option<String>,
    /// How far ahead of the clock a burst may borrow ticks, in ms. Default: 0 (wait for
    /// the next tick).
    pub borrow_ms: u64,
    /// Claim only among the first N generator IDs (`0..N`) instead of all the layout has: to
    /// keep a fleet inside part of the range, or to make a spare wait for the generator ID of
    /// one particular server. Not together with `generator_id`. Default: none (all of them).
    pub generator_pool: Option<u64>,
}

impl Default for NamespaceConfig {
    fn default() -> Self {
        NamespaceConfig::named(idmint_proto::DEFAULT_NAMESPACE)
    }
}

impl NamespaceConfig {
    /// A `snowflake` namespace with this name and every other setting at its default.
    pub fn named(name: &str) -> Self {
        NamespaceConfig {
            name: name.to_owned(),
            layout: "snowflake".to_owned(),
            custom_layout: None,
            epoch_ms: None,
            generator_id: None,
            fields: BTreeMap::new(),
            token: None,
            borrow_ms: 0,
            generator_pool: None,
        }
    }

    /// The namespace's layout.
    pub(crate) fn resolve_layout(&self) -> Result<Layout, Error> {
        let bad = |e: idmint_core::Error| Error::Config(format!("namespace `{}`: {e}", self.name));
        let layout = match &self.custom_layout {
            Some(custom) => Layout::custom(BitLayout::try_from(custom.clone()).map_err(bad)?),
            None => Layout::builtin(&self.layout).map_err(bad)?,
        };
        match self.epoch_ms {
            Some(epoch) => layout.with_epoch(epoch).map_err(bad),
            None => Ok(layout),
        }
    }

    /// The fixed fields as core field values.
    pub(crate) fn field_values(&self) -> Vec<(String, FieldValue)> {
        self.fields
            .iter()
            .map(|(name, value)| {
                let value = match value {
                    FieldSetting::Number(n) => FieldValue::Number(*n),
                    FieldSetting::Text(t) => FieldValue::Text(t.clone()),
                };
                (name.clone(), value)
            })
            .collect()
    }
}

/// A fixed field value in a namespace's configuration: a number or text.
///
/// # Example
///
/// ```
/// use idmint_server::FieldSetting;
///
/// let mode: FieldSetting = serde_json::from_str("\"time-sequential\"")?;
/// assert_eq!(mode, FieldSetting::Text("time-sequential".into()));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FieldSetting {
    /// A number.
    Number(u64),
    /// Text.
    Text(String),
}

impl ServerConfig {
    /// Checks the limits and the namespaces, and fills in the default namespace.
    pub(crate) fn validated(mut self) -> Result<Self, Error> {
        let bad = |msg: String| Err(Error::Config(msg));
        if self.window_ms < 100 || self.window_ms > 3_600_000 {
            return bad(format!("window_ms must be 100..=3600000, not {}", self.window_ms));
        }
        if self.max_batch == 0 || self.max_batch > 10_000_000 {
            return bad(format!("max_batch must be 1..=10000000, not {}", self.max_batch));
        }
        if self.max_body_bytes == 0 {
            return bad("max_body_bytes must be at least 1".into());
        }
        if !(10..=600_000).contains(&self.claim_retry_ms) {
            return bad(format!("claim_retry_ms must be 10..=600000, not {}", self.claim_retry_ms));
        }
        if self.namespaces.is_empty() {
            self.namespaces.push(NamespaceConfig::default());
        }
        let mut names = std::collections::HashSet::new();
        for ns in &self.namespaces {
            let valid = !ns.name.is_empty()
                && ns.name.len() <= 64
                && ns.name.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'
                });
            if !valid {
                return bad(format!(
                    "namespace name `{}` must be 1 to 64 characters of a-z, 0-9, `-` or `_`",
                    ns.name
                ));
            }
            if !names.insert(ns.name.as_str()) {
                return bad(format!("namespace `{}` is configured twice", ns.name));
            }
            if matches!(&ns.token, Some(t) if t.is_empty()) {
                return bad(format!("namespace `{}`: an empty token would let anyone in", ns.name));
            }
            if ns.borrow_ms > self.window_ms {
                return bad(format!(
                    "namespace `{}`: borrow_ms ({}) must not exceed window_ms ({})",
                    ns.name, ns.borrow_ms, self.window_ms
                ));
            }
            let layout = ns.resolve_layout()?;
            if let Some(pool) = ns.generator_pool {
                let count = layout.generator_count();
                if pool == 0 || pool > count {
                    return bad(format!(
                        "namespace `{}`: generator_pool must be 1..={count} (the layout's \
                         generator ids), not {pool}",
                        ns.name
                    ));
                }
                if ns.generator_id.is_some() {
                    return bad(format!(
                        "namespace `{}`: give generator_id or generator_pool, not both",
                        ns.name
                    ));
                }
            }
        }
        Ok(self)
    }
}
