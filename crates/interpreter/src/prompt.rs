//! What the model sees in code mode: the system prompt, its code taken out of its reply, and
//! the feedback of each execution.

use std::collections::BTreeMap;

use agentic_core::tokens::estimate_tokens;
use agentic_core::typescript;
use agentic_core::{ChatMessage, ContextItem, PromptOutput, ToolResult, ToolSet, tool::cap_text};
use serde_json::Value;

use crate::protocol::{CodePath, HostReply, ToolBinding};

/// The tool id under which each execution is recorded in the timeline.
pub(crate) const CODE_EXECUTE: &str = "code.execute";

const RULES: &str = "\
You work by writing JavaScript. Answer every message with one JavaScript program and nothing \
else: no prose around it, no JSON, no other language. The program runs in a sandbox; its last \
expression (or `return`) and its log() lines come back to you, and you write more code until \
the task is done.

In the sandbox:
- Every tool below is a function that takes one object and returns its result directly (no \
`await` needed). It throws an Error when it fails. Results have the type after the `:`; use \
only those fields.
- output(text) shows text to the user. The user sees nothing else.
- done(answer) shows the answer to the user and ends your turn; done() ends it after output().
- log(...values) sends notes back to you, not to the user.
- store(key, value) and recall(key) keep values between your programs in this turn.
- parallel([{tool: \"id\", input: {...}}]) runs several tool calls at once; a failed call \
comes back as {error}.
- llm(prompt) asks a language model for text; llmJson(prompt) for JSON.
- searchTools(\"words\") finds tools; describeTool(\"id\") gives a tool's declaration.
- There are no modules: no require, import, process, fetch or Node.js fs functions; only the \
tools below. No timers and no network except through tools.

Look before you compute: you see a file or a tool result only when a program returns or logs \
it. When the answer depends on data whose layout you have not seen yet (a CSV's columns, a JSON \
file's fields, a config file's sections), your first program only returns a sample of it (the \
first file's content, say) and neither writes nor calls done(); the program after it, written \
once you have seen the sample, does the work.

Filter, join and aggregate tool results in code, and output only what the user needs.";

/// A short worked example, on the tools the prompt has when it has them.
fn example(tools: &[ToolBinding]) -> String {
    let call = |id: &str| {
        tools
            .iter()
            .find(|tool| tool.id == id && (tool.member.is_some() || tool.function.is_some()))
            .map(ToolBinding::call_name)
    };
    match (call("fs.list"), call("fs.read")) {
        (Some(list), Some(read)) => format!(
            "\n\nExample. User: \"books/ has a JSON file per book. Who wrote the most pages?\" You:\n\
             const files = {list}({{ path: \"books\" }}).entries.filter(e => e.kind === \"file\");\n\
             log(`${{files.length}} files`);\n\
             {read}({{ path: files[0].path }}).content\n\
             Execution result (a string):\n\
             {{\"title\": \"Dune\", \"author\": \"Frank Herbert\", \"pages\": 412}}\n\
             Logs:\n\
             12 files\n\
             You:\n\
             const pages = {{}};\n\
             for (const file of {list}({{ path: \"books\" }}).entries.filter(e => e.kind === \"file\")) {{\n  \
               const book = JSON.parse({read}({{ path: file.path }}).content);\n  \
               pages[book.author] = (pages[book.author] || 0) + book.pages;\n\
             }}\n\
             const top = Object.keys(pages).sort((a, b) => pages[b] - pages[a])[0];\n\
             done(`${{top}} wrote the most pages: ${{pages[top]}}.`);"
        ),
        // Tools, but not the files': an example that calls a tool for what it answers. The
        // arithmetic one below, given to a prompt with tools, taught a model to answer a
        // question a tool was for with numbers of its own (BFCL's simple_python_0: "the area
        // is 25 units", no call). Its tool is not one of the prompt's, and says so; one of the
        // prompt's would have to be shown with values the model then copies.
        _ if !tools.is_empty() => {
            "\n\nExample, with a tool `inventory.count(input: { sku: string; \
              warehouse?: string }): { units: number }` (an example's tool, not one of yours). \
              User: \"How many A-12 do we have in Leeds, in boxes of 6?\" You:\n\
              const { units } = inventory.count({ sku: \"A-12\", warehouse: \"Leeds\" });\n\
              done(`${Math.floor(units / 6)} full boxes (${units} units) of A-12 in Leeds.`);"
                .to_owned()
        }
        _ => "\n\nExample. User: \"What is 17% of 2,340?\" You:\n\
              done(`17% of 2,340 is ${(2340 * 0.17).toFixed(1)}.`);"
            .to_owned(),
    }
}

/// The declaration of one bound tool (`None` when the set does not have it).
pub(crate) fn declaration(tools: &ToolSet, binding: &ToolBinding) -> Option<String> {
    let tool = tools.get(&binding.id)?;
    let mut text = typescript::declaration(
        &binding.call_name(),
        tool.description(),
        tool.input_schema(),
        tool.output_schema(),
    );
    // The id is how parallel() and tools["id"] name it; aliases are more names for it.
    let mut extras = Vec::new();
    if binding.call_name() != binding.id {
        extras.push(binding.id.clone());
    }
    if !binding.aliases.is_empty() {
        extras.push(format!("also {}", binding.aliases.join(", ")));
    }
    if !extras.is_empty() {
        let extras = format!("({})", extras.join("; "));
        if text.starts_with("//") {
            text = text.replacen('\n', &format!(" {extras}\n"), 1);
        } else {
            text.insert_str(0, &format!("// {extras}\n"));
        }
    }
    Some(text)
}

/// The tool a script names by id, call name, function or alias.
pub(crate) fn find_binding<'a>(bindings: &'a [ToolBinding], name: &str) -> Option<&'a ToolBinding> {
    let name = name.trim();
    bindings.iter().find(|binding| {
        binding.id == name
            || binding.call_name() == name
            || binding.function.as_deref() == Some(name)
            || binding.aliases.iter().any(|alias| alias == name)
    })
}

/// The host's answer to `describeTool(name)` and `toolSchema(name)`.
pub(crate) fn describe_reply(tools: &ToolSet, bindings: &[ToolBinding], name: &str) -> HostReply {
    match find_binding(bindings, name).and_then(|binding| declaration(tools, binding)) {
        Some(text) => HostReply::Value {
            value: Value::String(text),
        },
        None => {
            let close: Vec<String> = crate::names::rank_tools(bindings, name)
                .into_iter()
                .take(5)
                .map(|binding| binding.id.clone())
                .collect();
            let mut message = format!("unknown tool \"{name}\"");
            if !close.is_empty() {
                message.push_str(&format!("; did you mean {}?", close.join(", ")));
            }
            HostReply::Error { message }
        }
    }
}

/// The system prompt: rules, a worked example, the tools grouped by plugin (`plugin_of` gives
/// a tool's plugin and that plugin's rank in the offer) as declarations
/// (or by name only, when the declarations would take more than `budget_tokens`, estimated
/// with [`estimate_tokens`]), then the context items.
pub(crate) fn system_prompt(
    bindings: &[ToolBinding],
    tools: &ToolSet,
    plugin_of: &dyn Fn(&str) -> (usize, String),
    context: &[ContextItem],
    budget_tokens: u64,
    message: &str,
) -> String {
    let mut text = RULES.to_owned();
    text.push_str(&example(bindings));
    // Groups in the order the prompt offers its plugins (the task's first), by rank and id.
    let mut groups: BTreeMap<(usize, String), Vec<&ToolBinding>> = BTreeMap::new();
    for binding in bindings {
        groups
            .entry(plugin_of(&binding.id))
            .or_default()
            .push(binding);
    }
    let declared: String = groups
        .iter()
        .map(|((_, plugin), group)| {
            let declarations: Vec<String> = group
                .iter()
                .filter_map(|binding| declaration(tools, binding))
                .collect();
            format!("\n## {plugin}\n{}", declarations.join("\n"))
        })
        .collect();
    if groups.is_empty() {
        text.push_str("\n\nTools: none.");
    } else if estimate_tokens(&declared) <= budget_tokens {
        text.push_str(
            "\n\nTools (TypeScript declarations; `input?:` may be left out, `field?:` \
                       is optional):",
        );
        text.push_str(&declared);
    } else {
        // Too many to declare: those the message speaks of are declared, the rest named.
        let relevant = relevant_tools(bindings, tools, message, budget_tokens);
        if relevant.is_empty() {
            text.push_str(
                "\n\nTools, by name only (there are too many to declare here): call \
                 describeTool(\"id\") for one's declaration before you use it, and \
                 searchTools(\"words\") to find tools.",
            );
        } else {
            text.push_str(
                "\n\nTools for this message (TypeScript declarations; `input?:` may be left \
                 out, `field?:` is optional):",
            );
            let mut by_plugin: BTreeMap<(usize, String), Vec<String>> = BTreeMap::new();
            for binding in &relevant {
                if let Some(declared) = declaration(tools, binding) {
                    by_plugin
                        .entry(plugin_of(&binding.id))
                        .or_default()
                        .push(declared);
                }
            }
            for ((_, plugin), declarations) in by_plugin {
                text.push_str(&format!("\n## {plugin}\n{}", declarations.join("\n")));
            }
            text.push_str(
                "\n\nOther tools, by name only (there are too many to declare here): call \
                 describeTool(\"id\") for one's declaration before you use it, and \
                 searchTools(\"words\") to find tools.",
            );
        }
        // A namespace's functions share its prefix, which is said once.
        for ((_, plugin), group) in &groups {
            let mut plain: Vec<String> = Vec::new();
            let mut namespaced: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for binding in group {
                if relevant.iter().any(|chosen| chosen.id == binding.id) {
                    continue;
                }
                match binding.namespace_and_method() {
                    Some((namespace, method)) => {
                        namespaced.entry(namespace).or_default().push(method);
                    }
                    None => plain.push(binding.call_name()),
                }
            }
            if !plain.is_empty() {
                text.push_str(&format!("\n## {plugin}: {}", plain.join(", ")));
            }
            for (namespace, methods) in namespaced {
                text.push_str(&format!(
                    "\n## {plugin}, called as {namespace}.<name>: {}",
                    methods.join(", ")
                ));
            }
        }
    }
    text.push_str(&context_sections(context));
    text
}

/// Tools declared for a message when not all fit: at most this many.
const RELEVANT_TOOLS: usize = 10;

/// Words of a message that say nothing about which tool it needs.
const STOP_WORDS: &[&str] = &[
    "about", "after", "all", "and", "any", "are", "but", "can", "could", "does", "each", "for",
    "from", "get", "give", "has", "have", "how", "into", "its", "just", "like", "many", "me",
    "more", "most", "much", "not", "now", "of", "one", "only", "our", "out", "over", "please",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those",
    "under", "was", "were", "what", "when", "where", "which", "who", "why", "will", "with",
    "would", "you", "your",
];

/// The tools a message speaks of, best first: ranked by the words they share with it (as
/// `searchTools` ranks; short and common words left out), at most [`RELEVANT_TOOLS`], and
/// their declarations within `budget_tokens`.
fn relevant_tools<'a>(
    bindings: &'a [ToolBinding],
    tools: &ToolSet,
    message: &str,
    budget_tokens: u64,
) -> Vec<&'a ToolBinding> {
    let words: Vec<String> = message
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|word| word.chars().count() >= 3 && !STOP_WORDS.contains(&word.as_str()))
        .filter(|word| !word.chars().all(|c| c.is_ascii_digit()))
        .collect();
    if words.is_empty() {
        return Vec::new();
    }
    let query = words.join(" ");
    let mut chosen = Vec::new();
    let mut spent = 0;
    for binding in crate::names::rank_tools(bindings, &query) {
        if chosen.len() == RELEVANT_TOOLS {
            break;
        }
        let Some(declared) = declaration(tools, binding) else {
            continue;
        };
        let cost = estimate_tokens(&declared);
        if spent + cost > budget_tokens {
            break;
        }
        spent += cost;
        chosen.push(binding);
    }
    chosen
}

