//! The classic-mode grammar against a small made-up vocabulary: every byte, the two tags and a
//! few multi-byte pieces, so text can be spelled many ways, as a real vocabulary allows.

use std::sync::Arc;

use agentic_core::{ChatMessage, ModelKind, ModelRequest, ToolChoice, ToolSpec};
use llguidance::toktrie::{TokEnv, TokTrie};
use serde_json::json;

use super::*;

fn vocabulary() -> Vocabulary {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|byte| vec![byte]).collect();
    for piece in [
        "<tool_call>",
        "</tool_call>",
        "{\"",
        "name",
        "\":",
        " \"",
        "\",",
        "arguments",
        "time",
        ".now",
        "}}",
    ] {
        tokens.push(piece.as_bytes().to_vec());
    }
    let mut end = vec![TokTrie::SPECIAL_TOKEN_MARKER];
    end.extend_from_slice(b"<|im_end|>");
    tokens.push(end);
    Vocabulary::from_token_bytes(tokens)
}

fn end_token() -> u32 {
    vocabulary().len() as u32 - 1
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "time.now".into(),
            description: "The time".into(),
            parameters: Arc::new(json!({
                "type": "object",
                "properties": { "timezone": { "type": "string" } },
            })),
        },
        ToolSpec {
            name: "fs.read".into(),
            description: "Reads a file".into(),
            parameters: Arc::new(json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string" },
                    "encoding": { "$ref": "#/$defs/Encoding" },
                },
                "required": ["path"],
                "$defs": { "Encoding": { "enum": ["utf8", "base64"] } },
            })),
        },
    ]
}

/// How far the grammar lets `text` go: `Ok(true)` when all of it is allowed and the answer may
/// end after it, `Ok(false)` when all is allowed but the answer may not end there yet, and
/// `Err(prefix)` with the part that was allowed before the first forbidden token.
fn check(text: &str) -> Result<bool, String> {
    check_with(text, ToolChoice::Auto)
}

/// [`check`], for a request with tool choice `choice`.
fn check_with(text: &str, choice: ToolChoice) -> Result<bool, String> {
    let vocabulary = vocabulary();
    // Two extra unnamed rows, as real models have.
    let logits = vocabulary.len() + 2;
    let env: TokEnv = vocabulary.token_env(logits, &[end_token()]).unwrap();
    let grammars = Grammars::new(&vocabulary, logits, &[end_token()]).unwrap();
    let mut request = ModelRequest::new(ModelKind::Normal, vec![ChatMessage::user("hi")]);
    request.tools = tools();
    request.tool_choice = choice;
    let mut constraint = grammars.for_request(&request).unwrap().unwrap();
    let mut allowed = Vec::new();
    for token in env.tokenize_bytes(text.as_bytes()) {
        if !constraint.allows(token).unwrap() {
            return Err(String::from_utf8_lossy(&allowed).into_owned());
        }
        constraint.accept(token).unwrap();
        allowed.extend_from_slice(env.tok_trie().token(token));
    }
    Ok(constraint.allows(end_token()).unwrap())
}

#[test]
fn free_text_is_free() {
    assert_eq!(check("The time is 12:00, {see} <b>here</b>."), Ok(true));
    assert_eq!(check(""), Ok(true));
}

#[test]
fn a_call_to_an_offered_tool_with_its_fields_is_allowed() {
    assert_eq!(
        check(
            "<tool_call>\n{\"name\": \"time.now\", \"arguments\": {\"timezone\": \"Asia/Tokyo\"}}\n</tool_call>"
        ),
        Ok(true)
    );
    assert_eq!(
        check(
            "Let me look.\n<tool_call>\n{\"name\": \"fs.read\", \"arguments\": {\"path\": \"a.txt\", \"encoding\": \"base64\"}}\n</tool_call>"
        ),
        Ok(true)
    );
    // Two calls, text around them.
    assert_eq!(
        check(
            "<tool_call>{\"name\":\"time.now\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"fs.read\",\"arguments\":{\"path\":\"b\"}}</tool_call> done"
        ),
        Ok(true)
    );
}

#[test]
fn a_reply_that_opens_with_json_is_a_call_held_to_the_schema() {
    assert_eq!(
        check("```json\n{\"name\": \"time.now\", \"arguments\": {\"timezone\": \"UTC\"}}\n```"),
        Ok(true)
    );
    assert_eq!(
        check(" {\"name\": \"fs.read\", \"arguments\": {\"path\": \"a\"}}"),
        Ok(true)
    );
    // Seen with Qwen2.5-Coder-1.5B (eval, approved-write, tuning split): `fs.write` with
    // `label` and `mode` in a fence, which ran as a call and failed.
    assert_eq!(
        check("```json\n{\"name\": \"time.now\", \"arguments\": {\"label\": \"a\"}}\n```"),
        Err("```json\n{\"name\": \"time.now\", \"arguments\": {\"".into())
    );
    assert_eq!(check("{\"function\": \"time.now\"}"), Err("{\"".into()));
    // Several calls, one fence each, bare one after another, or in one array; each is held to
    // its schema.
    assert_eq!(
        check(
            "```json\n{\"name\": \"time.now\", \"arguments\": {}}\n```\n\n```json\n{\"name\": \"fs.read\", \"arguments\": {\"path\": \"b\"}}\n```"
        ),
        Ok(true)
    );
    assert_eq!(
        check(
            "{\"name\": \"time.now\", \"arguments\": {}}\n{\"name\": \"time.now\", \"arguments\": {\"timezone\": \"UTC\"}}"
        ),
        Ok(true)
    );
    assert_eq!(
        check(
            "[{\"name\": \"time.now\", \"arguments\": {}}, {\"name\": \"fs.read\", \"arguments\": {\"path\": \"b\"}}]"
        ),
        Ok(true)
    );
    assert_eq!(
        check("[{\"name\": \"time.now\", \"arguments\": {}}, {\"name\": \"time.now\", \"arguments\": {\"label\": 1}}]"),
        Err("[{\"name\": \"time.now\", \"arguments\": {}}, {\"name\": \"time.now\", \"arguments\": {\"".into())
    );
    // Words after the calls are not part of them: the answer comes after the results.
    assert!(check("{\"name\": \"time.now\", \"arguments\": {}}\nDone.").is_err());
    // Other fences and JSON after words stay free.
    assert_eq!(check("```python\nprint({\"a\": 1})\n```"), Ok(true));
    assert_eq!(check("The file holds:\n```json\n{\"a\": 1}\n```"), Ok(true));
}

