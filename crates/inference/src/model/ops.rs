//! The per-token operations between weight products: norms, rotary positions, SwiGLU.

use super::*;

/// `x += y`, the residual connection.
pub(super) fn add_into(x: &mut [f32], y: &[f32]) {
    for (x, y) in x.iter_mut().zip(y) {
        *x += y;
    }
}

/// `out = silu(gate) × up`, the feed-forward activation.
pub(super) fn swiglu(gate: &[f32], up: &[f32], out: &mut [f32]) {
    for ((out, gate), up) in out.iter_mut().zip(gate).zip(up) {
        *out = gate / (1.0 + (-gate).exp()) * up;
    }
}

/// `out = x / rms(x) × weight`.
pub(super) fn rms_norm(x: &[f32], weight: &[f32], eps: f64, out: &mut [f32]) {
    let mean = x.iter().map(|value| value * value).sum::<f32>() / x.len() as f32;
    let inverse = 1.0 / (mean + eps as f32).sqrt();
    for ((out, x), weight) in out.iter_mut().zip(x).zip(weight) {
        *out = x * inverse * weight;
    }
}

/// Rotates each head's consecutive pairs by the position's angles (the interleaved rotary
/// embedding GGUF llama weights expect, as candle's `rope_i`).
pub(super) fn rope(heads: &mut [f32], dim: usize, cos: &[f32], sin: &[f32]) {
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
pub(super) fn rope_halves(heads: &mut [f32], dim: usize, cos: &[f32], sin: &[f32]) {
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

/// Cosines and sines of the rotary angles, `[position][head_dim / 2]`.
pub(super) fn rope_tables(hyper: &Hyper) -> (Vec<f32>, Vec<f32>) {
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
