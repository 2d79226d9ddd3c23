//! The k-quant formats as the model files ship them (`Q4_K`, `Q6_K`: Qwen's and most other
//! `Q4_K_M` files), read into blocks the loops want, and their products with an input quantised
//! to 8 bits per block of 256 (`Q8_K`).
//!
//! A block holds 256 weights. Its sub-blocks carry small integer scales under one `f16` scale
//! per block, so a block's product is integer arithmetic down to one multiply-add: the
//! sub-block scales multiply integer partial sums, and the `Q4_K` minimums and the `Q6_K`
//! offset of 32 come out of the input's per-16 sums.

/// Weights per k-quant block.
pub const SUPER: usize = 256;

fn f16(bytes: [u8; 2]) -> f32 {
    half::f16::from_le_bytes(bytes).to_f32()
}

/// 256 weights of `Q4_K`: `d × scale[s] × q − dmin × min[s]` for sub-block `s` (32 weights),
/// `q` in 0..16. Byte `l` of `qs[32j..32j + 32]` holds weight `64j + l` in its low nibble and
/// weight `64j + 32 + l` in its high one. The file's 6-bit scales and minimums are unpacked
/// into `scales`: the eight scales, then the eight minimums (one 16-byte load).
#[derive(Debug, Clone)]
pub struct Q4K {
    pub d: f32,
    pub dmin: f32,
    pub scales: [u8; 16],
    pub qs: [u8; 128],
}

/// 256 weights of `Q6_K`: `d × scales[s] × (q − 32)` for sub-block `s` (16 weights), `q` in
/// 0..64, its low four bits in `ql` and its high two in `qh` (see [`Q6K::quant`]).
#[derive(Debug, Clone)]
pub struct Q6K {
    pub d: f32,
    pub scales: [i8; 16],
    pub ql: [u8; 128],
    pub qh: [u8; 64],
}

/// GGUF bytes per block.
pub const Q4K_BYTES: usize = 144;
pub const Q6K_BYTES: usize = 210;

impl Q4K {
    /// One GGUF block: `f16 d`, `f16 dmin`, 12 bytes of packed 6-bit scales and minimums,
    /// 128 bytes of nibbles.
    pub fn read(block: &[u8]) -> Self {
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
        let mut qs = [0u8; 128];
        qs.copy_from_slice(&block[16..144]);
        Self {
            d: f16([block[0], block[1]]),
            dmin: f16([block[2], block[3]]),
            scales,
            qs,
        }
    }

    /// The block's 256 weights.
    pub fn dequantize(&self, out: &mut [f32]) {
        for (index, out) in out.iter_mut().enumerate().take(SUPER) {
            let (chunk, lane) = (index / 64, index % 64);
            let byte = self.qs[chunk * 32 + lane % 32];
            let quant = if lane < 32 { byte & 0x0f } else { byte >> 4 };
            let sub = index / 32;
            *out = self.d * f32::from(self.scales[sub]) * f32::from(quant)
                - self.dmin * f32::from(self.scales[8 + sub]);
        }
    }
}

