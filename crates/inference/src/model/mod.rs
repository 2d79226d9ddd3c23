//! A llama-architecture transformer over GGUF weights.
//!
//! Every weight product runs on our own loops over the quantised blocks ([`crate::kernels`]:
//! `Q4_1` and the k-quants `Q4_K`/`Q6_K` as shipped, `Q8_0`), on plain vectors:
//! - A generated token is one matrix × vector product per weight, with a key/value cache that
//!   grows in place. Every weight is read once per token, so these loops and the bytes per
//!   weight set the speed.
//! - Prompt tokens go as batches through the same loops, four tokens per pass over a row, so a
//!   weight is unpacked once for several tokens. Everything else (norms, rotation, attention
//!   over the cache) is the per-token code of a generated token, so a token's numbers are the
//!   same whether it came in a batch, alone, or from the cache.
//!
//! Formats without a loop of ours (f16, other k-quants, …) use candle's kernels.
//!
//! The key/value cache can be cut back to any length, so a request that shares a prefix with
//! the previous one (the same system prompt, the next code-mode iteration) only processes what
//! is new.

use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use anyhow::{Context, bail};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle_core::{Device, Module, Tensor};
use rayon::prelude::*;

use crate::kernels::{self, QuantMatrix, QuantVector};

mod ops;
mod prefix;
mod weights;

use ops::{add_into, rms_norm, rope, rope_halves, rope_tables, swiglu};
use weights::{Projection, Weight};

/// The first bytes of a file written by [`Model::save_prefix`] (format version 1).
const PREFIX_MAGIC: &[u8; 8] = b"AGKVv1\0\0";

