//! The tokenizer and chat template, both built from the GGUF file's own metadata, so a model
//! file is all the local provider needs.

use std::collections::HashSet;

use agentic_core::{ChatMessage, ChatRole, ToolSpec};
use anyhow::{Context, bail};
use candle_core::quantized::gguf_file;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer};

/// ChatML, for models that ship no template.
const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + \
                      message['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt \
                      %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// The split pattern of Llama 3 style byte-level BPE models (`llama-bpe`).
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen 2 splits digits one by one.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

pub struct ChatTokenizer {
    tokenizer: Tokenizer,
    /// The chat template, parsed once.
    templates: minijinja::Environment<'static>,
    bos: Option<String>,
    eos: String,
    /// The template renders `tools` and structured tool calls (Qwen 2.5's, Llama 3.1's, …).
    structured_tools: bool,
    /// Tokens that end an answer: end of sequence and end of turn.
    stops: HashSet<u32>,
}

impl std::fmt::Debug for ChatTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTokenizer")
            .field("eos", &self.eos)
            .finish_non_exhaustive()
    }
}

fn strings(content: &gguf_file::Content, key: &str) -> anyhow::Result<Vec<String>> {
    match content.metadata.get(key) {
        Some(gguf_file::Value::Array(values)) => values
            .iter()
            .map(|value| Ok(value.to_string()?.clone()))
            .collect(),
        Some(_) => bail!("\"{key}\" in the model file is not a list of strings"),
        None => bail!("the model file has no \"{key}\""),
    }
}

fn text(content: &gguf_file::Content, key: &str) -> Option<String> {
    content
        .metadata
        .get(key)
        .and_then(|value| value.to_string().ok())
        .cloned()
}

fn id(content: &gguf_file::Content, key: &str) -> Option<u32> {
    content
        .metadata
        .get(key)
        .and_then(|value| value.to_u32().ok())
}

fn error(error: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{error}")
}

impl ChatTokenizer {
    pub fn from_gguf(content: &gguf_file::Content) -> anyhow::Result<Self> {
        let kind = text(content, "tokenizer.ggml.model").unwrap_or_default();
        if kind != "gpt2" {
            bail!(
                "the model's tokenizer is \"{kind}\"; the local provider reads byte-level BPE \
                 (\"gpt2\") tokenizers. Run this model in llama.cpp's server and point \
                 OPENAI_BASE_URL at it instead"
            );
        }
        let tokens = strings(content, "tokenizer.ggml.tokens")?;
        let merges = strings(content, "tokenizer.ggml.merges")?
            .into_iter()
            .map(|merge| {
                merge
                    .split_once(' ')
                    .map(|(left, right)| (left.to_owned(), right.to_owned()))
                    .with_context(|| format!("malformed merge \"{merge}\" in the model file"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let types: Vec<i32> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(gguf_file::Value::Array(values)) => values
                .iter()
                .map(|value| value.to_i32().unwrap_or(1))
                .collect(),
            _ => vec![1; tokens.len()],
        };
        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(index, token)| (token.clone(), index as u32))
            .collect();
        let model = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(error)?;
        let mut tokenizer = Tokenizer::new(model);
        let pre = text(content, "tokenizer.ggml.pre").unwrap_or_else(|| "default".into());
        tokenizer.with_pre_tokenizer(Some(pre_tokenizer(&pre)?));
        tokenizer.with_decoder(Some(ByteLevel::default()));
        // Control (3) and user-defined (4) tokens are matched whole, never split.
        let specials: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, kind)| matches!(kind, 3 | 4))
            .map(|(token, _)| AddedToken::from(token.clone(), true))
            .collect();
        tokenizer.add_special_tokens(&specials);

        let name = |key: &str| id(content, key).and_then(|id| tokens.get(id as usize).cloned());
        let eos = name("tokenizer.ggml.eos_token_id")
            .context("the model file names no end-of-sequence token")?;
        let bos = name("tokenizer.ggml.bos_token_id");
        let mut stops: HashSet<u32> = HashSet::new();
        for key in ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"] {
            stops.extend(id(content, key));
        }
        for end in ["<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>"] {
            if let Some(index) = tokens.iter().position(|token| token == end) {
                stops.insert(index as u32);
            }
        }
        let template = text(content, "tokenizer.chat_template").unwrap_or_else(|| CHATML.into());
        let structured_tools = template.contains("tools") && template.contains("tool_calls");
        let tokenizer = Self {
            tokenizer,
            structured_tools,
            templates: chat_templates(template)?,
            bos,
            eos,
            stops,
        };
        // Fail at load, not at the first prompt, when the template cannot be used.
        tokenizer.render(&[ChatMessage::user("hello")], &[])?;
        Ok(tokenizer)
    }

    pub fn encode(&self, text: &str) -> anyhow::Result<Vec<u32>> {
        Ok(self
            .tokenizer
            .encode(text, false)
            .map_err(error)?
            .get_ids()
            .to_vec())
    }

    /// Text of `ids`, special tokens left out.
    pub fn decode(&self, ids: &[u32]) -> anyhow::Result<String> {
        self.tokenizer.decode(ids, true).map_err(error)
    }

    pub fn is_stop(&self, id: u32) -> bool {
        self.stops.contains(&id)
    }

    /// The tokens that end an answer, in id order.
    pub fn stops(&self) -> Vec<u32> {
        let mut stops: Vec<u32> = self.stops.iter().copied().collect();
        stops.sort_unstable();
        stops
    }

    /// The conversation as the model was trained to read it, ending where its answer starts.
    /// Tools are offered through the template when it knows how (the model then answers with
    /// its own call syntax, e.g. `<tool_call>{…}</tool_call>`, which classic mode reads).
    pub fn render(&self, messages: &[ChatMessage], tools: &[ToolSpec]) -> anyhow::Result<String> {
        let structured = self.structured_tools;
        let messages: Vec<serde_json::Value> = messages
            .iter()
            .map(|message| template_message(message, structured))
            .collect();
        let tools: Option<Vec<serde_json::Value>> = (structured && !tools.is_empty()).then(|| {
            tools
                .iter()
                .map(|tool| {
                    serde_json::json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.parameters.as_ref(),
                        }
                    })
                })
                .collect()
        });
        let rendered = self
            .templates
            .get_template("chat")
            .map_err(error)?
            .render(minijinja::context! {
                messages => messages,
                tools => tools,
                add_generation_prompt => true,
                bos_token => self.bos.clone().unwrap_or_default(),
                eos_token => self.eos.clone(),
            })
            .context("the model's chat template failed")?;
        Ok(rendered)
    }
}

