//! Source rules, checked as tests: every `.rs` file of the workspace's crates opens with a
//! `//!` line, and the core's sources neither sleep, touch files or the network, use tokio, nor
//! skip or invert tests.

use std::{
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
