//! Source rules, checked as tests: every `.rs` file of the workspace's crates opens with a
//! `//!` line, the core's sources neither sleep, touch files or the network, use tokio, nor
//! skip or invert tests, ARCHITECTURE.md's checkable claims hold (its crate graph, the files it
//! names, its "Checked rules" and dependency tables, its negative controls and its list of
//! commands, each against the manifests or the sources), README.md's layout table is
//! `idmint layouts` with each layout's capacity, nothing in the repository cites what is
//! outside it (an issue tracker, reference notes), every citation of a document's section
//! names a heading that exists, every path from the root a document names exists, no
//! document line is longer than 1,000 characters, and BENCHMARKS.md stays at most 250 lines.

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
    assert!(
        files.iter().any(|f| f.ends_with("idmint-tidy/tests/tidy.rs")),
        "the walk found the tests"
    );
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
    let src = crates_dir().join("idmint-core").join("src");
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

/// The section citations of `text`: a Markdown file's name, a comma and a heading in double
/// quotes, read across line breaks and comment markers, so that a citation wrapped over two
/// comment lines counts too.
fn section_citations(text: &str) -> Vec<(String, String)> {
    let flat = text
        .lines()
        .map(|line| line.trim().trim_start_matches(['/', '!', '#', '*', '>']).trim())
        .collect::<Vec<_>>()
        .join(" ");
    let mut found = Vec::new();
    for (at, marker) in flat.match_indices(".md, \"") {
        let before = &flat[..at];
        let name_at = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/' | '.')))
            .map_or(0, |i| i + 1);
        let quoted = &flat[at + marker.len()..];
        if let Some(end) = quoted.find('"') {
            found.push((format!("{}.md", &before[name_at..]), quoted[..end].to_owned()));
        }
    }
    found
}

/// The headings of a Markdown text, without their `#`s.
fn headings(markdown: &str) -> BTreeSet<String> {
    markdown
        .lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| line.trim_start_matches('#').trim().to_owned())
        .collect()
}

/// Every section citation (a Markdown file, a comma, a quoted heading) names a heading that the
/// file has, word for word: a section renamed or removed must take its citations with it.
#[test]
fn every_cited_section_exists() {
    let root = root_dir();
    let mut offenders = Vec::new();
    let mut cited = 0;
    for file in repository_text_files() {
        let Ok(text) = fs::read_to_string(&file) else { continue };
        for (doc, section) in section_citations(&text) {
            cited += 1;
            let found = fs::read_to_string(root.join(&doc))
                .is_ok_and(|markdown| headings(&markdown).contains(&section));
            if !found {
                offenders.push(format!("{}: {doc}, \"{section}\"", file.display()));
            }
        }
    }
    assert!(cited > 50, "the walk found {cited} citations");
    assert!(
        offenders.is_empty(),
        "citations of sections that do not exist:\n{}",
        offenders.join("\n")
    );
    // The rule itself: a wrapped citation is read whole, and a heading that is not there,
    // or only begins the same way, is caught.
    let wrapped =
        "/// (DESIGN.md, \"Why does the gRPC port share the\n/// HTTP port's admission?\").";
    assert_eq!(
        section_citations(wrapped),
        [(
            "DESIGN.md".to_owned(),
            "Why does the gRPC port share the HTTP port's admission?".to_owned()
        )]
    );
    let design = headings(&fs::read_to_string(root.join("DESIGN.md")).expect("DESIGN.md"));
    assert!(design.contains("Why does the gRPC port share the HTTP port's admission?"));
    assert!(!design.contains("Why does the gRPC port share"));
}

/// `n` with a comma between each group of three digits.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
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
                // The year: everything before the first `-` (year 10889 has five digits).
                (Some(end), _) => end.split('-').next().unwrap_or_default().to_owned(),
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

/// The repository's root.
fn root_dir() -> PathBuf {
    crates_dir().join("..")
}

/// ARCHITECTURE.md, read once per test.
fn architecture_md() -> String {
    fs::read_to_string(root_dir().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md at the root")
}

/// Every file under `dir` (not `target`, `node_modules` or hidden folders), as paths relative
/// to the repository's root with `/` between components.
fn files_under(dir: &Path) -> Vec<String> {
    let root = root_dir();
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            if path.is_dir() {
                if name != "target" && name != "node_modules" && !name.starts_with('.') {
                    pending.push(path);
                }
            } else if let Ok(relative) = path.strip_prefix(&root) {
                let parts: Vec<String> = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                files.push(parts.join("/"));
            }
        }
    }
    files.sort();
    files
}

/// Whether `path` ends with `pattern` (whole components; one `*` stands for any text within
/// a name, as in `src/sql/claim*.sql`).
fn path_matches(path: &str, pattern: &str) -> bool {
    let path = format!("/{path}");
    match pattern.split_once('*') {
        None => path.ends_with(&format!("/{pattern}")) || path.contains(&format!("/{pattern}/")),
        Some((before, after)) => path.rfind(&format!("/{before}")).is_some_and(|at| {
            let rest = &path[at + 1 + before.len()..];
            rest.ends_with(after) && !rest[..rest.len() - after.len()].contains('/')
        }),
    }
}

/// The `backticked` parts of `text`.
fn backticked(text: &str) -> Vec<String> {
    text.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The rows of the first table in `text` whose header line starts with `header`, as cells.
fn table_rows(text: &str, header: &str) -> Vec<Vec<String>> {
    text.lines()
        .skip_while(|line| !line.starts_with(header))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.trim().trim_matches('|').split(" | ").map(|c| c.trim().to_owned()).collect()
        })
        .collect()
}

