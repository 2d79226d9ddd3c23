//! The k-quants in tiles of 16 rows, for CPUs with AVX-512 VNNI.
//!
//! In a row-major block every 32 (`Q4_K`) or 16 (`Q6_K`) weights carry their own scale, so a
//! row's product applies a scale to every few integer products. A tile interleaves 16 rows of
//! one block column, four weights of a row after the other: one 64-byte vector then holds the
//! same four weights of 16 rows, `vpdpbusd` adds their products with one input's four bytes
//! into 16 lanes (one per row) in one instruction, and a sub-block's scales are applied once per
//! 16 rows. That halves the instructions per weight against the row loops, which need two
//! (`vpmaddubsw`, `vpmaddwd`) and an add; it is how llama.cpp's prompt path outruns ours.
//!
//! The numbers are the file's: the same quants, scales and minimums, only in another order,
//! and a row's product sums the same integers (its floating-point rounding differs a little from
//! the row loops', as the order of the float operations differs).
//!
//! Tiles are chosen at load when the CPU has AVX-512 VNNI and the matrix has a multiple of 16
//! rows; the portable loops here are the reference for the tests and the fallback.

use crate::kquants::{Q4K, Q6K, Q8K, SUPER};

/// Rows per tile: one 32-bit lane per row in a 512-bit vector.
pub(crate) const ROWS: usize = 16;

/// 16 rows × 256 weights of `Q4_K`. Vector `4s + p` (64 bytes) holds, for each row `r`, bytes
/// `4r..4r + 4`: weights `32s + 8p + k` of row `r` in the low nibbles and `32s + 8p + 4 + k` in
/// the high ones (`k` in 0..4). `scales[16s + r]` and `mins[16s + r]` are sub-block `s`'s
/// integer scale and minimum for row `r`.
#[derive(Debug, Clone)]
pub(crate) struct Q4KTile {
    pub qs: [u8; 2048],
    pub scales: [u8; 128],
    pub mins: [u8; 128],
    pub d: [f32; ROWS],
    pub dmin: [f32; ROWS],
}

/// 16 rows × 256 weights of `Q6_K`, 16 sub-blocks of 16 weights. For sub-block `s`, vector
/// `2s + h` of `ql` holds the low four bits of weights `16s + 8h + k` (low nibbles) and
/// `16s + 8h + 4 + k` (high nibbles) of row `r` in its bytes `4r + k`; byte `4r + k` of vector
/// `s` of `qh` holds the top two bits of weights `16s + 4g + k` at bits `2g` (`g` in 0..4).
#[derive(Debug, Clone)]
pub(crate) struct Q6KTile {
    pub ql: [u8; 2048],
    pub qh: [u8; 1024],
    pub scales: [i8; 256],
    pub d: [f32; ROWS],
}

/// Tiles from row-major blocks (`rows` a multiple of 16, `per_row` blocks a row): tile
/// `t × per_row + b` holds rows `16t..16t + 16` of block column `b`.
pub(crate) fn tile<B: Sync, T: Send>(
    blocks: &[B],
    per_row: usize,
    build: impl Fn([&B; ROWS]) -> T + Sync + Send,
) -> Vec<T> {
    use rayon::prelude::*;
    let tiles = blocks.len() / per_row / ROWS;
    (0..tiles * per_row)
        .into_par_iter()
        .map(|index| {
            let (band, column) = (index / per_row, index % per_row);
            build(std::array::from_fn(|r| {
                &blocks[(band * ROWS + r) * per_row + column]
            }))
        })
        .collect()
}

impl Q4KTile {
    pub(crate) fn new(rows: [&Q4K; ROWS]) -> Self {
        let mut tile = Self {
            qs: [0; 2048],
            scales: [0; 128],
            mins: [0; 128],
            d: rows.map(|block| block.d),
            dmin: rows.map(|block| block.dmin),
        };
        for (r, block) in rows.iter().enumerate() {
            for s in 0..8 {
                tile.scales[16 * s + r] = block.scales[s];
                tile.mins[16 * s + r] = block.scales[8 + s];
                for p in 0..4 {
                    for k in 0..4 {
                        let w = 32 * s + 8 * p + k;
                        tile.qs[64 * (4 * s + p) + 4 * r + k] =
                            block.quant(w) | (block.quant(w + 4) << 4);
                    }
                }
            }
        }
        tile
    }