#[test]
fn a_required_call_leaves_no_room_for_words() {
    let required = |text: &str| check_with(text, ToolChoice::Required);
    // Calls in tags, or one as a JSON object, are what it may be.
    assert_eq!(
        required("<tool_call>\n{\"name\": \"time.now\", \"arguments\": {}}\n</tool_call>"),
        Ok(true)
    );
    assert_eq!(
        required(
            "<tool_call>{\"name\":\"time.now\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"fs.read\",\"arguments\":{\"path\":\"b\"}}</tool_call>\n"
        ),
        Ok(true)
    );
    assert_eq!(
        required("```json\n{\"name\": \"fs.read\", \"arguments\": {\"path\": \"a\"}}\n```"),
        Ok(true)
    );
    // Nothing at all, words, or words after a call, it may not.
    assert_eq!(required(""), Ok(false));
    assert_eq!(required("The file"), Err(String::new()));
    assert_eq!(
        required("<tool_call>{\"name\":\"time.now\",\"arguments\":{}}</tool_call> done"),
        Err("<tool_call>{\"name\":\"time.now\",\"arguments\":{}}</tool_call> ".into())
    );
    // Still held to the offered tools and their schemas.
    assert_eq!(
        required("<tool_call>\n{\"name\": \"time.later\", \"arguments\": {}}\n</tool_call>"),
        Err("<tool_call>\n{\"name\": \"time.".into())
    );
}

#[test]
fn an_unfinished_call_may_not_end_the_answer() {
    assert_eq!(
        check("<tool_call>\n{\"name\": \"time.now\", \"arguments\": {}}"),
        Ok(false)
    );
    assert_eq!(check("<tool_call>"), Ok(false));
}

#[test]
fn an_unknown_tool_is_refused_at_its_name() {
    assert_eq!(
        check("<tool_call>\n{\"name\": \"time.later\", \"arguments\": {}}\n</tool_call>"),
        Err("<tool_call>\n{\"name\": \"time.".into())
    );
}

#[test]
fn a_field_the_tool_does_not_take_is_refused() {
    assert_eq!(
        check(
            "<tool_call>{\"name\": \"time.now\", \"arguments\": {\"zone\": \"UTC\"}}</tool_call>"
        ),
        Err("<tool_call>{\"name\": \"time.now\", \"arguments\": {\"".into())
    );
    // Another tool's field.
    assert_eq!(
        check("<tool_call>{\"name\": \"time.now\", \"arguments\": {\"path\": \"a\"}}</tool_call>"),
        Err("<tool_call>{\"name\": \"time.now\", \"arguments\": {\"".into())
    );
}

#[test]
fn values_follow_the_input_schema() {
    // An enum value from the tool's definitions.
    assert_eq!(
        check(
            "<tool_call>{\"name\": \"fs.read\", \"arguments\": {\"path\": \"a\", \"encoding\": \"latin1\"}}</tool_call>"
        ),
        Err(
            "<tool_call>{\"name\": \"fs.read\", \"arguments\": {\"path\": \"a\", \"encoding\": \""
                .into()
        )
    );
    // A required field left out.
    assert_eq!(
        check("<tool_call>{\"name\": \"fs.read\", \"arguments\": {}}</tool_call>"),
        Err("<tool_call>{\"name\": \"fs.read\", \"arguments\": {".into())
    );
    // A string where a string is wanted, not a number.
    assert_eq!(
        check("<tool_call>{\"name\": \"fs.read\", \"arguments\": {\"path\": 3}}</tool_call>"),
        Err("<tool_call>{\"name\": \"fs.read\", \"arguments\": {\"path\": ".into())
    );
}

#[test]
fn the_mask_keeps_only_what_the_grammar_allows() {
    let vocabulary = vocabulary();
    let logits_len = vocabulary.len() + 2;
    let grammars = Grammars::new(&vocabulary, logits_len, &[end_token()]).unwrap();
    let mut constraint = grammars.from_lark("start: \"ab\" | \"ac\"").unwrap();
    let mut logits = vec![1.0f32; logits_len];
    constraint.mask(&mut logits).unwrap();
    let allowed: Vec<usize> = (0..logits_len)
        .filter(|&token| logits[token].is_finite())
        .collect();
    assert_eq!(allowed, vec![usize::from(b'a')]);
    constraint.accept(u32::from(b'a')).unwrap();
    assert!(!constraint.may_end().unwrap());
    constraint.accept(u32::from(b'c')).unwrap();
    assert!(constraint.may_end().unwrap());
}

#[test]
fn no_tools_means_no_constraint() {
    let grammars = Grammars::new(&vocabulary(), vocabulary().len(), &[end_token()]).unwrap();
    let request = ModelRequest::new(ModelKind::Normal, vec![ChatMessage::user("hi")]);
    assert!(grammars.for_request(&request).unwrap().is_none());
}
