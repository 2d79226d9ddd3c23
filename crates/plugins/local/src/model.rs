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
    /// A weight in the format its steps run fastest in (see [`fast_format`]).
    fn new(tensor: QTensor) -> anyhow::Result<Self> {
        Self::wrap(fast_format(tensor)?)
    }

    /// A weight as it is.
    fn wrap(tensor: QTensor) -> anyhow::Result<Self> {
        let weight = Arc::new(tensor);
        Ok(Self {
            matmul: QMatMul::from_arc(weight.clone())?,
            weight,
        })
    }

    /// Prompt steps, whatever their length, multiply by the weights dequantised to f32 (a
    /// batched GEMM), so a prompt's numbers do not depend on how much of it was cached; single
    /// generated tokens use the 8-bit dot products.
    fn forward(&self, x: &Tensor, prompt: bool) -> candle_core::Result<Tensor> {
        if prompt {
            let weight = self.weight.dequantize(x.device())?;
            x.broadcast_matmul(&weight.t()?)
        } else {
            self.matmul.forward(x)
        }
    }
}

/// Several projections of the same input. When all of them end up as `Q8_0` they are stacked
/// into one matrix: one matrix product per step instead of several (each a round of the thread
/// pool and a quantisation of the input), and the result is split.
enum Projection {
    Fused { linear: Linear, sizes: Vec<usize> },
    Separate(Vec<Linear>),
}

impl Projection {
    fn new(parts: Vec<QTensor>) -> anyhow::Result<Self> {
        let parts = parts
            .into_iter()
            .map(fast_format)
            .collect::<anyhow::Result<Vec<_>>>()?;
        if parts.iter().any(|part| part.dtype() != GgmlDType::Q8_0) {
            return Ok(Self::Separate(
                parts
                    .into_iter()
                    .map(Linear::wrap)
                    .collect::<anyhow::Result<_>>()?,
            ));
        }
        let sizes = parts.iter().map(|part| part.shape().dims()[0]).collect();
        let values = parts
            .iter()
            .map(|part| part.dequantize(&Device::Cpu))
            .collect::<candle_core::Result<Vec<_>>>()?;
        let stacked = QTensor::quantize(&Tensor::cat(&values, 0)?, GgmlDType::Q8_0)?;
        Ok(Self::Fused {
            linear: Linear::wrap(stacked)?,
            sizes,
        })
    }

    fn forward(&self, x: &Tensor, prompt: bool) -> candle_core::Result<Vec<Tensor>> {
        match self {
            Self::Fused { linear, sizes } => {
                let all = linear.forward(x, prompt)?;
                let last = all.rank() - 1;
                let mut start = 0;
                let mut parts = Vec::with_capacity(sizes.len());
                for size in sizes {
                    parts.push(all.narrow(last, start, *size)?);
                    start += size;
                }
                Ok(parts)
            }
            Self::Separate(linears) => linears
                .iter()
                .map(|linear| linear.forward(x, prompt))
                .collect(),
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
    /// Query, key and value projections, one matrix when they can be fused.
    qkv: Projection,
    o: Linear,
    ffn_norm: Tensor,
    /// Gate and up projections of the feed-forward block.
    gate_up: Projection,
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
                qkv: Projection::new(vec![part("attn_q")?, part("attn_k")?, part("attn_v")?])?,
                o: Linear::new(part("attn_output")?)?,
                ffn_norm: part("ffn_norm")?.dequantize(&device)?,
                gate_up: Projection::new(vec![part("ffn_gate")?, part("ffn_up")?])?,
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
            let [gate, up] = <[Tensor; 2]>::try_from(layer.gate_up.forward(&normed, prompt)?)
                .map_err(|_| anyhow::anyhow!("the feed-forward projection has the wrong parts"))?;
            let mixed = layer
                .down
                .forward(&(candle_nn::ops::silu(&gate)? * up)?, prompt)?;
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
        let [q, k, v] = <[Tensor; 3]>::try_from(self.qkv.forward(x, prompt)?)
            .map_err(|_| anyhow::anyhow!("the attention projection has the wrong parts"))?;
        let heads = |projected: Tensor, count: usize| -> candle_core::Result<Tensor> {
            projected
                .reshape((batch, length, count, hyper.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = candle_nn::rotary_emb::rope_i(&heads(q, hyper.heads)?, cos, sin)?;
        let k = candle_nn::rotary_emb::rope_i(&heads(k, hyper.kv_heads)?, cos, sin)?;
        let v = heads(v, hyper.kv_heads)?;
        let (k, v) = match &self.cache {
            Some((cached_k, cached_v)) => (
                Tensor::cat(&[cached_k, &k], 2)?,
                Tensor::cat(&[cached_v, &v], 2)?,
            ),
            None => (k, v),
        };
        self.cache = Some((k.clone(), v.clone()));
        // Grouped-query attention without copying keys and values for every query head: the
        // `repeat` query heads that share a key/value head are stacked along the sequence
        // (`[b, kv, repeat * L, d]`, a free reshape of `[b, heads, L, d]`).
        let repeat = hyper.heads / hyper.kv_heads;
        let q = q.reshape((batch, hyper.kv_heads, repeat * length, hyper.head_dim))?;
        let scale = 1.0 / (hyper.head_dim as f64).sqrt();
        let scores = (q.matmul(&k.t()?)? * scale)?;
        let scores = match mask {
            Some(mask) => scores.broadcast_add(&Tensor::cat(&vec![mask; repeat], 0)?)?,
            None => scores,
        };
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let out = weights
            .matmul(&v)?
            .reshape((batch, hyper.heads, length, hyper.head_dim))?
            .transpose(1, 2)?
            .reshape((batch, length, hyper.heads * hyper.head_dim))?;
        Ok(self.o.forward(&out, prompt)?)
    }
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
