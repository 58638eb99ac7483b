//! Gives the memory that glibc's allocator keeps after a burst back to the kernel
//! (`malloc_trim`), so that a flood of connections does not leave `idmint serve` at its peak
//! resident size for as long as it runs.
//!
//! Why: glibc hands freed memory back only from the top of each arena. A flood (thousands of
//! connections, each with its buffers, freed in no order) leaves free pages under live ones,
//! and they stay resident: after the gRPC floods of `tests/grpc_flood.rs` the server held
//! 51.0 MB against 23.0 MB at its start. `malloc_trim(0)` walks every arena and returns free
//! pages with `madvise`: 24.5 MB after the same floods. (DESIGN.md, "Why does `idmint serve`
//! call `malloc_trim`?", has the allocators that were measured instead.)
//!
//! When ([`Trimmer`], a pure rule driven by readings, so its tests need no clock): every
//! [`CHECK_EVERY`] the task reads the resident size; when it is [`ABOVE_FLOOR`] or more above
//! the floor (the least size seen after a trim, or at the start), it trims, on a blocking
//! thread. A trim that gives back less than [`WORTH`] (the memory is in use, not free)
//! doubles the wait before the next one, up to [`LONGEST_WAIT`], so a server that needs more
//! memory for its load pays one walk of its arenas that often; a trim that gives back more
//! resets the wait. `--no-memory-trim` turns the task off. Off glibc it is never started.

use std::time::Duration;

use idmint_server::resident_bytes;

/// How often the resident size is read.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(2);
/// How far above the floor the resident size must be for a trim, in bytes.
pub(crate) const ABOVE_FLOOR: u64 = 16 << 20;
/// What a trim must give back, in bytes, to count as useful.
pub(crate) const WORTH: u64 = 4 << 20;
/// The longest wait between two trims that gave back too little.
pub(crate) const LONGEST_WAIT: Duration = Duration::from_secs(32);

/// The rule: when to trim, from the resident sizes read and what each trim gave back.
#[derive(Debug)]
pub(crate) struct Trimmer {
    /// The least resident size seen at the start or after a trim, in bytes.
    floor: u64,
    /// The wait after a trim that gave back too little.
    wait: Duration,
    /// No trim before this instant (time since the task started).
    not_before: Duration,
}

impl Trimmer {
    /// A rule whose floor is the resident size at the start.
    pub(crate) fn new(resident: u64) -> Self {
        Trimmer { floor: resident, wait: CHECK_EVERY, not_before: Duration::ZERO }
    }

    /// Whether to trim now, `at` (time since the start), with `resident` bytes resident.
    pub(crate) fn due(&self, at: Duration, resident: u64) -> bool {
        at >= self.not_before && resident >= self.floor.saturating_add(ABOVE_FLOOR)
    }

    /// Records a trim at `at` that took the resident size from `before` to `after`.
    pub(crate) fn trimmed(&mut self, at: Duration, before: u64, after: u64) {
        self.floor = self.floor.min(after);
        self.wait = if before.saturating_sub(after) >= WORTH {
            CHECK_EVERY
        } else {
            (self.wait * 2).min(LONGEST_WAIT)
        };
        self.not_before = at + self.wait;
    }
}

/// The task: reads the resident size every [`CHECK_EVERY`] and trims when [`Trimmer`] says so,
/// until the runtime stops. Returns at once where `malloc_trim` does not exist (not glibc) or
/// the resident size cannot be read.
pub(crate) async fn trim_after_bursts() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let started = tokio::time::Instant::now();
    let Some(resident) = resident_bytes() else { return };
    let mut trimmer = Trimmer::new(resident);
    let mut ticks = tokio::time::interval(CHECK_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(before) = resident_bytes() else { return };
        let at = started.elapsed();
        if !trimmer.due(at, before) {
            continue;
        }
        let walk = std::time::Instant::now();
        if tokio::task::spawn_blocking(release_free_memory).await.is_err() {
            return;
        }
        let took = walk.elapsed();
        let after = resident_bytes().unwrap_or(before);
        trimmer.trimmed(at, before, after);
        tracing::debug!(
            before_mb = before >> 20,
            after_mb = after >> 20,
            took_us = took.as_micros(),
            "gave freed memory back to the kernel"
        );
    }
}

