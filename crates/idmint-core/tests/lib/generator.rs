//! The generator's rules under a manual clock, for every kind of layout: strictly increasing
//! and unique IDs whatever the clock does, backward steps absorbed or refused with their size,
//! exhaustion and borrowing, batches, start marks, ceilings, the ends of time, and threads.
//!
//! Each generator is run side by side with [`Model`], a plain sequential statement of the
//! documented rules, and every answer (ID, wait or error) must match it; on top of that the
//! IDs themselves are checked: unique, increasing, inside the allowed ticks.

use std::{
    collections::HashSet,
    sync::atomic::{AtomicBool, AtomicUsize, Ordering},
    thread,
};

use idmint_core::{
    AnyGenerator, AnyId, Clock, Error, FieldRole, FieldValue, Flake, Generator, GeneratorConfig,
    Js53, Lable, LableMode, Layout, MAX_BACKWARD_LIMIT_MS, ManualClock, Next, Snowflake, Sonyflake,
    TraceId,
};
use proptest::{
    prelude::*,
    test_runner::{Config, TestRunner},
};

use crate::common::{custom_layout, num, short_lived_layout, text};

/// A generator under test, with what its layout's documentation promises.
struct Case {
    name: &'static str,
    layout: Layout,
    node: Vec<(String, FieldValue)>,
    /// The documented tick, in ms.
    tick_ms: u64,
    /// The documented number of IDs per tick.
    per_tick: u64,
    /// Whether raw values increase with (tick, sequence); LableOrg SPREAD's do not.
    ordered: bool,
}

fn builtin(name: &str) -> Layout {
    Layout::builtin(name).expect("a built-in layout")
}

fn cases() -> Vec<Case> {
    let case = |name, layout, node, tick_ms, per_tick, ordered| Case {
        name,
        layout,
        node,
        tick_ms,
        per_tick,
        ordered,
    };
    vec![
        case(
            "snowflake",
            builtin("snowflake"),
            vec![num("datacenter", 1), num("worker", 2)],
            1,
            4096,
            true,
        ),
        case("sonyflake", builtin("sonyflake"), vec![num("machine", 9)], 10, 256, true),
        case("trace-id", builtin("trace-id"), vec![num("node_no", 7)], 1000, 4096 * 1023, true),
        case(
            "lable spread",
            builtin("lable"),
            vec![num("generator_id", 5), num("cluster_id", 3), text("mode", "spread")],
            1,
            64,
            false,
        ),
        case(
            "lable time-sequential",
            builtin("lable"),
            vec![num("generator_id", 2047), num("cluster_id", 15), text("mode", "time-sequential")],
            1,
            64,
            true,
        ),
        case("js53", builtin("js53"), vec![num("node", 63)], 1, 128, true),
        case("icicle", builtin("icicle"), vec![num("shard", 1)], 1, 4096, true),
        case(
            "flake (epoch 2000)",
            builtin("flake").with_epoch(Flake::EPOCH_2000_MS).expect("flake takes an epoch"),
            vec![num("datacenter", 31), num("worker", 31)],
            1,
            4096,
            true,
        ),
        case(
            "custom",
            Layout::custom(custom_layout()),
            vec![num("region", 5), num("worker", 1000)],
            4,
            1024,
            true,
        ),
    ]
}

/// A (tick, sequence) pair.
type Pair = (u64, u64);

/// The rules of the generator, stated sequentially: the last issued (tick, sequence) pair, and
/// what the next request gets.
#[derive(Debug, Clone)]
struct Model {
    epoch_ms: u64,
    tick_ms: u64,
    per_tick: u64,
    max_tick: u64,
    backward_ticks: u64,
    borrow_ticks: u64,
    ceiling: u64,
    /// The last issued pair; a fresh generator counts (0, 0) as issued, so it never issues it.
    last: (u64, u64),
}

impl Model {
    fn new(case: &Case, config: &GeneratorConfig) -> Result<Self, Error> {
        let epoch_ms = case.layout.epoch_ms().expect("a layout with a clock");
        let max_tick = match case.layout.capacity().end_ms {
            Some(end) => (end - epoch_ms) / case.tick_ms - 1,
            None => u64::MAX,
        };
        let mut model = Model {
            epoch_ms,
            tick_ms: case.tick_ms,
            per_tick: case.per_tick,
            max_tick,
            backward_ticks: config.max_backward_ms / case.tick_ms,
            borrow_ticks: config.borrow_ms / case.tick_ms,
            ceiling: max_tick,
            last: (0, 0),
        };
        if let Some(mark) = config.start_above_ms.filter(|&mark| mark >= epoch_ms) {
            let tick = (mark - epoch_ms) / case.tick_ms;
            if tick >= max_tick {
                return Err(model.time_exhausted());
            }
            // The mark's tick counts as used up: the first ID lies in a later tick.
            model.last = (tick, case.per_tick - 1);
        }
        Ok(model)
    }

    fn tick_of(&self, now_ms: u64) -> Result<u64, Error> {
        match now_ms.checked_sub(self.epoch_ms) {
            Some(since) => Ok(since / self.tick_ms),
            None => Err(Error::BeforeEpoch { now_ms, epoch_ms: self.epoch_ms }),
        }
    }

    /// The Unix ms at which `tick` starts.
    fn time_of(&self, tick: u64) -> u64 {
        self.epoch_ms + tick * self.tick_ms
    }

