//! A llama-architecture transformer over GGUF weights.
//!
//! Every weight product runs on our own loops over the quantised blocks ([`crate::kernels`]:
//! `Q4_1` and the k-quants `Q4_K`/`Q6_K` as shipped, `Q8_0`), on plain vectors:
//! - A generated token is one matrix × vector product per weight, with a key/value cache that
//!   grows in place. Every weight is read once per token, so these loops and the bytes per
//!   weight set the speed.
//! - Prompt tokens go as batches through the same loops, four tokens per pass over a row, so a
//!   weight is unpacked once for several tokens. A token's numbers are the same whether it came
//!   in a batch, alone, or from the cache. Attention over a prompt batch runs on candle.
//!
//! Formats without a loop of ours (f16, other k-quants, …) use candle's kernels.
//!
//! The key/value cache can be cut back to any length, so a request that shares a prefix with
//! the previous one (the same system prompt, the next code-mode iteration) only processes what
//! is new.

use std::io::{Read, Seek};
use std::sync::Arc;

use anyhow::{Context, bail};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle_core::{Device, Module, Tensor};
use rayon::prelude::*;

use crate::kernels::{self, QuantMatrix, QuantVector};

/// Prompt tokens processed per forward pass (bounds the attention matrices).
const CHUNK: usize = 256;

/// From this many cached positions, a generated token's attention is split in two ranges per
/// key/value head (more tasks than the three or so heads, for the pool's threads).
const SPLIT_ATTENTION_FROM: usize = 128;

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
    /// Rotary embedding on the two halves of each head (GPT-NeoX style, as Qwen 2 uses)
    /// instead of on consecutive pairs (llama's GGUF layout).
    pub neox_rope: bool,
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
        if architecture != "llama" && architecture != "qwen2" {
            bail!(
                "the model's architecture is \"{architecture}\"; the local provider runs llama- and \
                 qwen2-architecture GGUF models (SmolLM2, Llama, TinyLlama, Qwen 2 and 2.5, …)"
            );
        }
        let key = |name: &str| format!("{architecture}.{name}");
        let heads = number(content, &key("attention.head_count"))?;
        let embedding = number(content, &key("embedding_length"))?;
        let kv_heads = number(content, &key("attention.head_count_kv")).unwrap_or(heads);
        let rope_base = metadata(content, &key("rope.freq_base"))
            .and_then(|value| Ok(value.to_f32()?))
            .unwrap_or(10_000.0);
        let eps = f64::from(metadata(content, &key("attention.layer_norm_rms_epsilon"))?.to_f32()?);
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
            layers: number(content, &key("block_count"))?,
            heads,
            kv_heads,
            head_dim: embedding / heads,
            embedding,
            context: number(content, &key("context_length"))?,
            vocab,
            eps,
            rope_base,
            neox_rope: architecture == "qwen2",
        })
    }
}

/// A weight matrix `[out, in]`.
enum Weight {
    /// In one of our kernels' formats (see [`crate::kernels`]).
    Kernel(QuantMatrix),
    /// Any other format (k-quants, f16, …): candle's own product and dequantisation.
    Candle {
        weight: Arc<QTensor>,
        matmul: QMatMul,
    },
}

impl Weight {
    fn new(tensor: QTensor) -> anyhow::Result<Self> {
        let (rows, cols) = tensor.shape().dims2()?;
        let kernel = match tensor.dtype() {
            GgmlDType::Q4_1 => QuantMatrix::from_q4_1(rows, cols, &tensor.data()?),
            GgmlDType::Q4_0 => QuantMatrix::from_q4_0(rows, cols, &tensor.data()?),
            GgmlDType::Q8_0 => QuantMatrix::from_q8_0(rows, cols, &tensor.data()?),
            GgmlDType::Q4K => QuantMatrix::from_q4_k(rows, cols, &tensor.data()?),
            GgmlDType::Q6K => QuantMatrix::from_q6_k(rows, cols, &tensor.data()?),
            // 5-bit blocks have no loop of their own; 8 bits hold them with little loss.
            GgmlDType::Q5_0 | GgmlDType::Q5_1 => {
                let values = tensor.dequantize(&Device::Cpu)?.flatten_all()?.to_vec1()?;
                QuantMatrix::quantize_q8_0(rows, cols, &values)
            }
            _ => None,
        };
        Ok(match kernel {
            Some(matrix) => Self::Kernel(matrix),
            None => {
                let weight = Arc::new(tensor);
                Self::Candle {
                    matmul: QMatMul::from_arc(weight.clone())?,
                    weight,
                }
            }
        })
    }