/// The folders a path from the repository's root starts with, as the documents write them.
const ROOTS: [&str; 7] =
    ["crates/", "scripts/", "clients/", "deploy/", "testdata/", "docs/", ".ci/"];

/// Whether a path from the root exists: a file or folder, or with one `*` for a folder name
/// (`crates/*/src`).
fn root_path_exists(token: &str) -> bool {
    let root = root_dir();
    let pattern = token.trim_end_matches('/');
    // `files_under` skips hidden folders such as `.ci`: a plain path is looked up.
    if !pattern.contains('*') && root.join(pattern).exists() {
        return true;
    }
    files_under(&root).iter().any(|f| match pattern.split_once('*') {
        // `crates/*/src`: one folder name in place of the star.
        Some((before, after)) => f.strip_prefix(before).is_some_and(|rest| {
            rest.split_once('/')
                .is_some_and(|(_, rest)| format!("/{rest}/").starts_with(&format!("{after}/")))
        }),
        None => f == pattern || f.starts_with(&format!("{pattern}/")),
    })
}

/// The documents whose paths and lines are checked: every `.md` file at the root and in
/// `docs/`.
fn documents() -> Vec<PathBuf> {
    let root = root_dir();
    let mut docs: Vec<PathBuf> = [root.clone(), root.join("docs")]
        .iter()
        .flat_map(|dir| fs::read_dir(dir).expect("a folder of documents"))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs
}

/// The paths from the root (`crates/…`, `scripts/…`, `docs/…`) that `text` names, in
/// backticks or not, that do not exist. A path ends at a character no path has; a path with a
/// placeholder (`<name>`, `{…}`) or a trailing `…` is not one.
fn missing_root_paths(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_-./*".contains(c);
    let mut missing = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find(|c: char| is_path_char(c)) {
            let before = rest[..at].chars().last();
            let tail = &rest[at..];
            let end = tail.find(|c: char| !is_path_char(c)).unwrap_or(tail.len());
            let token = tail[..end].trim_end_matches(['.', ',']);
            let next = tail[end..].chars().next();
            rest = &tail[end..];
            // A URL's path, a path inside another (`../crates/…`), or a placeholder.
            let inside = before.is_some_and(|c| c == '/' || c == '.' || c == ':' || c == '~');
            let placeholder = matches!(next, Some('<' | '{' | '…'));
            if inside || placeholder || !ROOTS.iter().any(|r| token.starts_with(r)) {
                continue;
            }
            if !root_path_exists(token) {
                missing.push(format!("line {}: {token}", number + 1));
            }
        }
    }
    missing
}

/// Every path from the root that a document (README.md, DESIGN.md, RELIABILITY.md, docs/…)
/// names exists.
#[test]
fn the_documents_name_only_paths_that_exist() {
    let mut missing = Vec::new();
    for doc in documents() {
        let text = fs::read_to_string(&doc).expect("a readable document");
        let name = doc.strip_prefix(root_dir()).unwrap_or(&doc).display().to_string();
        missing.extend(missing_root_paths(&text).into_iter().map(|m| format!("{name} {m}")));
    }
    assert!(missing.is_empty(), "documents name paths that do not exist:\n{}", missing.join("\n"));
    // Negative control: a moved test file is caught, in backticks or in plain text.
    for text in
        ["`crates/idmint-cli/tests/clock_steps.rs`", "(crates/idmint-cli/tests/clock_steps.rs)."]
    {
        assert_eq!(missing_root_paths(text).len(), 1, "{text}");
    }
    for text in
        ["`crates/idmint-cli/tests/integration/clock_steps.rs`", "crates/*/src", "see docs/."]
    {
        assert!(missing_root_paths(text).is_empty(), "{text}");
    }
}

/// The longest line a document may have: one sentence per line, and no sentence this long.
const MAX_DOC_LINE: usize = 1_000;

/// No line of a document is longer than [`MAX_DOC_LINE`] characters.
#[test]
fn no_document_line_is_longer_than_a_thousand_characters() {
    let mut long = Vec::new();
    for doc in documents() {
        let text = fs::read_to_string(&doc).expect("a readable document");
        let name = doc.strip_prefix(root_dir()).unwrap_or(&doc).display().to_string();
        for (number, line) in text.lines().enumerate() {
            let chars = line.chars().count();
            if chars > MAX_DOC_LINE {
                long.push(format!("{name}:{}: {chars} characters", number + 1));
            }
        }
    }
    assert!(long.is_empty(), "split these lines, one sentence per line:\n{}", long.join("\n"));
}

/// BENCHMARKS.md holds the current figures in at most 250 lines; earlier runs move to
/// docs/bench-history.md.
#[test]
fn benchmarks_md_stays_short() {
    let text = fs::read_to_string(root_dir().join("BENCHMARKS.md")).expect("BENCHMARKS.md");
    let lines = text.lines().count();
    assert!(
        lines <= 250,
        "BENCHMARKS.md has {lines} lines; move earlier runs to docs/bench-history.md"
    );
}

