//! The host side of the sandbox: a warm pool of workers, and one [`Execution`] per script
//! with a wall-time clock that the host enforces by killing the worker.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agentic_core::telemetry::{self, Held};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::engine::EngineOptions;
use crate::protocol::{
    CodePath, ExecuteRequest, ExecutionOutcome, HostReply, HostRequest, ScriptError,
    ScriptErrorKind, ScriptLimits, ToHost, ToWorker,
};
use crate::sandbox_metrics::{SANDBOX_KILLS, SANDBOX_RUNNING, SANDBOX_WORKERS};
use crate::worker::{self, ChannelTransport, ENGINE_STACK_BYTES};

/// Where scripts run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// A separate worker process per script, killed at the deadline. The default.
    Isolated,
    /// A thread of the host process: faster, but a script can exhaust the host's memory or
    /// stack and cannot be killed. For embedding trusted code and for benchmarks.
    InProcess,
}

/// Sandbox settings; every limit is configurable under `interpreter.sandbox`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SandboxConfig {
    pub backend: Backend,
    /// Wall time of one script, not counting time spent waiting for a person.
    pub wall_time_ms: u64,
    /// Memory one worker may allocate beyond its idle size.
    pub memory_bytes: u64,
    /// Characters of `output()` and `log()` text per script.
    pub max_output_chars: usize,
    pub max_tool_calls: u32,
    pub max_code_bytes: usize,
    /// JavaScript call depth.
    pub recursion_limit: usize,
    /// Workers kept started and ready.
    pub pool_size: usize,
    /// Scripts running at once, over all users (default: the machine's cores). More wait,
    /// first come first served, without their wall time running.
    pub max_running: usize,
    /// Scripts one user may have running at once (default 1): a user's scripts queue behind
    /// that user's own, so one user's busy loops cannot take the cores from everyone else.
    pub max_running_per_user: usize,
    /// The worker program; found automatically when absent (see `docs/code-mode.md`).
    pub worker_program: Option<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            backend: Backend::Isolated,
            wall_time_ms: 30_000,
            memory_bytes: 256 * 1024 * 1024,
            max_output_chars: 50_000,
            max_tool_calls: 1_000,
            max_code_bytes: 100 * 1024,
            recursion_limit: 2_000,
            pool_size: 2,
            max_running: std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
            max_running_per_user: 1,
            worker_program: None,
        }
    }
}

impl SandboxConfig {
    pub fn script_limits(&self) -> ScriptLimits {
        ScriptLimits {
            max_output_chars: self.max_output_chars,
            max_tool_calls: self.max_tool_calls,
            recursion_limit: self.recursion_limit,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "cannot find the sandbox worker program `agentic-sandbox`; build it with \
         `cargo build -p agentic-interpreter` or set AGENTIC_SANDBOX_PROGRAM"
    )]
    WorkerNotFound,
    #[error("could not start a sandbox worker: {0}")]
    Spawn(String),
}

/// What an [`Execution`] reports, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum SandboxEvent {
    /// The script waits for this to be answered with [`Execution::reply`].
    Request {
        id: u64,
        request: HostRequest,
        /// `Date`'s live readings since the previous request (see [`crate::protocol::ToHost::Request`]).
        clock: Vec<i64>,
    },
    Output(String),
    Log(String),
    Finished(Box<ExecutionOutcome>),
}

/// Starts scripts on warm workers, a fair share of them per user.
#[derive(Debug)]
pub struct Sandbox {
    config: SandboxConfig,
    warm: Mutex<VecDeque<Worker>>,
    /// Slots for running scripts, over all users.
    running: Arc<Semaphore>,
    /// Each user's own slots; an entry goes when no script of its user holds or waits for one.
    users: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// The slots an execution holds while its script runs: its user's and the shared one. Given
/// back while the script waits for a person, taken again before it goes on.
#[derive(Debug)]
struct Slots {
    _user: Option<OwnedSemaphorePermit>,
    _shared: OwnedSemaphorePermit,
}

impl Sandbox {
    pub fn new(config: SandboxConfig) -> Arc<Self> {
        Arc::new(Self {
            running: Arc::new(Semaphore::new(config.max_running.max(1))),
            users: Mutex::new(HashMap::new()),
            config,
            warm: Mutex::new(VecDeque::new()),
        })
    }

