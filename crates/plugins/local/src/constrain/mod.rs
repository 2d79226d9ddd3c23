//! Constrained decoding: what the model may write next, as a mask over its vocabulary, from a
//! grammar built for the request (the offered tools' call syntax and input schemas, or the
//! grammar the request brings, such as code mode's JavaScript). The
//! grammar engine is `llguidance` (see `docs/architecture.md` for why); this module turns a
//! request into its grammar and applies the engine's verdicts to the logits.
//!
//! A step costs one check of the token the sampler picked; the full mask is computed only
//! when that token breaks the grammar, and the sampler picks again among the allowed ones.
//! The result is the same as masking first: greedy takes the best allowed token either way,
//! and sampling from the masked distribution equals sampling and retrying on a miss.

mod calls;
mod tool_calls;
mod vocabulary;

use agentic_core::{ModelRequest, ToolChoice};
use anyhow::anyhow;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokenId};
use llguidance::{Matcher, ParserFactory};

pub use calls::CallGuard;
pub use tool_calls::{CLOSE, OPEN, tool_call_grammar};
pub use vocabulary::Vocabulary;

/// Earley items one mask may create (about 50 ms at llguidance's 20,000 per ms).
const STEP_MAX_ITEMS: usize = 1_000_000;
/// Lexer work one mask may do (about 140 ms at 14,000 per ms).
const STEP_LEXER_FUEL: u64 = 2_000_000;

/// Builds a request's grammar against one model's vocabulary. Building it reads the whole
/// vocabulary once (a trie and its slices), so an engine keeps one.
pub struct Grammars {
    factory: ParserFactory,
}

impl std::fmt::Debug for Grammars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grammars").finish_non_exhaustive()
    }
}

impl Grammars {
    /// Grammars over `vocabulary` for a model with `logits` outputs that ends its turn with
    /// any of `stops`.
    pub fn new(vocabulary: &Vocabulary, logits: usize, stops: &[u32]) -> anyhow::Result<Self> {
        let env: TokEnv = vocabulary.token_env(logits, stops)?;
        let mut factory = ParserFactory::new_simple(&env)?;
        // Problems are returned as errors, not printed.
        factory.quiet();
        // Code mode's JavaScript grammar is ambiguous (optional semicolons, a statement may
        // start with almost anything): a mask after a short name walks many Earley items. The
        // default bound (50,000, about 2.5 ms) failed at the start of replies in eval runs;
        // a mask is computed only when the sampled token is refused, so a larger one costs
        // little over an answer.
        let limits = factory.limits_mut();
        limits.step_max_items = limits.step_max_items.max(STEP_MAX_ITEMS);
        limits.step_lexer_fuel = limits.step_lexer_fuel.max(STEP_LEXER_FUEL);
        Ok(Self { factory })
    }

    /// The constraint for `request`, or `None` when it leaves the answer free: the grammar
    /// the request brings (code mode's program), else, with tools offered, the grammar of
    /// their calls (classic mode), calls alone when the request requires one.
    pub fn for_request(&self, request: &ModelRequest) -> anyhow::Result<Option<Constraint>> {
        if let Some(grammar) = &request.grammar {
            return self.from_lark(grammar).map(Some);
        }
        match tool_call_grammar(&request.tools, ToolChoice::required(request)) {
            Some(grammar) => self.from_lark(&grammar).map(Some),
            None => Ok(None),
        }
    }

    /// A constraint from a grammar in llguidance's Lark dialect.
    pub fn from_lark(&self, grammar: &str) -> anyhow::Result<Constraint> {
        let parser = self
            .factory
            .create_parser(TopLevelGrammar::from_lark(grammar.to_owned()));
        let matcher = Matcher::new(parser);
        if let Some(error) = matcher.get_error() {
            return Err(anyhow!("the grammar does not compile: {error}"));
        }
        Ok(Constraint { matcher })
    }
}

/// One answer's grammar, advanced token by token.
pub struct Constraint {
    matcher: Matcher,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint").finish_non_exhaustive()
    }
}

impl Constraint {
    /// Whether `token` may come next.
    pub fn allows(&mut self, token: u32) -> anyhow::Result<bool> {
        Ok(self.matcher.validate_tokens(&[token as TokenId])? == 1)
    }

    /// Takes the last `tokens` accepted tokens back.
    pub fn rollback(&mut self, tokens: usize) -> anyhow::Result<()> {
        self.matcher.rollback(tokens)
    }

    /// Moves past `token`, which [`Constraint::allows`].
    pub fn accept(&mut self, token: u32) -> anyhow::Result<()> {
        self.matcher.consume_token(token as TokenId)
    }

    /// Sets every token the grammar forbids next to minus infinity. Fails when it forbids
    /// them all (the grammar has nowhere to go), leaving `logits` as they were.
    pub fn mask(&mut self, logits: &mut [f32]) -> anyhow::Result<()> {
        let allowed = self.matcher.compute_mask()?;
        if allowed.is_zero() {
            return Err(anyhow!("the grammar allows no token here"));
        }
        for (token, logit) in logits.iter_mut().enumerate() {
            if !allowed.is_allowed(token as TokenId) {
                *logit = f32::NEG_INFINITY;
            }
        }
        Ok(())
    }

    /// Whether the grammar is complete and allows nothing more: the answer ends here (a
    /// program's closing fence, say), whatever the model would add.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }

    /// Whether the answer may end here.
    pub fn may_end(&mut self) -> anyhow::Result<bool> {
        self.matcher.is_accepting()
    }
}

#[cfg(test)]
mod tests;
