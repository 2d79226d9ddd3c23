//! A value handed to one of the program's own functions that never reads it: `writeHeader(csv)`
//! where `writeHeader(data)` builds its text without `data`, or `save(rows)` where `save()`
//! takes nothing. The program runs, the value is lost without a word, and what it writes or
//! answers is built from something else (eval json-to-csv, round 19: the CSV was computed,
//! passed to a function that ignored it, and only the header written). Refused before the
//! program runs, at the call, naming the parameter: the same mistake as ESLint's
//! `no-unused-vars` on arguments, made loud where it loses data.
//!
//! Only calls by name of a function the program declares once (`function f`, `const f = (…)
//! =>`, `const f = function`) and that reads none of its parameters are looked at, and only
//! arguments that are not literals: a function that reads any parameter (`format(item, i)`
//! where only `item` is read loses no data), reads `arguments`, takes a rest or destructured
//! parameter, or shares its name with another declaration is left alone. A parameter counts as read when its name appears
//! anywhere in the body, shadowed or not, so what is refused is never read at all.

use std::collections::HashMap;
use std::ops::ControlFlow;

use boa_engine::ast::declaration::{Binding, Variable};
use boa_engine::ast::expression::{Call, Expression, Identifier};
use boa_engine::ast::function::{
    ArrowFunction, AsyncArrowFunction, AsyncFunctionDeclaration, FormalParameterList, FunctionBody,
    FunctionDeclaration,
};
use boa_engine::ast::visitor::{VisitWith, Visitor};
use boa_engine::ast::{Position, Spanned};
use boa_engine::interner::Sym;

use crate::protocol::{ScriptError, ScriptErrorKind};

use super::source::SyntaxTree;

/// One of the program's functions: its parameters (`None` for one that is not a plain name)
/// and whether its body reads each.
struct Function {
    parameters: Vec<Option<(Sym, bool)>>,
    /// Takes a rest parameter or reads `arguments`: any argument may be read.
    takes_any: bool,
    line: u32,
}

struct ArgumentSeen {
    /// The argument's name when it is a plain variable.
    name: Option<Sym>,
    literal: bool,
    spread: bool,
}

struct CallSeen {
    callee: Sym,
    arguments: Vec<ArgumentSeen>,
    at: Position,
}

#[derive(Default)]
struct Collect {
    functions: HashMap<Sym, Vec<Function>>,
    calls: Vec<CallSeen>,
}

/// Every identifier a function body names.
struct Names(Vec<Sym>);

impl<'ast> Visitor<'ast> for Names {
    type BreakTy = ();

    fn visit_identifier(&mut self, node: &'ast Identifier) -> ControlFlow<()> {
        self.0.push(node.sym());
        ControlFlow::Continue(())
    }
}

impl Collect {
    fn function(&mut self, name: Sym, parameters: &FormalParameterList, body: &FunctionBody) {
        let mut names = Names(Vec::new());
        let _ = body.visit_with(&mut names);
        for parameter in parameters.as_ref() {
            if let Some(init) = parameter.init() {
                let _ = init.visit_with(&mut names);
            }
        }
        let arguments = Sym::ARGUMENTS;
        let parameters_seen = parameters
            .as_ref()
            .iter()
            .map(|parameter| match parameter.variable().binding() {
                Binding::Identifier(identifier) if !parameter.is_rest_param() => {
                    let sym = identifier.sym();
                    Some((sym, names.0.contains(&sym)))
                }
                _ => None,
            })
            .collect();
        self.functions.entry(name).or_default().push(Function {
            parameters: parameters_seen,
            takes_any: parameters.has_rest_parameter() || names.0.contains(&arguments),
            line: body.span().start().line_number(),
        });
    }
}

impl<'ast> Visitor<'ast> for Collect {
    type BreakTy = ();

    fn visit_function_declaration(&mut self, node: &'ast FunctionDeclaration) -> ControlFlow<()> {
        self.function(node.name().sym(), node.parameters(), node.body());
        node.visit_with(self)
    }

    fn visit_async_function_declaration(
        &mut self,
        node: &'ast AsyncFunctionDeclaration,
    ) -> ControlFlow<()> {
        self.function(node.name().sym(), node.parameters(), node.body());
        node.visit_with(self)
    }

    fn visit_variable(&mut self, node: &'ast Variable) -> ControlFlow<()> {
        if let (Binding::Identifier(name), Some(init)) = (node.binding(), node.init()) {
            let name = name.sym();
            match init {
                Expression::ArrowFunction(function) => arrow(self, name, function),
                Expression::AsyncArrowFunction(function) => async_arrow(self, name, function),
                Expression::FunctionExpression(function) => {
                    self.function(name, function.parameters(), function.body())
                }
                Expression::AsyncFunctionExpression(function) => {
                    self.function(name, function.parameters(), function.body())
                }
                _ => {}
            }
        }
        node.visit_with(self)
    }

    fn visit_call(&mut self, node: &'ast Call) -> ControlFlow<()> {
        if let Expression::Identifier(callee) = node.function() {
            self.calls.push(CallSeen {
                callee: callee.sym(),
                arguments: node
                    .args()
                    .iter()
                    .map(|argument| ArgumentSeen {
                        name: match argument {
                            Expression::Identifier(name) => Some(name.sym()),
                            _ => None,
                        },
                        literal: matches!(argument, Expression::Literal(_)),
                        spread: matches!(argument, Expression::Spread(_)),
                    })
                    .collect(),
                at: callee.span().start(),
            });
        }
        node.visit_with(self)
    }
}

fn arrow(collect: &mut Collect, name: Sym, function: &ArrowFunction) {
    collect.function(name, function.parameters(), function.body());
}

