//! The checker, in the spirit of Jepsen's `unique-ids`: over one or more histories it checks
//! that every acknowledged ID is distinct; that per server and per generator ID the IDs grow
//! in real time (an operation that began after another one ended returns larger IDs: the
//! snowflake layout promises this order; of a `uuid7` ID, the (ms, counter) pair must grow,
//! its random bits being no part of the order, see [`Decoding`]); that every ID's generator ID was claimed by the
//! server that returned it (from the server's log); and that every ID's time is at or below
//! the durable mark stored for its generator ID at the end (marks only grow, so the last one
//! bounds every earlier one). It counts ok/fail/info operations and gaps (IDs skipped inside
//! one millisecond, as lost answers leave them).

use std::collections::{BTreeMap, HashMap, HashSet};

use idmint_core::{Snowflake, Uuid7, Uuid7Parts, Uuid7Split};
use serde::Serialize;

use crate::history::{Event, Holding};

/// Where a snowflake ID's fields sit, from idmint-core's widths: the sequence lowest, the
/// generator ID (datacenter and worker) above it, the time on top, 63 bits in all. Shifts and
/// masks rather than `Snowflake::into_parts`, because the checker reads each of a run's
/// hundreds of millions of IDs several times, in a debug build in CI, where `into_parts` cost
/// about 200 ns for each read of an ID's generator and time and a `--quick` run took 23 minutes
/// instead of 14. `decoding_agrees_with_the_snowflake_layout` holds them to the layout.
const SNOWFLAKE_GENERATOR_MASK: u128 =
    (1 << (Snowflake::DATACENTER_BITS + Snowflake::WORKER_BITS)) - 1;
const SNOWFLAKE_TIME_SHIFT: u32 =
    Snowflake::SEQUENCE_BITS + Snowflake::WORKER_BITS + Snowflake::DATACENTER_BITS;
const SNOWFLAKE_BITS: u32 = SNOWFLAKE_TIME_SHIFT + Snowflake::TIMESTAMP_BITS;

/// How many examples of each kind of violation a report keeps.
const EXAMPLES: usize = 5;

/// How the checker reads the IDs of a history (from its `Event::Layout`): each layout
/// answers where an ID's generator ID and time are and which part of it must grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Decoding {
    /// idmint's 64-bit snowflake: 41-bit ms, 10-bit generator ID, 12-bit sequence; the whole
    /// ID grows per generator.
    #[default]
    Snowflake,
    /// `uuid7` with the default split (48-bit ms, version, 12-bit counter, variant, 16-bit
    /// generator ID, 46 random bits): the (ms, counter) pair grows per generator; the random
    /// bits are no part of the order.
    Uuid7,
    /// Any other layout: uniqueness only.
    Opaque,
}

impl Decoding {
    /// The decoding of the layout named `name`.
    pub(crate) fn of(name: &str) -> Decoding {
        match name {
            "snowflake" => Decoding::Snowflake,
            "uuid7" => Decoding::Uuid7,
            _ => Decoding::Opaque,
        }
    }

    /// The generator ID an ID was minted under.
    pub(crate) fn generator_of(self, id: u128) -> u64 {
        match self {
            Decoding::Snowflake if id >> SNOWFLAKE_BITS != 0 => u64::MAX,
            Decoding::Snowflake => {
                u64::try_from((id >> Snowflake::SEQUENCE_BITS) & SNOWFLAKE_GENERATOR_MASK)
                    .unwrap_or(u64::MAX)
            }
            Decoding::Uuid7 => uuid7_parts(id).generator,
            Decoding::Opaque => 0,
        }
    }

    /// The Unix ms of an ID.
    pub(crate) fn time_of(self, id: u128) -> u64 {
        match self {
            Decoding::Snowflake if id >> SNOWFLAKE_BITS != 0 => u64::MAX,
            Decoding::Snowflake => u64::try_from(id >> SNOWFLAKE_TIME_SHIFT)
                .map_or(u64::MAX, |ms| ms.saturating_add(Snowflake::EPOCH_MS)),
            Decoding::Uuid7 => uuid7_parts(id).unix_ms,
            Decoding::Opaque => 0,
        }
    }

    /// What must grow per generator ID: the whole snowflake ID; of a `uuid7`, the
    /// (ms, counter) pair as one number.
    pub(crate) fn order_key(self, id: u128) -> u128 {
        match self {
            Decoding::Snowflake | Decoding::Opaque => id,
            Decoding::Uuid7 => {
                let parts = uuid7_parts(id);
                (u128::from(parts.unix_ms) << uuid7_counter_bits()) | u128::from(parts.counter)
            }
        }
    }

