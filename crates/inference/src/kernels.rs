//! Quantised matrix × vector products for single-token steps, and the small vector helpers of
//! the step (dot products, scaled adds), all in safe Rust.
//!
//! A generated token reads every weight once, so a step is bounded by memory traffic and by the
//! number of passes over the weights. Two formats are kept in the layout the loops want:
//! - `Q4_1` as the model file ships it (16 bytes of 4-bit values, a scale and a minimum per block
//!   of 32): 0.75 bytes a weight with the scale and minimum widened to `f32`, and exactly the
//!   numbers of the file. `Q4_0` becomes `Q4_1` without loss (its minimum is `-8 × scale`).
//! - `Q8_0` (32 signed bytes and a scale per block), for the 5- and 8-bit formats.
//!
//! The input vector is quantised to 8 bits per block of 32, as llama.cpp and candle do, so a block
//! product is an integer dot product and one multiply-add.
//!
//! On x86-64 CPUs with AVX2 and FMA (detected at run time) the loops run on 256-bit integer
//! instructions through `pulp`, which keeps the SIMD code safe; elsewhere they are plain Rust.
//! Rows are split across the rayon pool.

use rayon::prelude::*;

use crate::kquants::{self, Q4K, Q6K, Q8K, SUPER};
use crate::tiles::{self, Q4KTile, Q6KTile, Tile};

/// The vector loads and sums the k-quant loops share with ours.
#[cfg(target_arch = "x86_64")]
pub(crate) use simd::avx2::{load, sum8};

/// Values per quantisation block.
pub const BLOCK: usize = 32;

/// Rows of a product handed to one rayon task.
const ROWS_PER_TASK: usize = 64;

/// Tokens of a batched product whose inputs a task keeps close while it walks its rows.
const TOKENS_PER_PASS: usize = 16;

/// A row-major weight matrix `[rows, cols]` in one of the two kernel formats.
#[derive(Debug, Clone)]
pub struct QuantMatrix {
    rows: usize,
    cols: usize,
    format: Format,
}

#[derive(Debug, Clone)]
enum Format {
    /// `scales[b] × quants[b·32 + i]`.
    Q8_0 {
        quants: Vec<i8>,
        scales: Vec<f32>,
    },
    /// `scales[b] × q + mins[b]`, `q` in 0..16: byte `j` of a block holds value `j` in its low
    /// nibble and value `j + 16` in its high one (the GGUF layout).
    Q4_1 {
        nibbles: Vec<u8>,
        scales: Vec<f32>,
        mins: Vec<f32>,
    },
    /// The k-quants as shipped, blocks of 256 (see [`crate::kquants`]).
    Q4K(Vec<Q4K>),
    Q6K(Vec<Q6K>),
    /// The k-quants in tiles of 16 rows (see [`crate::tiles`]), where the CPU has AVX-512
    /// VNNI: tile `t × (cols / 256) + b` is rows `16t..16t + 16` of block column `b`.
    Q4KTiles(Vec<Q4KTile>),
    Q6KTiles(Vec<Q6KTile>),
}

impl Format {
    /// Appends `other`'s rows; false when the formats differ.
    fn append(&mut self, other: &Self) -> bool {
        match (self, other) {
            (
                Self::Q8_0 { quants, scales },
                Self::Q8_0 {
                    quants: q,
                    scales: s,
                },
            ) => {
                quants.extend_from_slice(q);
                scales.extend_from_slice(s);
                true
            }
            (
                Self::Q4_1 {
                    nibbles,
                    scales,
                    mins,
                },
                Self::Q4_1 {
                    nibbles: n,
                    scales: s,
                    mins: m,
                },
            ) => {
                nibbles.extend_from_slice(n);
                scales.extend_from_slice(s);
                mins.extend_from_slice(m);
                true
            }
            (Self::Q4K(blocks), Self::Q4K(other)) => {
                blocks.extend_from_slice(other);
                true
            }
            (Self::Q6K(blocks), Self::Q6K(other)) => {
                blocks.extend_from_slice(other);
                true
            }
            // Whole tiles: every tiled matrix has a multiple of 16 rows.
            (Self::Q4KTiles(tiles), Self::Q4KTiles(other)) => {
                tiles.extend_from_slice(other);
                true
            }
            (Self::Q6KTiles(tiles), Self::Q6KTiles(other)) => {
                tiles.extend_from_slice(other);
                true
            }
            _ => false,
        }
    }
}

/// The input vector quantised to 8 bits per block: blocks of 32 for `Q4_1` and `Q8_0`
/// weights, of 256 (`Q8_K`) for the k-quants.
#[derive(Debug, Default, Clone)]
pub struct QuantVector {
    quants: Vec<i8>,
    scales: Vec<f32>,
    /// `scale × Σ quants` per block, for the minimum term of `Q4_1`.
    sums: Vec<f32>,
    k: Q8K,
}

pub(crate) fn f16(bytes: [u8; 2]) -> f32 {
    half::f16::from_le_bytes(bytes).to_f32()
}

impl QuantMatrix {
    /// Reads GGUF blocks of `Q8_0` (34 bytes: f16 scale, 32 × i8).
    pub fn from_q8_0(rows: usize, cols: usize, data: &[u8]) -> Option<Self> {
        let blocks = check(rows, cols, data, 34)?;
        let mut quants = Vec::with_capacity(rows * cols);
        let mut scales = Vec::with_capacity(blocks);
        for block in data.chunks_exact(34) {
            scales.push(f16([block[0], block[1]]));
            quants.extend(block[2..].iter().map(|byte| i8::from_le_bytes([*byte])));
        }
        Some(Self {
            rows,
            cols,
            format: Format::Q8_0 { quants, scales },
        })
    }

    /// Reads GGUF blocks of `Q4_1` (20 bytes: f16 scale, f16 minimum, 16 bytes of nibbles).
    pub fn from_q4_1(rows: usize, cols: usize, data: &[u8]) -> Option<Self> {
        Self::from_nibble_blocks(rows, cols, data, 20, |block| {
            (f16([block[0], block[1]]), f16([block[2], block[3]]))
        })
    }

    /// Reads GGUF blocks of `Q4_0` (18 bytes: f16 scale, 16 bytes of nibbles holding `q + 8`):
    /// the same numbers as `Q4_1` with a minimum of `-8 × scale`.
    pub fn from_q4_0(rows: usize, cols: usize, data: &[u8]) -> Option<Self> {
        Self::from_nibble_blocks(rows, cols, data, 18, |block| {
            let scale = f16([block[0], block[1]]);
            (scale, -8.0 * scale)
        })
    }