    /// Waits for a slot of `owner` (when given), then for a shared one.
    async fn slots(&self, owner: Option<&str>) -> Slots {
        let user = match owner {
            Some(owner) => {
                let semaphore = {
                    let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
                    // Forget users with nothing running or waiting, so ids do not pile up.
                    users.retain(|_, semaphore| Arc::strong_count(semaphore) > 1);
                    users
                        .entry(owner.to_owned())
                        .or_insert_with(|| {
                            Arc::new(Semaphore::new(self.config.max_running_per_user.max(1)))
                        })
                        .clone()
                };
                semaphore.acquire_owned().await.ok()
            }
            None => None,
        };
        let shared = self
            .running
            .clone()
            .acquire_owned()
            .await
            .unwrap_or_else(|_| unreachable!("the sandbox never closes its semaphore"));
        Slots {
            _user: user,
            _shared: shared,
        }
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// Starts workers until the pool is full, so the first script does not wait for one.
    pub async fn warm_up(self: &Arc<Self>) -> Result<(), SandboxError> {
        while self.warm_count() < self.config.pool_size {
            let worker = self.start_worker().await?;
            self.lock_warm().push_back(worker);
        }
        Ok(())
    }

    /// Runs a script with the configured wall time, as no user in particular (it takes only a
    /// shared slot).
    pub async fn start(self: &Arc<Self>, request: ExecuteRequest) -> Execution {
        self.start_with_wall_time(None, request, None).await
    }

    /// Runs a script of `owner`, once one of that user's slots and a shared slot are free, with
    /// a shorter wall time than configured if one is given. Time spent waiting for the slots
    /// does not count. Code over the size limit fails here, before any worker sees it.
    pub async fn start_with_wall_time(
        self: &Arc<Self>,
        owner: Option<&str>,
        request: ExecuteRequest,
        wall_time: Option<Duration>,
    ) -> Execution {
        let configured = Duration::from_millis(self.config.wall_time_ms);
        let wall_time = wall_time.map_or(configured, |asked| asked.min(configured));
        let store = request.store.clone();
        if request.code.len() > self.config.max_code_bytes {
            let message = format!(
                "the code is {} bytes; the limit is {} bytes",
                request.code.len(),
                self.config.max_code_bytes
            );
            return Execution::finished_with(self.clone(), store, limit_error(&message));
        }
        let slots = self.slots(owner).await;
        let worker = match self.take_worker().await {
            Ok(worker) => worker,
            Err(error) => {
                let mut error = limit_error(&error.to_string());
                error.kind = ScriptErrorKind::Unavailable;
                return Execution::finished_with(self.clone(), store, error);
            }
        };
        let mut worker = worker;
        let mut request = request;
        let tools_key = tools_key(&request.tools);
        if worker.last_tools == Some(tools_key) {
            request.tools = Vec::new();
            request.same_tools_as_before = true;
        }
        worker.last_tools = Some(tools_key);
        let mut execution = Execution {
            sandbox: self.clone(),
            worker: Some(worker),
            clock: Clock::new(wall_time),
            store,
            outcome: None,
            owner: owner.map(str::to_owned),
            slots: Some(slots),
            running: Some(telemetry::hold(metrics::gauge!(SANDBOX_RUNNING))),
        };
        if let Some(worker) = execution.worker.as_mut()
            && worker
                .connection
                .send(ToWorker::Execute(Box::new(request)))
                .await
                .is_err()
        {
            let reason = worker.connection.death_reason(&self.config).await;
            execution.finish_with(limit_error(&reason));
        }
        execution
    }

    fn warm_count(&self) -> usize {
        self.lock_warm().len()
    }

    fn lock_warm(&self) -> std::sync::MutexGuard<'_, VecDeque<Worker>> {
        self.warm.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn take_worker(self: &Arc<Self>) -> Result<Worker, SandboxError> {
        let warm = self.lock_warm().pop_front();
        match warm {
            // Finished workers come back to the pool by themselves.
            Some(worker) => Ok(worker),
            None => {
                let worker = self.start_worker().await?;
                self.refill_in_background();
                Ok(worker)
            }
        }
    }

    fn refill_in_background(self: &Arc<Self>) {
        let sandbox = self.clone();
        tokio::spawn(async move {
            if sandbox.warm_count() < sandbox.config.pool_size
                && let Ok(worker) = sandbox.start_worker().await
            {
                sandbox.give_back(worker);
            }
        });
    }

    fn give_back(&self, worker: Worker) {
        let mut warm = self.lock_warm();
        if warm.len() < self.config.pool_size {
            warm.push_back(worker);
        }
    }

    async fn start_worker(&self) -> Result<Worker, SandboxError> {
        let mut worker = match self.config.backend {
            Backend::Isolated => Worker::new(Connection::spawn_process(&self.config)?),
            Backend::InProcess => Worker::new(Connection::spawn_thread()?),
        };
        match tokio::time::timeout(Duration::from_secs(30), worker.connection.receive()).await {
            Ok(Some(ToHost::Ready)) => Ok(worker),
            _ => {
                let reason = worker.connection.death_reason(&self.config).await;
                Err(SandboxError::Spawn(reason))
            }
        }
    }
}

/// One running script.
#[derive(Debug)]
pub struct Execution {
    sandbox: Arc<Sandbox>,
    worker: Option<Worker>,
    clock: Clock,
    store: serde_json::Map<String, serde_json::Value>,
    outcome: Option<Box<ExecutionOutcome>>,
    owner: Option<String>,
    /// Held while the script runs; `None` once it finished or while it waits for a person.
    slots: Option<Slots>,
    /// Counts the script in the running-scripts gauge until it finishes.
    running: Option<Held>,
}

impl Execution {
    fn finished_with(
        sandbox: Arc<Sandbox>,
        store: serde_json::Map<String, serde_json::Value>,
        error: ScriptError,
    ) -> Self {
        let mut execution = Self {
            clock: Clock::new(Duration::from_millis(sandbox.config.wall_time_ms)),
            sandbox,
            worker: None,
            store,
            outcome: None,
            owner: None,
            slots: None,
            running: None,
        };
        execution.finish_with(error);
        execution
    }