    fn time_exhausted(&self) -> Error {
        Error::TimeExhausted { last_ms: self.time_of(self.max_tick + 1) - 1 }
    }

    fn above_ceiling(&self) -> Error {
        if self.ceiling >= self.max_tick {
            self.time_exhausted()
        } else {
            Error::WindowExhausted { ceiling_ms: self.time_of(self.ceiling + 1) - 1 }
        }
    }

    fn set_ceiling_ms(&mut self, mark_ms: u64) -> Result<(), Error> {
        self.ceiling = self.tick_of(mark_ms)?.min(self.max_tick);
        Ok(())
    }

    /// The first pair and the number of pairs a request for `n` gets at `now_ms`.
    fn reserve(&self, now_ms: u64, n: u64) -> Result<Next<(Pair, u64)>, Error> {
        let now = self.tick_of(now_ms)?;
        let (last_tick, last_seq) = self.last;
        let first = if now > last_tick {
            if now > self.ceiling {
                return Err(self.above_ceiling());
            }
            (now, 0)
        } else {
            let behind = last_tick - now;
            if behind > self.backward_ticks + self.borrow_ticks {
                return Err(Error::ClockBackward {
                    behind_ms: behind * self.tick_ms,
                    tolerance_ms: self.backward_ticks * self.tick_ms,
                });
            }
            if last_seq + 1 < self.per_tick {
                (last_tick, last_seq + 1)
            } else {
                if last_tick >= self.ceiling {
                    return Err(self.above_ceiling());
                }
                (last_tick + 1, 0)
            }
        };
        let allowed = last_tick.max(now + self.borrow_ticks);
        if first.0 > self.ceiling {
            return Err(self.above_ceiling());
        }
        if first.0 > allowed {
            return Ok(Next::Wait { until_ms: self.time_of(first.0 - self.borrow_ticks) });
        }
        let limit = allowed.min(self.ceiling);
        let available = (limit - first.0) * self.per_tick + (self.per_tick - first.1);
        Ok(Next::Ready((first, n.min(available))))
    }

    /// The pair `k` places after `pair`.
    fn advance(&self, (tick, seq): (u64, u64), k: u64) -> (u64, u64) {
        let seq = seq + k;
        (tick + seq / self.per_tick, seq % self.per_tick)
    }
}

/// A generator run side by side with its model, remembering every ID it issued.
struct Run<'a> {
    case: &'a Case,
    generator: AnyGenerator,
    model: Model,
    seen: HashSet<AnyId>,
    /// The last issued ID and its (tick, sequence).
    last: Option<(AnyId, (u64, u64))>,
    /// How many IDs were issued.
    issued: u64,
}

/// The IDs of a ready answer: all of them, or for a long batch its first.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Issued {
    len: u64,
    /// (position in the answer, ID).
    ids: Vec<(u64, AnyId)>,
}

impl Issued {
    fn first(&self) -> Option<AnyId> {
        self.ids.first().map(|&(_, id)| id)
    }
}

/// What a generator answered to `next` or `next_batch`.
type Answer = Result<Next<Issued>, Error>;

/// Batches longer than this are checked by length and first ID only.
const COLLECT_LIMIT: usize = 10_000;

impl<'a> Run<'a> {
    fn start(case: &'a Case, config: &GeneratorConfig) -> Result<Self, TestCaseError> {
        let generator = case.layout.generator(&case.node, config);
        let model = Model::new(case, config);
        match (generator, model) {
            (Ok(generator), Ok(model)) => {
                Ok(Run { case, generator, model, seen: HashSet::new(), last: None, issued: 0 })
            }
            (generator, model) => Err(TestCaseError::fail(format!(
                "{}: building gave {:?}, the model {:?}",
                case.name,
                generator.err(),
                model.err()
            ))),
        }
    }

    /// `next(now_ms)`, checked against the model and the IDs issued before.
    fn next(&mut self, now_ms: u64) -> Result<Answer, TestCaseError> {
        let got = self
            .generator
            .next(now_ms)
            .map(|next| next.map(|id| Issued { len: 1, ids: vec![(0, id)] }));
        self.compare(now_ms, 1, got)
    }

    /// `next_batch(now_ms, n)`, checked like [`next`](Self::next).
    fn batch(&mut self, now_ms: u64, n: u64) -> Result<Answer, TestCaseError> {
        let got = self.generator.next_batch(now_ms, n).map(|next| {
            next.map(|mut batch| {
                let len = batch.len();
                let ids = if len <= COLLECT_LIMIT {
                    (0..).zip(batch).collect()
                } else {
                    // Walking millions of IDs is slow in debug builds; the model checks that
                    // the next ID follows this batch's last.
                    batch.next().map(|id| (0, id)).into_iter().collect()
                };
                Issued { len: len as u64, ids }
            })
        });
        self.compare(now_ms, n, got)
    }

