//! The checker run on every seed's history: no ID acknowledged twice, IDs increasing per
//! client, server process and generator, and every ID's time at or below a mark that its
//! issuer stored while it held the claim.

use std::{
    collections::{BTreeMap, HashMap},
    fmt,
    sync::OnceLock,
};

use idmint_core::{AnyId, FieldValue, Layout};
use tokio::time::Instant;

use crate::etcd::MarkWrite;

/// One acknowledged request, as a client recorded it (built by the simulation, read by the
/// checker).
#[derive(Debug, Clone)]
pub struct Ack {
    /// The client that sent it.
    pub client: usize,
    /// The server process that answered.
    pub process: u64,
    /// When it was sent.
    pub invoked: Instant,
    /// When the client received the answer.
    pub acked: Instant,
    /// The IDs, in the order returned.
    pub ids: Vec<u64>,
}

/// The result of one seed.
///
/// # Example
///
/// ```
/// use idmint_sim::Report;
///
/// let report = Report { seed: 9, duplicates: 1, ..Report::default() };
/// assert!(!report.ok());
/// assert!(report.to_string().starts_with("seed 9:"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// IDs acknowledged and checked.
    pub ids: u64,
    /// Requests acknowledged.
    pub acked: u64,
    /// Requests that failed (nothing was issued, or the error was returned).
    pub failed: u64,
    /// Failed requests by reason (the server's error, or why it was not reached).
    pub failures: BTreeMap<String, u64>,
    /// Requests whose outcome the client could not know (reply lost, server died).
    pub info: u64,
    /// IDs acknowledged more than once.
    pub duplicates: u64,
    /// Up to three duplicated IDs with the two processes that issued them.
    pub duplicate_examples: Vec<(u64, u64, u64)>,
    /// IDs not above the previous one from the same client, process and generator.
    pub order_violations: u64,
    /// Batches with an ID whose time is above every mark its issuer stored while holding the
    /// claim.
    pub mark_violations: u64,
    /// Mark writes applied for a writer that no longer held the claim (0 with the fence).
    pub unheld_writes: u64,
    /// The first few violations, described.
    pub examples: Vec<String>,
    /// Faults injected, by kind.
    pub nemeses: BTreeMap<&'static str, u64>,
    /// A hash of the whole history: equal across replays of one seed in exact runs
    /// (`--cfg tokio_unstable`).
    pub trace_hash: u64,
}

impl Report {
    /// Whether every invariant held.
    pub fn ok(&self) -> bool {
        self.duplicates == 0 && self.order_violations == 0 && self.mark_violations == 0
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {}: {} ids in {} acked requests ({} failed, {} ambiguous), {} duplicates {:?}, {} order violations, {} mark violations, {} mark writes without the claim, nemeses {:?}",
            self.seed,
            self.ids,
            self.acked,
            self.failed,
            self.info,
            self.duplicates,
            self.duplicate_examples,
            self.order_violations,
            self.mark_violations,
            self.unheld_writes,
            self.nemeses
        )?;
        for example in &self.examples {
            write!(f, "\n  {example}")?;
        }
        Ok(())
    }
}

struct Decoder {
    layout: Layout,
    /// Names of the fields that hold the generator ID.
    names: Vec<String>,
    by_fields: HashMap<Vec<u64>, u64>,
}

fn decoder() -> &'static Decoder {
    static DECODER: OnceLock<Decoder> = OnceLock::new();
    DECODER.get_or_init(|| {
        let layout = Layout::builtin("snowflake").expect("snowflake layout");
        let number = |v: &FieldValue| match v {
            FieldValue::Number(n) => *n,
            _ => u64::MAX,
        };
        let names = layout.identity(0).expect("identity").into_iter().map(|f| f.0).collect();
        let by_fields = (0..layout.generator_count())
            .map(|g| {
                let fields = layout.identity(g).expect("identity");
                (fields.iter().map(|(_, v)| number(v)).collect(), g)
            })
            .collect();
        Decoder { layout, names, by_fields }
    })
}

