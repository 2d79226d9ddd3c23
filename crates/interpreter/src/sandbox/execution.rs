//! One running script: its events, the host's replies, and the wall-time clock the host
//! enforces by killing the worker.

use super::*;

/// One running script.
#[derive(Debug)]
pub struct Execution {
    pub(super) sandbox: Arc<Sandbox>,
    pub(super) worker: Option<Worker>,
    pub(super) clock: Clock,
    pub(super) store: serde_json::Map<String, serde_json::Value>,
    pub(super) outcome: Option<Box<ExecutionOutcome>>,
    pub(super) owner: Option<String>,
    /// Held while the script runs; `None` once it finished or while it waits for a person.
    pub(super) slots: Option<Slots>,
    /// Counts the script in the running-scripts gauge until it finishes.
    pub(super) running: Option<Held>,
}

impl Execution {
    pub(super) fn finished_with(
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

    pub(super) fn finish_with(&mut self, error: ScriptError) {
        self.slots = None;
        self.running = None;
        self.outcome = Some(Box::new(ExecutionOutcome {
            path: CodePath::Plain,
            result: Err(error),
            done: false,
            complete: None,
            store: self.store.clone(),
            clock: Vec::new(),
            guesses_read: false,
            misread: false,
            searched_in_vain: false,
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
pub(super) fn recycle(sandbox: Arc<Sandbox>, mut worker: Worker) {
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

pub(super) fn limit_error(message: &str) -> ScriptError {
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
pub(super) struct Clock {
    pub(super) limit: Duration,
    pub(super) used: Duration,
    pub(super) running_since: Option<Instant>,
}

impl Clock {
    pub(super) fn new(limit: Duration) -> Self {
        Self {
            limit,
            used: Duration::ZERO,
            running_since: Some(Instant::now()),
        }
    }

    pub(super) fn remaining(&self) -> Duration {
        let running = self
            .running_since
            .map_or(Duration::ZERO, |since| since.elapsed());
        self.limit.saturating_sub(self.used + running)
    }

    pub(super) fn pause(&mut self) {
        if let Some(since) = self.running_since.take() {
            self.used += since.elapsed();
        }
    }

    pub(super) fn resume(&mut self) {
        if self.running_since.is_none() {
            self.running_since = Some(Instant::now());
        }
    }
}