    fn compare(&mut self, now_ms: u64, n: u64, got: Answer) -> Result<Answer, TestCaseError> {
        let name = self.case.name;
        let want = self.model.reserve(now_ms, n);
        match (&got, &want) {
            (Ok(Next::Ready(issued)), Ok(Next::Ready((first, count)))) => {
                prop_assert_eq!(issued.len, *count, "{}: batch length at {}", name, now_ms);
                for &(k, id) in &issued.ids {
                    self.accept(id, self.model.advance(*first, k))?;
                }
                self.issued += count;
                self.model.last = self.model.advance(*first, count - 1);
            }
            (Ok(Next::Wait { until_ms }), Ok(Next::Wait { until_ms: want })) => {
                prop_assert_eq!(until_ms, want, "{}: wait at {}", name, now_ms);
                prop_assert!(*until_ms > now_ms, "{}: a wait until the past", name);
            }
            (Err(got), Err(want)) => prop_assert_eq!(got, want, "{}: error at {}", name, now_ms),
            _ => prop_assert!(
                false,
                "{}: at {} ms got {:?}, the model says {:?}",
                name,
                now_ms,
                got,
                want
            ),
        }
        prop_assert_eq!(
            self.generator.last_ms(),
            Some(self.model.time_of(self.model.last.0)),
            "{}: last_ms",
            name
        );
        Ok(got)
    }

    /// Checks a newly issued ID: its (tick, sequence) is `pair`, it was never issued before,
    /// and it is above the last one.
    fn accept(&mut self, id: AnyId, pair: (u64, u64)) -> Result<(), TestCaseError> {
        let name = self.case.name;
        prop_assert_eq!(tick_and_sequence(&self.case.layout, id)?, pair, "{}: {:?}", name, id);
        prop_assert!(self.seen.insert(id), "{}: {:?} issued twice", name, id);
        if let Some((last_id, last_pair)) = self.last {
            prop_assert!(pair > last_pair, "{}: {:?} after {:?}", name, pair, last_pair);
            if self.case.ordered {
                prop_assert!(id > last_id, "{}: {:?} after {:?}", name, id, last_id);
            }
        }
        prop_assert!(pair.0 <= self.model.ceiling, "{}: {:?} above the ceiling", name, pair);
        self.last = Some((id, pair));
        Ok(())
    }

    fn set_ceiling_ms(&mut self, mark_ms: u64) -> Result<(), TestCaseError> {
        let got = self.generator.set_ceiling_ms(mark_ms);
        let want = self.model.set_ceiling_ms(mark_ms);
        prop_assert_eq!(got, want, "{}: set_ceiling_ms({})", self.case.name, mark_ms);
        Ok(())
    }

    /// A tick-aligned time well after the epoch.
    fn base_ms(&self) -> u64 {
        self.model.time_of(1_000_000_000 / self.model.tick_ms)
    }

    /// The start of the tick of the last issued ID.
    fn last_tick_ms(&self) -> Option<u64> {
        self.last.map(|(_, (tick, _))| self.model.time_of(tick))
    }
}

/// The (tick, sequence) of an ID, read through `Layout::decode`: the time field, and the
/// sequence field (trace-id: the position of chunk and counter, `chunk·1023 + counter − 1`).
fn tick_and_sequence(layout: &Layout, id: AnyId) -> Result<(u64, u64), TestCaseError> {
    let fields = layout.decode(id)?;
    let get = |name: &str| {
        fields.iter().find(|(n, _)| n == name).and_then(|(_, v)| match v {
            FieldValue::Number(n) => Some(*n),
            FieldValue::Text(_) => None,
        })
    };
    let sequence = layout.fields().into_iter().find(|f| f.role == FieldRole::Sequence);
    let seq = match (sequence, get("chunk_no"), get("counter")) {
        (Some(field), _, _) => get(&field.name),
        (None, Some(chunk), Some(counter)) => Some(chunk * 1023 + counter - 1),
        _ => None,
    };
    match (get("timestamp"), seq) {
        (Some(tick), Some(seq)) => Ok((tick, seq)),
        _ => Err(TestCaseError::fail(format!("{id:?} has no time or sequence: {fields:?}"))),
    }
}

/// Runs a property over every case, each with its own runner.
fn for_every_case<S: Strategy>(
    cases_per_layout: u32,
    strategy: S,
    test: impl Fn(&Case, S::Value) -> Result<(), TestCaseError>,
) {
    for case in &cases() {
        let config =
            Config { cases: cases_per_layout, failure_persistence: None, ..Config::default() };
        let mut runner = TestRunner::new(config);
        if let Err(e) = runner.run(&strategy, |value| test(case, value)) {
            panic!("{}: {e}", case.name);
        }
    }
}

/// Clock policies: with and without tolerance, with and without borrowing.
fn any_config() -> impl Strategy<Value = GeneratorConfig> {
    let backward = prop_oneof![Just(0u64), Just(5), Just(1000), Just(2500), 0..3000u64];
    let borrow = prop_oneof![Just(0u64), Just(10), Just(1000), 0..2000u64];
    (backward, borrow).prop_map(|(max_backward_ms, borrow_ms)| GeneratorConfig {
        max_backward_ms,
        borrow_ms,
        start_above_ms: None,
    })
}

/// Clock steps of −2000..=+50 ms (mostly forward, sometimes a little or a lot back), each
/// followed by a few calls or a burst.
fn clock_steps() -> impl Strategy<Value = Vec<(i64, u64)>> {
    let delta = prop_oneof![10 => 0..=50i64, 3 => -60..0i64, 1 => -2000..0i64];
    let calls = prop_oneof![4 => 1..=3u64, 1 => 40..=140u64];
    prop::collection::vec((delta, calls), 1..60)
}

