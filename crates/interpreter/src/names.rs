//! Tool ids become JavaScript function names: `trigger.create` → `triggerCreate`.

use std::collections::{HashMap, HashSet};

use crate::engine::RESERVED_NAMES;
use crate::protocol::ToolBinding;

/// Names of the language besides its reserved words (`agentic_jscalls::RESERVED_WORDS`): its
/// global values and the constructors a program reaches for.
const JS_GLOBALS: &[&str] = &[
    "undefined",
    "NaN",
    "Infinity",
    "eval",
    "arguments",
    "globalThis",
    "Object",
    "Array",
    "JSON",
    "Math",
    "Promise",
    "String",
    "Number",
    "Boolean",
    "Date",
    "Error",
    "Map",
    "Set",
    "Symbol",
    "RegExp",
    "Function",
];

/// The camelCase function name of a dotted id, or `None` when nothing usable remains.
pub(crate) fn function_name(id: &str) -> Option<String> {
    let mut name = String::new();
    for (index, part) in id
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|part| !part.is_empty())
        .enumerate()
    {
        let mut characters = part.chars();
        if let Some(first) = characters.next() {
            if index == 0 {
                name.push(first.to_ascii_lowercase());
            } else {
                name.push(first.to_ascii_uppercase());
            }
            name.extend(characters);
        }
    }
    if name.is_empty() {
        return None;
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    Some(name)
}

/// A tool as [`bindings`] takes it: its dotted id, its description and the aliases it asks
/// for (see `agentic_core::Tool::aliases`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToolNames<'a> {
    pub id: &'a str,
    pub description: &'a str,
    pub aliases: &'a [String],
    /// The declared output schema, whose shape results are checked against.
    pub output: Option<&'a serde_json::Value>,
}

impl<'a> ToolNames<'a> {
    /// The names of a tool as it comes from a prompt's tool set.
    pub(crate) fn of(tool: &'a dyn agentic_core::Tool) -> Self {
        Self {
            id: tool.id(),
            description: tool.description(),
            aliases: tool.aliases(),
            output: tool.output_schema(),
        }
    }
}

