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

mod execution;
mod worker_process;

pub use execution::Execution;
use execution::{Clock, limit_error};
use worker_process::{Connection, Worker, tools_key};

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
