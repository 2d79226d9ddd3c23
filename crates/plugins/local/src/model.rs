//! A llama-architecture transformer over GGUF weights, on candle's CPU kernels.
//!
//! Two things make a 135M model pleasant on two cores:
//! - Weights in 4-bit formats without fast CPU kernels (`Q4_1` and friends) are re-quantised to
//!   `Q8_0` once at load: single-token steps then use the quicker 8-bit dot products.
//! - Many-token steps (prompt processing) multiply by the weights dequantised to `f32`, one
//!   matrix at a time, so the batched f32 GEMM does the work instead of row-by-row dot products.
//!
//! The key/value cache can be cut back to any length, so a request that shares a prefix with
//! the previous one (the same system prompt, the next code-mode iteration) only processes what
//! is new.

use std::io::{Read, Seek};
use std::sync::Arc;

use anyhow::{Context, bail};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle_core::{DType, Device, Module, Tensor};

/// Rows from which a matrix product goes through dequantised f32 weights. Every prompt step
/// takes that path (whatever its length), so a prompt's numbers do not depend on how much of it
/// was already cached; only single generated tokens use the 8-bit dot products.
const BATCHED_ROWS: usize = 2;
/// Prompt tokens processed per forward pass (bounds the attention matrices).
const CHUNK: usize = 256;

/// The shape of the network, from the GGUF metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Hyper {
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub embedding: usize,
    pub context: usize,
    pub vocab: usize,
    pub eps: f64,
    pub rope_base: f32,
}

fn metadata<'a>(
    content: &'a gguf_file::Content,
    key: &str,
) -> anyhow::Result<&'a gguf_file::Value> {
    content
        .metadata
        .get(key)
        .with_context(|| format!("the model file has no \"{key}\""))
}

fn number(content: &gguf_file::Content, key: &str) -> anyhow::Result<usize> {
    Ok(metadata(content, key)?.to_u32()? as usize)
}

impl Hyper {
    pub fn from_gguf(content: &gguf_file::Content) -> anyhow::Result<Self> {
        let architecture = metadata(content, "general.architecture")?
            .to_string()?
            .clone();
        if architecture != "llama" {
            bail!(
                "the model's architecture is \"{architecture}\"; the local provider runs llama-architecture \
                 GGUF models (SmolLM2, Llama, TinyLlama, …)"
            );
        }
        let heads = number(content, "llama.attention.head_count")?;
        let embedding = number(content, "llama.embedding_length")?;
        let kv_heads = number(content, "llama.attention.head_count_kv").unwrap_or(heads);
        let rope_base = metadata(content, "llama.rope.freq_base")
            .and_then(|value| Ok(value.to_f32()?))
            .unwrap_or(10_000.0);
        let eps = f64::from(metadata(content, "llama.attention.layer_norm_rms_epsilon")?.to_f32()?);
        let vocab = match metadata(content, "tokenizer.ggml.tokens")? {
            gguf_file::Value::Array(tokens) => tokens.len(),
            _ => bail!("tokenizer.ggml.tokens is not a list"),
        };
        if heads == 0 || kv_heads == 0 || embedding % heads != 0 || heads % kv_heads != 0 {
            bail!(
                "the model's attention shape is inconsistent ({heads} heads, {kv_heads} key/value heads, width {embedding})"
            );
        }
        Ok(Self {
            layers: number(content, "llama.block_count")?,
            heads,
            kv_heads,
            head_dim: embedding / heads,
            embedding,
            context: number(content, "llama.context_length")?,
            vocab,
            eps,
            rope_base,
        })
    }
}

/// A weight matrix `[out, in]`, kept quantised.
struct Linear {
    weight: Arc<QTensor>,
    matmul: QMatMul,
}

impl Linear {
    fn new(tensor: QTensor) -> anyhow::Result<Self> {
        let weight = Arc::new(fast_format(tensor)?);
        Ok(Self {
            matmul: QMatMul::from_arc(weight.clone())?,
            weight,
        })
    }

    /// `prompt` steps always multiply in f32; generated tokens use the quantised kernels.
    fn forward(&self, x: &Tensor, prompt: bool) -> candle_core::Result<Tensor> {
        let rows: usize = x.dims().iter().rev().skip(1).product();
        if prompt || rows >= BATCHED_ROWS {
            let weight = self.weight.dequantize(x.device())?;
            x.broadcast_matmul(&weight.t()?)
        } else {
            self.matmul.forward(x)
        }
    }
}

/// 4- and 5-bit block formats whose CPU dot products are slow become `Q8_0`; the rest stay.
fn fast_format(tensor: QTensor) -> anyhow::Result<QTensor> {
    let slow = matches!(
        tensor.dtype(),
        GgmlDType::Q4_0 | GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1
    );
    let columns = tensor.shape().dims().last().copied().unwrap_or(0);
    if !slow || columns % GgmlDType::Q8_0.block_size() != 0 {
        return Ok(tensor);
    }
    let values = tensor.dequantize(&Device::Cpu)?;
    Ok(QTensor::quantize(&values, GgmlDType::Q8_0)?)
}