/// An environment holding the model's chat template as `chat`, with the Python-style methods
/// and the `raise_exception` function templates use.
fn chat_templates(template: String) -> anyhow::Result<minijinja::Environment<'static>> {
    let mut environment = minijinja::Environment::new();
    minijinja_contrib::add_to_environment(&mut environment);
    environment.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    environment.add_function(
        "raise_exception",
        |message: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                message,
            ))
        },
    );
    environment
        .add_template_owned("chat", template)
        .context("the model's chat template does not parse")?;
    Ok(environment)
}

/// A message in the shape chat templates expect. With `structured`, tool calls and results go
/// as `tool_calls` and `tool` messages; otherwise tool traffic is written out as text, for
/// templates (and small models) that know no tool calls.
fn template_message(message: &ChatMessage, structured: bool) -> serde_json::Value {
    if structured {
        match message.role {
            ChatRole::Assistant if !message.tool_calls.is_empty() => {
                let calls: Vec<serde_json::Value> = message
                    .tool_calls
                    .iter()
                    .map(|call| {
                        let arguments = serde_json::from_str::<serde_json::Value>(&call.arguments)
                            .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
                        serde_json::json!({
                            "id": call.id,
                            "type": "function",
                            "function": { "name": call.name, "arguments": arguments },
                        })
                    })
                    .collect();
                return serde_json::json!({
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": calls,
                });
            }
            ChatRole::Tool => {
                return serde_json::json!({ "role": "tool", "content": message.content });
            }
            _ => {}
        }
    }
    let (role, content) = match message.role {
        ChatRole::System => ("system", message.content.clone()),
        ChatRole::User => ("user", message.content.clone()),
        ChatRole::Assistant => {
            let mut content = message.content.clone();
            for call in &message.tool_calls {
                if !content.is_empty() {
                    content.push('\n');
                }
                content.push_str(&format!("Called {} with {}", call.name, call.arguments));
            }
            ("assistant", content)
        }
        ChatRole::Tool => ("user", format!("Tool result:\n{}", message.content)),
    };
    serde_json::json!({ "role": role, "content": content })
}

fn pre_tokenizer(kind: &str) -> anyhow::Result<PreTokenizerWrapper> {
    let byte_level = ByteLevel::new(false, true, true);
    let split = |pattern: &str| -> anyhow::Result<PreTokenizerWrapper> {
        let split = Split::new(
            SplitPattern::Regex(pattern.to_owned()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(error)?;
        Ok(Sequence::new(vec![
            split.into(),
            ByteLevel::new(false, true, false).into(),
        ])
        .into())
    };
    match kind {
        // StarCoder's tokenizer, which SmolLM uses: digits one by one, then GPT-2's rules.
        "smollm" | "starcoder" | "refact" => {
            Ok(Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into())
        }
        "gpt2" | "default" | "gpt-2" => Ok(byte_level.into()),
        "llama-bpe" | "llama3" | "smaug-bpe" => split(LLAMA3_SPLIT),
        "qwen2" => split(QWEN2_SPLIT),
        other => bail!(
            "the model's pre-tokenizer \"{other}\" is not one the local provider knows \
             (smollm, starcoder, gpt2, llama-bpe, qwen2)"
        ),
    }
}