    /// The Unix ms of an order key (the time part of what [`Decoding::order_key`] returns).
    fn time_of_key(self, key: u128) -> u64 {
        match self {
            Decoding::Uuid7 => u64::try_from(key >> uuid7_counter_bits()).unwrap_or(u64::MAX),
            Decoding::Snowflake | Decoding::Opaque => self.time_of(key),
        }
    }

    /// An ID as a report shows it: a number, or a `uuid7` in RFC 9562 hex.
    fn show(self, id: u128) -> String {
        match self {
            Decoding::Uuid7 => match Uuid7::from_u128(id) {
                Ok(uuid) => uuid.to_string(),
                Err(_) => format!("{id:#034x} (not a UUIDv7)"),
            },
            Decoding::Snowflake | Decoding::Opaque => id.to_string(),
        }
    }

    /// An order key as a report shows it.
    fn show_key(self, key: u128) -> String {
        match self {
            Decoding::Uuid7 => format!(
                "(ms {}, counter {})",
                key >> uuid7_counter_bits(),
                key & ((1 << uuid7_counter_bits()) - 1)
            ),
            Decoding::Snowflake | Decoding::Opaque => format!("id {key}"),
        }
    }
}

/// The counter's bits in idmint's default `uuid7` split: an order key is (ms, counter).
fn uuid7_counter_bits() -> u32 {
    Uuid7Split::default().counter_bits
}

/// The fields of a `uuid7` ID in idmint's default split, read by idmint-core; an ID whose
/// version or variant is wrong reads as generator `u64::MAX` at time 0, which the claim and
/// order checks then report.
fn uuid7_parts(id: u128) -> Uuid7Parts {
    Uuid7::from_u128(id).map(Uuid7::into_parts).unwrap_or(Uuid7Parts {
        unix_ms: 0,
        sub_ms: 0,
        counter: 0,
        generator: u64::MAX,
        random: 0,
    })
}

/// One operation's IDs of one generator ID: (invoked, returned, smallest, largest, operation).
type Span = (u64, u64, u128, u128, u32);

/// One poll of the watcher: per generator ID, (holding server, claim, mark).
#[derive(Debug)]
struct Poll {
    t: u64,
    end: u64,
    store: u32,
    held: HashMap<u64, Seen>,
}

/// One generator ID in a poll: the holding server, the claim, the stored mark.
type Seen = (Option<u32>, Option<String>, Option<u64>);

/// One acknowledged operation.
#[derive(Debug)]
struct Op {
    client: u32,
    server: Option<u32>,
    invoked: u64,
    returned: u64,
}

/// What the checker found.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Report {
    /// Whether every check passed and at least one ID was checked.
    pub(crate) valid: bool,
    /// Operations invoked.
    pub(crate) attempted: u64,
    /// Operations that returned IDs.
    pub(crate) ok: u64,
    /// Operations refused (nothing issued).
    pub(crate) fail: u64,
    /// Ambiguous operations.
    pub(crate) info: u64,
    /// IDs acknowledged.
    pub(crate) ids: u64,
    /// IDs that were acknowledged more than once (each extra copy counts).
    pub(crate) duplicates: u64,
    /// Some of them.
    pub(crate) duplicate_examples: Vec<String>,
    /// The smallest and largest ID.
    pub(crate) range: Option<(u128, u128)>,
    /// Operations whose IDs were not above those of an operation on the same server and
    /// generator ID that had returned before they began (or not increasing inside a batch).
    pub(crate) order_violations: u64,
    /// Some of them.
    pub(crate) order_examples: Vec<String>,
    /// IDs whose generator ID the server that returned them never claimed.
    pub(crate) unclaimed: u64,
    /// Operations that returned IDs of a generator ID that one claim of another server held
    /// all through them (from the watcher's polls before and after the operation), with times
    /// above where that claim began (the mark the first poll that saw it read; a claim starts
    /// above the mark it found, and marks only grow). A server may still finish inside the
    /// window it stored before it lost its claim: the new holder starts above it.
    pub(crate) held_by_another: u64,
    /// Some of them.
    pub(crate) holder_examples: Vec<String>,
    /// Operations whose IDs of one generator ID reach above the mark stored when they
    /// returned (the first poll after them, on the same store), counted once per generator.
    pub(crate) above_mark_at_return: u64,
    /// IDs whose time is above the stored mark of their generator ID (or that have none,
    /// when marks were recorded).
    pub(crate) above_mark: u64,
    /// Some of them.
    pub(crate) mark_examples: Vec<String>,
    /// Holes inside one millisecond between consecutive acknowledged IDs of one generator ID.
    pub(crate) gaps: u64,
    /// The IDs those holes skipped.
    pub(crate) skipped: u64,
    /// Nemeses that fired, by kind.
    pub(crate) nemeses: BTreeMap<String, u64>,
}

