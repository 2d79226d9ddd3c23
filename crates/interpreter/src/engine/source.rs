//! The program's source before it runs: nesting checked, parsed as a script or as the body of
//! an async function, and the mistakes of pasting a declaration undone.

use std::path::Path;

use boa_engine::ast::{Statement, StatementListItem};
use boa_engine::interner::Interner;
use boa_engine::parser::Parser;
use boa_engine::{Context, Script, Source};

use crate::protocol::{ScriptError, ScriptErrorKind, ToolBinding};

use super::*;

/// The deepest nesting of `(`, `[` and `{` in source, ignoring nothing: a cheap guard that runs
/// before the parser, whose recursion would otherwise overflow the native stack.
pub(crate) fn source_nesting(code: &str) -> usize {
    let mut depth: usize = 0;
    let mut deepest = 0;
    for byte in code.bytes() {
        match byte {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// A program that declares its own `memory` (`const memory = { write(input) { … } }`) or
/// `time` (`const time = time.now()`) hides the tools of that name from all of its block:
/// calls go to its own object, or the name is read before it is set. Refused before it runs,
/// at the declaration.
pub(super) fn own_namespace(code: &str, tools: &[ToolBinding]) -> Option<ScriptError> {
    let mut namespaces: Vec<&str> = tools
        .iter()
        .filter_map(|tool| tool.namespace_and_method().map(|(namespace, _)| namespace))
        .collect();
    namespaces.dedup();
    namespaces.into_iter().find_map(|namespace| {
        let (line, column) = crate::names::own_declaration(code, namespace)?;
        let members = crate::names::namespace_members(tools, namespace);
        let example = members.first().copied().unwrap_or(namespace);
        Some(ScriptError {
            kind: ScriptErrorKind::Syntax,
            message: format!(
                "SyntaxError: the program declares its own `{namespace}`, the name of the \
                 {namespace} tools ({}), which would hide them; it was not run. The tools \
                 already exist: call them as they are, e.g. `const result = {example}({{ … \
                 }});`, and give a variable of yours another name",
                members.join(", ")
            ),
            line: Some(line),
            column: Some(column),
            source_line: code.lines().nth(line as usize - 1).map(str::to_owned),
            hint: None,
        })
    })
}

/// Parses the model's code. A plain script keeps JavaScript's own completion value (the last
/// expression, even inside `if` or `try`). Code with top-level `await` or `return` is not a
/// script; it runs as the body of an async function instead, with its trailing expression
/// turned into a `return`. The second value is how many lines the wrapper adds before the code.
pub(super) fn parse_script(
    context: &mut Context,
    code: &str,
) -> Result<(Script, u32), ScriptError> {
    let plain = Source::from_bytes(code.as_bytes()).with_path(Path::new("script"));
    match Script::parse(plain, None, context) {
        Ok(script) => Ok((script, 0)),
        Err(script_error) => {
            let wrapped = as_async_body(code);
            let source = Source::from_bytes(wrapped.as_bytes()).with_path(Path::new("script"));
            match Script::parse(source, None, context) {
                Ok(script) => Ok((script, 1)),
                Err(wrapped_error) => {
                    // The parser that got further found the real mistake: a plain parse stops
                    // at the first top-level `await`, which the wrapper allows, while the
                    // wrapper's parse goes on to, say, an `await` in a callback lines later.
                    let plain = runtime_error(&script_error, context, code, 0, true);
                    let wrapped = runtime_error(&wrapped_error, context, code, 1, true);
                    let reach = |error: &ScriptError| (error.line, error.column);
                    let mut error = if reach(&wrapped) > reach(&plain) {
                        wrapped
                    } else {
                        plain
                    };
                    error.kind = ScriptErrorKind::Syntax;
                    Err(error)
                }
            }
        }
    }
}

/// `code` as the body of an async function called at once, its trailing expression returned:
/// how a program with top-level `await` or `return` runs (one line before the code).
fn as_async_body(code: &str) -> String {
    format!(
        "(async () => {{\n{}\n}})()",
        with_last_expression_returned(code)
    )
}

/// `fs.write(input: {...})`: the declaration's parameter name pasted into a call. The call
/// without it, when the code names a tool that way; `None` otherwise.
pub(super) fn strip_pasted_parameters(code: &str, tools: &[ToolBinding]) -> Option<String> {
    let mut names: Vec<String> = tools
        .iter()
        .flat_map(|tool| {
            tool.member
                .iter()
                .chain(&tool.function)
                .chain(&tool.aliases)
                .cloned()
        })
        .collect();
    // Longer names first, so `fs.list` is not cut short by a `list` alias.
    names.sort_by_key(|name| std::cmp::Reverse(name.len()));
    let mut fixed = code.to_owned();
    for name in names {
        let mut from = 0;
        while let Some(found) = fixed[from..].find(&format!("{name}(")) {
            let call = from + found;
            let open = call + name.len() + 1;
            let preceded_by_word = fixed[..call]
                .chars()
                .next_back()
                .is_some_and(crate::names::is_identifier_char);
            let rest = &fixed[open..];
            let spaces = rest.len() - rest.trim_start().len();
            let after = &rest[spaces..];
            let parameter = ["input?:", "input:"]
                .into_iter()
                .find(|parameter| after.starts_with(parameter));
            match parameter {
                Some(parameter) if !preceded_by_word => {
                    fixed.replace_range(open..open + spaces + parameter.len(), "");
                }
                _ => {}
            }
            from = open;
        }
    }
    (fixed != code).then_some(fixed)
}

/// Turns a trailing expression statement into `return (…);`, so a script's last expression is
/// its value even though it runs as the body of an async function. The expression's start is
/// found by trying the nearest statement boundaries (spans of calls do not cover the callee).
pub(super) fn with_last_expression_returned(code: &str) -> String {
    const MAX_BOUNDARIES_TRIED: usize = 64;
    let trimmed_end = code.trim_end().trim_end_matches(';').len();
    let tail_is_expression = |start: usize| -> bool {
        let tail = &code[start..trimmed_end];
        if tail.trim().is_empty() {
            return false;
        }
        let mut parser = Parser::new(Source::from_bytes(tail.as_bytes()));
        match parser.parse_function_body(&mut Interner::default(), false, true) {
            Ok(body) => matches!(
                body.statements(),
                [StatementListItem::Statement(statement)]
                    if matches!(statement.as_ref(), Statement::Expression(_))
            ),
            Err(_) => false,
        }
    };
    let mut candidates: Vec<usize> = std::iter::once(0)
        .chain(
            code[..trimmed_end]
                .char_indices()
                .filter(|(_, character)| matches!(character, ';' | '\n' | '}'))
                .map(|(index, character)| index + character.len_utf8()),
        )
        .collect();
    candidates.reverse();
    let start = candidates
        .into_iter()
        .take(MAX_BOUNDARIES_TRIED)
        .filter(|start| tail_is_expression(*start))
        .min();
    let Some(start) = start else {
        return code.to_owned();
    };
    let tail = &code[start..trimmed_end];
    let expression_start = start + (tail.len() - tail.trim_start().len());
    let rewritten = format!(
        "{}return ({});",
        &code[..expression_start],
        code[expression_start..trimmed_end].trim_end()
    );
    let mut check = Parser::new(Source::from_bytes(rewritten.as_bytes()));
    match check.parse_function_body(&mut Interner::default(), false, true) {
        Ok(_) => rewritten,
        Err(_) => code.to_owned(),
    }
}

pub(super) fn normalize_newlines(code: &str) -> String {
    code.replace("\r\n", "\n").replace('\r', "\n")
}

/// The 1-based character column where `name` stands as a whole word in `text`.
pub(crate) fn word_column(text: &str, name: &str) -> Option<u32> {
    text.match_indices(name)
        .find(|(at, _)| {
            let before = text[..*at].chars().next_back();
            let after = text[at + name.len()..].chars().next();
            !before.is_some_and(crate::names::is_identifier_char)
                && !after.is_some_and(crate::names::is_identifier_char)
        })
        .map(|(at, _)| text[..at].chars().count() as u32 + 1)
}

/// The program's syntax tree, for checks that read it before it runs. boa's `Script` keeps
/// its tree to itself, so the code is parsed again, as `parse_script` parsed it:
/// `line_offset` is how many lines its wrapper put before the code.
pub(super) struct SyntaxTree {
    pub(super) script: boa_engine::ast::Script,
    pub(super) interner: Interner,
    pub(super) line_offset: u32,
}

/// `code`'s syntax tree, or `None` when it does not parse (then `parse_script` said why).
pub(super) fn syntax_tree(code: &str, line_offset: u32) -> Option<SyntaxTree> {
    use boa_engine::ast::scope::Scope;
    let wrapped;
    let source = if line_offset == 0 {
        code
    } else {
        wrapped = as_async_body(code);
        &wrapped
    };
    let mut interner = Interner::default();
    let script = Parser::new(Source::from_bytes(source.as_bytes()))
        .parse_script(&Scope::new_global(), &mut interner)
        .ok()?;
    Some(SyntaxTree {
        script,
        interner,
        line_offset,
    })
}

/// An object literal that gives one key twice (`memory.list({ tier: "core", tier: "working" })`):
/// JavaScript keeps the last value and drops the others without a word, while the program
/// meant all of them. Refused before it runs, at the object (ES5's strict mode refused it
/// too).
pub(super) fn repeated_key(tree: &SyntaxTree, code: &str) -> Option<ScriptError> {
    use boa_engine::ast::expression::literal::{ObjectLiteral, PropertyDefinition};
    use boa_engine::ast::property::PropertyName;
    use boa_engine::ast::visitor::{VisitWith, Visitor};
    use boa_engine::ast::{Position, Spanned};
    use std::ops::ControlFlow;

    struct Repeated<'i> {
        interner: &'i Interner,
    }
    impl<'ast> Visitor<'ast> for Repeated<'_> {
        type BreakTy = (String, Position);

        fn visit_object_literal(
            &mut self,
            node: &'ast ObjectLiteral,
        ) -> ControlFlow<Self::BreakTy> {
            let mut seen: Vec<String> = Vec::new();
            for property in node.properties() {
                let name = match property {
                    PropertyDefinition::Property(PropertyName::Literal(name), _)
                    | PropertyDefinition::IdentifierReference(name) => name.sym(),
                    _ => continue,
                };
                let name = self.interner.resolve_expect(name).to_string();
                if seen.contains(&name) {
                    return ControlFlow::Break((name, node.span().start()));
                }
                seen.push(name);
            }
            node.visit_with(self)
        }
    }

    let ControlFlow::Break((name, at)) = tree.script.visit_with(&mut Repeated {
        interner: &tree.interner,
    }) else {
        return None;
    };
    let line = at.line_number().saturating_sub(tree.line_offset).max(1);
    Some(ScriptError {
        kind: ScriptErrorKind::Syntax,
        message: format!(
            "SyntaxError: this object gives `{name}` twice; JavaScript keeps only the last \
             value and drops the others, so the program was not run. A field takes one value: \
             to use several, make one call for each"
        ),
        line: Some(line),
        column: Some(at.column_number()),
        source_line: code.lines().nth(line as usize - 1).map(str::to_owned),
        hint: None,
    })
}

#[cfg(test)]
mod tests {
    use crate::testing::run;
    use serde_json::json;

    #[test]
    fn an_object_that_gives_a_key_twice_is_refused_at_its_line_before_it_runs() {
        let outcome = run(
            "const first = 1;\nconst listing = fs.list({ path: 'a', path: 'b' });\nlisting.entries.length",
            json!({ "entries": [] }),
        );
        let error = outcome.result.unwrap_err();
        assert!(
            error
                .message
                .starts_with("SyntaxError: this object gives `path` twice"),
            "{error:?}"
        );
        assert_eq!((error.line, error.column), (Some(2), Some(25)), "{error:?}");
        // Nothing before the object ran either.
        let outcome = run("output('ran');\nconst o = { a: 1, a: 2 };", json!({}));
        assert!(outcome.result.is_err(), "{outcome:?}");
        assert!(outcome.complete.is_none() && !outcome.done, "{outcome:?}");
        // Nested, shorthand and top-level `return` are looked at too.
        let error = run(
            "const path = 'a';\nconst x = [{ inner: { path, path: 'b' } }];\nreturn x;",
            json!({}),
        )
        .result
        .unwrap_err();
        assert_eq!(error.line, Some(2), "{error:?}");
        // Different keys, computed keys and spreads pass.
        let outcome = run(
            "const k = 'a';\nconst o = { a: 1, b: 2, [k]: 3, ...{ a: 4 } };\ndone(`${o.a}`)",
            json!({}),
        );
        assert_eq!(
            outcome.complete,
            Some(json!({ "response": "4" })),
            "{outcome:?}"
        );
    }
}
