//! A llama-architecture transformer over GGUF weights, run on the CPU: the forward pass, its
//! quantised loops (`kernels`, `kquants`, `tiles`), attention over a key/value cache that can
//! be cut back to any prefix, and that cache saved to and loaded from a file. It imports
//! nothing of agentic; the local provider (`agentic-plugin-local`) drives it through
//! [`Decoder`].

#![deny(unsafe_code)]

mod attention;
pub mod kernels;
mod kquants;
pub mod model;
mod tiles;

use std::io::{Read, Seek, Write};

pub use model::{Hyper, Model};

/// A file the cache can be loaded from.
pub trait PrefixFile: Read + Seek {}
impl<T: Read + Seek> PrefixFile for T {}

/// What a provider needs of a model to generate text: feed a context, step one token at a
/// time, and keep (or save, or load) the cached prefix that the next request may share.
pub trait Decoder: Send {
    /// Feeds `tokens`, the whole context so far, and returns the logits of the next token.
    /// Only what follows the longest prefix already cached runs; `keep_going` is asked
    /// between chunks and stops the work (`None`) when it says no.
    fn prefill(
        &mut self,
        tokens: &[u32],
        keep_going: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<Option<Vec<f32>>>;
    /// Feeds one generated token and returns the logits of the one after it.
    fn step(&mut self, token: u32) -> anyhow::Result<Vec<f32>>;
    /// Cuts the cache back to its first `length` tokens (all of it at 0).
    fn truncate(&mut self, length: usize);
    /// The tokens whose keys and values are cached.
    fn cached(&self) -> &[u32];
    /// How many logits a step gives: the network's vocabulary, special tokens included.
    fn vocabulary(&self) -> usize;
    /// Writes the first `length` cached positions for [`Decoder::load_prefix`], in this
    /// process or another.
    fn save_prefix(&self, out: &mut dyn Write, length: usize) -> anyhow::Result<()>;
    /// Replaces the cache with the longest prefix of `tokens` that `file` holds; its length
    /// (0 when the file is for another network or shares nothing).
    fn load_prefix(&mut self, file: &mut dyn PrefixFile, tokens: &[u32]) -> anyhow::Result<usize>;
}
