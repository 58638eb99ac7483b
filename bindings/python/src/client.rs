//! `idmint.Client`: the client of a fleet of `idmint serve` (idmint-client, through the
//! `idmint` crate's feature `client`): failover between servers, safe retries, a prefetch
//! buffer. Its runtime and its buffer belong to one process: after a fork (the fork hook's
//! new generation), the child leaves its parent's client untouched and builds its own at its
//! first call, so it never hands out IDs its parent prefetched.

use std::sync::{Arc, Mutex};

use idmint::client::{Client as Inner, ClientBuilder, blocking};
use pyo3::{prelude::*, types::PyList};

use crate::{
    errors::{self, Class},
    ids::Form,
};

/// The client of this process and the fork generation it was built in.
#[derive(Debug)]
struct Current {
    generation: u64,
    client: Arc<blocking::Client>,
}

/// A client of a fleet of `idmint serve`: IDs from the servers at `endpoints` (failover
/// between them, safe retries), `prefetch` IDs fetched ahead in the background.
#[pyclass(module = "idmint", frozen)]
#[derive(Debug)]
pub(crate) struct Client {
    builder: ClientBuilder,
    endpoints: Vec<String>,
    namespace: String,
    /// `None` once closed.
    current: Mutex<Option<Current>>,
    closed: std::sync::atomic::AtomicBool,
}

impl Client {
    /// This process's client: built again after a fork (the parent's is leaked, never used,
    /// closed or dropped here: its runtime's threads are the parent's).
    fn client(&self) -> PyResult<Arc<blocking::Client>> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Class::Closed.err("the client is closed"));
        }
        let generation = crate::fork_generation();
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        match current.take() {
            Some(c) if c.generation == generation => {
                let client = Arc::clone(&c.client);
                *current = Some(c);
                Ok(client)
            }
            stale => {
                std::mem::forget(stale);
                let client = Arc::new(
                    self.builder.clone().build_blocking().map_err(|e| errors::client(&e))?,
                );
                *current = Some(Current { generation, client: Arc::clone(&client) });
                Ok(client)
            }
        }
    }
}

#[pymethods]
impl Client {
    /// A client of the servers at `endpoints` (URLs such as `http://10.0.0.1:8080`) for
    /// `namespace` (default: the servers' default), with `token` (a bearer token) if the
    /// namespace asks for one. `prefetch`: how many IDs one request fetches ahead (default
    /// 100); the next request goes out when half of them are used.
    #[new]
    #[pyo3(signature = (endpoints, *, namespace = None, token = None, prefetch = None))]
    fn new(
        endpoints: Vec<String>,
        namespace: Option<String>,
        token: Option<String>,
        prefetch: Option<usize>,
    ) -> PyResult<Client> {
        let mut builder = Inner::builder().endpoints(endpoints.clone());
        if let Some(namespace) = &namespace {
            builder = builder.namespace(namespace.clone());
        }
        if let Some(token) = token {
            builder = builder.token(token);
        }
        if let Some(prefetch) = prefetch {
            builder = builder.prefetch(prefetch, prefetch / 2);
        }
        let client = builder.clone().build_blocking().map_err(|e| errors::client(&e))?;
        let namespace = namespace.unwrap_or_else(|| "default".to_owned());
        Ok(Client {
            builder,
            endpoints,
            namespace,
            current: Mutex::new(Some(Current {
                generation: crate::fork_generation(),
                client: Arc::new(client),
            })),
            closed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The next ID: `int` for 64-bit IDs, `uuid.UUID` for 128-bit ones, or in `format`
    /// (`"int"`, `"uuid"`, `"ulid"`, `"hex"`, ...).
    #[pyo3(signature = (format = None))]
    fn next(&self, py: Python<'_>, format: Option<&str>) -> PyResult<Py<PyAny>> {
        let client = self.client()?;
        let id = py.detach(|| client.next()).map_err(|e| errors::client(&e))?;
        Form::for_bits(id.bits(), format)?.to_py(py, id)
    }

    /// `n` IDs, increasing, as a list, in the form of [`next`](Client::next).
    #[pyo3(signature = (n, format = None))]
    fn batch(&self, py: Python<'_>, n: usize, format: Option<&str>) -> PyResult<Py<PyList>> {
        let client = self.client()?;
        let ids = py.detach(|| client.batch(n)).map_err(|e| errors::client(&e))?;
        let Some(first) = ids.first() else { return Ok(PyList::empty(py).unbind()) };
        Form::for_bits(first.bits(), format)?.list(py, &ids)
    }

    /// The namespace the client asks for.
    #[getter]
    fn namespace(&self) -> String {
        self.namespace.clone()
    }

    /// The servers' URLs.
    #[getter]
    fn endpoints(&self) -> Vec<String> {
        self.endpoints.clone()
    }

    /// Stops the prefetching; later calls raise `ClosedError`. The IDs prefetched and not
    /// handed out are never used.
    fn close(&self, py: Python<'_>) {
        self.closed.store(true, std::sync::atomic::Ordering::Release);
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(current) = current {
            if current.generation != crate::fork_generation() {
                std::mem::forget(current);
                return;
            }
            if let Ok(client) = Arc::try_unwrap(current.client) {
                py.detach(|| client.close());
            }
        }
    }

    /// The client itself (`with Client(...) as client:`).
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the client at the end of a `with` block.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    /// The servers and the namespace.
    fn __repr__(&self) -> String {
        format!("Client(endpoints={:?}, namespace={:?})", self.endpoints, self.namespace)
    }
}

impl Drop for Client {
    /// In a forked child, the parent's client is leaked: dropping it would wait for runtime
    /// threads that exist only in the parent.
    fn drop(&mut self) {
        let current = self.current.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(current) = current
            && current.generation != crate::fork_generation()
        {
            std::mem::forget(current);
        }
    }
}