struct Layer {
    attention_norm: Tensor,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    ffn_norm: Tensor,
    gate: Linear,
    up: Linear,
    down: Linear,
    cache: Option<(Tensor, Tensor)>,
}

/// The network with its key/value cache.
pub struct Model {
    pub hyper: Hyper,
    embedding: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    output: Linear,
    cos: Tensor,
    sin: Tensor,
    /// Tokens whose keys and values are in the cache, in order.
    cached: Vec<u32>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("hyper", &self.hyper)
            .field("cached", &self.cached.len())
            .finish_non_exhaustive()
    }
}

impl Model {
    pub fn from_gguf<R: Read + Seek>(
        content: &gguf_file::Content,
        reader: &mut R,
    ) -> anyhow::Result<Self> {
        let hyper = Hyper::from_gguf(content)?;
        let device = Device::Cpu;
        let mut tensor = |name: &str| {
            content
                .tensor(reader, name, &device)
                .with_context(|| format!("reading tensor {name}"))
        };
        let embedding_q = tensor("token_embd.weight")?;
        let embedding = embedding_q.dequantize(&device)?;
        let norm = tensor("output_norm.weight")?.dequantize(&device)?;
        let output = match tensor("output.weight") {
            Ok(output) => Linear::new(output)?,
            // Tied embeddings: the output projection is the embedding matrix.
            Err(_) => Linear::new(embedding_q)?,
        };
        let mut layers = Vec::with_capacity(hyper.layers);
        for index in 0..hyper.layers {
            let mut part = |name: &str| tensor(&format!("blk.{index}.{name}.weight"));
            layers.push(Layer {
                attention_norm: part("attn_norm")?.dequantize(&device)?,
                q: Linear::new(part("attn_q")?)?,
                k: Linear::new(part("attn_k")?)?,
                v: Linear::new(part("attn_v")?)?,
                o: Linear::new(part("attn_output")?)?,
                ffn_norm: part("ffn_norm")?.dequantize(&device)?,
                gate: Linear::new(part("ffn_gate")?)?,
                up: Linear::new(part("ffn_up")?)?,
                down: Linear::new(part("ffn_down")?)?,
                cache: None,
            });
        }
        let (cos, sin) = rope_tables(&hyper)?;
        Ok(Self {
            hyper,
            embedding,
            layers,
            norm,
            output,
            cos,
            sin,
            cached: Vec::new(),
        })
    }

