//! A read-only view of a code-mode prompt's timeline: what this turn's programs ran, met and
//! showed. The loop and the rules ask it their questions; it changes nothing.

use agentic_core::{ErrorKind, Prompt, PromptOutput, ToolOutput, ToolResult};
use serde_json::Value;

use crate::plan::CODE_PLAN;
use crate::prompt::CODE_EXECUTE;
use crate::rules::{Notice, not_run};

/// This turn as recorded so far.
#[derive(Clone, Copy)]
pub(super) struct Timeline<'a> {
    prompt: &'a Prompt,
}

impl<'a> Timeline<'a> {
    pub(super) fn of(prompt: &'a Prompt) -> Self {
        Self { prompt }
    }

    /// The tool outputs recorded after the execution `code_output_id`, up to the next one.
    fn after(self, code_output_id: &'a str) -> impl Iterator<Item = &'a ToolOutput> {
        self.prompt
            .output
            .iter()
            .skip_while(move |output| {
                !matches!(output, PromptOutput::Tool(tool) if tool.id == code_output_id)
            })
            .skip(1)
            .filter_map(|output| match output {
                PromptOutput::Tool(tool) => Some(tool),
                _ => None,
            })
            .take_while(|tool| tool.function != CODE_EXECUTE)
    }

    /// The tool calls the program recorded as `code_output_id` made, in order.
    pub(super) fn calls_of(self, code_output_id: &'a str) -> impl Iterator<Item = &'a ToolOutput> {
        self.after(code_output_id)
            .filter(|tool| tool.function != CODE_PLAN)
    }

    /// The plan of the program recorded as `code_output_id`, if it was planned first.
    pub(super) fn plan_of(self, code_output_id: &'a str) -> Option<&'a ToolOutput> {
        self.after(code_output_id)
            .find(|tool| tool.function == CODE_PLAN)
    }

    /// Whether the program recorded as `code_output_id` showed the user text.
    pub(super) fn showed_text(self, code_output_id: &str) -> bool {
        self.prompt
            .output
            .iter()
            .skip_while(|output| {
                !matches!(output, PromptOutput::Tool(tool) if tool.id == code_output_id)
            })
            .any(|output| {
                matches!(output, PromptOutput::Text(text) if !text.content.trim().is_empty())
            })
    }

    /// The inputs of this turn's tool calls, but those of the tools `read_only` names (and
    /// the programs themselves): what may have changed something, tried or done.
    pub(super) fn change_inputs(self, read_only: impl Fn(&str) -> bool) -> Vec<&'a Value> {
        self.prompt
            .output
            .iter()
            .filter_map(|output| match output {
                PromptOutput::Tool(tool)
                    if tool.function != CODE_EXECUTE
                        && tool.function != CODE_PLAN
                        && !read_only(&tool.function) =>
                {
                    Some(&tool.input)
                }
                _ => None,
            })
            .collect()
    }

    /// What the user asked in this turn (empty for a prompt started without text).
    pub(super) fn asked(self) -> &'a str {
        self.prompt.input.as_deref().unwrap_or_default()
    }

    /// Whether `text` is in what this turn's calls and programs gave back (results, logs).
    pub(super) fn met(self, text: &str) -> bool {
        let quoted = Value::String(text.to_owned()).to_string();
        let escaped = &quoted[1..quoted.len() - 1];
        self.prompt.output.iter().any(|output| match output {
            PromptOutput::Tool(tool) => serde_json::to_string(&tool.result)
                .is_ok_and(|result| result.contains(text) || result.contains(escaped)),
            _ => false,
        })
    }

    /// Whether `text` says a data word of what this turn's calls and programs gave back
    /// (`crate::rules::unsaid::data_words` of each text in a result, the user's words aside):
    /// "The services that are down are: search, billing." after a program logged the status
    /// page that names them.
    pub(super) fn met_data(self, text: &str) -> bool {
        let said: Vec<String> = crate::rules::unsaid::words_of(text).collect();
        if said.is_empty() {
            return false;
        }
        self.prompt.output.iter().any(|output| {
            let PromptOutput::Tool(tool) = output else {
                return false;
            };
            let ToolResult::Success { output } = &tool.result else {
                return false;
            };
            crate::engine::texts_in(output).iter().any(|found| {
                crate::rules::unsaid::data_words(found, self.asked())
                    .iter()
                    .any(|word| said.contains(word))
            })
        })
    }

    /// Whether the user has been shown text in this turn.
    pub(super) fn shown_text(self) -> bool {
        self.prompt.output.iter().any(
            |output| matches!(output, PromptOutput::Text(text) if !text.content.trim().is_empty()),
        )
    }

    /// What the program's tool calls returned that it did not use, in one line after a
    /// space, to follow a sentence of an error; empty when there is nothing to say. See
    /// [`crate::got`].
    pub(super) fn what_it_got(self, code_output_id: &str) -> String {
        self.got_note(code_output_id)
            .map(|got| format!(" {got}"))
            .unwrap_or_default()
    }

    /// [`Self::what_it_got`]'s note alone, if there is one.
    pub(super) fn got_note(self, code_output_id: &str) -> Option<String> {
        let code = self
            .prompt
            .tool_output(code_output_id)?
            .input
            .get("code")?
            .as_str()?;
        crate::got::what_it_got(code, self.calls_of(code_output_id))
    }

    /// For `ReferenceError: x is not defined` where an earlier program of this turn declared
    /// `x` and it was not carried over (a function, a variable in a block, or too big).
    pub(super) fn declared_earlier(self, message: &str, current: &str) -> Option<String> {
        let name = message
            .strip_prefix("ReferenceError: ")?
            .strip_suffix(" is not defined")?;
        let (number, declaring) = self
            .executions()
            .filter(|tool| tool.id != current)
            .enumerate()
            .filter(|(_, tool)| {
                tool.input
                    .get("code")
                    .and_then(Value::as_str)
                    .is_some_and(|code| crate::names::declares(code, name))
            })
            .map(|(index, tool)| (index + 1, tool))
            .last()?;
        let code = declaring
            .input
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let is_function = code.lines().any(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words
                .windows(2)
                .any(|pair| pair[0] == "function" && pair[1].split('(').next() == Some(name))
                || line.contains(&format!("{name} = ("))
                || line.contains(&format!("{name} = function"))
        });
        let why = if !is_function && matches!(declaring.result, ToolResult::Error { .. }) {
            // A program stops at its failing line: what it declares after it never ran.
            format!(
                "program {number} failed before it reached that line, and nothing after a \
                 failing line runs"
            )
        } else {
            format!(
                "only the values of top-level variables carry over (not functions, nothing \
                 declared inside a block, at most {} KB in all)",
                crate::engine::carried::MAX_CARRIED_BYTES / 1024
            )
        };
        Some(format!(
            "`{name}` was declared by program {number}, but it has no value here: {why}. Send \
             the whole program, with `{name}` declared in it."
        ))
    }