fn moved(now_ms: u64, delta: i64) -> u64 {
    now_ms.checked_add_signed(delta).expect("the clock stays far from 0")
}

/// Strictly increasing, never repeated IDs over arbitrary clock readings, backward steps
/// included; steps beyond the tolerance are `ClockBackward` with their size, and the generator
/// goes on from where it was once the clock is back.
#[test]
fn increasing_and_unique_whatever_the_clock_does() {
    for_every_case(24, (any_config(), clock_steps()), |case, (config, steps)| {
        let mut run = Run::start(case, &config)?;
        let mut now = run.base_ms();
        for (delta, calls) in steps {
            now = moved(now, delta);
            for _ in 0..calls {
                if let Err(Error::ClockBackward { behind_ms, tolerance_ms }) = run.next(now)? {
                    // The size is the distance from the start of the clock's tick to the start
                    // of the last issued tick: the true distance, rounded up to whole ticks.
                    let last = run.last_tick_ms().expect("something was issued");
                    prop_assert!(behind_ms >= last - now && behind_ms < last - now + case.tick_ms);
                    prop_assert!(tolerance_ms <= config.max_backward_ms);
                }
            }
        }
        // Once the clock is past the last issued tick, issuing goes on above the last ID.
        let later = now.max(run.last_tick_ms().unwrap_or(now)) + case.tick_ms;
        let before = run.issued;
        prop_assert!(matches!(run.next(later)?, Ok(Next::Ready(_))), "{}", case.name);
        prop_assert!(matches!(run.next(later)?, Ok(Next::Ready(_))), "{}", case.name);
        prop_assert_eq!(run.issued, before + 2);
        Ok(())
    });
}

/// A step back beyond the tolerance (plus the borrow) is refused with its size; the state is
/// kept, and small steps back are absorbed by continuing from the last tick.
#[test]
fn backward_steps() {
    /// From an ID issued at `t`, the clock steps back by `back` ms.
    #[track_caller]
    fn check(config: GeneratorConfig, back: u64, want: Result<u64, (u64, u64)>) {
        let generator = Snowflake::generator(0, 1, &config).expect("a generator");
        let t = Snowflake::EPOCH_MS + 1_000_000;
        let first = generator.next(t).expect("issued").ready().expect("ready");
        let got = generator.next(t - back).map(|next| next.map(|id| id.into_parts().timestamp));
        match want {
            Ok(tick) => {
                assert_eq!(got, Ok(Next::Ready(tick)), "{back} ms back");
                assert_eq!(generator.last_ms(), Snowflake::EPOCH_MS + tick);
            }
            Err((behind_ms, tolerance_ms)) => {
                assert_eq!(got, Err(Error::ClockBackward { behind_ms, tolerance_ms }));
                assert_eq!(generator.last_ms(), t, "a refusal changes nothing");
            }
        }
        // Once the clock is back, issuing continues above the first ID.
        let later = generator.next(t).expect("issued").ready().expect("ready");
        assert!(later > first);
    }
    let base = GeneratorConfig::default();
    let tick = 1_000_000;
    check(base, 0, Ok(tick));
    check(base, 1, Ok(tick));
    check(base, 1000, Ok(tick));
    check(base, 1001, Err((1001, 1000)));
    check(base, 60_000, Err((60_000, 1000)));
    check(GeneratorConfig { max_backward_ms: 0, ..base }, 1, Err((1, 0)));
    let borrowing = GeneratorConfig { borrow_ms: 15_000, ..base };
    check(borrowing, 16_000, Ok(tick));
    check(borrowing, 16_001, Err((16_001, 1000)));
}

/// Every tick holds exactly the documented number of IDs; then `next` and `next_batch` wait
/// for the next tick, where the sequence starts again.
#[test]
fn exhaustion_waits_for_the_next_tick() {
    for case in &cases() {
        let config = GeneratorConfig::default();
        let mut run = Run::start(case, &config).expect("a generator");
        let t = run.base_ms() + 3 * case.tick_ms;
        let mut issued = 0;
        while issued < case.per_tick {
            let answer = if issued < 5_000 { run.next(t) } else { run.batch(t, u64::MAX) };
            match answer.expect("as the model says") {
                Ok(Next::Ready(ids)) => issued += ids.len,
                other => panic!("{}: {other:?} after {issued} IDs", case.name),
            }
        }
        assert_eq!(issued, case.per_tick, "{}", case.name);
        let wait = Ok(Next::Wait { until_ms: t + case.tick_ms });
        assert_eq!(run.next(t).expect("as the model says"), wait, "{}", case.name);
        assert_eq!(run.batch(t, 1).expect("as the model says"), wait, "{}", case.name);
        assert_eq!(run.next(t + case.tick_ms - 1).expect("as the model says"), wait);
        let next = run.next(t + case.tick_ms).expect("as the model says");
        assert!(matches!(next, Ok(Next::Ready(_))), "{}: {next:?}", case.name);
        assert_eq!(run.last.map(|(_, pair)| pair.1), Some(0), "{}", case.name);
    }
}