/// The file names and paths ARCHITECTURE.md gives in backticks that do not exist: a path
/// from the root (`crates/…`, `scripts/…`) must exist there; a file name or a path inside a
/// crate must end a file of the crate whose section (`### \`crates/…\``) names it, or of any
/// crate outside the sections.
fn missing_files(architecture: &str) -> Vec<String> {
    const EXTENSIONS: [&str; 10] =
        ["rs", "toml", "sql", "proto", "txt", "yml", "yaml", "md", "js", "mjs"];
    let root = root_dir();
    let everything: Vec<String> =
        ["crates", "clients"].iter().flat_map(|d| files_under(&root.join(d))).collect();
    let mut section: Option<String> = None;
    let mut missing = Vec::new();
    for line in architecture.lines() {
        if let Some(heading) = line.strip_prefix("### `") {
            section = heading.strip_suffix('`').map(str::to_owned);
            continue;
        }
        if line.starts_with("## ") {
            section = None;
        }
        for token in backticked(line) {
            if token.contains(char::is_whitespace) || token.contains(['<', '{', ':', '(']) {
                continue;
            }
            if ROOTS.iter().any(|r| token.starts_with(r)) {
                if !root_path_exists(&token) {
                    missing.push(token);
                }
                continue;
            }
            let Some((stem, extension)) = token.rsplit_once('.') else { continue };
            if stem.is_empty() || !EXTENSIONS.contains(&extension) {
                continue;
            }
            if !token.contains('/') && root.join(&token).exists() {
                continue;
            }
            let pool: Vec<&String> = match &section {
                Some(dir) => {
                    everything.iter().filter(|f| f.starts_with(&format!("{dir}/"))).collect()
                }
                None => everything.iter().collect(),
            };
            if !pool.iter().any(|f| path_matches(f, &token)) {
                missing.push(format!("{token} (in {})", section.as_deref().unwrap_or("no crate")));
            }
        }
    }
    missing
}

/// Every file ARCHITECTURE.md names exists where it says.
#[test]
fn architecture_md_names_only_files_that_exist() {
    let architecture = architecture_md();
    let missing = missing_files(&architecture);
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names files that do not exist:\n{}",
        missing.join("\n")
    );
    assert!(path_matches("crates/idmint-coord/src/sql/claim_take.sql", "src/sql/claim*.sql"));
    // Negative control: a renamed file is caught, in a crate's section and from the root.
    let renamed = architecture.replacen("`sequence.rs`", "`sequencer.rs`", 1);
    assert_ne!(renamed, architecture, "the control edits the document");
    assert_eq!(missing_files(&renamed).len(), 1, "{:?}", missing_files(&renamed));
    let moved = architecture.replacen(
        "`crates/idmint-tidy/tests/tidy.rs`",
        "`crates/idmint-tidy/tests/tidy/main.rs`",
        1,
    );
    assert_ne!(moved, architecture, "the control edits the document");
    assert_eq!(missing_files(&moved).len(), 1, "{:?}", missing_files(&moved));
}

/// The `.rs` files under `searched` (a folder of the root, `crates/*/src` for every crate's
/// `src`) that contain one of `needles`.
fn files_containing(searched: &str, needles: &[String]) -> BTreeSet<String> {
    let root = root_dir();
    let dirs: Vec<PathBuf> = match searched.split_once("/*/") {
        Some((parent, child)) => fs::read_dir(root.join(parent))
            .expect("the folder of the rule")
            .map(|e| e.expect("an entry").path().join(child))
            .filter(|p| p.is_dir())
            .collect(),
        None => vec![root.join(searched)],
    };
    dirs.iter()
        .flat_map(|dir| files_under(dir))
        .filter(|file| file.ends_with(".rs"))
        .filter(|file| {
            let text = fs::read_to_string(root.join(file)).unwrap_or_default();
            needles.iter().any(|needle| text.contains(needle.as_str()))
        })
        .collect()
}

/// Each row of a "Checked rules" table: (rule, searched in, needles, files listed).
fn checked_rules(architecture: &str) -> Vec<(String, String, Vec<String>, BTreeSet<String>)> {
    table_rows(architecture, "| rule | searched in | for | found only in |")
        .into_iter()
        .map(|cells| {
            let cell = |i: usize| cells.get(i).cloned().unwrap_or_default();
            let searched = backticked(&cell(1)).into_iter().next().unwrap_or_default();
            let listed =
                backticked(&cell(3)).into_iter().filter(|t| t.starts_with("crates/")).collect();
            (cell(0), searched, backticked(&cell(2)), listed)
        })
        .collect()
}

/// ARCHITECTURE.md's "Checked rules": for each row, the files that contain one of its strings
/// are exactly the files it lists (threads, the OS clock, environment variables, exit codes,
/// JSON bodies outside the wire crate, error types, negative controls).
#[test]
fn the_checked_rules_of_architecture_md_hold() {
    let architecture = architecture_md();
    let rules = checked_rules(&architecture);
    assert!(rules.len() >= 7, "the table was found: {rules:?}");
    let mut broken = Vec::new();
    for (rule, searched, needles, listed) in &rules {
        assert!(
            !needles.is_empty() && !searched.is_empty(),
            "row `{rule}` has strings and a folder"
        );
        let found = files_containing(searched, needles);
        if &found != listed {
            let extra: Vec<_> = found.difference(listed).collect();
            let gone: Vec<_> = listed.difference(&found).collect();
            broken.push(format!("{rule}: not listed {extra:?}, listed but not found {gone:?}"));
        }
    }
    assert!(
        broken.is_empty(),
        "ARCHITECTURE.md's checked rules do not hold:\n{}",
        broken.join("\n")
    );
    // Negative control: a thread started in the core would be found.
    let needles = vec![["thread::", "spawn"].concat(), ["thread::", "Builder"].concat()];
    let threads = files_containing("crates/*/src", &needles);
    assert!(threads.contains("crates/idmint-runtime/src/ticking.rs"), "{threads:?}");
    assert!(!threads.iter().any(|f| f.starts_with("crates/idmint-core/")), "{threads:?}");
}

/// The dependency names of one section (`[dependencies]`, `[dev-dependencies]`) of a manifest.
fn manifest_section(manifest: &str, section: &str) -> BTreeSet<String> {
    let mut inside = false;
    let mut out = BTreeSet::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == section;
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
        if inside && !name.is_empty() && !name.starts_with('#') {
            out.insert(name.to_owned());
        }
    }
    out
}