    /// The error of this turn's last execution, when it failed.
    pub(super) fn last_execution_error(self) -> Option<String> {
        self.executions()
            .next_back()
            .and_then(|tool| match &tool.result {
                ToolResult::Error { error, .. } => Some(error.clone()),
                _ => None,
            })
    }

    /// Whether the model was shown what `tool` gave for `input`: an earlier program of the
    /// turn made that read and failed, and the request after it showed what its calls
    /// returned (`prompt::iteration_messages`).
    pub(super) fn read_shown(self, tool: &str, input: &Value) -> bool {
        self.executions()
            .filter(|execution| {
                matches!(&execution.result, ToolResult::Error { kind, .. } if *kind != ErrorKind::NotRun)
            })
            .any(|execution| {
                self.calls_of(&execution.id).any(|call| {
                    call.function == tool
                        && call.input == *input
                        && matches!(call.result, ToolResult::Success { .. })
                })
            })
    }

    /// This turn's executions (`code.execute` outputs), oldest first.
    pub(super) fn executions(self) -> impl DoubleEndedIterator<Item = &'a ToolOutput> {
        self.prompt.output.iter().filter_map(|output| match output {
            PromptOutput::Tool(tool) if tool.function == CODE_EXECUTE => Some(tool),
            _ => None,
        })
    }

    /// Whether the execution before `current` in this turn failed.
    pub(super) fn previous_execution_failed(self, current: &str) -> bool {
        self.executions()
            .filter(|tool| Notice::of(&tool.result) != Some(Notice::Unsaid))
            .rfind(|tool| tool.id != current)
            .is_some_and(|tool| matches!(tool.result, ToolResult::Error { .. }))
    }

    /// What the last program before `current` gave back (its value, else its logs), when it
    /// ran and ended nothing: the finding a prose reply after it should say.
    pub(super) fn unshown_finding(self, current: &str) -> Option<String> {
        let last = self
            .executions()
            .filter(|tool| !not_run(&tool.result))
            .rfind(|tool| tool.id != current)?;
        let ToolResult::Success { output } = &last.result else {
            return None;
        };
        if output.get("complete").is_some() {
            return None;
        }
        let value = match output.get("value") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.trim().to_owned(),
            Some(other) => other.to_string(),
        };
        let found = if value.is_empty() {
            output
                .get("logs")
                .and_then(Value::as_array)
                .map(|logs| {
                    logs.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default()
        } else {
            value
        };
        (!found.trim().is_empty()).then_some(found)
    }

    /// Whether `prose`, a reply in words before the next program runs, says what the last
    /// program found (`crate::rules::unsaid::says_some`), in a turn that has shown the user
    /// nothing, after a program that ran without failing: the answer the mode would take.
    pub(super) fn prose_says_the_finding(self, prose: &str) -> bool {
        !self.shown_text()
            && !self.previous_execution_failed("")
            && self
                .unshown_finding("")
                .is_some_and(|found| crate::rules::unsaid::says_some(prose, &found, self.asked()))
    }

    /// Replies of this turn that were refused (see [`crate::rules::not_a_program`]).
    pub(super) fn refusals(self) -> usize {
        self.count(Notice::NotAProgram)
    }

    /// Executions of this turn that `notice`'s rule ended.
    pub(super) fn count(self, notice: Notice) -> usize {
        self.executions()
            .filter(|tool| Notice::of(&tool.result) == Some(notice))
            .count()
    }

    /// This turn's executions of `code` (comments and blank space aside: a small model copies
    /// its last code with a fresh timestamp in a comment), with their numbers (from 1).
    pub(super) fn executions_of(self, code: &str) -> impl Iterator<Item = (usize, &'a ToolOutput)> {
        let shape = code_shape(code);
        self.executions()
            .enumerate()
            .filter(move |(_, tool)| {
                tool.input
                    .get("code")
                    .and_then(Value::as_str)
                    .is_some_and(|earlier| code_shape(earlier) == shape)
            })
            .map(|(index, tool)| (index + 1, tool))
    }

    /// The last execution of this turn before `current` that ran `code` and failed, or ran
    /// with a note on values it left empty: its number and what it met. Copies that were not
    /// run are passed over.
    pub(super) fn last_run_of(self, code: &str, current: &str) -> Option<(usize, LastRun)> {
        let (number, tool) = self
            .executions_of(code)
            .filter(|(_, tool)| tool.id != current)
            .filter(|(_, tool)| !not_run(&tool.result))
            .last()?;
        let last_run = match &tool.result {
            ToolResult::Error { error, .. } => LastRun::Failed(error.clone()),
            ToolResult::Success { output } => {
                LastRun::Noted(output.get("note")?.as_str()?.to_owned())
            }
            ToolResult::Pending { .. } => return None,
        };
        Some((number, last_run))
    }

    /// Whether a tool call of iteration `number` (from 1) failed in a way that may pass when
    /// tried again: an HTTP status such as 503 or 429 in its result, or an error that says the
    /// service is temporarily unavailable or timed out.
    pub(super) fn iteration_met_transient_failure(self, number: usize) -> bool {
        let Some(execution) = number
            .checked_sub(1)
            .and_then(|index| self.executions().nth(index))
        else {
            return false;
        };
        self.calls_of(&execution.id)
            .any(|call| crate::rules::transient::transient_failure(&call.result))
    }

    /// The number (from 1) of the first iteration of this turn whose code was `code`.
    pub(super) fn earlier_iteration_with(self, code: &str) -> Option<usize> {
        self.executions_of(code).next().map(|(number, _)| number)
    }

    /// Whether a stuck turn may be asked afresh: once per turn, only while no tool call has
    /// returned anything to answer from, and never after a person rejected a call.
    pub(super) fn may_ask_afresh(self) -> bool {
        let prompt = self.prompt;
        let fetched = prompt.output.iter().any(|output| {
            matches!(output, PromptOutput::Tool(tool)
                if tool.function != CODE_EXECUTE
                    && tool.function != CODE_PLAN
                    && matches!(tool.result, ToolResult::Success { .. }))
        });
        let rejected = prompt.output.iter().any(|output| {
            matches!(output, PromptOutput::Tool(tool)
                if tool.result.error_kind() == Some(ErrorKind::Rejected))
        });
        !fetched && !rejected && self.count(Notice::Afresh) == 0 && self.last_failure().is_some()
    }

    /// The tool calls of this turn that failed or a person rejected, for a reason that
    /// trying again does not change (not a 503 or a timeout), each function and input once;
    /// only those since the last call of a tool that is not `read_only` succeeded, which may
    /// have changed what they meet (a file written since a read of it failed).
    pub(super) fn failed_calls(
        self,
        read_only: &dyn Fn(&str) -> bool,
    ) -> Vec<(&'a str, &'a Value)> {
        let mut failed: Vec<(&'a str, &'a Value)> = Vec::new();
        for output in &self.prompt.output {
            let PromptOutput::Tool(tool) = output else {
                continue;
            };
            if tool.function != CODE_EXECUTE
                && tool.function != CODE_PLAN
                && matches!(tool.result, ToolResult::Success { .. })
                && !read_only(&tool.function)
            {
                failed.clear();
                continue;
            }
            let gives_up = matches!(
                tool.result.error_kind(),
                Some(ErrorKind::Failed | ErrorKind::Rejected)
            );
            if tool.function == CODE_EXECUTE
                || tool.function == CODE_PLAN
                || !gives_up
                || crate::rules::transient::transient_failure(&tool.result)
            {
                continue;
            }
            let call = (tool.function.as_str(), &tool.input);
            if !failed.contains(&call) {
                failed.push(call);
            }
        }
        failed
    }

    /// The whole error of this turn's last program that ran and failed, hint included: not a
    /// notice about a reply that was not run.
    pub(super) fn last_failure(self) -> Option<&'a str> {
        self.executions().rev().find_map(|tool| match &tool.result {
            ToolResult::Error { error, kind, .. } if *kind != ErrorKind::NotRun => {
                Some(error.as_str())
            }
            _ => None,
        })
    }
}

