//! Calls of a given function whose argument is written out as a literal
//! (`fs.list({ path: "data.csv" })`), with that literal read as JSON: enough to tell a call
//! that a program is writing again with the same input.

use serde_json::{Map, Number, Value};

/// A call of the function asked for, found in a program.
#[derive(Debug, Clone, PartialEq)]
pub struct LiteralCall {
    /// Where the function's name starts (`fs` in `fs.list(`), in bytes.
    pub start: usize,
    /// Where the name's last part starts (`list` in `fs.list(`), in bytes.
    pub method: usize,
    /// The argument, as far as the program goes.
    pub argument: Argument,
}

/// The argument of a [`LiteralCall`].
#[derive(Debug, Clone, PartialEq)]
pub enum Argument {
    /// A literal (or nothing, read as `{}`), closed by the call's `)`, which ends at `end`.
    Literal { value: Value, end: usize },
    /// The program ends before the call's `)`, and what there is of it is a literal so far.
    Unfinished,
    /// Something other than one literal: a name, an expression, more arguments.
    Other,
}

/// The calls of `callee` (a name, or names joined by `.`) in `source`, in order. The name
/// stands alone (`myfs.list(` is no call of `fs.list`) and is followed by `(`, blanks
/// allowed. Strings and comments are not told apart from code: a caller that scans code a
/// model writes accepts that a call quoted in a string counts too.
pub fn literal_calls(source: &str, callee: &str) -> Vec<LiteralCall> {
    let mut calls = Vec::new();
    if callee.is_empty() {
        return calls;
    }
    let method = callee.rfind('.').map_or(0, |dot| dot + 1);
    let mut from = 0;
    while let Some(found) = source[from..].find(callee) {
        let start = from + found;
        from = start + callee.len();
        let alone = source[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '.'));
        let rest = &source[from..];
        let after = rest.trim_start();
        let open = from + (rest.len() - after.len());
        let name_ends = !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$');
        if !alone || !name_ends || !after.starts_with('(') {
            continue;
        }
        let mut reader = Reader {
            source,
            at: open + 1,
        };
        calls.push(LiteralCall {
            start,
            method: start + method,
            argument: reader.argument(),
        });
    }
    calls
}

/// Why a literal was not read.
enum Stop {
    /// The source ended inside it.
    End,
    /// It is not a literal.
    Other,
}

struct Reader<'a> {
    source: &'a str,
    at: usize,
}