/// The layouts' capacities, the typed generators and the documentation agree.
#[test]
fn capacity_matches_the_generators() {
    let config = GeneratorConfig::default();
    for case in &cases() {
        let capacity = case.layout.capacity();
        assert_eq!(capacity.ids_per_tick, case.per_tick, "{}", case.name);
        assert_eq!(capacity.tick_ms, case.tick_ms, "{}", case.name);
        assert_eq!(
            capacity.ids_per_second_per_generator,
            case.per_tick * 1000 / case.tick_ms,
            "{}",
            case.name
        );
    }
    let typed = [
        ("snowflake", Snowflake::generator(0, 0, &config).map(|g| g.ids_per_tick())),
        ("sonyflake", Sonyflake::generator(0, &config).map(|g| g.ids_per_tick())),
        ("trace-id", TraceId::generator(0, &config).map(|g| g.ids_per_tick())),
        ("lable", Lable::generator(0, 0, LableMode::Spread, &config).map(|g| g.ids_per_tick())),
        ("js53", Js53::generator(0, &config).map(|g| g.ids_per_tick())),
        ("flake", Flake::generator(0, 0, 0, &config).map(|g| g.ids_per_tick())),
    ];
    for (name, per_tick) in typed {
        assert_eq!(per_tick, Ok(builtin(name).capacity().ids_per_tick), "{name}");
    }
    let custom = Generator::custom(&custom_layout(), &[], &config).map(|g| g.ids_per_tick());
    assert_eq!(custom, Ok(Layout::custom(custom_layout()).capacity().ids_per_tick));
}

/// Snowflake: exactly 4,096 IDs per ms through `next`, then a wait until the next ms; with
/// `borrow_ms = 15_000` it runs up to 15 s ahead of the clock, then waits.
#[test]
fn snowflake_exhaustion_and_borrowing() {
    let t = Snowflake::EPOCH_MS + 5_000_000;
    let generator = Snowflake::generator(3, 4, &GeneratorConfig::default()).expect("a generator");
    let mut ids = Vec::new();
    while let Next::Ready(id) = generator.next(t).expect("no error") {
        ids.push(id);
        assert!(ids.len() <= 4096, "more than 4,096 IDs in one ms");
    }
    assert_eq!(ids.len(), 4096);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert!(ids.iter().all(|id| id.timestamp_ms() == t));
    assert_eq!(generator.next(t), Ok(Next::Wait { until_ms: t + 1 }));
    assert_eq!(generator.next_batch(t, 1).map(|n| n.ready().map(|b| b.len())), Ok(None));

    let borrowing = GeneratorConfig { borrow_ms: 15_000, ..GeneratorConfig::default() };
    let generator = Snowflake::generator(3, 4, &borrowing).expect("a generator");
    // Through `next`: the 4,097th ID of ms t lies in ms t + 1, the 8,193rd in ms t + 2.
    let mut last = None;
    for _ in 0..2 * 4096 + 1 {
        let id = generator.next(t).expect("no error").ready().expect("borrowed");
        assert!(last < Some(id));
        last = Some(id);
    }
    assert_eq!(last.map(Snowflake::timestamp_ms), Some(t + 2));
    // Through a batch: everything up to ms t + 15_000, and not one ID more.
    let batch = generator.next_batch(t, u64::MAX).expect("no error").ready().expect("ready");
    assert_eq!(batch.len() as u64, 15_001 * 4096 - (2 * 4096 + 1));
    let mut batch = batch.peekable();
    assert!(batch.peek().copied() > last);
    assert_eq!(generator.next(t), Ok(Next::Wait { until_ms: t + 1 }));
    assert_eq!(
        generator.next(t + 1).map(|n| n.map(|id| id.timestamp_ms())),
        Ok(Next::Ready(t + 15_001))
    );
    assert_eq!(generator.last_ms(), t + 15_001);
}

/// Interleaved `next` and `next_batch`: a batch holds at most what the allowed ticks hold,
/// and no batch overlaps another batch or a single ID.
#[test]
fn batches_never_overlap_next() {
    let n = prop_oneof![4 => 1..20u64, 2 => 20..300u64, 1 => Just(u64::MAX)];
    let op = prop_oneof![Just(None), n.prop_map(Some)];
    let steps = prop::collection::vec((-3..=3i64, op), 1..40);
    for_every_case(16, (any_config(), steps), |case, (config, steps)| {
        let mut run = Run::start(case, &config)?;
        let mut now = run.base_ms();
        for (ticks, op) in steps {
            now = moved(now, ticks * case.tick_ms as i64);
            let _answer = match op {
                None => run.next(now)?,
                Some(n) => run.batch(now, n)?,
            };
        }
        Ok(())
    });
}

/// `start_above_ms`: the first ID's tick starts strictly after the mark, wherever the clock
/// is. A clock ahead of the mark issues at once; a clock at or behind it (within the
/// tolerance) gets `Wait` until the tick after the mark, unless borrowing reaches it; a clock
/// further behind gets `ClockBackward`, measured from the mark's tick.
#[test]
fn start_above_a_mark() {
    let offsets = (0..5_000_000u64, -3000..=3000i64, any_config());
    for_every_case(32, offsets, |case, (mark_offset, clock_offset, config)| {
        let epoch = case.layout.epoch_ms().expect("a clock");
        let mark = epoch + 1_000_000_000 + mark_offset;
        let config = GeneratorConfig { start_above_ms: Some(mark), ..config };
        let mut run = Run::start(case, &config)?;
        let mut now = moved(mark, clock_offset);
        for _ in 0..3 {
            match run.next(now)? {
                Ok(Next::Ready(_)) => {}
                Ok(Next::Wait { until_ms }) => now = until_ms,
                Err(Error::ClockBackward { .. }) => now = mark + 1,
                Err(other) => prop_assert!(false, "{}: {}", case.name, other),
            }
        }
        prop_assert!(run.issued > 0, "{}: nothing issued", case.name);
        let pairs: Result<Vec<_>, _> =
            run.seen.iter().map(|&id| tick_and_sequence(&case.layout, id)).collect();
        let first_tick = pairs?.into_iter().min().map(|(tick, _)| tick).expect("an ID");
        prop_assert!(
            run.model.time_of(first_tick) > mark,
            "{}: tick at or before the mark",
            case.name
        );
        Ok(())
    });
}