/// Prompt tokens processed per forward pass (bounds the batch's buffers).
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

    /// Runs prompt tokens as one batch and returns the last token's hidden state. The weight
    /// products run for all the tokens at once; everything else is the per-token code of
    /// [`Self::forward_step`], so each token gets exactly the numbers it would get as a
    /// generated token, and an answer does not depend on what was cached.
    fn forward_prompt(&mut self, tokens: &[u32]) -> anyhow::Result<Vec<f32>> {
        let hyper = self.hyper.clone();
        let position = self.cached.len();
        let count = tokens.len();
        let width = hyper.embedding;
        let dim = hyper.head_dim;
        let half = dim / 2;
        let mut x = vec![0.0; count * width];
        for (token, row) in tokens.iter().zip(x.chunks_exact_mut(width)) {
            self.embed(*token, row)?;
        }
        let mut normed = vec![0.0; count * width];
        let mut attended = vec![0.0; count * hyper.heads * dim];
        let mut projected = vec![0.0; count * width];
        // Every layer has the same widths: one set of buffers for all of them.
        let (mut qkv, mut gate_up, mut activated) = (Vec::new(), Vec::new(), Vec::new());
        for layer in &mut self.layers {
            for (x, normed) in x.chunks_exact(width).zip(normed.chunks_exact_mut(width)) {
                rms_norm(x, &layer.attention_norm, hyper.eps, normed);
            }
            let qkv_width = layer.qkv.rows();
            qkv.resize(count * qkv_width, 0.0);
            layer.qkv.matmul(&normed, &mut qkv)?;
            for (index, qkv) in qkv.chunks_exact_mut(qkv_width).enumerate() {
                let at = position + index;
                let (cos, sin) = (
                    &self.cos[at * half..(at + 1) * half],
                    &self.sin[at * half..(at + 1) * half],
                );
                layer.append_key_value(qkv, cos, sin, &hyper)?;
            }
            // Each token attends to the cache up to and including itself.
            attended
                .par_chunks_mut(hyper.heads * dim)
                .zip(qkv.par_chunks(qkv_width))
                .enumerate()
                .for_each(|(index, (out, qkv))| {
                    layer.attend(&qkv[..hyper.heads * dim], position + index + 1, &hyper, out);
                });
            layer.o.matmul(&attended, &mut projected)?;
            add_into(&mut x, &projected);
            for (x, normed) in x.chunks_exact(width).zip(normed.chunks_exact_mut(width)) {
                rms_norm(x, &layer.ffn_norm, hyper.eps, normed);
            }
            let gate_up_width = layer.gate_up.rows();
            gate_up.resize(count * gate_up_width, 0.0);
            layer.gate_up.matmul(&normed, &mut gate_up)?;
            let ffn = gate_up_width / 2;
            activated.resize(count * ffn, 0.0);
            for (gate_up, activated) in gate_up
                .chunks_exact(gate_up_width)
                .zip(activated.chunks_exact_mut(ffn))
            {
                let (gate, up) = gate_up.split_at(ffn);
                swiglu(gate, up, activated);
            }
            layer.down.matmul(&activated, &mut projected)?;
            add_into(&mut x, &projected);
        }
        self.cached.extend_from_slice(tokens);
        Ok(x[(count - 1) * width..].to_vec())
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
                layer.append_key_value(qkv, cos, sin, &hyper)?;
                let total = layer.keys.len() / (hyper.kv_heads * hyper.head_dim);
                layer.attend(
                    &qkv[..hyper.heads * hyper.head_dim],
                    total,
                    &hyper,
                    attended,
                );
                layer.o.matvec(attended, quantized, projected)?;
                add_into(x, projected);
                rms_norm(x, &layer.ffn_norm, hyper.eps, normed);
                gate_up.resize(layer.gate_up.rows(), 0.0);
                layer.gate_up.matvec(normed, quantized, gate_up)?;
                let (gate, up) = gate_up.split_at(gate_up.len() / 2);
                activated.resize(gate.len(), 0.0);
                swiglu(gate, up, activated);
                layer.down.matvec(activated, quantized, projected)?;
                add_into(x, projected);
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
    /// Rotates a token's query and key (in `qkv`, after its bias) and appends its key and
    /// value to the cache.
    fn append_key_value(
        &mut self,
        qkv: &mut [f32],
        cos: &[f32],
        sin: &[f32],
        hyper: &Hyper,
    ) -> anyhow::Result<()> {
        if let Some(bias) = &self.qkv_bias {
            for (value, bias) in qkv.iter_mut().zip(bias) {
                *value += bias;
            }
        }
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
        Ok(())
    }

    /// Attention of one query (all heads, rotated) over the first `total` cached positions;
    /// writes the heads' outputs into `out`.
    fn attend(&self, q: &[f32], total: usize, hyper: &Hyper, out: &mut [f32]) {
        let dim = hyper.head_dim;
        let width = hyper.kv_heads * dim;
        let repeat = hyper.heads / hyper.kv_heads;
        let scale = 1.0 / (dim as f32).sqrt();
        // One task per key/value head and range of positions, so both cores share the work
        // and each key and value is read once for the query heads that use it.
        let ranges = if total >= SPLIT_ATTENTION_FROM {
            vec![0..total / 2, total / 2..total]
        } else {
            std::iter::once(0..total).collect()
        };
        let (keys, values) = (&self.keys, &self.values);
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
    }
}

impl crate::Decoder for Model {
    fn prefill(
        &mut self,
        tokens: &[u32],
        keep_going: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<Option<Vec<f32>>> {
        Model::prefill(self, tokens, keep_going)
    }

    fn step(&mut self, token: u32) -> anyhow::Result<Vec<f32>> {
        Model::step(self, token)
    }

    fn truncate(&mut self, length: usize) {
        Model::truncate(self, length);
    }

    fn cached(&self) -> &[u32] {
        Model::cached(self)
    }

    fn vocabulary(&self) -> usize {
        self.hyper.vocab
    }

    fn save_prefix(&self, mut out: &mut dyn Write, length: usize) -> anyhow::Result<()> {
        Model::save_prefix(self, &mut out, length)
    }

    fn load_prefix(
        &mut self,
        mut file: &mut dyn crate::PrefixFile,
        tokens: &[u32],
    ) -> anyhow::Result<usize> {
        Model::load_prefix(self, &mut file, tokens)
    }
}