/// Every crate's manifest, by the crate's folder name.
fn manifests() -> BTreeMap<String, String> {
    fs::read_dir(crates_dir())
        .expect("the crates directory")
        .filter_map(|entry| {
            let dir = entry.expect("an entry").path();
            let text = fs::read_to_string(dir.join("Cargo.toml")).ok()?;
            Some((dir.file_name()?.to_str()?.to_owned(), text))
        })
        .collect()
}

/// ARCHITECTURE.md's table of dependencies that stay in their crates is the manifests':
/// for each dependency, exactly the crates that list it, as a dependency and as a
/// dev-dependency.
#[test]
fn the_dependency_table_of_architecture_md_matches_the_manifests() {
    let architecture = architecture_md();
    let rows = table_rows(&architecture, "| dependency | in `[dependencies]` of |");
    assert!(rows.len() >= 10, "the table was found: {rows:?}");
    let manifests = manifests();
    let users = |dependency: &str, section: &str| -> BTreeSet<String> {
        manifests
            .iter()
            .filter(|(_, text)| manifest_section(text, section).contains(dependency))
            .map(|(name, _)| name.clone())
            .collect()
    };
    let mut wrong = Vec::new();
    for cells in &rows {
        let dependency = backticked(&cells[0]).into_iter().next().expect("a dependency name");
        for (column, section) in [(1, "[dependencies]"), (2, "[dev-dependencies]")] {
            let documented = crate_names(&without_notes(&cells[column]));
            let actual = users(&dependency, section);
            if documented != actual {
                wrong.push(format!(
                    "{dependency} in {section}: documented {documented:?}, manifests {actual:?}"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md's dependency table and the manifests differ:\n{}",
        wrong.join("\n")
    );
    // Negative control: clap in a library crate would show.
    assert!(users("clap", "[dependencies]").contains("idmint-cli"));
    assert!(!users("clap", "[dependencies]").contains("idmint-server"));
}

/// The HTTP and gRPC crates: the engine names none of them, so that an application can issue
/// in its own process without a server's stack (ARCHITECTURE.md, `crates/idmint-engine`).
const HTTP_AND_GRPC_CRATES: [&str; 9] = [
    "axum",
    "hyper",
    "hyper-util",
    "tonic",
    "tonic-web",
    "tonic-health",
    "tower",
    "tower-http",
    "tower-service",
];

/// The HTTP and gRPC crates among the `[dependencies]` of a manifest.
fn http_and_grpc_dependencies(manifest: &str) -> BTreeSet<String> {
    let dependencies = manifest_section(manifest, "[dependencies]");
    HTTP_AND_GRPC_CRATES
        .iter()
        .filter(|name| dependencies.contains(**name))
        .map(|name| (*name).to_owned())
        .collect()
}

/// The `[dependencies]` of idmint-engine and of idmint (the embedded minter over it) name no
/// HTTP or gRPC crate: the engine issues, and only idmint-server serves.
#[test]
fn the_engine_depends_on_no_http_or_grpc_crate() {
    let manifests = manifests();
    for name in ["idmint-engine", "idmint"] {
        let manifest = manifests.get(name).expect("the crate's Cargo.toml");
        let found = http_and_grpc_dependencies(manifest);
        assert!(found.is_empty(), "{name} depends on HTTP or gRPC crates: {found:?}");
    }
    let engine = &manifests["idmint-engine"];
    // Negative controls: the server's manifest names them, and one added to the engine's
    // `[dependencies]` (not its dev-dependencies) is found.
    let server = http_and_grpc_dependencies(&manifests["idmint-server"]);
    assert!(server.contains("axum") && server.contains("tonic"), "{server:?}");
    let with_hyper =
        engine.replacen("[dependencies]\n", "[dependencies]\nhyper.workspace = true\n", 1);
    assert_ne!(&with_hyper, engine, "the control edits the manifest");
    assert_eq!(http_and_grpc_dependencies(&with_hyper), BTreeSet::from(["hyper".to_owned()]));
    let as_dev = format!("{engine}\n[dev-dependencies]\ntower = \"0.5\"\n");
    assert!(http_and_grpc_dependencies(&as_dev).is_empty());
}

/// The cfg of the negative controls, spelled in pieces so that this file is not one of the
/// files that use it (ARCHITECTURE.md's "Checked rules" list them).
fn controls_cfg() -> String {
    ["idmint_negative", "_controls"].concat()
}

/// The test-only features of one manifest: `test-…` in `[features]`, except `test-util`, a
/// public helper that removes nothing.
fn test_only_features(manifest: &str) -> BTreeSet<String> {
    let mut inside = false;
    let mut features = BTreeSet::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[features]";
            continue;
        }
        let feature = line.split(['=', ' ']).next().unwrap_or_default();
        if inside && feature.starts_with("test-") && feature != "test-util" {
            features.insert(feature.to_owned());
        }
    }
    features
}

/// The `#[…]` attributes right above the line of `item` in `text` (doc lines skipped), joined;
/// `None` when `text` has no such line.
fn attributes_above(text: &str, item: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|line| line.contains(item))?;
    let attributes = lines[..at]
        .iter()
        .rev()
        .map(|line| line.trim())
        .take_while(|line| line.starts_with("///") || line.starts_with("#["))
        .filter(|line| line.starts_with("#["))
        .collect::<Vec<_>>()
        .join(" ");
    Some(attributes)
}

/// The hidden flags of `crates/idmint-cli/src/controls.rs` (`unsafe_no_fence: bool` is
/// `--unsafe-no-fence`), each with the attributes above it.
fn cli_control_flags() -> BTreeMap<String, String> {
    let controls =
        fs::read_to_string(crates_dir().join("idmint-cli/src/controls.rs")).expect("controls.rs");
    controls
        .lines()
        .filter_map(|line| line.trim().strip_suffix(": bool,"))
        .filter(|field| field.starts_with("unsafe_no_"))
        .map(|field| {
            let attributes =
                attributes_above(&controls, &format!("{field}: bool")).unwrap_or_default();
            (format!("--{}", field.replace('_', "-")), attributes)
        })
        .collect()
}

/// ARCHITECTURE.md's table of negative controls is the code's: its flags are the hidden flags
/// of `controls.rs`, each compiled under the cfg and the feature the table says; each switch
/// is a function compiled only under the cfg; each file said to run a control names its switch
/// or flag; the crates that use the cfg are those whose identical `build.rs` sets it; the
/// scripts build with `IDMINT_NEGATIVE_CONTROLS` where they must; and no manifest declares a
/// test-only feature, nor does any file name the features the controls once were.
#[test]
fn the_negative_controls_are_the_codes() {
    let architecture = architecture_md();
    let cfg = controls_cfg();
    let rows = table_rows(&architecture, "| flag | removes | switch | needs feature | run by |");
    assert!(rows.len() >= 2, "the table was found: {rows:?}");
    let root = root_dir();
    let sources: Vec<String> = files_containing("crates/*/src", std::slice::from_ref(&cfg))
        .into_iter()
        .map(|file| fs::read_to_string(root.join(&file)).expect("a source"))
        .collect();
    let flags = cli_control_flags();
    let mut documented_flags = BTreeSet::new();
    let mut wrong = Vec::new();
    for cells in &rows {
        let cell = |i: usize| cells.get(i).cloned().unwrap_or_default();
        let flag = backticked(&cell(0)).into_iter().find(|t| t.starts_with("--unsafe-no-"));
        let switch = backticked(&cell(2)).into_iter().next().unwrap_or_default();
        let name = switch.rsplit("::").next().unwrap_or_default().to_owned();
        let feature = backticked(&cell(3)).into_iter().next();
        // The switch is a function compiled only under the cfg.
        let compiled = sources.iter().any(|text| {
            attributes_above(text, &format!("fn {name}(")).is_some_and(|a| a.contains(&cfg))
        });
        if name.is_empty() || !compiled {
            wrong.push(format!("`{switch}` is not a function compiled only under the cfg"));
        }
        // The flag's field in controls.rs is under the cfg and exactly the feature said.
        if let Some(flag) = &flag {
            documented_flags.insert(flag.clone());
            let attributes = flags.get(flag).cloned().unwrap_or_default();
            let needed = attributes.split("feature = \"").nth(1).and_then(|f| f.split('"').next());
            if !attributes.contains(&cfg) || needed != feature.as_deref() {
                wrong
                    .push(format!("{flag}: controls.rs has `{attributes}`, the table {feature:?}"));
            }
        }
        // Each file said to run it names its switch or its flag.
        let runners: Vec<String> =
            backticked(&cell(4)).into_iter().filter(|t| t.contains('/')).collect();
        if runners.is_empty() {
            wrong.push(format!("`{switch}`: nothing runs it"));
        }
        for runner in runners {
            let text = fs::read_to_string(root.join(&runner)).unwrap_or_default();
            if !text.contains(&name) && !flag.as_ref().is_some_and(|f| text.contains(f.as_str())) {
                wrong.push(format!(
                    "{runner} is said to run `{switch}` and names neither it nor its flag"
                ));
            }
        }
    }
    let actual_flags: BTreeSet<String> = flags.keys().cloned().collect();
    if documented_flags != actual_flags {
        wrong.push(format!("flags: the table {documented_flags:?}, controls.rs {actual_flags:?}"));
    }
    // The crates that use the cfg are those whose build script sets it, one identical file.
    let build_scripts: BTreeMap<String, String> = manifests()
        .keys()
        .filter_map(|name| {
            let text = fs::read_to_string(crates_dir().join(name).join("build.rs")).ok()?;
            text.contains(&format!("rustc-cfg={cfg}")).then(|| (name.clone(), text))
        })
        .collect();
    let users: BTreeSet<String> = ["src", "tests"]
        .iter()
        .flat_map(|dir| files_containing(&format!("crates/*/{dir}"), std::slice::from_ref(&cfg)))
        .filter_map(|file| file.split('/').nth(1).map(str::to_owned))
        .collect();
    let setters: BTreeSet<String> = build_scripts.keys().cloned().collect();
    if users != setters {
        wrong.push(format!("crates using the cfg {users:?}, build scripts setting it {setters:?}"));
    }
    if build_scripts.values().collect::<BTreeSet<_>>().len() != 1 {
        wrong.push(format!("the build scripts of {setters:?} differ"));
    }
    // The scripts: the tests with the controls, the chaos harness's unsafe build only.
    let script = |path: &str| fs::read_to_string(root.join(path)).expect("a script");
    let (test_all, chaos, ci) =
        (script("scripts/test-all"), script("scripts/chaos"), script(".ci/run"));
    let set = "IDMINT_NEGATIVE_CONTROLS=1 ";
    if !test_all.lines().any(|l| l.starts_with(&format!("{set}cargo test "))) {
        wrong.push("scripts/test-all does not test with the controls".to_owned());
    }
    let chaos_builds: Vec<&str> =
        chaos.lines().filter(|l| l.contains("build -p idmint-cli")).collect();
    let unsafe_builds = chaos_builds.iter().filter(|l| l.starts_with(set)).count();
    if !chaos.contains("\nunset IDMINT_NEGATIVE_CONTROLS\n")
        || (chaos_builds.len(), unsafe_builds) != (2, 1)
    {
        wrong.push(format!(
            "scripts/chaos must build one unsafe and one plain idmint: {chaos_builds:?}"
        ));
    }
    if !ci.lines().any(|l| l.starts_with("scripts/no-hidden-controls ")) {
        wrong.push(
            ".ci/run does not check a plain binary with scripts/no-hidden-controls".to_owned(),
        );
    }
    // No manifest declares a test-only feature, and no file names the old features.
    for (name, manifest) in manifests() {
        let features = test_only_features(&manifest);
        if !features.is_empty() {
            wrong.push(format!("{name} declares test-only features {features:?}: use the cfg"));
        }
    }
    let old = [["test-", "no-"].concat(), ["test-etcd-", "round-robin"].concat()];
    for file in repository_text_files() {
        let text = fs::read_to_string(&file).unwrap_or_default();
        if old.iter().any(|o| text.contains(o.as_str())) {
            wrong.push(format!("{} names a former negative-control feature", file.display()));
        }
    }
    assert!(
        wrong.is_empty(),
        "the negative controls and ARCHITECTURE.md differ:\n{}",
        wrong.join("\n")
    );
    // Negative controls: a feature declared again, a flag dropped from the table, a switch
    // compiled without the cfg.
    let declared = format!("[features]\n{} = [\"etcd\"]\n", old[0].clone() + "fence");
    assert_eq!(test_only_features(&declared).len(), 1);
    assert!(test_only_features("[features]\ntest-util = []\n").is_empty());
    assert_eq!(actual_flags.len(), 8, "{actual_flags:?}");
    let bare = "/// Doc.\n#[cfg(feature = \"etcd\")]\npub fn without_fence(self) -> Self {";
    assert!(attributes_above(bare, "fn without_fence(").is_some_and(|a| !a.contains(&cfg)));
}

/// The commands of `idmint`: the variants of `enum Command` in the CLI's `main.rs`, in
/// lower case (each is the command's name).
fn cli_commands() -> BTreeSet<String> {
    let main = fs::read_to_string(crates_dir().join("idmint-cli/src/main.rs")).expect("main.rs");
    main.lines()
        .skip_while(|line| !line.starts_with("enum Command {"))
        .skip(1)
        .take_while(|line| !line.starts_with('}'))
        .filter_map(|line| {
            let line = line.trim();
            let name: String = line.chars().take_while(char::is_ascii_alphanumeric).collect();
            (name.starts_with(|c: char| c.is_ascii_uppercase())
                && line[name.len()..].starts_with('('))
            .then(|| name.to_lowercase())
        })
        .collect()
}

/// ARCHITECTURE.md's list of commands is the CLI's.
#[test]
fn the_command_list_of_architecture_md_is_the_clis() {
    let architecture = architecture_md();
    let line = architecture
        .lines()
        .find(|line| line.starts_with("Commands (the variants of `Command`"))
        .expect("the list of commands");
    let (_, list) = line.split_once("):").expect("the list after the note");
    let documented: BTreeSet<String> = backticked(list).into_iter().collect();
    let actual = cli_commands();
    assert!(actual.contains("serve") && actual.contains("gen"), "the enum was read: {actual:?}");
    assert_eq!(documented, actual, "ARCHITECTURE.md's commands and the CLI's differ");
    // Negative control: a command left out of the list no longer matches.
    let fewer: BTreeSet<String> = documented.iter().filter(|c| *c != "man").cloned().collect();
    assert_ne!(fewer, actual);
}

/// A crate's source files by module path (`lib.rs` is `[]`, `a.rs` and `a/mod.rs` are
/// `["a"]`, `a/b.rs` is `["a", "b"]`), each with its text.
type Sources = BTreeMap<Vec<String>, (String, String)>;

fn crate_sources(src: &Path) -> Sources {
    rust_files(src)
        .into_iter()
        .map(|file| {
            let relative =
                file.strip_prefix(src).expect("under src").to_string_lossy().into_owned();
            let text = fs::read_to_string(&file).expect("readable source");
            (relative, text)
        })
        .map(|(relative, text)| (module_path(&relative), (relative, text)))
        .collect()
}

/// The module path of a file under `src/`, by Rust's file rules.
fn module_path(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> =
        relative.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
    if matches!(parts.last().map(String::as_str), Some("lib" | "main" | "mod")) {
        parts.pop();
    }
    parts
}

/// The code of a Rust file with comments, strings and character literals blanked (newlines
/// kept), so that a path in a doc comment or a message is not read as an import.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.starts_with(&['/', '/']) {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if rest.starts_with(&['/', '*']) {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i..].starts_with(&['/', '*']) {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i..].starts_with(&['*', '/']) {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if rest[0] == 'r' && rest.get(1).is_some_and(|&c| c == '#' || c == '"') {
            let hashes = rest[1..].iter().take_while(|&&c| c == '#').count();
            if rest.get(1 + hashes) != Some(&'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let close: Vec<char> = std::iter::once('"').chain("#".repeat(hashes).chars()).collect();
            i += 2 + hashes;
            out.push_str(&" ".repeat(2 + hashes));
            while i < chars.len() && !chars[i..].starts_with(&close) {
                out.push(blank(chars[i]));
                i += 1;
            }
            out.push_str(&" ".repeat(close.len()));
            i += close.len();
        } else if rest[0] == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let step = if chars[i] == '\\' { 2 } else { 1 };
                for c in &chars[i..(i + step).min(chars.len())] {
                    out.push(blank(*c));
                }
                i += step;
            }
            out.push(' ');
            i += 1;
        } else if rest[0] == '\'' && (rest.get(1) == Some(&'\\') || rest.get(2) == Some(&'\'')) {
            // A character literal (a lifetime has no closing quote).
            let end = rest.iter().skip(1).position(|&c| c == '\'').map_or(rest.len(), |p| p + 2);
            out.push_str(&" ".repeat(end));
            i += end;
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    out
}

