//! Errors said so that a model can fix its program: what `JSON.parse` was given, the module
//! that does not exist, the namespace a variable hides, the field that is missing, the
//! function a namespace does not have. The engine knows nothing of models: this plugs into
//! it through its one hook, [`crate::engine::Explain`], as [`ForModels`].

use boa_engine::object::FunctionObjectBuilder;
use boa_engine::property::PropertyKey;
use boa_engine::{
    Context, JsNativeError, JsObject, JsResult, JsValue, NativeFunction, Source, js_string,
};

use crate::protocol::{ScriptError, ScriptErrorKind, ToolBinding};

use crate::engine::{Explain, NO_MODULE, quoted_start};

/// The explanations code mode's models read, plugged into the engine.
#[derive(Debug)]
pub(crate) struct ForModels;

impl Explain for ForModels {
    fn install(&self, context: &mut Context) -> JsResult<()> {
        explain_json_parse_errors(context)
    }

    fn explain(
        &self,
        error: &mut ScriptError,
        context: &mut Context,
        tools: &[ToolBinding],
        code: &str,
    ) {
        explain_missing_modules(error, tools);
        explain_missing_field(error, context);
        explain_block_scoped(error, code);
        explain_wrong_case(error, context, tools);
    }
}

/// Characters of a text `JSON.parse` refused that its error quotes.
pub(crate) const JSON_PARSE_QUOTED_CHARS: usize = 60;

/// `JSON.parse` as the engine has it, except that its SyntaxError says what it was given, as
/// V8's does (`Unexpected token 't', "temporari"... is not valid JSON`): the start of the
/// text, or that the value was an object and so already data. Boa's own message (`expected
/// value`) sends a model to rewrite the line instead of reading the data.
pub(crate) fn explain_json_parse_errors(context: &mut Context) -> JsResult<()> {
    let json = context
        .global_object()
        .get(js_string!("JSON"), context)?
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("JSON is missing"))?;
    let Some(parse) = json.get(js_string!("parse"), context)?.as_callable() else {
        return Ok(());
    };
    let function = FunctionObjectBuilder::new(
        context.realm(),
        NativeFunction::from_copy_closure_with_captures(
            |this, arguments, parse: &JsObject, context| {
                let error = match parse.call(this, arguments, context) {
                    Ok(value) => return Ok(value),
                    Err(error) => error,
                };
                let Ok(native) = error.try_native(context) else {
                    return Err(error);
                };
                if !matches!(native.kind, boa_engine::JsNativeErrorKind::Syntax) {
                    return Err(error);
                }
                let given = arguments.first().cloned().unwrap_or_default();
                let what = match given.as_string() {
                    Some(text) => {
                        let text = text.to_std_string_escaped();
                        let format = crate::prose::text_format(&text)
                            .map(|format| format!(" it reads as {format};"))
                            .unwrap_or_default();
                        format!(
                            "the text is not JSON;{format} it starts {}",
                            quoted_start(&text, JSON_PARSE_QUOTED_CHARS)
                        )
                    }
                    None if given.is_object() => "it was given an object, which is data \
                        already: use it as it is, or parse the field that holds text"
                        .to_owned(),
                    None => format!("it was given {}, not text", given.type_of()),
                };
                // Boa's position is in the data; the error's position is the program's line.
                let message = native.message();
                let message = message
                    .rfind(" at line ")
                    .map_or(message, |index| &message[..index]);
                Err(JsNativeError::syntax()
                    .with_message(format!("{message}; {what}"))
                    .into())
            },
            parse.clone(),
        ),
    )
    .name(js_string!("parse"))
    .length(2)
    .build();
    json.set(js_string!("parse"), function, true, context)?;
    Ok(())
}

/// Names that scripts written for Node.js or a browser reach for, and that do not exist here.
pub(crate) const HOST_GLOBALS: &[&str] = &[
    "require",
    "module",
    "exports",
    "process",
    "fs",
    "path",
    "fetch",
    "Buffer",
    "__dirname",
    "__filename",
    "XMLHttpRequest",
    "window",
    "document",
];