impl Report {
    /// Whether any check found a violation (what a negative control must produce).
    pub(crate) fn caught(&self) -> bool {
        self.duplicates > 0
            || self.order_violations > 0
            || self.unclaimed > 0
            || self.held_by_another > 0
            || self.above_mark > 0
            || self.above_mark_at_return > 0
    }
}

/// Builds a report from events, fed one at a time.
#[derive(Debug, Default)]
pub(crate) struct Checker {
    clients: Vec<String>,
    client_index: HashMap<String, u32>,
    servers: Vec<String>,
    server_index: HashMap<String, u32>,
    /// Per client, the pending invocation: (server, t).
    pending: HashMap<u32, (Option<u32>, u64)>,
    ops: Vec<Op>,
    /// Every acknowledged ID with its operation.
    ids: Vec<(u128, u32)>,
    claims: HashMap<u32, HashSet<u64>>,
    marks: HashMap<u64, u64>,
    /// The watcher's polls, in the order recorded.
    polls: Vec<Poll>,
    /// How the IDs are read (an `Event::Layout` says; snowflake without one).
    decoding: Decoding,
    report: Report,
}

impl Checker {
    fn client(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.client_index.get(name) {
            return i;
        }
        let i = u32::try_from(self.clients.len()).unwrap_or(u32::MAX);
        self.clients.push(name.to_owned());
        self.client_index.insert(name.to_owned(), i);
        i
    }

    fn server(&mut self, name: &str) -> Option<u32> {
        if name == "*" {
            return None;
        }
        if let Some(&i) = self.server_index.get(name) {
            return Some(i);
        }
        let i = u32::try_from(self.servers.len()).unwrap_or(u32::MAX);
        self.servers.push(name.to_owned());
        self.server_index.insert(name.to_owned(), i);
        Some(i)
    }

    /// Takes one event.
    pub(crate) fn add(&mut self, event: Event) {
        match event {
            Event::Invoke { client, server, t, .. } => {
                let client = self.client(&client);
                let server = self.server(&server);
                self.report.attempted += 1;
                self.pending.insert(client, (server, t));
            }
            Event::Ok { client, t, ids } => {
                let client = self.client(&client);
                let Some((server, invoked)) = self.pending.remove(&client) else { return };
                self.report.ok += 1;
                let op = u32::try_from(self.ops.len()).unwrap_or(u32::MAX);
                self.ops.push(Op { client, server, invoked, returned: t });
                self.ids.extend(ids.into_iter().map(|id| (id, op)));
            }
            Event::Fail { client, .. } => {
                let client = self.client(&client);
                if self.pending.remove(&client).is_some() {
                    self.report.fail += 1;
                }
            }
            Event::Info { client, .. } => {
                let client = self.client(&client);
                if self.pending.remove(&client).is_some() {
                    self.report.info += 1;
                }
            }
            Event::Claim { server, generator } => {
                if let Some(server) = self.server(&server) {
                    self.claims.entry(server).or_default().insert(generator);
                }
            }
            Event::Mark { generator, mark_ms } => {
                let mark = self.marks.entry(generator).or_insert(mark_ms);
                *mark = (*mark).max(mark_ms);
            }
            Event::Layout { name } => self.decoding = Decoding::of(&name),
            Event::Holders { t, end, store, held } => {
                let held = held
                    .into_iter()
                    .map(|Holding { generator, server, claim, mark_ms }| {
                        let server = server.as_deref().and_then(|s| self.server(s));
                        (generator, (server, claim, mark_ms))
                    })
                    .collect();
                self.polls.push(Poll { t, end, store, held });
            }
            Event::Nemesis { kind, .. } => *self.report.nemeses.entry(kind).or_default() += 1,
        }
    }

    /// Runs every check.
    pub(crate) fn finish(mut self) -> Report {
        // Operations still pending at the end were never answered: ambiguous.
        self.report.info += self.pending.len() as u64;
        self.report.ids = self.ids.len() as u64;
        if self.decoding != Decoding::Opaque {
            self.check_holders_and_marks();
            self.check_order();
            self.check_at_the_time();
        }
        self.ids.sort_unstable();
        self.check_unique();
        if self.decoding != Decoding::Opaque {
            self.count_gaps();
        }
        let report = &mut self.report;
        report.valid = report.ids > 0 && !report.caught();
        self.report
    }