    fn finish_with(&mut self, error: ScriptError) {
        self.slots = None;
        self.running = None;
        self.outcome = Some(Box::new(ExecutionOutcome {
            path: CodePath::Plain,
            result: Err(error),
            done: false,
            complete: None,
            store: self.store.clone(),
        }));
    }

    /// The next thing the script did. After `Finished`, it keeps returning the same outcome.
    pub async fn next(&mut self) -> SandboxEvent {
        loop {
            if let Some(outcome) = &self.outcome {
                return SandboxEvent::Finished(outcome.clone());
            }
            let Some(worker) = self.worker.as_mut() else {
                self.finish_with(limit_error("the sandbox worker is gone"));
                continue;
            };
            // A message that is already there (or comes while spinning briefly) needs no
            // timer: building one per tool call showed up in profiles.
            let remaining = self.clock.remaining();
            let received = if remaining.is_zero() {
                Err(())
            } else {
                match worker.connection.try_receive() {
                    Some(received) => Ok(received),
                    None => tokio::time::timeout(remaining, worker.connection.wait())
                        .await
                        .map_err(|_| ()),
                }
            };
            match received {
                Ok(Some(ToHost::Request { id, request, clock })) => {
                    return SandboxEvent::Request { id, request, clock };
                }
                Ok(Some(ToHost::Output { text })) => return SandboxEvent::Output(text),
                Ok(Some(ToHost::Log { text })) => return SandboxEvent::Log(text),
                Ok(Some(ToHost::Finished(outcome))) => {
                    self.outcome = Some(outcome);
                    self.slots = None;
                    self.running = None;
                    if let Some(worker) = self.worker.take() {
                        recycle(self.sandbox.clone(), worker);
                    }
                }
                Ok(Some(ToHost::Ready)) => {}
                Ok(None) => {
                    let reason = worker.connection.death_reason(&self.sandbox.config).await;
                    crate::sandbox_metrics::count_kill(&reason);
                    self.worker = None;
                    self.sandbox.refill_in_background();
                    self.finish_with(limit_error(&reason));
                }
                Err(_) => {
                    worker.connection.kill().await;
                    metrics::counter!(SANDBOX_KILLS, "limit" => "time").increment(1);
                    self.worker = None;
                    self.sandbox.refill_in_background();
                    let seconds = self.clock.limit.as_secs_f64();
                    self.finish_with(limit_error(&format!(
                        "the script ran longer than the {seconds} s time limit and was stopped"
                    )));
                }
            }
        }
    }

    /// Answers a request; the script continues.
    pub async fn reply(&mut self, id: u64, reply: HostReply) {
        if let Some(worker) = self.worker.as_mut()
            && worker
                .connection
                .send(ToWorker::Reply { id, reply })
                .await
                .is_err()
        {
            let reason = worker.connection.death_reason(&self.sandbox.config).await;
            self.worker = None;
            self.finish_with(limit_error(&reason));
        }
    }

    /// Stops the wall-time clock while a person decides on an approval, and gives the slots
    /// back meanwhile: a script waiting for a person uses no core, and its user's other
    /// scripts may run.
    pub fn pause_clock(&mut self) {
        self.clock.pause();
        self.slots = None;
    }

