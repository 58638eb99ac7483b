//! The hot paths compiled ahead: an [`AnyGenerator`](crate::AnyGenerator) whose 64-bit
//! generator has the shape of a built-in layout's typed ID runs that ID's code, specialised
//! to its constants, where a generator without one reads its shape on every call.
//!
//! Matching on a small enum (a jump) costs less than calling through a pointer, and lets the
//! compiler inline the chosen path into the caller. A layout missing here is still served, on
//! the full path: the list is an optimisation, never a rule. The list is one invocation of
//! `compiled!`, one line per layout: the macro writes the enum and every match over it.

use crate::{
    Icicle, Js53, Snowflake, Sonyflake, TraceId,
    generator::{Generator, Sealed, try_next_as},
    pack::Shape,
};

/// A variant of [`Compiled`] without its generator.
type Wrap = fn(Generator<u64>) -> Compiled;

/// Declares [`Compiled`], with one variant per line, and everything that names its variants,
/// so that a layout joins the compiled paths by one line of the invocation below.
macro_rules! compiled {
    ($($variant:ident = $id:ty, $name:literal;)+) => {
        /// A 64-bit generator with the hot path it runs: one variant per compiled shape, so
        /// that a single match picks both the generator and its code.
        #[derive(Debug)]
        pub(crate) enum Compiled {
            $($variant(Generator<u64>),)+
            /// Any other shape: no compiled path; every call takes the generator's full `next`.
            Read(Generator<u64>),
        }

        /// The compiled paths and the shapes they are compiled for.
        const COMPILED: &[(Wrap, Option<Shape>)] =
            &[$((Compiled::$variant, <$id as Sealed>::SHAPE),)+];

        impl Compiled {
            /// The generator.
            pub(crate) fn generator(&self) -> &Generator<u64> {
                match self {
                    $(Compiled::$variant(g))|+ | Compiled::Read(g) => g,
                }
            }

            /// [`Generator::try_next`] on the compiled path; `None` sends the call to the full
            /// path (always, for [`Compiled::Read`]).
            #[inline(always)]
            pub(crate) fn try_next(&self, now_ms: u64) -> Option<u64> {
                match self {
                    $(Compiled::$variant(g) => try_next_as::<$id>(g, now_ms),)+
                    // The full path, which reads the shape, is the faster one without constants.
                    Compiled::Read(_) => None,
                }
            }

            /// The path's name: its layout's, or `read`.
            #[cfg(test)]
            fn name(&self) -> &'static str {
                match self {
                    $(Compiled::$variant(_) => $name,)+
                    Compiled::Read(_) => "read",
                }
            }
        }
    };
}

compiled! {
    Snowflake = Snowflake, "snowflake";
    Sonyflake = Sonyflake, "sonyflake";
    Icicle = Icicle, "icicle";
    Js53 = Js53, "js53";
    TraceId = TraceId, "trace-id";
}

impl Compiled {
    /// `generator` with the path compiled for its shape, or as [`Compiled::Read`]. Chosen by
    /// the shape alone, so a custom layout equal to a built-in one gets its path too, and a
    /// built-in layout with another epoch does not.
    pub(crate) fn new(generator: Generator<u64>) -> Compiled {
        let shape = Some(generator.shape());
        let wrap = COMPILED
            .iter()
            .find(|(_, compiled)| *compiled == shape)
            .map_or(Compiled::Read as Wrap, |(wrap, _)| *wrap);
        wrap(generator)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{BitLayout, GeneratorConfig, Layout, Next};

    /// Which variant, by name.
    fn path(compiled: &Compiled) -> &'static str {
        compiled.name()
    }

    /// Each compiled shape is the one its layout's plan gives a generator: a typed generator
    /// could not be built otherwise, and this says which constant is wrong.
    #[test]
    fn each_compiled_shape_is_its_layouts_plan() {
        #[track_caller]
        fn check(compiled: Option<Shape>, layout: &BitLayout) {
            assert_eq!(compiled, Some(layout.plan(0).unwrap().shape()), "{}", layout.name());
        }
        check(<Snowflake as Sealed>::SHAPE, &Snowflake::LAYOUT);
        check(<Sonyflake as Sealed>::SHAPE, &Sonyflake::LAYOUT);
        check(<Icicle as Sealed>::SHAPE, &Icicle::LAYOUT);
        check(<Js53 as Sealed>::SHAPE, &Js53::LAYOUT);
        assert_eq!(<TraceId as Sealed>::SHAPE, Some(TraceId::plan(0).unwrap().shape()));
    }

    /// A typed generator refuses a plan of another shape: its hot path would pack with the
    /// wrong constants.
    #[test]
    fn a_typed_generator_refuses_another_shape() {
        let config = GeneratorConfig::default();
        let other = Sonyflake::LAYOUT.plan(0).unwrap();
        let refused = Generator::<Snowflake>::from_plan(other, &config);
        assert!(matches!(refused, Err(crate::Error::InvalidLayout(_))), "{refused:?}");
        assert!(
            Generator::<Snowflake>::from_plan(Snowflake::LAYOUT.plan(0).unwrap(), &config).is_ok()
        );
        // The raw generator has no compiled shape and takes any plan.
        assert!(Generator::<u64>::from_plan(other, &config).is_ok());
    }