/// The context items from `prepare()`, a `## title` section each.
pub(crate) fn context_sections(context: &[ContextItem]) -> String {
    context
        .iter()
        .map(|item| format!("\n\n## {}\n{}", item.title, item.content))
        .collect()
}

/// A stretch of a model's reply: plain text, or the inside of a markdown fence with its
/// language (lower case, possibly empty).
pub(crate) struct Segment<'a> {
    pub fence: Option<String>,
    pub lines: Vec<&'a str>,
}

impl Segment<'_> {
    /// A fence that holds JavaScript (or TypeScript, or names no language).
    pub(crate) fn is_javascript_fence(&self) -> bool {
        self.fence.as_deref().is_some_and(|language| {
            matches!(
                language,
                "" | "js" | "javascript" | "ts" | "typescript" | "jsx" | "mjs"
            )
        })
    }
}

/// Splits `reply` at its markdown fences (a fence left open runs to the end).
pub(crate) fn segments(reply: &str) -> Vec<Segment<'_>> {
    let mut segments = Vec::new();
    let mut plain = Vec::new();
    let mut lines = reply.lines();
    while let Some(line) = lines.next() {
        let Some(language) = line.trim_start().strip_prefix("```") else {
            plain.push(line);
            continue;
        };
        if !plain.is_empty() {
            segments.push(Segment {
                fence: None,
                lines: std::mem::take(&mut plain),
            });
        }
        let mut block = Vec::new();
        for line in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            block.push(line);
        }
        segments.push(Segment {
            fence: Some(language.trim().to_ascii_lowercase()),
            lines: block,
        });
    }
    if !plain.is_empty() {
        segments.push(Segment {
            fence: None,
            lines: plain,
        });
    }
    segments
}

