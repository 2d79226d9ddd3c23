//! Finds, in a JavaScript program that may be cut short, the first call of a bare name that
//! is neither known to the caller nor declared earlier in the program (see the README).
//!
//! A lexer with a little memory, not a parser: it keeps the stack of open brackets (to tell
//! an object literal and a class body from a block), the names declared so far, and the last
//! two tokens, which is all a call, a declaration and a method definition take to tell apart.
//! Names are declared generously (every name in a destructuring pattern, every name assigned
//! to): a name taken for declared that is not only lets a wrong call through, while the
//! opposite would refuse a right one.
//!
//! [`literal_calls`] finds the calls of one function whose argument is a literal, read as
//! JSON (`fs.list({ path: "data.csv" })`): what a caller needs to tell a call written again.
//!
//! [`bound_reads`] finds the reads of a field of a `const` bound to a call's result
//! (`const r = fs.read({…});` then `r.content`): what a caller needs to check them against the
//! fields the result declares.

#![forbid(unsafe_code)]

use std::collections::HashSet;

mod bound;
mod literal;

pub use bound::{BoundRead, bound_reads, undecided_pattern};
pub use literal::{Argument, LiteralCall, literal_calls};

/// A call of a bare name that is neither known nor declared before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undeclared {
    /// The name called.
    pub name: String,
    /// Where the name starts in the source, in bytes.
    pub start: usize,
}

/// The first call in `source` whose `(` is at byte `from` or after, of a bare name that
/// `known` does not hold and that the program does not declare before the call. A function
/// declared after a call of it (hoisted) counts as not declared.
pub fn undeclared_call(
    source: &str,
    from: usize,
    known: &dyn Fn(&str) -> bool,
) -> Option<Undeclared> {
    Scanner::new(source).find(from, known)
}

/// JavaScript's reserved words, strict mode's included: never the name of a binding.
pub const RESERVED_WORDS: &[&str] = &[
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
];

/// Whether `name` is the language's own: never a call of a declared function, even before
/// `(`. The reserved words, and `async` and `of`, which are keywords where they stand here.
fn keyword(name: &str) -> bool {
    RESERVED_WORDS.contains(&name) || matches!(name, "async" | "of")
}

/// After these keywords a `/` starts a regular expression, not a division.
const BEFORE_AN_OPERAND: &[&str] = &[
    "return",
    "typeof",
    "case",
    "do",
    "else",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "yield",
    "await",
    "instanceof",
];

