//! The provider: loads the model on first use, then answers one request at a time on a
//! blocking thread, streaming text as it is decoded.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use agentic_core::{
    ModelEvent, ModelKind, ModelProvider, ModelRequest, ModelStream, PromptUsage, ProviderError,
};
use anyhow::Context;
use async_trait::async_trait;
use candle_core::quantized::gguf_file;

use crate::config::LocalConfig;
use crate::constrain::{CallGuard, Constraint, Grammars, Vocabulary};
use crate::tokenizer::ChatTokenizer;
use agentic_inference::{Decoder, Model};

/// How the next token is picked.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    /// 0 means greedy: always the most likely token, so the same prompt gives the same answer.
    pub temperature: f64,
    pub top_p: f64,
    pub seed: u64,
    /// Above 1, tokens seen in the last `repeat_last_n` are made less likely.
    pub repeat_penalty: f32,
    pub repeat_last_n: usize,
    /// Decode under the request's grammar: a tool call names an offered tool and its
    /// arguments follow that tool's input schema (see [`crate::constrain`]).
    pub constrain: bool,
}

/// Blank characters (spaces, tabs, line breaks) in a row at the end of an answer that end it:
/// more than any program's indentation or blank lines.
const BLANK_RUN: usize = 256;

/// How many blank characters `text` ends with.
fn blank_tail(text: &str) -> usize {
    text.chars().rev().take_while(|c| c.is_whitespace()).count()
}

/// A prompt whose beginning was not in the cache is saved when at least this many of its
/// tokens had to be processed.
const SAVE_FROM: usize = 256;

/// At most this many positions are saved (about 230 MB for a 1.5B Qwen).
const SAVE_AT_MOST: usize = 4096;

/// A prompt's cache file is named after its first this many tokens, so prompts that begin
/// differently (classic and code mode, other tools) keep a file each.
const KEY_TOKENS: usize = 64;

/// Cache files kept per model; the least recently written go first.
const KEEP_FILES: usize = 4;

/// A loaded model and tokenizer.
pub struct Engine {
    /// The network, behind the narrow interface generation needs.
    pub model: Box<dyn Decoder>,
    pub tokenizer: ChatTokenizer,
    name: String,
    vocabulary: Vocabulary,
    /// Built on the first constrained answer: it reads the whole vocabulary.
    grammars: Option<Grammars>,
    /// Where the prompt cache is kept between processes, if it is: a folder, and the start of
    /// this model's file names in it.
    prompt_cache: Option<(PathBuf, String)>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What one generation produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    pub text: String,
    pub tokens: Vec<u32>,
    pub prompt_tokens: usize,
    /// Prompt tokens that were actually processed (the rest came from the cache).
    pub processed_tokens: usize,
    pub stopped: bool,
    /// Tokens decoded and then taken back by the call guard (`CallGuard`): decoding work the
    /// answer does not show.
    pub taken_back_tokens: usize,
}

impl Engine {
    pub fn load(path: &std::path::Path) -> anyhow::Result<Self> {
        let mut file = std::fs::File::open(path)
            .with_context(|| format!("could not open the model file {}", path.display()))?;
        let content = gguf_file::Content::read(&mut file)
            .with_context(|| format!("{} is not a GGUF model file", path.display()))?;
        let tokenizer = ChatTokenizer::from_gguf(&content)?;
        let vocabulary = Vocabulary::from_gguf(&content)?;
        let model = Box::new(Model::from_gguf(&content, &mut file)?);
        let name = path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".into());
        Ok(Self {
            model,
            tokenizer,
            name,
            vocabulary,
            grammars: None,
            prompt_cache: None,
        })
    }

    /// Keeps the beginning of long prompts in files in `dir`, named `<name>-<hash of the
    /// prompt's first tokens>.kv`, between processes: a fresh engine starts from what the file
    /// for its first prompt shares with it, and a prompt that had to process many tokens
    /// writes its beginning there.
    pub fn with_prompt_cache(mut self, dir: PathBuf, name: String) -> Self {
        self.prompt_cache = Some((dir, name));
        self
    }

