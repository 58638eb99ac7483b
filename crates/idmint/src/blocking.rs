//! [`BlockingMinter`]: a [`Minter`] for code without an async runtime. It owns a small tokio
//! runtime (one worker, which keeps the windows ahead of the clock between calls); a forked
//! child starts a fresh runtime of its own, since its parent's threads did not survive the
//! fork.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use idmint_core::{AnyId, Layout};

use idmint_engine::Quick;

use crate::{Error, Minter, process::Process, settings::Settings};

/// Wakes the thread that waits in [`BlockingMinter::run`].
struct Unpark(std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `call` to its end on the calling thread, parked between polls, with `rt` entered: its
/// worker drives the timers and I/O the call waits on. Unlike `Runtime::block_on`, this does
/// not panic when the caller is itself inside a runtime (it blocks that thread, as any
/// blocking call would).
fn park_on<T>(rt: &Rt, call: impl Future<Output = T>) -> T {
    let _entered = rt.runtime.enter();
    let mut call = std::pin::pin!(call);
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = std::task::Context::from_waker(&waker);
    loop {
        if let std::task::Poll::Ready(out) = call.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// A runtime and the process that started it.
#[derive(Debug)]
struct Rt {
    process: Process,
    runtime: tokio::runtime::Runtime,
}

impl Rt {
    fn new() -> Result<Rt, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("idmint-minter")
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime(e.to_string()))?;
        Ok(Rt { process: Process::current(), runtime })
    }
}

/// A [`Minter`] with blocking calls: [`Builder::build_blocking`](crate::Builder::build_blocking).
/// Its calls block the calling thread (inside an async runtime too: they do not panic there,
/// but block that thread like any blocking call; use [`Minter`] in async code).
/// Dropped without [`close`](BlockingMinter::close), its runtime stops and its claims are
/// freed as after a crash: the next minter on the store starts above every ID it issued.
///
/// # Example
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let minter = idmint::Minter::builder().data_dir(dir.path()).build_blocking()?;
/// let ids = minter.batch(100)?;
/// assert!(ids.windows(2).all(|w| w[0] < w[1]));
/// assert!(ids[99] < minter.next()?);
/// minter.close()?;
/// # Ok::<(), idmint::Error>(())
/// ```
#[derive(Debug)]
pub struct BlockingMinter {
    // Dropped first: the minter, then its runtime (which stops the engine's tasks).
    minter: Minter,
    /// `None` only while dropped.
    rt: ArcSwapOption<Rt>,
}

impl BlockingMinter {
    pub(crate) fn start(settings: Settings) -> Result<BlockingMinter, Error> {
        let rt = Rt::new()?;
        let minter = park_on(&rt, Minter::start(settings))?;
        Ok(BlockingMinter { minter, rt: ArcSwapOption::from_pointee(rt) })
    }

    /// The runtime of this process: after a fork, a fresh one (the parent's is leaked, never
    /// shut down: its threads are the parent's).
    fn runtime(&self) -> Result<Arc<Rt>, Error> {
        let Some(rt) = self.rt.load_full() else { return Err(Error::Closed) };
        if rt.process.is_current() {
            return Ok(rt);
        }
        let fresh = Arc::new(Rt::new()?);
        let before = self.rt.compare_and_swap(&Some(Arc::clone(&rt)), Some(Arc::clone(&fresh)));
        if before.as_ref().is_some_and(|b| Arc::ptr_eq(b, &rt)) {
            std::mem::forget(rt);
            Ok(fresh)
        } else {
            // Another thread of the child was first: use its runtime.
            std::mem::forget(fresh);
            self.rt.load_full().ok_or(Error::Closed)
        }
    }

    /// The next ID without the runtime, when one is ready at once; `None` takes the full
    /// path, which waits on the runtime's clock, first come, first served with the other calls
    /// that wait (DESIGN.md, "Why are waiting calls served first come, first served, and how
    /// do single IDs keep the rate?").
    #[inline(always)]
    fn quick(&self, namespace: Option<&str>) -> Option<AnyId> {
        match self.minter.try_next(namespace) {
            Quick::Done(id) => Some(id),
            Quick::NextTick | Quick::Slow => None,
        }
    }

    fn run<T>(&self, call: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        park_on(&*self.runtime()?, call)
    }

    /// [`Minter::next`].
    ///
    /// # Errors
    ///
    /// As [`Minter::next`].
    ///
    /// # Example
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build_blocking()?;
    /// assert!(minter.next()? < minter.next()?);
    /// # Ok::<(), idmint::Error>(())
    /// ```
    pub fn next(&self) -> Result<AnyId, Error> {
        self.quick(None).map_or_else(|| self.next_on_runtime(None), Ok)
    }

    /// The full path of [`next`](Self::next) and [`next_in`](Self::next_in), on the runtime:
    /// out of line, so that the quick path's frame stays small (the futures of the full path
    /// are kilobytes).
    #[cold]
    #[inline(never)]
    fn next_on_runtime(&self, namespace: Option<&str>) -> Result<AnyId, Error> {
        match namespace {
            None => self.run(self.minter.next()),
            Some(namespace) => self.run(self.minter.next_in(namespace)),
        }
    }

    /// [`Minter::next_in`].
    ///
    /// # Errors
    ///
    /// As [`Minter::next_in`].
    ///
    /// # Example
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).namespace("a").build_blocking()?;
    /// assert_eq!(minter.next_in("a")?.bits(), 64);
    /// # Ok::<(), idmint::Error>(())
    /// ```
    pub fn next_in(&self, namespace: &str) -> Result<AnyId, Error> {
        self.quick(Some(namespace)).map_or_else(|| self.next_on_runtime(Some(namespace)), Ok)
    }

    /// [`Minter::next_as`].
    ///
    /// # Errors
    ///
    /// As [`Minter::next_as`].
    ///
    /// # Example
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build_blocking()?;
    /// let id: idmint::Snowflake = minter.next_as()?;
    /// assert!(id.to_raw() > 0);
    /// # Ok::<(), idmint::Error>(())
    /// ```
    #[inline]
    pub fn next_as<T>(&self) -> Result<T, Error>
    where
        T: TryFrom<AnyId, Error = idmint_core::Error>,
    {
        // `next`'s two paths, not a call of `next`: inlined here, the ID goes from the
        // generator to `T` in registers, where `next`'s answer is copied through memory.
        let id = match self.quick(None) {
            Some(id) => id,
            None => self.next_on_runtime(None)?,
        };
        Ok(T::try_from(id)?)
    }

    /// [`Minter::batch`].
    ///
    /// # Errors
    ///
    /// As [`Minter::batch`].
    ///
    /// # Example
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build_blocking()?;
    /// assert_eq!(minter.batch(10)?.len(), 10);
    /// # Ok::<(), idmint::Error>(())
    /// ```
    pub fn batch(&self, count: u64) -> Result<Vec<AnyId>, Error> {
        self.run(self.minter.batch(count))
    }

    /// [`Minter::batch_in`].
    ///
    /// # Errors
    ///
    /// As [`Minter::batch_in`].
    ///
    /// # Example
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).namespace("a").build_blocking()?;
    /// assert_eq!(minter.batch_in("a", 10)?.len(), 10);
    /// # Ok::<(), idmint::Error>(())
    /// ```
    pub fn batch_in(&self, namespace: &str, count: u64) -> Result<Vec<AnyId>, Error> {
        self.run(self.minter.batch_in(namespace, count))
    }

    /// [`Minter::layout`].
    ///
    /// # Errors
    ///
    /// As [`Minter::layout`].
    ///
    /// # Example
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build_blocking()?;
    /// assert_eq!(minter.layout("default")?.id_bits(), 64);
    /// # Ok::<(), idmint::Error>(())
    /// ```
    pub fn layout(&self, namespace: &str) -> Result<Layout, Error> {
        self.minter.layout(namespace)
    }

    /// [`Minter::generator_id`].
    ///
    /// # Errors
    ///
    /// As [`Minter::generator_id`].
    ///
    /// # Example
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build_blocking()?;
    /// assert_eq!(minter.generator_id("default")?, Some(0));
    /// # Ok::<(), idmint::Error>(())
    /// ```
    pub fn generator_id(&self, namespace: &str) -> Result<Option<u64>, Error> {
        self.minter.generator_id(namespace)
    }

    /// [`Minter::close`]: stores every mark and releases every claim.
    ///
    /// # Errors
    ///
    /// As [`Minter::close`].
    ///
    /// # Example
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build_blocking()?;
    /// minter.close()?;
    /// assert!(minter.next().is_err());
    /// # Ok::<(), idmint::Error>(())
    /// ```
    pub fn close(&self) -> Result<(), Error> {
        self.run(self.minter.close())
    }
}

impl Drop for BlockingMinter {
    /// Stops the runtime, which ends the engine's tasks and so frees its claims (as a crash
    /// would: every window was stored before an ID in it was issued); inside an async runtime,
    /// where waiting is not allowed, in the background. In a forked child whose runtime is
    /// still its parent's, that runtime is leaked: shutting it down would wait for threads
    /// that exist only in the parent.
    fn drop(&mut self) {
        let Some(rt) = self.rt.swap(None) else { return };
        if !rt.process.is_current() {
            std::mem::forget(rt);
            return;
        }
        if let Ok(rt) = Arc::try_unwrap(rt)
            && tokio::runtime::Handle::try_current().is_ok()
        {
            rt.runtime.shutdown_background();
        }
    }
}
