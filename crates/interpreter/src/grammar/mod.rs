//! The grammar of a code-mode reply, for providers that decode under one (the embedded model;
//! see `agentic-plugin-local`'s `constrain`). It is the JavaScript subset of `program.lark`
//! with this prompt's names appended:
//! - a tool is called only by a name it is bound to (`fs.list`, `fsList`, `tools["fs.list"]`);
//!   a namespace is nothing but the prefix of its tools, and Node's globals (`require`,
//!   `process`, …) are no names at all;
//! - an object literal written as a tool's input has only that tool's input fields as keys,
//!   and a field with an enum of strings takes one of them (or a variable);
//! - a read chained on a call (`fs.list({…}).entries[0].name`) names only fields the tool's
//!   declared result has, as the sandbox checks them (`crate::shape`), and on a string only
//!   what a string has (`.length`, its methods);
//!
//! Everything else a program writes is free: calls of its own functions, of JavaScript's
//! built-ins and of the sandbox functions, reads of variables. What the grammar cannot see (a
//! read of a `const` bound to a result, a pattern that takes one apart) the embedded model's
//! provider checks beside it ([`result_fields`]), and the sandbox when the program runs.

use std::collections::HashMap;
use std::fmt::Write as _;

use agentic_core::ResultFields;
use serde_json::Value;

use crate::protocol::ToolBinding;
use crate::shape::Shape;

/// The grammar of an answer to a script's `llmJson()`: one JSON value and nothing around it.
/// A model that decodes under it cannot answer "Paris" to a question whose script parses the
/// answer as JSON; it writes `"Paris"`. Others ignore it, and the answer is looked for in
/// fences and sentences.
pub const JSON_VALUE: &str = "start: %json {}\n";

/// The part of the grammar that is the same for every prompt.
const PROGRAM: &str = include_str!("program.lark");

/// Of the Node.js and browser globals the engine explains (`explain::HOST_GLOBALS`),
/// those that are still names a program may give its own variables (`path`), or that a tool
/// may be bound as (`fetch`, the `fs` namespace): the grammar leaves them to the bindings.
const HOST_NAMES_KEPT: &[&str] = &["fs", "path", "fetch"];

/// The start of a grammar that takes a program only.
const START: &str = "start: program_reply\n";

/// The start of one that takes an answer in words too (`PROSE` of `program.lark`: a
/// capitalised word, then no backtick, `;`, brace or `=`), which code mode takes as the answer.
const START_WITH_PROSE: &str = "start: program_reply | PROSE\n";

/// `grammar` (from [`program_grammar`]) with a prose answer allowed beside the program: once a
/// program of the turn has run, the model may answer in words (code mode's rules then decide
/// whether the words are the answer). Before that it must act.
pub fn with_prose_answer(grammar: &str) -> String {
    match grammar.strip_suffix(START) {
        Some(rules) => format!("{rules}{START_WITH_PROSE}"),
        None => grammar.to_owned(),
    }
}

/// `grammar` (from [`program_grammar`], with or without [`with_prose_answer`]) that takes a
/// bare program only: no words and no fence around it. Asked to write a program again (a
/// review, `mode/review.rs`), a small model otherwise explains the one it was shown.
pub fn bare_program(grammar: &str) -> String {
    match grammar
        .strip_suffix(START)
        .or_else(|| grammar.strip_suffix(START_WITH_PROSE))
    {
        Some(rules) => format!("{rules}start: program\n"),
        None => grammar.to_owned(),
    }
}