/// Every path of the code that starts at `crate` or `super`: those of `use` items, braces
/// expanded, and those written inline (`crate::web::cors(...)`). Each comes with the number of
/// inline modules (`mod tests { ... }`) it sits in, which its `super`s leave first, and
/// whether it is a `use` item's.
fn paths(code: &str) -> Vec<(usize, Vec<String>, bool)> {
    let tokens = tokens(code);
    let mut found = Vec::new();
    let mut depth_stack: Vec<(usize, bool)> = Vec::new(); // (brace depth, is an inline mod)
    let mut i = 0;
    while i < tokens.len() {
        let inline = depth_stack.iter().filter(|(_, module)| *module).count();
        match tokens[i].as_str() {
            "{" => {
                let module = i >= 2 && tokens[i - 2] == "mod";
                depth_stack.push((depth_stack.len(), module));
            }
            "}" => {
                depth_stack.pop();
            }
            "use" => {
                let end = tokens[i..].iter().position(|t| t == ";").map_or(tokens.len(), |p| i + p);
                for path in expand(&tokens[i + 1..end]) {
                    if matches!(path.first().map(String::as_str), Some("crate" | "super")) {
                        found.push((inline, path, true));
                    }
                }
                i = end;
            }
            "crate" | "super" if tokens.get(i + 1).is_some_and(|t| t == "::") => {
                let mut path = vec![tokens[i].clone()];
                let mut j = i + 1;
                while tokens.get(j).is_some_and(|t| t == "::")
                    && tokens.get(j + 1).is_some_and(|t| t.chars().all(is_ident))
                {
                    path.push(tokens[j + 1].clone());
                    j += 2;
                }
                found.push((inline, path, false));
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Identifiers, `::`, and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if is_ident(c) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_owned());
            i += 2;
        } else {
            tokens.push(c.to_string());
            i += 1;
        }
    }
    tokens
}