/// Code without its comments and blank space, for telling whether two replies are the same.
/// Only compared, never run: a `//` inside a string literal is cut too, which at worst makes two
/// codes that differ only there count as the same.
pub(super) fn code_shape(code: &str) -> String {
    let mut without_blocks = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(start) = rest.find("/*") {
        without_blocks.push_str(&rest[..start]);
        rest = rest[start + 2..]
            .find("*/")
            .map_or("", |end| &rest[start + 2 + end + 2..]);
    }
    without_blocks.push_str(rest);
    without_blocks
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default().trim())
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the last run of a program met, for the notice about a copy of it.
pub(super) enum LastRun {
    Failed(String),
    /// It ran, with a note on values it left empty.
    Noted(String),
}

#[cfg(test)]
mod tests {
    use super::code_shape;

    #[test]
    fn code_shape_ignores_comments_and_blank_space() {
        assert_eq!(
            code_shape("const now = new Date();\nconsole.log(now); // 2023-12-28T14:57:59Z\n"),
            code_shape(
                "  const now = new Date();\n\n/* the time */ console.log(now); // 2026-11-22\n"
            ),
        );
        assert_ne!(code_shape("f(1)"), code_shape("f(2)"));
        assert_eq!(code_shape("a /* open"), "a");
    }
}
