//! [`Process`]: one service process a harness started, with its log: spawning it, noticing
//! that it exited at start, and killing it by PID. What the PostgreSQL, Redis and etcd
//! harnesses do alike with their processes.

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use super::HarnessError;

/// How often a start is retried when the service exits at once (a port taken in between).
pub(crate) const START_ATTEMPTS: usize = 3;

/// Sorts the error of one start attempt: a service that exited at once most likely lost its
/// port to another process, so `Ok` with the error, to try again on other ports; any other
/// error is final, `Err`.
pub(crate) fn retry_on_lost_port(error: HarnessError) -> Result<HarnessError, HarnessError> {
    match error {
        HarnessError::Service(_) => Ok(error),
        _ => Err(error),
    }
}

/// A process the harness started (or will start), and the log its output is appended to.
#[derive(Debug)]
pub(crate) struct Process {
    log: PathBuf,
    child: Option<Child>,
}

impl Process {
    /// No process yet; its output will go to `log`.
    pub(crate) fn new(log: PathBuf) -> Self {
        Process { log, child: None }
    }

    /// The log file.
    pub(crate) fn log(&self) -> &Path {
        &self.log
    }

    /// The PID, `None` when it is not running.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether it was started and not killed or found exited since.
    pub(crate) fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The process, which the harness then stops itself; `None` when it is not running.
    pub(crate) fn take(&mut self) -> Option<Child> {
        self.child.take()
    }

    /// The log opened for appending, twice: for stdout and for stderr.
    pub(crate) fn log_files(&self) -> Result<(File, File), HarnessError> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| HarnessError::io(format!("cannot open {}", self.log.display()), e))?;
        let err = log.try_clone().map_err(|e| HarnessError::io("cannot share the log", e))?;
        Ok((log, err))
    }

    /// Spawns `command` with no stdin and its output appended to the log; `what` names it in
    /// the error.
    pub(crate) fn spawn(&mut self, command: &mut Command, what: &str) -> Result<(), HarnessError> {
        let (out, err) = self.log_files()?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| HarnessError::io(format!("cannot start {what}"), e))?;
        self.child = Some(child);
        Ok(())
    }

    /// [`HarnessError::Service`] when the process has exited (it is then no longer running);
    /// `what` names it in the error.
    pub(crate) fn check_not_exited(&mut self, what: &str) -> Result<(), HarnessError> {
        if let Some(child) = self.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            self.child = None;
            return Err(HarnessError::Service(format!(
                "{what} exited at start ({status}); see {}",
                self.log.display()
            )));
        }
        Ok(())
    }

    /// The error for a process that did not become ready within `limit`.
    pub(crate) fn timeout(&self, what: String, limit: Duration) -> HarnessError {
        HarnessError::Timeout {
            what,
            seconds: limit.as_secs(),
            log: self.log.display().to_string(),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            stop(child);
        }
    }
}

/// SIGKILL by PID, then reap.
pub(crate) fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}