    fn op_label(&self, op: u32) -> String {
        let op = &self.ops[op as usize];
        let server = op.server.map_or("*", |s| self.servers[s as usize].as_str());
        format!("{}@{}", self.clients[op.client as usize], server)
    }

    fn check_holders_and_marks(&mut self) {
        let marks_recorded = !self.marks.is_empty();
        let d = self.decoding;
        for &(id, op) in &self.ids {
            let generator = d.generator_of(id);
            if let Some(server) = self.ops[op as usize].server
                && !self.claims.get(&server).is_some_and(|c| c.contains(&generator))
            {
                self.report.unclaimed += 1;
            }
            if marks_recorded {
                let mark = self.marks.get(&generator).copied();
                if mark.is_none_or(|m| d.time_of(id) > m) {
                    self.report.above_mark += 1;
                    if self.report.mark_examples.len() < EXAMPLES {
                        self.report.mark_examples.push(format!(
                            "id {} (generator {generator}, time {}) above mark {mark:?}",
                            d.show(id),
                            d.time_of(id)
                        ));
                    }
                }
            }
        }
    }

    /// The time-bounded checks, per operation and generator ID, against the watcher's polls:
    /// the last poll that ended before the operation began and the first that began after
    /// it returned. If both saw one claim of another server on the generator ID (the same
    /// lease, or the same holding process), that server held it all through, and the
    /// operation's IDs of it are not its server's to give. If both are of one store, the
    /// mark the second one read bounds the IDs' times (marks only grow on a store).
    fn check_at_the_time(&mut self) {
        if self.polls.is_empty() {
            return;
        }
        let mut polls = std::mem::take(&mut self.polls);
        polls.sort_by_key(|p| p.t);
        let mut ends: Vec<(u64, usize)> =
            polls.iter().enumerate().map(|(i, p)| (p.end, i)).collect();
        ends.sort_unstable();
        // Per claim, the mark the first poll that saw it read: at or above where it began.
        let mut began: HashMap<String, u64> = HashMap::new();
        for poll in &polls {
            for (_, claim, mark) in poll.held.values() {
                if let (Some(claim), Some(mark)) = (claim, mark) {
                    began.entry(claim.clone()).or_insert(*mark);
                }
            }
        }
        let d = self.decoding;
        let mut start = 0;
        while start < self.ids.len() {
            let op = self.ids[start].1;
            let mut end = start;
            let mut times: BTreeMap<u64, u64> = BTreeMap::new();
            while end < self.ids.len() && self.ids[end].1 == op {
                let id = self.ids[end].0;
                let latest = times.entry(d.generator_of(id)).or_insert(0);
                *latest = (*latest).max(d.time_of(id));
                end += 1;
            }
            start = end;
            let o = &self.ops[op as usize];
            let Some(server) = o.server else { continue };
            // The last poll that ended before the operation began...
            let before = ends.partition_point(|&(e, _)| e < o.invoked).checked_sub(1);
            let before = before.map(|i| &polls[ends[i].1]);
            // ...and the first that began after it returned.
            let after = polls.get(polls.partition_point(|p| p.t <= o.returned));
            let (Some(before), Some(after)) = (before, after) else { continue };
            for (generator, latest) in times {
                if let (Some((Some(a), Some(ca), _)), Some((Some(b), Some(cb), _))) =
                    (before.held.get(&generator), after.held.get(&generator))
                    && a == b
                    && ca == cb
                    && *a != server
                    && began.get(ca).is_some_and(|&start| latest > start)
                {
                    self.report.held_by_another += 1;
                    if self.report.holder_examples.len() < EXAMPLES {
                        let example = format!(
                            "{}: generator {generator} time {latest}, held by {} ({ca}, begun at or below {}) all through",
                            self.op_label(op),
                            self.servers[*a as usize],
                            began.get(ca).copied().unwrap_or_default()
                        );
                        self.report.holder_examples.push(example);
                    }
                }
                if before.store == after.store
                    && let Some((_, _, Some(mark))) = after.held.get(&generator)
                    && latest > *mark
                {
                    self.report.above_mark_at_return += 1;
                    if self.report.mark_examples.len() < EXAMPLES {
                        let example = format!(
                            "{}: generator {generator} time {latest} above the mark {mark} stored when it returned",
                            self.op_label(op)
                        );
                        self.report.mark_examples.push(example);
                    }
                }
            }
        }
    }