    /// The prompt cache of the model at `model`: the models directory's `cache` folder, and a
    /// name made of the model file's name, size and modification time, so a changed file
    /// never meets an old cache.
    pub fn prompt_cache_place(model: &std::path::Path) -> anyhow::Result<(PathBuf, String)> {
        use sha2::Digest;
        let metadata = std::fs::metadata(model)?;
        let modified = metadata
            .modified()?
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let canonical = std::fs::canonicalize(model)?;
        let identity = format!(
            "{}\n{}\n{}.{}",
            canonical.display(),
            metadata.len(),
            modified.as_secs(),
            modified.subsec_nanos()
        );
        let hex = crate::pull::hex(&sha2::Sha256::digest(identity.as_bytes())[..8]);
        let stem = model
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        Ok((
            crate::pull::models_dir()?.join("cache"),
            format!("{stem}-{hex}"),
        ))
    }

    /// The cache file for `prompt`, if it is long enough to have one.
    fn prompt_cache_file(&self, prompt: &[u32]) -> Option<PathBuf> {
        use sha2::Digest;
        let (dir, name) = self.prompt_cache.as_ref()?;
        let key = prompt.get(..KEY_TOKENS)?;
        let mut hasher = sha2::Sha256::new();
        for token in key {
            hasher.update(token.to_le_bytes());
        }
        let hex = crate::pull::hex(&hasher.finalize()[..8]);
        Some(dir.join(format!("{name}-{hex}.kv")))
    }

    /// Starts a fresh cache from the prompt cache file, if it shares a beginning with
    /// `prompt`. A missing, foreign or broken file only means starting from nothing.
    fn load_prompt_cache(&mut self, prompt: &[u32]) -> usize {
        if !self.model.cached().is_empty() {
            return 0;
        }
        let Some(path) = self.prompt_cache_file(prompt) else {
            return 0;
        };
        let Ok(mut file) = std::fs::File::open(&path) else {
            return 0;
        };
        let mut reader = std::io::BufReader::with_capacity(1 << 20, &mut file);
        match self.model.load_prefix(&mut reader, prompt) {
            Ok(loaded) => loaded,
            Err(error) => {
                tracing::warn!(file = %path.display(), %error, "the local model's prompt cache could not be read; starting without it");
                0
            }
        }
    }