impl Decoder {
    /// (generator ID, Unix ms) of a snowflake ID.
    fn decode(&self, id: u64) -> Option<(u64, u64)> {
        let fields = self.layout.decode(AnyId::U64(id)).ok()?;
        let key: Vec<u64> = self
            .names
            .iter()
            .map(|name| {
                fields.iter().find(|(n, _)| n == name).map_or(u64::MAX, |(_, v)| match v {
                    FieldValue::Number(n) => *n,
                    _ => u64::MAX,
                })
            })
            .collect();
        let generator = *self.by_fields.get(&key)?;
        let time = self.layout.time_ms(AnyId::U64(id), 0).ok()??;
        Some((generator, time))
    }
}

/// Checks a history against the mark writes etcd applied.
pub(crate) fn check(
    seed: u64,
    acks: &[Ack],
    writes: &[MarkWrite],
    failed: u64,
    info: u64,
    nemeses: BTreeMap<&'static str, u64>,
) -> Report {
    let decoder = decoder();
    let mut report =
        Report { seed, failed, info, nemeses, acked: acks.len() as u64, ..Report::default() };

    // Marks stored while the writer held the claim, per (process, generator): (when, max).
    let mut marks: BTreeMap<(u64, u64), Vec<(Instant, u64)>> = BTreeMap::new();
    for w in writes.iter().filter(|w| w.held) {
        let list = marks.entry((w.process, w.generator_id)).or_default();
        let best = list.last().map_or(w.mark_ms, |&(_, m)| m.max(w.mark_ms));
        list.push((w.at, best));
    }

    report.unheld_writes = writes.iter().filter(|w| !w.held).count() as u64;
    let mut all: Vec<u64> = Vec::new();
    let mut last: BTreeMap<(usize, u64, u64), u64> = BTreeMap::new();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for ack in acks {
        report.ids += ack.ids.len() as u64;
        let (Some(&first), Some(&final_id)) = (ack.ids.first(), ack.ids.last()) else {
            continue;
        };
        all.extend_from_slice(&ack.ids);
        for &id in &ack.ids {
            hash = (hash ^ id).wrapping_mul(0x0100_0000_01b3);
        }
        hash = (hash ^ ack.process).wrapping_mul(0x0100_0000_01b3);
        report.order_violations += ack.ids.windows(2).filter(|w| w[0] >= w[1]).count() as u64;
        let (Some((generator, _)), Some((last_generator, time))) =
            (decoder.decode(first), decoder.decode(final_id))
        else {
            report.mark_violations += 1;
            continue;
        };
        if generator != last_generator {
            report.order_violations += 1;
        }
        let previous = last.entry((ack.client, ack.process, generator)).or_insert(0);
        if first <= *previous {
            report.order_violations += 1;
        }
        *previous = (*previous).max(final_id);
        let stored = marks.get(&(ack.process, generator)).and_then(|list| {
            let before = list.partition_point(|&(at, _)| at <= ack.acked);
            before.checked_sub(1).map(|i| list[i].1)
        });
        if stored.is_none_or(|mark| time > mark) {
            report.mark_violations += 1;
            if report.examples.len() < 5 {
                let writes: Vec<_> = writes
                    .iter()
                    .filter(|w| w.generator_id == generator)
                    .map(|w| {
                        (
                            w.process,
                            w.mark_ms,
                            w.at.duration_since(ack.invoked).as_millis() as i64,
                            w.held,
                        )
                    })
                    .collect();
                report.examples.push(format!(
                    "process {} generator {generator}: id time {time} above its stored mark {stored:?} (batch of {}, acked {:?} after invoke); writes of this generator (process, mark, ms after invoke, held): {writes:?}",
                    ack.process,
                    ack.ids.len(),
                    ack.acked - ack.invoked,
                ));
            }
        }
    }
    all.sort_unstable();
    for pair in all.windows(2) {
        if pair[0] == pair[1] {
            report.duplicates += 1;
            if report.duplicate_examples.len() < 3 {
                let mut issuers =
                    acks.iter().filter(|a| a.ids.contains(&pair[0])).map(|a| a.process);
                let first = issuers.next().unwrap_or(0);
                report.duplicate_examples.push((pair[0], first, issuers.next().unwrap_or(first)));
            }
        }
    }
    report.trace_hash = hash;
    report
}