/// What the first call after a start mark gets, for Snowflake (1-ms ticks) and Sonyflake
/// (10-ms ticks): the findings behind [`start_above_a_mark`].
#[test]
fn start_above_a_mark_first_call() {
    #[track_caller]
    fn check(layout: &str, config: GeneratorConfig, now_ms: u64, want: Result<Next<u64>, Error>) {
        let case = cases().into_iter().find(|c| c.name == layout).expect("a case");
        let generator = case.layout.generator(&case.node, &config).expect("a generator");
        let got = generator.next(now_ms).map(|next| {
            next.map(|id| {
                let fields = case.layout.decode(id).expect("decodes");
                let tick = fields.iter().find(|(n, _)| n == "timestamp").map(|(_, v)| v.clone());
                let Some(FieldValue::Number(tick)) = tick else { panic!("no timestamp") };
                case.layout.epoch_ms().expect("a clock") + tick * case.tick_ms
            })
        });
        assert_eq!(got, want, "{layout}: now {now_ms}, {config:?}");
    }
    let mark = Snowflake::EPOCH_MS + 1_000_000;
    let at = GeneratorConfig { start_above_ms: Some(mark), ..GeneratorConfig::default() };
    let borrowing = GeneratorConfig { borrow_ms: 15_000, ..at };
    let wait = |until_ms| Ok(Next::Wait { until_ms });
    check("snowflake", at, mark + 7, Ok(Next::Ready(mark + 7)));
    check("snowflake", at, mark + 1, Ok(Next::Ready(mark + 1)));
    check("snowflake", at, mark, wait(mark + 1));
    check("snowflake", at, mark - 1000, wait(mark + 1));
    check(
        "snowflake",
        at,
        mark - 1001,
        Err(Error::ClockBackward { behind_ms: 1001, tolerance_ms: 1000 }),
    );
    check("snowflake", borrowing, mark - 1000, Ok(Next::Ready(mark + 1)));
    check("snowflake", borrowing, mark - 14_999, Ok(Next::Ready(mark + 1)));
    check("snowflake", borrowing, mark - 15_000, wait(mark - 14_999));
    // Sonyflake: the mark lies inside a 10-ms tick, which is then used up.
    let mark = Sonyflake::EPOCH_MS + 1_000_005;
    let at = GeneratorConfig { start_above_ms: Some(mark), ..GeneratorConfig::default() };
    check("sonyflake", at, mark, wait(mark + 5));
    check("sonyflake", at, mark + 4, wait(mark + 5));
    check("sonyflake", at, mark + 5, Ok(Next::Ready(mark + 5)));
    // 1,000 ms behind the mark's tick (which starts 5 ms before the mark) is absorbed; 1,001 ms
    // is refused, and the size is counted in whole ticks: 101 ticks of 10 ms.
    check("sonyflake", at, mark - 1005, wait(mark + 5));
    check(
        "sonyflake",
        at,
        mark - 1006,
        Err(Error::ClockBackward { behind_ms: 1010, tolerance_ms: 1000 }),
    );
    // A mark before the epoch is no constraint; one in the last tick leaves nothing to issue.
    let early = GeneratorConfig { start_above_ms: Some(0), ..GeneratorConfig::default() };
    check("snowflake", early, Snowflake::EPOCH_MS + 5, Ok(Next::Ready(Snowflake::EPOCH_MS + 5)));
    let end = Snowflake::EPOCH_MS + (1 << 41);
    let late = GeneratorConfig { start_above_ms: Some(end - 1), ..GeneratorConfig::default() };
    let refused = Snowflake::generator(0, 0, &late).err();
    assert_eq!(refused, Some(Error::TimeExhausted { last_ms: end - 1 }));
}

/// `set_ceiling_ms`: no ID lies above the ceiling (`WindowExhausted` instead, even where the
/// clock alone would say wait), and issuing resumes once the ceiling is raised.
#[test]
fn ceiling() {
    let steps = prop::collection::vec((-50..=400i64, 1..=80u64), 1..25);
    let raise = 0..=2000u64;
    for_every_case(
        24,
        (any_config(), 0..=3000u64, steps, raise),
        |case, (config, ceiling, steps, raise)| {
            let mut run = Run::start(case, &config)?;
            let base = run.base_ms();
            run.set_ceiling_ms(base + ceiling)?;
            let mut now = base;
            for (delta, calls) in steps {
                now = moved(now, delta);
                for _ in 0..calls {
                    if let Err(Error::WindowExhausted { ceiling_ms }) = run.next(now)? {
                        let mark = base + ceiling;
                        prop_assert!(ceiling_ms >= mark && ceiling_ms < mark + case.tick_ms);
                    }
                }
            }
            if let Some(last) = run.last_tick_ms() {
                prop_assert!(last <= base + ceiling, "{}: an ID above the ceiling", case.name);
            }
            // Raised above the clock, the ceiling lets issuing go on.
            let top = now.max(base + ceiling) + raise + case.tick_ms;
            run.set_ceiling_ms(top)?;
            let later = now.max(run.last_tick_ms().unwrap_or(now)) + case.tick_ms;
            prop_assert!(matches!(run.next(later)?, Ok(Next::Ready(_))), "{}", case.name);
            Ok(())
        },
    );
}

