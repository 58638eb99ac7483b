//! `idmint completions` and `idmint man`: shell completion scripts (clap_complete) and man
//! pages (clap_mangen), generated from the same command-line definition the binary parses.

use std::{io::Write, path::PathBuf};

use anyhow::Context;

/// The arguments of `idmint completions`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  idmint completions bash > /etc/bash_completion.d/idmint
  idmint completions zsh > \"${fpath[1]}/_idmint\"
  idmint completions fish > ~/.config/fish/completions/idmint.fish")]
pub(crate) struct CompletionsArgs {
    /// The shell: bash, zsh, fish, powershell or elvish.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// The arguments of `idmint man`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  idmint man
  idmint man /usr/local/share/man/man1 && man idmint-serve")]
pub(crate) struct ManArgs {
    /// The folder to write the pages to (`idmint.1` and one `idmint-<command>.1` per
    /// command), created if missing [default: the current folder].
    #[arg(value_name = "DIR", default_value = ".")]
    dir: PathBuf,
}

/// Runs `idmint completions`: the script on stdout.
pub(crate) fn completions(args: &CompletionsArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let mut command = crate::command();
    clap_complete::generate(args.shell, &mut command, "idmint", out);
    Ok(())
}

/// Runs `idmint man`: writes the pages and prints their paths, one per line.
pub(crate) fn man(args: &ManArgs, out: &mut impl Write) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let command = crate::command();
    let mut pages = vec![("idmint".to_owned(), command.clone())];
    for sub in command.get_subcommands() {
        let name = format!("idmint-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    for (name, page) in pages {
        let path = args.dir.join(format!("{name}.1"));
        let mut buffer = Vec::new();
        clap_mangen::Man::new(page).render(&mut buffer)?;
        std::fs::write(&path, buffer)
            .with_context(|| format!("cannot write {}", path.display()))?;
        writeln!(out, "{}", path.display())?;
    }
    Ok(())
}