fn async_arrow(collect: &mut Collect, name: Sym, function: &AsyncArrowFunction) {
    collect.function(name, function.parameters(), function.body());
}

/// The first call that hands one of the program's functions a value it never reads, as an
/// error at the call; `None` when there is none.
pub(super) fn dropped_argument(tree: &SyntaxTree, code: &str) -> Option<ScriptError> {
    let mut collect = Collect::default();
    let _ = tree.script.visit_with(&mut collect);
    let resolve = |sym: Sym| tree.interner.resolve_expect(sym).to_string();
    for call in &collect.calls {
        let Some([function]) = collect.functions.get(&call.callee).map(Vec::as_slice) else {
            continue;
        };
        // A function that reads one of its parameters uses what it is given; an argument it
        // ignores beside that one (an index passed along) loses no data.
        let reads_one = function
            .parameters
            .iter()
            .any(|parameter| matches!(parameter, Some((_, true)) | None));
        if function.takes_any || reads_one {
            continue;
        }
        for (index, argument) in call.arguments.iter().enumerate() {
            if argument.spread {
                break;
            }
            if argument.literal {
                continue;
            }
            let callee = resolve(call.callee);
            let what = argument
                .name
                .map(|name| format!("`{}`", resolve(name)))
                .unwrap_or_else(|| format!("its argument {}", index + 1));
            let declared = function.line.saturating_sub(tree.line_offset).max(1);
            let lost = match function.parameters.get(index) {
                Some(Some((parameter, false))) => format!(
                    "this call passes {what} to `{callee}`, whose parameter `{}` (line \
                     {declared}) is never read in it",
                    resolve(*parameter)
                ),
                None => format!(
                    "this call passes {what} to `{callee}`, which takes {} (line {declared})",
                    match function.parameters.len() {
                        0 => "no parameters".to_owned(),
                        1 => "one parameter".to_owned(),
                        count => format!("{count} parameters"),
                    }
                ),
                _ => continue,
            };
            let line = call
                .at
                .line_number()
                .saturating_sub(tree.line_offset)
                .max(1);
            return Some(ScriptError {
                kind: ScriptErrorKind::Runtime,
                message: format!(
                    "TypeError: {lost}: the value would be lost without a word, so the \
                     program was not run. Use it in `{callee}`, or do not pass it"
                ),
                line: Some(line),
                column: Some(call.at.column_number()),
                source_line: code.lines().nth(line as usize - 1).map(str::to_owned),
                hint: None,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::testing::run;
    use serde_json::json;

    #[test]
    fn a_value_passed_to_a_function_that_never_reads_it_is_refused_at_the_call() {
        // The shape json-to-csv's program had: the CSV built, handed over, and ignored.
        let code = "const toCsv = (rows) => rows.map((r) => r.name).join('\\n');\n\
                    const writeHeader = (data) => {\n  output('name');\n};\n\
                    const csv = toCsv([{ name: 'a' }]);\nwriteHeader(csv);\ndone('ok');";
        let outcome = run(code, json!({}));
        assert!(outcome.complete.is_none() && !outcome.done, "{outcome:?}");
        let error = outcome.result.unwrap_err();
        assert!(
            error.message.starts_with(
                "TypeError: this call passes `csv` to `writeHeader`, whose parameter `data` \
                 (line 2) is never read in it"
            ),
            "{error:?}"
        );
        assert_eq!((error.line, error.column), (Some(6), Some(1)), "{error:?}");

        // More arguments than a function declaration takes, in an async wrapper.
        let error = run(
            "function save() {\n  return 1;\n}\nconst rows = [1];\nawait save(rows);",
            json!({}),
        )
        .result
        .unwrap_err();
        assert!(
            error.message.starts_with(
                "TypeError: this call passes `rows` to `save`, which takes no parameters (line 1)"
            ),
            "{error:?}"
        );
        assert_eq!(error.line, Some(5), "{error:?}");
    }

    #[test]
    fn arguments_that_are_read_or_cannot_be_followed_pass() {
        for code in [
            // Read, read in a nested function, read under another binding's name.
            "const f = (a, b) => a + b;\nconst x = 1;\ndone(`${f(x, x)}`)",
            "function f(a) { return [1].map(() => a)[0]; }\nconst x = 2;\ndone(`${f(x)}`)",
            // Literals, spreads, rest parameters, `arguments`, destructuring.
            "const f = (a) => 1;\ndone(`${f(3)}`)",
            "const f = (...all) => all.length;\nconst x = [1];\ndone(`${f(x, x)}`)",
            "function f() { return arguments.length; }\nconst x = 1;\ndone(`${f(x)}`)",
            "const f = ({ a }) => 1;\nconst x = { a: 1 };\ndone(`${f(x)}`)",
            "const f = (a) => a;\nconst xs = [1];\ndone(`${f(...xs)}`)",
            // A name declared twice is not followed; methods are not followed.
            "function f(a) { return a; }\n{ const f = () => 1; const x = 1; f(x); }\ndone('ok')",
            "const o = { f: (a) => 1 };\nconst x = 1;\ndone(`${o.f(x)}`)",
            // A function that reads one parameter may ignore another.
            "const f = (item, index) => item * 2;\nconst x = 1;\nconst i = 0;\ndone(`${f(x, i)}`)",
            "const f = (a) => a;\nconst x = 1;\nconst y = 2;\ndone(`${f(x, y)}`)",
            // A default that reads an earlier parameter reads it.
            "const f = (a, b = a) => b;\nconst x = 1;\ndone(`${f(x)}`)",
        ] {
            let outcome = run(code, json!({}));
            assert!(outcome.result.is_ok(), "{code}: {outcome:?}");
        }
    }
}