    /// Blocks of `block_bytes` that end in 16 bytes of nibbles; `header` reads a block's scale
    /// and minimum.
    fn from_nibble_blocks(
        rows: usize,
        cols: usize,
        data: &[u8],
        block_bytes: usize,
        header: impl Fn(&[u8]) -> (f32, f32),
    ) -> Option<Self> {
        let blocks = check(rows, cols, data, block_bytes)?;
        let mut nibbles = Vec::with_capacity(rows * cols / 2);
        let mut scales = Vec::with_capacity(blocks);
        let mut mins = Vec::with_capacity(blocks);
        for block in data.chunks_exact(block_bytes) {
            let (scale, min) = header(block);
            scales.push(scale);
            mins.push(min);
            nibbles.extend_from_slice(&block[block_bytes - BLOCK / 2..]);
        }
        Some(Self {
            rows,
            cols,
            format: Format::Q4_1 {
                nibbles,
                scales,
                mins,
            },
        })
    }

    /// Reads GGUF blocks of `Q4_K` (144 bytes per 256 weights), in tiles where
    /// `Self::tiled` says so.
    pub fn from_q4_k(rows: usize, cols: usize, data: &[u8]) -> Option<Self> {
        Self::read_q4_k(rows, cols, data, Self::tiled(rows))
    }

    fn read_q4_k(rows: usize, cols: usize, data: &[u8], tiled: bool) -> Option<Self> {
        let blocks = kquants::read_blocks(rows, cols, data, kquants::Q4K_BYTES, Q4K::read)?;
        let format = if tiled {
            Format::Q4KTiles(tiles::tile(&blocks, cols / SUPER, Q4KTile::new))
        } else {
            Format::Q4K(blocks)
        };
        Some(Self { rows, cols, format })
    }

    /// Reads GGUF blocks of `Q6_K` (210 bytes per 256 weights), in tiles where
    /// `Self::tiled` says so.
    pub fn from_q6_k(rows: usize, cols: usize, data: &[u8]) -> Option<Self> {
        Self::read_q6_k(rows, cols, data, Self::tiled(rows))
    }

    fn read_q6_k(rows: usize, cols: usize, data: &[u8], tiled: bool) -> Option<Self> {
        let blocks = kquants::read_blocks(rows, cols, data, kquants::Q6K_BYTES, Q6K::read)?;
        let format = if tiled {
            Format::Q6KTiles(tiles::tile(&blocks, cols / SUPER, Q6KTile::new))
        } else {
            Format::Q6K(blocks)
        };
        Some(Self { rows, cols, format })
    }

    /// Whether a k-quant matrix of `rows` rows goes in tiles: on CPUs with AVX-512 VNNI
    /// (`AGENTIC_LOCAL_TILES=0` says no, to compare), for whole tiles of 16 rows.
    fn tiled(rows: usize) -> bool {
        rows.is_multiple_of(tiles::ROWS) && tiles::available()
    }