/// The Lark grammar (llguidance's dialect) of a program that may call the tools of `bindings`.
/// `input_of` gives a tool's input schema by id.
pub fn program_grammar<'a>(
    bindings: &[ToolBinding],
    input_of: impl Fn(&str) -> Option<&'a Value>,
) -> String {
    let mut grammar = String::from(PROGRAM);
    let mut callees: Vec<String> = Vec::new();
    let mut excluded: Vec<String> = crate::explain::HOST_GLOBALS
        .iter()
        .chain(&["globalThis"])
        .filter(|name| !HOST_NAMES_KEPT.contains(name))
        .map(|name| (*name).to_owned())
        .collect();
    let mut shapes = Shapes::default();
    let mut calls = Vec::new();
    let mut batches = Vec::new();
    for (index, binding) in bindings.iter().enumerate() {
        let mut names = Vec::new();
        if let Some((namespace, method)) = binding.namespace_and_method() {
            names.push(format!("{} \".\" {}", literal(namespace), literal(method)));
            excluded.push(namespace.to_owned());
        }
        for function in binding.function.iter().chain(&binding.aliases) {
            names.push(literal(function));
            excluded.push(function.clone());
        }
        let id = Value::String(binding.id.clone()).to_string();
        let single = format!(
            "'{}'",
            binding.id.replace('\\', "\\\\").replace('\'', "\\'")
        );
        names.push(format!(
            "\"tools\" \"[\" ({} | {}) \"]\"",
            literal(&id),
            literal(&single)
        ));
        callees.extend(names.iter().cloned());
        let input = input_rule(&mut grammar, index, input_of(&binding.id));
        let result = shapes.rule(&mut grammar, &binding.result);
        let _ = writeln!(
            grammar,
            "call_{index}: ({}) \"(\" {input}? \")\" {result}",
            names.join(" | ")
        );
        calls.push(format!("call_{index}"));
        let ids = format!("({} | {})", literal(&id), literal(&single));
        let _ = writeln!(
            grammar,
            "batch_{index}: \"{{\" TOOL_KEY \":\" {ids} (\",\" INPUT_KEY \":\" {input})? \",\"? \"}}\" \
             | \"{{\" INPUT_KEY \":\" {input} \",\" TOOL_KEY \":\" {ids} \",\"? \"}}\""
        );
        batches.push(format!("batch_{index}"));
    }
    // `parallel([{ tool, input }, …])`: each object literal names a declared tool, and its
    // input is held as that tool's call is.
    batches.push("NAME tail*".to_owned());
    batches.push("\"...\" assign".to_owned());
    let _ = writeln!(grammar, "batch_item: {}", batches.join(" | "));
    grammar.push_str(
        "parallel_call: \"parallel\" \"(\" (\"[\" (batch_item (\",\" batch_item)* \",\"?)? \"]\" | NAME tail*) \")\"\n",
    );
    grammar.push_str("TOOL_KEY: \"tool\" | \"\\\"tool\\\"\" | \"'tool'\"\n");
    grammar.push_str("INPUT_KEY: \"input\" | \"\\\"input\\\"\" | \"'input'\"\n");
    excluded.push("parallel".to_owned());
    if calls.is_empty() {
        // No tool: `tool_call` must still exist, and matches nothing a program can write.
        grammar.push_str("tool_call: \"tools\" \"[\" \"]\" \"(\" \")\"\n");
    } else {
        let _ = writeln!(grammar, "tool_call: {}", calls.join(" | "));
    }
    excluded.sort();
    excluded.dedup();
    let excluded: Vec<String> = excluded.iter().map(|name| literal(name)).collect();
    let _ = writeln!(
        grammar,
        "NAME: IDENTIFIER & ~(RESERVED | ASYNC_GLUED | {})",
        excluded.join(" | ")
    );
    grammar.push_str(START);
    grammar
}

/// The names a program may call without declaring them, for a provider that checks the
/// program's calls as it decodes it (`ModelRequest::callable`): the engine's global functions
/// and the tools' function bindings. A call of any other bare name the program has not
/// declared before it throws a `ReferenceError` in the sandbox.
pub fn callable(bindings: &[ToolBinding]) -> Vec<String> {
    let mut names: Vec<String> =
        crate::engine::global_functions(&crate::explain::ForModels).to_vec();
    for binding in bindings {
        names.extend(binding.function.iter().chain(&binding.aliases).cloned());
    }
    names.sort();
    names.dedup();
    names
}

/// What a read of each tool's result may name, under every name a program calls it by, for a
/// provider that checks the reads of a `const` bound to a call as it decodes the program
/// (`ModelRequest::result_fields`): a record's declared fields and what every object
/// answers; a string's `length` and methods. A result of another shape is not listed.
pub fn result_fields(bindings: &[ToolBinding]) -> Vec<ResultFields> {
    let mut listed = Vec::new();
    for binding in bindings {
        let fields: Vec<String> = match &binding.result {
            Shape::Record { fields } => fields
                .iter()
                .map(|(name, _)| name.as_str())
                .chain(crate::engine::ALWAYS_READABLE.iter().copied())
                .map(str::to_owned)
                .collect(),
            Shape::Text | Shape::Choice { .. } => STRING_METHODS
                .iter()
                .chain(&["length"])
                .map(|name| (*name).to_owned())
                .collect(),
            Shape::Any | Shape::List { .. } => continue,
        };
        for callee in crate::dry_run::names_of(binding) {
            listed.push(ResultFields {
                callee,
                fields: fields.clone(),
            });
        }
    }
    listed
}

/// The grammar for tools given by id, input schema and output schema, bound as code mode binds
/// them (for benches and tools outside a prompt).
pub fn program_grammar_for_schemas<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a Value, Option<&'a Value>)>,
) -> String {
    let tools: Vec<(&str, &Value, Option<&Value>)> = tools.into_iter().collect();
    let bindings = bindings_for_schemas(&tools);
    program_grammar(&bindings, |id| {
        tools
            .iter()
            .find(|(tool, _, _)| *tool == id)
            .map(|(_, input, _)| *input)
    })
}