    /// Per (server, generator): each batch increasing, and each operation above every one
    /// that returned before it began.
    fn check_order(&mut self) {
        // (server, generator) -> [(invoked, returned, min, max, op)]
        let mut groups: HashMap<(u32, u64), Vec<Span>> = HashMap::new();
        let d = self.decoding;
        let mut start = 0;
        while start < self.ids.len() {
            let op = self.ids[start].1;
            let mut end = start;
            while end < self.ids.len() && self.ids[end].1 == op {
                end += 1;
            }
            let o = &self.ops[op as usize];
            if let Some(server) = o.server {
                let mut by_generator: BTreeMap<u64, (u128, u128, u64)> = BTreeMap::new();
                for &(id, _) in &self.ids[start..end] {
                    let key = d.order_key(id);
                    let entry = by_generator.entry(d.generator_of(id)).or_insert((key, key, 0));
                    if entry.2 > 0 && key <= entry.1 {
                        self.report.order_violations += 1;
                        if self.report.order_examples.len() < EXAMPLES {
                            let label = format!(
                                "{}@{}",
                                self.clients[o.client as usize], self.servers[server as usize]
                            );
                            self.report.order_examples.push(format!(
                                "{label}: id {} after {} in one batch",
                                d.show(id),
                                d.show_key(entry.1)
                            ));
                        }
                    }
                    entry.0 = entry.0.min(key);
                    entry.1 = entry.1.max(key);
                    entry.2 += 1;
                }
                for (generator, (min, max, _)) in by_generator {
                    groups
                        .entry((server, generator))
                        .or_default()
                        .push((o.invoked, o.returned, min, max, op));
                }
            }
            start = end;
        }
        for ((_, generator), mut ops) in groups {
            let mut by_return: Vec<(u64, u128)> = ops.iter().map(|o| (o.1, o.3)).collect();
            by_return.sort_unstable();
            ops.sort_unstable();
            let (mut next, mut highest) = (0, None::<u128>);
            for &(invoked, _, min, _, op) in &ops {
                while next < by_return.len() && by_return[next].0 < invoked {
                    highest = Some(highest.map_or(by_return[next].1, |h| h.max(by_return[next].1)));
                    next += 1;
                }
                if let Some(h) = highest
                    && min <= h
                {
                    self.report.order_violations += 1;
                    if self.report.order_examples.len() < EXAMPLES {
                        let label = self.op_label(op);
                        self.report.order_examples.push(format!(
                            "{label}: generator {generator}: {} not above {}, returned before it began",
                            d.show_key(min),
                            d.show_key(h)
                        ));
                    }
                }
            }
        }
    }

    fn check_unique(&mut self) {
        let d = self.decoding;
        let ids = &self.ids;
        if let (Some(first), Some(last)) = (ids.first(), ids.last()) {
            self.report.range = Some((first.0, last.0));
        }
        for pair in ids.windows(2) {
            if pair[0].0 == pair[1].0 {
                self.report.duplicates += 1;
                if self.report.duplicate_examples.len() < EXAMPLES {
                    let id = pair[0].0;
                    let example = format!(
                        "id {} (generator {}, time {}) from {} and {}",
                        d.show(id),
                        d.generator_of(id),
                        d.time_of(id),
                        self.op_label(pair[0].1),
                        self.op_label(pair[1].1)
                    );
                    self.report.duplicate_examples.push(example);
                }
            }
        }
    }

