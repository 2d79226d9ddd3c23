//! The k-quant formats as the model files ship them (`Q4_K`, `Q6_K`: Qwen's and most other
//! `Q4_K_M` files), read into blocks the loops want, and their products with an input quantised
//! to 8 bits per block of 256 (`Q8_K`).
//!
//! A block holds 256 weights. Its sub-blocks carry small integer scales under one `f16` scale
//! per block, so a block's product is integer arithmetic down to one multiply-add: the
//! sub-block scales multiply integer partial sums, and the `Q4_K` minimums and the `Q6_K`
//! offset of 32 come out of the input's per-16 sums.
//!
//! The numbers are the file's; only the order of the bits changes at load, so that one
//! 64-byte load holds 64 consecutive weights' low bits in its low nibbles and the next 64's in
//! its high nibbles (and, for `Q6_K`, one load holds every weight's top two bits).

use crate::kernels::{f16, quantize_block};

/// Weights per k-quant block.
pub(crate) const SUPER: usize = 256;

/// 256 weights of `Q4_K`: `d × scale[s] × q − dmin × min[s]` for sub-block `s` (32 weights),
/// `q` in 0..16. Byte `64g + i` of `qs` holds weight `128g + i` in its low nibble and weight
/// `128g + 64 + i` in its high one. The file's 6-bit scales and minimums are unpacked into
/// `scales`: the eight scales, then the eight minimums (one 16-byte load).
#[derive(Debug, Clone)]
pub(crate) struct Q4K {
    pub d: f32,
    pub dmin: f32,
    pub scales: [u8; 16],
    pub qs: [u8; 128],
}

/// 256 weights of `Q6_K`: `d × scales[s] × (q − 32)` for sub-block `s` (16 weights), `q` in
/// 0..64. Weight `w`'s low four bits are in byte `64(w / 128) + w % 64` of `ql` (the low nibble
/// when `w % 128 < 64`), its top two bits are bits `2(w / 64)` and up of byte `w % 64` of `qh`.
#[derive(Debug, Clone)]
pub(crate) struct Q6K {
    pub d: f32,
    pub scales: [i8; 16],
    pub ql: [u8; 128],
    pub qh: [u8; 64],
}

/// GGUF bytes per block.
pub(crate) const Q4K_BYTES: usize = 144;
pub(crate) const Q6K_BYTES: usize = 210;

/// Where weight `w`'s nibble lives in a 128-byte run: (byte, high nibble).
fn nibble_of(w: usize) -> (usize, bool) {
    (64 * (w / 128) + w % 64, w % 128 >= 64)
}

/// A block of 256 weights that reads back as `f32` values.
pub(crate) trait Block {
    fn dequantize(&self, out: &mut [f32]);
}