/// `malloc_trim(0)`: every arena gives its free pages back to the kernel.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(unsafe_code, reason = "glibc's malloc_trim has no safe binding")]
fn release_free_memory() {
    // SAFETY: `malloc_trim` takes no pointer and touches only the allocator's own state, under
    // the same arena locks as `malloc` and `free`, so it is sound from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Nothing to do where the allocator is not glibc's.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    /// A run of readings through the rule: (seconds, resident MB, MB after a trim if one is
    /// due) and whether each is due.
    fn check(steps: &[(u64, u64, u64, bool)]) {
        let mut trimmer = Trimmer::new(20 * MB);
        for &(s, resident, after, want) in steps {
            let at = Duration::from_secs(s);
            let due = trimmer.due(at, resident * MB);
            assert_eq!(due, want, "at {s} s with {resident} MB: {trimmer:?}");
            if due {
                trimmer.trimmed(at, resident * MB, after * MB);
            }
        }
    }

    #[test]
    fn trims_above_the_floor_and_backs_off_when_nothing_comes_back() {
        check(&[
            // Under the floor plus 16 MB: nothing.
            (2, 35, 0, false),
            // A flood: 16 MB above the floor, and the trim gives back most of it.
            (4, 36, 22, true),
            // The next flood, 2 s later: due again at once, the last trim was worth it.
            (6, 50, 48, true),
            // That trim gave back 2 MB (the memory is in use): wait 4 s, then 8 s, 16, 32.
            (8, 50, 0, false),
            (10, 50, 50, true),
            (12, 50, 0, false),
            (16, 50, 0, false),
            (18, 50, 50, true),
            (26, 50, 0, false),
            (34, 50, 50, true),
            (50, 50, 0, false),
            (66, 50, 50, true),
            // The wait stops growing at 32 s.
            (97, 50, 0, false),
            (98, 50, 0, true),
            // That one gave 50 MB back: the floor is now 0 and the wait 2 s.
            (100, 15, 0, false),
            (100, 16, 0, true),
        ]);
    }

    #[test]
    fn the_floor_is_the_least_size_after_a_trim() {
        let mut trimmer = Trimmer::new(30 * MB);
        trimmer.trimmed(Duration::ZERO, 60 * MB, 25 * MB);
        assert!(trimmer.due(CHECK_EVERY, 41 * MB));
        trimmer.trimmed(CHECK_EVERY, 41 * MB, 40 * MB);
        // A trim that ends higher does not raise the floor.
        assert!(trimmer.due(CHECK_EVERY * 3, 41 * MB));
        assert!(!trimmer.due(CHECK_EVERY * 3, 40 * MB));
    }

    /// On this machine's glibc, what the task relies on: 64 MB freed in small pieces, every
    /// 64th kept, stays resident (glibc keeps it), and one call gives it back.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn freed_small_pieces_stay_resident_until_a_trim() {
        let before = resident_bytes().expect("VmRSS in /proc/self/status");
        let pieces: Vec<Vec<u8>> = (0..64 * 1024).map(|i| vec![i as u8; 1024]).collect();
        let kept: Vec<Vec<u8>> = pieces.into_iter().step_by(64).collect();
        let freed = resident_bytes().expect("VmRSS");
        release_free_memory();
        let trimmed = resident_bytes().expect("VmRSS");
        let mb = |bytes: u64| bytes as f64 / MB as f64;
        let seen = format!(
            "{:.1} MB at first, {:.1} MB after the free, {:.1} MB after the trim ({} kept)",
            mb(before),
            mb(freed),
            mb(trimmed),
            kept.len()
        );
        assert!(freed > before + 48 * MB, "the freed memory stayed resident: {seen}");
        assert!(trimmed + 40 * MB < freed, "the trim gave it back: {seen}");
    }
}