    /// Holes inside one millisecond per generator ID, over the sorted IDs.
    fn count_gaps(&mut self) {
        let d = self.decoding;
        let mut last: HashMap<u64, u128> = HashMap::new();
        for &(id, _) in &self.ids {
            let key = d.order_key(id);
            if let Some(previous) = last.insert(d.generator_of(id), key)
                && key > previous + 1
                && d.time_of(id) == d.time_of_key(previous)
            {
                self.report.gaps += 1;
                self.report.skipped += u64::try_from(key - previous - 1).unwrap_or(u64::MAX);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use idmint_core::{AnyId, FieldValue, Layout};

    use super::*;

    /// Checks events from any source.
    fn check(events: impl IntoIterator<Item = Event>) -> Report {
        let mut checker = Checker::default();
        for event in events {
            checker.add(event);
        }
        checker.finish()
    }

    /// A snowflake ID from its parts.
    fn id(time_ms: u64, generator: u64, sequence: u64) -> u64 {
        ((time_ms - Snowflake::EPOCH_MS) << 22) | (generator << 12) | sequence
    }

    #[test]
    fn decoding_agrees_with_the_snowflake_layout() {
        let layout = Layout::builtin("snowflake").expect("layout");
        for generator in [0, 1, 31, 32, 1023] {
            let raw = id(1_800_000_000_123, generator, 7);
            let d = Decoding::Snowflake;
            assert_eq!(d.generator_of(raw.into()), generator);
            assert_eq!(d.time_of(raw.into()), 1_800_000_000_123);
            let fields = layout.decode(AnyId::U64(raw)).expect("decode");
            let identity = layout.identity(generator).expect("identity");
            for (name, value) in identity {
                assert!(fields.contains(&(name, value)), "generator {generator}");
            }
            assert!(fields.contains(&("sequence".to_owned(), FieldValue::Number(7))));
        }
        // A value wider than the layout's 63 bits is no snowflake ID: generator and time
        // `u64::MAX`, which the claim and mark checks report.
        for wide in [1_u128 << 63, u128::MAX] {
            assert_eq!(Decoding::Snowflake.generator_of(wide), u64::MAX);
            assert_eq!(Decoding::Snowflake.time_of(wide), u64::MAX);
        }
    }

    fn invoke(client: &str, server: &str, t: u64) -> Event {
        Event::Invoke { client: client.into(), server: server.into(), t, count: 1, began: None }
    }

    fn ok(client: &str, t: u64, ids: &[u64]) -> Event {
        Event::Ok { client: client.into(), t, ids: ids.iter().copied().map(u128::from).collect() }
    }

    fn ok128(client: &str, t: u64, ids: &[u128]) -> Event {
        Event::Ok { client: client.into(), t, ids: ids.to_vec() }
    }

    fn claim(server: &str, generator: u64) -> Event {
        Event::Claim { server: server.into(), generator }
    }

    const T: u64 = 1_800_000_000_000;

    fn holding(generator: u64, server: &str, claim: &str, mark_ms: u64) -> Holding {
        Holding {
            generator,
            server: Some(server.into()),
            claim: Some(claim.into()),
            mark_ms: Some(mark_ms),
        }
    }

    /// A poll at `t` (over at once) of store `store`: generator 0 held by `server`.
    fn polled(t: u64, store: u32, server: &str, claim: &str, mark_ms: u64) -> Event {
        Event::Holders { t, end: t, store, held: vec![holding(0, server, claim, mark_ms)] }
    }

    /// A `uuid7` ID from its parts (the default split), through idmint-core.
    fn uuid(ms: u64, counter: u64, generator: u64, random: u64) -> u128 {
        let parts = idmint_core::Uuid7Parts { unix_ms: ms, sub_ms: 0, counter, generator, random };
        idmint_core::Uuid7::from_parts(parts).expect("uuid7").as_u128()
    }

    #[test]
    fn uuid7_decoding_agrees_with_the_layout() {
        let d = Decoding::Uuid7;
        for (generator, random) in [(0, 0), (1, (1 << 46) - 1), (65_535, 12_345)] {
            let raw = uuid(T + 123, 4_095, generator, random);
            assert!(idmint_core::Uuid7::from_u128(raw).is_ok());
            assert_eq!(d.generator_of(raw), generator);
            assert_eq!(d.time_of(raw), T + 123);
            assert_eq!(d.order_key(raw), (u128::from(T + 123) << 12) | 4_095);
            assert_eq!(d.time_of_key(d.order_key(raw)), T + 123);
        }
        // The random bits are no part of the order: a larger random does not make a larger key.
        assert_eq!(d.order_key(uuid(T, 5, 1, 0)), d.order_key(uuid(T, 5, 1, 99)));
        assert!(d.order_key(uuid(T, 6, 1, 0)) > d.order_key(uuid(T, 5, 1, (1 << 46) - 1)));
        assert_eq!(
            d.show(0x01890a5d_ac96_774b_bcce_b302099a8057),
            "01890a5d-ac96-774b-bcce-b302099a8057"
        );
    }

    /// Hand-made `uuid7` histories: what the checker must say about each.
    #[test]
    fn check_reads_uuid7_histories() {
        let layout = || Event::Layout { name: "uuid7".into() };
        let clean = check(vec![
            layout(),
            claim("s", 3),
            claim("u", 4),
            Event::Mark { generator: 3, mark_ms: T + 10 },
            Event::Mark { generator: 4, mark_ms: T + 10 },
            invoke("a", "s", 1),
            ok128("a", 2, &[uuid(T, 0, 3, 77), uuid(T, 1, 3, 5), uuid(T, 4, 3, 1)]),
            invoke("b", "u", 1),
            ok128("b", 2, &[uuid(T, 0, 4, 77)]),
            invoke("a", "s", 3),
            ok128("a", 4, &[uuid(T + 1, 0, 3, 0)]),
        ]);
        assert!(
            clean.valid && clean.ids == 5 && clean.gaps == 1 && clean.skipped == 2,
            "{clean:?}"
        );

        let duplicate = check(vec![
            layout(),
            claim("s", 3),
            claim("u", 3),
            invoke("a", "s", 1),
            ok128("a", 2, &[uuid(T, 0, 3, 9)]),
            invoke("b", "u", 1),
            ok128("b", 2, &[uuid(T, 0, 3, 9)]),
        ]);
        assert!(!duplicate.valid && duplicate.duplicates == 1, "{duplicate:?}");
        assert!(duplicate.duplicate_examples[0].contains("generator 3"), "{duplicate:?}");

        // A later operation with a larger ID (its random bits) but a smaller (ms, counter).
        let order = check(vec![
            layout(),
            claim("s", 3),
            invoke("a", "s", 1),
            ok128("a", 2, &[uuid(T, 9, 3, 0)]),
            invoke("b", "s", 3),
            ok128("b", 4, &[uuid(T, 8, 3, (1 << 46) - 1)]),
        ]);
        assert!(order.order_violations == 1 && order.duplicates == 0 && !order.valid, "{order:?}");

        // Inside one batch: the same (ms, counter) twice is out of order, random bits aside.
        let batch = check(vec![
            layout(),
            claim("s", 3),
            invoke("a", "s", 1),
            ok128("a", 2, &[uuid(T, 9, 3, 1), uuid(T, 9, 3, 2)]),
        ]);
        assert!(batch.order_violations == 1 && batch.duplicates == 0, "{batch:?}");

        let unclaimed = check(vec![
            layout(),
            claim("s", 3),
            Event::Mark { generator: 4, mark_ms: T - 1 },
            invoke("a", "s", 1),
            ok128("a", 2, &[uuid(T, 0, 4, 0)]),
        ]);
        assert!(unclaimed.unclaimed == 1 && unclaimed.above_mark == 1, "{unclaimed:?}");
    }

    /// One table: each history and what the checker must say about it.
    #[test]
    fn check_finds_what_each_history_holds() {
        struct Case {
            name: &'static str,
            events: Vec<Event>,
            expect: fn(&Report) -> bool,
        }
        let cases = vec![
            Case {
                name: "clean",
                events: vec![
                    claim("s", 0),
                    Event::Mark { generator: 0, mark_ms: T + 10 },
                    invoke("a", "s", 1),
                    ok("a", 2, &[id(T, 0, 0), id(T, 0, 1)]),
                    invoke("a", "s", 3),
                    ok("a", 4, &[id(T, 0, 5)]),
                ],
                expect: |r| r.valid && r.ids == 3 && r.gaps == 1 && r.skipped == 3,
            },
            Case {
                name: "duplicate across servers",
                events: vec![
                    claim("s", 0),
                    claim("u", 0),
                    invoke("a", "s", 1),
                    ok("a", 2, &[id(T, 0, 0)]),
                    invoke("b", "u", 1),
                    ok("b", 2, &[id(T, 0, 0)]),
                ],
                expect: |r| !r.valid && r.duplicates == 1 && r.duplicate_examples.len() == 1,
            },
            Case {
                name: "real-time order on one server",
                events: vec![
                    claim("s", 0),
                    invoke("a", "s", 1),
                    ok("a", 2, &[id(T, 0, 9)]),
                    invoke("b", "s", 3),
                    ok("b", 4, &[id(T, 0, 3)]),
                ],
                expect: |r| r.order_violations == 1 && r.duplicates == 0,
            },
            Case {
                name: "overlapping operations may return in any order",
                events: vec![
                    claim("s", 0),
                    invoke("a", "s", 1),
                    invoke("b", "s", 2),
                    ok("a", 5, &[id(T, 0, 9)]),
                    ok("b", 6, &[id(T, 0, 3)]),
                ],
                expect: |r| r.valid,
            },
            Case {
                name: "unclaimed generator",
                events: vec![claim("s", 1), invoke("a", "s", 1), ok("a", 2, &[id(T, 0, 0)])],
                expect: |r| r.unclaimed == 1 && !r.valid,
            },
            Case {
                name: "above the mark",
                events: vec![
                    claim("s", 0),
                    Event::Mark { generator: 0, mark_ms: T - 1 },
                    invoke("a", "s", 1),
                    ok("a", 2, &[id(T, 0, 0)]),
                ],
                expect: |r| r.above_mark == 1 && !r.valid,
            },
            Case {
                name: "fail and info count, and nothing checked is not valid",
                events: vec![
                    invoke("a", "s", 1),
                    Event::Fail { client: "a".into(), t: 2, error: "503".into() },
                    invoke("a", "s", 3),
                    Event::Info { client: "a".into(), t: 4, error: "reset".into() },
                    invoke("a", "s", 5),
                ],
                expect: |r| r.attempted == 3 && r.fail == 1 && r.info == 2 && !r.valid,
            },
            Case {
                name: "clients that pick their server are checked for uniqueness only",
                events: vec![
                    invoke("c", "*", 1),
                    ok("c", 2, &[id(T, 3, 9)]),
                    invoke("c", "*", 3),
                    ok("c", 4, &[id(T, 3, 9)]),
                ],
                expect: |r| r.duplicates == 1 && r.unclaimed == 0 && r.order_violations == 0,
            },
            Case {
                name: "another layout is checked for uniqueness only",
                events: vec![
                    Event::Layout { name: "sequence".into() },
                    invoke("a", "s", 1),
                    ok("a", 2, &[7, 9, 8]),
                    invoke("a", "s", 3),
                    ok("a", 4, &[3, 9]),
                ],
                expect: |r| {
                    r.duplicates == 1 && r.unclaimed == 0 && r.order_violations == 0 && r.gaps == 0
                },
            },
            Case {
                name: "a snowflake layout event keeps every check",
                events: vec![
                    Event::Layout { name: "snowflake".into() },
                    claim("s", 1),
                    invoke("a", "s", 1),
                    ok("a", 2, &[id(T, 0, 0)]),
                ],
                expect: |r| r.unclaimed == 1 && !r.valid,
            },
            Case {
                name: "a generator held by one claim of another server all through",
                events: vec![
                    claim("s", 0),
                    polled(0, 0, "t", "lease a", T - 1),
                    invoke("a", "s", 5),
                    ok("a", 6, &[id(T, 0, 0)]),
                    polled(7, 0, "t", "lease a", T + 50),
                ],
                expect: |r| r.held_by_another == 1 && r.above_mark_at_return == 0 && !r.valid,
            },
            Case {
                name: "finishing inside the window stored before a takeover is allowed",
                events: vec![
                    claim("s", 0),
                    polled(0, 0, "t", "lease a", T + 50),
                    invoke("a", "s", 5),
                    ok("a", 6, &[id(T, 0, 0)]),
                    polled(7, 0, "t", "lease a", T + 80),
                ],
                expect: |r| r.held_by_another == 0 && r.valid,
            },
            Case {
                name: "a takeover between the polls is not a violation",
                events: vec![
                    claim("s", 0),
                    polled(0, 0, "t", "lease a", T + 50),
                    invoke("a", "s", 5),
                    ok("a", 6, &[id(T, 0, 0)]),
                    polled(7, 0, "t", "lease b", T + 50),
                    polled(8, 0, "s", "lease c", T + 50),
                ],
                expect: |r| r.held_by_another == 0 && r.valid,
            },
            Case {
                name: "a poll that overlaps the operation does not count as before it",
                events: vec![
                    claim("s", 0),
                    Event::Holders {
                        t: 4,
                        end: 6,
                        store: 0,
                        held: vec![holding(0, "t", "lease a", T)],
                    },
                    invoke("a", "s", 5),
                    ok("a", 6, &[id(T, 0, 0)]),
                    polled(7, 0, "t", "lease a", T + 50),
                ],
                expect: |r| r.held_by_another == 0 && r.valid,
            },
            Case {
                name: "above the mark stored when the operation returned",
                events: vec![
                    claim("s", 0),
                    polled(0, 0, "s", "lease a", T - 10),
                    invoke("a", "s", 5),
                    ok("a", 6, &[id(T, 0, 0), id(T, 0, 1)]),
                    polled(7, 0, "s", "lease a", T - 1),
                    Event::Mark { generator: 0, mark_ms: T + 10 },
                ],
                expect: |r| r.above_mark_at_return == 1 && r.above_mark == 0 && !r.valid,
            },
            Case {
                name: "marks of another store (a restored etcd) are not compared",
                events: vec![
                    claim("s", 0),
                    polled(0, 0, "s", "lease a", T - 10),
                    invoke("a", "s", 5),
                    ok("a", 6, &[id(T, 0, 0)]),
                    polled(7, 1, "s", "lease a", T - 1),
                ],
                expect: |r| r.above_mark_at_return == 0 && r.valid,
            },
        ];
        for case in cases {
            let report = check(case.events);
            assert!((case.expect)(&report), "{}: {report:?}", case.name);
        }
    }
}