/// JavaScript's operators, longest first (maximal munch); `/` is read apart.
const OPERATORS: &[&str] = &[
    ">>>=", "...", "===", "!==", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=", "=>", "==", "!=",
    "<=", ">=", "&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=", "%=", "&=", "|=", "^=", "**",
    "<<", ">>", "=", "<", ">", "!", "&", "|", "?", "+", "-", "*", "%", "^", "~", ":", ";", ",",
    ".", "(", ")", "[", "]", "{", "}", "@", "#",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    /// A name (keywords too), and where it starts.
    Name(&'a str, usize),
    Punct(&'a str),
    /// A string, number, template or regular expression.
    Operand,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Paren,
    Bracket,
    Block,
    Object,
    Class,
    /// A template literal's `${`.
    Substitution,
}

struct Scanner<'a> {
    source: &'a str,
    at: usize,
    stack: Vec<Open>,
    /// The names seen in each open parenthesis (for arrow parameters).
    groups: Vec<Vec<&'a str>>,
    /// The names of the parenthesis closed last.
    last_group: Vec<&'a str>,
    declared: HashSet<&'a str>,
    /// Every name is declared while the stack is deeper than this (a destructuring pattern,
    /// a parameter list).
    declaring_above: Option<usize>,
    /// `const`, `let` or `var` was the last token: what comes next is declared.
    declaration_next: bool,
    /// `function` or `catch` was read and its parameter list is next.
    parameters_next: bool,
    /// `class` was read and its body is the next `{`.
    class_next: bool,
    previous: Option<Token<'a>>,
    before_previous: Option<Token<'a>>,
}

impl<'a> Scanner<'a> {
    fn new(source: &'a str) -> Self {
        Self {
            source,
            at: 0,
            stack: Vec::new(),
            groups: Vec::new(),
            last_group: Vec::new(),
            declared: HashSet::new(),
            declaring_above: None,
            declaration_next: false,
            parameters_next: false,
            class_next: false,
            previous: None,
            before_previous: None,
        }
    }

    fn rest(&self) -> &'a str {
        &self.source[self.at..]
    }

    fn find(mut self, from: usize, known: &dyn Fn(&str) -> bool) -> Option<Undeclared> {
        while let Some(c) = self.rest().chars().next() {
            let start = self.at;
            if c.is_whitespace() {
                self.at += c.len_utf8();
            } else if self.rest().starts_with("//") {
                self.skip_to_line_end();
            } else if self.rest().starts_with("/*") {
                self.at = match self.rest()[2..].find("*/") {
                    Some(end) => self.at + 2 + end + 2,
                    None => self.source.len(),
                };
            } else if c == '"' || c == '\'' {
                self.skip_string(c);
                self.push(Token::Operand);
            } else if c == '`' {
                self.at += 1;
                self.skip_template();
            } else if c.is_ascii_digit()
                || (c == '.' && self.rest()[1..].starts_with(|c: char| c.is_ascii_digit()))
            {
                self.at += 1;
                self.skip_while(|c| c.is_alphanumeric() || c == '_' || c == '.');
                self.push(Token::Operand);
            } else if is_name_start(c) {
                self.skip_while(is_name_char);
                self.name(&self.source[start..self.at], start);
            } else if c == '/' {
                if self.regex_may_start() {
                    self.skip_regex();
                    self.push(Token::Operand);
                } else {
                    let length = if self.rest().starts_with("/=") { 2 } else { 1 };
                    self.at += length;
                    self.push(Token::Punct(&self.source[start..self.at]));
                }
            } else {
                let Some(mut operator) = OPERATORS
                    .iter()
                    .copied()
                    .find(|operator| self.rest().starts_with(operator))
                else {
                    self.at += c.len_utf8();
                    continue;
                };
                // `a?.5:1` is a conditional, not an optional chain.
                if operator == "?." && self.rest()[2..].starts_with(|c: char| c.is_ascii_digit()) {
                    operator = "?";
                }
                self.at += operator.len();
                let found = self.punct(&self.source[start..self.at], from, known);
                if found.is_some() {
                    return found;
                }
            }
        }
        None
    }

    fn skip_while(&mut self, keep: impl Fn(char) -> bool) {
        let length = self
            .rest()
            .find(|c: char| !keep(c))
            .unwrap_or(self.rest().len());
        self.at += length;
    }

    fn skip_to_line_end(&mut self) {
        self.skip_while(|c| c != '\n');
    }

    /// Reads a string literal's text past its closing `quote`, or up to the line's end.
    fn skip_string(&mut self, quote: char) {
        self.at += 1;
        self.skip_line_until(|c| c == quote);
    }

    /// Reads on, past escapes, to the first character `closes` (which tells it by what it
    /// has seen) and past it, or up to the line's end, where a string or a regular
    /// expression ends unclosed. Returns whether it was closed.
    fn skip_line_until(&mut self, mut closes: impl FnMut(char) -> bool) -> bool {
        let mut chars = self.rest().char_indices();
        while let Some((offset, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '\n' => {
                    self.at += offset;
                    return false;
                }
                c if closes(c) => {
                    self.at += offset + 1;
                    return true;
                }
                _ => {}
            }
        }
        self.at = self.source.len();
        false
    }

    /// Reads a template literal's text up to its end (an operand) or to a `${`, whose
    /// expression is then read as code until its `}`.
    fn skip_template(&mut self) {
        let mut chars = self.rest().char_indices();
        while let Some((offset, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '`' => {
                    self.at += offset + 1;
                    self.push(Token::Operand);
                    return;
                }
                '$' if self.rest()[offset + 1..].starts_with('{') => {
                    self.at += offset + 2;
                    self.stack.push(Open::Substitution);
                    self.previous = None;
                    self.before_previous = None;
                    return;
                }
                _ => {}
            }
        }
        self.at = self.source.len();
    }

    fn regex_may_start(&self) -> bool {
        match self.previous {
            None => true,
            Some(Token::Operand) => false,
            Some(Token::Punct(punct)) => !matches!(punct, ")" | "]" | "}"),
            Some(Token::Name(name, _)) => BEFORE_AN_OPERAND.contains(&name),
        }
    }

    /// Reads a regular expression past its closing `/` (one inside `[…]` does not close it)
    /// and its flags.
    fn skip_regex(&mut self) {
        self.at += 1;
        let mut in_class = false;
        let closed = self.skip_line_until(|c| match c {
            '[' => {
                in_class = true;
                false
            }
            ']' => {
                in_class = false;
                false
            }
            '/' => !in_class,
            _ => false,
        });
        if closed {
            self.skip_while(is_name_char);
        }
    }

    fn push(&mut self, token: Token<'a>) {
        self.before_previous = self.previous;
        self.previous = Some(token);
    }

    fn declaring(&self) -> bool {
        self.declaring_above
            .is_some_and(|depth| self.stack.len() > depth)
    }

    fn name(&mut self, name: &'a str, start: usize) {
        if let Some(group) = self.groups.last_mut() {
            group.push(name);
        }
        let keyword = keyword(name);
        if self.declaring() && !keyword {
            self.declared.insert(name);
        }
        if self.declaration_next && !keyword {
            self.declared.insert(name);
            self.declaration_next = false;
        }
        // `function f`, `function* f` and `class C` declare their names.
        let named = match self.previous {
            Some(Token::Name("function" | "class", _)) => true,
            Some(Token::Punct("*")) => self.parameters_next,
            _ => false,
        };
        if named && !keyword {
            self.declared.insert(name);
        }
        match name {
            "const" | "let" | "var" => self.declaration_next = true,
            "function" | "catch" => self.parameters_next = true,
            "class" => self.class_next = true,
            _ => {}
        }
        self.push(Token::Name(name, start));
    }

    fn open(&mut self, open: Open) {
        self.stack.push(open);
    }

    /// Closes the innermost bracket; returns what it was.
    fn close(&mut self) -> Option<Open> {
        let open = self.stack.pop();
        if self
            .declaring_above
            .is_some_and(|depth| self.stack.len() <= depth)
        {
            self.declaring_above = None;
        }
        open
    }

    fn punct(
        &mut self,
        punct: &'a str,
        from: usize,
        known: &dyn Fn(&str) -> bool,
    ) -> Option<Undeclared> {
        let position = self.at - punct.len();
        match punct {
            "(" => {
                let found = if position >= from {
                    self.call(known)
                } else {
                    None
                };
                if found.is_some() {
                    return found;
                }
                if std::mem::take(&mut self.parameters_next) {
                    self.declaring_above.get_or_insert(self.stack.len());
                }
                self.open(Open::Paren);
                self.groups.push(Vec::new());
            }
            ")" => {
                self.close();
                self.last_group = self.groups.pop().unwrap_or_default();
            }
            "[" => {
                if std::mem::take(&mut self.declaration_next) {
                    self.declaring_above.get_or_insert(self.stack.len());
                }
                self.open(Open::Bracket);
            }
            "]" => {
                self.close();
            }
            "{" => {
                let open = if std::mem::take(&mut self.class_next) {
                    Open::Class
                } else if self.object_may_start() {
                    Open::Object
                } else {
                    Open::Block
                };
                if std::mem::take(&mut self.declaration_next) {
                    self.declaring_above.get_or_insert(self.stack.len());
                }
                self.parameters_next = false;
                self.open(open);
            }
            // The `}` of a template's `${…}`: its text goes on.
            "}" if self.stack.last() == Some(&Open::Substitution) => {
                self.close();
                self.skip_template();
                return None;
            }
            "}" => {
                self.close();
            }
            "=>" => match self.previous {
                Some(Token::Name(name, _)) => {
                    self.declared.insert(name);
                }
                Some(Token::Punct(")")) => {
                    self.declared.extend(self.last_group.iter().copied());
                }
                _ => {}
            },
            // `total = 0` makes `total` exist, declared or not.
            "=" => {
                if let Some(Token::Name(name, _)) = self.previous {
                    self.declared.insert(name);
                }
            }
            _ => {}
        }
        // `function (` and `class {` have no name; anything else ends the wait for one.
        if !matches!(punct, "(" | "{" | "*") {
            self.parameters_next = false;
        }
        // `const {` and `const [` took it; after anything else nothing more is declared.
        self.declaration_next = false;
        self.push(Token::Punct(punct));
        None
    }

    /// Whether a `{` here starts an object literal (after an operator, `(`, `[`, `,`, `:`, or
    /// `return`), not a block or a function's body.
    fn object_may_start(&self) -> bool {
        match self.previous {
            None => false,
            Some(Token::Operand) => false,
            Some(Token::Punct(punct)) => !matches!(punct, ")" | "]" | "}" | ";" | "{" | "=>"),
            Some(Token::Name(name, _)) => matches!(name, "return" | "yield" | "await" | "case"),
        }
    }

    /// The call that a `(` read now makes, when it is of an undeclared bare name.
    fn call(&self, known: &dyn Fn(&str) -> bool) -> Option<Undeclared> {
        let Some(Token::Name(name, start)) = self.previous else {
            return None;
        };
        if keyword(name) {
            return None;
        }
        match self.before_previous {
            // `a.f(`, `a?.f(`: a method; `function f(`: a declaration.
            Some(Token::Punct("." | "?.")) | Some(Token::Name("function", _)) => return None,
            _ => {}
        }
        // A method defined in a class body, or in an object literal (`{ f() {…} }`).
        match self.stack.last() {
            Some(Open::Class) => return None,
            Some(Open::Object)
                if matches!(
                    self.before_previous,
                    Some(Token::Punct("{" | ",")) | Some(Token::Name("async" | "get" | "set", _))
                ) =>
            {
                return None;
            }
            _ => {}
        }
        if known(name) || self.declared.contains(name) {
            return None;
        }
        Some(Undeclared {
            name: name.to_owned(),
            start,
        })
    }
}

fn is_name_start(c: char) -> bool {
    c.is_alphabetic() || c == '_' || c == '$'
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

#[cfg(test)]
mod tests;
