//! Running one command line with `sh -c` on a pseudo-terminal: output is read as it comes,
//! shown live and captured; the command's whole process group is killed at the timeout, when
//! the command ends (nothing it started in the background outlives it) and when the caller
//! stops waiting (the future is dropped).

use std::ffi::OsString;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use agentic_core::ToolError;
use rustix::process::{Pid, Signal};
use tokio::io::AsyncReadExt as _;

use crate::capture::{Capture, Captured, LiveOutput};

/// The terminal's size: wide, so that tools which format for the screen wrap little.
const TERMINAL_ROWS: u16 = 40;
const TERMINAL_COLUMNS: u16 = 160;
/// How long to keep reading once the command has ended and its group was killed. Output the
/// command wrote before it ended is already buffered; only a process that left the group
/// (`setsid`) and still holds the terminal could make this wait.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);
/// How long to wait for the command to go once it was killed.
const KILLED_EXIT_LIMIT: Duration = Duration::from_secs(5);

/// One command to run.
#[derive(Debug, Clone)]
pub struct RunRequest<'a> {
    pub command: &'a str,
    pub directory: &'a Path,
    /// The child's whole environment.
    pub environment: &'a [(OsString, OsString)],
    pub timeout: Duration,
    /// Characters of output the result keeps.
    pub max_output_chars: usize,
    /// Characters of output shown live before live output stops.
    pub max_live_chars: usize,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    pub output: Captured,
    /// The exit code, when the command exited by itself.
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    pub timed_out: bool,
}

/// Runs the command, calling `live` with each piece of output as it arrives.
pub async fn run_on_pty(
    request: &RunRequest<'_>,
    live: &mut (dyn FnMut(&str) + Send),
) -> Result<RunOutcome, ToolError> {
    let (mut terminal, terminal_side) = pty_process::open()
        .map_err(|error| ToolError::failed(format!("cannot open a pseudo-terminal: {error}")))?;
    terminal
        .resize(pty_process::Size::new(TERMINAL_ROWS, TERMINAL_COLUMNS))
        .map_err(|error| ToolError::failed(format!("cannot size the pseudo-terminal: {error}")))?;
    // The child is a session leader (so its process group is its pid) with the terminal as
    // its controlling terminal. Nobody types: stdin is empty, so a command that reads it
    // ends instead of waiting for the timeout.
    let mut child = pty_process::Command::new("sh")
        .arg("-c")
        .arg(request.command)
        .current_dir(request.directory)
        .env_clear()
        .envs(
            request
                .environment
                .iter()
                .map(|(name, value)| (name, value)),
        )
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn(terminal_side)
        .map_err(|error| ToolError::failed(format!("cannot start the command: {error}")))?;
    let mut group = ProcessGroup::of_leader(child.id());

    let mut capture = Capture::new(request.max_output_chars);
    let mut live = LiveOutput::new(live, request.max_live_chars);
    let mut buffer = vec![0u8; 8192];
    let mut reading = true;
    let mut timed_out = false;
    let deadline = tokio::time::sleep(request.timeout);
    tokio::pin!(deadline);
    let status = loop {
        tokio::select! {
            status = child.wait(), if !timed_out => break status,
            read = terminal.read(&mut buffer), if reading => match read {
                Ok(0) => reading = false,
                Ok(count) => live.send(&capture.push(&buffer[..count])),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                // EIO: every process that had the terminal open has closed it.
                Err(_) => reading = false,
            },
            () = &mut deadline, if !timed_out => {
                timed_out = true;
                group.kill();
                let _ = child.start_kill();
                break tokio::time::timeout(KILLED_EXIT_LIMIT, child.wait())
                    .await
                    .unwrap_or_else(|_| {
                        Err(std::io::Error::other("the command did not end after it was killed"))
                    });
            }
        }
    };
    // Whatever the command left running in the background goes with it.
    group.kill();
    group.forget();
    if reading {
        let drain = async {
            loop {
                match terminal.read(&mut buffer).await {
                    Ok(0) => break,
                    Ok(count) => live.send(&capture.push(&buffer[..count])),
                    Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_LIMIT, drain).await;
    }
    let (output, last) = capture.finish();
    live.send(&last);
    let status = status
        .map_err(|error| ToolError::failed(format!("cannot wait for the command: {error}")))?;
    let (exit_code, signal) = exit_code_and_signal(status);
    Ok(RunOutcome {
        output,
        exit_code,
        signal,
        timed_out,
    })
}

/// The conventional name of a signal number, e.g. `SIGKILL`.
pub fn signal_name(number: i32) -> String {
    const NAMES: &[(Signal, &str)] = &[
        (Signal::HUP, "SIGHUP"),
        (Signal::INT, "SIGINT"),
        (Signal::QUIT, "SIGQUIT"),
        (Signal::ILL, "SIGILL"),
        (Signal::TRAP, "SIGTRAP"),
        (Signal::ABORT, "SIGABRT"),
        (Signal::BUS, "SIGBUS"),
        (Signal::FPE, "SIGFPE"),
        (Signal::KILL, "SIGKILL"),
        (Signal::USR1, "SIGUSR1"),
        (Signal::SEGV, "SIGSEGV"),
        (Signal::USR2, "SIGUSR2"),
        (Signal::PIPE, "SIGPIPE"),
        (Signal::ALARM, "SIGALRM"),
        (Signal::TERM, "SIGTERM"),
        (Signal::XCPU, "SIGXCPU"),
        (Signal::XFSZ, "SIGXFSZ"),
    ];
    NAMES
        .iter()
        .find(|(signal, _)| signal.as_raw() == number)
        .map_or_else(
            || format!("signal {number}"),
            |(_, name)| (*name).to_owned(),
        )
}

fn exit_code_and_signal(status: ExitStatus) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt as _;
    (status.code(), status.signal())
}

/// The process group a command runs in, killed when this is dropped unless forgotten.
struct ProcessGroup {
    leader: Option<Pid>,
}

impl ProcessGroup {
    fn of_leader(pid: Option<u32>) -> Self {
        let leader = pid
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(Pid::from_raw);
        Self { leader }
    }

    /// Sends SIGKILL to every process in the group. Called once the leader may already be
    /// reaped: the group id stays taken while any member lives, so the signal reaches
    /// exactly the leftovers, or nobody.
    fn kill(&self) {
        if let Some(leader) = self.leader {
            let _ = rustix::process::kill_process_group(leader, Signal::KILL);
        }
    }

    /// The group is dealt with; the drop must not signal an id that may be reused later.
    fn forget(&mut self) {
        self.leader = None;
    }
}

impl Drop for ProcessGroup {
    /// A dropped run (the prompt was cancelled) takes the command down with it.
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_have_their_usual_names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(1000), "signal 1000");
    }
}