    /// Quantises `values` (`rows × cols`, row-major) to `Q8_0`.
    pub fn quantize_q8_0(rows: usize, cols: usize, values: &[f32]) -> Option<Self> {
        if !cols.is_multiple_of(BLOCK) || values.len() != rows * cols {
            return None;
        }
        let mut vector = QuantVector::default();
        vector.quantize(values);
        Some(Self {
            rows,
            cols,
            format: Format::Q8_0 {
                quants: vector.quants,
                scales: vector.scales,
            },
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Stacks matrices of the same width and format row-wise (fused projections).
    pub fn stack(parts: &[Self]) -> Option<Self> {
        let (first, rest) = parts.split_first()?;
        let mut stacked = first.clone();
        for part in rest {
            if part.cols != stacked.cols || !stacked.format.append(&part.format) {
                return None;
            }
            stacked.rows += part.rows;
        }
        Some(stacked)
    }

    /// Row `row` as `f32` values, written into `out` (`cols` long).
    pub fn row_into(&self, row: usize, out: &mut [f32]) {
        let first = row * (self.cols / BLOCK);
        match &self.format {
            Format::Q4K(blocks) => dequantize_row(row_blocks(blocks, self.cols, row), out),
            Format::Q6K(blocks) => dequantize_row(row_blocks(blocks, self.cols, row), out),
            Format::Q4KTiles(tiles) => dequantize_band_row(tiles, self.cols, row, out),
            Format::Q6KTiles(tiles) => dequantize_band_row(tiles, self.cols, row, out),
            Format::Q8_0 { quants, scales } => {
                for (index, values) in (first..).zip(out.chunks_exact_mut(BLOCK)) {
                    let quants = &quants[index * BLOCK..(index + 1) * BLOCK];
                    for (value, quant) in values.iter_mut().zip(quants) {
                        *value = scales[index] * f32::from(*quant);
                    }
                }
            }
            Format::Q4_1 {
                nibbles,
                scales,
                mins,
            } => {
                for (index, values) in (first..).zip(out.chunks_exact_mut(BLOCK)) {
                    let bytes = &nibbles[index * BLOCK / 2..(index + 1) * BLOCK / 2];
                    let (low, high) = values.split_at_mut(BLOCK / 2);
                    for ((low, high), byte) in low.iter_mut().zip(high).zip(bytes) {
                        *low = scales[index] * f32::from(byte & 0x0f) + mins[index];
                        *high = scales[index] * f32::from(byte >> 4) + mins[index];
                    }
                }
            }
        }
    }

    /// How inputs to this matrix are quantised.
    fn wants_k(&self) -> bool {
        matches!(
            self.format,
            Format::Q4K(_) | Format::Q6K(_) | Format::Q4KTiles(_) | Format::Q6KTiles(_)
        )
    }

    /// Quantises `values` (`cols` long) into `x` the way this matrix's loops read it.
    pub fn quantize_input(&self, values: &[f32], x: &mut QuantVector) {
        if self.wants_k() {
            x.k.quantize(values);
        } else {
            x.quantize(values);
        }
    }

    /// `out = self × x`, with `x` quantised by [`Self::quantize_input`]. Rows are split into
    /// tasks for the rayon pool; each task runs its rows in one vectorised call.
    pub fn matvec(&self, x: &QuantVector, out: &mut [f32]) {
        debug_assert_eq!(out.len(), self.rows);
        out.par_chunks_mut(ROWS_PER_TASK)
            .enumerate()
            .for_each(|(task, out)| {
                simd::run(Rows {
                    matrix: self,
                    first: task * ROWS_PER_TASK,
                    inputs: std::slice::from_ref(x),
                    out,
                });
            });
    }

    /// The products of `self` with many inputs at once (a prompt's tokens): `inputs` is
    /// `tokens × cols` row-major, `out` receives `tokens × rows`. Each token's numbers are
    /// exactly those [`Self::matvec`] gives it alone; the batch only reads every weight once
    /// for all of them.
    pub fn matmul(&self, inputs: &[f32], out: &mut [f32]) {
        let tokens = inputs.len() / self.cols;
        debug_assert_eq!(out.len(), tokens * self.rows);
        let quantized: Vec<QuantVector> = inputs
            .par_chunks_exact(self.cols)
            .map(|values| {
                let mut x = QuantVector::default();
                self.quantize_input(values, &mut x);
                x
            })
            .collect();
        // Row-major per task (`rows × tokens`), then turned around.
        let mut by_row = vec![0.0f32; self.rows * tokens];
        by_row
            .par_chunks_mut(ROWS_PER_TASK * tokens)
            .enumerate()
            .for_each(|(task, out)| {
                simd::run(Rows {
                    matrix: self,
                    first: task * ROWS_PER_TASK,
                    inputs: &quantized,
                    out,
                });
            });
        // Each task turns around a band of tokens, reading runs of them per row.
        out.par_chunks_mut(TOKENS_PER_PASS * self.rows)
            .enumerate()
            .for_each(|(band, out)| {
                let first = band * TOKENS_PER_PASS;
                let count = out.len() / self.rows;
                for (row, values) in by_row.chunks_exact(tokens).enumerate() {
                    for (offset, value) in values[first..first + count].iter().enumerate() {
                        out[offset * self.rows + row] = *value;
                    }
                }
            });
    }
}

/// Rows `first..` of a product with one or more inputs: `out` is `rows × inputs`, row-major.
struct Rows<'a> {
    matrix: &'a QuantMatrix,
    first: usize,
    inputs: &'a [QuantVector],
    out: &'a mut [f32],
}

impl simd::Kernel for Rows<'_> {
    type Output = ();

    #[inline(always)]
    fn run<I: Isa>(self, isa: I) {
        let Rows {
            matrix,
            first,
            inputs,
            out,
        } = self;
        // `Q6_K` unpacks more per weight, so it shares each unpacking among more inputs.
        match &matrix.format {
            Format::Q6K(_) => rows_in_tiles::<I, 8>(isa, matrix, first, inputs, out),
            Format::Q4KTiles(tiles) => bands(tiles, matrix.cols, first, inputs, out),
            Format::Q6KTiles(tiles) => bands(tiles, matrix.cols, first, inputs, out),
            _ => rows_in_tiles::<I, 4>(isa, matrix, first, inputs, out),
        }
    }
}

/// [`Rows`] with `TILE` inputs per call of the row loops.
#[inline(always)]
fn rows_in_tiles<I: Isa, const TILE: usize>(
    isa: I,
    matrix: &QuantMatrix,
    first: usize,
    inputs: &[QuantVector],
    out: &mut [f32],
) {
    let width = inputs.len();
    let count = out.len() / width;
    // A pass takes a few inputs across all the task's rows, so the rows stay in cache; the
    // k-quant loops take `TILE` inputs per call and unpack each weight once for them.
    for pass in (0..width).step_by(TOKENS_PER_PASS) {
        let end = (pass + TOKENS_PER_PASS).min(width);
        for index in 0..count {
            let row = first + index;
            let out = &mut out[index * width..(index + 1) * width];
            let mut token = pass;
            while token + TILE <= end {
                let xs: [&QuantVector; TILE] =
                    std::array::from_fn(|offset| &inputs[token + offset]);
                out[token..token + TILE].copy_from_slice(&row_dots(isa, matrix, row, xs));
                token += TILE;
            }
            for token in token..end {
                [out[token]] = row_dots(isa, matrix, row, [&inputs[token]]);
            }
        }
    }
}

/// Inputs per call of the tile loops (each unpacked weight serves them all).
const TOKENS_PER_TILE: usize = 4;

/// The tiles holding row `row` of a tiled matrix `cols` wide: one per block column.
fn band<T>(tiles: &[T], cols: usize, row: usize) -> &[T] {
    let per_row = cols / SUPER;
    let first = row / tiles::ROWS * per_row;
    &tiles[first..first + per_row]
}

/// [`Rows`] of a tiled matrix: `first` and the number of rows are multiples of 16. As in
/// [`rows_in_tiles`], a pass takes a few inputs across all the task's rows.
fn bands<T: Tile>(tiles: &[T], cols: usize, first: usize, inputs: &[QuantVector], out: &mut [f32]) {
    let width = inputs.len();
    let count = out.len() / width;
    let mut store = |row: usize, token: usize, values: [f32; tiles::ROWS]| {
        for (offset, value) in values.into_iter().enumerate() {
            out[(row + offset) * width + token] = value;
        }
    };
    for pass in (0..width).step_by(TOKENS_PER_PASS) {
        let end = (pass + TOKENS_PER_PASS).min(width);
        for row in (0..count).step_by(tiles::ROWS) {
            let tiles = band(tiles, cols, first + row);
            let mut token = pass;
            while token + TOKENS_PER_TILE <= end {
                let xs: [&Q8K; TOKENS_PER_TILE] =
                    std::array::from_fn(|offset| &inputs[token + offset].k);
                for (offset, values) in tiles::product(tiles, xs).into_iter().enumerate() {
                    store(row, token + offset, values);
                }
                token += TOKENS_PER_TILE;
            }
            for (token, input) in inputs.iter().enumerate().take(end).skip(token) {
                let [values] = tiles::product(tiles, [&input.k]);
                store(row, token, values);
            }
        }
    }
}

/// Row `row` of a tiled matrix `cols` wide, as `f32` values.
fn dequantize_band_row<T: Tile>(tiles: &[T], cols: usize, row: usize, out: &mut [f32]) {
    for (tile, out) in band(tiles, cols, row)
        .iter()
        .zip(out.chunks_exact_mut(SUPER))
    {
        tile.dequantize(row % tiles::ROWS, out);
    }
}

/// Row `row` of a tiled matrix times each of `xs` (tiled products go through [`bands`]; this
/// is for anything that asks for one row).
fn band_row_dots<T: Tile, const N: usize>(
    tiles: &[T],
    cols: usize,
    row: usize,
    xs: [&QuantVector; N],
) -> [f32; N] {
    tiles::product(band(tiles, cols, row), xs.map(|x| &x.k)).map(|values| values[row % tiles::ROWS])
}

/// The k-quant blocks of row `row` of a matrix `cols` wide.
#[inline(always)]
fn row_blocks<B>(blocks: &[B], cols: usize, row: usize) -> &[B] {
    let per_row = cols / SUPER;
    &blocks[row * per_row..(row + 1) * per_row]
}

/// A row's k-quant blocks as `f32` values.
fn dequantize_row<B: kquants::Block>(blocks: &[B], out: &mut [f32]) {
    for (block, out) in blocks.iter().zip(out.chunks_exact_mut(SUPER)) {
        block.dequantize(out);
    }
}

/// Row `row` of `matrix` times each of `xs`.
#[inline(always)]
fn row_dots<I: Isa, const N: usize>(
    isa: I,
    matrix: &QuantMatrix,
    row: usize,
    xs: [&QuantVector; N],
) -> [f32; N] {
    match &matrix.format {
        Format::Q4K(blocks) => isa.dot_q4_k(row_blocks(blocks, matrix.cols, row), xs.map(|x| &x.k)),
        Format::Q6K(blocks) => isa.dot_q6_k(row_blocks(blocks, matrix.cols, row), xs.map(|x| &x.k)),
        Format::Q4KTiles(tiles) => band_row_dots(tiles, matrix.cols, row, xs),
        Format::Q6KTiles(tiles) => band_row_dots(tiles, matrix.cols, row, xs),
        Format::Q8_0 { .. } | Format::Q4_1 { .. } => {
            // A loop, not `map`: a closure would be compiled without the SIMD features.
            let mut out = [0.0; N];
            for (out, x) in out.iter_mut().zip(xs) {
                *out = row_dot(isa, matrix, row, x);
            }
            out
        }
    }
}

/// Row `row` of a `Q8_0` or `Q4_1` matrix times `x`.
#[inline(always)]
fn row_dot<I: Isa>(isa: I, matrix: &QuantMatrix, row: usize, x: &QuantVector) -> f32 {
    let blocks = matrix.cols / BLOCK;
    let range = row * blocks..(row + 1) * blocks;
    match &matrix.format {
        Format::Q8_0 { quants, scales } => isa.dot_q8_0(
            &quants[range.start * BLOCK..range.end * BLOCK],
            &scales[range],
            x,
        ),
        Format::Q4_1 {
            nibbles,
            scales,
            mins,
        } => isa.dot_q4_1(
            &nibbles[range.start * BLOCK / 2..range.end * BLOCK / 2],
            &scales[range.clone()],
            &mins[range],
            x,
        ),
        Format::Q4K(_) | Format::Q6K(_) | Format::Q4KTiles(_) | Format::Q6KTiles(_) => {
            row_dots(isa, matrix, row, [x])[0]
        }
    }
}

fn check(rows: usize, cols: usize, data: &[u8], block_bytes: usize) -> Option<usize> {
    let blocks = rows.checked_mul(cols)? / BLOCK;
    (cols.is_multiple_of(BLOCK) && data.len() == blocks.checked_mul(block_bytes)?).then_some(blocks)
}

impl QuantVector {
    /// Quantises `values` (a multiple of 32 long) block by block: the scale is the block's
    /// largest magnitude over 127.
    pub fn quantize(&mut self, values: &[f32]) {
        let blocks = values.len() / BLOCK;
        self.quants.resize(values.len(), 0);
        self.scales.resize(blocks, 0.0);
        self.sums.resize(blocks, 0.0);
        for (block, (values, quants)) in values
            .chunks_exact(BLOCK)
            .zip(self.quants.chunks_exact_mut(BLOCK))
            .enumerate()
        {
            let scale = quantize_block(values, quants);
            let sum: i32 = quants.iter().map(|quant| i32::from(*quant)).sum();
            self.scales[block] = scale;
            self.sums[block] = scale * sum as f32;
        }
    }
}

/// `values` as signed bytes in `quants`, scaled so the largest magnitude is 127; returns the
/// scale (0 for a block of zeros).
pub(crate) fn quantize_block(values: &[f32], quants: &mut [i8]) -> f32 {
    let largest = values
        .iter()
        .fold(0.0f32, |max, value| max.max(value.abs()));
    let scale = largest / 127.0;
    let inverse = if scale == 0.0 { 0.0 } else { 1.0 / scale };
    for (quant, value) in quants.iter_mut().zip(values) {
        // In range by construction: |value × inverse| ≤ 127.
        *quant = nearest(value * inverse) as i8;
    }
    scale
}

/// `x` rounded to the nearest integer (ties to even) for `|x| < 2^22`, in plain arithmetic
/// that vectorises (`f32::round` is a libm call on baseline x86-64): adding 1.5 × 2^23 leaves
/// the integer in the low bits of the mantissa.
#[inline(always)]
fn nearest(x: f32) -> i32 {
    const MAGIC: f32 = 12_582_912.0;
    (x + MAGIC).to_bits() as i32 - MAGIC.to_bits() as i32
}

/// The query heads that share one key/value head, over a range of cached positions. Keys and
/// values are read once for all of them.
#[derive(Debug)]
pub struct Attend<'a> {
    /// `heads × dim` values, one query head after the other.
    pub queries: &'a [f32],
    pub dim: usize,
    /// Key and value caches from this group's slot of position 0; a position every `stride`.
    pub keys: &'a [f32],
    pub values: &'a [f32],
    pub stride: usize,
    pub positions: std::ops::Range<usize>,
    pub scale: f32,
}

