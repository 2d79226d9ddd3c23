//! A worker the pool holds: a child process (or, when configured, a thread), how the host
//! talks to it over its pipes, and why it died.

use super::*;

/// A started worker, and a fingerprint of the tools its last script had (its next context
/// has them bound already).
#[derive(Debug)]
pub(super) struct Worker {
    pub(super) connection: Connection,
    pub(super) last_tools: Option<u64>,
}

pub(super) fn tools_key(tools: &[crate::protocol::ToolBinding]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    tools.hash(&mut hasher);
    hasher.finish()
}

// A worker is moved around whole; the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum Connection {
    Process {
        child: Child,
        stdin: ChildStdin,
        stdout: PipeLines,
        stderr: Arc<Mutex<String>>,
        killed: bool,
        /// Counts the process in the workers gauge while it exists.
        _alive: Held,
    },
    Thread {
        to_worker: std::sync::mpsc::Sender<ToWorker>,
        from_worker: mpsc::UnboundedReceiver<ToHost>,
    },
}

impl Worker {
    pub(super) fn new(connection: Connection) -> Self {
        Self {
            connection,
            last_tools: None,
        }
    }
}

impl Connection {
    pub(super) fn spawn_process(config: &SandboxConfig) -> Result<Self, SandboxError> {
        let program = worker_program(config)?;
        let mut command = tokio::process::Command::new(&program);
        command
            .env_clear()
            .env(worker::WORKER_ENV, "1")
            .env(worker::MEMORY_ENV, config.memory_bytes.to_string())
            // The memory limit caps address space, so the allocator must not reserve much of
            // it ahead of use. glibc: one malloc arena, not one per thread. mimalloc (the
            // `agentic` binary's allocator, and it is its own worker): no 1 GiB arena reserved
            // at start-up, before the limit is set, which would let a script commit that much.
            .env("MALLOC_ARENA_MAX", "1")
            .env("MIMALLOC_ARENA_RESERVE", "0")
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|error| SandboxError::Spawn(format!("{}: {error}", program.display())))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(SandboxError::Spawn("the worker has no pipes".to_owned()));
        };
        let tail = Arc::new(Mutex::new(String::new()));
        tokio::spawn(keep_stderr_tail(stderr, tail.clone(), child.id()));
        let stdout = PipeLines::new(
            stdout
                .into_owned_fd()
                .map_err(|error| SandboxError::Spawn(error.to_string()))?,
        )
        .map_err(|error| SandboxError::Spawn(error.to_string()))?;
        Ok(Self::Process {
            child,
            stdin,
            stdout,
            stderr: tail,
            killed: false,
            _alive: telemetry::hold(metrics::gauge!(SANDBOX_WORKERS)),
        })
    }

    pub(super) fn spawn_thread() -> Result<Self, SandboxError> {
        let (to_worker, from_host) = std::sync::mpsc::channel();
        let (to_host, from_worker) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("sandbox".to_owned())
            .stack_size(ENGINE_STACK_BYTES)
            .spawn(move || {
                let transport = ChannelTransport { from_host, to_host };
                // Nothing can kill a thread, so runaway loops are cut off by count instead.
                let options = EngineOptions {
                    loop_iteration_limit: Some(100_000_000),
                    explain: &crate::explain::ForModels,
                };
                worker::serve(transport, options, u32::MAX);
            })
            .map_err(|error| SandboxError::Spawn(error.to_string()))?;
        Ok(Self::Thread {
            to_worker,
            from_worker,
        })
    }

    pub(super) async fn receive(&mut self) -> Option<ToHost> {
        match self.try_receive() {
            Some(received) => received,
            None => self.wait().await,
        }
    }

    /// The next message if an in-process worker sends it within a short spin (`Some(None)`:
    /// the worker is gone). A process's pipe is read by `wait`, which spins on it as well.
    pub(super) fn try_receive(&mut self) -> Option<Option<ToHost>> {
        match self {
            Self::Process { .. } => None,
            Self::Thread { from_worker, .. } => {
                worker::spin_for(worker::HOST_SPIN_BEFORE_SLEEP, || {
                    match from_worker.try_recv() {
                        Ok(message) => Some(Some(message)),
                        Err(mpsc::error::TryRecvError::Disconnected) => Some(None),
                        Err(mpsc::error::TryRecvError::Empty) => None,
                    }
                })
            }
        }
    }

    /// The next message, once `try_receive` found none.
    pub(super) async fn wait(&mut self) -> Option<ToHost> {
        match self {
            Self::Process { stdout, .. } => loop {
                let line = stdout.next_line().await?;
                match serde_json::from_slice(&line) {
                    Ok(message) => return Some(message),
                    Err(error) => {
                        tracing::warn!(%error, "unreadable message from a sandbox worker");
                    }
                }
            },
            Self::Thread { from_worker, .. } => from_worker.recv().await,
        }
    }

    pub(super) async fn send(&mut self, message: ToWorker) -> Result<(), ()> {
        match self {
            Self::Process { stdin, .. } => {
                let mut line = serde_json::to_vec(&message).map_err(|_| ())?;
                line.push(b'\n');
                stdin.write_all(&line).await.map_err(|_| ())?;
                stdin.flush().await.map_err(|_| ())
            }
            Self::Thread { to_worker, .. } => to_worker.send(message).map_err(|_| ()),
        }
    }

    pub(super) async fn kill(&mut self) {
        if let Self::Process { child, killed, .. } = self {
            *killed = true;
            let _ = child.kill().await;
        }
    }

    /// Why the worker stopped answering, in words the model can act on.
    pub(super) async fn death_reason(&mut self, config: &SandboxConfig) -> String {
        match self {
            Self::Thread { .. } => "the sandbox thread stopped".to_owned(),
            Self::Process { child, stderr, .. } => {
                let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                // Let the stderr reader catch up with the last words.
                tokio::time::sleep(Duration::from_millis(20)).await;
                let tail = stderr
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let megabytes = config.memory_bytes / (1024 * 1024);
                if tail.contains("memory allocation of") || tail.contains("out of memory") {
                    format!(
                        "the script used more than the {megabytes} MiB memory limit and was stopped"
                    )
                } else if tail.contains("overflowed its stack") {
                    "the script recursed too deeply and overflowed the stack".to_owned()
                } else {
                    let status = match status {
                        Ok(Ok(status)) => status.to_string(),
                        _ => "no exit status".to_owned(),
                    };
                    // A panic reads `thread '…' panicked at file:line:col:`, its message, then
                    // a note on backtraces: the message is what says what went wrong.
                    let lines: Vec<&str> = tail
                        .lines()
                        .filter(|line| !line.starts_with("note: "))
                        .collect();
                    let last = match lines
                        .iter()
                        .rposition(|line| line.contains(" panicked at "))
                    {
                        Some(at) => lines[at..].join(" "),
                        None => lines.last().copied().unwrap_or_default().to_owned(),
                    };
                    format!("the sandbox worker crashed ({status}) {last}")
                        .trim_end()
                        .to_owned()
                }
            }
        }
    }
}

