//! What the black-box tests of `idmint` share beyond `idmint_testkit::process`: the binary
//! under test (whose path only this crate's tests know) and the commands that run it with a
//! clean environment.

use std::{ffi::OsStr, process::Command};

pub(crate) use idmint_testkit::{
    libfaketime,
    process::{Server, poll, strip_ansi},
};

/// The binary under test.
pub(crate) const IDMINT: &str = env!("CARGO_BIN_EXE_idmint");

/// `idmint <args>` with a clean environment (then `env`): `idmint_testkit::process::clean_command`.
pub(crate) fn idmint<A: AsRef<OsStr>>(
    args: impl IntoIterator<Item = A>,
    env: &[(&str, &str)],
) -> Command {
    idmint_testkit::process::clean_command(IDMINT, args, env)
}

/// `idmint <args>` (clean environment) with `input` written to its stdin, to the end.
pub(crate) fn with_input(args: &[&str], input: &[u8]) -> std::process::Output {
    idmint_testkit::process::with_input(IDMINT, args, input)
}