/// What [`attend`] computes for a range of positions: per query head, the largest score, the
/// sum of `exp(score − largest)` and the values weighted by those exponentials. Ranges merge
/// with [`Partial::merge`] (the usual split softmax).
#[derive(Debug, Clone, PartialEq)]
pub struct Partial {
    pub largest: Vec<f32>,
    pub sums: Vec<f32>,
    pub weighted: Vec<f32>,
}

impl Partial {
    /// Folds `other` (the same heads, other positions) into `self`.
    pub fn merge(&mut self, other: &Self) {
        let dim = self.weighted.len() / self.largest.len().max(1);
        for head in 0..self.largest.len() {
            let largest = self.largest[head].max(other.largest[head]);
            let (mine, theirs) = (
                (self.largest[head] - largest).exp(),
                (other.largest[head] - largest).exp(),
            );
            self.sums[head] = self.sums[head] * mine + other.sums[head] * theirs;
            let range = head * dim..(head + 1) * dim;
            for (value, other) in self.weighted[range.clone()]
                .iter_mut()
                .zip(&other.weighted[range])
            {
                *value = *value * mine + other * theirs;
            }
            self.largest[head] = largest;
        }
    }

    /// The attention output of each head, `heads × dim`.
    pub fn finish(&self, out: &mut [f32]) {
        let dim = self.weighted.len() / self.largest.len().max(1);
        for (head, out) in out.chunks_exact_mut(dim).enumerate() {
            let inverse = 1.0 / self.sums[head];
            for (out, value) in out.iter_mut().zip(&self.weighted[head * dim..]) {
                *out = value * inverse;
            }
        }
    }
}

/// `softmax(scale × query · keys) · values` for each query head of a group, over a range of
/// positions.
pub fn attend(group: Attend<'_>) -> Partial {
    simd::run(group)
}

impl simd::Kernel for Attend<'_> {
    type Output = Partial;

    #[inline(always)]
    fn run<I: Isa>(self, isa: I) -> Partial {
        isa.attend(self)
    }
}

#[inline(always)]
fn attend_loops(group: Attend<'_>, isa: impl Isa) -> Partial {
    let Attend {
        queries,
        dim,
        keys,
        values,
        stride,
        positions,
        scale,
    } = group;
    let heads = queries.len() / dim;
    let count = positions.len();
    // scores[head × count + i] for position `positions.start + i`.
    let mut scores = vec![0.0f32; heads * count];
    for (index, position) in positions.clone().enumerate() {
        let key = &keys[position * stride..position * stride + dim];
        for head in 0..heads {
            scores[head * count + index] =
                isa.dot(&queries[head * dim..(head + 1) * dim], key) * scale;
        }
    }
    let mut largest = vec![f32::NEG_INFINITY; heads];
    let mut sums = vec![0.0f32; heads];
    for head in 0..heads {
        let row = &mut scores[head * count..(head + 1) * count];
        let top = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for score in row.iter_mut() {
            *score = (*score - top).exp();
            sum += *score;
        }
        largest[head] = top;
        sums[head] = sum;
    }
    let mut weighted = vec![0.0f32; heads * dim];
    for (index, position) in positions.enumerate() {
        let value = &values[position * stride..position * stride + dim];
        for head in 0..heads {
            add_scaled(
                &mut weighted[head * dim..(head + 1) * dim],
                scores[head * count + index],
                value,
            );
        }
    }
    Partial {
        largest,
        sums,
        weighted,
    }
}