/// The code in a model's reply: fenced blocks when there are any, else the reply itself.
pub(crate) fn extract_code(reply: &str) -> (String, CodePath) {
    let reply = without_speaker(reply);
    let blocks: Vec<String> = segments(reply)
        .into_iter()
        .filter(Segment::is_javascript_fence)
        .map(|segment| segment.lines.join("\n"))
        .collect();
    if blocks.is_empty() {
        (reply.trim().to_owned(), CodePath::Plain)
    } else {
        (blocks.join("\n"), CodePath::Fenced)
    }
}

/// The reply without what small models copy from the worked example around their program: a
/// first line that only names the speaker (`You:`), and the sandbox's answer they go on to
/// imagine (from a line `Execution result…`, `Execution error…` or `Logs:` on).
fn without_speaker(reply: &str) -> &str {
    let trimmed = reply.trim_start();
    let (first, rest) = trimmed.split_once('\n').unwrap_or((trimmed, ""));
    let reply = match first.trim().to_ascii_lowercase().as_str() {
        "you:" | "assistant:" | "me:" => rest,
        _ => reply,
    };
    let mut offset = 0;
    for line in reply.split_inclusive('\n') {
        let text = line.trim();
        if offset > 0
            && (text == "Logs:"
                || text.starts_with("Execution result")
                || text.starts_with("Execution error"))
        {
            return &reply[..offset];
        }
        offset += line.len();
    }
    reply
}

