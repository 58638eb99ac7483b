//! When the CLI colours its output: `--color auto|always|never`, with `NO_COLOR` respected
//! and `auto` meaning "only when the stream is a terminal". Decided once, before clap parses
//! the command line, so that clap's own help and errors follow it too.

use std::{
    ffi::OsString,
    io::IsTerminal,
    sync::atomic::{AtomicU8, Ordering},
};

/// The `--color` choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorWhen {
    /// Colour when the stream is a terminal and `NO_COLOR` is not set.
    Auto,
    /// Always colour, even into a file or a pipe.
    Always,
    /// Never colour.
    Never,
}

/// The choice in force, as a `ColorWhen` discriminant (0 auto, 1 always, 2 never).
static CHOICE: AtomicU8 = AtomicU8::new(0);

/// Reads `--color` (and `--color=WHEN`) from the raw arguments and `NO_COLOR` from the
/// environment, remembers the choice, and returns it for clap. An invalid value is left for
/// clap to refuse.
pub(crate) fn decide(args: &[OsString]) -> ColorWhen {
    let mut choice = None;
    let mut words = args.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(word) = words.next() {
        if word == "--" {
            break;
        }
        let value = match word.strip_prefix("--color") {
            Some("") => words.next().map(|w| w.into_owned()),
            Some(rest) => rest.strip_prefix('=').map(str::to_owned),
            None => None,
        };
        if let Some(value) = value {
            choice = match value.as_str() {
                "always" => Some(ColorWhen::Always),
                "never" => Some(ColorWhen::Never),
                "auto" => Some(ColorWhen::Auto),
                _ => choice,
            };
        }
    }
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let choice = match choice {
        Some(choice) => choice,
        None if no_color => ColorWhen::Never,
        None => ColorWhen::Auto,
    };
    CHOICE.store(choice as u8, Ordering::Relaxed);
    choice
}

/// clap's colour setting for the choice.
pub(crate) fn clap_choice(choice: ColorWhen) -> clap::ColorChoice {
    match choice {
        ColorWhen::Auto => clap::ColorChoice::Auto,
        ColorWhen::Always => clap::ColorChoice::Always,
        ColorWhen::Never => clap::ColorChoice::Never,
    }
}

/// Whether to colour what goes to stderr (logs, progress bars).
pub(crate) fn stderr() -> bool {
    match CHOICE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            std::io::stderr().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str], expect: ColorWhen) {
        let args: Vec<OsString> =
            std::iter::once("idmint").chain(args.iter().copied()).map(OsString::from).collect();
        assert_eq!(decide(&args), expect, "{args:?}");
    }

    #[test]
    fn the_flag_decides_wherever_it_stands() {
        check(&["--color", "never", "gen"], ColorWhen::Never);
        check(&["gen", "--color=always"], ColorWhen::Always);
        check(&["gen", "--color", "auto"], ColorWhen::Auto);
        check(&["--color=always", "decode", "--color", "never"], ColorWhen::Never);
    }
}