/// The inner loops, per instruction set: portable Rust, or AVX2 + FMA.
trait Isa: Copy {
    fn dot(self, a: &[f32], b: &[f32]) -> f32;
    fn dot_q8_0(self, quants: &[i8], scales: &[f32], x: &QuantVector) -> f32;
    fn dot_q4_1(self, nibbles: &[u8], scales: &[f32], mins: &[f32], x: &QuantVector) -> f32;
    fn dot_q4_k<const N: usize>(self, blocks: &[Q4K], xs: [&Q8K; N]) -> [f32; N];
    fn dot_q6_k<const N: usize>(self, blocks: &[Q6K], xs: [&Q8K; N]) -> [f32; N];
    #[inline(always)]
    fn attend(self, group: Attend<'_>) -> Partial {
        attend_loops(group, self)
    }
}

#[derive(Clone, Copy)]
struct Portable;

impl Isa for Portable {
    #[inline(always)]
    fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        dot(a, b)
    }
    #[inline(always)]
    fn dot_q8_0(self, quants: &[i8], scales: &[f32], x: &QuantVector) -> f32 {
        simd::scalar_dot_q8_0(quants, scales, x)
    }
    #[inline(always)]
    fn dot_q4_1(self, nibbles: &[u8], scales: &[f32], mins: &[f32], x: &QuantVector) -> f32 {
        simd::scalar_dot_q4_1(nibbles, scales, mins, x)
    }
    #[inline(always)]
    fn dot_q4_k<const N: usize>(self, blocks: &[Q4K], xs: [&Q8K; N]) -> [f32; N] {
        xs.map(|x| kquants::scalar_dot_q4_k(blocks, x))
    }
    #[inline(always)]
    fn dot_q6_k<const N: usize>(self, blocks: &[Q6K], xs: [&Q8K; N]) -> [f32; N] {
        xs.map(|x| kquants::scalar_dot_q6_k(blocks, x))
    }
}

#[cfg(target_arch = "x86_64")]
impl Isa for pulp::x86::V3 {
    #[inline(always)]
    fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        simd::avx2::dot_f32(self, a, b)
    }
    #[inline(always)]
    fn dot_q8_0(self, quants: &[i8], scales: &[f32], x: &QuantVector) -> f32 {
        simd::avx2::dot_q8_0(self, quants, scales, x)
    }
    #[inline(always)]
    fn dot_q4_1(self, nibbles: &[u8], scales: &[f32], mins: &[f32], x: &QuantVector) -> f32 {
        simd::avx2::dot_q4_1(self, nibbles, scales, mins, x)
    }
    #[inline(always)]
    fn dot_q4_k<const N: usize>(self, blocks: &[Q4K], xs: [&Q8K; N]) -> [f32; N] {
        kquants::avx2::dot_q4_k(self, blocks, xs)
    }
    #[inline(always)]
    fn dot_q6_k<const N: usize>(self, blocks: &[Q6K], xs: [&Q8K; N]) -> [f32; N] {
        kquants::avx2::dot_q6_k(self, blocks, xs)
    }
}

/// AVX-512 where it pays (the k-quant products), the AVX2 loops elsewhere.
#[cfg(target_arch = "x86_64")]
impl Isa for pulp::x86::V4 {
    #[inline(always)]
    fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        simd::avx2::dot_f32(*self, a, b)
    }
    #[inline(always)]
    fn dot_q8_0(self, quants: &[i8], scales: &[f32], x: &QuantVector) -> f32 {
        simd::avx2::dot_q8_0(*self, quants, scales, x)
    }
    #[inline(always)]
    fn dot_q4_1(self, nibbles: &[u8], scales: &[f32], mins: &[f32], x: &QuantVector) -> f32 {
        simd::avx2::dot_q4_1(*self, nibbles, scales, mins, x)
    }
    #[inline(always)]
    fn dot_q4_k<const N: usize>(self, blocks: &[Q4K], xs: [&Q8K; N]) -> [f32; N] {
        kquants::avx512::dot_q4_k(self, blocks, xs)
    }
    #[inline(always)]
    fn dot_q6_k<const N: usize>(self, blocks: &[Q6K], xs: [&Q8K; N]) -> [f32; N] {
        kquants::avx512::dot_q6_k(self, blocks, xs)
    }
    #[inline(always)]
    fn attend(self, group: Attend<'_>) -> Partial {
        match group.dim {
            128 => crate::attention::attend::<8>(self, group),
            64 => crate::attention::attend::<4>(self, group),
            _ => attend_loops(group, self),
        }
    }
}

/// `out[i] += weight × x[i]`.
#[inline(always)]
pub fn add_scaled(out: &mut [f32], weight: f32, x: &[f32]) {
    for (out, x) in out.iter_mut().zip(x) {
        *out += weight * x;
    }
}

/// `Σ a[i] × b[i]`, as eight independent sums so the compiler can keep them in one vector
/// register.
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let mut a_chunks = a.chunks_exact(8);
    let mut b_chunks = b.chunks_exact(8);
    for (a, b) in (&mut a_chunks).zip(&mut b_chunks) {
        for lane in 0..8 {
            lanes[lane] += a[lane] * b[lane];
        }
    }
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(a, b)| a * b)
        .sum();
    lanes.iter().sum::<f32>() + tail
}

mod simd {
    use super::{BLOCK, Isa, Portable, QuantVector};

    /// A piece of work written once over [`Isa`]. Implementations are `#[inline(always)]`, as
    /// are the `Isa` methods, so that [`run`] compiles the whole body, helpers included, with
    /// the CPU features enabled.
    pub(super) trait Kernel: Sized {
        type Output;
        fn run<I: Isa>(self, isa: I) -> Self::Output;
    }

    #[cfg(target_arch = "x86_64")]
    struct Avx2<K>(K, pulp::x86::V3);

    #[cfg(target_arch = "x86_64")]
    struct Avx512<K>(K, pulp::x86::V4);

    #[cfg(target_arch = "x86_64")]
    impl<K: Kernel> pulp::NullaryFnOnce for Avx512<K> {
        type Output = K::Output;

        #[inline(always)]
        fn call(self) -> K::Output {
            self.0.run(self.1)
        }
    }

    #[cfg(target_arch = "x86_64")]
    impl<K: Kernel> pulp::NullaryFnOnce for Avx2<K> {
        type Output = K::Output;

        #[inline(always)]
        fn call(self) -> K::Output {
            self.0.run(self.1)
        }
    }

