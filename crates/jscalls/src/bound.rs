//! Reads of a field of a `const` bound to a call's result (`const r = fs.read({…});` then
//! `r.content`), and the fields an object pattern takes from one (`const { content } =
//! fs.read({…});`): what a caller needs to check them against the fields the result declares,
//! which a grammar cannot (it does not know which names a program binds, and a pattern comes
//! before the call it takes apart).

/// A read of a field of a name bound to a call's result, or a field an object pattern takes
/// from one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundRead {
    /// The name bound (`r`); for a pattern, the field.
    pub name: String,
    /// The function called, as written (`fs.read`).
    pub callee: String,
    /// The field read, as far as the program goes (`cont` while it is being written).
    pub field: String,
    /// Where the field starts in the source, in bytes.
    pub start: usize,
    /// Whether something follows the field in the source: false while it may still grow.
    pub complete: bool,
    /// For a field an object pattern takes, where the pattern's `{` is, in bytes.
    pub pattern: Option<usize>,
}

/// The reads, in `source`, of a field of a `const` bound to the bare result of a call of one
/// of `callees` (`const r = fs.read({…});`, nothing chained on the call), after that
/// declaration: `r.content`, `r?.content`; and the fields an object pattern takes from such
/// a result (`const { content, size: n = 0, ...rest } = fs.read({…});`: `content` and `size`).
/// A name declared more than once in the program (a parameter, another `const`, a pattern)
/// is left out: which binding a read means is not told apart. Strings, comments and the text
/// of templates hold no reads.
pub fn bound_reads(source: &str, callees: &dyn Fn(&str) -> bool) -> Vec<BoundRead> {
    let masked = mask(source);
    let tokens = tokens(&masked);
    let mut reads = Vec::new();
    for at in 0..tokens.len() {
        let Some((target, callee, end)) = bound_at(&tokens, at, &masked, callees) else {
            continue;
        };
        let name = match target {
            Target::Name(name) => name,
            Target::Pattern { open, keys } => {
                for (key, start) in keys {
                    reads.push(BoundRead {
                        name: key.to_owned(),
                        callee: callee.clone(),
                        field: key.to_owned(),
                        start,
                        complete: true,
                        pattern: Some(open),
                    });
                }
                continue;
            }
        };
        if declared_again(&tokens, &masked, name, at + 1) {
            continue;
        }
        for read in end..tokens.len() {
            let is_name = tokens[read].text(&masked) == name
                && tokens[read].kind == Kind::Name
                && (read == 0 || !matches!(tokens[read - 1].text(&masked), "." | "?."));
            if !is_name {
                continue;
            }
            let (Some(dot), Some(field)) = (tokens.get(read + 1), tokens.get(read + 2)) else {
                continue;
            };
            if !matches!(dot.text(&masked), "." | "?.") || field.kind != Kind::Name {
                continue;
            }
            reads.push(BoundRead {
                name: name.to_owned(),
                callee: callee.clone(),
                field: field.text(&masked).to_owned(),
                start: field.start,
                complete: field.end < source.len(),
                pattern: None,
            });
        }
    }
    reads
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Name,
    Punct,
    /// A number, or what a string or template text was masked to.
    Other,
}

#[derive(Debug, Clone, Copy)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
}

impl Token {
    fn text<'a>(&self, source: &'a str) -> &'a str {
        &source[self.start..self.end]
    }
}

/// What a declaration binds: a name, or the fields of an object pattern (each with where it
/// starts) and where its `{` is.
enum Target<'a> {
    Name(&'a str),
    Pattern {
        open: usize,
        keys: Vec<(&'a str, usize)>,
    },
}

/// `const NAME = CALLEE(…)` or `const|let|var { … } = CALLEE(…)` at token `at`, the call's
/// `)` followed by `;`, `,`, `}`, or a token on a later line that does not go on with the
/// expression: what it binds, the callee and the index of the token after the declaration.
fn bound_at<'a>(
    tokens: &[Token],
    at: usize,
    source: &'a str,
    callees: &dyn Fn(&str) -> bool,
) -> Option<(Target<'a>, String, usize)> {
    let text = |index: usize| tokens.get(index).map(|token| token.text(source));
    let keyword = text(at)?;
    let (target, equals) = if keyword == "const" && tokens.get(at + 1)?.kind == Kind::Name {
        (Target::Name(text(at + 1)?), at + 2)
    } else if matches!(keyword, "const" | "let" | "var") && text(at + 1)? == "{" {
        let close = matching(tokens, source, at + 1)?;
        (
            Target::Pattern {
                open: tokens[at + 1].start,
                keys: pattern_keys(tokens, source, at + 1, close),
            },
            close + 1,
        )
    } else {
        return None;
    };
    if text(equals)? != "=" {
        return None;
    }
    // The callee: names joined by dots, then `(`.
    let mut index = equals + 1;
    let mut callee = String::new();
    loop {
        let token = tokens.get(index)?;
        if token.kind != Kind::Name {
            return None;
        }
        callee.push_str(token.text(source));
        index += 1;
        match text(index)? {
            "." => {
                callee.push('.');
                index += 1;
            }
            "(" => break,
            _ => return None,
        }
    }
    if !callees(&callee) {
        return None;
    }
    let close = matching(tokens, source, index)?;
    let after = tokens.get(close + 1)?;
    let bare = match after.text(source) {
        ";" | "," | "}" => true,
        next => {
            let line_break = source[tokens[close].end..after.start].contains('\n');
            line_break
                && (after.kind == Kind::Name
                    || !matches!(
                        next,
                        "." | "?." | "[" | "(" | "+" | "-" | "*" | "/" | "%" | "?" | "??"
                    ) && after.kind != Kind::Punct)
        }
    };
    bare.then_some((target, callee, close + 1))
}