    /// The path is chosen by the shape: a built-in layout gets its own, a custom layout equal
    /// to one gets it too, and a built-in layout moved to another epoch gets none.
    #[test]
    fn a_generator_runs_the_path_of_its_shape() {
        #[track_caller]
        fn check(layout: Layout, want: &str) {
            let generator = layout.generator(&[], &GeneratorConfig::default()).unwrap();
            let compiled = generator.compiled().unwrap();
            assert_eq!(path(compiled), want, "{}", layout.name());
            // A fresh generator's first call takes the compiled path, if there is one, and
            // gives the ID of the full path (`Generator<u64>::next` has no compiled shape).
            let first = compiled.try_next(NOW_MS);
            assert_eq!(first.is_some(), want != "read", "{}", layout.name());
            if let Some(first) = first {
                let again = layout.generator(&[], &GeneratorConfig::default()).unwrap();
                let again = again.compiled().unwrap().generator().next(NOW_MS).unwrap();
                assert_eq!(again, Next::Ready(first), "{}", layout.name());
            }
        }
        let builtin = |name| Layout::builtin(name).unwrap();
        check(builtin("snowflake"), "snowflake");
        check(builtin("sonyflake"), "sonyflake");
        check(builtin("icicle"), "icicle");
        check(builtin("js53"), "js53");
        check(builtin("trace-id"), "trace-id");
        check(builtin("flake"), "read");
        check(builtin("lable"), "read");
        check(Layout::custom(Snowflake::LAYOUT), "snowflake");
        check(builtin("snowflake").with_epoch(1_600_000_000_000).unwrap(), "read");
    }

    /// What a step of the property test does.
    #[derive(Debug, Clone)]
    enum Step {
        /// `next` at the clock moved by this many ticks (possibly back).
        Next(i64),
        /// `next_batch` of this many at the clock moved by this many ticks.
        Batch(i64, u64),
        /// The ceiling set this many ticks from the clock.
        Ceiling(i64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            8 => (-2i64..3).prop_map(Step::Next),
            1 => ((-2i64..3), 1u64..5_000).prop_map(|(dt, n)| Step::Batch(dt, n)),
            1 => (-1i64..4).prop_map(Step::Ceiling),
        ]
    }

    /// Runs `steps` on `compiled`, and returns every answer.
    fn run(compiled: &Compiled, tick_ms: u64, start_ms: u64, steps: &[Step]) -> Vec<String> {
        let generator = compiled.generator();
        let mut now = start_ms;
        let at = |now: u64, dt: i64| now.saturating_add_signed(dt * tick_ms as i64);
        let mut out = Vec::new();
        for step in steps {
            let answer = match *step {
                Step::Next(dt) => {
                    now = at(now, dt);
                    match compiled.try_next(now) {
                        Some(raw) => format!("{:?}", Ok::<_, crate::Error>(Next::Ready(raw))),
                        None => format!("{:?}", generator.next(now)),
                    }
                }
                Step::Batch(dt, n) => {
                    now = at(now, dt);
                    format!(
                        "{:?}",
                        generator.next_batch(now, n).map(|b| b.map(|b| b.collect::<Vec<_>>()))
                    )
                }
                Step::Ceiling(dt) => format!("{:?}", generator.set_ceiling_ms(at(now, dt))),
            };
            out.push(answer);
        }
        out
    }

    /// 2026-09-21: inside every compiled layout's time, so that the hot paths run.
    const NOW_MS: u64 = 1_790_000_000_000;

    /// The plans of the compiled layouts, each for a node with every node bit set.
    fn plans() -> Vec<crate::pack::Plan> {
        let full = |layout: &BitLayout| {
            let node: Vec<(&str, u64)> = layout
                .fields()
                .iter()
                .filter(|f| f.role() == crate::FieldRole::Node)
                .map(|f| (f.name(), f.max()))
                .collect();
            layout.plan(layout.node_bits(&node).unwrap()).unwrap()
        };
        vec![
            full(&Snowflake::LAYOUT),
            full(&Sonyflake::LAYOUT),
            full(&Icicle::LAYOUT),
            full(&Js53::LAYOUT),
            TraceId::plan((1 << TraceId::NODE_BITS) - 1).unwrap(),
        ]
    }

    proptest! {
        /// Each compiled path answers every call as the full path (`Read`) does: the same IDs,
        /// waits and errors, through ticks used up, a clock that steps back and ceilings.
        #[test]
        fn compiled_paths_answer_as_the_full_path(
            which in 0usize..5,
            steps in prop::collection::vec(step(), 1..400),
        ) {
            let plan = plans()[which];
            let config = GeneratorConfig::default();
            let compiled = Compiled::new(Generator::from_plan(plan, &config).unwrap());
            prop_assert_ne!(path(&compiled), "read");
            let read = Compiled::Read(Generator::from_plan(plan, &config).unwrap());
            let start_ms = NOW_MS;
            prop_assert_eq!(
                run(&compiled, plan.tick_ms, start_ms, &steps),
                run(&read, plan.tick_ms, start_ms, &steps)
            );
        }
    }
}