    /// Runs `kernel` with AVX-512 (BW) when the CPU has it, else with AVX2 and FMA (checked
    /// once, then cached by `pulp`), portably otherwise.
    #[inline(always)]
    pub(super) fn run<K: Kernel>(kernel: K) -> K::Output {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = pulp::x86::V4::try_new() {
            return simd.vectorize(Avx512(kernel, simd));
        }
        run_below_avx512(kernel)
    }

    /// [`run`] without AVX-512 (tests compare every loop the CPU can run).
    #[inline(always)]
    pub(super) fn run_below_avx512<K: Kernel>(kernel: K) -> K::Output {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = pulp::x86::V3::try_new() {
            return simd.vectorize(Avx2(kernel, simd));
        }
        kernel.run(Portable)
    }

    /// [`run`] on the portable loops.
    #[cfg(test)]
    pub(super) fn run_portable<K: Kernel>(kernel: K) -> K::Output {
        kernel.run(Portable)
    }

    pub(super) fn scalar_dot_q8_0(quants: &[i8], scales: &[f32], x: &QuantVector) -> f32 {
        let mut total = 0.0;
        for (block, (weights, inputs)) in quants
            .chunks_exact(BLOCK)
            .zip(x.quants.chunks_exact(BLOCK))
            .enumerate()
        {
            let sum: i32 = weights
                .iter()
                .zip(inputs)
                .map(|(w, x)| i32::from(*w) * i32::from(*x))
                .sum();
            total += scales[block] * x.scales[block] * sum as f32;
        }
        total
    }

    pub(super) fn scalar_dot_q4_1(
        nibbles: &[u8],
        scales: &[f32],
        mins: &[f32],
        x: &QuantVector,
    ) -> f32 {
        let mut total = 0.0;
        for (block, (bytes, inputs)) in nibbles
            .chunks_exact(BLOCK / 2)
            .zip(x.quants.chunks_exact(BLOCK))
            .enumerate()
        {
            let (low, high) = inputs.split_at(BLOCK / 2);
            let sum: i32 = bytes
                .iter()
                .zip(low.iter().zip(high))
                .map(|(byte, (low, high))| {
                    i32::from(byte & 0x0f) * i32::from(*low)
                        + i32::from(byte >> 4) * i32::from(*high)
                })
                .sum();
            total += scales[block] * x.scales[block] * sum as f32 + mins[block] * x.sums[block];
        }
        total
    }

    #[cfg(target_arch = "x86_64")]
    pub(super) mod avx2 {
        use pulp::x86::V3;
        use std::arch::x86_64::{__m128i, __m256, __m256i};

        use super::super::{BLOCK, QuantVector};

        /// A vector from the start of `values` (as many as it holds), wherever they lie.
        #[inline(always)]
        pub(crate) fn load<V: pulp::bytemuck::Pod, T: pulp::bytemuck::Pod>(values: &[T]) -> V {
            let count = std::mem::size_of::<V>() / std::mem::size_of::<T>();
            pulp::bytemuck::pod_read_unaligned(pulp::bytemuck::cast_slice(&values[..count]))
        }

        /// `Σ a[i] × b[i]` with 8-wide fused multiply-adds.
        #[inline(always)]
        pub(crate) fn dot_f32(simd: V3, a: &[f32], b: &[f32]) -> f32 {
            let mut acc = simd.avx._mm256_setzero_ps();
            let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
            let tail: f32 = a_chunks
                .remainder()
                .iter()
                .zip(b_chunks.remainder())
                .map(|(a, b)| a * b)
                .sum();
            for (a, b) in a_chunks.zip(b_chunks) {
                acc = simd.fma._mm256_fmadd_ps(load(a), load(b), acc);
            }
            sum8(simd, acc) + tail
        }

        #[inline(always)]
        pub(crate) fn sum8(simd: V3, acc: __m256) -> f32 {
            let high = simd.avx._mm256_extractf128_ps::<1>(acc);
            let low = simd.avx._mm256_castps256_ps128(acc);
            let four: [f32; 4] = pulp::cast(simd.sse._mm_add_ps(low, high));
            (four[0] + four[1]) + (four[2] + four[3])
        }

        /// Eight i32 partial sums of `Σ a[i] × b[i]` for unsigned `a` and signed `b`.
        #[inline(always)]
        fn products(simd: V3, unsigned: __m256i, signed: __m256i) -> __m256 {
            let pairs = simd.avx2._mm256_maddubs_epi16(unsigned, signed);
            let quads = simd
                .avx2
                ._mm256_madd_epi16(pairs, simd.avx._mm256_set1_epi16(1));
            simd.avx._mm256_cvtepi32_ps(quads)
        }

        #[inline(always)]
        pub(crate) fn dot_q8_0(simd: V3, quants: &[i8], scales: &[f32], x: &QuantVector) -> f32 {
            let mut acc = simd.avx._mm256_setzero_ps();
            for (block, (weights, inputs)) in quants
                .chunks_exact(BLOCK)
                .zip(x.quants.chunks_exact(BLOCK))
                .enumerate()
            {
                let w: __m256i = load(weights);
                let y: __m256i = load(inputs);
                // maddubs wants one unsigned side: |w| and y with w's sign.
                let sums = products(
                    simd,
                    simd.avx2._mm256_abs_epi8(w),
                    simd.avx2._mm256_sign_epi8(y, w),
                );
                let scale = simd.avx._mm256_set1_ps(scales[block] * x.scales[block]);
                acc = simd.fma._mm256_fmadd_ps(scale, sums, acc);
            }
            sum8(simd, acc)
        }

        #[inline(always)]
        pub(crate) fn dot_q4_1(
            simd: V3,
            nibbles: &[u8],
            scales: &[f32],
            mins: &[f32],
            x: &QuantVector,
        ) -> f32 {
            let mut acc = simd.avx._mm256_setzero_ps();
            let mut offsets = 0.0f32;
            let mask = simd.avx._mm256_set1_epi8(0x0f);
            for (block, (bytes, inputs)) in nibbles
                .chunks_exact(BLOCK / 2)
                .zip(x.quants.chunks_exact(BLOCK))
                .enumerate()
            {
                let packed: __m128i = load(bytes);
                let shifted = simd.sse2._mm_srli_epi16::<4>(packed);
                // Low nibbles are values 0..16 of the block, high nibbles values 16..32.
                let w = simd
                    .avx2
                    ._mm256_and_si256(simd.avx._mm256_set_m128i(shifted, packed), mask);
                let sums = products(simd, w, load(inputs));
                let scale = simd.avx._mm256_set1_ps(scales[block] * x.scales[block]);
                acc = simd.fma._mm256_fmadd_ps(scale, sums, acc);
                offsets += mins[block] * x.sums[block];
            }
            sum8(simd, acc) + offsets
        }
    }

    #[cfg(test)]
    mod tests {
        use super::super::{QuantMatrix, QuantVector};

        fn values(seed: u64, count: usize) -> Vec<f32> {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..count).map(|_| rng.f32() * 2.0 - 1.0).collect()
        }

