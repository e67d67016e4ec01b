//! Starting and stopping one downstream server process.
//!
//! Each child runs in its own process group, so that stopping it also stops what it started
//! (`npx` starts `node`, `uvx` starts `python`) and so that a Ctrl-C in loom's terminal reaches
//! loom alone, which then shuts children down in order.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::env::child_environment_from_process;
use crate::config::ServerConfig;

/// After stdin is closed, how long a child gets to exit by itself.
pub(crate) const EXIT_GRACE: Duration = Duration::from_millis(500);
/// After SIGTERM, how long before SIGKILL. With [`EXIT_GRACE`] this keeps a full shutdown under
/// the 2 s budget even when a child ignores both.
pub(crate) const TERM_GRACE: Duration = Duration::from_millis(700);
/// How long what a server left behind in its process group gets after SIGTERM.
pub(crate) const LEFTOVER_GRACE: Duration = Duration::from_millis(300);

/// A running child and its pipes.
pub(crate) struct Spawned {
    pub child: ChildProcess,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
}

/// A running downstream process.
#[derive(Debug)]
pub(crate) struct ChildProcess {
    server: String,
    child: Child,
    pid: Option<u32>,
}

/// Start `server`'s command with its exact environment. Its stderr is forwarded line by line to
/// loom's log (stderr), tagged with the server name.
pub(crate) fn spawn(server: &ServerConfig) -> std::io::Result<Spawned> {
    let mut command = Command::new(&server.command);
    command
        .args(&server.args)
        .env_clear()
        .envs(child_environment_from_process(server))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Safety net only: the orderly path is `ChildProcess::terminate`.
        .kill_on_drop(true);
    if let Some(cwd) = &server.cwd {
        command.current_dir(cwd);
    }
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command.spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("child pipes were not created"));
    };
    if let Some(stderr) = child.stderr.take() {
        let name = server.name.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "loom::downstream::stderr", server = %name, "{line}");
            }
        });
    }
    let pid = child.id();
    Ok(Spawned {
        child: ChildProcess {
            server: server.name.clone(),
            child,
            pid,
        },
        stdin,
        stdout,
    })
}

impl ChildProcess {
    /// Stop the process: the caller has already closed its stdin (the MCP way to ask a stdio
    /// server to quit); wait [`EXIT_GRACE`], then SIGTERM the group, wait [`TERM_GRACE`], then
    /// SIGKILL the group. Returns how it ended.
    ///
    /// Whatever the server started lives in its process group and is stopped too, also when the
    /// server itself exits at once and leaves it behind: nothing a child started outlives loom.
    pub(crate) async fn terminate(&mut self) -> String {
        let ended = self.stop_leader().await;
        self.stop_leftovers().await;
        ended
    }

    async fn stop_leader(&mut self) -> String {
        if let Ok(Ok(status)) = tokio::time::timeout(EXIT_GRACE, self.child.wait()).await {
            return describe_exit(status);
        }
        self.signal_group(Signal::Term);
        if let Ok(Ok(status)) = tokio::time::timeout(TERM_GRACE, self.child.wait()).await {
            return format!("{} after SIGTERM", describe_exit(status));
        }
        self.signal_group(Signal::Kill);
        let _ = self.child.start_kill();
        match self.child.wait().await {
            Ok(status) => format!("{} after SIGKILL", describe_exit(status)),
            Err(error) => format!("could not be reaped: {error}"),
        }
    }

    /// The group outlives its leader while any member lives (the kernel keeps a group's id
    /// from being reused meanwhile): SIGTERM what is left, then SIGKILL what is still there.
    async fn stop_leftovers(&self) {
        if !self.group_alive() {
            return;
        }
        self.signal_group(Signal::Term);
        let deadline = tokio::time::Instant::now() + LEFTOVER_GRACE;
        while self.group_alive() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        if self.group_alive() {
            self.signal_group(Signal::Kill);
        }
    }

    /// Whether any process of the child's group is still there.
    fn group_alive(&self) -> bool {
        #[cfg(unix)]
        if let Some(pid) = self.pid.and_then(|pid| i32::try_from(pid).ok()) {
            use nix::sys::signal::killpg;
            use nix::unistd::Pid;
            return killpg(Pid::from_raw(pid), None).is_ok();
        }
        false
    }

    fn signal_group(&self, signal: Signal) {
        #[cfg(unix)]
        if let Some(pid) = self.pid.and_then(|pid| i32::try_from(pid).ok()) {
            use nix::sys::signal::{Signal as NixSignal, killpg};
            use nix::unistd::Pid;
            let signal = match signal {
                Signal::Term => NixSignal::SIGTERM,
                Signal::Kill => NixSignal::SIGKILL,
            };
            if let Err(error) = killpg(Pid::from_raw(pid), signal) {
                tracing::debug!(server = %self.server, %error, "signalling the process group failed");
            }
        }
        #[cfg(not(unix))]
        let _ = signal;
    }
}

impl Drop for ChildProcess {
    /// A child dropped without [`ChildProcess::terminate`] (a start abandoned at shutdown) takes
    /// its whole process group with it: `kill_on_drop` alone would spare what it started.
    fn drop(&mut self) {
        // Only while the leader is not reaped: after that its pid, and so the group id, may be
        // reused by an unrelated process group.
        if self.child.try_wait().ok().flatten().is_none() {
            self.signal_group(Signal::Kill);
        }
    }
}

#[derive(Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

/// "exited with code 3" / "killed by signal 9".
pub(crate) fn describe_exit(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with code {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    "exited".to_string()
}