/// [`result_fields`] for tools given by id, input schema and output schema, bound as code
/// mode binds them (for benches and tools outside a prompt).
pub fn result_fields_for_schemas<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a Value, Option<&'a Value>)>,
) -> Vec<ResultFields> {
    let tools: Vec<(&str, &Value, Option<&Value>)> = tools.into_iter().collect();
    result_fields(&bindings_for_schemas(&tools))
}

fn bindings_for_schemas(tools: &[(&str, &Value, Option<&Value>)]) -> Vec<ToolBinding> {
    crate::names::bindings(tools.iter().map(|(id, _, output)| crate::names::ToolNames {
        id,
        description: "",
        aliases: &[],
        output: *output,
    }))
}

/// Rules for a tool's input; returns the rule to call it with.
fn input_rule(grammar: &mut String, index: usize, schema: Option<&Value>) -> String {
    let properties = schema
        .and_then(|schema| schema.get("properties"))
        .and_then(Value::as_object);
    let Some(properties) = properties else {
        // Not an object of known fields: any arguments.
        let _ = writeln!(grammar, "input_{index}: arg (\",\" arg)* \",\"?");
        return format!("input_{index}");
    };
    let mut fields = Vec::new();
    for (field, declared) in properties {
        let quoted = format!(
            "{} | {}",
            literal(&Value::String(field.clone()).to_string()),
            literal(&format!("'{field}'"))
        );
        let value = match string_enum(declared, schema) {
            None => match string_pattern(declared, schema) {
                Some(pattern) => {
                    let token = format!("PATTERN_{index}_{}", fields.len());
                    let _ = writeln!(
                        grammar,
                        "{token}: (/\"(?:{pattern})\"/ & /\"[^\"\\\\\\n]*\"/) | (/'(?:{pattern})'/ & /'[^'\\\\\\n]*'/)"
                    );
                    format!("({token} | NAME tail* | template)")
                }
                None => "assign".to_owned(),
            },
            Some(values) => {
                let options: Vec<String> = values
                    .iter()
                    .flat_map(|value| {
                        [
                            literal(&Value::String(value.clone()).to_string()),
                            literal(&format!("'{value}'")),
                        ]
                    })
                    .collect();
                format!("({} | NAME tail*)", options.join(" | "))
            }
        };
        let mut alternatives = vec![format!("({quoted}) \":\" {value}")];
        if is_identifier(field) {
            alternatives.push(format!("{} (\":\" {value})?", literal(field)));
        }
        fields.push(alternatives.join(" | "));
    }
    let object = if (1..=ONCE_FIELDS).contains(&fields.len()) {
        once_fields(grammar, index, &fields);
        format!("fields_{index}_0?")
    } else {
        let _ = writeln!(grammar, "field_{index}: {}", fields.join(" | "));
        format!("(field_{index} (\",\" field_{index})* \",\"?)?")
    };
    // A variable (or a member of one) may stand for the whole input.
    let _ = writeln!(
        grammar,
        "input_{index}: \"{{\" {object} \"}}\" | NAME tail*"
    );
    format!("input_{index}")
}

/// Up to this many input fields (one included), an object literal written as a tool's input
/// gives each field at most once, in any order: one rule per set of fields given so far (2^n of them). With
/// more, a field given twice is left to the sandbox, which refuses the object before the
/// program runs (`engine/source.rs`).
const ONCE_FIELDS: usize = 6;

/// The rules `fields_{index}_{given}` of tool `index`'s input fields (`fields`, each a
/// rule's alternatives): the fields still to come after those in the bit set `given`, each at
/// most once, separated by commas, a trailing comma allowed.
fn once_fields(grammar: &mut String, index: usize, fields: &[String]) {
    for (at, field) in fields.iter().enumerate() {
        let _ = writeln!(grammar, "field_{index}_{at}: {field}");
    }
    let all = (1usize << fields.len()) - 1;
    for given in 0..all {
        let next: Vec<String> = (0..fields.len())
            .filter(|at| given & (1 << at) == 0)
            .map(|at| {
                let then = given | (1 << at);
                if then == all {
                    format!("field_{index}_{at} \",\"?")
                } else {
                    format!("field_{index}_{at} (\",\" fields_{index}_{then}?)?")
                }
            })
            .collect();
        let _ = writeln!(grammar, "fields_{index}_{given}: {}", next.join(" | "));
    }
}