        fn q4_1_bytes(rows: usize, cols: usize, seed: u64) -> Vec<u8> {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut data = Vec::new();
            for _ in 0..rows * cols / 32 {
                data.extend_from_slice(&half::f16::from_f32(rng.f32() * 0.1).to_le_bytes());
                data.extend_from_slice(&half::f16::from_f32(rng.f32() * -0.5).to_le_bytes());
                data.extend((0..16).map(|_| rng.u8(..)));
            }
            data
        }

        /// The product of the dequantised matrix with the dequantised input, in f64.
        fn reference(matrix: &QuantMatrix, x: &QuantVector) -> Vec<f64> {
            reference_of(matrix, &x.quants, &x.scales, 32)
        }

        /// Each dequantised row of `matrix` times `quants` scaled by one of `scales` per
        /// `block` of them, in f64.
        fn reference_of(
            matrix: &QuantMatrix,
            quants: &[i8],
            scales: &[f32],
            block: usize,
        ) -> Vec<f64> {
            let input: Vec<f64> = quants
                .iter()
                .enumerate()
                .map(|(index, quant)| f64::from(*quant) * f64::from(scales[index / block]))
                .collect();
            let mut row = vec![0.0; matrix.cols()];
            (0..matrix.rows())
                .map(|index| {
                    matrix.row_into(index, &mut row);
                    row.iter().zip(&input).map(|(w, x)| f64::from(*w) * x).sum()
                })
                .collect()
        }

        fn assert_close(actual: &[f32], expected: &[f64]) {
            for (actual, expected) in actual.iter().zip(expected) {
                let error = (f64::from(*actual) - expected).abs();
                assert!(
                    error <= 1e-3 * expected.abs().max(1.0),
                    "{actual} vs {expected}"
                );
            }
        }

        #[test]
        fn q4_1_product_matches_the_dequantised_weights() {
            let (rows, cols) = (70, 128);
            let matrix = QuantMatrix::from_q4_1(rows, cols, &q4_1_bytes(rows, cols, 1)).unwrap();
            let mut x = QuantVector::default();
            x.quantize(&values(2, cols));
            let mut out = vec![0.0; rows];
            matrix.matvec(&x, &mut out);
            assert_close(&out, &reference(&matrix, &x));
            // The portable loop agrees with whichever one ran.
            let Some(super::super::Format::Q4_1 {
                nibbles,
                scales,
                mins,
            }) = Some(&matrix.format)
            else {
                unreachable!()
            };
            let scalar: Vec<f32> = (0..rows)
                .map(|row| {
                    let blocks = cols / 32;
                    let range = row * blocks..(row + 1) * blocks;
                    super::scalar_dot_q4_1(
                        &nibbles[range.start * 16..range.end * 16],
                        &scales[range.clone()],
                        &mins[range],
                        &x,
                    )
                })
                .collect();
            assert_close(&scalar, &reference(&matrix, &x));
        }

        #[test]
        fn q8_0_product_matches_the_dequantised_weights() {
            let (rows, cols) = (45, 96);
            let matrix = QuantMatrix::quantize_q8_0(rows, cols, &values(3, rows * cols)).unwrap();
            let mut x = QuantVector::default();
            x.quantize(&values(4, cols));
            let mut out = vec![0.0; rows];
            matrix.matvec(&x, &mut out);
            assert_close(&out, &reference(&matrix, &x));
        }

        #[test]
        fn q4_0_reads_as_q4_1_with_a_minimum_of_minus_eight_scales() {
            let mut block = half::f16::from_f32(0.5).to_le_bytes().to_vec();
            block.extend([0x10u8; 16]); // low nibble 0, high nibble 1
            let matrix = QuantMatrix::from_q4_0(1, 32, &block).unwrap();
            let mut row = vec![0.0; 32];
            matrix.row_into(0, &mut row);
            assert!(row[..16].iter().all(|value| *value == -4.0));
            assert!(row[16..].iter().all(|value| *value == -3.5));
        }

        #[test]
        fn attention_split_in_ranges_merges_to_the_whole() {
            use super::super::{Attend, attend};
            let (dim, heads, positions, stride) = (8, 3, 40, 16);
            let queries = values(7, heads * dim);
            let keys = values(8, positions * stride);
            let cached = values(9, positions * stride);
            let group = |range: std::ops::Range<usize>| {
                attend(Attend {
                    queries: &queries,
                    dim,
                    keys: &keys[4..],
                    values: &cached[4..],
                    stride,
                    positions: range,
                    scale: 0.5,
                })
            };
            let mut whole = vec![0.0; heads * dim];
            group(0..positions).finish(&mut whole);
            let mut merged = group(0..13);
            merged.merge(&group(13..positions));
            let mut split = vec![0.0; heads * dim];
            merged.finish(&mut split);
            // Against a plain softmax for the first head.
            let scores: Vec<f64> = (0..positions)
                .map(|position| {
                    (0..dim)
                        .map(|i| f64::from(queries[i]) * f64::from(keys[4 + position * stride + i]))
                        .sum::<f64>()
                        * 0.5
                })
                .collect();
            let total: f64 = scores.iter().map(|score| score.exp()).sum();
            let expected: Vec<f64> = (0..dim)
                .map(|i| {
                    (0..positions)
                        .map(|p| scores[p].exp() / total * f64::from(cached[4 + p * stride + i]))
                        .sum()
                })
                .collect();
            assert_close(&whole[..dim], &expected);
            assert_close(
                &split,
                &whole.iter().map(|v| f64::from(*v)).collect::<Vec<_>>(),
            );
        }

        /// `rows × cols` weights quantised by candle to `dtype`, as GGUF bytes, and candle's
        /// own dequantisation of them.
        fn candle_quantized(
            rows: usize,
            cols: usize,
            dtype: candle_core::quantized::GgmlDType,
            seed: u64,
        ) -> (Vec<u8>, Vec<f32>) {
            use candle_core::{Device, Tensor, quantized::QTensor};
            let weights =
                Tensor::from_vec(values(seed, rows * cols), (rows, cols), &Device::Cpu).unwrap();
            let quantized = QTensor::quantize(&weights, dtype).unwrap();
            let dequantized = quantized
                .dequantize(&Device::Cpu)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            (quantized.data().unwrap().into_owned(), dequantized)
        }

        /// The product of the dequantised matrix with the `Q8_K` input, in f64.
        fn reference_k(matrix: &QuantMatrix, x: &QuantVector) -> Vec<f64> {
            reference_of(matrix, &x.k.quants, &x.k.scales, crate::kquants::SUPER)
        }