    /// Writes the cache's first positions (at most [`SAVE_AT_MOST`]) to the prompt's cache
    /// file, through a temporary file, so a reader never sees half a file; then keeps only the
    /// model's [`KEEP_FILES`] most recent files.
    fn save_prompt_cache(&self, prompt: &[u32]) {
        let (Some(path), Some((dir, name))) =
            (self.prompt_cache_file(prompt), self.prompt_cache.as_ref())
        else {
            return;
        };
        let length = prompt.len();
        let written = (|| -> anyhow::Result<()> {
            std::fs::create_dir_all(dir)?;
            let mut file = tempfile::NamedTempFile::new_in(dir)?;
            {
                let mut writer = std::io::BufWriter::with_capacity(1 << 20, file.as_file_mut());
                self.model
                    .save_prefix(&mut writer, length.min(SAVE_AT_MOST))?;
                std::io::Write::flush(&mut writer)?;
            }
            file.persist(&path)?;
            // The oldest of this model's files beyond the newest few.
            let mut files: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)?
                .filter_map(Result::ok)
                .filter(|entry| {
                    let file_name = entry.file_name();
                    let file_name = file_name.to_string_lossy();
                    file_name.starts_with(&format!("{name}-")) && file_name.ends_with(".kv")
                })
                .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
                .collect();
            files.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
            for (_, old) in files.into_iter().skip(KEEP_FILES) {
                let _ = std::fs::remove_file(old);
            }
            Ok(())
        })();
        if let Err(error) = written {
            tracing::warn!(file = %path.display(), %error, "the local model's prompt cache could not be written");
        }
    }

    /// Forgets the prompt cache (answers are then exactly those of a fresh start).
    pub fn clear_cache(&mut self) -> anyhow::Result<()> {
        self.model.truncate(0);
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The grammar `request` is decoded under, if it has one. A grammar that cannot be built
    /// leaves the answer free, with a warning: constraints help the model, they never stop it.
    pub fn constraint_for(&mut self, request: &ModelRequest) -> Option<Constraint> {
        let grammars = match &mut self.grammars {
            Some(grammars) => grammars,
            slot => {
                let built = Grammars::new(
                    &self.vocabulary,
                    self.model.vocabulary(),
                    &self.tokenizer.stops(),
                );
                match built {
                    Ok(grammars) => slot.insert(grammars),
                    Err(error) => {
                        tracing::warn!(%error, "the local model's vocabulary gives no grammar; decoding unconstrained");
                        return None;
                    }
                }
            }
        };
        grammars
            .for_request(request)
            .map_err(|error| {
                tracing::warn!(%error, "the request's grammar could not be built; decoding unconstrained");
            })
            .ok()
            .flatten()
    }

    /// Answers the chat in `request`. `emit` gets each piece of text as soon as it is final
    /// and returns false when nobody listens any more, which stops the work.
    pub fn generate(
        &mut self,
        request: &ModelRequest,
        sampling: &Sampling,
        max_tokens: usize,
        emit: &mut dyn FnMut(&str) -> bool,
        cancelled: &dyn Fn() -> bool,
    ) -> anyhow::Result<Generated> {
        let rendered = self.tokenizer.render(&request.messages, &request.tools)?;
        tracing::trace!(prompt = %rendered, "rendered");
        let prompt = self.tokenizer.encode(&rendered)?;
        let from_file = self.load_prompt_cache(&prompt);
        let reused = self
            .model
            .cached()
            .iter()
            .zip(&prompt)
            .take_while(|(cached, token)| cached == token)
            .count()
            .min(prompt.len().saturating_sub(1));
        let mut keep_going = || !cancelled();
        let logits = self.model.prefill(&prompt, &mut keep_going)?;
        // Worth keeping for the next process: many tokens read, more than the file had.
        if logits.is_some()
            && prompt.len() - reused >= SAVE_FROM
            && from_file < prompt.len().min(SAVE_AT_MOST)
        {
            self.save_prompt_cache(&prompt);
        }
        let mut generated = Generated {
            text: String::new(),
            tokens: Vec::new(),
            prompt_tokens: prompt.len(),
            processed_tokens: prompt.len() - reused,
            stopped: false,
            taken_back_tokens: 0,
        };
        let Some(mut logits) = logits else {
            return Ok(generated);
        };
        let mut constraint = if sampling.constrain {
            self.constraint_for(request)
        } else {
            None
        };
        tracing::debug!(
            constrained = constraint.is_some(),
            grammar_chars = request.grammar.as_ref().map_or(0, String::len),
            "decoding"
        );
        // Under a program's grammar, calls of names nobody declared, and failed calls written
        // again, are taken back.
        let mut calls = constraint.as_ref().and_then(|_| CallGuard::new(request));
        let mut rng = fastrand::Rng::with_seed(sampling.seed);
        let mut context = prompt.clone();
        // Text decoded so far, and how much of it has gone out.
        let mut sent = 0;
        while generated.tokens.len() < max_tokens {
            // Tokens taken back here are ruled out, unless that leaves the grammar nothing
            // (a namespace's only method): then the guard takes the call back until it gives
            // up (`MAX_TAKEN_BACK`).
            if let (Some(guard), Some(grammar)) = (&calls, constraint.as_mut())
                && guard.bans_at(generated.tokens.len())
            {
                let mut banned = logits.clone();
                if grammar.mask(&mut banned).is_ok() {
                    guard.ban(generated.tokens.len(), &mut banned);
                    if banned.iter().any(|logit| logit.is_finite()) {
                        logits = banned;
                    }
                }
            }
            let token = match constraint.as_mut() {
                Some(grammar) => {
                    match sample_allowed(grammar, &mut logits, &context, sampling, &mut rng) {
                        Ok(token) => token,
                        Err(error) => {
                            tracing::warn!(%error, "the grammar failed; the rest of the answer is unconstrained");
                            constraint = None;
                            sample(&mut logits, &context, sampling, &mut rng)
                        }
                    }
                }
                None => sample(&mut logits, &context, sampling, &mut rng),
            };
            if self.tokenizer.is_stop(token) {
                generated.stopped = true;
                break;
            }
            generated.tokens.push(token);
            context.push(token);
            let text = self.tokenizer.decode(&generated.tokens)?;
            if let (Some(guard), Some(grammar)) = (calls.as_mut(), constraint.as_mut()) {
                let from = common_prefix(&generated.text, &text);
                if let Some(start) = guard.to_take_back(&text, from) {
                    // Back to the token the name starts in, unless part of it has gone out.
                    let mut keep = generated.tokens.len() - 1;
                    let mut kept = self.tokenizer.decode(&generated.tokens[..keep])?;
                    while keep > 0 && kept.len() > start {
                        keep -= 1;
                        kept = self.tokenizer.decode(&generated.tokens[..keep])?;
                    }
                    let taken = generated.tokens[keep];
                    if kept.len() >= sent && guard.take_back(keep, taken) {
                        generated.taken_back_tokens += generated.tokens.len() - keep;
                        grammar.rollback(generated.tokens.len() - keep)?;
                        generated.tokens.truncate(keep);
                        context.truncate(prompt.len() + keep);
                        generated.text = kept;
                        match self.model.prefill(&context, &mut keep_going)? {
                            Some(again) => logits = again,
                            None => return Ok(generated),
                        }
                        continue;
                    }
                    tracing::debug!("calls are no longer taken back");
                    calls = None;
                }
            }
            // A stop sequence ends the answer before it.
            if let Some(cut) = request
                .stop
                .iter()
                .filter(|stop| !stop.is_empty())
                .filter_map(|stop| text.find(stop.as_str()))
                .min()
            {
                generated.text = text[..cut].to_owned();
                if cut > sent {
                    emit(&generated.text[sent..]);
                }
                generated.stopped = true;
                return Ok(generated);
            }
            // Hold back a partial character and anything a stop sequence may still start.
            let mut ready = text.trim_end_matches('\u{FFFD}').len();
            for stop in request.stop.iter().filter(|stop| !stop.is_empty()) {
                for length in (1..stop.len()).rev() {
                    if stop.is_char_boundary(length) && text[..ready].ends_with(&stop[..length]) {
                        ready -= length;
                        break;
                    }
                }
            }
            // A name at the end may still be taken back (see `CallGuard`).
            if let Some(guard) = &calls {
                ready = ready.min(guard.settled(&text[..ready]));
            }
            if ready > sent && text.is_char_boundary(ready) {
                if !emit(&text[sent..ready]) {
                    generated.text = text;
                    return Ok(generated);
                }
                sent = ready;
            }
            generated.text = text;
            if generated.tokens.len() == max_tokens {
                break;
            }
            // A run of blank text no answer has: the model wants to write what the grammar does
            // not allow (prose in a program's fence), and the grammar leaves it only spaces and
            // line breaks, which would go on to `max_tokens` (about 50 s on two cores). The
            // answer ends as if it had reached its limit.
            if blank_tail(&generated.text) >= BLANK_RUN {
                tracing::debug!("a run of blank text ends the answer");
                break;
            }
            // The grammar is complete (a program's closing fence): the answer ends here.
            if constraint.as_ref().is_some_and(Constraint::is_finished) {
                generated.stopped = true;
                break;
            }
            logits = self.model.step(token)?;
        }
        if generated.text.len() > sent {
            emit(&generated.text[sent..]);
        }
        Ok(generated)
    }
}