/// The strings a field is restricted to, when its schema (or the one it refers to) is an
/// `enum` of strings only.
fn string_enum(schema: &Value, root: Option<&Value>) -> Option<Vec<String>> {
    let schema = resolve(schema, root)?;
    let values = schema.get("enum")?.as_array()?;
    values
        .iter()
        .map(|value| {
            value
                .as_str()
                .filter(|text| !text.contains(['\'', '"', '\\', '\n']))
                .map(str::to_owned)
        })
        .collect::<Option<Vec<String>>>()
        .filter(|values| !values.is_empty())
}

/// The `pattern` a string field's literal must match, as a regex of llguidance's dialect
/// without anchors; `None` when the field has none, or one the grammar cannot hold (look-around,
/// back-references, anchors inside), which the tool then checks when it is called.
fn string_pattern(schema: &Value, root: Option<&Value>) -> Option<String> {
    let schema = resolve(schema, root)?;
    let pattern = schema.get("pattern")?.as_str()?;
    // JSON Schema's `pattern` matches anywhere unless anchored.
    let start = pattern.strip_prefix('^');
    let inner = start.unwrap_or(pattern);
    let end = inner.strip_suffix('$').filter(|rest| !rest.ends_with('\\'));
    let inner = end.unwrap_or(inner);
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(inner)
        .ok()?;
    if !hir.properties().look_set().is_empty() || inner.contains('/') {
        return None;
    }
    let any = "[^\"'\\\\\\n]*";
    Some(format!(
        "{}(?:{inner}){}",
        if start.is_some() { "" } else { any },
        if end.is_some() { "" } else { any }
    ))
}

/// `schema`, or the definition it refers to (`$ref` of `#/…` in `root`).
fn resolve<'a>(schema: &'a Value, root: Option<&'a Value>) -> Option<&'a Value> {
    let Some(target) = schema.get("$ref").and_then(Value::as_str) else {
        return Some(schema);
    };
    let mut found = root?;
    for part in target.strip_prefix("#/")?.split('/') {
        found = found.get(part)?;
    }
    Some(found)
}

/// One rule per distinct result shape: what may be chained on a value of that shape.
#[derive(Default)]
struct Shapes {
    rules: HashMap<Shape, String>,
}

/// What a string has, as a read chained on one may name it.
const STRING_METHODS: &[&str] = &[
    "at",
    "charAt",
    "charCodeAt",
    "codePointAt",
    "concat",
    "endsWith",
    "includes",
    "indexOf",
    "lastIndexOf",
    "localeCompare",
    "match",
    "matchAll",
    "normalize",
    "padEnd",
    "padStart",
    "repeat",
    "replace",
    "replaceAll",
    "search",
    "slice",
    "split",
    "startsWith",
    "substr",
    "substring",
    "toLocaleLowerCase",
    "toLocaleUpperCase",
    "toLowerCase",
    "toString",
    "toUpperCase",
    "trim",
    "trimEnd",
    "trimStart",
    "valueOf",
];

impl Shapes {
    /// The name `shape_k` of `shape`'s rules (written to `grammar` the first time).
    fn rule(&mut self, grammar: &mut String, shape: &Shape) -> String {
        if let Some(name) = self.rules.get(shape) {
            return name.clone();
        }
        let name = format!("shape_{}", self.rules.len());
        self.rules.insert(shape.clone(), name.clone());
        let computed = "(\"[\" expr \"]\" | \"?.[\" expr \"]\")";
        let body = match shape {
            Shape::Any => "tail*".to_owned(),
            Shape::Record { fields } => {
                let mut reads = Vec::new();
                for (field, inner) in fields {
                    if !is_identifier(field) {
                        continue;
                    }
                    let inner = self.rule(grammar, inner);
                    reads.push(format!("(\".\" | \"?.\") {} {inner}", literal(field)));
                }
                // A computed read (`result[key]`) is left to the sandbox.
                reads.push(format!("{computed} tail*"));
                format!("({})?", reads.join(" | "))
            }
            Shape::List { item } => {
                let item = self.rule(grammar, item);
                format!("({computed} {item} | (\".\" PROP_NAME | \"?.\" PROP_NAME) tail*)?")
            }
            // A string's length and methods, or a character.
            Shape::Text | Shape::Choice { .. } => {
                let methods: Vec<String> = STRING_METHODS.iter().map(|m| literal(m)).collect();
                format!(
                    "((\".\" | \"?.\") ({}) args tail* | (\".\" | \"?.\") \"length\" tail* | {computed} tail*)?",
                    methods.join(" | ")
                )
            }
        };
        let _ = writeln!(grammar, "{name}: {body}");
        name
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// `text` as a Lark string literal.
fn literal(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests;
