//! Which process a minter's engine and runtime belong to: a [`Process`] token that tells, in
//! one relaxed load, whether the caller still runs in the process that made it or in a forked
//! child.
//!
//! `getpid(2)` is a system call (about 120 ns on a KVM guest, five times the cost of an ID);
//! instead, a `pthread_atfork` child handler moves a fork generation on in every child, and a
//! token compares the generation it was made in. The process ID is still recorded, for error
//! messages, and is the check itself if the handler could not be registered.

use std::sync::{
    Once,
    atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
};

/// How many forks lie between this process and the one that first registered the handler.
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// Whether the handler is in place, so that [`GENERATION`] can be trusted.
static REGISTERED: AtomicBool = AtomicBool::new(false);
static REGISTER: Once = Once::new();

/// Runs in the child of every `fork(2)`, on its only thread, before `fork` returns: one atomic
/// add, which is async-signal-safe.
extern "C" fn forked_child() {
    GENERATION.fetch_add(1, Relaxed);
}

/// The process a minter's engine or runtime was made in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Process {
    pid: u32,
    generation: u64,
}

impl Process {
    /// The calling process (the fork handler is registered on the first call).
    pub(crate) fn current() -> Process {
        REGISTER.call_once(|| {
            #[expect(unsafe_code, reason = "the only way to hear of a fork without a system call")]
            // SAFETY: `forked_child` is a plain `extern "C" fn` that only adds to an atomic, so
            // it may run in a child of a multi-threaded parent; the other handlers are none.
            let status = unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
            REGISTERED.store(status == 0, Relaxed);
        });
        Process { pid: std::process::id(), generation: GENERATION.load(Relaxed) }
    }

    /// Whether the caller runs in this process, not in a child forked from it since.
    pub(crate) fn is_current(self) -> bool {
        if REGISTERED.load(Relaxed) {
            GENERATION.load(Relaxed) == self.generation
        } else {
            std::process::id() == self.pid
        }
    }

    /// Its process ID.
    pub(crate) fn pid(self) -> u32 {
        self.pid
    }
}
