//! `idmint-core`: ID layouts, a lock-free sans-I/O generator, and text formats.
//!
//! This crate does no I/O, has no async and never sleeps. Time is an input: every generator
//! call takes `now_ms` (Unix milliseconds) and answers with an ID, a time to wait until, or an
//! error. The edges (the `idmint-runtime` crate, the server, the CLI) read clocks and wait.

mod bits;
mod error;
mod format;
mod generator;
mod hot_guid;
mod sequence;
mod time_fmt;
mod trace_id;

pub use crate::{
    bits::{BitField, BitLayout, Capacity, FieldConfig, FieldRole, LayoutConfig},
    error::Error,
    format::Format,
    generator::{
        BORROW_LIMIT_MS, Batch, GeneratedId, Generator, GeneratorConfig, MAX_BACKWARD_LIMIT_MS,
        Next,
    },
    time_fmt::{format_rfc3339_ms, parse_rfc3339_ms},
};