impl<'a> Reader<'a> {
    fn rest(&self) -> &'a str {
        &self.source[self.at..]
    }

    fn argument(&mut self) -> Argument {
        let value = match self.blank() {
            Err(stop) => Err(stop),
            Ok(()) if self.rest().starts_with(')') => Ok(Value::Object(Map::new())),
            Ok(()) => self.value(),
        };
        let closed = value.and_then(|value| {
            self.blank()?;
            match self.rest().chars().next() {
                None => Err(Stop::End),
                Some(')') => Ok(value),
                Some(_) => Err(Stop::Other),
            }
        });
        match closed {
            Ok(value) => Argument::Literal {
                value,
                end: self.at + 1,
            },
            Err(Stop::End) => Argument::Unfinished,
            Err(Stop::Other) => Argument::Other,
        }
    }

    /// Skips blanks and comments.
    fn blank(&mut self) -> Result<(), Stop> {
        loop {
            let rest = self.rest();
            let trimmed = rest.trim_start();
            self.at += rest.len() - trimmed.len();
            if trimmed.starts_with("//") {
                match trimmed.find('\n') {
                    Some(end) => self.at += end,
                    None => return Err(Stop::End),
                }
            } else if let Some(comment) = trimmed.strip_prefix("/*") {
                match comment.find("*/") {
                    Some(end) => self.at += 2 + end + 2,
                    None => return Err(Stop::End),
                }
            } else if trimmed.is_empty() {
                return Err(Stop::End);
            } else {
                return Ok(());
            }
        }
    }

    fn value(&mut self) -> Result<Value, Stop> {
        let Some(c) = self.rest().chars().next() else {
            return Err(Stop::End);
        };
        match c {
            '{' => self.object(),
            '[' => self.array(),
            '"' | '\'' | '`' => self.string(c).map(Value::String),
            c if c.is_ascii_digit() || matches!(c, '-' | '+' | '.') => self.number(),
            c if c.is_alphabetic() || c == '_' || c == '$' => {
                let name = self.name();
                // A name cut short may become another one.
                if self.rest().is_empty() {
                    return Err(Stop::End);
                }
                match name {
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    // An absent field, as a tool's input takes it.
                    "null" | "undefined" => Ok(Value::Null),
                    _ => Err(Stop::Other),
                }
            }
            _ => Err(Stop::Other),
        }
    }

    fn name(&mut self) -> &'a str {
        let rest = self.rest();
        let length = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(rest.len());
        self.at += length;
        &rest[..length]
    }

    fn object(&mut self) -> Result<Value, Stop> {
        self.at += 1;
        let mut object = Map::new();
        loop {
            self.blank()?;
            if self.rest().starts_with('}') {
                self.at += 1;
                return Ok(Value::Object(object));
            }
            let key = match self.rest().chars().next() {
                Some(quote @ ('"' | '\'')) => self.string(quote)?,
                Some(c) if c.is_alphabetic() || c == '_' || c == '$' => self.name().to_owned(),
                Some(c) if c.is_ascii_digit() => self.number()?.to_string(),
                _ => return Err(Stop::Other),
            };
            self.blank()?;
            // `{ path }` and `{ f() {} }` are no literals.
            if !self.rest().starts_with(':') {
                return Err(Stop::Other);
            }
            self.at += 1;
            self.blank()?;
            let value = self.value()?;
            object.insert(key, value);
            self.blank()?;
            match self.rest().chars().next() {
                Some(',') => self.at += 1,
                Some('}') => {}
                _ => return Err(Stop::Other),
            }
        }
    }

    fn array(&mut self) -> Result<Value, Stop> {
        self.at += 1;
        let mut items = Vec::new();
        loop {
            self.blank()?;
            if self.rest().starts_with(']') {
                self.at += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.blank()?;
            match self.rest().chars().next() {
                Some(',') => self.at += 1,
                Some(']') => {}
                _ => return Err(Stop::Other),
            }
        }
    }

    /// A string's text, its escapes read; a template with `${…}` in it is no literal.
    fn string(&mut self, quote: char) -> Result<String, Stop> {
        self.at += 1;
        let mut text = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((offset, c)) = chars.next() {
            match c {
                c if c == quote => {
                    self.at += offset + 1;
                    return Ok(text);
                }
                '\n' if quote != '`' => return Err(Stop::Other),
                '$' if quote == '`' && self.rest()[offset + 1..].starts_with('{') => {
                    return Err(Stop::Other);
                }
                '\\' => {
                    let Some((_, escaped)) = chars.next() else {
                        return Err(Stop::End);
                    };
                    match escaped {
                        'n' => text.push('\n'),
                        't' => text.push('\t'),
                        'r' => text.push('\r'),
                        '0' => text.push('\0'),
                        'b' => text.push('\u{8}'),
                        'f' => text.push('\u{c}'),
                        'v' => text.push('\u{b}'),
                        'u' => {
                            let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                            if hex.len() < 4 {
                                return Err(Stop::End);
                            }
                            let code = u32::from_str_radix(&hex, 16).map_err(|_| Stop::Other)?;
                            // A surrogate half says more than this reader reads.
                            text.push(char::from_u32(code).ok_or(Stop::Other)?);
                        }
                        'x' => return Err(Stop::Other),
                        '\n' => {}
                        other => text.push(other),
                    }
                }
                c => text.push(c),
            }
        }
        Err(Stop::End)
    }

    fn number(&mut self) -> Result<Value, Stop> {
        let rest = self.rest();
        let length = rest
            .char_indices()
            .find(|&(offset, c)| {
                !(c.is_ascii_alphanumeric()
                    || c == '.'
                    || c == '_'
                    || (matches!(c, '-' | '+')
                        && (offset == 0 || rest[..offset].ends_with(['e', 'E']))))
            })
            .map_or(rest.len(), |(offset, _)| offset);
        let text = &rest[..length];
        self.at += length;
        if self.rest().is_empty() {
            return Err(Stop::End);
        }
        let text = text.strip_prefix('+').unwrap_or(text).replace('_', "");
        if let Ok(integer) = text.parse::<i64>() {
            return Ok(Value::Number(integer.into()));
        }
        let float: f64 = text.parse().map_err(|_| Stop::Other)?;
        Number::from_f64(float)
            .map(Value::Number)
            .ok_or(Stop::Other)
    }
}
