//! `idmint.Minter`: the embedded minter of the `idmint` crate ([`idmint::BlockingMinter`]),
//! with a small per-namespace buffer of prefetched IDs behind `next()`, so that a call that
//! finds one costs no trip to the engine and keeps the GIL.
//!
//! The buffer is what a fork must not copy: a child that took IDs from its parent's buffer
//! would hand out the IDs its parent hands out. The fork hook of the Python package
//! (`os.register_at_fork(after_in_child=...)`) bumps the fork generation
//! ([`crate::fork_generation`]); a minter that sees a new generation empties its buffers before
//! anything else, and the `idmint` crate gives the child its own runtime and its own claim at
//! its first call (`OnFork::Claim`). Calls that may wait (the engine, the store, the clock)
//! release the GIL.

use std::{
    collections::VecDeque,
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use idmint::{AnyId, BlockingMinter, Builder, Layout, NamespaceConfig, OnFork, ServerConfig};
use idmint_core::TypePrefix;
use pyo3::{
    prelude::*,
    types::{PyDict, PyList, PyString},
};

use crate::{
    errors::{self, Class},
    ids::Form,
};

/// How long prefetched IDs stay usable: an ID handed out from the buffer was issued at most
/// this long before, so its time field is as fresh as the layout's millisecond.
const FRESH: Duration = Duration::from_millis(1);
/// The first refill's size, and the bounds of the refill size (doubled when a buffer is used
/// up while fresh, halved when it goes stale with IDs left).
const FIRST_REFILL: u64 = 16;
const MAX_REFILL: u64 = 256;

/// A namespace of the minter: its layout and its IDs' usual form.
#[derive(Debug)]
struct Namespace {
    name: String,
    /// The name as an interned Python string: a call that names the namespace with a literal
    /// passes this very object, found by its address without reading the text.
    py_name: Py<PyString>,
    layout: Layout,
    prefix: Option<TypePrefix>,
    form: Form,
    buffer: Mutex<Buffer>,
}

/// Prefetched IDs of one namespace. Invariant: every ID in `ids` is above every ID that
/// `next()` has handed out from this namespace, so the IDs one thread gets keep increasing.
#[derive(Debug)]
struct Buffer {
    ids: VecDeque<AnyId>,
    /// The highest ID handed out by `next()`.
    high: Option<AnyId>,
    filled: Instant,
    refill: u64,
}

impl Buffer {
    fn new() -> Buffer {
        Buffer { ids: VecDeque::new(), high: None, filled: Instant::now(), refill: FIRST_REFILL }
    }

    /// The next prefetched ID, if one is left and fresh (`forever`: the negative control's
    /// buffer, which never goes stale).
    fn pop(&mut self, forever: bool) -> Option<AnyId> {
        if self.ids.is_empty() {
            return None;
        }
        if !forever && self.filled.elapsed() > FRESH {
            self.ids.clear();
            self.refill = (self.refill / 2).max(1);
            return None;
        }
        let id = self.ids.pop_front()?;
        self.high = Some(id);
        Some(id)
    }

    /// Takes a batch just issued: its first ID is handed out, the rest kept (those above
    /// what was handed out meanwhile by other threads).
    fn take(&mut self, batch: Vec<AnyId>, used_up: bool) -> Option<AnyId> {
        let mut batch = VecDeque::from(batch);
        let first = batch.pop_front()?;
        if used_up {
            self.refill = (self.refill * 2).min(MAX_REFILL);
        }
        let high = self.high.map_or(first, |h| h.max(first));
        self.high = Some(high);
        batch.retain(|id| *id > high);
        self.ids = batch;
        self.filled = Instant::now();
        Some(first)
    }
}

/// Unique IDs in this process: an embedded, fleet-safe minter. Several processes may share
/// one data directory (each claims its own generator ID), or a fleet may claim through
/// Postgres; a restart, even after a crash, starts above the last stored high-water mark; a
/// forked child claims a generator ID of its own at its first call.
///
/// Build one with keyword arguments, `Minter.from_config(path)` (the TOML file of
/// `idmint serve --config`) or `Minter.from_env()` (the `IDMINT_*` variables).
#[pyclass(module = "idmint", frozen)]
#[derive(Debug)]
pub(crate) struct Minter {
    inner: BlockingMinter,
    namespaces: Vec<Namespace>,
    /// What `repr()` shows of the store.
    store: String,
    /// The fork generation the buffers belong to.
    generation: AtomicU64,
    /// The negative control: no fork hook, buffers that never go stale.
    unsafe_no_fork_hook: bool,
    /// Set by `close()`: no ID leaves a buffer after it.
    closed: AtomicBool,
}

/// A namespace as given to `Minter(namespaces=...)`: a layout name, or a dict of its settings
/// (the keys of a `[[server.namespaces]]` table of the configuration file).
fn namespace_config(name: &str, spec: &Bound<'_, PyAny>) -> PyResult<NamespaceConfig> {
    if let Ok(layout) = spec.cast::<PyString>() {
        let mut config = NamespaceConfig::named(name);
        config.layout = layout.to_cow()?.into_owned();
        return Ok(config);
    }
    if spec.is_none() {
        return Ok(NamespaceConfig::named(name));
    }
    let json: String = spec.py().import("json")?.call_method1("dumps", (spec,))?.extract()?;
    let mut value: serde_json::Value = serde_json::from_str(&json)
        .map_err(|e| Class::Config.err(format!("namespace `{name}`: {e}")))?;
    let Some(table) = value.as_object_mut() else {
        return Err(Class::Config
            .err(format!("namespace `{name}`: give a layout name or a dict of settings")));
    };
    table.insert("name".into(), name.into());
    serde_json::from_value(value).map_err(|e| Class::Config.err(format!("namespace `{name}`: {e}")))
}

/// The namespaces of `namespaces=`: a dict of name to layout or settings, or a list of names.
fn namespace_configs(namespaces: &Bound<'_, PyAny>) -> PyResult<Vec<NamespaceConfig>> {
    if let Ok(dict) = namespaces.cast::<PyDict>() {
        return dict
            .iter()
            .map(|(name, spec)| namespace_config(&name.cast::<PyString>()?.to_cow()?, &spec))
            .collect();
    }
    if let Ok(list) = namespaces.cast::<PyList>() {
        return list
            .iter()
            .map(|name| Ok(NamespaceConfig::named(&name.cast::<PyString>()?.to_cow()?)))
            .collect();
    }
    Err(Class::Config
        .err("namespaces= is a dict of name to layout (or settings) or a list of names"))
}

/// `etcd=` (and `etcd_prefix=`) on the builder.
fn with_etcd(
    builder: Builder,
    endpoints: Vec<String>,
    prefix: Option<String>,
) -> PyResult<Builder> {
    let builder = builder.etcd(endpoints);
    Ok(match prefix {
        Some(prefix) => builder.etcd_prefix(&prefix),
        None => builder,
    })
}

/// The `[server]` namespaces of a configuration file (the `idmint` crate reads the file for
/// the minter; this reads only which namespaces it has and their TypeID prefixes).
fn file_namespaces(path: &str) -> Vec<NamespaceConfig> {
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    let Ok(table) = toml::from_str::<toml::Table>(&text) else { return Vec::new() };
    table
        .get("server")
        .and_then(|server| server.clone().try_into::<ServerConfig>().ok())
        .map(|server| server.namespaces)
        .unwrap_or_default()
}

impl Minter {
    /// Builds the minter (without the GIL: claims and first windows may wait on the store)
    /// and reads its namespaces' layouts.
    fn build(
        py: Python<'_>,
        builder: Builder,
        mut namespaces: Vec<NamespaceConfig>,
        store: String,
        unsafe_no_fork_hook: bool,
    ) -> PyResult<Minter> {
        if unsafe_no_fork_hook && !cfg!(idmint_negative_controls) {
            return Err(Class::Config.err(
                "_unsafe_no_fork_hook is a negative control of the tests: only a build with \
                 IDMINT_NEGATIVE_CONTROLS=1 takes it",
            ));
        }
        let inner = py.detach(|| builder.build_blocking()).map_err(|e| errors::minter(&e))?;
        if namespaces.is_empty() {
            namespaces.push(NamespaceConfig::default());
        }
        let namespaces = namespaces
            .into_iter()
            .map(|config| {
                let layout = inner.layout(&config.name).map_err(|e| errors::minter(&e))?;
                let prefix = config
                    .type_prefix
                    .as_deref()
                    .map(TypePrefix::new)
                    .transpose()
                    .map_err(|e| errors::core(&e))?;
                let form = Form::of(&layout, prefix.as_ref(), None)?;
                Ok(Namespace {
                    py_name: PyString::intern(py, &config.name).unbind(),
                    name: config.name,
                    layout,
                    prefix,
                    form,
                    buffer: Mutex::new(Buffer::new()),
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Minter {
            inner,
            namespaces,
            store,
            generation: AtomicU64::new(crate::fork_generation()),
            unsafe_no_fork_hook,
            closed: AtomicBool::new(false),
        })
    }

    /// The namespace named `name` (`None`: the first).
    fn namespace(&self, name: Option<&str>) -> PyResult<&Namespace> {
        let Some(name) = name else { return Ok(&self.namespaces[0]) };
        self.namespaces.iter().find(|ns| ns.name == name).ok_or_else(|| {
            let known: Vec<&str> = self.namespaces.iter().map(|ns| ns.name.as_str()).collect();
            let shown: String = name.chars().take(64).collect();
            Class::Namespace
                .err(format!("no namespace `{shown}`; this minter has {}", known.join(", ")))
        })
    }

    /// The namespace a call names (`None`: the first): by the address of the interned name
    /// first, else by its text.
    fn namespace_of(&self, name: Option<&Bound<'_, PyString>>) -> PyResult<&Namespace> {
        let Some(name) = name else { return Ok(&self.namespaces[0]) };
        match self.namespaces.iter().find(|ns| ns.py_name.as_ptr() == name.as_ptr()) {
            Some(ns) => Ok(ns),
            None => self.namespace(Some(&name.to_cow()?)),
        }
    }

    /// The form of a call: the namespace's, or `format`.
    fn form(ns: &Namespace, format: Option<&str>) -> PyResult<Form> {
        match format {
            None => Ok(ns.form.clone()),
            Some(name) => Form::of(&ns.layout, ns.prefix.as_ref(), Some(name)),
        }
    }

    /// A namespace's buffer, emptied first if this process forked since it was filled.
    fn buffer<'a>(&self, ns: &'a Namespace) -> MutexGuard<'a, Buffer> {
        let generation = crate::fork_generation();
        if self.generation.load(Ordering::Relaxed) != generation && !self.unsafe_no_fork_hook {
            for other in &self.namespaces {
                let mut buffer = other.buffer.lock().unwrap_or_else(|e| e.into_inner());
                *buffer = Buffer::new();
            }
            self.generation.store(generation, Ordering::Relaxed);
        }
        // Held only with the GIL and never across a call that releases it, so never contended.
        ns.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next ID of `ns`: prefetched, or the first of a new batch.
    fn next_id(&self, py: Python<'_>, ns: &Namespace) -> PyResult<AnyId> {
        if self.closed.load(Ordering::Acquire) {
            return Err(errors::minter(&idmint::Error::Closed));
        }
        let refill = {
            let mut buffer = self.buffer(ns);
            if let Some(id) = buffer.pop(self.unsafe_no_fork_hook) {
                return Ok(id);
            }
            buffer.refill
        };
        let batch =
            py.detach(|| self.inner.batch_in(&ns.name, refill)).map_err(|e| errors::minter(&e))?;
        let mut buffer = self.buffer(ns);
        let used_up = buffer.ids.is_empty();
        buffer.take(batch, used_up).ok_or_else(|| Class::Error.err("the engine issued no id"))
    }
}

#[pymethods]
impl Minter {
    /// Builds a minter and claims a generator ID for every namespace.
    ///
    /// `data_dir`: claims and marks (default `idmint-data`; several processes may share one).
    /// `postgres`: a connection string; claims and marks then live in Postgres. `etcd`: a
    /// list of client URLs of an etcd cluster, and
    /// `etcd_prefix` where its keys go (default `idmint/`, as `idmint serve --etcd-prefix`). `namespaces`: a dict of name to layout
    /// name or to a dict of settings (`layout`, `type_prefix`, `custom_layout`, ...), or a
    /// list of names (Snowflake IDs); the first is the default of `next()` and `batch()`.
    /// `layout`: the layout of the one namespace `default` when `namespaces` is not given.
    /// `window_ms`: how far ahead of the clock each stored mark goes. `lease_ttl`: seconds,
    /// the lease of a Postgres claim. `on_fork`: `"claim"` (a forked child claims its own
    /// generator ID at its first call) or `"refuse"` (a child's calls raise `ForkedError`).
    #[new]
    #[pyo3(signature = (
        *, data_dir = None, postgres = None, etcd = None, etcd_prefix = None, namespaces = None,
        layout = None,
        window_ms = None, lease_ttl = None, max_batch = None, on_fork = "claim",
        _unsafe_no_fork_hook = false
    ))]
    #[expect(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn new(
        py: Python<'_>,
        data_dir: Option<std::path::PathBuf>,
        postgres: Option<String>,
        etcd: Option<Vec<String>>,
        etcd_prefix: Option<String>,
        namespaces: Option<&Bound<'_, PyAny>>,
        layout: Option<String>,
        window_ms: Option<u64>,
        lease_ttl: Option<f64>,
        max_batch: Option<u64>,
        on_fork: &str,
        _unsafe_no_fork_hook: bool,
    ) -> PyResult<Minter> {
        let mut config = ServerConfig::default();
        if let Some(namespaces) = namespaces {
            if layout.is_some() {
                return Err(Class::Config.err(
                    "layout= sets the one namespace's layout; with namespaces=, give each its own",
                ));
            }
            config.namespaces = namespace_configs(namespaces)?;
        } else {
            let mut ns = NamespaceConfig::default();
            if let Some(layout) = layout {
                ns.layout = layout;
            }
            config.namespaces = vec![ns];
        }
        if let Some(window_ms) = window_ms {
            config.window_ms = window_ms;
        }
        if let Some(max_batch) = max_batch {
            config.max_batch = max_batch;
        }
        let mut builder = idmint::Minter::builder().config(config.clone());
        let mut store = "file".to_owned();
        if let Some(dir) = &data_dir {
            builder = builder.data_dir(dir);
        }
        if let Some(endpoints) = etcd {
            builder = with_etcd(builder, endpoints, etcd_prefix)?;
            store = "etcd".to_owned();
        } else if etcd_prefix.is_some() {
            return Err(Class::Config.err("etcd_prefix= goes with etcd="));
        }
        if let Some(url) = &postgres {
            builder = builder.postgres(url);
            store = "postgres".to_owned();
        }
        if let Some(ttl) = lease_ttl {
            if !ttl.is_finite() || ttl < 0.0 {
                return Err(
                    Class::Config.err(format!("lease_ttl={ttl} is not a number of seconds"))
                );
            }
            builder = builder.lease_ttl(Duration::from_secs_f64(ttl));
        }
        builder = builder.on_fork(match on_fork {
            "claim" => OnFork::Claim,
            "refuse" => OnFork::Refuse,
            other => {
                return Err(
                    Class::Config.err(format!("on_fork is \"claim\" or \"refuse\", not {other:?}"))
                );
            }
        });
        let dir = data_dir
            .map_or_else(|| idmint::DEFAULT_DATA_DIR.to_owned(), |d| d.display().to_string());
        Minter::build(
            py,
            builder,
            config.namespaces,
            format!("{store}, data_dir={dir:?}"),
            _unsafe_no_fork_hook,
        )
    }

    /// A minter from the configuration file of `idmint serve --config` (TOML): its
    /// `data_dir`, `coordinator`, `postgres`, `lease_ttl` and `[server]` namespaces; the keys
    /// of serving (`listen`, `log`, ...) are accepted and ignored.
    #[classmethod]
    fn from_config(
        _cls: &Bound<'_, pyo3::types::PyType>,
        py: Python<'_>,
        path: std::path::PathBuf,
    ) -> PyResult<Minter> {
        let builder = idmint::Minter::from_config_file(&path).map_err(|e| errors::minter(&e))?;
        let shown = path.display().to_string();
        Minter::build(py, builder, file_namespaces(&shown), format!("config={shown:?}"), false)
    }

    /// A minter from the `IDMINT_*` environment variables, as `idmint serve` reads them (over
    /// the file `IDMINT_CONFIG` names, if set): `IDMINT_DATA_DIR`, `IDMINT_COORDINATOR`,
    /// `IDMINT_POSTGRES`, `IDMINT_LEASE_TTL`, `IDMINT_WINDOW_MS`, `IDMINT_MAX_BATCH` and
    /// `IDMINT_LAYOUT`.
    #[classmethod]
    fn from_env(_cls: &Bound<'_, pyo3::types::PyType>, py: Python<'_>) -> PyResult<Minter> {
        let builder = idmint::Minter::from_env().map_err(|e| errors::minter(&e))?;
        let namespaces = std::env::var("IDMINT_CONFIG")
            .ok()
            .filter(|p| !p.is_empty())
            .map(|p| file_namespaces(&p))
            .unwrap_or_default();
        Minter::build(py, builder, namespaces, "environment".to_owned(), false)
    }

    /// The next ID of `namespace` (default: the first), in the namespace's usual form (`int`
    /// for 64-bit IDs, `uuid.UUID` for UUIDs, `str` for TypeIDs and other text forms) or in
    /// `format` (`"int"`, `"uuid"`, `"ulid"`, `"typeid"`, `"hex"`, `"base62"`, ...).
    #[pyo3(signature = (namespace = None, format = None))]
    fn next(
        &self,
        py: Python<'_>,
        namespace: Option<&Bound<'_, PyString>>,
        format: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let ns = self.namespace_of(namespace)?;
        let id = self.next_id(py, ns)?;
        match format {
            None => ns.form.to_py(py, id),
            Some(_) => Minter::form(ns, format)?.to_py(py, id),
        }
    }

    /// `n` IDs of `namespace`, increasing, as a list (1 to the minter's `max_batch`, default
    /// 100,000), in the namespace's usual form or in `format`.
    #[pyo3(signature = (n, namespace = None, format = None))]
    fn batch(
        &self,
        py: Python<'_>,
        n: u64,
        namespace: Option<&str>,
        format: Option<&str>,
    ) -> PyResult<Py<PyList>> {
        let ns = self.namespace(namespace)?;
        let form = Minter::form(ns, format)?;
        let ids = py.detach(|| self.inner.batch_in(&ns.name, n)).map_err(|e| errors::minter(&e))?;
        if let Some(&last) = ids.last() {
            // `next()` after this batch answers above it, as the engine would.
            let mut buffer = self.buffer(ns);
            let high = buffer.high.map_or(last, |h| h.max(last));
            buffer.high = Some(high);
            buffer.ids.retain(|id| *id > high);
        }
        form.list(py, &ids)
    }

    /// The generator ID this process holds for `namespace` (default: the first); `None` in a
    /// forked child before its first call, or for a namespace whose IDs come from a store.
    #[pyo3(signature = (namespace = None))]
    fn generator_id(&self, namespace: Option<&str>) -> PyResult<Option<u64>> {
        let ns = self.namespace(namespace)?;
        self.inner.generator_id(&ns.name).map_err(|e| errors::minter(&e))
    }

    /// The names of the namespaces, the first being the default.
    #[getter]
    fn namespaces(&self) -> Vec<String> {
        self.namespaces.iter().map(|ns| ns.name.clone()).collect()
    }

    /// The layout name of `namespace` (default: the first).
    #[pyo3(signature = (namespace = None))]
    fn layout(&self, namespace: Option<&str>) -> PyResult<String> {
        Ok(self.namespace(namespace)?.layout.name().to_owned())
    }

    /// Stores every namespace's mark and releases every claim; later calls raise
    /// `ClosedError`. Closing twice is harmless.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.closed.store(true, Ordering::Release);
        for ns in &self.namespaces {
            ns.buffer.lock().unwrap_or_else(|e| e.into_inner()).ids.clear();
        }
        py.detach(|| self.inner.close()).map_err(|e| errors::minter(&e))
    }

    /// The minter itself (`with Minter(...) as minter:`).
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the minter at the end of a `with` block.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// The store, and each namespace with its layout and this process's generator ID.
    fn __repr__(&self) -> String {
        let namespaces: Vec<String> = self
            .namespaces
            .iter()
            .map(|ns| {
                let generator = match self.inner.generator_id(&ns.name) {
                    Ok(Some(id)) => id.to_string(),
                    _ => "-".to_owned(),
                };
                format!("{}: {} (generator {generator})", ns.name, ns.layout.name())
            })
            .collect();
        format!("Minter({}, namespaces=[{}])", self.store, namespaces.join(", "))
    }

    /// The fork hook's part in this minter, for tests: whether it empties the buffers in a
    /// forked child (`False` only for the negative control).
    #[getter]
    fn _fork_hook(&self) -> bool {
        !self.unsafe_no_fork_hook
    }
}
