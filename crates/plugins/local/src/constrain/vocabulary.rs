//! The model's vocabulary as the grammar engine reads it: every token's bytes, from the GGUF
//! file's byte-level BPE token strings, and the trie `llguidance` walks to compute a mask.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context, bail};
use candle_core::quantized::gguf_file;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};

/// Every token's bytes, indexed by token id. Control tokens (`<|im_end|>`, …) are written as
/// toktrie's special-token marker followed by their name, so no text can spell them and a
/// grammar names them `<|im_end|>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Vocabulary {
    tokens: Vec<Vec<u8>>,
}

impl Vocabulary {
    /// Reads the vocabulary of a byte-level BPE (`gpt2`) GGUF model.
    pub fn from_gguf(content: &gguf_file::Content) -> anyhow::Result<Self> {
        let names = match content.metadata.get("tokenizer.ggml.tokens") {
            Some(gguf_file::Value::Array(values)) => values
                .iter()
                .map(|value| Ok(value.to_string()?.clone()))
                .collect::<anyhow::Result<Vec<String>>>()?,
            _ => bail!("the model file has no list of tokens"),
        };
        let types: Vec<i32> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(gguf_file::Value::Array(values)) => values
                .iter()
                .map(|value| value.to_i32().unwrap_or(1))
                .collect(),
            _ => vec![1; names.len()],
        };
        let bytes_of = byte_level_alphabet();
        let tokens = names
            .iter()
            .enumerate()
            .map(|(id, name)| match types.get(id).copied().unwrap_or(1) {
                // Unknown, control and unused tokens (Qwen's `[PAD…]` rows): never text.
                2 | 3 | 5 => {
                    let mut bytes = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    bytes.extend_from_slice(name.as_bytes());
                    Ok(bytes)
                }
                // User-defined tokens (`<tool_call>` in Qwen 2.5) are their text as it is.
                4 => Ok(name.as_bytes().to_vec()),
                _ => name
                    .chars()
                    .map(|c| bytes_of.get(&c).copied())
                    .collect::<Option<Vec<u8>>>()
                    .with_context(|| format!("token {id} ({name:?}) is not byte-level BPE")),
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self { tokens })
    }

    /// A vocabulary of the given token bytes (control tokens start with toktrie's marker).
    pub fn from_token_bytes(tokens: Vec<Vec<u8>>) -> Self {
        Self { tokens }
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The trie over `logits` entries (the model may have more rows than named tokens; the
    /// rest are unnamed special tokens), ending at any of `stops`.
    pub fn token_env(&self, logits: usize, stops: &[u32]) -> anyhow::Result<TokEnv> {
        let mut words = self.tokens.clone();
        while words.len() < logits {
            let mut name = format!(".<[{}]>", words.len()).into_bytes();
            name[0] = TokTrie::SPECIAL_TOKEN_MARKER;
            words.push(name);
        }
        let stops: Vec<TokenId> = stops
            .iter()
            .copied()
            .filter(|&stop| (stop as usize) < words.len())
            .collect();
        let Some(&first) = stops.first() else {
            bail!("the model has no end-of-turn token the grammar can end with");
        };
        let info = TokRxInfo::new(words.len() as u32, first);
        let trie = TokTrie::from(&info, &words).with_eos_tokens(&stops);
        Ok(Arc::new(GreedyTokenizer { trie }))
    }
}

/// Tokenizes through the trie, longest token first. The grammar engine only tokenizes for
/// forced text and prompt healing, which our loop does not use; the model's own tokenizer
/// stays the one that reads prompts.
struct GreedyTokenizer {
    trie: TokTrie,
}

impl TokenizerEnv for GreedyTokenizer {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, bytes: &[u8]) -> Vec<TokenId> {
        self.trie.greedy_tokenize(bytes)
    }
}

/// GPT-2's byte-level alphabet: each byte is written as one printable character, the
/// printable ASCII and Latin-1 ones as themselves and the others from U+0100 on.
fn byte_level_alphabet() -> HashMap<char, u8> {
    let printable = |byte: u8| matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut next = 0x100u32;
    let mut alphabet = HashMap::with_capacity(256);
    for byte in 0..=255u8 {
        let c = if printable(byte) {
            char::from(byte)
        } else {
            let c = char::from_u32(next).unwrap_or(char::REPLACEMENT_CHARACTER);
            next += 1;
            c
        };
        alphabet.insert(c, byte);
    }
    alphabet
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_level_alphabet_covers_every_byte_once() {
        let alphabet = byte_level_alphabet();
        assert_eq!(alphabet.len(), 256);
        assert_eq!(alphabet.get(&'Ġ'), Some(&b' '));
        assert_eq!(alphabet.get(&'Ċ'), Some(&b'\n'));
        assert_eq!(alphabet.get(&'a'), Some(&b'a'));
    }
}