/// The sampler's seed for a request that brings one: the request's, moved by the configured
/// seed. The default moves nothing, so a mode's seeded samples stay what they were; any other
/// value scatters them (a multiplication by an odd constant, so two configured seeds never
/// give one request the same draw).
fn mixed_seed(request: u64, configured: u64) -> u64 {
    if configured == crate::config::DEFAULT_SEED {
        request
    } else {
        request ^ configured.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// How many bytes `a` and `b` start with in common, at a character boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((at, _), _)| at)
}

/// Picks the next token from `logits` (which it may change) among those `grammar` allows, and
/// moves the grammar past it. The sampler's pick is checked first; only when the grammar
/// refuses it is the full mask computed and the pick made again among the allowed tokens.
pub fn sample_allowed(
    grammar: &mut Constraint,
    logits: &mut [f32],
    context: &[u32],
    sampling: &Sampling,
    rng: &mut fastrand::Rng,
) -> anyhow::Result<u32> {
    let token = sample(logits, context, sampling, rng);
    if grammar.allows(token)? {
        grammar.accept(token)?;
        return Ok(token);
    }
    grammar.mask(logits)?;
    // The repeat penalty is already in `logits`.
    let again = Sampling {
        repeat_penalty: 1.0,
        ..sampling.clone()
    };
    let token = sample(logits, context, &again, rng);
    grammar.accept(token)?;
    Ok(token)
}

/// Picks the next token from `logits` (which it may change).
pub fn sample(
    logits: &mut [f32],
    context: &[u32],
    sampling: &Sampling,
    rng: &mut fastrand::Rng,
) -> u32 {
    if sampling.repeat_penalty > 1.0 {
        let start = context.len().saturating_sub(sampling.repeat_last_n);
        let mut seen = std::collections::HashSet::new();
        for &token in &context[start..] {
            if seen.insert(token)
                && let Some(logit) = logits.get_mut(token as usize)
            {
                *logit = if *logit >= 0.0 {
                    *logit / sampling.repeat_penalty
                } else {
                    *logit * sampling.repeat_penalty
                };
            }
        }
    }
    let greedy = || {
        logits
            .iter()
            .enumerate()
            .fold((0usize, f32::NEG_INFINITY), |best, (index, &logit)| {
                if logit > best.1 { (index, logit) } else { best }
            })
            .0 as u32
    };
    if sampling.temperature <= 0.0 {
        return greedy();
    }
    let temperature = sampling.temperature as f32;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut weights: Vec<(usize, f32)> = logits
        .iter()
        .enumerate()
        .map(|(index, &logit)| (index, ((logit - max) / temperature).exp()))
        .filter(|(_, weight)| weight.is_finite() && *weight > 0.0)
        .collect();
    if weights.is_empty() {
        return greedy();
    }
    weights.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f32 = weights.iter().map(|(_, weight)| weight).sum();
    // Keep the most likely tokens whose probabilities add up to top_p.
    let mut kept = 0.0;
    let mut cut = weights.len();
    for (index, (_, weight)) in weights.iter().enumerate() {
        kept += weight / total;
        if f64::from(kept) >= sampling.top_p {
            cut = index + 1;
            break;
        }
    }
    weights.truncate(cut);
    let total: f32 = weights.iter().map(|(_, weight)| weight).sum();
    let mut point = rng.f32() * total;
    for (index, weight) in &weights {
        if point < *weight {
            return *index as u32;
        }
        point -= weight;
    }
    weights
        .last()
        .map(|(index, _)| *index as u32)
        .unwrap_or_else(greedy)
}

/// The local model as a [`ModelProvider`].
pub struct LocalProvider {
    path: PathBuf,
    config: LocalConfig,
    engine: Arc<Mutex<Option<Engine>>>,
}

impl std::fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvider")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl LocalProvider {
    pub fn new(path: PathBuf, config: LocalConfig) -> Self {
        Self {
            path,
            config,
            engine: Arc::default(),
        }
    }
}