/// The paths of a `use` tree (`a::{b, c::{d as e, *}}` is `a::b` and `a::c::d`); `self`, `*`
/// and renames end a path.
fn expand(tree: &[String]) -> Vec<Vec<String>> {
    fn walk(tree: &[String], prefix: &[String], out: &mut Vec<Vec<String>>) {
        if tree.is_empty() {
            return; // after a trailing comma
        }
        let mut path = prefix.to_vec();
        let mut i = 0;
        while i < tree.len() {
            match tree[i].as_str() {
                "::" => {}
                "{" => {
                    // Split the group at its top-level commas.
                    let mut depth = 0;
                    let mut start = i + 1;
                    for j in i + 1..tree.len() {
                        match tree[j].as_str() {
                            "{" => depth += 1,
                            "}" if depth > 0 => depth -= 1,
                            "," | "}" if depth == 0 => {
                                walk(&tree[start..j], &path, out);
                                start = j + 1;
                                if tree[j] == "}" {
                                    return;
                                }
                            }
                            _ => {}
                        }
                    }
                    return;
                }
                "as" | "*" | "self" => break,
                "pub" | "(" | ")" => {}
                segment => path.push(segment.to_owned()),
            }
            i += 1;
        }
        out.push(path);
    }
    let mut out = Vec::new();
    walk(tree, &[], &mut out);
    out
}