/// The fields an object pattern from `open` to `close` (its braces) takes: the names right
/// after its `{` or a `,` at its own depth, not after `...`.
fn pattern_keys<'a>(
    tokens: &[Token],
    source: &'a str,
    open: usize,
    close: usize,
) -> Vec<(&'a str, usize)> {
    let mut keys = Vec::new();
    let mut depth = 0usize;
    for index in open..close {
        match tokens[index].text(source) {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth = depth.saturating_sub(1),
            "," | "..." => {}
            _ if depth == 1 && tokens[index].kind == Kind::Name => {
                if matches!(tokens[index - 1].text(source), "{" | ",") {
                    keys.push((tokens[index].text(source), tokens[index].start));
                }
            }
            _ => {}
        }
    }
    keys
}

/// Where the `{` of the first object pattern in `source` is whose declaration is not yet
/// told (see [`bound_reads`]): the pattern is still being written, or it is bound to a
/// callee (names and dots) still being written, or to a call of one of `callees` that has not
/// yet ended, or has ended with nothing after it. What comes after such a `{` may still be
/// found wrong.
pub fn undecided_pattern(source: &str, callees: &dyn Fn(&str) -> bool) -> Option<usize> {
    let masked = mask(source);
    let tokens = tokens(&masked);
    let text = |index: usize| tokens.get(index).map(|token| token.text(&masked));
    for at in 0..tokens.len() {
        if !matches!(text(at), Some("const" | "let" | "var")) || text(at + 1) != Some("{") {
            continue;
        }
        let open = tokens[at + 1].start;
        let Some(close) = matching(&tokens, &masked, at + 1) else {
            return Some(open);
        };
        match text(close + 1) {
            None => return Some(open),
            Some("=") => {}
            Some(_) => continue,
        }
        let mut index = close + 2;
        let mut callee = String::new();
        let paren = loop {
            let Some(token) = tokens.get(index) else {
                return Some(open);
            };
            match token.text(&masked) {
                "." if !callee.is_empty() => callee.push('.'),
                "(" if !callee.is_empty() => break index,
                name if token.kind == Kind::Name => callee.push_str(name),
                _ => break usize::MAX,
            }
            index += 1;
        };
        if paren == usize::MAX || !callees(&callee) {
            continue;
        }
        match matching(&tokens, &masked, paren) {
            Some(end) if end + 1 < tokens.len() => {}
            _ => return Some(open),
        }
    }
    None
}

/// Whether `name` is declared anywhere in the program but at the `const` before `bound`:
/// after `const`, `let`, `var`, `function` or `catch (`, in a destructuring pattern, or as a
/// parameter (before `=>`, or in the list of `function (…)` or `(…) =>`).
fn declared_again(tokens: &[Token], source: &str, name: &str, bound: usize) -> bool {
    let text = |index: usize| tokens.get(index).map_or("", |token| token.text(source));
    let named = |from: usize, to: usize| (from..to).any(|index| text(index) == name);
    for (index, token) in tokens.iter().enumerate() {
        if index == bound || token.text(source) != name {
            if matches!(text(index), "const" | "let" | "var")
                && matches!(text(index + 1), "{" | "[")
                && let Some(close) = matching(tokens, source, index + 1)
                && named(index + 2, close)
            {
                return true;
            }
            if text(index) == "=>"
                && index > 0
                && text(index - 1) == ")"
                && let Some(open) = opening(tokens, source, index - 1)
                && named(open + 1, index - 1)
            {
                return true;
            }
            if text(index) == "function" {
                let open = if text(index + 1) == "(" {
                    index + 1
                } else {
                    index + 2
                };
                if text(open) == "("
                    && let Some(close) = matching(tokens, source, open)
                    && named(open + 1, close)
                {
                    return true;
                }
            }
            continue;
        }
        let before = if index > 0 { text(index - 1) } else { "" };
        if matches!(before, "const" | "let" | "var" | "function")
            || text(index + 1) == "=>"
            || (before == "(" && index > 1 && text(index - 2) == "catch")
        {
            return true;
        }
    }
    false
}