/// Adds what to do instead when a script used `require`, `import` or a Node.js or browser
/// global: the sandbox has no modules, and tools are functions.
pub(crate) fn explain_missing_modules(error: &mut ScriptError, tools: &[ToolBinding]) {
    let missing_global = error
        .message
        .strip_prefix("ReferenceError: ")
        .and_then(|rest| {
            rest.strip_suffix(" is not defined")
                .or_else(|| rest.starts_with(NO_MODULE).then_some("require"))
        })
        .is_some_and(|name| HOST_GLOBALS.contains(&name));
    let imports = error.kind == ScriptErrorKind::Syntax
        && error.source_line.as_deref().is_some_and(|line| {
            let line = line.trim_start();
            line.starts_with("import ") || line.starts_with("export ") || line.contains("import(")
        });
    if !missing_global && !imports {
        explain_unknown_member(error, tools);
        return;
    }
    let mut functions: Vec<String> = tools
        .iter()
        .filter(|tool| tool.member.is_some() || tool.function.is_some())
        .map(ToolBinding::call_name)
        .collect();
    functions.sort_unstable();
    let shown = functions.len().min(12);
    let mut list = functions[..shown].join(", ");
    if functions.len() > shown {
        list.push_str(&format!(" and {} more", functions.len() - shown));
    }
    let example = functions
        .first()
        .cloned()
        .unwrap_or_else(|| "toolName".to_owned());
    let mut hint = format!(
        "There are no modules here: import and the Node.js or browser APIs (fs.readFileSync, \
         process, fetch, Buffer, window) do not exist, and require() only returns a tool \
         namespace (require(\"fs\") is fs). Every tool is already a function; call it \
         directly with an object, e.g. `const result = {example}({{ field: value }});`."
    );
    if !list.is_empty() {
        hint.push_str(&format!("\nTool functions: {list}."));
    }
    error.hint = Some(hint);
}

/// Member chains tried when explaining a TypeError, and the characters of a string quoted.
pub(crate) const MAX_CHAINS_EXPLAINED: usize = 8;

pub(crate) const QUOTED_STRING_CHARS: usize = 80;

pub(crate) const FIELDS_NAMED: usize = 12;

/// `config.database.port` failing with "cannot convert 'null' or 'undefined' to object": Boa
/// does not say which link was missing or why. The failing line's member chains are looked
/// up in the script's global scope (top-level `const`s of a plain script live there) to find
/// the first link that is `undefined` or `null`, and the error says what its parent is: a
/// string (and how it starts), an array, or an object with other fields. Only identifiers and
/// property reads are evaluated, after the script ended; a wrapped (async) script's locals
/// are out of reach and explained by nothing.
pub(crate) fn explain_missing_field(error: &mut ScriptError, context: &mut Context) {
    if error.hint.is_some()
        || !error.message.starts_with("TypeError")
        || !(error.message.contains("undefined") || error.message.contains("null"))
    {
        return;
    }
    let Some(line) = error.source_line.clone() else {
        return;
    };
    for chain in member_chains(&line).into_iter().take(MAX_CHAINS_EXPLAINED) {
        let mut parent: Option<(String, JsValue)> = None;
        for (end, _) in chain.match_indices('.').chain([(chain.len(), "")]) {
            let prefix = &chain[..end];
            let source = Source::from_bytes(prefix.as_bytes());
            let Ok(value) = context.eval(source) else {
                break;
            };
            if value.is_null_or_undefined() {
                if let Some((parent_name, parent_value)) = &parent {
                    let field = &prefix[parent_name.len() + 1..];
                    let what = if value.is_null() { "null" } else { "undefined" };
                    let about = describe_value(parent_name, field, parent_value, context);
                    error.hint = Some(format!("`{prefix}` is {what}: {about}"));
                    return;
                }
                break;
            }
            parent = Some((prefix.to_owned(), value));
        }
    }
}

/// `a.b.c` chains of plain identifiers in a line of code, longest first; calls and computed
/// members end a chain.
pub(crate) fn member_chains(line: &str) -> Vec<String> {
    let mut chains = Vec::new();
    let mut current = String::new();
    // Inside a member that follows a call or a bracket (`x().y`): not the start of a chain.
    let mut skipping = false;
    let mut previous = ' ';
    let mut flush = |current: &mut String| {
        let chain = current.trim_end_matches('.');
        if chain.contains('.') && !chain.starts_with(|c: char| c.is_ascii_digit()) {
            chains.push(chain.to_owned());
        }
        current.clear();
    };
    for c in line.chars() {
        let identifier = crate::names::is_identifier_char(c);
        if identifier && current.is_empty() && (skipping || previous == '.') {
            skipping = true;
        } else if identifier || (c == '.' && !current.is_empty()) {
            current.push(c);
        } else {
            skipping = false;
            flush(&mut current);
        }
        previous = c;
    }
    flush(&mut current);
    chains.sort();
    chains.dedup();
    chains.sort_by_key(|chain| std::cmp::Reverse(chain.len()));
    chains
}