impl Q6K {
    /// One GGUF block: 128 bytes of low bits, 64 of high bits, 16 signed scales, `f16 d`.
    pub fn read(block: &[u8]) -> Self {
        let mut ql = [0u8; 128];
        let mut qh = [0u8; 64];
        let mut scales = [0i8; 16];
        ql.copy_from_slice(&block[..128]);
        qh.copy_from_slice(&block[128..192]);
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

    /// Weight `index`'s quant, 0..64. Each half of 128 weights uses 64 bytes of `ql` and 32 of
    /// `qh`; its four runs of 32 take the low or high nibble of the first or second 32 `ql`
    /// bytes and the next two bits of `qh`.
    pub fn quant(&self, index: usize) -> u8 {
        let (half, rest) = (index / 128, index % 128);
        let (run, lane) = (rest / 32, rest % 32);
        let low = self.ql[half * 64 + (run % 2) * 32 + lane];
        let low = if run < 2 { low & 0x0f } else { low >> 4 };
        let high = (self.qh[half * 32 + lane] >> (2 * run)) & 3;
        low | (high << 4)
    }

    /// The block's 256 weights.
    pub fn dequantize(&self, out: &mut [f32]) {
        for (index, out) in out.iter_mut().enumerate().take(SUPER) {
            *out = self.d
                * f32::from(self.scales[index / 16])
                * (f32::from(self.quant(index)) - 32.0);
        }
    }
}

/// Reads `rows × cols` weights of GGUF blocks; `None` when the sizes disagree.
pub fn read_blocks<T>(
    rows: usize,
    cols: usize,
    data: &[u8],
    block_bytes: usize,
    read: impl Fn(&[u8]) -> T,
) -> Option<Vec<T>> {
    let blocks = rows.checked_mul(cols)? / SUPER;
    if !cols.is_multiple_of(SUPER) || data.len() != blocks.checked_mul(block_bytes)? {
        return None;
    }
    Some(data.chunks_exact(block_bytes).map(read).collect())
}

/// An input vector as `Q8_K`: per block of 256 a scale, 256 signed bytes, and the sum of each
/// run of 16 bytes.
#[derive(Debug, Default, Clone)]
pub struct Q8K {
    pub quants: Vec<i8>,
    pub scales: Vec<f32>,
    pub sums: Vec<i16>,
}

impl Q8K {
    /// Quantises `values` (a multiple of 256 long): each block's scale is its largest
    /// magnitude over 127.
    pub fn quantize(&mut self, values: &[f32]) {
        let blocks = values.len() / SUPER;
        self.quants.resize(values.len(), 0);
        self.scales.resize(blocks, 0.0);
        self.sums.resize(blocks * 16, 0);
        for (block, (values, quants)) in values
            .chunks_exact(SUPER)
            .zip(self.quants.chunks_exact_mut(SUPER))
            .enumerate()
        {
            let largest = values
                .iter()
                .fold(0.0f32, |max, value| max.max(value.abs()));
            let scale = largest / 127.0;
            let inverse = if scale == 0.0 { 0.0 } else { 1.0 / scale };
            for (quant, value) in quants.iter_mut().zip(values) {
                // In range by construction: |value × inverse| ≤ 127.
                *quant = (value * inverse).round() as i8;
            }
            for (run, sum) in quants
                .chunks_exact(16)
                .zip(&mut self.sums[block * 16..(block + 1) * 16])
            {
                // At most 16 × 127: fits.
                *sum = run.iter().map(|quant| i16::from(*quant)).sum();
            }
            self.scales[block] = scale;
        }
    }
}

pub fn scalar_dot_q4_k(blocks: &[Q4K], x: &Q8K) -> f32 {
    let mut total = 0.0;
    for (index, block) in blocks.iter().enumerate() {
        let quants = &x.quants[index * SUPER..(index + 1) * SUPER];
        let sums = &x.sums[index * 16..(index + 1) * 16];
        let (mut scaled, mut offsets) = (0i32, 0i32);
        for sub in 0..8 {
            let (chunk, high) = (sub / 2, sub % 2 == 1);
            let bytes = &block.qs[chunk * 32..chunk * 32 + 32];
            let inputs = &quants[sub * 32..sub * 32 + 32];
            let dot: i32 = bytes
                .iter()
                .zip(inputs)
                .map(|(byte, input)| {
                    let quant = if high { byte >> 4 } else { byte & 0x0f };
                    i32::from(quant) * i32::from(*input)
                })
                .sum();
            scaled += i32::from(block.scales[sub]) * dot;
            offsets += i32::from(block.scales[8 + sub])
                * (i32::from(sums[2 * sub]) + i32::from(sums[2 * sub + 1]));
        }
        total += x.scales[index] * (block.d * scaled as f32 - block.dmin * offsets as f32);
    }
    total
}

pub fn scalar_dot_q6_k(blocks: &[Q6K], x: &Q8K) -> f32 {
    let mut total = 0.0;
    for (index, block) in blocks.iter().enumerate() {
        let quants = &x.quants[index * SUPER..(index + 1) * SUPER];
        let mut scaled = 0i32;
        for sub in 0..16 {
            let dot: i32 = (sub * 16..sub * 16 + 16)
                .map(|at| (i32::from(block.quant(at)) - 32) * i32::from(quants[at]))
                .sum();
            scaled += i32::from(block.scales[sub]) * dot;
        }
        total += x.scales[index] * block.d * scaled as f32;
    }
    total
}

#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use pulp::x86::V3;
    use std::arch::x86_64::{__m128i, __m256, __m256i};