impl Q4K {
    /// One GGUF block: `f16 d`, `f16 dmin`, 12 bytes of packed 6-bit scales and minimums,
    /// 128 bytes of nibbles (byte `32j + l`: weight `64j + l` low, weight `64j + 32 + l` high).
    pub(crate) fn read(block: &[u8]) -> Self {
        let packed = &block[4..16];
        let mut scales = [0u8; 16];
        for j in 0..8 {
            (scales[j], scales[8 + j]) = if j < 4 {
                (packed[j] & 63, packed[j + 4] & 63)
            } else {
                (
                    (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4),
                    (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
                )
            };
        }
        // Byte `64g + 32h + l` takes weight `128g + 32h + l` (file byte `64g + l`) low and
        // weight `128g + 64 + 32h + l` (file byte `64g + 32 + l`) high; `h` picks the nibble.
        let file = &block[16..144];
        let mut qs = [0u8; 128];
        for group in 0..2 {
            let (first, second) = file[64 * group..64 * group + 64].split_at(32);
            let out = &mut qs[64 * group..64 * group + 64];
            for (l, (a, b)) in first.iter().zip(second).enumerate() {
                out[l] = (a & 0x0f) | ((b & 0x0f) << 4);
                out[32 + l] = (a >> 4) | (b & 0xf0);
            }
        }
        Self {
            d: f16([block[0], block[1]]),
            dmin: f16([block[2], block[3]]),
            scales,
            qs,
        }
    }

    /// Weight `w`'s quant, 0..16.
    pub(crate) fn quant(&self, w: usize) -> u8 {
        let (at, high) = nibble_of(w);
        if high {
            self.qs[at] >> 4
        } else {
            self.qs[at] & 0x0f
        }
    }
}

impl Block for Q4K {
    /// The block's 256 weights.
    fn dequantize(&self, out: &mut [f32]) {
        for (w, out) in out.iter_mut().enumerate().take(SUPER) {
            let sub = w / 32;
            *out = self.d * f32::from(self.scales[sub]) * f32::from(self.quant(w))
                - self.dmin * f32::from(self.scales[8 + sub]);
        }
    }
}

impl Q6K {
    /// One GGUF block: 128 bytes of low bits, 64 of high bits, 16 signed scales, `f16 d`. In
    /// the file, each half of 128 weights has 32 bytes of `qh`; bits `2r` and up of byte `l`
    /// belong to weight `32r + l` of the half.
    pub(crate) fn read(block: &[u8]) -> Self {
        let mut ql = [0u8; 128];
        let mut qh = [0u8; 64];
        let mut scales = [0i8; 16];
        ql.copy_from_slice(&block[..128]);
        // Byte `j` takes the top bits of weights `j`, `64 + j`, `128 + j` and `192 + j`.
        let file = &block[128..192];
        for (j, out) in qh.iter_mut().enumerate() {
            let (lane, run) = (j % 32, j / 32);
            for k in 0..4 {
                let bits = (file[32 * (k / 2) + lane] >> (2 * (2 * (k % 2) + run))) & 3;
                *out |= bits << (2 * k);
            }
        }
        for (scale, byte) in scales.iter_mut().zip(&block[192..208]) {
            *scale = i8::from_le_bytes([*byte]);
        }
        Self {
            d: f16([block[208], block[209]]),
            scales,
            ql,
            qh,
        }
    }