/// The iterations of the running prompt: each execution's code as the assistant's message,
/// then its feedback. Tool calls made inside the code stay out: their results live in the
/// code's variables, which is the point of code mode. A program that failed is the exception:
/// the start of what its first calls returned goes along, as small models guess at a file's
/// layout and cannot fix the guess without seeing it.
pub(crate) fn iteration_messages(outputs: &[PromptOutput], limit: usize) -> Vec<ChatMessage> {
    struct Current<'a> {
        code: String,
        result: &'a ToolResult,
        calls: Vec<&'a agentic_core::ToolOutput>,
        shown: Vec<String>,
    }
    let mut messages = Vec::new();
    let mut current: Option<Current> = None;
    let flush = |current: &mut Option<Current>, messages: &mut Vec<ChatMessage>| {
        if let Some(current) = current.take() {
            let mut text = feedback(current.result, &current.shown, limit);
            if let ToolResult::Error { kind, .. } = current.result
                && *kind != agentic_core::ErrorKind::NotRun
            {
                text.push_str(&returned_preview(&current.calls));
            }
            messages.push(ChatMessage::assistant(current.code));
            messages.push(ChatMessage::user(text));
        }
    };
    for output in outputs {
        match output {
            PromptOutput::Tool(tool) if tool.function == CODE_EXECUTE => {
                flush(&mut current, &mut messages);
                let code = tool
                    .input
                    .get("code")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                current = Some(Current {
                    code,
                    result: &tool.result,
                    calls: Vec::new(),
                    shown: Vec::new(),
                });
            }
            PromptOutput::Tool(tool) => {
                if let Some(current) = &mut current {
                    current.calls.push(tool);
                }
            }
            PromptOutput::Text(text) => {
                if let Some(current) = &mut current {
                    current.shown.push(text.content.clone());
                }
            }
            _ => {}
        }
    }
    flush(&mut current, &mut messages);
    messages
}