/// The index of the bracket that closes the one at `open`.
fn matching(tokens: &[Token], source: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (index, token) in tokens.iter().enumerate().skip(open) {
        match token.text(source) {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index);
                }
            }
            _ => {}
        }
    }
    None
}

/// The index of the bracket that opens the one closing at `close`.
fn opening(tokens: &[Token], source: &str, close: usize) -> Option<usize> {
    let mut depth = 0usize;
    for index in (0..=close).rev() {
        match tokens[index].text(source) {
            ")" | "]" | "}" => depth += 1,
            "(" | "[" | "{" => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index);
                }
            }
            _ => {}
        }
    }
    None
}

const PUNCTS: &[&str] = &[
    "...", "?.", "=>", "===", "!==", "==", "!=", "<=", ">=", "&&", "||", "??", "++", "--", "+=",
    "-=", "*=", "/=",
];

fn tokens(source: &str) -> Vec<Token> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let c = bytes[at];
        let start = at;
        if c.is_ascii_whitespace() {
            at += 1;
            continue;
        }
        if c == b'_' || c == b'$' || c.is_ascii_alphabetic() || c >= 0x80 {
            while at < bytes.len()
                && (bytes[at] == b'_'
                    || bytes[at] == b'$'
                    || bytes[at].is_ascii_alphanumeric()
                    || bytes[at] >= 0x80)
            {
                at += 1;
            }
            tokens.push(Token {
                kind: Kind::Name,
                start,
                end: at,
            });
        } else if c.is_ascii_digit() {
            while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'.') {
                at += 1;
            }
            tokens.push(Token {
                kind: Kind::Other,
                start,
                end: at,
            });
        } else if c == 0 {
            // A masked string, comment or template text.
            while at < bytes.len() && bytes[at] == 0 {
                at += 1;
            }
            tokens.push(Token {
                kind: Kind::Other,
                start,
                end: at,
            });
        } else {
            // `a?.5:1` is a conditional.
            let length = PUNCTS
                .iter()
                .find(|punct| {
                    source[at..].starts_with(*punct)
                        && !(**punct == "?." && bytes.get(at + 2).is_some_and(u8::is_ascii_digit))
                })
                .map_or(1, |punct| punct.len());
            at += length;
            tokens.push(Token {
                kind: Kind::Punct,
                start,
                end: at,
            });
        }
    }
    tokens
}

/// `source` with strings and the text of templates (not their `${…}`) turned into NUL bytes
/// and comments into blanks, so that no name or dot in them is read. Byte offsets stay.
fn mask(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = bytes.to_vec();
    let mut at = 0;
    // Open template substitutions: the depth of braces inside each.
    let mut substitutions: Vec<usize> = Vec::new();
    let space = |out: &mut Vec<u8>, from: usize, to: usize| {
        for byte in &mut out[from..to] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    while at < bytes.len() {
        match bytes[at] {
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                let end = source[at..].find('\n').map_or(bytes.len(), |end| at + end);
                space(&mut out, at, end);
                at = end;
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                let end = source[at + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |end| at + 2 + end + 2);
                space(&mut out, at, end);
                at = end;
            }
            quote @ (b'"' | b'\'') => {
                let mut end = at + 1;
                while end < bytes.len() && bytes[end] != quote && bytes[end] != b'\n' {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                let end = (end + 1).min(bytes.len());
                blank(&mut out, at, end);
                at = end;
            }
            b'`' => at = template_text(bytes, at + 1, &mut out, &mut substitutions),
            b'{' if !substitutions.is_empty() => {
                if let Some(depth) = substitutions.last_mut() {
                    *depth += 1;
                }
                at += 1;
            }
            b'}' if substitutions.last() == Some(&0) => {
                substitutions.pop();
                at = template_text(bytes, at + 1, &mut out, &mut substitutions);
            }
            b'}' if !substitutions.is_empty() => {
                if let Some(depth) = substitutions.last_mut() {
                    *depth -= 1;
                }
                at += 1;
            }
            _ => at += 1,
        }
    }
    // Only whole characters were blanked (their every byte), so this is still UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// Turns `out[from..to]` into NUL bytes.
fn blank(out: &mut [u8], from: usize, to: usize) {
    out[from..to].fill(0);
}

/// Blanks a template's text from `at` to its closing backtick (past it) or to a `${` (past
/// it, pushing a substitution); returns where to go on.
fn template_text(bytes: &[u8], at: usize, out: &mut [u8], substitutions: &mut Vec<usize>) -> usize {
    let mut end = at;
    while end < bytes.len() {
        match bytes[end] {
            b'\\' => end += 2,
            b'`' => {
                blank(out, at.saturating_sub(1), end + 1);
                return end + 1;
            }
            b'$' if bytes.get(end + 1) == Some(&b'{') => {
                blank(out, at.saturating_sub(1), end + 2);
                substitutions.push(0);
                return end + 2;
            }
            _ => end += 1,
        }
    }
    let end = end.min(bytes.len());
    blank(out, at.saturating_sub(1), end);
    end
}