    /// Weight `w`'s quant, 0..64.
    pub(crate) fn quant(&self, w: usize) -> u8 {
        let (at, high) = nibble_of(w);
        let low = if high {
            self.ql[at] >> 4
        } else {
            self.ql[at] & 0x0f
        };
        low | (((self.qh[w % 64] >> (2 * (w / 64))) & 3) << 4)
    }
}

impl Block for Q6K {
    /// The block's 256 weights.
    fn dequantize(&self, out: &mut [f32]) {
        for (w, out) in out.iter_mut().enumerate().take(SUPER) {
            *out = self.d * f32::from(self.scales[w / 16]) * (f32::from(self.quant(w)) - 32.0);
        }
    }
}

/// Reads `rows × cols` weights of GGUF blocks; `None` when the sizes disagree.
pub(crate) fn read_blocks<T: Send>(
    rows: usize,
    cols: usize,
    data: &[u8],
    block_bytes: usize,
    read: impl Fn(&[u8]) -> T + Sync + Send,
) -> Option<Vec<T>> {
    use rayon::prelude::*;
    let blocks = rows.checked_mul(cols)? / SUPER;
    if !cols.is_multiple_of(SUPER) || data.len() != blocks.checked_mul(block_bytes)? {
        return None;
    }
    // Both cores: reordering a 1.5B model's bits is a few seconds of work for one.
    Some(data.par_chunks_exact(block_bytes).map(read).collect())
}

/// An input vector as `Q8_K`: per block of 256 a scale, 256 signed bytes, and the sum of each
/// run of 16 bytes.
#[derive(Debug, Default, Clone)]
pub(crate) struct Q8K {
    pub quants: Vec<i8>,
    pub scales: Vec<f32>,
    pub sums: Vec<i16>,
    /// `scale × (sum of 32 quants)` per run of 32: the input side of `Q4_K`'s minimum term.
    pub pair_sums: Vec<f32>,
}

impl Q8K {
    /// Quantises `values` (a multiple of 256 long): each block's scale is its largest
    /// magnitude over 127.
    pub(crate) fn quantize(&mut self, values: &[f32]) {
        let blocks = values.len() / SUPER;
        self.quants.resize(values.len(), 0);
        self.scales.resize(blocks, 0.0);
        self.sums.resize(blocks * 16, 0);
        self.pair_sums.resize(blocks * 8, 0.0);
        for (block, (values, quants)) in values
            .chunks_exact(SUPER)
            .zip(self.quants.chunks_exact_mut(SUPER))
            .enumerate()
        {
            let scale = quantize_block(values, quants);
            for (run, sum) in quants
                .chunks_exact(16)
                .zip(&mut self.sums[block * 16..(block + 1) * 16])
            {
                // At most 16 × 127: fits.
                *sum = run.iter().map(|quant| i16::from(*quant)).sum();
            }
            self.scales[block] = scale;
            let sums = &self.sums[block * 16..(block + 1) * 16];
            for (run, pair) in self.pair_sums[block * 8..(block + 1) * 8]
                .iter_mut()
                .enumerate()
            {
                *pair = scale * f32::from(sums[2 * run] + sums[2 * run + 1]);
            }
        }
    }
}

pub(crate) fn scalar_dot_q4_k(blocks: &[Q4K], x: &Q8K) -> f32 {
    let mut total = 0.0;
    for (index, block) in blocks.iter().enumerate() {
        let quants = &x.quants[index * SUPER..(index + 1) * SUPER];
        let sums = &x.sums[index * 16..(index + 1) * 16];
        let (mut scaled, mut offsets) = (0i32, 0i32);
        for sub in 0..8 {
            let dot: i32 = (sub * 32..sub * 32 + 32)
                .map(|w| i32::from(block.quant(w)) * i32::from(quants[w]))
                .sum();
            scaled += i32::from(block.scales[sub]) * dot;
            offsets += i32::from(block.scales[8 + sub])
                * (i32::from(sums[2 * sub]) + i32::from(sums[2 * sub + 1]));
        }
        total += x.scales[index] * (block.d * scaled as f32 - block.dmin * offsets as f32);
    }
    total
}

pub(crate) fn scalar_dot_q6_k(blocks: &[Q6K], x: &Q8K) -> f32 {
    let mut total = 0.0;
    for (index, block) in blocks.iter().enumerate() {
        let quants = &x.quants[index * SUPER..(index + 1) * SUPER];
        let mut scaled = 0i32;
        for sub in 0..16 {
            let dot: i32 = (sub * 16..sub * 16 + 16)
                .map(|w| (i32::from(block.quant(w)) - 32) * i32::from(quants[w]))
                .sum();
            scaled += i32::from(block.scales[sub]) * dot;
        }
        total += x.scales[index] * block.d * scaled as f32;
    }
    total
}

/// The top two bits of run `k` of the weights, from a `qh` vector, moved to bits 4 and 5 of
/// each byte once masked with `0x30`: `qh` shifted by `4 − 2k`, written per shift because
/// shifts take constants.
macro_rules! top_bits {
    ($shifts:expr, $srli:ident, $slli:ident, $qh:expr, $k:expr) => {{
        match $k {
            0 => $shifts.$slli::<4>($qh),
            1 => $shifts.$slli::<2>($qh),
            2 => $qh,
            _ => $shifts.$srli::<2>($qh),
        }
    }};
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use pulp::x86::V3;
    use std::arch::x86_64::{__m256, __m256i};

    use super::{Q4K, Q6K, Q8K, SUPER};
    pub(super) use crate::kernels::{load, sum8};

    /// A block's eight minimums times its `dmin`, as floats.
    #[inline(always)]
    pub(super) fn minimums(simd: V3, block: &Q4K) -> __m256 {
        let bytes = simd.sse2._mm_srli_si128::<8>(load(&block.scales));
        let mins = simd
            .avx
            ._mm256_cvtepi32_ps(simd.avx2._mm256_cvtepu8_epi32(bytes));
        simd.avx
            ._mm256_mul_ps(mins, simd.avx._mm256_set1_ps(block.dmin))
    }

    /// `offset` plus block `index`'s minimums times the input's sums per 32: the minimum term
    /// of a `Q4_K` block product, still to be subtracted.
    #[inline(always)]
    pub(super) fn add_minimums(
        simd: V3,
        mins: __m256,
        x: &Q8K,
        index: usize,
        offset: __m256,
    ) -> __m256 {
        simd.fma
            ._mm256_fmadd_ps(mins, load(&x.pair_sums[index * 8..]), offset)
    }

    /// A block's sixteen `Q6_K` scales as i16 lanes.
    #[inline(always)]
    pub(super) fn scales16(simd: V3, block: &Q6K) -> __m256i {
        let bytes: [u8; 16] = pulp::cast(block.scales);
        simd.avx2._mm256_cvtepi8_epi16(load(&bytes))
    }

    /// Eight i32 sums of `scale × (a × b)` over 32 unsigned `a` (below 64) and signed `b`.
    /// `scales` holds one i16 per pair of bytes.
    #[inline(always)]
    fn scaled(simd: V3, unsigned: __m256i, signed: __m256i, scales: __m256i) -> __m256i {
        let pairs = simd.avx2._mm256_maddubs_epi16(unsigned, signed);
        simd.avx2._mm256_madd_epi16(pairs, scales)
    }

    /// Row `blocks` times each of `N` inputs. The weights are unpacked once for all of them;
    /// each input's sums run in the same order whatever `N` is, so a token's result does not
    /// depend on the batch it came in.
    #[inline(always)]
    pub(crate) fn dot_q4_k<const N: usize>(simd: V3, blocks: &[Q4K], xs: [&Q8K; N]) -> [f32; N] {
        let mask = simd.avx._mm256_set1_epi8(0x0f);
        let mut acc = [simd.avx._mm256_setzero_ps(); N];
        let mut offsets = [simd.avx._mm256_setzero_ps(); N];
        for (index, block) in blocks.iter().enumerate() {
            let mins = minimums(simd, block);
            let mut totals = [simd.avx._mm256_setzero_si256(); N];
            for group in 0..2 {
                for half in 0..2 {
                    let bits = load(&block.qs[group * 64 + half * 32..]);
                    let low = simd.avx2._mm256_and_si256(bits, mask);
                    let high = simd
                        .avx2
                        ._mm256_and_si256(simd.avx2._mm256_srli_epi16::<4>(bits), mask);
                    let sub = group * 4 + half;
                    let low_scale = simd.avx._mm256_set1_epi16(i16::from(block.scales[sub]));
                    let high_scale = simd.avx._mm256_set1_epi16(i16::from(block.scales[sub + 2]));
                    let start = index * SUPER + sub * 32;
                    for (total, x) in totals.iter_mut().zip(xs) {
                        let low = scaled(simd, low, load(&x.quants[start..]), low_scale);
                        let high = scaled(simd, high, load(&x.quants[start + 64..]), high_scale);
                        *total = simd
                            .avx2
                            ._mm256_add_epi32(*total, simd.avx2._mm256_add_epi32(low, high));
                    }
                }
            }
            for (token, x) in xs.iter().enumerate() {
                offsets[token] = add_minimums(simd, mins, x, index, offsets[token]);
                acc[token] = simd.fma._mm256_fmadd_ps(
                    simd.avx._mm256_set1_ps(x.scales[index] * block.d),
                    simd.avx._mm256_cvtepi32_ps(totals[token]),
                    acc[token],
                );
            }
        }
        let mut out = [0.0; N];
        for (token, out) in out.iter_mut().enumerate() {
            *out = sum8(simd, acc[token]) - sum8(simd, offsets[token]);
        }
        out
    }

    #[inline(always)]
    pub(crate) fn dot_q6_k<const N: usize>(simd: V3, blocks: &[Q6K], xs: [&Q8K; N]) -> [f32; N] {
        let low_mask = simd.avx._mm256_set1_epi8(0x0f);
        let top_mask = simd.avx._mm256_set1_epi8(0x30);
        let mut acc = [simd.avx._mm256_setzero_ps(); N];
        for (index, block) in blocks.iter().enumerate() {
            let scales = scales16(simd, block);
            let mut totals = [simd.avx._mm256_setzero_si256(); N];
            for run in 0..8 {
                // Weights 32·run.. : their nibbles and their top bits.
                let bits = load(&block.ql[64 * (run / 4) + 32 * (run % 2)..]);
                let low = if run % 4 < 2 {
                    simd.avx2._mm256_and_si256(bits, low_mask)
                } else {
                    simd.avx2
                        ._mm256_and_si256(simd.avx2._mm256_srli_epi16::<4>(bits), low_mask)
                };
                let qh = load(&block.qh[32 * (run % 2)..]);
                let top = simd.avx2._mm256_and_si256(
                    top_bits!(simd.avx2, _mm256_srli_epi16, _mm256_slli_epi16, qh, run / 2),
                    top_mask,
                );
                let unsigned = simd.avx2._mm256_or_si256(low, top);
                let run_scales = simd.avx._mm256_set_m128i(
                    simd.sse2
                        ._mm_set1_epi16(i16::from(block.scales[2 * run + 1])),
                    simd.sse2._mm_set1_epi16(i16::from(block.scales[2 * run])),
                );
                let start = index * SUPER + run * 32;
                for (total, x) in totals.iter_mut().zip(xs) {
                    let products = scaled(simd, unsigned, load(&x.quants[start..]), run_scales);
                    *total = simd.avx2._mm256_add_epi32(*total, products);
                }
            }
            for (token, x) in xs.iter().enumerate() {
                // Every quant carries an offset of 32: take 32 × Σ scale × (its inputs' sum).
                let shift = simd
                    .avx2
                    ._mm256_madd_epi16(load(&x.sums[index * 16..]), scales);
                let total = simd
                    .avx2
                    ._mm256_sub_epi32(totals[token], simd.avx2._mm256_slli_epi32::<5>(shift));
                acc[token] = simd.fma._mm256_fmadd_ps(
                    simd.avx._mm256_set1_ps(x.scales[index] * block.d),
                    simd.avx._mm256_cvtepi32_ps(total),
                    acc[token],
                );
            }
        }
        let mut out = [0.0; N];
        for (token, out) in out.iter_mut().enumerate() {
            *out = sum8(simd, acc[token]);
        }
        out
    }
}

/// The same loops on 512-bit vectors (AVX-512 BW): 64 weights per instruction.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use pulp::x86::V4;
    use std::arch::x86_64::{__m256, __m512, __m512i};