/// What `name` holds, said so that reading `field` of it was a mistake the model can fix.
pub(crate) fn describe_value(
    name: &str,
    field: &str,
    value: &JsValue,
    context: &mut Context,
) -> String {
    if let Some(text) = value.as_string() {
        let text = text.to_std_string_escaped();
        return format!(
            "`{name}` is a string of {} characters, not an object, so it has no field \
             `{field}`. It starts {}. If it is the text of a file, parse it the way it is \
             written.",
            text.chars().count(),
            quoted_start(&text, QUOTED_STRING_CHARS)
        );
    }
    let Some(object) = value.as_object() else {
        return format!(
            "`{name}` is a {}, not an object, so it has no field `{field}`.",
            value.type_of()
        );
    };
    if object.is_array() {
        let length = object
            .get(js_string!("length"), context)
            .ok()
            .and_then(|length| length.as_number())
            .unwrap_or_default();
        return format!(
            "`{name}` is an array of {length} items, which has no field `{field}`: take an \
             item (`{name}[0].{field}`) or loop over them."
        );
    }
    if object.is_callable() {
        return format!("`{name}` is a function, which has no field `{field}`: call it.");
    }
    let keys: Vec<String> = object
        .own_property_keys(context)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|key| match key {
            PropertyKey::String(key) => Some(key.to_std_string_escaped()),
            PropertyKey::Index(index) => Some(index.get().to_string()),
            PropertyKey::Symbol(_) => None,
        })
        .collect();
    if keys.is_empty() {
        return format!("`{name}` is an empty object, with no field `{field}`.");
    }
    let more = if keys.len() > FIELDS_NAMED {
        format!(" and {} more", keys.len() - FIELDS_NAMED)
    } else {
        String::new()
    };
    let named: Vec<&str> = keys.iter().take(FIELDS_NAMED).map(String::as_str).collect();
    format!(
        "`{name}` has no field `{field}`; its fields are {}{more}.",
        named.join(", ")
    )
}

/// `fs.readFileSync(…)` where `fs` is a plugin's namespace: the error names the functions the
/// namespace has.
pub(crate) fn explain_unknown_member(error: &mut ScriptError, tools: &[ToolBinding]) {
    if !error.message.starts_with("TypeError") {
        return;
    }
    let Some(line) = error.source_line.as_deref() else {
        return;
    };
    for (namespace, method) in member_calls(line) {
        let methods = crate::names::namespace_members(tools, &namespace);
        if methods.is_empty() || methods.contains(&format!("{namespace}.{method}").as_str()) {
            continue;
        }
        error.hint = Some(unknown_member_hint(&namespace, &method, &methods));
        return;
    }
}

/// Functions named in the hint for an unknown one, at most.
pub(crate) const MEMBERS_NAMED: usize = 12;