    use super::{Q4K, Q6K, Q8K, SUPER};

    #[inline(always)]
    fn load(bytes: &[u8]) -> __m256i {
        let mut array = [0u8; 32];
        array.copy_from_slice(&bytes[..32]);
        pulp::cast(array)
    }

    #[inline(always)]
    fn load_signed(bytes: &[i8]) -> __m256i {
        let mut array = [0i8; 32];
        array.copy_from_slice(&bytes[..32]);
        pulp::cast(array)
    }

    #[inline(always)]
    fn sum8(simd: V3, acc: __m256) -> f32 {
        let high = simd.avx._mm256_extractf128_ps::<1>(acc);
        let low = simd.avx._mm256_castps256_ps128(acc);
        let four: [f32; 4] = pulp::cast(simd.sse._mm_add_ps(low, high));
        (four[0] + four[1]) + (four[2] + four[3])
    }

    #[inline(always)]
    fn and(simd: V3, a: __m256i, b: __m256i) -> __m256i {
        simd.avx2._mm256_and_si256(a, b)
    }

    #[inline(always)]
    fn or(simd: V3, a: __m256i, b: __m256i) -> __m256i {
        simd.avx2._mm256_or_si256(a, b)
    }

    /// Eight i32 sums of `scale × (a × b)` over 32 unsigned `a` (below 64) and signed `b`.
    /// `scales` holds one i16 per pair of bytes.
    #[inline(always)]
    fn scaled(simd: V3, unsigned: __m256i, signed: __m256i, scales: __m256i) -> __m256i {
        let pairs = simd.avx2._mm256_maddubs_epi16(unsigned, signed);
        simd.avx2._mm256_madd_epi16(pairs, scales)
    }

    #[inline(always)]
    fn load16(bytes: &[u8]) -> __m128i {
        let mut array = [0u8; 16];
        array.copy_from_slice(&bytes[..16]);
        pulp::cast(array)
    }

    #[inline(always)]
    fn load_sums(sums: &[i16]) -> __m256i {
        let mut array = [0i16; 16];
        array.copy_from_slice(&sums[..16]);
        pulp::cast(array)
    }

