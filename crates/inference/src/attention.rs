//! Attention on 512-bit vectors (AVX-512 F), for head widths of 64 and 128.
//!
//! A long prompt spends a growing share of its time here: each token reads every earlier key
//! and value. Against the generic loops, this keeps a key (or a head's weighted sum) in
//! registers while it is used, exponentiates 16 scores per instruction sequence instead of
//! calling libm for each, and reads values in runs of positions that stay in L1 for all the
//! query heads of the group.
//!
//! Steps and prompts both come here, so a token's numbers still do not depend on how a prompt
//! was split or cached.

#![cfg(target_arch = "x86_64")]

use pulp::x86::V4;
use std::arch::x86_64::__m512;

use crate::kernels::{Attend, Partial, load};

/// Positions whose values are read for all query heads before moving on (32 KiB of values
/// at a width of 128).
const RUN: usize = 64;

/// `e^x` for `x ≤ 0`, 16 at a time: `x = n·ln 2 + r` with `n` an integer (ln 2 in two parts,
/// so `r` keeps its precision) and `|r| ≤ ½ ln 2`; `e^r` by its Taylor series to the 7th power
/// (relative error below 1e-8), scaled by `2^n` with `vscalefps`. Below −87 the result is
/// clamped to about `e^−87`, far under anything a softmax sum keeps.
#[inline(always)]
fn exp(simd: V4, x: __m512) -> __m512 {
    const LN_2_HIGH: f32 = 0.693_145_75;
    const LN_2_LOW: f32 = 1.428_606_8e-6;
    let f = simd.avx512f;
    let x = f._mm512_max_ps(x, f._mm512_set1_ps(-87.0));
    // Round to nearest, without raising exceptions.
    let n = f._mm512_roundscale_ps::<0x08>(
        f._mm512_mul_ps(x, f._mm512_set1_ps(std::f32::consts::LOG2_E)),
    );
    let r = f._mm512_fnmadd_ps(n, f._mm512_set1_ps(LN_2_HIGH), x);
    let r = f._mm512_fnmadd_ps(n, f._mm512_set1_ps(LN_2_LOW), r);
    let mut p = f._mm512_set1_ps(1.0 / 5040.0);
    for c in [
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = f._mm512_fmadd_ps(p, r, f._mm512_set1_ps(c));
    }
    f._mm512_scalef_ps(p, n)
}

/// [`crate::kernels::attend`] for heads `16 × CHUNKS` wide.
#[inline(always)]
pub(crate) fn attend<const CHUNKS: usize>(simd: V4, group: Attend<'_>) -> Partial {
    let f = simd.avx512f;
    let Attend {
        queries,
        dim,
        keys,
        values,
        stride,
        positions,
        scale,
    } = group;
    debug_assert_eq!(dim, 16 * CHUNKS);
    let heads = queries.len() / dim;
    let count = positions.len();
    // A row of scores per head, padded to whole vectors.
    let padded = count.div_ceil(16) * 16;
    let mut scores = vec![f32::NEG_INFINITY; heads * padded];
    for (index, position) in positions.clone().enumerate() {
        let key = &keys[position * stride..position * stride + dim];
        let key: [__m512; CHUNKS] = std::array::from_fn(|chunk| load(&key[16 * chunk..]));
        for head in 0..heads {
            let query = &queries[head * dim..(head + 1) * dim];
            let mut sum = f._mm512_mul_ps(load(query), key[0]);
            for (chunk, key) in key.iter().enumerate().skip(1) {
                sum = f._mm512_fmadd_ps(load(&query[16 * chunk..]), *key, sum);
            }
            scores[head * padded + index] = f._mm512_reduce_add_ps(sum) * scale;
        }
    }
    let mut largest = vec![f32::NEG_INFINITY; heads];
    let mut sums = vec![0.0f32; heads];
    for head in 0..heads {
        let row = &mut scores[head * padded..(head + 1) * padded];
        let mut top = f._mm512_set1_ps(f32::NEG_INFINITY);
        for run in row.chunks_exact(16) {
            top = f._mm512_max_ps(top, load(run));
        }
        let top = f._mm512_reduce_max_ps(top);
        let shift = f._mm512_set1_ps(top);
        let mut total = f._mm512_setzero_ps();
        for (at, run) in (0..padded).step_by(16).zip(row.chunks_exact_mut(16)) {
            let mut powers: [f32; 16] = pulp::cast(exp(simd, f._mm512_sub_ps(load(run), shift)));
            // The padding weighs nothing.
            for power in powers.iter_mut().skip(count.saturating_sub(at)) {
                *power = 0.0;
            }
            total = f._mm512_add_ps(total, load(&powers));
            run.copy_from_slice(&powers);
        }
        largest[head] = top;
        sums[head] = f._mm512_reduce_add_ps(total);
    }
    let mut weighted = vec![0.0f32; heads * dim];
    for first in (0..count).step_by(RUN) {
        let last = (first + RUN).min(count);
        for head in 0..heads {
            let out = &mut weighted[head * dim..(head + 1) * dim];
            let mut acc: [__m512; CHUNKS] = std::array::from_fn(|chunk| load(&out[16 * chunk..]));
            for index in first..last {
                let position = positions.start + index;
                let value = &values[position * stride..position * stride + dim];
                let weight = f._mm512_set1_ps(scores[head * padded + index]);
                for (chunk, acc) in acc.iter_mut().enumerate() {
                    *acc = f._mm512_fmadd_ps(weight, load(&value[16 * chunk..]), *acc);
                }
            }
            for (chunk, acc) in acc.iter().enumerate() {
                out[16 * chunk..16 * (chunk + 1)]
                    .copy_from_slice(&pulp::cast::<_, [f32; 16]>(*acc));
            }
        }
    }
    Partial {
        largest,
        sums,
        weighted,
    }
}

