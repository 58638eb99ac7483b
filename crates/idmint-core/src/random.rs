//! The random bits of minted IDs (UUIDv7's `rand_b`): a per-thread ChaCha8 stream keyed from
//! the operating system's CSPRNG, read ahead in blocks so that a draw is a load and an add.
//!
//! Each thread keys its own ChaCha8 (`rand`'s `ChaCha8Rng`) with 32 bytes from `getrandom` on
//! its first draw, and again after every [`RESEED_BYTES`] it has given (as `rand`'s
//! `ThreadRng` does), so a process that forks or runs long never shares or keeps a stream for
//! long. The stream is read [`BLOCK_BYTES`] at a time into a buffer; a draw takes the next 8
//! bytes. A byte is never handed out twice: the index only moves up, and a refill overwrites
//! the whole buffer. Nothing here reads a clock or sleeps; the only I/O is the `getrandom` call
//! that keys a stream, once per [`RESEED_BYTES`]. Why eight rounds and 1 KiB at a time:
//! DESIGN.md, "Why does `uuid7` use a dedicated counter (RFC 9562 §6.2 method 1), and where do
//! its bits go?".

use std::cell::{Cell, RefCell};

use rand::{RngExt, SeedableRng, rngs::ChaCha8Rng};

use crate::error::Error;

/// How many bytes a stream gives before it is keyed again from the OS.
const RESEED_BYTES: usize = 64 * 1024;

/// How many bytes of the stream a refill reads ahead: sixteen ChaCha blocks, four passes of its
/// vectorised core, so that the fixed cost of a refill (the call, the copy) is shared by 128
/// draws.
const BLOCK_BYTES: usize = 1024;

/// The words of a read-ahead.
const WORDS: usize = BLOCK_BYTES / 8;

/// One thread's read-ahead: the stream's next words, `words[used..]` not yet handed out. Made
/// of `Cell`s and with nothing to drop, so reaching it is an address computation and a draw is
/// a compare, a load and a store; a refill is the stream's `fill` and one copy.
struct Ahead {
    words: Cell<[u64; WORDS]>,
    used: Cell<usize>,
}

/// One thread's stream: keyed from the OS on first use and after [`RESEED_BYTES`].
struct Stream {
    rng: Option<ChaCha8Rng>,
    /// Bytes read from `rng` since it was keyed.
    read: usize,
}

thread_local! {
    static AHEAD: Ahead = const {
        Ahead { words: Cell::new([0; WORDS]), used: Cell::new(WORDS) }
    };
    static STREAM: RefCell<Stream> = const { RefCell::new(Stream { rng: None, read: 0 }) };
}

/// 64 random bits from this thread's stream.
///
/// # Errors
///
/// [`Error::RandomUnavailable`] when the stream is due to be keyed and the OS refuses random
/// bytes (it does not once booted); the next call tries again.
#[inline]
pub(crate) fn random_u64() -> Result<u64, Error> {
    AHEAD.with(|ahead| ahead.draw(|words| STREAM.with(|s| s.borrow_mut().fill(words, os_key))))
}

/// 32 bytes from the OS CSPRNG: a stream's key.
fn os_key() -> Result<[u8; 32], Error> {
    let mut key = [0; 32];
    getrandom::fill(&mut key).map_err(|e| Error::RandomUnavailable(e.to_string()))?;
    Ok(key)
}

impl Ahead {
    /// The next word; `refill` overwrites every word with the stream's next ones when all are
    /// used.
    #[inline(always)]
    fn draw(
        &self,
        refill: impl FnOnce(&Cell<[u64; WORDS]>) -> Result<(), Error>,
    ) -> Result<u64, Error> {
        let mut at = self.used.get();
        if at >= WORDS {
            refill(&self.words)?;
            at = 0;
        }
        self.used.set(at + 1);
        let words: &Cell<[u64]> = &self.words;
        Ok(words.as_slice_of_cells()[at].get())
    }
}

impl Stream {
    /// Writes the stream's next [`BLOCK_BYTES`] into `words` (little-endian), keying a new
    /// stream with `key` first when none is keyed or this one has given [`RESEED_BYTES`].
    #[cold]
    #[inline(never)]
    fn fill(
        &mut self,
        words: &Cell<[u64; WORDS]>,
        key: impl FnOnce() -> Result<[u8; 32], Error>,
    ) -> Result<(), Error> {
        if self.read >= RESEED_BYTES {
            self.rng = None;
        }
        let rng = match &mut self.rng {
            Some(rng) => rng,
            none => {
                let fresh = ChaCha8Rng::from_seed(key()?);
                self.read = 0;
                none.insert(fresh)
            }
        };
        let mut fresh = [0; WORDS];
        rng.fill(&mut fresh);
        words.set(fresh);
        self.read += BLOCK_BYTES;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::*;

    /// A fresh read-ahead and stream, as a thread starts with, but not thread-local.
    fn fresh() -> (Ahead, Stream) {
        (
            Ahead { words: Cell::new([0; WORDS]), used: Cell::new(WORDS) },
            Stream { rng: None, read: 0 },
        )
    }

    /// The first `n` words of the ChaCha8 stream of `key`, as the read-ahead hands them out.
    fn stream(key: [u8; 32], n: usize) -> Vec<u64> {
        let mut bytes = vec![0; n * 8];
        ChaCha8Rng::from_seed(key).fill_bytes(&mut bytes);
        bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
    }

    /// With a fixed key the draws are exactly the stream, word after word across refills (no
    /// byte given twice or skipped); after RESEED_BYTES a new key is asked for and its stream
    /// starts (the same key here, so the words start over: that is how the test sees it).
    #[test]
    fn draws_are_the_stream_in_order_and_a_new_key_comes_after_the_budget() {
        let (ahead, mut s) = fresh();
        let mut keys = 0;
        let per_key = RESEED_BYTES / 8;
        let mut draws = Vec::new();
        for _ in 0..2 * per_key + 1 {
            let word = ahead.draw(|words| {
                s.fill(words, || {
                    keys += 1;
                    Ok([7; 32])
                })
            });
            draws.push(word.unwrap());
        }
        let expected = stream([7; 32], per_key);
        assert_eq!(draws[..per_key], expected[..]);
        assert_eq!(draws[per_key..2 * per_key], expected[..]);
        assert_eq!(draws[2 * per_key], expected[0]);
        assert_eq!(keys, 3);
    }

    /// A refused key is an error, not zero bits, and the next draw asks again.
    #[test]
    fn a_refused_key_is_an_error_and_the_next_draw_asks_again() {
        let (ahead, mut s) = fresh();
        let refused = ahead
            .draw(|words| s.fill(words, || Err(Error::RandomUnavailable("no entropy yet".into()))));
        assert!(matches!(refused, Err(Error::RandomUnavailable(_))));
        let word = ahead.draw(|words| s.fill(words, || Ok([1; 32])));
        assert_eq!(word.unwrap(), stream([1; 32], 1)[0]);
    }

    /// The thread's read-ahead draws (the OS answers here): a whole buffer and one more word
    /// reads the stream twice.
    #[test]
    fn the_thread_read_ahead_draws_and_refills() {
        let before = STREAM.with(|s| s.borrow().read);
        for _ in 0..=WORDS {
            random_u64().unwrap();
        }
        let after = STREAM.with(|s| s.borrow().read);
        assert!(after > before || after == BLOCK_BYTES, "read {before} then {after}");
    }
}