    /// Row `blocks` times each of `N` inputs. The weights are unpacked once for all of them;
    /// each input's sums run in the same order whatever `N` is, so a token's result does not
    /// depend on the batch it came in.
    #[inline(always)]
    pub fn dot_q4_k<const N: usize>(simd: V3, blocks: &[Q4K], xs: [&Q8K; N]) -> [f32; N] {
        let mask = simd.avx._mm256_set1_epi8(0x0f);
        // Bytes 8..16 (the minimums), each twice: one i16 per input sum of 16.
        let twice: __m128i = pulp::cast([8u8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15]);
        let mut acc = [simd.avx._mm256_setzero_ps(); N];
        let mut offsets = [simd.avx._mm256_setzero_ps(); N];
        for (index, block) in blocks.iter().enumerate() {
            let mins = simd
                .avx2
                ._mm256_cvtepu8_epi16(simd.ssse3._mm_shuffle_epi8(load16(&block.scales), twice));
            let mut totals = [simd.avx._mm256_setzero_si256(); N];
            for chunk in 0..4 {
                let bits = load(&block.qs[chunk * 32..]);
                let low = and(simd, bits, mask);
                let high = and(simd, simd.avx2._mm256_srli_epi16::<4>(bits), mask);
                let low_scale = simd
                    .avx
                    ._mm256_set1_epi16(i16::from(block.scales[2 * chunk]));
                let high_scale = simd
                    .avx
                    ._mm256_set1_epi16(i16::from(block.scales[2 * chunk + 1]));
                for (total, x) in totals.iter_mut().zip(xs) {
                    let start = index * SUPER + chunk * 64;
                    let low = scaled(simd, low, load_signed(&x.quants[start..]), low_scale);
                    let high =
                        scaled(simd, high, load_signed(&x.quants[start + 32..]), high_scale);
                    *total = simd
                        .avx2
                        ._mm256_add_epi32(*total, simd.avx2._mm256_add_epi32(low, high));
                }
            }
            for (token, x) in xs.iter().enumerate() {
                let minimums = simd
                    .avx2
                    ._mm256_madd_epi16(load_sums(&x.sums[index * 16..]), mins);
                offsets[token] = simd.fma._mm256_fmadd_ps(
                    simd.avx._mm256_set1_ps(x.scales[index] * block.dmin),
                    simd.avx._mm256_cvtepi32_ps(minimums),
                    offsets[token],
                );
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
    pub fn dot_q6_k<const N: usize>(simd: V3, blocks: &[Q6K], xs: [&Q8K; N]) -> [f32; N] {
        let low_mask = simd.avx._mm256_set1_epi8(0x0f);
        let two_bits = simd.avx._mm256_set1_epi8(0x03);
        let bits_45 = simd.avx._mm256_set1_epi8(0x30);
        let bits_23 = simd.avx._mm256_set1_epi8(0x0c);
        let mut acc = [simd.avx._mm256_setzero_ps(); N];
        for (index, block) in blocks.iter().enumerate() {
            let signed: [u8; 16] = pulp::cast(block.scales);
            let scales = simd.avx2._mm256_cvtepi8_epi16(load16(&signed));
            let mut totals = [simd.avx._mm256_setzero_si256(); N];
            for half in 0..2 {
                let first = load(&block.ql[half * 64..]);
                let second = load(&block.ql[half * 64 + 32..]);
                let high = load(&block.qh[half * 32..]);
                let runs = [
                    or(
                        simd,
                        and(simd, first, low_mask),
                        simd.avx2
                            ._mm256_slli_epi16::<4>(and(simd, high, two_bits)),
                    ),
                    or(
                        simd,
                        and(simd, second, low_mask),
                        simd.avx2
                            ._mm256_slli_epi16::<2>(and(simd, high, bits_23)),
                    ),
                    or(
                        simd,
                        and(simd, simd.avx2._mm256_srli_epi16::<4>(first), low_mask),
                        and(simd, high, bits_45),
                    ),
                    or(
                        simd,
                        and(simd, simd.avx2._mm256_srli_epi16::<4>(second), low_mask),
                        and(simd, simd.avx2._mm256_srli_epi16::<2>(high), bits_45),
                    ),
                ];
                for (run, unsigned) in runs.into_iter().enumerate() {
                    let sub = half * 8 + run * 2;
                    let run_scales = simd.avx._mm256_set_m128i(
                        simd.sse2
                            ._mm_set1_epi16(i16::from(block.scales[sub + 1])),
                        simd.sse2._mm_set1_epi16(i16::from(block.scales[sub])),
                    );
                    let start = index * SUPER + half * 128 + run * 32;
                    for (total, x) in totals.iter_mut().zip(xs) {
                        let products = scaled(
                            simd,
                            unsigned,
                            load_signed(&x.quants[start..]),
                            run_scales,
                        );
                        *total = simd.avx2._mm256_add_epi32(*total, products);
                    }
                }
            }
            for (token, x) in xs.iter().enumerate() {
                // Every quant carries an offset of 32: take 32 × Σ scale × (its inputs' sum).
                let shift = simd
                    .avx2
                    ._mm256_madd_epi16(load_sums(&x.sums[index * 16..]), scales);
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
