//! Tool ids become JavaScript function names: `trigger.create` → `triggerCreate`.

use std::collections::{HashMap, HashSet};

use crate::engine::RESERVED_NAMES;
use crate::protocol::ToolBinding;

const JS_RESERVED: &[&str] = &[
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
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "new",
    "null",
    "return",
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
    "let",
    "static",
    "enum",
    "await",
    "implements",
    "package",
    "protected",
    "interface",
    "private",
    "public",
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
pub fn function_name(id: &str) -> Option<String> {
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

/// Bindings for these tools (`(id, description)`, any order), sorted by id. Names that two
/// tools share, or that the sandbox or JavaScript already use, are left out: those tools are
/// reachable only as `tools["id"]`.
pub fn bindings<'a>(tools: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<ToolBinding> {
    let mut tools: Vec<(&str, &str)> = tools.into_iter().collect();
    tools.sort_by_key(|(id, _)| *id);
    let mut counts: HashMap<String, usize> = HashMap::new();
    for (id, _) in &tools {
        if let Some(name) = function_name(id) {
            *counts.entry(name).or_default() += 1;
        }
    }
    let reserved: HashSet<&str> = RESERVED_NAMES.iter().chain(JS_RESERVED).copied().collect();
    tools
        .into_iter()
        .map(|(id, description)| ToolBinding {
            id: id.to_owned(),
            function: function_name(id)
                .filter(|name| counts.get(name) == Some(&1) && !reserved.contains(name.as_str())),
            description: description.to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let bound = bindings([("a.b", ""), ("a-b", ""), ("x.y", ""), ("output", "")]);
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
}