#[async_trait]
impl ModelProvider for LocalProvider {
    fn id(&self) -> &str {
        "local"
    }

    fn model_name(&self, _kind: ModelKind) -> String {
        self.path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".into())
    }

    fn samples(&self) -> bool {
        true
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let request = if self.config.restate_question {
            crate::restate::restated(request)
        } else {
            request
        };
        let (sender, receiver) =
            tokio::sync::mpsc::channel::<Result<ModelEvent, ProviderError>>(256);
        let engine = self.engine.clone();
        let path = self.path.clone();
        let mut sampling = self.config.sampling();
        sampling.temperature = request.temperature(sampling.temperature);
        if let Some(seed) = request.seed {
            sampling.seed = mixed_seed(seed, self.config.seed);
        }
        let prompt_cache = self.config.prompt_cache;
        let max_tokens = request
            .max_tokens
            .map(|tokens| tokens as usize)
            .unwrap_or(self.config.max_tokens)
            .max(1);
        let model_name = self.model_name(request.model);
        tokio::task::spawn_blocking(move || {
            // One generation at a time: the model and its cache are one piece of state.
            let mut slot = engine.lock().unwrap_or_else(PoisonError::into_inner);
            if slot.is_none() {
                match Engine::load(&path) {
                    Ok(loaded) => {
                        let cache = prompt_cache
                            .then(|| Engine::prompt_cache_place(&path))
                            .and_then(|file| {
                                file.map_err(|error| {
                                    tracing::warn!(%error, "the local model's prompt cache has no place");
                                })
                                .ok()
                            });
                        *slot = Some(match cache {
                            Some((dir, name)) => loaded.with_prompt_cache(dir, name),
                            None => loaded,
                        });
                    }
                    Err(error) => {
                        let _ = sender.blocking_send(Err(ProviderError::Config(format!(
                            "the local model could not be loaded: {error:#}"
                        ))));
                        return;
                    }
                }
            }
            let Some(engine) = slot.as_mut() else { return };
            let mut emit = |text: &str| {
                sender
                    .blocking_send(Ok(ModelEvent::TextDelta(text.to_owned())))
                    .is_ok()
            };
            let cancelled = || sender.is_closed();
            match engine.generate(&request, &sampling, max_tokens, &mut emit, &cancelled) {
                Ok(generated) => {
                    let input = generated.prompt_tokens as u64;
                    let output = generated.tokens.len() as u64;
                    let mut usage = PromptUsage::tokens(input, output);
                    usage.model = Some(model_name);
                    let _ = sender.blocking_send(Ok(ModelEvent::Usage(usage)));
                    let reason = if generated.stopped { "stop" } else { "length" };
                    let _ = sender.blocking_send(Ok(ModelEvent::Finished(reason.to_owned())));
                }
                Err(error) => {
                    let _ = sender.blocking_send(Err(ProviderError::Stream(format!(
                        "the local model failed: {error:#}"
                    ))));
                }
            }
        });
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|item| (item, receiver))
        });
        Ok(Box::pin(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling(temperature: f64, top_p: f64) -> Sampling {
        Sampling {
            temperature,
            top_p,
            seed: 7,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            constrain: false,
        }
    }

    #[test]
    fn greedy_takes_the_largest_logit() {
        let mut rng = fastrand::Rng::with_seed(1);
        let mut logits = vec![0.1, 2.0, -1.0, 1.9];
        assert_eq!(sample(&mut logits, &[], &sampling(0.0, 1.0), &mut rng), 1);
    }

    #[test]
    fn sampling_is_reproducible_by_seed_and_spreads_by_temperature() {
        let draw = |seed: u64| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..200)
                .map(|_| {
                    sample(
                        &mut [1.0, 1.1, 0.9, 1.05],
                        &[],
                        &sampling(1.0, 1.0),
                        &mut rng,
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
        let seen: std::collections::HashSet<u32> = draw(3).into_iter().collect();
        assert_eq!(
            seen.len(),
            4,
            "near-equal logits are all drawn at temperature 1"
        );
    }

    #[test]
    fn only_a_long_blank_run_ends_an_answer() {
        let program = format!("const a = 1;\n\n{}log(a);\n", " ".repeat(40));
        assert!(blank_tail(&program) < BLANK_RUN);
        let stuck = format!("a.csv{}", " ".repeat(BLANK_RUN));
        assert_eq!(blank_tail(&stuck), BLANK_RUN);
    }

    #[test]
    fn the_configured_seed_moves_a_requests_seed() {
        let default = crate::config::DEFAULT_SEED;
        assert_eq!(
            mixed_seed(0x0301, default),
            0x0301,
            "the default leaves it as it is"
        );
        let moved: std::collections::HashSet<u64> = (1..4)
            .map(|configured| mixed_seed(0x0301, configured))
            .collect();
        assert_eq!(moved.len(), 3);
        assert!(!moved.contains(&0x0301));
        // Seeds of neighbouring steps and attempts do not land on each other's.
        assert!(!moved.contains(&0x0300) && !moved.contains(&0x0302));
    }

    #[test]
    fn a_small_top_p_keeps_only_the_most_likely_token() {
        let mut rng = fastrand::Rng::with_seed(5);
        for _ in 0..50 {
            let mut logits = vec![1.0, 3.0, 2.9, 0.0];
            assert_eq!(sample(&mut logits, &[], &sampling(1.0, 0.01), &mut rng), 1);
        }
    }

    #[test]
    fn the_repeat_penalty_demotes_recent_tokens() {
        let mut rng = fastrand::Rng::with_seed(5);
        let mut penalised = sampling(0.0, 1.0);
        penalised.repeat_penalty = 2.0;
        let mut logits = vec![0.5, 2.0, 1.5];
        assert_eq!(sample(&mut logits, &[1], &penalised, &mut rng), 2);
    }
}