    fn rows(&self) -> usize {
        match self {
            Self::Kernel(matrix) => matrix.rows(),
            Self::Candle { weight, .. } => weight.shape().dims()[0],
        }
    }

    fn cols(&self) -> usize {
        match self {
            Self::Kernel(matrix) => matrix.cols(),
            Self::Candle { weight, .. } => weight.shape().dims().get(1).copied().unwrap_or(0),
        }
    }

    /// Fails unless the matrix is `[rows, cols]`: a model file whose tensors disagree with its
    /// own metadata is refused at load instead of failing in the middle of a step.
    fn expect(&self, name: &str, rows: usize, cols: usize) -> anyhow::Result<()> {
        if self.rows() != rows || self.cols() != cols {
            bail!(
                "the model file's {name} is [{}, {}], not [{rows}, {cols}] as its metadata says",
                self.rows(),
                self.cols()
            );
        }
        Ok(())
    }

    /// A prompt's tokens (`[1, L, cols]`) times the weights. Our formats run the batched
    /// product of the quantised loops, so each token gets the numbers it would get as a
    /// generated token; candle's formats go through its own quantised product.
    fn forward_prompt(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Self::Kernel(matrix) => {
                let (batch, length, _) = x.dims3()?;
                let inputs: Vec<f32> = x.flatten_all()?.to_vec1()?;
                let mut out = vec![0.0; batch * length * matrix.rows()];
                matrix.matmul(&inputs, &mut out);
                Tensor::from_vec(out, (batch, length, matrix.rows()), &Device::Cpu)
            }
            Self::Candle { matmul, .. } => matmul.forward(x),
        }
    }

    /// `out = self × x` for one token (`x` is quantised into `scratch` when it is needed).
    fn matvec(&self, x: &[f32], scratch: &mut QuantVector, out: &mut [f32]) -> anyhow::Result<()> {
        match self {
            Self::Kernel(matrix) => {
                matrix.quantize_input(x, scratch);
                matrix.matvec(scratch, out);
            }
            Self::Candle { matmul, .. } => {
                let input = Tensor::from_slice(x, (1, x.len()), &Device::Cpu)?;
                let product: Vec<f32> = matmul.forward(&input)?.flatten_all()?.to_vec1()?;
                out.copy_from_slice(&product);
            }
        }
        Ok(())
    }
}

/// Several projections of the same input. When they share a kernel format they are stacked
/// into one matrix: one product per step instead of several, and the result is split.
struct Projection {
    /// One stacked matrix, or one per part.
    weights: Vec<Weight>,
    /// The rows of each part.
    sizes: Vec<usize>,
}

impl Projection {
    fn new(parts: Vec<QTensor>) -> anyhow::Result<Self> {
        let weights = parts
            .into_iter()
            .map(Weight::new)
            .collect::<anyhow::Result<Vec<_>>>()?;
        let sizes = weights.iter().map(Weight::rows).collect();
        let matrices: Option<Vec<QuantMatrix>> = weights
            .iter()
            .map(|weight| match weight {
                Weight::Kernel(matrix) => Some(matrix.clone()),
                Weight::Candle { .. } => None,
            })
            .collect();
        let weights = match matrices.as_deref().and_then(QuantMatrix::stack) {
            Some(stacked) => vec![Weight::Kernel(stacked)],
            None => weights,
        };
        Ok(Self { weights, sizes })
    }

    fn rows(&self) -> usize {
        self.sizes.iter().sum()
    }

    fn forward_prompt(&self, x: &Tensor) -> candle_core::Result<Vec<Tensor>> {
        let outputs = self
            .weights
            .iter()
            .map(|weight| weight.forward_prompt(x))
            .collect::<candle_core::Result<Vec<_>>>()?;
        if outputs.len() == self.sizes.len() {
            return Ok(outputs);
        }
        let all = Tensor::cat(&outputs, x.rank() - 1)?;
        let last = all.rank() - 1;
        let mut start = 0;
        let mut parts = Vec::with_capacity(self.sizes.len());
        for size in &self.sizes {
            parts.push(all.narrow(last, start, *size)?);
            start += size;
        }
        Ok(parts)
    }