    /// Row `r`'s quant of weight `w`, 0..16.
    pub(crate) fn quant(&self, r: usize, w: usize) -> u8 {
        let (s, p, k) = (w / 32, (w % 32) / 8, w % 4);
        let byte = self.qs[64 * (4 * s + p) + 4 * r + k];
        if w % 8 >= 4 { byte >> 4 } else { byte & 0x0f }
    }

    /// Row `r`'s 256 weights.
    pub(crate) fn dequantize(&self, r: usize, out: &mut [f32]) {
        for (w, out) in out.iter_mut().enumerate().take(SUPER) {
            let s = w / 32;
            *out = self.d[r] * f32::from(self.scales[16 * s + r]) * f32::from(self.quant(r, w))
                - self.dmin[r] * f32::from(self.mins[16 * s + r]);
        }
    }
}

impl Q6KTile {
    pub(crate) fn new(rows: [&Q6K; ROWS]) -> Self {
        let mut tile = Self {
            ql: [0; 2048],
            qh: [0; 1024],
            scales: [0; 256],
            d: rows.map(|block| block.d),
        };
        for (r, block) in rows.iter().enumerate() {
            for s in 0..16 {
                tile.scales[16 * s + r] = block.scales[s];
                for k in 0..4 {
                    for h in 0..2 {
                        let w = 16 * s + 8 * h + k;
                        tile.ql[64 * (2 * s + h) + 4 * r + k] =
                            (block.quant(w) & 0x0f) | ((block.quant(w + 4) & 0x0f) << 4);
                    }
                    for g in 0..4 {
                        tile.qh[64 * s + 4 * r + k] |=
                            (block.quant(16 * s + 4 * g + k) >> 4) << (2 * g);
                    }
                }
            }
        }
        tile
    }

    /// Row `r`'s quant of weight `w`, 0..64.
    pub(crate) fn quant(&self, r: usize, w: usize) -> u8 {
        let (s, h, k) = (w / 16, (w % 16) / 8, w % 4);
        let byte = self.ql[64 * (2 * s + h) + 4 * r + k];
        let low = if w % 8 >= 4 { byte >> 4 } else { byte & 0x0f };
        let g = (w % 16) / 4;
        low | (((self.qh[64 * s + 4 * r + k] >> (2 * g)) & 3) << 4)
    }

    /// Row `r`'s 256 weights.
    pub(crate) fn dequantize(&self, r: usize, out: &mut [f32]) {
        for (w, out) in out.iter_mut().enumerate().take(SUPER) {
            *out = self.d[r]
                * f32::from(self.scales[16 * (w / 16) + r])
                * (f32::from(self.quant(r, w)) - 32.0);
        }
    }
}

/// The 16 rows of a band of `Q4_K` tiles (one per block column) times `x`, portably.
pub(crate) fn scalar_q4_k(tiles: &[Q4KTile], x: &Q8K) -> [f32; ROWS] {
    let mut out = [0.0; ROWS];
    for (index, tile) in tiles.iter().enumerate() {
        let quants = &x.quants[index * SUPER..(index + 1) * SUPER];
        let sums = &x.sums[index * 16..(index + 1) * 16];
        for (r, out) in out.iter_mut().enumerate() {
            let (mut scaled, mut offsets) = (0i32, 0i32);
            for s in 0..8 {
                let dot: i32 = (32 * s..32 * s + 32)
                    .map(|w| i32::from(tile.quant(r, w)) * i32::from(quants[w]))
                    .sum();
                scaled += i32::from(tile.scales[16 * s + r]) * dot;
                offsets += i32::from(tile.mins[16 * s + r])
                    * (i32::from(sums[2 * s]) + i32::from(sums[2 * s + 1]));
            }
            *out += x.scales[index] * (tile.d[r] * scaled as f32 - tile.dmin[r] * offsets as f32);
        }
    }
    out
}

/// The 16 rows of a band of `Q6_K` tiles times `x`, portably.
pub(crate) fn scalar_q6_k(tiles: &[Q6KTile], x: &Q8K) -> [f32; ROWS] {
    let mut out = [0.0; ROWS];
    for (index, tile) in tiles.iter().enumerate() {
        let quants = &x.quants[index * SUPER..(index + 1) * SUPER];
        for (r, out) in out.iter_mut().enumerate() {
            let mut scaled = 0i32;
            for s in 0..16 {
                let dot: i32 = (16 * s..16 * s + 16)
                    .map(|w| (i32::from(tile.quant(r, w)) - 32) * i32::from(quants[w]))
                    .sum();
                scaled += i32::from(tile.scales[16 * s + r]) * dot;
            }
            *out += x.scales[index] * tile.d[r] * scaled as f32;
        }
    }
    out
}

