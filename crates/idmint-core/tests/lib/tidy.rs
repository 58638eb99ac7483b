//! Source rules, checked as tests: every `.rs` file of the workspace's crates opens with a
//! `//!` line, the core's sources neither sleep, touch files or the network, use tokio, nor
//! skip or invert tests, ARCHITECTURE.md's crate graph is the manifests' one, and nothing in
//! the repository cites what is outside it (an issue tracker, reference notes).

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
    // A tracker's issue: the word, then its number ("#" optional); not a verb and a quantity
    // ("can issue 4,096 IDs", "issues 64 IDs per ms").
    let lower = text.to_lowercase();
    for (at, _) in lower.match_indices("issue") {
        let rest = &lower[at + "issue".len()..];
        let rest = match rest.strip_prefix("s #") {
            Some(rest) => rest,
            None => match rest.strip_prefix(" #").or_else(|| rest.strip_prefix(' ')) {
                Some(rest) => rest,
                None => continue,
            },
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let after = rest[digits.len()..].chars().next();
        if !digits.is_empty() && !matches!(after, Some(',' | '.' | '_')) {
            found.push(format!("issue {digits}"));
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
        ["reliability", ".md T3"].concat(),
        ["seed ", "001"].concat(),
    ];
    for cited in &cited {
        assert!(!outside_references(cited).is_empty(), "`{cited}` passed");
    }
    assert!(outside_references("a node can issue 4,096 IDs per ms").is_empty());
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

/// No import circle between the files of idmint-server, even counting the crate root's own
/// imports: its modules stand in floors, each importing only from below (ARCHITECTURE.md,
/// "Structure, before and after"). The circles of idmint-coord and idmint-client are printed,
/// not yet refused. Run with `--nocapture` to read the figures.
#[test]
#[allow(clippy::print_stderr)]
fn no_import_circles_between_files() {
    let mut report = Vec::new();
    let mut server = Vec::new();
    for name in ["idmint-server", "idmint-coord", "idmint-client"] {
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
            if name == "idmint-server" {
                server.extend(found);
            }
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(server.is_empty(), "import circles in idmint-server:\n{}", report.join("\n"));
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
