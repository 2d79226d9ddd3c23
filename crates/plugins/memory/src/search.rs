//! Archival search without a full-text extension: the query becomes lower-case words, the
//! database finds entries containing any of them with `LIKE` (the same SQL on SQLite and
//! PostgreSQL), and Rust ranks them by how many words they hold, then how often, then recency.

use std::collections::HashSet;

/// Most words of a query that are searched for.
pub const MAX_TERMS: usize = 12;

/// The distinct lower-case words of a query, in order: runs of letters and digits, ignoring
/// one-character words unless the query has nothing else.
pub fn query_terms(query: &str) -> Vec<String> {
    let lower = query.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect();
    let long_enough = words.iter().any(|word| word.chars().count() > 1);
    let mut seen = HashSet::new();
    words
        .into_iter()
        .filter(|word| !long_enough || word.chars().count() > 1)
        .filter(|word| seen.insert(*word))
        .take(MAX_TERMS)
        .map(str::to_owned)
        .collect()
}

/// How well a text matches: the terms it contains and how many times they occur in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Score {
    pub matched: Vec<String>,
    pub occurrences: usize,
}

/// Scores `text` (any case) against lower-case `terms`.
pub fn score(text: &str, terms: &[String]) -> Score {
    let lower = text.to_lowercase();
    let mut matched = Vec::new();
    let mut occurrences = 0;
    for term in terms {
        let count = lower.matches(term.as_str()).count();
        if count > 0 {
            matched.push(term.clone());
            occurrences += count;
        }
    }
    Score {
        matched,
        occurrences,
    }
}

/// At most `max_chars` characters of `text`, around the first place a term occurs, with `…`
/// where it was cut. The second value says whether it was cut.
pub fn excerpt(text: &str, terms: &[String], max_chars: usize) -> (String, bool) {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max_chars {
        return (text.to_owned(), false);
    }
    let lower = text.to_lowercase();
    // Lower-casing can change lengths (rarely), so the position is a guide, clamped below.
    let first = terms
        .iter()
        .filter_map(|term| lower.find(term.as_str()))
        .min()
        .map(|byte| lower[..byte].chars().count())
        .unwrap_or(0);
    let start = first
        .saturating_sub(max_chars / 4)
        .min(chars.len() - max_chars);
    let end = start + max_chars;
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(&chars[start..end]);
    if end < chars.len() {
        out.push('…');
    }
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(query: &str) -> Vec<String> {
        query_terms(query)
    }

    #[test]
    fn queries_become_distinct_lower_case_words() {
        assert_eq!(terms("Trip to OSLO, oslo trip!"), ["trip", "to", "oslo"]);
        assert_eq!(terms("a b Ærø"), ["ærø"]);
        assert_eq!(terms("a b"), ["a", "b"]);
        assert_eq!(terms("%_' --"), Vec::<String>::new());
        assert_eq!(terms(&"w1 ".repeat(40)), ["w1"]);
        let many: String = (0..30).map(|n| format!("word{n} ")).collect();
        assert_eq!(terms(&many).len(), MAX_TERMS);
    }

    #[test]
    fn scores_count_terms_then_occurrences_in_any_case() {
        let query = terms("oslo fjord");
        assert_eq!(
            score("Oslo, OSLO and the Oslofjord", &query),
            Score {
                matched: vec!["oslo".into(), "fjord".into()],
                occurrences: 4
            }
        );
        assert_eq!(score("Bergen", &query).matched, Vec::<String>::new());
    }

    #[test]
    fn excerpts_keep_short_text_and_cut_long_text_around_the_first_hit() {
        let query = terms("needle");
        assert_eq!(excerpt("short", &query, 10), ("short".into(), false));
        let text = format!("{}needle{}", "a".repeat(100), "b".repeat(100));
        let (cut, truncated) = excerpt(&text, &query, 20);
        assert!(truncated);
        assert_eq!(cut, format!("…{}needle{}…", "a".repeat(5), "b".repeat(9)));
        // Multi-byte text is cut on character boundaries.
        let (cut, _) = excerpt(&"ø".repeat(50), &query, 10);
        assert_eq!(cut, format!("{}…", "ø".repeat(10)));
    }
}
