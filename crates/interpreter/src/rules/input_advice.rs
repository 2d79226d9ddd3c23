//! **Refused tool input, explained in code.** Fixes: a list passed where a tool takes one
//! object (`todo.create([{…}, {…}])`), and a database-style query operator as a field's value
//! (`amount: {"$gt": 30000}`); the refusal shows the loop or the filter that does it. Core's
//! own words for other modes are plain (`agentic_core::tool::plain_input_advice`).
//!
//! Measured: not alone; the query-operator example came with the timeline `query_operator`
//! (the program after it filters in code).

use agentic_core::tool::{QueryOperator, query_operator};
use serde_json::Value;

/// Code mode's [`agentic_core::tool::InputAdvice`].
pub(crate) fn advice(id: &str, input: &Value, schema: &Value) -> String {
    if input.is_array() && schema.get("type").and_then(Value::as_str) == Some("object") {
        return format!(
            " ({id} takes one object per call; for several items, call it once for each: for \
             (const item of items) {id}(item))"
        );
    }
    let Some(QueryOperator {
        field,
        value,
        comparison,
    }) = query_operator(input)
    else {
        return String::new();
    };
    let example = comparison
        .map(|(comparison, operand)| {
            format!(", e.g. results.filter(item => item.{field} {comparison} {operand})")
        })
        .unwrap_or_default();
    format!(
        " (`{field}: {value}` is a query operator, which tools do not take; a plain value \
         matches only itself. To compare, leave `{field}` out and filter the results in \
         code{example})"
    )
}