/// Calls of a failed program whose results are previewed, and the characters kept of each
/// call's input and result.
const PREVIEW_CALLS: usize = 3;
const PREVIEW_INPUT_CHARS: usize = 400;
const PREVIEW_RESULT_CHARS: usize = 800;

/// `\nWhat its tool calls returned …` for the first few distinct calls that succeeded, as
/// JSON cut as results are cut for the model elsewhere.
fn returned_preview(calls: &[&agentic_core::ToolOutput]) -> String {
    let mut seen: Vec<(&str, &Value)> = Vec::new();
    let mut lines = Vec::new();
    for call in calls {
        if !matches!(call.result, ToolResult::Success { .. })
            || seen.contains(&(call.function.as_str(), &call.input))
        {
            continue;
        }
        seen.push((call.function.as_str(), &call.input));
        if lines.len() == PREVIEW_CALLS {
            lines.push("(more calls not shown)".to_owned());
            break;
        }
        lines.extend(call_line(call, PREVIEW_RESULT_CHARS));
    }
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "\nWhat its tool calls returned (the start of each result):\n{}",
        lines.join("\n")
    )
}

/// `fs.read({"path":"a.txt"}) returned {…}`, input and result cut.
pub(crate) fn returned_line(
    function: &str,
    input: &Value,
    output: &Value,
    result_chars: usize,
) -> String {
    let input = cap_text(&input.to_string(), PREVIEW_INPUT_CHARS).replace('\n', " ");
    format!(
        "{function}({input}) returned {}",
        cap_text(&output.to_string(), result_chars)
    )
}

/// `fs.read({"path":"a.txt"}) returned {…}` or `… failed: …`, input and result cut; `None`
/// while the call is pending.
fn call_line(call: &agentic_core::ToolOutput, result_chars: usize) -> Option<String> {
    let input = cap_text(&call.input.to_string(), PREVIEW_INPUT_CHARS).replace('\n', " ");
    let function = &call.function;
    match &call.result {
        ToolResult::Success { output } => {
            Some(returned_line(function, &call.input, output, result_chars))
        }
        ToolResult::Error { error, .. } => Some(format!(
            "{function}({input}) failed: {}",
            cap_text(error, result_chars)
        )),
        ToolResult::Pending { .. } => None,
    }
}

/// The system prompt of the plain-text answer code mode falls back to.
pub(crate) const ANSWER_FROM_RESULTS: &str = "You answer the user's message in plain text, from the \
    results of the tool calls made for it, which follow the message. Write no code. Say plainly \
    what was done and what failed; claim nothing the results do not show.";

/// Characters kept of each call's result, and of all of them, in [`results_digest`].
const DIGEST_RESULT_CHARS: usize = 1_500;
const DIGEST_CHARS: usize = 12_000;