    /// Feeds `tokens` (the whole context so far) and returns the logits for the next token.
    /// Only the part after the longest prefix already in the cache is processed; `keep_going`
    /// is asked between chunks and stops the work when it says no.
    pub fn prefill(
        &mut self,
        tokens: &[u32],
        keep_going: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<Option<Vec<f32>>> {
        if tokens.is_empty() {
            bail!("nothing to process: the prompt rendered to no tokens");
        }
        if tokens.len() >= self.hyper.context {
            bail!(
                "the prompt is {} tokens, more than this model's context of {} tokens",
                tokens.len(),
                self.hyper.context
            );
        }
        let mut common = self
            .cached
            .iter()
            .zip(tokens)
            .take_while(|(cached, token)| cached == token)
            .count();
        // At least one token must run to produce logits.
        common = common.min(tokens.len() - 1);
        self.truncate(common)?;
        let mut logits = None;
        for chunk in tokens[common..].chunks(CHUNK) {
            if !keep_going() {
                return Ok(None);
            }
            logits = Some(self.forward(chunk, true)?);
        }
        Ok(logits)
    }

    /// Feeds one generated token and returns the logits for the one after it.
    pub fn step(&mut self, token: u32) -> anyhow::Result<Vec<f32>> {
        if self.cached.len() + 1 >= self.hyper.context {
            bail!(
                "the answer reached this model's context of {} tokens",
                self.hyper.context
            );
        }
        self.forward(&[token], false)
    }

    /// Forgets the cache: the next request starts from scratch.
    pub fn clear_cache(&mut self) -> anyhow::Result<()> {
        self.truncate(0)
    }

    /// The tokens whose keys and values are cached.
    pub fn cached(&self) -> &[u32] {
        &self.cached
    }

    fn truncate(&mut self, length: usize) -> anyhow::Result<()> {
        if length == self.cached.len() {
            return Ok(());
        }
        for layer in &mut self.layers {
            layer.cache = match layer.cache.take() {
                Some((k, v)) if length > 0 => {
                    Some((k.narrow(2, 0, length)?, v.narrow(2, 0, length)?))
                }
                _ => None,
            };
        }
        self.cached.truncate(length);
        Ok(())
    }

    fn forward(&mut self, tokens: &[u32], prompt: bool) -> anyhow::Result<Vec<f32>> {
        let position = self.cached.len();
        let length = tokens.len();
        let hyper = self.hyper.clone();
        let ids = Tensor::new(tokens, &Device::Cpu)?;
        let mut x = self.embedding.index_select(&ids, 0)?.unsqueeze(0)?;
        let cos = self.cos.narrow(0, position, length)?;
        let sin = self.sin.narrow(0, position, length)?;
        let mask = if length > 1 {
            Some(causal_mask(length, position)?)
        } else {
            None
        };
        for layer in &mut self.layers {
            let normed = candle_nn::ops::rms_norm(&x, &layer.attention_norm, hyper.eps as f32)?;
            let attended = layer.attention(&normed, &cos, &sin, mask.as_ref(), &hyper, prompt)?;
            let x1 = (attended + &x)?;
            let normed = candle_nn::ops::rms_norm(&x1, &layer.ffn_norm, hyper.eps as f32)?;
            let gate = candle_nn::ops::silu(&layer.gate.forward(&normed, prompt)?)?;
            let mixed = layer
                .down
                .forward(&(gate * layer.up.forward(&normed, prompt)?)?, prompt)?;
            x = (mixed + x1)?;
        }
        self.cached.extend_from_slice(tokens);
        let last = x.narrow(1, length - 1, 1)?.contiguous()?;
        let last = candle_nn::ops::rms_norm(&last, &self.norm, hyper.eps as f32)?;
        let logits = self.output.forward(&last, prompt)?.flatten_all()?;
        Ok(logits.to_dtype(DType::F32)?.to_vec1()?)
    }
}

impl Layer {
    fn attention(
        &mut self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        mask: Option<&Tensor>,
        hyper: &Hyper,
        prompt: bool,
    ) -> anyhow::Result<Tensor> {
        let (batch, length, _) = x.dims3()?;
        let heads = |linear: &Linear, count: usize| -> candle_core::Result<Tensor> {
            linear
                .forward(x, prompt)?
                .reshape((batch, length, count, hyper.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = candle_nn::rotary_emb::rope_i(&heads(&self.q, hyper.heads)?, cos, sin)?;
        let k = candle_nn::rotary_emb::rope_i(&heads(&self.k, hyper.kv_heads)?, cos, sin)?;
        let v = heads(&self.v, hyper.kv_heads)?;
        let (k, v) = match &self.cache {
            Some((cached_k, cached_v)) => (
                Tensor::cat(&[cached_k, &k], 2)?,
                Tensor::cat(&[cached_v, &v], 2)?,
            ),
            None => (k, v),
        };
        self.cache = Some((k.clone(), v.clone()));
        let repeat = hyper.heads / hyper.kv_heads;
        let k = repeat_heads(&k, repeat)?;
        let v = repeat_heads(&v, repeat)?;
        let scale = 1.0 / (hyper.head_dim as f64).sqrt();
        let scores = (q.matmul(&k.t()?)? * scale)?;
        let scores = match mask {
            Some(mask) => scores.broadcast_add(mask)?,
            None => scores,
        };
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let out = weights.matmul(&v)?.transpose(1, 2)?.reshape((
            batch,
            length,
            hyper.heads * hyper.head_dim,
        ))?;
        Ok(self.o.forward(&out, prompt)?)
    }
}

/// `[batch, kv_heads, t, d]` to `[batch, kv_heads * repeat, t, d]`, each key/value head
/// serving `repeat` query heads in a row.
fn repeat_heads(x: &Tensor, repeat: usize) -> candle_core::Result<Tensor> {
    if repeat == 1 {
        return x.contiguous();
    }
    let (batch, heads, length, dim) = x.dims4()?;
    Tensor::cat(&vec![x; repeat], 2)?.reshape((batch, heads * repeat, length, dim))
}

/// New tokens `i` see cached positions and themselves up to `position + i`.
fn causal_mask(length: usize, position: usize) -> candle_core::Result<Tensor> {
    let total = position + length;
    let values: Vec<f32> = (0..length)
        .flat_map(|row| {
            (0..total).map(move |column| {
                if column > position + row {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
        })
        .collect();
    Tensor::from_vec(values, (length, total), &Device::Cpu)
}

fn rope_tables(hyper: &Hyper) -> anyhow::Result<(Tensor, Tensor)> {
    let half = hyper.head_dim / 2;
    let inverse: Vec<f32> = (0..half)
        .map(|index| {
            1.0 / hyper
                .rope_base
                .powf(2.0 * index as f32 / hyper.head_dim as f32)
        })
        .collect();
    let inverse = Tensor::from_vec(inverse, (1, half), &Device::Cpu)?;
    let positions = Tensor::arange(0u32, hyper.context as u32, &Device::Cpu)?
        .to_dtype(DType::F32)?
        .reshape((hyper.context, 1))?;
    let angles = positions.broadcast_mul(&inverse)?;
    Ok((angles.cos()?, angles.sin()?))
}