/// Lines from a worker's stdout. Reads are non-blocking: the host spins on the pipe for a
/// moment before it waits for the reactor, because a worker answering a tool result usually
/// writes back within microseconds and a sleep and wake-up costs far more.
#[derive(Debug)]
pub(super) struct PipeLines {
    /// The pipe for direct, non-blocking reads while spinning.
    pub(super) pipe: std::fs::File,
    /// The same pipe registered with the reactor, to wait on once spinning gives up.
    pub(super) waiter: tokio::net::unix::pipe::Receiver,
    pub(super) pending: Vec<u8>,
    /// Read buffer, allocated once: zeroing 64 KiB per message showed up in profiles.
    pub(super) chunk: Box<[u8]>,
}

impl PipeLines {
    pub(super) fn new(fd: std::os::fd::OwnedFd) -> std::io::Result<Self> {
        let waiter = tokio::net::unix::pipe::Receiver::from_owned_fd(rustix::io::dup(&fd)?)?;
        rustix::io::ioctl_fionbio(&fd, true)?;
        Ok(Self {
            pipe: std::fs::File::from(fd),
            waiter,
            pending: Vec::new(),
            chunk: vec![0u8; 64 * 1024].into_boxed_slice(),
        })
    }

    pub(super) async fn next_line(&mut self) -> Option<Vec<u8>> {
        use std::io::Read;
        let started = Instant::now();
        loop {
            if let Some(end) = self.pending.iter().position(|byte| *byte == b'\n') {
                let mut line: Vec<u8> = self.pending.drain(..=end).collect();
                line.pop();
                return Some(line);
            }
            let read = if started.elapsed() < worker::HOST_SPIN_BEFORE_SLEEP {
                (&self.pipe).read(&mut self.chunk)
            } else {
                self.waiter.readable().await.ok()?;
                // Through `try_io`, so a spurious wake-up clears the reactor's readiness.
                let (mut pipe, chunk) = (&self.pipe, &mut self.chunk);
                self.waiter.try_io(|| pipe.read(chunk))
            };
            match read {
                Ok(0) => return None,
                Ok(count) => self.pending.extend_from_slice(&self.chunk[..count]),
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    std::hint::spin_loop();
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }
}

/// Keeps the last words of a worker's stderr (for the error that names why it died), and logs
/// each line at warn, named: a worker writes there only when it panics or runs out of memory.
pub(super) async fn keep_stderr_tail(
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<String>>,
    pid: Option<u32>,
) {
    /// Longest line logged; a panic message can quote a script's own text.
    const LOGGED_LINE: usize = 1_000;
    let mut stderr = stderr;
    let mut buffer = [0u8; 4096];
    let mut line = String::new();
    let log = |line: &str| {
        let line = line.trim_end();
        if !line.is_empty() {
            let cut = (0..=line.len().min(LOGGED_LINE))
                .rev()
                .find(|index| line.is_char_boundary(*index))
                .unwrap_or(0);
            tracing::warn!(source = "sandbox worker", pid, "{}", &line[..cut]);
        }
    };
    while let Ok(read) = stderr.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        let text = String::from_utf8_lossy(&buffer[..read]);
        for piece in text.split_inclusive('\n') {
            if line.len() < 2 * LOGGED_LINE {
                line.push_str(piece);
            }
            if piece.ends_with('\n') {
                log(&line);
                line.clear();
            }
        }
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        tail.push_str(&text);
        if tail.len() > 8192 {
            let cut = tail.len() - 4096;
            let cut = (cut..tail.len())
                .find(|index| tail.is_char_boundary(*index))
                .unwrap_or(tail.len());
            tail.drain(..cut);
        }
    }
    log(&line);
}

/// The program to run as a worker: configured, this very binary (if it called
/// `run_worker_if_requested`), or `agentic-sandbox` beside it.
pub(super) fn worker_program(config: &SandboxConfig) -> Result<PathBuf, SandboxError> {
    if let Some(path) = &config.worker_program {
        return Ok(path.clone());
    }
    if let Some(path) = std::env::var_os("AGENTIC_SANDBOX_PROGRAM") {
        return Ok(PathBuf::from(path));
    }
    let current = std::env::current_exe().map_err(|_| SandboxError::WorkerNotFound)?;
    if worker::host_is_worker_capable() {
        return Ok(current);
    }
    let name = format!("agentic-sandbox{}", std::env::consts::EXE_SUFFIX);
    let directory = current.parent();
    // Test binaries live one level down, in `target/<profile>/deps`.
    [directory, directory.and_then(std::path::Path::parent)]
        .into_iter()
        .flatten()
        .map(|directory| directory.join(&name))
        .find(|candidate| candidate.is_file())
        .ok_or(SandboxError::WorkerNotFound)
}