    /// All parts' outputs, one after the other, in `out`.
    fn matvec(&self, x: &[f32], scratch: &mut QuantVector, out: &mut [f32]) -> anyhow::Result<()> {
        let mut start = 0;
        for weight in &self.weights {
            let rows = weight.rows();
            weight.matvec(x, scratch, &mut out[start..start + rows])?;
            start += rows;
        }
        Ok(())
    }
}

struct Layer {
    attention_norm: Vec<f32>,
    /// Query, key and value projections, one matrix when they can be fused.
    qkv: Projection,
    /// Biases added to the query, key and value projections, one after the other (Qwen 2).
    qkv_bias: Option<Vec<f32>>,
    o: Weight,
    ffn_norm: Vec<f32>,
    /// Gate and up projections of the feed-forward block.
    gate_up: Projection,
    down: Weight,
    /// Cached keys and values, `[position][kv_head][head_dim]`, grown in place.
    keys: Vec<f32>,
    values: Vec<f32>,
}

/// Buffers of a single-token step, kept between steps.
#[derive(Default)]
struct Scratch {
    x: Vec<f32>,
    normed: Vec<f32>,
    qkv: Vec<f32>,
    attended: Vec<f32>,
    projected: Vec<f32>,
    gate_up: Vec<f32>,
    activated: Vec<f32>,
    logits: Vec<f32>,
    quantized: QuantVector,
}

/// The network with its key/value cache.
pub struct Model {
    pub hyper: Hyper,
    /// Token embeddings; also the output projection when the model ties them.
    embedding: Arc<Weight>,
    /// The embeddings as `f32`, kept only when `embedding` has no cheap row lookup.
    embedding_table: Option<Tensor>,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    output: Arc<Weight>,
    cos: Vec<f32>,
    sin: Vec<f32>,
    /// Tokens whose keys and values are in the cache, in order.
    cached: Vec<u32>,
    scratch: Scratch,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("hyper", &self.hyper)
            .field("cached", &self.cached.len())
            .finish_non_exhaustive()
    }
}

