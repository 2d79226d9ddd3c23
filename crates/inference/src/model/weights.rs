//! A layer's weights: one quantised matrix, or several stored apart and used as one
//! (a projection), each with the product loops of its format.

use super::*;

/// A weight matrix `[out, in]`.
pub(super) enum Weight {
    /// In one of our kernels' formats (see [`crate::kernels`]).
    Kernel(QuantMatrix),
    /// Any other format (k-quants, f16, …): candle's own product and dequantisation.
    Candle {
        weight: Arc<QTensor>,
        matmul: QMatMul,
    },
}

impl Weight {
    pub(super) fn new(tensor: QTensor) -> anyhow::Result<Self> {
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

    pub(super) fn rows(&self) -> usize {
        match self {
            Self::Kernel(matrix) => matrix.rows(),
            Self::Candle { weight, .. } => weight.shape().dims()[0],
        }
    }

    pub(super) fn cols(&self) -> usize {
        match self {
            Self::Kernel(matrix) => matrix.cols(),
            Self::Candle { weight, .. } => weight.shape().dims().get(1).copied().unwrap_or(0),
        }
    }

    /// Fails unless the matrix is `[rows, cols]`: a model file whose tensors disagree with its
    /// own metadata is refused at load instead of failing in the middle of a step.
    pub(super) fn expect(&self, name: &str, rows: usize, cols: usize) -> anyhow::Result<()> {
        if self.rows() != rows || self.cols() != cols {
            bail!(
                "the model file's {name} is [{}, {}], not [{rows}, {cols}] as its metadata says",
                self.rows(),
                self.cols()
            );
        }
        Ok(())
    }

    /// `out = x × selfᵀ` for many tokens: `x` is `tokens × cols`, `out` is `tokens × rows`.
    /// Our formats give each token exactly the numbers [`Self::matvec`] gives it alone.
    pub(super) fn matmul(&self, x: &[f32], out: &mut [f32]) -> anyhow::Result<()> {
        match self {
            Self::Kernel(matrix) => matrix.matmul(x, out),
            Self::Candle { matmul, .. } => {
                let tokens = x.len() / self.cols().max(1);
                let input = Tensor::from_slice(x, (tokens, self.cols()), &Device::Cpu)?;
                let product: Vec<f32> = matmul.forward(&input)?.flatten_all()?.to_vec1()?;
                out.copy_from_slice(&product);
            }
        }
        Ok(())
    }

    /// `out = self × x` for one token (`x` is quantised into `scratch` when it is needed).
    pub(super) fn matvec(
        &self,
        x: &[f32],
        scratch: &mut QuantVector,
        out: &mut [f32],
    ) -> anyhow::Result<()> {
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
pub(super) struct Projection {
    /// One stacked matrix, or one per part.
    pub(super) weights: Vec<Weight>,
    /// The rows of each part.
    pub(super) sizes: Vec<usize>,
}

impl Projection {
    pub(super) fn new(parts: Vec<QTensor>) -> anyhow::Result<Self> {
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

    pub(super) fn rows(&self) -> usize {
        self.sizes.iter().sum()
    }

    /// Every part's products for many tokens: `out` is `tokens × rows()`, each token's row
    /// holding the parts one after the other (as [`Self::matvec`] writes them).
    pub(super) fn matmul(&self, x: &[f32], out: &mut [f32]) -> anyhow::Result<()> {
        if let [weight] = self.weights.as_slice() {
            return weight.matmul(x, out);
        }
        let rows = self.rows();
        let tokens = out.len() / rows.max(1);
        let mut start = 0;
        for weight in &self.weights {
            let part_rows = weight.rows();
            let mut part = vec![0.0; tokens * part_rows];
            weight.matmul(x, &mut part)?;
            for (row, values) in out.chunks_exact_mut(rows).zip(part.chunks_exact(part_rows)) {
                row[start..start + part_rows].copy_from_slice(values);
            }
            start += part_rows;
        }
        Ok(())
    }

    /// All parts' outputs, one after the other, in `out`.
    pub(super) fn matvec(
        &self,
        x: &[f32],
        scratch: &mut QuantVector,
        out: &mut [f32],
    ) -> anyhow::Result<()> {
        let mut start = 0;
        for weight in &self.weights {
            let rows = weight.rows();
            weight.matvec(x, scratch, &mut out[start..start + rows])?;
            start += rows;
        }
        Ok(())
    }
}
