//! `agentic model pull|list`, and the fallback to the embedded local model when no other
//! provider is configured.

use std::sync::Arc;

use agentic_core::{ModelKind, ModelProvider, ModelRequest, ModelStream, ProviderError, Runtime};
use agentic_plugin_local::pull::{self, Progress};
use agentic_plugin_local::{LocalConfig, LocalProvider};
use indicatif::{ProgressBar, ProgressStyle};

/// Progress on stderr: messages always, a bar only on a terminal.
pub(crate) struct Bar {
    bar: ProgressBar,
}

impl Bar {
    pub(crate) fn new() -> Self {
        let bar = ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec}, {eta} left",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Self { bar }
    }
}

impl Progress for Bar {
    fn message(&self, text: &str) {
        self.bar
            .suspend(|| crate::telemetry::say(tracing_core::Level::INFO, text));
    }

    fn bytes(&self, done: u64, total: u64) {
        self.bar.set_length(total);
        self.bar.set_position(done);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// A model name `agentic model pull` does not know.
#[derive(Debug)]
pub(crate) struct UnknownModel(String);

impl std::fmt::Display for UnknownModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = pull::KNOWN_MODELS.iter().map(|model| model.name).collect();
        write!(
            f,
            "no known model \"{}\"; the known ones are {}",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownModel {}

/// `agentic model pull [name]`: fetches a known model (the default without a name) unless it
/// is already there, and prints its path.
pub(crate) fn pull(name: Option<&str>) -> anyhow::Result<()> {
    let model = match name {
        None => &pull::DEFAULT_MODEL,
        Some(name) => pull::known(name).ok_or_else(|| UnknownModel(name.to_owned()))?,
    };
    let path = pull::ensure(model, &Bar::new())?;
    outln!("{}", path.display());
    Ok(())
}

/// `agentic model list`: the known models (pulled or not), then the model files in the models
/// directory.
pub(crate) fn list() -> anyhow::Result<()> {
    let dir = pull::models_dir()?;
    for model in pull::KNOWN_MODELS {
        let pulled = dir.join(model.file).is_file();
        outln!(
            "{}\t{:.0} MB\t{}\t{}{}",
            model.name,
            model.size as f64 / 1_000_000.0,
            if pulled { "pulled" } else { "not pulled" },
            model.about,
            if model.name == pull::DEFAULT_MODEL.name {
                " (default)"
            } else {
                ""
            }
        );
    }
    let models = pull::list()?;
    if models.is_empty() {
        eprintln!(
            "No models in {}; `agentic model pull [name]` fetches one.",
            dir.display()
        );
    }
    for model in models {
        outln!(
            "{}\t{:.1} MB{}",
            model.path.display(),
            model.size as f64 / 1_000_000.0,
            if model.default { "\t(default)" } else { "" }
        );
    }
    Ok(())
}

/// The embedded local model, fetched and loaded at its first request: `agentic mcp serve`
/// answers tool calls, which need no model, at once and offline, and only a prompt waits for
/// the download.
pub(crate) struct FetchedOnUse {
    config: agentic_core::Config,
    loaded: tokio::sync::OnceCell<Arc<dyn ModelProvider>>,
}

impl FetchedOnUse {
    pub(crate) fn new(config: agentic_core::Config) -> Arc<Self> {
        Arc::new(Self {
            config,
            loaded: tokio::sync::OnceCell::new(),
        })
    }

    async fn load(&self) -> Result<Arc<dyn ModelProvider>, ProviderError> {
        let unavailable = |error: anyhow::Error| {
            ProviderError::Config(format!(
                "no model provider is configured and the embedded model could not be fetched:                  {error:#}"
            ))
        };
        let settings = LocalConfig::resolve(&self.config).map_err(unavailable)?;
        let path = settings.model_path().map_err(unavailable)?;
        if !path.is_file() {
            let bar = Bar::new();
            bar.message(
                "no model provider is configured, so agentic uses its embedded local model;                  fetching it first",
            );
            tokio::task::spawn_blocking(move || pull::ensure_default(&bar))
                .await
                .map_err(|error| unavailable(error.into()))?
                .map_err(unavailable)?;
        }
        let provider: Arc<dyn ModelProvider> = Arc::new(LocalProvider::new(path, settings));
        Ok(provider)
    }
}

#[async_trait::async_trait]
impl ModelProvider for FetchedOnUse {
    fn id(&self) -> &str {
        "local"
    }

    fn model_name(&self, _kind: ModelKind) -> String {
        LocalConfig::resolve(&self.config)
            .and_then(|settings| settings.model_path())
            .ok()
            .and_then(|path| {
                path.file_stem()
                    .map(|stem| stem.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "local".to_owned())
    }

    fn samples(&self) -> bool {
        true
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let provider = self.loaded.get_or_try_init(|| self.load()).await?;
        provider.stream(request).await
    }
}

/// Whether the runtime found a model provider.
fn has_provider(runtime: &Runtime) -> bool {
    runtime.services().completion.provider().is_some()
}

/// Builds the runtime with `build`. When no provider is configured, the default local model
/// is fetched (once) and the runtime built again, so that it answers; either way, a runtime
/// that ends up on the local model says so once on stderr.
pub(crate) async fn with_model_fallback<F, Fut>(build: F) -> anyhow::Result<Arc<Runtime>>
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
        let name = provider.model_name(agentic_core::ModelKind::Normal);
        let default = pull::DEFAULT_MODEL
            .file
            .strip_suffix(".gguf")
            .is_some_and(|stem| stem == name);
        crate::telemetry::say(
            tracing_core::Level::INFO,
            &format!(
                "answering with the local model {name} on the CPU (no OPENAI_API_KEY or \
                 OPENAI_BASE_URL set){}",
                if default {
                    "; its first prompt on this machine reads the tools for about a minute, \
                     later ones start from what it kept"
                } else {
                    ""
                }
            ),
        );
    }
    Ok(Arc::new(runtime))
}