/// The ceiling, step by step, on Snowflake.
#[test]
fn ceiling_steps() {
    let t = Snowflake::EPOCH_MS + 1_000_000;
    let generator = Snowflake::generator(0, 0, &GeneratorConfig::default()).expect("a generator");
    generator.set_ceiling_ms(t).expect("after the epoch");
    assert_eq!(generator.ceiling_ms(), t);
    let window = Err(Error::WindowExhausted { ceiling_ms: t });
    assert!(matches!(generator.next(t), Ok(Next::Ready(_))));
    assert_eq!(generator.next(t + 1).map(|n| n.ready()), window.clone());
    let rest = generator.next_batch(t, u64::MAX).expect("no error").ready().expect("ready");
    assert_eq!(rest.len(), 4095);
    // The tick is used up and the next is above the ceiling: an error, not a wait.
    assert_eq!(generator.next(t).map(|n| n.ready()), window.clone());
    assert_eq!(
        generator.next_batch(t, 1).map(|n| n.ready().map(|b| b.len())),
        window.map(|_| None)
    );
    generator.set_ceiling_ms(t + 10).expect("after the epoch");
    let id = generator.next(t + 1).expect("no error").ready().expect("ready");
    assert_eq!(id.timestamp_ms(), t + 1);
    // Lowering it below the last ID stops issuing at once.
    generator.set_ceiling_ms(t).expect("after the epoch");
    assert!(matches!(generator.next(t + 1), Err(Error::WindowExhausted { .. })));
    assert_eq!(
        generator.set_ceiling_ms(Snowflake::EPOCH_MS - 1),
        Err(Error::BeforeEpoch { now_ms: Snowflake::EPOCH_MS - 1, epoch_ms: Snowflake::EPOCH_MS })
    );
}

/// At the end of a layout's time field: the last tick is issued, then `TimeExhausted`, never
/// a wrap to small ticks.
#[test]
fn time_runs_out() {
    let mut cases = cases();
    cases.retain(|case| case.layout.capacity().end_ms.is_some());
    cases.push(Case {
        name: "short-lived",
        layout: Layout::custom(short_lived_layout()),
        node: vec![num("node", 12_345)],
        tick_ms: 1,
        per_tick: 4096,
        ordered: true,
    });
    for case in &cases {
        let end = case.layout.capacity().end_ms.expect("an end");
        let exhausted = Err(Error::TimeExhausted { last_ms: end - 1 });
        let mut run = Run::start(case, &GeneratorConfig::default()).expect("a generator");
        // A fresh generator at the last tick, then after the end.
        let last_tick = end - case.tick_ms;
        assert!(matches!(run.next(last_tick).expect("as the model"), Ok(Next::Ready(_))));
        let rest = run.batch(last_tick, case.per_tick.min(5_000)).expect("as the model");
        assert!(matches!(rest, Ok(Next::Ready(_))), "{}: {rest:?}", case.name);
        let _ = run.batch(end - 1, u64::MAX).expect("as the model");
        assert_eq!(run.next(end - 1).expect("as the model"), exhausted, "{}", case.name);
        assert_eq!(run.next(end).expect("as the model"), exhausted, "{}", case.name);
        assert_eq!(run.batch(u64::MAX, 3).expect("as the model"), exhausted, "{}", case.name);
        // A start mark in the last tick leaves nothing to issue.
        let late = GeneratorConfig { start_above_ms: Some(end - 1), ..GeneratorConfig::default() };
        let built = case.layout.generator(&case.node, &late).err();
        assert_eq!(built, exhausted.clone().err(), "{}", case.name);
        assert_eq!(Model::new(case, &late).err(), exhausted.err(), "{}", case.name);
    }
}

/// Layouts whose time field wraps (trace-id, hot-guid) still count ticks in one word: at the
/// end of that word they must stop, not start again from tick 0 and repeat IDs.
#[test]
fn wrapping_layouts_stop_at_the_end_of_their_state() {
    #[track_caller]
    fn check(layout: &str, tick_ms: u64, seq_bits: u32) {
        let layout = builtin(layout);
        let generator = layout.generator(&[], &GeneratorConfig::default()).expect("a generator");
        let now = (u64::MAX >> seq_bits) * tick_ms;
        let mut seen = HashSet::new();
        for _ in 0..3 {
            match generator.next_batch(now, u64::MAX) {
                Ok(Next::Ready(batch)) => {
                    let count = batch.len();
                    let ids: HashSet<AnyId> = batch.take(10).collect();
                    assert!(count > 0);
                    assert!(ids.iter().all(|id| seen.insert(*id)), "an ID was issued twice");
                }
                Ok(Next::Wait { until_ms }) => assert!(until_ms > now),
                Err(e) => assert!(matches!(e, Error::TimeExhausted { .. }), "{e:?}"),
            }
            let again = generator.next(now);
            assert!(
                matches!(again, Err(Error::TimeExhausted { .. })),
                "after the last tick: {again:?}"
            );
        }
    }
    check("trace-id", 1000, 22);
    check("hot-guid", 1000, 24);
}