    use super::avx2::{add_minimums, load, minimums, scales16, sum8};
    use super::{Q4K, Q6K, Q8K, SUPER};

    /// Sixteen i16 lanes per entry of `lanes`: lane `i` of the result is `source[lanes[i / 16]]`
    /// (`Q4_K`: a scale per 32 weights).
    #[inline(always)]
    fn spread<const WIDTH: usize>(simd: V4, source: __m512i, first: usize) -> __m512i {
        let mut index = [0i16; 32];
        for (lane, index) in index.iter_mut().enumerate() {
            *index = (first + lane / WIDTH) as i16;
        }
        simd.avx512bw
            ._mm512_permutexvar_epi16(pulp::cast(index), source)
    }

    #[inline(always)]
    fn scaled(simd: V4, unsigned: __m512i, signed: __m512i, scales: __m512i) -> __m512i {
        let pairs = simd.avx512bw._mm512_maddubs_epi16(unsigned, signed);
        simd.avx512bw._mm512_madd_epi16(pairs, scales)
    }

    #[inline(always)]
    fn widen(simd: V4, value: std::arch::x86_64::__m256i) -> __m512i {
        simd.avx512f._mm512_castsi256_si512(value)
    }

    /// As [`super::avx2::dot_q4_k`], 128 weights per step.
    #[inline(always)]
    pub(crate) fn dot_q4_k<const N: usize>(simd: V4, blocks: &[Q4K], xs: [&Q8K; N]) -> [f32; N] {
        let mask = simd.avx512f._mm512_set1_epi8(0x0f);
        let mut acc: [__m512; N] = [simd.avx512f._mm512_setzero_ps(); N];
        let mut offsets: [__m256; N] = [simd.avx._mm256_setzero_ps(); N];
        for (index, block) in blocks.iter().enumerate() {
            let mins = minimums(*simd, block);
            let scales = widen(simd, simd.avx2._mm256_cvtepu8_epi16(load(&block.scales)));
            let mut totals = [simd.avx512f._mm512_setzero_si512(); N];
            for group in 0..2 {
                let bits = load(&block.qs[group * 64..]);
                let low = simd.avx512f._mm512_and_si512(bits, mask);
                let high = simd
                    .avx512f
                    ._mm512_and_si512(simd.avx512bw._mm512_srli_epi16::<4>(bits), mask);
                // Low nibbles: sub-blocks 4g and 4g + 1; high nibbles: 4g + 2 and 4g + 3.
                let low_scales = spread::<16>(simd, scales, group * 4);
                let high_scales = spread::<16>(simd, scales, group * 4 + 2);
                let start = index * SUPER + group * 128;
                for (total, x) in totals.iter_mut().zip(xs) {
                    let low = scaled(simd, low, load(&x.quants[start..]), low_scales);
                    let high = scaled(simd, high, load(&x.quants[start + 64..]), high_scales);
                    *total = simd
                        .avx512f
                        ._mm512_add_epi32(*total, simd.avx512f._mm512_add_epi32(low, high));
                }
            }
            for (token, x) in xs.iter().enumerate() {
                offsets[token] = add_minimums(*simd, mins, x, index, offsets[token]);
                acc[token] = simd.avx512f._mm512_fmadd_ps(
                    simd.avx512f._mm512_set1_ps(x.scales[index] * block.d),
                    simd.avx512f._mm512_cvtepi32_ps(totals[token]),
                    acc[token],
                );
            }
        }
        let mut out = [0.0; N];
        for (token, out) in out.iter_mut().enumerate() {
            *out = simd.avx512f._mm512_reduce_add_ps(acc[token]) - sum8(*simd, offsets[token]);
        }
        out
    }

