//! `agentic model pull|list`, and the fallback to the embedded local model when no other
//! provider is configured.

use std::sync::Arc;

use agentic_core::Runtime;
use agentic_plugin_local::pull::{self, Progress};
use indicatif::{ProgressBar, ProgressStyle};

/// Progress on stderr: messages always, a bar only on a terminal.
pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    pub fn new() -> Self {
        let bar = ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Self { bar }
    }
}

impl Progress for Bar {
    fn message(&self, text: &str) {
        self.bar.suspend(|| eprintln!("agentic: {text}"));
    }

    fn bytes(&self, done: u64, total: u64) {
        self.bar.set_length(total);
        self.bar.set_position(done);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// `agentic model pull`: fetches the default model unless it is already there.
pub fn pull() -> anyhow::Result<()> {
    let path = pull::ensure_default(&Bar::new())?;
    println!("{}", path.display());
    Ok(())
}

/// `agentic model list`: the model files in the models directory.
pub fn list() -> anyhow::Result<()> {
    let models = pull::list()?;
    if models.is_empty() {
        eprintln!(
            "No models in {}; `agentic model pull` fetches the default one.",
            pull::models_dir()?.display()
        );
    }
    for model in models {
        println!(
            "{}\t{:.1} MB{}",
            model.path.display(),
            model.size as f64 / 1_000_000.0,
            if model.default { "\t(default)" } else { "" }
        );
    }
    Ok(())
}

/// Whether the runtime found a model provider.
fn has_provider(runtime: &Runtime) -> bool {
    runtime.services().completion.provider().is_some()
}

/// Builds the runtime with `build`. When no provider is configured, the default local model
/// is fetched (once) and the runtime built again, so that it answers; either way, a runtime
/// that ends up on the local model says so once on stderr.
pub async fn with_model_fallback<F, Fut>(build: F) -> anyhow::Result<Arc<Runtime>>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Runtime>>,
{
    let mut runtime = build().await?;
    if !has_provider(&runtime) {
        let bar = Bar::new();
        bar.message(
            "no model provider is configured, so agentic uses its embedded local model; \
             fetching it first",
        );
        tokio::task::spawn_blocking(move || pull::ensure_default(&bar)).await??;
        runtime = build().await?;
    }
    if let Some(provider) = runtime.services().completion.provider()
        && provider.id() == "local"
    {
        eprintln!(
            "agentic: answering with the local model {} on the CPU (no OPENAI_API_KEY or \
             OPENAI_BASE_URL set); a 135M model is small, see the README for stronger ones",
            provider.model_name(agentic_core::ModelKind::Normal)
        );
    }
    Ok(Arc::new(runtime))
}
