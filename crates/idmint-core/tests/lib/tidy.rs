//! Source rules, checked as tests: every `.rs` file of the workspace's crates opens with a
//! `//!` line, the core's sources neither sleep, touch files or the network, use tokio, nor
//! skip or invert tests, ARCHITECTURE.md's crate graph is the manifests' one, README.md's
//! layout table is `idmint layouts` with each layout's capacity, and nothing in the repository
//! cites what is outside it (an issue tracker, reference notes).

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// Every `.rs` file under `dir`, skipping `target` directories and hidden ones.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn every_file_starts_with_a_module_doc() {
    let files = rust_files(&crates_dir());
    assert!(files.iter().any(|f| f.ends_with("idmint-core/src/lib.rs")), "the walk found the core");
    assert!(files.iter().any(|f| f.ends_with("tests/lib/tidy.rs")), "the walk found the tests");
    let offenders: Vec<String> = files
        .iter()
        .filter(|file| {
            let text = fs::read_to_string(file).unwrap_or_default();
            !text.starts_with("//!")
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "files without a `//!` first line:\n{}", offenders.join("\n"));
}

#[test]
fn the_core_does_no_io_and_keeps_every_test() {
    // Spelled in pieces so that this file does not trip its own rule.
    let banned = [
        ["thread", "::sleep"].concat(),
        ["std", "::fs"].concat(),
        ["std", "::net"].concat(),
        ["to", "kio"].concat(),
        ["#[", "ignore"].concat(),
        ["#[", "should_panic"].concat(),
    ];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = rust_files(&src);
    assert!(files.len() > 10, "the walk found the core's sources");
    let mut offences = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).expect("readable source");
        for (number, line) in text.lines().enumerate() {
            for word in banned.iter().filter(|word| line.contains(word.as_str())) {
                offences.push(format!("{}:{}: `{word}`", file.display(), number + 1));
            }
        }
    }
    assert!(offences.is_empty(), "banned in the core:\n{}", offences.join("\n"));
}

/// The crate graph of ARCHITECTURE.md's code map: `crate ──► dep, dep (note), ...` lines,
/// continued on indented lines; parenthesized notes are not edges.
fn documented_graph(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    // Each entry's text, continuation lines included, so that notes may span lines.
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut open = false;
    for line in text.lines() {
        match line.split_once("──►") {
            Some((owner, rest)) => {
                entries.push((owner.trim().to_owned(), rest.to_owned()));
                open = true;
            }
            None if open && line.starts_with(' ') => {
                if let Some((_, rest)) = entries.last_mut() {
                    rest.push(' ');
                    rest.push_str(line);
                }
            }
            None => open = false,
        }
    }
    entries.into_iter().map(|(owner, rest)| (owner, crate_names(&without_notes(&rest)))).collect()
}

/// `text` without its parenthesized parts.
fn without_notes(text: &str) -> String {
    let mut depth = 0usize;
    text.chars()
        .filter(|c| {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => return depth == 0,
            }
            false
        })
        .collect()
}

/// The `idmint-*` names in `text`.
fn crate_names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|word| word.starts_with("idmint-"))
        .map(str::to_owned)
        .collect()
}

/// The workspace crates a manifest lists under `[dependencies]` (not dev or build).
fn manifest_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut in_dependencies = false;
    let mut out = BTreeSet::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if in_dependencies && line.starts_with("idmint-") {
            let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
            out.insert(name.to_owned());
        }
    }
    out
}

/// The graph of the workspace's manifests.
fn manifest_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    for entry in fs::read_dir(crates_dir()).expect("the crates directory") {
        let dir = entry.expect("an entry").path();
        let manifest = dir.join("Cargo.toml");
        let Ok(text) = fs::read_to_string(&manifest) else { continue };
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        graph.insert(name, manifest_dependencies(&text));
    }
    graph
}

