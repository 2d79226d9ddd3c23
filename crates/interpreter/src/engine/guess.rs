//! A dry run's placeholders, watched: the host answers a call it did not run with a guess
//! ([`HostReply::Guess`](crate::protocol::HostReply::Guess)), and the program gets it behind
//! a `Proxy` whose every read is noted. A program that never looks inside its guesses cannot
//! have branched on them; one that did is dry-run again with other guesses to see whether it
//! does something else (`dry_run.rs`).

use boa_engine::object::FunctionObjectBuilder;
use boa_engine::property::PropertyKey;
use boa_engine::{Context, JsResult, JsValue, NativeFunction, js_string};

use super::with_engine;

/// Names read of an object by the language itself.
const PROBES: &[&str] = &["then", "toJSON"];

/// `value`, a guess, as the program gets it: an object behind a `Proxy` that notes each read;
/// anything else is noted as read at once (a number or a string cannot be watched).
pub(super) fn watched(value: JsValue, context: &mut Context) -> JsResult<JsValue> {
    let Some(object) = value.as_object() else {
        noted();
        return Ok(value);
    };
    let get = FunctionObjectBuilder::new(
        context.realm(),
        NativeFunction::from_fn_ptr(|_this, arguments, context| {
            let (target, key) = super::typed::get_trap(arguments, context)?;
            // What the language probes every object for (awaiting it, serialising it) is not
            // the program looking at the value.
            let probe = matches!(&key, PropertyKey::String(name)
                if PROBES.iter().any(|probe| name.to_std_string_escaped() == *probe));
            if !probe {
                noted();
            }
            target.get(key, context)
        }),
    )
    .name(js_string!("get"))
    .length(3)
    .build();
    let handler = boa_engine::object::ObjectInitializer::new(context).build();
    handler.set(js_string!("get"), get, false, context)?;
    super::typed::proxied(object.clone().into(), handler, context)
}

/// Notes that the program read a guess. After the run (its variables are read to carry them
/// over) there is no state, and nothing is noted.
fn noted() {
    let _ = with_engine(|state| state.guesses_read = true);
}
