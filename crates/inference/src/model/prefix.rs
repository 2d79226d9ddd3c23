//! A cached prefix written to a file and read back in another process (format version 1,
//! [`PREFIX_MAGIC`]), so a prompt seen before starts from its keys and values.

use super::*;

impl Model {
    /// Writes the first `length` cached positions (tokens, keys and values) for
    /// [`Self::load_prefix`] in another process.
    pub fn save_prefix(&self, out: &mut impl Write, length: usize) -> anyhow::Result<()> {
        let length = length.min(self.cached.len());
        let width = self.hyper.kv_heads * self.hyper.head_dim;
        out.write_all(PREFIX_MAGIC)?;
        for number in [self.hyper.layers, width, length] {
            out.write_all(&(number as u64).to_le_bytes())?;
        }
        let mut bytes = Vec::with_capacity(length * width * 4);
        bytes.extend(
            self.cached[..length]
                .iter()
                .flat_map(|token| token.to_le_bytes()),
        );
        out.write_all(&bytes)?;
        for layer in &self.layers {
            for cache in [&layer.keys, &layer.values] {
                bytes.clear();
                bytes.extend(
                    cache[..length * width]
                        .iter()
                        .flat_map(|value| value.to_le_bytes()),
                );
                out.write_all(&bytes)?;
            }
        }
        Ok(())
    }

    /// Replaces the cache with the longest prefix of `tokens` that a file written by
    /// [`Self::save_prefix`] holds, and returns its length (0 when the file is for another
    /// shape of network or shares nothing). At least one token of `tokens` is left to run.
    pub fn load_prefix(
        &mut self,
        file: &mut (impl Read + Seek),
        tokens: &[u32],
    ) -> anyhow::Result<usize> {
        let loaded = self.read_prefix(file, tokens);
        if loaded.is_err() {
            // Nothing half-read stays behind.
            self.truncate(0);
        }
        loaded
    }

    fn read_prefix(
        &mut self,
        file: &mut (impl Read + Seek),
        tokens: &[u32],
    ) -> anyhow::Result<usize> {
        let mut magic = [0u8; 8];
        file.read_exact(&mut magic)?;
        let mut number = || -> anyhow::Result<usize> {
            let mut bytes = [0u8; 8];
            file.read_exact(&mut bytes)?;
            Ok(usize::try_from(u64::from_le_bytes(bytes))?)
        };
        let (layers, width, length) = (number()?, number()?, number()?);
        let expected_width = self.hyper.kv_heads * self.hyper.head_dim;
        if magic != *PREFIX_MAGIC
            || layers != self.hyper.layers
            || width != expected_width
            || length >= self.hyper.context
        {
            return Ok(0);
        }
        let mut bytes = vec![0u8; length * 4];
        file.read_exact(&mut bytes)?;
        let common = bytes
            .chunks_exact(4)
            .map(|token| u32::from_le_bytes([token[0], token[1], token[2], token[3]]))
            .zip(tokens)
            .take_while(|(saved, token)| saved == *token)
            .count()
            .min(tokens.len().saturating_sub(1));
        self.truncate(0);
        if common == 0 {
            return Ok(0);
        }
        let start = 8 + 3 * 8 + length as u64 * 4;
        let block = (length * width * 4) as u64;
        let mut values = vec![0u8; common * width * 4];
        for (index, layer) in self.layers.iter_mut().enumerate() {
            for (part, cache) in [&mut layer.keys, &mut layer.values].into_iter().enumerate() {
                file.seek(SeekFrom::Start(
                    start + (2 * index as u64 + part as u64) * block,
                ))?;
                file.read_exact(&mut values)?;
                cache.extend(
                    values
                        .chunks_exact(4)
                        .map(|value| f32::from_le_bytes([value[0], value[1], value[2], value[3]])),
                );
            }
        }
        self.cached.extend_from_slice(&tokens[..common]);
        Ok(common)
    }
}
