//! The one token estimator every part of agentic uses when a provider reports no usage.

/// Roughly four characters per token, the usual rule of thumb for English text and code.
pub fn estimate_tokens(text: &str) -> u64 {
    let chars = text.chars().count() as u64;
    chars.div_ceil(4)
}

#[cfg(test)]
mod tests {
    #[test]
    fn four_characters_make_a_token() {
        assert_eq!(super::estimate_tokens(""), 0);
        assert_eq!(super::estimate_tokens("abcd"), 1);
        assert_eq!(super::estimate_tokens("abcde"), 2);
        assert_eq!(super::estimate_tokens("ééééé"), 2);
    }
}