/// ARCHITECTURE.md's dependency list is the crate graph of the manifests, edge for edge, as
/// rust-analyzer's tidy checks its own docs; a changed edge must change the document.
#[test]
fn the_crate_graph_matches_architecture_md() {
    let architecture = fs::read_to_string(crates_dir().join("../ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md at the workspace root");
    let documented = documented_graph(&architecture);
    let actual = manifest_graph();
    assert!(actual.len() >= 9, "the walk found the crates: {actual:?}");
    assert_eq!(documented, actual, "ARCHITECTURE.md's code map and the Cargo.toml files differ");
    // Negative control: the same document with one edge dropped no longer matches.
    let dropped =
        architecture.replacen("idmint-client, idmint-proto (the load", "idmint-proto (the load", 1);
    assert_ne!(dropped, architecture, "the control edits the document");
    assert_ne!(documented_graph(&dropped), actual);
}

/// The files a reader of the repository reads: every text file of the crates, the scripts,
/// CI, deploy and the JavaScript client, and the top-level documents (not generated or
/// vendored folders).
fn repository_text_files() -> Vec<PathBuf> {
    let root = crates_dir().join("..");
    let mut files = Vec::new();
    let mut pending: Vec<PathBuf> =
        ["crates", "scripts", ".ci", "deploy", "clients", "docs", "fuzz"]
            .iter()
            .map(|d| root.join(d))
            .collect();
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            if path.is_dir() {
                if !["target", "node_modules", "corpus", "artifacts", "testdata"]
                    .contains(&name.as_str())
                    && (!name.starts_with('.') || name == ".ci")
                {
                    pending.push(path);
                }
            } else {
                files.push(path);
            }
        }
    }
    for entry in fs::read_dir(&root).expect("the repository root") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// Where `text` cites something that is not in the repository: the project's issue tracker