        fn check_k_quant(dtype: candle_core::quantized::GgmlDType) {
            let (rows, cols) = (70, 768);
            let (bytes, dequantized) = candle_quantized(rows, cols, dtype, 11);
            let matrix = match dtype {
                candle_core::quantized::GgmlDType::Q4K => {
                    QuantMatrix::from_q4_k(rows, cols, &bytes)
                }
                _ => QuantMatrix::from_q6_k(rows, cols, &bytes),
            }
            .unwrap();
            // The blocks read back to candle's numbers.
            let mut row = vec![0.0; cols];
            for index in 0..rows {
                matrix.row_into(index, &mut row);
                for (ours, theirs) in row.iter().zip(&dequantized[index * cols..]) {
                    assert!((ours - theirs).abs() <= 1e-6 * theirs.abs().max(1.0));
                }
            }
            let input = values(12, cols);
            let mut x = QuantVector::default();
            matrix.quantize_input(&input, &mut x);
            let mut out = vec![0.0; rows];
            matrix.matvec(&x, &mut out);
            let expected = reference_k(&matrix, &x);
            assert_close(&out, &expected);
            // Every loop this CPU can run agrees: AVX-512, AVX2, portable.
            for name in ["best", "below AVX-512", "portable"] {
                let mut out = vec![0.0; rows];
                let rows = super::super::Rows {
                    matrix: &matrix,
                    first: 0,
                    inputs: std::slice::from_ref(&x),
                    out: &mut out,
                };
                match name {
                    "best" => super::run(rows),
                    "below AVX-512" => super::run_below_avx512(rows),
                    _ => super::run_portable(rows),
                }
                eprintln!("{name}: {}", out[0]);
                assert_close(&out, &expected);
            }
        }

        #[test]
        fn q4_k_blocks_and_products_match_candle() {
            check_k_quant(candle_core::quantized::GgmlDType::Q4K);
        }

        #[test]
        fn q6_k_blocks_and_products_match_candle() {
            check_k_quant(candle_core::quantized::GgmlDType::Q6K);
        }

        #[test]
        fn a_batched_product_gives_each_token_what_it_gets_alone() {
            let (rows, cols, tokens) = (150, 512, 37);
            let (bytes, _) =
                candle_quantized(rows, cols, candle_core::quantized::GgmlDType::Q4K, 13);
            let k = QuantMatrix::from_q4_k(rows, cols, &bytes).unwrap();
            let q4_1 = QuantMatrix::from_q4_1(rows, cols, &q4_1_bytes(rows, cols, 14)).unwrap();
            let inputs = values(15, tokens * cols);
            for matrix in [k, q4_1] {
                let mut batched = vec![0.0; tokens * rows];
                matrix.matmul(&inputs, &mut batched);
                for (token, input) in inputs.chunks_exact(cols).enumerate() {
                    let mut x = QuantVector::default();
                    matrix.quantize_input(input, &mut x);
                    let mut alone = vec![0.0; rows];
                    matrix.matvec(&x, &mut alone);
                    assert_eq!(alone, batched[token * rows..(token + 1) * rows]);
                }
            }
        }

        /// A k-quant matrix read both ways: in rows and in tiles of 16.
        fn both_layouts(
            rows: usize,
            cols: usize,
            dtype: candle_core::quantized::GgmlDType,
            seed: u64,
        ) -> (QuantMatrix, QuantMatrix) {
            let (bytes, _) = candle_quantized(rows, cols, dtype, seed);
            let read = match dtype {
                candle_core::quantized::GgmlDType::Q4K => QuantMatrix::read_q4_k,
                _ => QuantMatrix::read_q6_k,
            };
            (
                read(rows, cols, &bytes, false).unwrap(),
                read(rows, cols, &bytes, true).unwrap(),
            )
        }

        fn check_tiles(dtype: candle_core::quantized::GgmlDType) {
            use super::super::{Format, band};
            let (rows, cols, tokens) = (96, 768, 23);
            let (by_rows, tiled) = both_layouts(rows, cols, dtype, 21);
            assert!(matches!(
                tiled.format,
                Format::Q4KTiles(_) | Format::Q6KTiles(_)
            ));
            // The same numbers, in another order.
            let (mut left, mut right) = (vec![0.0; cols], vec![0.0; cols]);
            for row in 0..rows {
                by_rows.row_into(row, &mut left);
                tiled.row_into(row, &mut right);
                assert_eq!(left, right, "row {row}");
            }
            let inputs = values(22, tokens * cols);
            let mut batched = vec![0.0; tokens * rows];
            tiled.matmul(&inputs, &mut batched);
            for (token, input) in inputs.chunks_exact(cols).enumerate() {
                let mut x = QuantVector::default();
                tiled.quantize_input(input, &mut x);
                let expected = reference_k(&by_rows, &x);
                // The loops this CPU runs (VNNI where it has it), one token and in a batch.
                let mut alone = vec![0.0; rows];
                tiled.matvec(&x, &mut alone);
                assert_close(&alone, &expected);
                assert_eq!(alone, batched[token * rows..(token + 1) * rows]);
                // The portable tile loops.
                let portable: Vec<f32> = (0..rows)
                    .step_by(crate::tiles::ROWS)
                    .flat_map(|row| match &tiled.format {
                        Format::Q4KTiles(tiles) => {
                            crate::tiles::scalar_q4_k(band(tiles, cols, row), &x.k)
                        }
                        Format::Q6KTiles(tiles) => {
                            crate::tiles::scalar_q6_k(band(tiles, cols, row), &x.k)
                        }
                        _ => unreachable!(),
                    })
                    .collect();
                assert_close(&portable, &expected);
            }
            // Stacked tiles keep their rows.
            let stacked = QuantMatrix::stack(&[tiled.clone(), tiled.clone()]).unwrap();
            stacked.row_into(rows + 17, &mut left);
            by_rows.row_into(17, &mut right);
            assert_eq!(left, right);
        }

        #[test]
        fn q4_k_tiles_hold_and_multiply_the_same_weights() {
            check_tiles(candle_core::quantized::GgmlDType::Q4K);
        }

        #[test]
        fn q6_k_tiles_hold_and_multiply_the_same_weights() {
            check_tiles(candle_core::quantized::GgmlDType::Q6K);
        }

        #[test]
        fn nearest_rounds_like_round_but_ties_to_even() {
            for x in [
                0.0f32, 0.4, 0.5, 1.5, 2.5, -0.5, -1.5, -126.6, 127.0, 126.49, -3.7,
            ] {
                assert_eq!(super::super::nearest(x) as f32, x.round_ties_even(), "{x}");
            }
        }

        #[test]
        fn stacking_keeps_rows_in_order() {
            let a = QuantMatrix::quantize_q8_0(2, 32, &values(5, 64)).unwrap();
            let b = QuantMatrix::quantize_q8_0(3, 32, &values(6, 96)).unwrap();
            let stacked = QuantMatrix::stack(&[a.clone(), b.clone()]).unwrap();
            assert_eq!(stacked.rows(), 5);
            let (mut left, mut right) = (vec![0.0; 32], vec![0.0; 32]);
            stacked.row_into(3, &mut left);
            b.row_into(1, &mut right);
            assert_eq!(left, right);
            assert!(QuantMatrix::from_q4_1(1, 32, &[0; 19]).is_none());
        }
    }
}