/// What this turn's tool calls (other than the programs themselves) returned or how they
/// failed, each distinct call once, for the plain-text answer when code mode gives up: the
/// model answers from the data, not from the last error it was shown. Empty when no tool ran.
pub(crate) fn results_digest(outputs: &[PromptOutput]) -> String {
    let mut seen: Vec<(&str, &Value)> = Vec::new();
    let mut lines = Vec::new();
    let mut used = 0;
    let mut iteration = 0;
    for output in outputs {
        let call = match output {
            // A plan is what a program would do; its calls are recorded as they run.
            PromptOutput::Tool(call) if call.function == crate::plan::CODE_PLAN => continue,
            PromptOutput::Tool(call) => call,
            PromptOutput::Text(text) if iteration > 0 => {
                lines.push(format!(
                    "- the user was shown: {}",
                    cap_text(&text.content, DIGEST_RESULT_CHARS)
                ));
                continue;
            }
            _ => continue,
        };
        if call.function == CODE_EXECUTE {
            iteration += 1;
            // What a program computed (a sum over thirty files) is a result too.
            if let ToolResult::Success { output } = &call.result {
                let value = output.get("value").filter(|value| !value.is_null());
                let logs: Vec<&str> = output
                    .get("logs")
                    .and_then(Value::as_array)
                    .map(|logs| logs.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut line = format!("- program {iteration}");
                if let Some(value) = value {
                    line.push_str(&format!(
                        " returned {}",
                        cap_text(&value.to_string(), DIGEST_RESULT_CHARS)
                    ));
                }
                if !logs.is_empty() {
                    line.push_str(&format!(
                        " logged {}",
                        cap_text(&logs.join("\n"), DIGEST_RESULT_CHARS)
                    ));
                }
                if value.is_some() || !logs.is_empty() {
                    used += line.len();
                    lines.push(line);
                }
            }
            continue;
        }
        if seen.contains(&(call.function.as_str(), &call.input)) {
            continue;
        }
        seen.push((call.function.as_str(), &call.input));
        let Some(line) = call_line(call, DIGEST_RESULT_CHARS) else {
            continue;
        };
        let line = format!("- {line}");
        if used + line.len() > DIGEST_CHARS {
            lines.push("- (more calls not shown)".to_owned());
            break;
        }
        used += line.len();
        lines.push(line);
    }
    lines.join("\n")
}

/// `Execution result: …` or `Execution error: …`, with logs and what the user was shown.
fn feedback(result: &ToolResult, shown: &[String], limit: usize) -> String {
    let mut text = match result {
        ToolResult::Success { output } => {
            let value = output.get("value").cloned().unwrap_or(Value::Null);
            let logs = output
                .get("logs")
                .and_then(Value::as_array)
                .is_some_and(|logs| !logs.is_empty());
            let mut text = match &value {
                Value::Null if shown.is_empty() && !logs => "Execution finished: the program \
                    returned no value, logged nothing and showed the user nothing. Return or \
                    log() what you need to see, or end with done(answer)."
                    .to_owned(),
                Value::Null => "Execution finished (no return value).".to_owned(),
                Value::String(text) => format!("Execution result (a string):\n{text}"),
                other => format!("Execution result: {other}"),
            };
            append_logs(&mut text, output.get("logs"));
            if let Some(note) = output.get("note").and_then(Value::as_str) {
                text.push_str("\nNote: ");
                text.push_str(note);
            }
            text
        }
        ToolResult::Error { error, .. } => format!("Execution error: {error}"),
        ToolResult::Pending { .. } => "Execution error: the execution never finished".to_owned(),
    };
    if !shown.is_empty() {
        text.push_str("\nShown to the user:\n");
        text.push_str(&shown.join("\n"));
        if matches!(result, ToolResult::Success { .. }) {
            text.push_str(
                "\nIf that answers the user's message, reply with done() alone; otherwise \
                 write the next program.",
            );
        }
    }
    cap_text(&text, limit)
}

fn append_logs(text: &mut String, logs: Option<&Value>) {
    let Some(logs) = logs
        .and_then(Value::as_array)
        .filter(|logs| !logs.is_empty())
    else {
        return;
    };
    text.push_str("\nLogs:");
    for line in logs {
        text.push('\n');
        text.push_str(line.as_str().unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_speaker_line_copied_from_the_example_is_not_code() {
        let (code, path) = extract_code("You:\nconst x = 1;\nx");
        assert_eq!((code.as_str(), path), ("const x = 1;\nx", CodePath::Plain));
        let (code, _) = extract_code("assistant:\n```js\nlog(1)\n```");
        assert_eq!(code, "log(1)");
        // The sandbox's answer the model went on to imagine is not code.
        let (code, _) = extract_code("log(emails);\ndone(\"ok\");\n\nLogs:\nFrank Herbert\n");
        assert_eq!(code, "log(emails);\ndone(\"ok\");");
        let (code, _) = extract_code("You:\nx\nExecution result (a string):\nhi");
        assert_eq!(code, "x");
        // A first line that says more than a speaker stays.
        let (code, _) = extract_code("You: x\nlog(1)");
        assert_eq!(code, "You: x\nlog(1)");
    }

    #[test]
    fn fenced_code_is_taken_out_of_prose() {
        let reply = "Here you go:\n```javascript\nconst a = 1;\noutput(a)\n```\nHope it helps.";
        assert_eq!(
            extract_code(reply),
            ("const a = 1;\noutput(a)".to_owned(), CodePath::Fenced)
        );
        assert_eq!(
            extract_code("done()"),
            ("done()".to_owned(), CodePath::Plain)
        );
        // Blocks in other languages are not ours to run.
        assert_eq!(extract_code("```python\nprint(1)\n```").1, CodePath::Plain);
    }
}