/// Before the epoch: `BeforeEpoch`, for `next`, `next_batch` and `set_ceiling_ms`; at the
/// epoch itself the first ID is issued and is not 0.
#[test]
fn before_the_epoch() {
    for case in cases().iter().filter(|c| c.layout.epoch_ms() > Some(0)) {
        let epoch = case.layout.epoch_ms().expect("a clock");
        let mut run = Run::start(case, &GeneratorConfig::default()).expect("a generator");
        let refused = Err(Error::BeforeEpoch { now_ms: epoch - 1, epoch_ms: epoch });
        assert_eq!(run.next(epoch - 1).expect("as the model"), refused, "{}", case.name);
        assert_eq!(run.batch(epoch - 1, 5).expect("as the model"), refused, "{}", case.name);
        assert_eq!(run.generator.set_ceiling_ms(epoch - 1), refused.map(drop), "{}", case.name);
        let first = run.next(epoch).expect("as the model");
        let first = first.ok().and_then(Next::ready).and_then(|issued| issued.first());
        assert!(first.is_some_and(|id| id != AnyId::U64(0)), "{}: {first:?}", case.name);
    }
}

/// Four threads share one generator and one manual clock that thread 0 advances whenever a
/// tick runs out; some threads take batches. Every ID is distinct and each thread's IDs
/// increase in (tick, sequence) order.
#[test]
fn threads_sharing_a_generator() {
    check_threads("snowflake", 50_000, 0);
    check_threads("snowflake", 50_000, 2);
    check_threads("lable spread", 15_000, 2);
}

fn check_threads(name: &str, per_thread: usize, batch_threads: usize) {
    let case = cases().into_iter().find(|c| c.name == name).expect("a case");
    // A thread may read the clock and be descheduled while the others use up many ticks: a
    // tolerance of a day keeps such stale readings from being refused (not what is tested).
    let config = GeneratorConfig { max_backward_ms: MAX_BACKWARD_LIMIT_MS, ..Default::default() };
    let generator = case.layout.generator(&case.node, &config).expect("built");
    let clock = ManualClock::new(case.layout.epoch_ms().expect("a clock") + 1_000_000_000);
    let want_tick = AtomicBool::new(false);
    let done = AtomicUsize::new(0);
    let abort = AtomicBool::new(false);
    let work = |thread_no: usize| -> Result<Vec<AnyId>, String> {
        let mut ids = Vec::with_capacity(per_thread + 64);
        let result = loop {
            if ids.len() >= per_thread {
                break Ok(());
            }
            if abort.load(Ordering::Relaxed) {
                break Err("aborted".to_owned());
            }
            let now = clock.now_ms();
            let answer = if thread_no < batch_threads {
                generator
                    .next_batch(now, 1 + (ids.len() % 61) as u64)
                    .map(|n| n.map(Vec::from_iter))
            } else {
                generator.next(now).map(|n| n.map(|id| vec![id]))
            };
            match answer {
                Ok(Next::Ready(batch)) => ids.extend(batch),
                Ok(Next::Wait { until_ms }) if until_ms <= now => {
                    break Err(format!("a wait until {until_ms} at {now}"));
                }
                Ok(Next::Wait { until_ms }) if thread_no == 0 => clock.set(until_ms),
                Ok(Next::Wait { .. }) => {
                    want_tick.store(true, Ordering::Relaxed);
                    thread::yield_now();
                }
                Err(e) => break Err(format!("thread {thread_no}: {e}")),
            }
            if thread_no == 0 && want_tick.swap(false, Ordering::Relaxed) {
                clock.advance(case.tick_ms);
            }
        };
        if result.is_err() {
            abort.store(true, Ordering::Relaxed);
        }
        done.fetch_add(1, Ordering::Relaxed);
        // Thread 0 keeps the clock moving for the others.
        while thread_no == 0 && done.load(Ordering::Relaxed) < 4 && !abort.load(Ordering::Relaxed) {
            if want_tick.swap(false, Ordering::Relaxed) {
                clock.advance(case.tick_ms);
            }
            thread::yield_now();
        }
        result.map(|()| ids)
    };
    let work = &work;
    let per_thread_ids: Vec<Vec<AnyId>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..4).map(|n| scope.spawn(move || work(n))).collect();
        handles.into_iter().map(|h| h.join().expect("no panic").expect("no error")).collect()
    });
    let mut all = HashSet::new();
    for (thread_no, ids) in per_thread_ids.iter().enumerate() {
        if case.ordered {
            // Raw order is (tick, sequence) order for these layouts (the node bits are fixed).
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "{name}: thread {thread_no} raw order");
        } else {
            let keys: Vec<(u64, u64)> = ids
                .iter()
                .map(|&id| tick_and_sequence(&case.layout, id).expect("decodes"))
                .collect();
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "{name}: thread {thread_no} order");
        }
        all.extend(ids.iter().copied());
    }
    let total: usize = per_thread_ids.iter().map(Vec::len).sum();
    assert!(total >= 4 * per_thread);
    assert_eq!(all.len(), total, "{name}: an ID was issued twice");
}
