//! The durable-file helpers the file backends share (the coordinator, the segment and counter
//! store, the remembered lineage and the journal under them all): the error of a failed file
//! operation, an atomic JSON replace, a directory fsync, and running blocking file work off the
//! async threads.

use std::{
    fs::{self, File},
    io::Write,
    path::Path,
};

use serde::Serialize;

use crate::Error;

/// The error of a failed file operation: "cannot `what` `path`: …".
pub(crate) fn io_error(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let context = format!("cannot {what} {}", path.display());
    move |e| Error::io(context, e)
}

/// Replaces `path`, a file in `dir`, with `value` as JSON, atomically and durably: writes and
/// fsyncs `tmp` (in `dir` too), renames it over `path` and fsyncs `dir`, so that after a crash
/// `path` holds either the old value or the new one. Blocking.
pub(crate) fn replace_json(
    dir: &Path,
    path: &Path,
    tmp: &Path,
    value: &impl Serialize,
) -> Result<(), Error> {
    let text = serde_json::to_vec(value)
        .map_err(|e| Error::Corrupt { path: path.display().to_string(), reason: e.to_string() })?;
    let mut file = File::create(tmp).map_err(io_error("create", tmp))?;
    file.write_all(&text).map_err(io_error("write", tmp))?;
    file.sync_all().map_err(io_error("fsync", tmp))?;
    drop(file);
    fs::rename(tmp, path).map_err(io_error("rename onto", path))?;
    fsync_dir(dir)
}

/// Fsyncs a directory, making the entries created, renamed or removed in it durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_error("fsync directory", dir))
}

/// Runs blocking file work off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(work).await.map_err(|e| Error::Unavailable {
        backend: "file",
        reason: format!("blocking task failed: {e}"),
    })?
}