/// The import graph between the files of one crate: file A → file B when A names a path of B
/// through `crate::` or `super::`. A name the crate root re-exports (`pub use`) counts as
/// the file that defines it. The root's own imports are counted only when `root_imports` is
/// set: the root declares every module, so by default it is the table of contents above them.
fn import_graph(sources: &Sources, root_imports: bool) -> BTreeMap<String, BTreeSet<String>> {
    let root: Vec<String> = Vec::new();
    let file_of = |module: &[String]| -> Option<&String> {
        (0..=module.len()).rev().find_map(|n| sources.get(&module[..n]).map(|(file, _)| file))
    };
    // The root's re-exports: name → the absolute path it stands for.
    let mut reexports = BTreeMap::new();
    if let Some((_, text)) = sources.get(&root) {
        for (_, path, used) in paths(&code_only(text)) {
            if used
                && path.len() > 2
                && path[0] == "crate"
                && let Some(name) = path.last()
            {
                reexports.insert(name.clone(), path[1..].to_vec());
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, (file, text)) in sources {
        let targets = graph.entry(file.clone()).or_default();
        if module.is_empty() && !root_imports {
            continue;
        }
        let code = code_only(text);
        let mut found = paths(&code);
        if module.is_empty() {
            // The root names its modules without `crate::`.
            let tokens = tokens(&code);
            for (i, token) in tokens.iter().enumerate() {
                let declared = i > 0 && tokens[i - 1] == "mod";
                if !declared
                    && tokens.get(i + 1).is_some_and(|t| t == "::")
                    && sources.contains_key(&vec![token.clone()])
                {
                    found.push((0, vec!["crate".to_owned(), token.clone()], false));
                }
            }
        }
        for (inline, path, _) in found {
            let mut absolute = module.clone();
            let mut rest = &path[..];
            if rest[0] == "crate" {
                absolute.clear();
                rest = &rest[1..];
            } else {
                let supers = rest.iter().take_while(|s| *s == "super").count();
                let up = supers.saturating_sub(inline);
                absolute.truncate(absolute.len().saturating_sub(up));
                rest = &rest[supers..];
            }
            absolute.extend(rest.iter().cloned());
            if let Some(first) = absolute.first()
                && !sources.contains_key(std::slice::from_ref(first))
                && let Some(target) = reexports.get(first)
            {
                absolute = target.clone();
            }
            if let Some(target) = file_of(&absolute)
                && target != file
            {
                targets.insert(target.clone());
            }
        }
    }
    graph
}

/// The import circles of a graph: its strongly connected components of two files or more
/// (Tarjan's algorithm), each sorted.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, node: &'g str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next.as_str()) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next.as_str()]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next.as_str()) {
                    let low = self.low[node].min(self.index[next.as_str()]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.to_owned());
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.found.sort();
    walk.found
}

/// The circles of one crate, each with its arrows (`a.rs -> b.rs`).
fn crate_circles(name: &str, root_imports: bool) -> (usize, Vec<Vec<String>>, Vec<String>) {
    let sources = crate_sources(&crates_dir().join(name).join("src"));
    assert!(sources.len() > 3, "the walk found the sources of {name}");
    let graph = import_graph(&sources, root_imports);
    let found = circles(&graph);
    let arrows = found
        .iter()
        .flat_map(|circle| {
            circle.iter().flat_map(|from| {
                graph[from]
                    .iter()
                    .filter(|to| circle.contains(to))
                    .map(move |to| format!("  {from} -> {to}"))
            })
        })
        .collect();
    (sources.len(), found, arrows)
}

/// No import circle between the files of idmint-engine, idmint-server, idmint-coord or
/// idmint-client, even counting the crate root's own imports: their modules stand in floors,
/// each importing only from below (ARCHITECTURE.md, "Structure"). Run with `--nocapture` to
/// read the figures.
#[test]
#[allow(clippy::print_stderr)]
fn no_import_circles_between_files() {
    let mut report = Vec::new();
    let mut server = Vec::new();
    for name in ["idmint-engine", "idmint-server", "idmint-coord", "idmint-client"] {
        for root_imports in [false, true] {
            let (files, found, arrows) = crate_circles(name, root_imports);
            let tied: usize = found.iter().map(Vec::len).sum();
            let counted = if root_imports { "with" } else { "without" };
            report.push(format!(
                "{name} ({files} files; {counted} the crate root's own imports): {} circles, \
                 {tied} files in circles {found:?}",
                found.len()
            ));
            report.extend(arrows);
            // No circle either way: each root is a table of contents that defines nothing
            // its modules use (idmint-coord's claims and `Coordinator` live in `claim.rs`).
            server.extend(found);
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(server.is_empty(), "import circles:\n{}", report.join("\n"));
}

/// The circle finder on small crates written out: a circle of two files is found (the
/// negative control of the test above), and comments, strings, test modules and a chain
/// are not circles.
#[test]
fn the_circle_finder_finds_circles_and_only_them() {
    let check = |files: &[(&str, &str)], want: &[&[&str]]| {
        let sources: Sources = files
            .iter()
            .map(|(file, text)| (module_path(file), ((*file).to_owned(), (*text).to_owned())))
            .collect();
        let found = circles(&import_graph(&sources, false));
        let want: Vec<Vec<String>> =
            want.iter().map(|c| c.iter().map(|f| (*f).to_owned()).collect()).collect();
        assert_eq!(found, want, "{files:?}");
    };
    let lib = ("lib.rs", "mod a;\nmod b;\nmod c;\npub use crate::a::A;\n");
    // Two files that import each other: one circle.
    check(&[lib, ("a.rs", "use crate::b::B;"), ("b.rs", "use crate::a::A;")], &[&["a.rs", "b.rs"]]);
    // Inline paths and grouped `use`s count; a name re-exported by the root is its file's.
    check(
        &[lib, ("a.rs", "fn f() { crate::b::g() }"), ("b.rs", "use crate::{A, c::C};")],
        &[&["a.rs", "b.rs"]],
    );
    // A trailing comma in a group is no path to the root.
    check(
        &[
            ("lib.rs", "mod a;\nmod b;\npub fn f() { crate::a::g() }"),
            ("a.rs", "use crate::{\n    b::B,\n};"),
            ("b.rs", ""),
        ],
        &[],
    );
    // Three files in a ring are one circle.
    check(
        &[
            lib,
            ("a.rs", "use crate::b::B;"),
            ("b.rs", "use crate::c::C;"),
            ("c.rs", "use crate::a::A;"),
        ],
        &[&["a.rs", "b.rs", "c.rs"]],
    );
    // A child's `super::` is its parent: a circle when the parent imports the child.
    check(
        &[lib, ("a.rs", "use crate::a::x::X;"), ("a/x.rs", "use super::A;")],
        &[&["a.rs", "a/x.rs"]],
    );
    // A chain, paths in comments and strings, and a test module's `super::*`: no circle.
    check(&[lib, ("a.rs", "use crate::b::B;"), ("b.rs", "use crate::c::C;"), ("c.rs", "")], &[]);
    check(
        &[
            lib,
            ("a.rs", "use crate::b::B;"),
            (
                "b.rs",
                "//! [`crate::a::A`]\nfn f() { let _ = \"crate::a::A\"; let _ = r#\"crate::a\"#; }",
            ),
        ],
        &[],
    );
    check(
        &[
            lib,
            ("a.rs", "use crate::b::B;"),
            ("b.rs", "#[cfg(test)]\nmod tests {\n    use super::*;\n}"),
        ],
        &[],
    );
}
