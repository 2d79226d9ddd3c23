//! Background services: long-running work a plugin registers from `setup()` (e.g. the trigger
//! scheduler) and a server runs beside its HTTP API, over the same [`ConversationService`], so
//! the prompts it starts are stored and published like any other.
//!
//! The server knows none of them by name: `agentic serve` calls
//! [`start_background_services`] once the database is open and stops them (through
//! [`BackgroundTasks::stop`]) before it stops serving. Commands that run one prompt and exit
//! start none.

use std::sync::Arc;
use std::time::Duration;

use agentic_core::plugin::SetupContext;
use async_trait::async_trait;
/// The cancellation token a service is stopped with, re-exported so plugins name the same type.
pub use tokio_util::sync::CancellationToken;

use crate::service::ConversationService;

/// Work that runs for as long as the server does.
#[async_trait]
pub trait BackgroundService: Send + Sync {
    /// A short name for logs, e.g. `trigger.scheduler`.
    fn name(&self) -> &str;

    /// Runs until `shutdown` is cancelled, then returns promptly. An error is the service's to
    /// log and survive: one failed pass must not end it.
    async fn run(&self, service: ConversationService, shutdown: CancellationToken);
}

/// Registers a background service from a plugin's `setup()`; services start in registration
/// order.
pub fn register_background_service(
    context: &mut SetupContext<'_>,
    service: Arc<dyn BackgroundService>,
) {
    context
        .extensions
        .get_or_insert_default::<BackgroundServices>()
        .push(service);
}

/// The background services plugins registered, kept in the runtime's extensions.
pub type BackgroundServices = crate::registry::Registry<Arc<dyn BackgroundService>>;

impl BackgroundServices {
    /// The registered services' names, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.list()
            .iter()
            .map(|service| service.name().to_owned())
            .collect()
    }
}

/// Starts every background service registered in `service`'s runtime, each on its own task.
pub fn start_background_services(service: &ConversationService) -> BackgroundTasks {
    let shutdown = CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut names = Vec::new();
    let registered = service
        .runtime()
        .services()
        .extensions
        .get::<BackgroundServices>()
        .map(|services| services.list())
        .unwrap_or_default();
    for background in registered {
        let name = background.name().to_owned();
        tracing::info!(service = %name, "starting background service");
        let service = service.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(async move { background.run(service, shutdown).await });
        names.push(name);
    }
    BackgroundTasks {
        shutdown,
        tasks,
        names,
    }
}

/// The running background services. Dropping this aborts them; [`stop`](Self::stop) lets
/// them finish first.
#[derive(Debug)]
pub struct BackgroundTasks {
    shutdown: CancellationToken,
    tasks: tokio::task::JoinSet<()>,
    names: Vec<String>,
}

impl BackgroundTasks {
    /// The names of the services started, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Asks every service to stop and waits up to `grace` for them; those still running then
    /// are aborted.
    pub async fn stop(mut self, grace: Duration) {
        self.shutdown.cancel();
        let all_done = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(grace, all_done).await.is_err() {
            tracing::warn!(
                grace_ms = grace.as_millis(),
                "background services did not stop in time; aborting them"
            );
            self.tasks.abort_all();
            while self.tasks.join_next().await.is_some() {}
        }
    }
}