    /// As [`super::avx2::dot_q6_k`], 64 weights per step.
    #[inline(always)]
    pub(crate) fn dot_q6_k<const N: usize>(simd: V4, blocks: &[Q6K], xs: [&Q8K; N]) -> [f32; N] {
        let low_mask = simd.avx512f._mm512_set1_epi8(0x0f);
        let top_mask = simd.avx512f._mm512_set1_epi8(0x30);
        let mut acc: [__m512; N] = [simd.avx512f._mm512_setzero_ps(); N];
        let mut offsets: [__m256; N] = [simd.avx._mm256_setzero_ps(); N];
        for (index, block) in blocks.iter().enumerate() {
            let scales = scales16(*simd, block);
            let wide_scales = widen(simd, scales);
            let qh = load(&block.qh);
            let mut totals = [simd.avx512f._mm512_setzero_si512(); N];
            for run in 0..4 {
                // Weights 64·run.. : their nibbles and their top bits.
                let bits = load(&block.ql[64 * (run / 2)..]);
                let low = if run % 2 == 0 {
                    simd.avx512f._mm512_and_si512(bits, low_mask)
                } else {
                    simd.avx512f
                        ._mm512_and_si512(simd.avx512bw._mm512_srli_epi16::<4>(bits), low_mask)
                };
                let top = simd.avx512f._mm512_and_si512(
                    top_bits!(simd.avx512bw, _mm512_srli_epi16, _mm512_slli_epi16, qh, run),
                    top_mask,
                );
                let unsigned = simd.avx512f._mm512_or_si512(low, top);
                let run_scales = spread::<8>(simd, wide_scales, run * 4);
                let start = index * SUPER + run * 64;
                for (total, x) in totals.iter_mut().zip(xs) {
                    let products = scaled(simd, unsigned, load(&x.quants[start..]), run_scales);
                    *total = simd.avx512f._mm512_add_epi32(*total, products);
                }
            }
            for (token, x) in xs.iter().enumerate() {
                // Every quant carries an offset of 32: take 32 × Σ scale × (its inputs' sum).
                let shift = simd
                    .avx2
                    ._mm256_madd_epi16(load(&x.sums[index * 16..]), scales);
                let scale = x.scales[index] * block.d;
                offsets[token] = simd.fma._mm256_fmadd_ps(
                    simd.avx._mm256_set1_ps(scale),
                    simd.avx
                        ._mm256_cvtepi32_ps(simd.avx2._mm256_slli_epi32::<5>(shift)),
                    offsets[token],
                );
                acc[token] = simd.avx512f._mm512_fmadd_ps(
                    simd.avx512f._mm512_set1_ps(scale),
                    simd.avx512f._mm512_cvtepi32_ps(totals[token]),
                    acc[token],
                );
            }
        }
        let mut out = [0.0; N];
        for (token, out) in out.iter_mut().enumerate() {
            *out = simd.avx512f._mm512_reduce_add_ps(acc[token]) - sum8(*simd, offsets[token]);
        }
        out
    }
}