#[cfg(test)]
mod tests {
    use crate::kernels::{Attend, attend};

    #[test]
    fn attention_matches_a_plain_softmax_for_wide_heads() {
        let mut rng = fastrand::Rng::with_seed(3);
        for (dim, heads, positions) in [(128, 6, 37), (64, 3, 16), (128, 2, 1), (64, 4, 200)] {
            let stride = 2 * dim;
            let mut values =
                |count: usize| -> Vec<f32> { (0..count).map(|_| rng.f32() * 4.0 - 2.0).collect() };
            let (queries, keys, cached) = (
                values(heads * dim),
                values((positions + 1) * stride),
                values((positions + 1) * stride),
            );
            let range = 1..positions + 1;
            let partial = attend(Attend {
                queries: &queries,
                dim,
                keys: &keys[dim..],
                values: &cached[dim..],
                stride,
                positions: range.clone(),
                scale: 0.125,
            });
            let mut out = vec![0.0; heads * dim];
            partial.finish(&mut out);
            for head in 0..heads {
                let query = &queries[head * dim..(head + 1) * dim];
                let scores: Vec<f64> = range
                    .clone()
                    .map(|p| {
                        let key = &keys[dim + p * stride..dim + p * stride + dim];
                        query
                            .iter()
                            .zip(key)
                            .map(|(q, k)| f64::from(*q) * f64::from(*k))
                            .sum::<f64>()
                            * 0.125
                    })
                    .collect();
                let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = scores.iter().map(|s| (s - top).exp()).sum();
                for i in 0..dim {
                    let expected: f64 = range
                        .clone()
                        .zip(&scores)
                        .map(|(p, s)| {
                            (s - top).exp() / total * f64::from(cached[dim + p * stride + i])
                        })
                        .sum();
                    let actual = f64::from(out[head * dim + i]);
                    assert!(
                        (actual - expected).abs() <= 1e-5 * expected.abs().max(1.0),
                        "dim {dim}, head {head}, lane {i}: {actual} against {expected}"
                    );
                }
            }
        }
    }

    #[test]
    fn exp_is_within_a_few_ulps_of_libm() {
        let Some(simd) = pulp::x86::V4::try_new() else {
            return;
        };
        let inputs: Vec<f32> = (0..4096).map(|i| -100.0 * i as f32 / 4096.0).collect();
        for run in inputs.chunks_exact(16) {
            let ours: [f32; 16] = pulp::cast(super::exp(simd, super::load(run)));
            for (ours, x) in ours.iter().zip(run) {
                let expected = x.exp();
                if *x < -87.0 {
                    assert!(*ours <= 2e-38, "{x}: {ours}");
                } else {
                    assert!(
                        (ours - expected).abs() <= 4.0 * f32::EPSILON * expected,
                        "{x}: {ours} against {expected}"
                    );
                }
            }
        }
    }
}