/// (an issue by its number), the reference material it was built from, or a file outside the tree.
fn outside_references(text: &str) -> Vec<String> {
    // Spelled in pieces so that this file does not trip its own rule.
    let banned = [
        ["reliability", ".md"].concat(),
        ["seed ", "00"].concat(),
        ["Seed ", "00"].concat(),
        ["upstream-", "behaviour"].concat(),
        ["peers", ".md"].concat(),
        ["../", "shared"].concat(),
    ];
    let mut found: Vec<String> =
        banned.iter().filter(|b| text.contains(b.as_str())).map(|b| format!("`{b}`")).collect();
    // A tracker's issue: the word, then its number ("#" or "-" optional, as in a heading's
    // anchor); not the verb and a quantity ("can mint 4,096 IDs", "issues 64 IDs per ms"),
    // whose number goes on past a separator ("4,096", "4.07"), while a citation's stops
    // ("(iss·ue 10, process level)").
    let lower = text.to_lowercase();
    let word = ["iss", "ue"].concat();
    for (at, _) in lower.match_indices(word.as_str()) {
        let rest = &lower[at + word.len()..];
        let rest = match rest.strip_prefix("s #") {
            Some(rest) => rest,
            None => match rest
                .strip_prefix(" #")
                .or_else(|| rest.strip_prefix('-'))
                .or_else(|| rest.strip_prefix(' '))
            {
                Some(rest) => rest,
                None => continue,
            },
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let mut after = rest[digits.len()..].chars();
        let quantity = matches!(after.next(), Some(',' | '.' | '_'))
            && after.next().is_some_and(|c| c.is_ascii_digit());
        if !digits.is_empty() && !quantity {
            found.push(format!("{word} {digits}"));
        }
    }
    found
}

#[test]
fn nothing_cites_what_is_outside_the_repository() {
    let files = repository_text_files();
    assert!(files.iter().any(|f| f.ends_with("README.md")), "the walk found the README");
    assert!(files.iter().any(|f| f.ends_with("scripts/chaos")), "the walk found the scripts");
    let offenders: Vec<String> = files
        .iter()
        .filter_map(|file| {
            let text = fs::read_to_string(file).ok()?;
            let found = outside_references(&text);
            (!found.is_empty()).then(|| format!("{}: {}", file.display(), found.join(", ")))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "name the upstream project, the RFC, or a section of DESIGN.md or RELIABILITY.md instead:\n{}",
        offenders.join("\n")
    );
    // The rule itself: each kind of citation is caught, and a quantity is not.
    let cited = [
        ["see iss", "ue 12"].concat(),
        ["Iss", "ue 9's fix"].concat(),
        ["## Chaos harness (iss", "ue 10, process level)"].concat(),
        ["(#the-service-at-its-ceiling-iss", "ue-13)"].concat(),
        ["fixed in iss", "ue 7."].concat(),
        ["reliability", ".md T3"].concat(),
        ["seed ", "001"].concat(),
    ];
    for cited in &cited {
        assert!(!outside_references(cited).is_empty(), "`{cited}` passed");
    }
    for quantity in [["a node can iss", "ue 4,096 IDs per ms"], ["iss", "ues 64 IDs, or 4.5 M"]] {
        let quantity = quantity.concat();
        assert!(outside_references(&quantity).is_empty(), "`{quantity}` was taken for a citation");
    }
}

/// `n` with a comma between each group of three digits.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The rows README.md's layout table must have, one per layout of `idmint layouts`
/// (`Layout::builtins`), in its order: name, when it runs out, IDs per second per generator,
/// and generators, as the core computes them.
fn expected_layout_rows() -> Vec<[String; 4]> {
    idmint_core::Layout::builtins()
        .iter()
        .map(|(name, _)| {
            let layout = idmint_core::Layout::builtin(name).expect("a built-in layout");
            let capacity = layout.capacity();
            let runs_out = match (&capacity.end, capacity.wrap_ms) {
                (Some(end), _) => end.chars().take(4).collect(),
                (None, Some(wrap_ms)) => {
                    format!("wraps every {} days", thousands(wrap_ms / 86_400_000))
                }
                (None, None) => "no clock".to_owned(),
            };
            let rate = match layout.issued_by() {
                idmint_core::IssuedBy::Clock => thousands(capacity.ids_per_second_per_generator),
                _ => "no clock".to_owned(),
            };
            let generators = match layout.issued_by() {
                // A store hands ranges to any number of servers; there is no generator ID.
                idmint_core::IssuedBy::Store => "any number of servers".to_owned(),
                _ => thousands(layout.generator_count()),
            };
            [format!("`{name}`"), runs_out, rate, generators]
        })
        .collect()
}

/// The rows of the table in `text` whose header starts `| layout | for |`: each row's cells
/// other than the second (what the layout is for, which is prose).
fn documented_layout_rows(text: &str) -> Vec<[String; 4]> {
    let mut lines = text.lines().skip_while(|line| !line.starts_with("| layout | for |"));
    lines.next();
    lines
        .skip(1)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<String> =
                line.trim_matches('|').split('|').map(|c| c.trim().to_owned()).collect();
            let cell = |i: usize| cells.get(i).cloned().unwrap_or_default();
            [cell(0), cell(2), cell(3), cell(4)]
        })
        .collect()
}

/// README.md's layout table is `idmint layouts` (the core's `Layout::builtins`) with the
/// lifetime, rate and generator count each layout's capacity states: a layout added, renamed
/// or changed must change the table.
#[test]
fn the_readme_layout_table_is_idmint_layouts() {
    let readme =
        fs::read_to_string(crates_dir().join("../README.md")).expect("README.md at the root");
    let expected = expected_layout_rows();
    assert!(expected.len() >= 10, "the core lists its layouts: {expected:?}");
    let documented = documented_layout_rows(&readme);
    let show = |rows: &[[String; 4]]| {
        rows.iter()
            .map(|r| format!("| {} | … | {} | {} | {} |", r[0], r[1], r[2], r[3]))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        documented,
        expected,
        "README.md's layout table differs from the core; the rows should read:\n{}",
        show(&expected)
    );
    // Negative control: a table with one row dropped no longer matches.
    let first_row = readme
        .lines()
        .skip_while(|line| !line.starts_with("| layout | for |"))
        .nth(2)
        .expect("a first row");
    assert_ne!(documented_layout_rows(&readme.replacen(first_row, "", 1)), expected);
}