fn vector(tensor: QTensor) -> anyhow::Result<Vec<f32>> {
    Ok(tensor.dequantize(&Device::Cpu)?.flatten_all()?.to_vec1()?)
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
        let embedding = Arc::new(Weight::new(tensor("token_embd.weight")?)?);
        let embedding_table = match embedding.as_ref() {
            Weight::Kernel(_) => None,
            Weight::Candle { weight, .. } => Some(weight.dequantize(&device)?),
        };
        let norm = vector(tensor("output_norm.weight")?)?;
        let output = match tensor("output.weight") {
            Ok(output) => Arc::new(Weight::new(output)?),
            // Tied embeddings: the output projection is the embedding matrix.
            Err(_) => embedding.clone(),
        };
        let mut layers = Vec::with_capacity(hyper.layers);
        for index in 0..hyper.layers {
            let qkv_bias = match tensor(&format!("blk.{index}.attn_q.bias")) {
                Ok(q) => {
                    let mut bias = vector(q)?;
                    bias.extend(vector(tensor(&format!("blk.{index}.attn_k.bias"))?)?);
                    bias.extend(vector(tensor(&format!("blk.{index}.attn_v.bias"))?)?);
                    Some(bias)
                }
                Err(_) => None,
            };
            let mut part = |name: &str| tensor(&format!("blk.{index}.{name}.weight"));
            layers.push(Layer {
                attention_norm: vector(part("attn_norm")?)?,
                qkv: Projection::new(vec![part("attn_q")?, part("attn_k")?, part("attn_v")?])?,
                qkv_bias,
                o: Weight::new(part("attn_output")?)?,
                ffn_norm: vector(part("ffn_norm")?)?,
                gate_up: Projection::new(vec![part("ffn_gate")?, part("ffn_up")?])?,
                down: Weight::new(part("ffn_down")?)?,
                keys: Vec::new(),
                values: Vec::new(),
            });
        }
        let attention_width = hyper.heads * hyper.head_dim;
        let key_width = hyper.kv_heads * hyper.head_dim;
        embedding.expect("token_embd", hyper.vocab, hyper.embedding)?;
        output.expect("output", hyper.vocab, hyper.embedding)?;
        for (index, layer) in layers.iter().enumerate() {
            let name = |part: &str| format!("blk.{index}.{part}");
            let sizes = |projection: &Projection| -> Vec<(usize, usize)> {
                projection
                    .weights
                    .iter()
                    .map(|weight| (weight.rows(), weight.cols()))
                    .collect()
            };
            let qkv_ok = layer.qkv.sizes == [attention_width, key_width, key_width]
                && sizes(&layer.qkv)
                    .iter()
                    .all(|(_, cols)| *cols == hyper.embedding);
            let ffn = layer.gate_up.sizes.first().copied().unwrap_or(0);
            let gate_up_ok = layer.gate_up.sizes == [ffn, ffn]
                && sizes(&layer.gate_up)
                    .iter()
                    .all(|(_, cols)| *cols == hyper.embedding);
            let bias_ok = layer
                .qkv_bias
                .as_ref()
                .is_none_or(|bias| bias.len() == attention_width + 2 * key_width);
            if !qkv_ok || !gate_up_ok || !bias_ok {
                bail!(
                    "the model file's {} projections disagree with its metadata",
                    name(if qkv_ok { "ffn" } else { "attn" })
                );
            }
            layer
                .o
                .expect(&name("attn_output"), hyper.embedding, attention_width)?;
            layer.down.expect(&name("ffn_down"), hyper.embedding, ffn)?;
            for (part, norm) in [
                ("attn_norm", &layer.attention_norm),
                ("ffn_norm", &layer.ffn_norm),
            ] {
                if norm.len() != hyper.embedding {
                    bail!(
                        "the model file's {} has {} values, not {}",
                        name(part),
                        norm.len(),
                        hyper.embedding
                    );
                }
            }
        }
        if norm.len() != hyper.embedding {
            bail!(
                "the model file's output_norm has {} values, not {}",
                norm.len(),
                hyper.embedding
            );
        }
        let (cos, sin) = rope_tables(&hyper);
        Ok(Self {
            hyper,
            embedding,
            embedding_table,
            layers,
            norm,
            output,
            cos,
            sin,
            cached: Vec::new(),
            scratch: Scratch::default(),
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
        self.truncate(common);
        let mut last = None;
        for chunk in tokens[common..].chunks(CHUNK) {
            if !keep_going() {
                return Ok(None);
            }
            last = Some(self.forward_prompt(chunk)?);
        }
        let Some(hidden) = last else {
            return Ok(None);
        };
        Ok(Some(self.logits(&hidden)?))
    }

    /// Feeds one generated token and returns the logits for the one after it.
    pub fn step(&mut self, token: u32) -> anyhow::Result<Vec<f32>> {
        if self.cached.len() + 1 >= self.hyper.context {
            bail!(
                "the answer reached this model's context of {} tokens",
                self.hyper.context
            );
        }
        let hidden = self.forward_step(token)?;
        self.logits(&hidden)
    }

    /// Forgets the cache: the next request starts from scratch.
    pub fn clear_cache(&mut self) -> anyhow::Result<()> {
        self.truncate(0);
        Ok(())
    }

    /// The tokens whose keys and values are cached.
    pub fn cached(&self) -> &[u32] {
        &self.cached
    }

    fn truncate(&mut self, length: usize) {
        let width = self.hyper.kv_heads * self.hyper.head_dim;
        for layer in &mut self.layers {
            layer.keys.truncate(length * width);
            layer.values.truncate(length * width);
        }
        self.cached.truncate(length);
    }

    fn embed(&self, token: u32, out: &mut [f32]) -> anyhow::Result<()> {
        let row = token as usize;
        if row >= self.hyper.vocab {
            bail!("token {token} is outside the vocabulary");
        }
        match (self.embedding.as_ref(), &self.embedding_table) {
            (Weight::Kernel(matrix), _) => matrix.row_into(row, out),
            (_, Some(table)) => out.copy_from_slice(&table.get(row)?.to_vec1::<f32>()?),
            (Weight::Candle { .. }, None) => bail!("the embedding table is missing"),
        }
        Ok(())
    }

    /// The final norm and output projection of one hidden state.
    fn logits(&mut self, hidden: &[f32]) -> anyhow::Result<Vec<f32>> {
        let scratch = &mut self.scratch;
        scratch.normed.resize(hidden.len(), 0.0);
        rms_norm(hidden, &self.norm, self.hyper.eps, &mut scratch.normed);
        scratch.logits.resize(self.output.rows(), 0.0);
        self.output
            .matvec(&scratch.normed, &mut scratch.quantized, &mut scratch.logits)?;
        Ok(scratch.logits.clone())
    }

    /// Runs prompt tokens as one batch and returns the last token's hidden state.
    fn forward_prompt(&mut self, tokens: &[u32]) -> anyhow::Result<Vec<f32>> {
        let position = self.cached.len();
        let length = tokens.len();
        let width = self.hyper.embedding;
        let mut rows = vec![0.0; length * width];
        for (token, row) in tokens.iter().zip(rows.chunks_exact_mut(width)) {
            self.embed(*token, row)?;
        }
        let mut x = Tensor::from_vec(rows, (1, length, width), &Device::Cpu)?;
        let half = self.hyper.head_dim / 2;
        let table = |values: &[f32]| {
            Tensor::from_slice(
                &values[position * half..(position + length) * half],
                (length, half),
                &Device::Cpu,
            )
        };
        let (cos, sin) = (table(&self.cos)?, table(&self.sin)?);
        let mask = if length > 1 {
            Some(causal_mask(length, position)?)
        } else {
            None
        };
        let hyper = &self.hyper;
        for layer in &mut self.layers {
            let norm = Tensor::from_slice(&layer.attention_norm, width, &Device::Cpu)?;
            let normed = candle_nn::ops::rms_norm(&x, &norm, hyper.eps as f32)?;
            let attended = layer.attention_prompt(&normed, &cos, &sin, mask.as_ref(), hyper)?;
            let x1 = (attended + &x)?;
            let norm = Tensor::from_slice(&layer.ffn_norm, width, &Device::Cpu)?;
            let normed = candle_nn::ops::rms_norm(&x1, &norm, hyper.eps as f32)?;
            let [gate, up] = <[Tensor; 2]>::try_from(layer.gate_up.forward_prompt(&normed)?)
                .map_err(|_| anyhow::anyhow!("the feed-forward projection has the wrong parts"))?;
            let mixed = layer
                .down
                .forward_prompt(&(candle_nn::ops::silu(&gate)? * up)?)?;
            x = (mixed + x1)?;
        }
        self.cached.extend_from_slice(tokens);
        Ok(x.narrow(1, length - 1, 1)?.flatten_all()?.to_vec1()?)
    }

    /// Runs one token through the network on plain vectors and returns its hidden state.
    fn forward_step(&mut self, token: u32) -> anyhow::Result<Vec<f32>> {
        let hyper = self.hyper.clone();
        let position = self.cached.len();
        let mut scratch = std::mem::take(&mut self.scratch);
        let width = hyper.embedding;
        scratch.x.resize(width, 0.0);
        self.embed(token, &mut scratch.x)?;
        let half = hyper.head_dim / 2;
        let cos = &self.cos[position * half..(position + 1) * half];
        let sin = &self.sin[position * half..(position + 1) * half];
        let result = (|| -> anyhow::Result<()> {
            let Scratch {
                x,
                normed,
                qkv,
                attended,
                projected,
                gate_up,
                activated,
                quantized,
                ..
            } = &mut scratch;
            normed.resize(width, 0.0);
            projected.resize(width, 0.0);
            attended.resize(hyper.heads * hyper.head_dim, 0.0);
            for layer in &mut self.layers {
                rms_norm(x, &layer.attention_norm, hyper.eps, normed);
                qkv.resize(layer.qkv.rows(), 0.0);
                layer.qkv.matvec(normed, quantized, qkv)?;
                if let Some(bias) = &layer.qkv_bias {
                    for (value, bias) in qkv.iter_mut().zip(bias) {
                        *value += bias;
                    }
                }
                layer.attention_step(qkv, cos, sin, &hyper, attended)?;
                layer.o.matvec(attended, quantized, projected)?;
                for (x, projected) in x.iter_mut().zip(projected.iter()) {
                    *x += projected;
                }
                rms_norm(x, &layer.ffn_norm, hyper.eps, normed);
                gate_up.resize(layer.gate_up.rows(), 0.0);
                layer.gate_up.matvec(normed, quantized, gate_up)?;
                let (gate, up) = gate_up.split_at(gate_up.len() / 2);
                activated.clear();
                activated.extend(
                    gate.iter()
                        .zip(up)
                        .map(|(gate, up)| gate / (1.0 + (-gate).exp()) * up),
                );
                layer.down.matvec(activated, quantized, projected)?;
                for (x, projected) in x.iter_mut().zip(projected.iter()) {
                    *x += projected;
                }
            }
            Ok(())
        })();
        let hidden = scratch.x.clone();
        self.scratch = scratch;
        result?;
        self.cached.push(token);
        Ok(hidden)
    }
}

impl Layer {
    fn attention_prompt(
        &mut self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        mask: Option<&Tensor>,
        hyper: &Hyper,
    ) -> anyhow::Result<Tensor> {
        let (batch, length, _) = x.dims3()?;
        let [q, k, v] = <[Tensor; 3]>::try_from(self.qkv.forward_prompt(x)?)
            .map_err(|_| anyhow::anyhow!("the attention projection has the wrong parts"))?;
        let (q, k, v) = match &self.qkv_bias {
            Some(bias) => {
                let queries = hyper.heads * hyper.head_dim;
                let keys = hyper.kv_heads * hyper.head_dim;
                let part = |start: usize, len: usize| {
                    Tensor::from_slice(&bias[start..start + len], len, &Device::Cpu)
                };
                (
                    q.broadcast_add(&part(0, queries)?)?,
                    k.broadcast_add(&part(queries, keys)?)?,
                    v.broadcast_add(&part(queries + keys, keys)?)?,
                )
            }
            None => (q, k, v),
        };
        let heads = |projected: Tensor, count: usize| -> candle_core::Result<Tensor> {
            projected
                .reshape((batch, length, count, hyper.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let rotate = |tensor: &Tensor| {
            if hyper.neox_rope {
                candle_nn::rotary_emb::rope(tensor, cos, sin)
            } else {
                candle_nn::rotary_emb::rope_i(tensor, cos, sin)
            }
        };
        let q = rotate(&heads(q, hyper.heads)?)?;
        let k = rotate(&heads(k, hyper.kv_heads)?)?;
        // The cache is position-major: [1, kv, L, d] → [L, kv, d].
        let rows = |tensor: Tensor| -> candle_core::Result<Vec<f32>> {
            tensor.transpose(1, 2)?.flatten_all()?.to_vec1()
        };
        self.keys.extend(rows(k)?);
        // `v` is still `[1, L, kv × d]`, already position-major.
        self.values.extend(v.flatten_all()?.to_vec1::<f32>()?);
        let total = self.keys.len() / (hyper.kv_heads * hyper.head_dim);
        let all = |cache: &[f32]| -> candle_core::Result<Tensor> {
            Tensor::from_slice(
                cache,
                (batch, total, hyper.kv_heads, hyper.head_dim),
                &Device::Cpu,
            )?
            .transpose(1, 2)?
            .contiguous()
        };
        let (k, v) = (all(&self.keys)?, all(&self.values)?);
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
        Ok(self.o.forward_prompt(&out)?)
    }

    /// Attention of one new token: rotates its query and key, appends its key and value to the
    /// cache and writes the heads' outputs into `out`.
    fn attention_step(
        &mut self,
        qkv: &mut [f32],
        cos: &[f32],
        sin: &[f32],
        hyper: &Hyper,
        out: &mut [f32],
    ) -> anyhow::Result<()> {
        let dim = hyper.head_dim;
        let (q, rest) = qkv.split_at_mut(hyper.heads * dim);
        let (k, v) = rest.split_at_mut(hyper.kv_heads * dim);
        if v.len() != hyper.kv_heads * dim {
            bail!("the attention projection has the wrong size");
        }
        if hyper.neox_rope {
            rope_halves(q, dim, cos, sin);
            rope_halves(k, dim, cos, sin);
        } else {
            rope(q, dim, cos, sin);
            rope(k, dim, cos, sin);
        }
        self.keys.extend_from_slice(k);
        self.values.extend_from_slice(v);
        let width = hyper.kv_heads * dim;
        let total = self.keys.len() / width;
        let repeat = hyper.heads / hyper.kv_heads;
        let scale = 1.0 / (dim as f32).sqrt();
        // One task per key/value head and range of positions, so both cores share the work
        // and each key and value is read once for the query heads that use it.
        let ranges = if total >= SPLIT_ATTENTION_FROM {
            vec![0..total / 2, total / 2..total]
        } else {
            std::iter::once(0..total).collect()
        };
        let (keys, values, q) = (&self.keys, &self.values, &*q);
        let tasks: Vec<(usize, std::ops::Range<usize>)> = (0..hyper.kv_heads)
            .flat_map(|group| ranges.iter().map(move |range| (group, range.clone())))
            .collect();
        let partials: Vec<kernels::Partial> = tasks
            .into_par_iter()
            .map(|(group, positions)| {
                kernels::attend(kernels::Attend {
                    queries: &q[group * repeat * dim..(group + 1) * repeat * dim],
                    dim,
                    keys: &keys[group * dim..],
                    values: &values[group * dim..],
                    stride: width,
                    positions,
                    scale,
                })
            })
            .collect();
        for (group, parts) in partials.chunks(ranges.len()).enumerate() {
            let mut merged = parts[0].clone();
            for part in &parts[1..] {
                merged.merge(part);
            }
            merged.finish(&mut out[group * repeat * dim..(group + 1) * repeat * dim]);
        }
        Ok(())
    }
}

/// `out = x / rms(x) × weight`.
fn rms_norm(x: &[f32], weight: &[f32], eps: f64, out: &mut [f32]) {
    let mean = x.iter().map(|value| value * value).sum::<f32>() / x.len() as f32;
    let inverse = 1.0 / (mean + eps as f32).sqrt();
    for ((out, x), weight) in out.iter_mut().zip(x).zip(weight) {
        *out = x * inverse * weight;
    }
}

/// Rotates each head's consecutive pairs by the position's angles (the interleaved rotary
/// embedding GGUF llama weights expect, as candle's `rope_i`).
fn rope(heads: &mut [f32], dim: usize, cos: &[f32], sin: &[f32]) {
    for head in heads.chunks_exact_mut(dim) {
        for (pair, (cos, sin)) in head.chunks_exact_mut(2).zip(cos.iter().zip(sin)) {
            let (a, b) = (pair[0], pair[1]);
            pair[0] = a * cos - b * sin;
            pair[1] = a * sin + b * cos;
        }
    }
}

/// Rotates each head's value `i` with value `i + dim / 2` by the position's angles (the
/// GPT-NeoX layout, as candle's `rope`).
fn rope_halves(heads: &mut [f32], dim: usize, cos: &[f32], sin: &[f32]) {
    let half = dim / 2;
    for head in heads.chunks_exact_mut(dim) {
        let (first, second) = head.split_at_mut(half);
        for ((a, b), (cos, sin)) in first
            .iter_mut()
            .zip(second.iter_mut())
            .zip(cos.iter().zip(sin))
        {
            let (x, y) = (*a, *b);
            *a = x * cos - y * sin;
            *b = x * sin + y * cos;
        }
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

/// Cosines and sines of the rotary angles, `[position][head_dim / 2]`.
fn rope_tables(hyper: &Hyper) -> (Vec<f32>, Vec<f32>) {
    let half = hyper.head_dim / 2;
    let inverse: Vec<f32> = (0..half)
        .map(|index| {
            1.0 / hyper
                .rope_base
                .powf(2.0 * index as f32 / hyper.head_dim as f32)
        })
        .collect();
    let mut cos = Vec::with_capacity(hyper.context * half);
    let mut sin = Vec::with_capacity(hyper.context * half);
    for position in 0..hyper.context {
        for frequency in &inverse {
            let angle = position as f32 * frequency;
            cos.push(angle.cos());
            sin.push(angle.sin());
        }
    }
    (cos, sin)
}