/// Bindings for these tools (any order), sorted by id. Names that two tools share, or that the
/// sandbox or JavaScript already use, are left out: those tools are reachable only as
/// `tools["id"]`. An alias is bound only when it is a plain identifier that no tool's own
/// name, no other tool's alias and no sandbox or JavaScript name claims: aliases never shadow.
pub(crate) fn bindings<'a>(tools: impl IntoIterator<Item = ToolNames<'a>>) -> Vec<ToolBinding> {
    let mut tools: Vec<ToolNames<'a>> = tools.into_iter().collect();
    tools.sort_by_key(|tool| tool.id);
    let mut counts: HashMap<String, usize> = HashMap::new();
    for tool in &tools {
        if let Some(name) = function_name(tool.id) {
            *counts.entry(name).or_default() += 1;
        }
    }
    let reserved: HashSet<&str> = RESERVED_NAMES
        .iter()
        .chain(agentic_jscalls::RESERVED_WORDS)
        .chain(JS_GLOBALS)
        .copied()
        .collect();
    // Every own name counts as taken, even one left out because two tools share it: an alias
    // must not quietly pick the winner between them.
    let own_names: HashSet<String> = counts.keys().cloned().collect();
    let mut alias_counts: HashMap<&str, usize> = HashMap::new();
    for tool in &tools {
        let distinct: HashSet<&str> = tool.aliases.iter().map(String::as_str).collect();
        for alias in distinct {
            *alias_counts.entry(alias).or_default() += 1;
        }
    }
    let alias_is_free = |alias: &str| {
        is_identifier(alias)
            && !reserved.contains(alias)
            && !own_names.contains(alias)
            && alias_counts.get(alias) == Some(&1)
    };
    // `fs.list` → namespace `fs`, method `list`. A namespace is bound when its name is an
    // identifier that no sandbox or JavaScript name, no tool function and no alias claims; a
    // method when no other tool of the namespace has the same method name.
    let mut members: HashMap<(String, String), usize> = HashMap::new();
    for tool in &tools {
        if let Some(member) = member_of(tool.id) {
            *members.entry(member).or_default() += 1;
        }
    }
    let namespace_is_free = |namespace: &str| {
        !reserved.contains(namespace)
            && !EXTRA_GLOBALS.contains(&namespace)
            && !own_names.contains(namespace)
            && !alias_counts.contains_key(namespace)
    };
    tools
        .iter()
        .map(|tool| {
            let member = member_of(tool.id)
                .filter(|key| members.get(key) == Some(&1) && namespace_is_free(&key.0))
                .map(|(namespace, method)| format!("{namespace}.{method}"));
            let mut aliases: Vec<String> = Vec::new();
            for alias in tool.aliases {
                if alias_is_free(alias) && !aliases.contains(alias) {
                    aliases.push(alias.clone());
                }
            }
            ToolBinding {
                id: tool.id.to_owned(),
                function: function_name(tool.id).filter(|name| {
                    counts.get(name) == Some(&1) && !reserved.contains(name.as_str())
                }),
                aliases,
                member,
                description: tool.description.to_owned(),
                result: tool
                    .output
                    .map(crate::shape::Shape::of_schema)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// Globals of the JavaScript engine that the reserved words and [`JS_GLOBALS`] leave out; never a namespace.
const EXTRA_GLOBALS: &[&str] = &[
    "Reflect",
    "Proxy",
    "Intl",
    "BigInt",
    "WeakMap",
    "WeakSet",
    "WeakRef",
    "ArrayBuffer",
    "DataView",
    "Atomics",
    "SharedArrayBuffer",
    "Iterator",
    "AggregateError",
    "TypeError",
    "RangeError",
    "SyntaxError",
    "ReferenceError",
    "EvalError",
    "URIError",
    "parseInt",
    "parseFloat",
    "isNaN",
    "isFinite",
    "encodeURI",
    "decodeURI",
    "encodeURIComponent",
    "decodeURIComponent",
    "escape",
    "unescape",
];

/// The namespace and method of a dotted id: `fs.list` → (`fs`, `list`),
/// `interpreter.run-code` → (`interpreter`, `runCode`). `None` without a dot, or when either
/// part is no identifier.
pub(crate) fn member_of(id: &str) -> Option<(String, String)> {
    let (namespace, rest) = id.split_once('.')?;
    let method = function_name(rest)?;
    (is_identifier(namespace) && is_identifier(&method)).then(|| (namespace.to_owned(), method))
}

/// Whether `name` can be a global function name as it stands (ASCII letters, digits, `_`
/// and `$`, not starting with a digit).
fn is_identifier(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_' || first == '$')
        && characters.all(is_identifier_char)
}

/// The functions of namespace `name` (`time.now`, …), by their member names.
pub(crate) fn namespace_members<'a>(tools: &'a [ToolBinding], name: &str) -> Vec<&'a str> {
    tools
        .iter()
        .filter(|tool| {
            tool.namespace_and_method()
                .is_some_and(|(namespace, _)| namespace == name)
        })
        .filter_map(|tool| tool.member.as_deref())
        .collect()
}

/// Whether `code` declares `name` (`const name`, `let name`, `function name`, …), judged from
/// its words: enough to tell that a declaration hides a tool namespace of that name.
pub(crate) fn declares(code: &str, name: &str) -> bool {
    declared_names(code).contains(&name)
}

/// Every name `code` declares with `const`, `let`, `var`, `function` or `class`, once each, in
/// the order of their first declaration (one pass over the words).
pub(crate) fn declared_names(code: &str) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    let mut previous = "";
    for word in code
        .split(|c: char| !is_identifier_char(c))
        .filter(|word| !word.is_empty())
    {
        if ["const", "let", "var", "function", "class"].contains(&previous)
            && !names.contains(&word)
        {
            names.push(word);
        }
        previous = word;
    }
    names
}

/// The 1-based line and column where `code` declares its own `name` (`const name = …`,
/// `function name(…)`, …) outside strings and comments, unless it binds the namespace itself
/// (`const fs = require("fs")`, Node's habit).
pub(crate) fn own_declaration(code: &str, name: &str) -> Option<(u32, u32)> {
    code.lines().enumerate().find_map(|(index, line)| {
        let plain = crate::got::without_literals(line);
        if !declares(&plain, name) {
            return None;
        }
        let rest = line.split_once(name).map(|(_, rest)| rest.trim_start())?;
        let binds_itself = rest.strip_prefix('=').is_some_and(|value| {
            let value = value.trim_start();
            value.starts_with("require(") && value.contains(&format!("{name}\""))
                || value.starts_with("require(") && value.contains(&format!("{name}'"))
                || value.trim_end_matches(';').trim() == name
        });
        if binds_itself {
            return None;
        }
        let column = line
            .find(name)
            .map_or(1, |at| line[..at].chars().count() as u32 + 1);
        Some((index as u32 + 1, column))
    })
}

/// A character that may continue a JavaScript identifier (ASCII letters, digits, `_`, `$`).
pub(crate) fn is_identifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// Tools with at least one word of the query (a word matches a word it starts, so `todos`
/// and `todo` meet), best first; names count three times as much as descriptions.
pub(crate) fn rank_tools<'a>(tools: &'a [ToolBinding], query: &str) -> Vec<&'a ToolBinding> {
    let mut scored: Vec<(usize, &ToolBinding)> = tools
        .iter()
        .filter_map(|tool| {
            let names = format!("{} {}", tool.id, tool.call_name());
            let score = agentic_core::tool::search_score(query, &names, &tool.description);
            (score > 0).then_some((score, tool))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    scored.into_iter().map(|(_, tool)| tool).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_of_a_namespace_is_found_but_not_a_require_of_it() {
        assert_eq!(
            own_declaration("// memory\nconst memory = { write() {} };", "memory"),
            Some((2, 7))
        );
        assert_eq!(own_declaration("function fs(x) {}", "fs"), Some((1, 10)));
        assert_eq!(own_declaration("const fs = require('fs');", "fs"), None);
        assert_eq!(
            own_declaration("const fs = require(\"node:fs\");", "fs"),
            None
        );
        assert_eq!(own_declaration("log('const memory = 1')", "memory"), None);
        assert_eq!(
            own_declaration("const memoryBlocks = memory.list({});", "memory"),
            None
        );
    }

    #[test]
    fn dotted_ids_become_camel_case() {
        assert_eq!(
            function_name("trigger.create").as_deref(),
            Some("triggerCreate")
        );
        assert_eq!(function_name("fs.read-file").as_deref(), Some("fsReadFile"));
        assert_eq!(function_name("Time.now").as_deref(), Some("timeNow"));
        assert_eq!(function_name("3d.render").as_deref(), Some("_3dRender"));
        assert_eq!(function_name("..."), None);
    }

    #[test]
    fn colliding_names_are_left_to_the_tools_object() {
        let bound = bindings(["a.b", "a-b", "x.y", "output"].map(|id| ToolNames {
            id,
            description: "",
            aliases: &[],
            output: None,
        }));
        let names: Vec<(&str, Option<&str>)> = bound
            .iter()
            .map(|binding| (binding.id.as_str(), binding.function.as_deref()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("a-b", None),
                ("a.b", None),
                ("output", None),
                ("x.y", Some("xY"))
            ]
        );
    }

    #[test]
    fn aliases_are_bound_only_where_nothing_else_claims_the_name() {
        let names = |list: &[&str]| list.iter().map(|name| (*name).to_owned()).collect();
        let store_aliases: Vec<String> = names(&[
            "storeArtifact",
            "storeArtifact",
            "output",
            "artifactStore",
            "kitAdd",
            "bad-name",
            "9lives",
            "shared",
        ]);
        let add_aliases: Vec<String> = names(&["shared", "plus"]);
        let y_aliases: Vec<String> = names(&["aB", "while"]);
        let bound = bindings([
            ToolNames {
                id: "artifact.store",
                description: "",
                aliases: &store_aliases,
                output: None,
            },
            ToolNames {
                id: "kit.add",
                description: "",
                aliases: &add_aliases,
                output: None,
            },
            ToolNames {
                id: "a.b",
                description: "",
                aliases: &[],
                output: None,
            },
            ToolNames {
                id: "a-b",
                description: "",
                aliases: &[],
                output: None,
            },
            ToolNames {
                id: "x.y",
                description: "",
                aliases: &y_aliases,
                output: None,
            },
        ]);
        let aliases: Vec<(&str, Option<&str>, Vec<&str>)> = bound
            .iter()
            .map(|binding| {
                (
                    binding.id.as_str(),
                    binding.function.as_deref(),
                    binding.aliases.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            aliases,
            vec![
                ("a-b", None, vec![]),
                ("a.b", None, vec![]),
                // Its own name, a sandbox built-in, another tool's name, a name two tools ask
                // for and names that are no identifiers are all refused; the duplicate is kept
                // once.
                (
                    "artifact.store",
                    Some("artifactStore"),
                    vec!["storeArtifact"]
                ),
                ("kit.add", Some("kitAdd"), vec!["plus"]),
                // `aB` is the name `a.b` and `a-b` both lost: still not free for an alias.
                ("x.y", Some("xY"), vec![]),
            ]
        );
    }

    #[test]
    fn plugins_become_namespaces_unless_a_name_is_taken() {
        let ids = [
            "fs.list",
            "fs.read-file",
            "log.write",
            "math.max",
            "interpreter.run-code",
            "dup.a-b",
            "dup.a.b",
            "Math.abs",
            "parseInt.x",
            "plain",
        ];
        let bound = bindings(ids.map(|id| ToolNames {
            id,
            description: "",
            aliases: &[],
            output: None,
        }));
        let members: Vec<(&str, Option<&str>)> = bound
            .iter()
            .map(|binding| (binding.id.as_str(), binding.member.as_deref()))
            .collect();
        assert_eq!(
            members,
            vec![
                ("Math.abs", None),
                ("dup.a-b", None),
                ("dup.a.b", None),
                ("fs.list", Some("fs.list")),
                ("fs.read-file", Some("fs.readFile")),
                ("interpreter.run-code", Some("interpreter.runCode")),
                // `log` is the sandbox's own function.
                ("log.write", None),
                ("math.max", Some("math.max")),
                ("parseInt.x", None),
                ("plain", None),
            ]
        );
        assert_eq!(bound[3].call_name(), "fs.list");
        assert_eq!(bound[9].call_name(), "plain");
        assert_eq!(bound[1].call_name(), "tools[\"dup.a-b\"]");
    }
}