/// The hint for `namespace.method(` that is not a function: the function spelled otherwise
/// (`customersList` for `customers_list`), else the namespace's functions, the likeliest first
/// when there are many.
pub(crate) fn unknown_member_hint(namespace: &str, method: &str, methods: &[&str]) -> String {
    let plain = |name: &str| -> String {
        name.rsplit('.')
            .next()
            .unwrap_or(name)
            .chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let wanted = plain(method);
    if let Some(same) = methods.iter().find(|name| plain(name) == wanted) {
        return format!(
            "{namespace} has no function {method}: it is spelled {same}, as the tool names \
             it. Each takes one object (describeTool(\"{same}\") gives its declaration)."
        );
    }
    let mut ranked: Vec<&str> = methods.to_vec();
    if ranked.len() > MEMBERS_NAMED {
        // Most shared letter pairs first, so a near miss is among those named.
        let pairs = |name: &str| -> Vec<(char, char)> {
            let chars: Vec<char> = plain(name).chars().collect();
            chars.windows(2).map(|pair| (pair[0], pair[1])).collect()
        };
        let wanted_pairs = pairs(method);
        ranked.sort_by_key(|name| {
            let shared = pairs(name)
                .iter()
                .filter(|pair| wanted_pairs.contains(pair))
                .count();
            std::cmp::Reverse(shared)
        });
    }
    let more = if ranked.len() > MEMBERS_NAMED {
        format!(
            " and {} more (searchTools(\"words\") finds them)",
            ranked.len() - MEMBERS_NAMED
        )
    } else {
        String::new()
    };
    let named: Vec<&str> = ranked.iter().take(MEMBERS_NAMED).copied().collect();
    format!(
        "{namespace} has no function {method}; its functions are {}{more}. Each takes one \
         object (see the declarations in the rules, or describeTool(\"{}\")).",
        named.join(", "),
        named.first().copied().unwrap_or_default()
    )
}

/// `a.b(` pairs in a line of code.
pub(crate) fn member_calls(line: &str) -> Vec<(String, String)> {
    let is_word = crate::names::is_identifier_char;
    let chars: Vec<char> = line.chars().collect();
    let mut calls = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_word(chars[i]) || (i > 0 && (is_word(chars[i - 1]) || chars[i - 1] == '.')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_word(chars[i]) {
            i += 1;
        }
        let namespace: String = chars[start..i].iter().collect();
        if chars.get(i) != Some(&'.') {
            continue;
        }
        let method_start = i + 1;
        let mut end = method_start;
        while end < chars.len() && is_word(chars[end]) {
            end += 1;
        }
        if end > method_start && chars.get(end) == Some(&'(') {
            calls.push((namespace, chars[method_start..end].iter().collect()));
        }
        i = end;
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::context;
    use boa_engine::{Script, Source};

    fn error_of(code: &str) -> String {
        let mut context = context();
        let script = Script::parse(Source::from_bytes(code.as_bytes()), None, &mut context);
        let error = script.unwrap().evaluate(&mut context).unwrap_err();
        error.try_native(&mut context).unwrap().message().to_owned()
    }

    #[test]
    fn json_parse_says_what_it_was_given() {
        assert_eq!(
            error_of("JSON.parse('temporarily unavailable, try again')"),
            "expected ident; the text is not JSON; it starts \"temporarily unavailable, try again\""
        );
        assert_eq!(
            error_of("JSON.parse(`${'x'.repeat(70)}`)"),
            format!(
                "expected value; the text is not JSON; it starts \"{}\"…",
                "x".repeat(60)
            )
        );
        assert!(error_of("JSON.parse({ a: 1 })").contains("given an object, which is data"));
        assert!(error_of("JSON.parse(undefined)").ends_with("given undefined, not text"));
        // What parses still parses, reviver included.
        let mut context = context();
        let value = context
            .eval(Source::from_bytes(
                "JSON.parse('{\"a\":[1,2]}', (k, v) => k === 'a' ? v.length : v).a",
            ))
            .unwrap();
        assert_eq!(value.as_number(), Some(2.0));
    }

    #[test]
    fn member_chains_are_plain_identifier_paths() {
        assert_eq!(
            member_chains("const port = config.database.port + fs.read({ path }).content;"),
            ["config.database.port", "fs.read"]
        );
        assert_eq!(member_chains("x().y.z; a[0].b; 1.5"), Vec::<String>::new());
    }

    #[test]
    fn an_unknown_function_is_named_as_the_tool_spells_it_or_among_the_likeliest() {
        let methods: Vec<String> = ["customers", "deals", "invoices"]
            .iter()
            .flat_map(|kind| {
                ["list", "get", "create", "update", "delete"]
                    .map(|operation| format!("shop.{kind}_{operation}"))
            })
            .collect();
        let methods: Vec<&str> = methods.iter().map(String::as_str).collect();
        let hint = unknown_member_hint("shop", "customersList", &methods);
        assert!(hint.contains("it is spelled shop.customers_list"), "{hint}");
        let hint = unknown_member_hint("shop", "dealList", &methods);
        assert!(hint.contains("and 3 more (searchTools"), "{hint}");
        let named = hint.split("; its functions are ").nth(1).unwrap();
        assert!(named.starts_with("shop.deals_list"), "{hint}");
        let few = unknown_member_hint("shop", "nothing", &methods[..2]);
        assert!(
            few.contains("its functions are shop.customers_list, shop.customers_get."),
            "{few}"
        );
    }
}

/// The name of `ReferenceError: name is not defined`, when nothing has explained it yet.
fn undefined_name(error: &ScriptError) -> Option<&str> {
    if error.hint.is_some() {
        return None;
    }
    error
        .message
        .strip_prefix("ReferenceError: ")
        .and_then(|rest| rest.strip_suffix(" is not defined"))
}

/// `toml is not defined` where the sandbox has `TOML` (or a tool namespace `fs` for `FS`):
/// names are case-sensitive, and a model that knows the name from elsewhere writes it in
/// another case.
fn explain_wrong_case(error: &mut ScriptError, context: &mut Context, tools: &[ToolBinding]) {
    let Some(name) = undefined_name(error).map(str::to_owned) else {
        return;
    };
    let global = context.global_object();
    let mut names: Vec<String> = global
        .own_property_keys(context)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|key| match key {
            PropertyKey::String(name) => Some(name.to_std_string_escaped()),
            _ => None,
        })
        .collect();
    names.extend(
        tools
            .iter()
            .filter_map(|tool| tool.namespace_and_method())
            .map(|(namespace, _)| namespace.to_owned()),
    );
    if let Some(right) = names
        .iter()
        .find(|other| **other != name && other.eq_ignore_ascii_case(&name))
    {
        error.hint = Some(format!(
            "Names are case-sensitive: the sandbox has `{right}`, not `{name}`."
        ));
    }
}

/// `x is not defined` where the program declared `x` with `const` or `let` inside a block that
/// ended before the failing line: Python's habit. The message alone sends the model to declare
/// it again; the declaration is the place.
fn explain_block_scoped(error: &mut ScriptError, code: &str) {
    let Some(name) = undefined_name(error).map(str::to_owned) else {
        return;
    };
    if let Some(line) = error.line {
        error.hint = block_scoped(code, &name, line);
    }
}

/// Where `name`, read at line `used`, was declared with `const` or `let` inside a block (`{…}`)
/// that ends before that line: a hint that says so, or `None`.
fn block_scoped(code: &str, name: &str, used: u32) -> Option<String> {
    let plain = crate::got::without_literals(code);
    // Literals that span lines were blanked with their line breaks: lines no longer match.
    if plain.lines().count() != code.lines().count() {
        return None;
    }
    let mut depth = 0usize;
    // The declaration: its line, its keyword and the depth of its block.
    let mut declared: Option<(u32, &str, usize)> = None;
    for (index, text) in plain.lines().enumerate() {
        let number = index as u32 + 1;
        let mut previous = "";
        let mut word_start: Option<usize> = None;
        for (at, c) in text.char_indices().chain([(text.len(), ' ')]) {
            if crate::names::is_identifier_char(c) {
                word_start.get_or_insert(at);
                continue;
            }
            if let Some(start) = word_start.take() {
                let word = &text[start..at];
                if declared.is_none() && word == name && matches!(previous, "const" | "let") {
                    if depth == 0 || number >= used {
                        return None;
                    }
                    declared = Some((
                        number,
                        if previous == "const" { "const" } else { "let" },
                        depth,
                    ));
                }
                previous = word;
            }
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if let Some((line, keyword, inner)) = declared
                        && depth < inner
                    {
                        if number >= used {
                            return None;
                        }
                        return Some(format!(
                            "`{name}` is declared with `{keyword}` at line {line}, inside a block \
                             that ends at line {number}: a `const` or `let` is seen only inside its \
                             block. Declare it before the block (`let {name};`) and set it inside."
                        ));
                    }
                }
                c if !c.is_whitespace() => previous = "",
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod block_tests {
    use super::block_scoped;

    #[test]
    fn a_name_declared_in_a_block_that_ended_is_pointed_at() {
        let code = "const lines = text.split('\\n');\nfor (const line of lines) {\n  if (line.startsWith('[db]')) {\n    const port = 5;\n  }\n}\ndone(`${port}`);";
        assert_eq!(
            block_scoped(code, "port", 7).as_deref(),
            Some(
                "`port` is declared with `const` at line 4, inside a block that ends at line 5: \
                 a `const` or `let` is seen only inside its block. Declare it before the block \
                 (`let port;`) and set it inside."
            )
        );
        // Declared at the top level, or read inside its block: not this mistake.
        assert_eq!(block_scoped("const port = 5;\ndone(port)", "port", 2), None);
        assert_eq!(
            block_scoped("if (a) {\n  let port = 5;\n  done(port);\n}", "port", 3),
            None
        );
        // `{` in a string is no block.
        assert_eq!(
            block_scoped("const s = '{';\nlet port = 5;\ndone(port)", "port", 3),
            None
        );
    }
}