/// Whether this CPU runs the tile loops (AVX-512 F, BW and VNNI), checked once.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AVAILABLE.get_or_init(|| {
            std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vnni")
                && std::env::var("AGENTIC_LOCAL_TILES").map_or(true, |value| value != "0")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// What the loops need of a tile format.
pub(crate) trait Tile: Sized {
    /// Row `r`'s 256 weights.
    fn dequantize(&self, r: usize, out: &mut [f32]);
    /// A band of tiles times `x`, portably.
    fn scalar(tiles: &[Self], x: &Q8K) -> [f32; ROWS];
    /// The AVX-512 VNNI loops for `N` inputs, which only a CPU with AVX-512 F, BW and VNNI
    /// may run.
    #[cfg(target_arch = "x86_64")]
    fn vnni<const N: usize>() -> unsafe fn(&[Self], [&Q8K; N]) -> [[f32; ROWS]; N];
}

impl Tile for Q4KTile {
    fn dequantize(&self, r: usize, out: &mut [f32]) {
        Q4KTile::dequantize(self, r, out);
    }
    fn scalar(tiles: &[Self], x: &Q8K) -> [f32; ROWS] {
        scalar_q4_k(tiles, x)
    }
    #[cfg(target_arch = "x86_64")]
    fn vnni<const N: usize>() -> unsafe fn(&[Self], [&Q8K; N]) -> [[f32; ROWS]; N] {
        vnni::q4_k::<N>
    }
}

impl Tile for Q6KTile {
    fn dequantize(&self, r: usize, out: &mut [f32]) {
        Q6KTile::dequantize(self, r, out);
    }
    fn scalar(tiles: &[Self], x: &Q8K) -> [f32; ROWS] {
        scalar_q6_k(tiles, x)
    }
    #[cfg(target_arch = "x86_64")]
    fn vnni<const N: usize>() -> unsafe fn(&[Self], [&Q8K; N]) -> [[f32; ROWS]; N] {
        vnni::q6_k::<N>
    }
}