    /// Takes the slots again (waiting for them, clock stopped), then restarts the clock.
    pub async fn resume_clock(&mut self) {
        if self.outcome.is_none() && self.slots.is_none() {
            self.slots = Some(self.sandbox.slots(self.owner.as_deref()).await);
        }
        self.clock.resume();
    }
}

/// Returns a worker to the pool once it has prepared its next context.
fn recycle(sandbox: Arc<Sandbox>, mut worker: Worker) {
    tokio::spawn(async move {
        match tokio::time::timeout(Duration::from_secs(10), worker.connection.receive()).await {
            Ok(Some(ToHost::Ready)) => sandbox.give_back(worker),
            // It reached its execution limit and exited, or misbehaved: replace it.
            _ => {
                worker.connection.kill().await;
                sandbox.refill_in_background();
            }
        }
    });
}

fn limit_error(message: &str) -> ScriptError {
    ScriptError {
        kind: ScriptErrorKind::Limit,
        message: message.to_owned(),
        line: None,
        column: None,
        source_line: None,
        hint: None,
    }
}

/// Wall time spent running, excluding pauses.
#[derive(Debug)]
struct Clock {
    limit: Duration,
    used: Duration,
    running_since: Option<Instant>,
}

impl Clock {
    fn new(limit: Duration) -> Self {
        Self {
            limit,
            used: Duration::ZERO,
            running_since: Some(Instant::now()),
        }
    }

    fn remaining(&self) -> Duration {
        let running = self
            .running_since
            .map_or(Duration::ZERO, |since| since.elapsed());
        self.limit.saturating_sub(self.used + running)
    }

    fn pause(&mut self) {
        if let Some(since) = self.running_since.take() {
            self.used += since.elapsed();
        }
    }

    fn resume(&mut self) {
        if self.running_since.is_none() {
            self.running_since = Some(Instant::now());
        }
    }
}

/// A started worker, and a fingerprint of the tools its last script had (its next context
/// has them bound already).
#[derive(Debug)]
struct Worker {
    connection: Connection,
    last_tools: Option<u64>,
}

fn tools_key(tools: &[crate::protocol::ToolBinding]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    tools.hash(&mut hasher);
    hasher.finish()
}

// A worker is moved around whole; the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Connection {
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
    fn new(connection: Connection) -> Self {
        Self {
            connection,
            last_tools: None,
        }
    }
}

impl Connection {
    fn spawn_process(config: &SandboxConfig) -> Result<Self, SandboxError> {
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

    fn spawn_thread() -> Result<Self, SandboxError> {
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
                };
                worker::serve(transport, options, u32::MAX);
            })
            .map_err(|error| SandboxError::Spawn(error.to_string()))?;
        Ok(Self::Thread {
            to_worker,
            from_worker,
        })
    }

    async fn receive(&mut self) -> Option<ToHost> {
        match self.try_receive() {
            Some(received) => received,
            None => self.wait().await,
        }
    }

    /// The next message if an in-process worker sends it within a short spin (`Some(None)`:
    /// the worker is gone). A process's pipe is read by `wait`, which spins on it as well.
    fn try_receive(&mut self) -> Option<Option<ToHost>> {
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
    async fn wait(&mut self) -> Option<ToHost> {
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

    async fn send(&mut self, message: ToWorker) -> Result<(), ()> {
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

    async fn kill(&mut self) {
        if let Self::Process { child, killed, .. } = self {
            *killed = true;
            let _ = child.kill().await;
        }
    }

    /// Why the worker stopped answering, in words the model can act on.
    async fn death_reason(&mut self, config: &SandboxConfig) -> String {
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
struct PipeLines {
    /// The pipe for direct, non-blocking reads while spinning.
    pipe: std::fs::File,
    /// The same pipe registered with the reactor, to wait on once spinning gives up.
    waiter: tokio::net::unix::pipe::Receiver,
    pending: Vec<u8>,
    /// Read buffer, allocated once: zeroing 64 KiB per message showed up in profiles.
    chunk: Box<[u8]>,
}

impl PipeLines {
    fn new(fd: std::os::fd::OwnedFd) -> std::io::Result<Self> {
        let waiter = tokio::net::unix::pipe::Receiver::from_owned_fd(rustix::io::dup(&fd)?)?;
        rustix::io::ioctl_fionbio(&fd, true)?;
        Ok(Self {
            pipe: std::fs::File::from(fd),
            waiter,
            pending: Vec::new(),
            chunk: vec![0u8; 64 * 1024].into_boxed_slice(),
        })
    }

    async fn next_line(&mut self) -> Option<Vec<u8>> {
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
async fn keep_stderr_tail(
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
fn worker_program(config: &SandboxConfig) -> Result<PathBuf, SandboxError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_run_isolated_unless_configured_otherwise() {
        assert_eq!(SandboxConfig::default().backend, Backend::Isolated);
        let config: SandboxConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(config.backend, Backend::Isolated);
    }

    #[test]
    fn the_clock_does_not_run_while_paused() {
        let mut clock = Clock::new(Duration::from_millis(100));
        clock.pause();
        std::thread::sleep(Duration::from_millis(150));
        assert!(clock.remaining() > Duration::from_millis(90));
        clock.resume();
        assert!(clock.remaining() <= Duration::from_millis(100));
    }
}