/// A band of tiles times `N` inputs: `N` results of 16 rows. The VNNI loops when
/// [`available`], the portable ones otherwise.
pub(crate) fn product<T: Tile, const N: usize>(tiles: &[T], xs: [&Q8K; N]) -> [[f32; ROWS]; N] {
    #[cfg(target_arch = "x86_64")]
    if available() {
        // SAFETY: `available` checked that the CPU has every feature the VNNI loops are
        // compiled with (AVX-512 F, BW and VNNI); the loops themselves do nothing unsafe.
        #[allow(unsafe_code)]
        return unsafe { T::vnni::<N>()(tiles, xs) };
    }
    xs.map(|x| T::scalar(tiles, x))
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use std::arch::x86_64::{
        __m128i, __m512, __m512i, _mm512_and_si512, _mm512_cvtepi8_epi32, _mm512_cvtepi32_ps,
        _mm512_cvtepu8_epi32, _mm512_dpbusd_epi32, _mm512_fmadd_ps, _mm512_fnmadd_ps,
        _mm512_mul_ps, _mm512_or_si512, _mm512_set1_epi8, _mm512_set1_epi32, _mm512_set1_ps,
        _mm512_setzero_ps, _mm512_setzero_si512, _mm512_slli_epi16, _mm512_srli_epi16,
    };

    use super::{Q4KTile, Q6KTile, ROWS};
    use crate::kernels::load;
    use crate::kquants::{Q8K, SUPER};

    /// Four input bytes from `at`, in every 32-bit lane.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn four(quants: &[i8; SUPER], at: usize) -> __m512i {
        _mm512_set1_epi32(load::<i32, i8>(&quants[at..]))
    }

    /// Input block `index`'s 256 quants.
    fn block_of(x: &Q8K, index: usize) -> &[i8; SUPER] {
        &x.quants.as_chunks::<SUPER>().0[index]
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) fn q4_k<const N: usize>(tiles: &[Q4KTile], xs: [&Q8K; N]) -> [[f32; ROWS]; N] {
        let mask = _mm512_set1_epi8(0x0f);
        let mut acc: [__m512; N] = [_mm512_setzero_ps(); N];
        for (index, tile) in tiles.iter().enumerate() {
            let quants = xs.map(|x| block_of(x, index));
            let mut scaled = [_mm512_setzero_ps(); N];
            let mut offsets = [_mm512_setzero_ps(); N];
            for s in 0..8 {
                let mut sums = [_mm512_setzero_si512(); N];
                for p in 0..4 {
                    let bits: __m512i = load(&tile.qs[64 * (4 * s + p)..]);
                    let low = _mm512_and_si512(bits, mask);
                    let high = _mm512_and_si512(_mm512_srli_epi16::<4>(bits), mask);
                    for token in 0..N {
                        let at = 32 * s + 8 * p;
                        sums[token] =
                            _mm512_dpbusd_epi32(sums[token], low, four(quants[token], at));
                        sums[token] =
                            _mm512_dpbusd_epi32(sums[token], high, four(quants[token], at + 4));
                    }
                }
                let scales = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(load::<__m128i, u8>(
                    &tile.scales[16 * s..],
                )));
                let mins = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(load::<__m128i, u8>(
                    &tile.mins[16 * s..],
                )));
                for token in 0..N {
                    let x = xs[token];
                    let run = &x.sums[index * 16 + 2 * s..index * 16 + 2 * s + 2];
                    let run = f32::from(run[0]) + f32::from(run[1]);
                    scaled[token] =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[token]), scales, scaled[token]);
                    offsets[token] = _mm512_fmadd_ps(mins, _mm512_set1_ps(run), offsets[token]);
                }
            }
            let d: __m512 = load(&tile.d);
            let dmin: __m512 = load(&tile.dmin);
            for token in 0..N {
                let scale = _mm512_set1_ps(xs[token].scales[index]);
                acc[token] = _mm512_fmadd_ps(scaled[token], _mm512_mul_ps(d, scale), acc[token]);
                acc[token] =
                    _mm512_fnmadd_ps(offsets[token], _mm512_mul_ps(dmin, scale), acc[token]);
            }
        }
        acc.map(pulp::cast)
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) fn q6_k<const N: usize>(tiles: &[Q6KTile], xs: [&Q8K; N]) -> [[f32; ROWS]; N] {
        let low_mask = _mm512_set1_epi8(0x0f);
        let top_mask = _mm512_set1_epi8(0x30);
        let mut acc: [__m512; N] = [_mm512_setzero_ps(); N];
        for (index, tile) in tiles.iter().enumerate() {
            let quants = xs.map(|x| block_of(x, index));
            let mut scaled = [_mm512_setzero_ps(); N];
            for s in 0..16 {
                let first: __m512i = load(&tile.ql[64 * 2 * s..]);
                let second: __m512i = load(&tile.ql[64 * (2 * s + 1)..]);
                let qh: __m512i = load(&tile.qh[64 * s..]);
                let top = |bits: __m512i| _mm512_and_si512(bits, top_mask);
                let groups = [
                    _mm512_or_si512(
                        _mm512_and_si512(first, low_mask),
                        top(_mm512_slli_epi16::<4>(qh)),
                    ),
                    _mm512_or_si512(
                        _mm512_and_si512(_mm512_srli_epi16::<4>(first), low_mask),
                        top(_mm512_slli_epi16::<2>(qh)),
                    ),
                    _mm512_or_si512(_mm512_and_si512(second, low_mask), top(qh)),
                    _mm512_or_si512(
                        _mm512_and_si512(_mm512_srli_epi16::<4>(second), low_mask),
                        top(_mm512_srli_epi16::<2>(qh)),
                    ),
                ];
                let scales = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load::<__m128i, i8>(
                    &tile.scales[16 * s..],
                )));
                for token in 0..N {
                    // Every quant carries an offset of 32: start from −32 × the inputs' sum.
                    let offset = -32 * i32::from(xs[token].sums[index * 16 + s]);
                    let mut sum = _mm512_set1_epi32(offset);
                    for (g, group) in groups.iter().enumerate() {
                        sum = _mm512_dpbusd_epi32(sum, *group, four(quants[token], 16 * s + 4 * g));
                    }
                    scaled[token] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scales, scaled[token]);
                }
            }
            let d: __m512 = load(&tile.d);
            for token in 0..N {
                let scale = _mm512_set1_ps(xs[token].scales[index]);
                acc[token] = _mm512_fmadd_ps(scaled[token], _mm512_mul_ps(d, scale), acc[token]);
            }
        }
        acc.map(pulp::cast)
    }
}
