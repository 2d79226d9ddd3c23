//! The JavaScript side: a Boa context with the sandbox functions, running one script per
//! context. It runs inside a worker (a separate process, or a thread for the in-process
//! backend) and reaches the host only through a [`HostLink`].

use std::cell::RefCell;
use std::path::Path;

use boa_engine::ast::{Statement, StatementListItem};
use boa_engine::builtins::object::OrdinaryObject;
use boa_engine::builtins::promise::PromiseState;
use boa_engine::interner::Interner;
use boa_engine::object::builtins::{JsArray, JsPromise};
use boa_engine::object::{FunctionObjectBuilder, ObjectInitializer};
use boa_engine::parser::Parser;
use boa_engine::property::{Attribute, PropertyDescriptor, PropertyKey};
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, Script,
    Source, js_string,
};
use serde_json::{Map, Value};

use crate::protocol::{
    CodePath, ExecuteRequest, ExecutionOutcome, HostReply, HostRequest, ScriptError,
    ScriptErrorKind, ScriptLimits, ToHost, ToolBinding,
};

/// How the engine reaches the host.
pub(crate) trait HostLink {
    /// Sends a request, with `Date`'s live readings since the last one, and blocks until its
    /// reply arrives.
    fn request(&mut self, request: HostRequest, clock: Vec<i64>) -> HostReply;
    /// Sends a message that needs no reply (output, log).
    fn notify(&mut self, message: ToHost);
}

/// Deepest nesting of brackets accepted in source; deeper code would overflow the parser's stack.
pub(crate) const MAX_SOURCE_NESTING: usize = 1_000;
/// Deepest value converted between JavaScript and JSON.
const MAX_VALUE_DEPTH: usize = 100;

/// Names the sandbox defines itself; tools never shadow them.
pub(crate) const RESERVED_NAMES: &[&str] = &[
    "output",
    "done",
    "complete",
    "store",
    "recall",
    "log",
    "discoverTools",
    "toolSchema",
    "searchTools",
    "describeTool",
    "parallel",
    "llm",
    "llmJson",
    "tools",
    "input",
    "console",
    "require",
];

/// Options of the engine that are not per script.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EngineOptions {
    /// Stops runaway loops where nothing can kill the worker (the in-process backend).
    pub loop_iteration_limit: Option<u64>,
}

/// A context with the sandbox functions registered, waiting for its script. It may already
/// have tool functions bound: those of the previous script, which the next iteration of the
/// same prompt usually needs again.
pub(crate) struct PreparedContext {
    context: Context,
    bound_tools: Option<Vec<ToolBinding>>,
}

impl std::fmt::Debug for PreparedContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedContext").finish_non_exhaustive()
    }
}

/// Builds a fresh context, with `tools` bound if given. Done ahead of time, while the worker
/// waits for work.
pub(crate) fn prepare_context(
    options: EngineOptions,
    tools: Option<&[ToolBinding]>,
) -> JsResult<PreparedContext> {
    let mut context = Context::builder()
        .clock(std::rc::Rc::new(ScriptClock))
        .job_executor(std::rc::Rc::new(ScriptJobs::default()))
        .build()?;
    if let Some(limit) = options.loop_iteration_limit {
        context.runtime_limits_mut().set_loop_iteration_limit(limit);
    }
    seeded_math_random(&mut context)?;
    let functions: [(&str, usize, NativeFunctionPointer); 14] = [
        ("output", 1, output),
        ("done", 1, done),
        ("complete", 1, complete),
        ("store", 2, store),
        ("recall", 1, recall),
        ("log", 1, log),
        ("discoverTools", 0, discover_tools),
        ("toolSchema", 1, tool_schema),
        ("describeTool", 1, describe_tool),
        ("searchTools", 1, search_tools),
        ("parallel", 1, parallel),
        ("llm", 1, llm),
        ("llmJson", 1, llm_json),
        ("require", 1, require),
    ];
    for (name, length, function) in functions {
        context.register_global_builtin_callable(
            JsString::from(name),
            length,
            NativeFunction::from_fn_ptr(function),
        )?;
    }
    // Models write `console.log` out of habit; it is `log` under another name.
    let console = boa_engine::object::ObjectInitializer::new(&mut context).build();
    for name in ["log", "info", "warn", "error", "debug"] {
        let function =
            FunctionObjectBuilder::new(context.realm(), NativeFunction::from_fn_ptr(log))
                .name(JsString::from(name))
                .length(0)
                .build();
        console.set(JsString::from(name), function, false, &mut context)?;
    }
    context.register_global_property(js_string!("console"), console, Attribute::all())?;
    explain_json_parse_errors(&mut context)?;
    let bound_tools = match tools {
        Some(tools) => {
            bind_tools(&mut context, tools)?;
            Some(tools.to_vec())
        }
        None => None,
    };
    Ok(PreparedContext {
        context,
        bound_tools,
    })
}

/// Characters of a text `JSON.parse` refused that its error quotes.
const JSON_PARSE_QUOTED_CHARS: usize = 60;

/// `JSON.parse` as the engine has it, except that its SyntaxError says what it was given, as
/// V8's does (`Unexpected token 't', "temporari"... is not valid JSON`): the start of the
/// text, or that the value was an object and so already data. Boa's own message (`expected
/// value`) sends a model to rewrite the line instead of reading the data.
fn explain_json_parse_errors(context: &mut Context) -> JsResult<()> {
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

type NativeFunctionPointer = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;

/// Runs one script to the end and reports what happened.
pub(crate) fn execute(
    prepared: PreparedContext,
    request: ExecuteRequest,
    link: Box<dyn HostLink>,
) -> ExecutionOutcome {
    let PreparedContext {
        mut context,
        bound_tools,
    } = prepared;
    let tools_bound = bound_tools.as_deref() == Some(request.tools.as_slice());
    context
        .runtime_limits_mut()
        .set_recursion_limit(request.limits.recursion_limit);
    // Boa's value stack grows with call depth; give honest deep recursion room.
    context.runtime_limits_mut().set_stack_size_limit(
        request
            .limits
            .recursion_limit
            .saturating_mul(64)
            .max(10_240),
    );
    RUN_INPUTS.with(|inputs| *inputs.borrow_mut() = RunInputs::new(&request.determinism));
    ENGINE.with(|engine| {
        *engine.borrow_mut() = Some(EngineState {
            link,
            tools: request.tools.clone(),
            limits: request.limits,
            store: request.store.clone(),
            done: false,
            complete: None,
            output_used: 0,
            output_cut: false,
            tool_calls: 0,
            list_prototypes: std::collections::HashMap::new(),
        });
    });
    let code = normalize_newlines(&request.code);
    let (path, result) = match bind_and_run(&mut context, &request, &code, tools_bound) {
        Ok(value) => (CodePath::Plain, Ok(value)),
        Err(error)
            if error.kind == ScriptErrorKind::Syntax
                && request.allow_prose
                && crate::prose::looks_like_prose(&code) =>
        {
            (CodePath::Prose, Ok(Value::Null))
        }
        Err(mut error) => {
            if !explain_shadowed_namespace(&mut error, &code, &request.tools) {
                explain_missing_modules(&mut error, &request.tools);
            }
            (CodePath::Plain, Err(error))
        }
    };
    let state = ENGINE.with(|engine| engine.borrow_mut().take());
    // With the engine state gone, nothing evaluated here can reach a tool.
    let result = result.map_err(|mut error| {
        explain_missing_field(&mut error, &mut context);
        error
    });
    let (done, complete, store) = state
        .map(|state| (state.done, state.complete, state.store))
        .unwrap_or((false, None, request.store));
    ExecutionOutcome {
        path,
        result,
        done,
        complete,
        store,
    }
}

/// The deepest nesting of `(`, `[` and `{` in source, ignoring nothing: a cheap guard that runs
/// before the parser, whose recursion would otherwise overflow the native stack.
pub(crate) fn source_nesting(code: &str) -> usize {
    let mut depth: usize = 0;
    let mut deepest = 0;
    for byte in code.bytes() {
        match byte {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

struct EngineState {
    link: Box<dyn HostLink>,
    tools: Vec<ToolBinding>,
    limits: ScriptLimits,
    store: Map<String, Value>,
    done: bool,
    complete: Option<Value>,
    output_used: usize,
    output_cut: bool,
    tool_calls: u32,
    /// Prototypes that let a result with one list field be used as that list, by field name.
    list_prototypes: std::collections::HashMap<String, JsObject>,
}

thread_local! {
    /// The state of the script running on this thread. Native functions are plain function
    /// pointers, so they find their state here.
    static ENGINE: RefCell<Option<EngineState>> = const { RefCell::new(None) };
    /// What the script reads that is not its code: the clock and `Math.random()`.
    static RUN_INPUTS: RefCell<RunInputs> = RefCell::new(RunInputs::default());
}

/// The time and randomness a script sees. `Math.random()` is SplitMix64 from a seed the host
/// may choose; `Date` reads the replayed times first, then the live clock, and every live
/// reading is reported with the next host request, so a journal can keep it.
#[derive(Debug, Default)]
struct RunInputs {
    random: u64,
    replayed: std::collections::VecDeque<i64>,
    live: Vec<i64>,
}

impl RunInputs {
    fn new(determinism: &crate::protocol::Determinism) -> Self {
        Self {
            random: determinism.seed.unwrap_or_else(|| fastrand::u64(..)),
            replayed: determinism.clock.iter().copied().collect(),
            live: Vec::new(),
        }
    }

    fn next_random(&mut self) -> f64 {
        self.random = self.random.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // The top 53 bits, as a double in [0, 1).
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    fn now(&mut self) -> i64 {
        if let Some(replayed) = self.replayed.pop_front() {
            return replayed;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
            });
        self.live.push(now);
        now
    }
}

/// Boa's clock for `Date`, in whole milliseconds (all a journal keeps).
struct ScriptClock;

impl boa_engine::context::time::Clock for ScriptClock {
    fn now(&self) -> boa_engine::context::time::JsInstant {
        let millis = RUN_INPUTS.with(|inputs| inputs.borrow_mut().now());
        let millis = u64::try_from(millis).unwrap_or_default();
        boa_engine::context::time::JsInstant::new(millis / 1000, (millis % 1000) as u32 * 1_000_000)
    }
}

/// Runs promise jobs in order. Unlike Boa's own executor it never reads the clock (it has no
/// timers to check: the sandbox has no `setTimeout`), so every clock reading a journal keeps
/// is one the script made.
#[derive(Default)]
struct ScriptJobs {
    promise: RefCell<std::collections::VecDeque<boa_engine::job::PromiseJob>>,
    generic: RefCell<std::collections::VecDeque<boa_engine::job::GenericJob>>,
    /// The engine's own futures (e.g. a dynamic `import()` failing): run to the end in turn.
    native: RefCell<std::collections::VecDeque<boa_engine::job::NativeAsyncJob>>,
}

impl boa_engine::job::JobExecutor for ScriptJobs {
    fn enqueue_job(self: std::rc::Rc<Self>, job: boa_engine::job::Job, _context: &mut Context) {
        match job {
            boa_engine::job::Job::PromiseJob(job) => self.promise.borrow_mut().push_back(job),
            boa_engine::job::Job::GenericJob(job) => self.generic.borrow_mut().push_back(job),
            boa_engine::job::Job::AsyncJob(job) => self.native.borrow_mut().push_back(job),
            // Timers: nothing in the sandbox sets one, and nothing could wait for it.
            _ => {}
        }
    }

    fn run_jobs(self: std::rc::Rc<Self>, context: &mut Context) -> JsResult<()> {
        loop {
            let native = self.native.borrow_mut().pop_front();
            let result = if let Some(job) = native {
                let context = RefCell::new(&mut *context);
                futures::executor::block_on(job.call(&context))
            } else {
                let promise = self.promise.borrow_mut().pop_front();
                match promise {
                    Some(job) => job.call(context),
                    None => match self.generic.borrow_mut().pop_front() {
                        Some(job) => job.call(context),
                        None => break,
                    },
                }
            };
            if let Err(error) = result {
                self.promise.borrow_mut().clear();
                self.generic.borrow_mut().clear();
                self.native.borrow_mut().clear();
                return Err(error);
            }
        }
        context.clear_kept_objects();
        Ok(())
    }
}

/// Replaces the engine's `Math.random` with one drawn from [`RunInputs`].
fn seeded_math_random(context: &mut Context) -> JsResult<()> {
    let math = context
        .global_object()
        .get(js_string!("Math"), context)?
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("Math is missing"))?;
    let random = FunctionObjectBuilder::new(
        context.realm(),
        NativeFunction::from_fn_ptr(|_, _, _| {
            Ok(JsValue::from(
                RUN_INPUTS.with(|inputs| inputs.borrow_mut().next_random()),
            ))
        }),
    )
    .name(js_string!("random"))
    .length(0)
    .build();
    math.define_property_or_throw(
        js_string!("random"),
        PropertyDescriptor::builder()
            .value(random)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        context,
    )?;
    Ok(())
}

/// Names that scripts written for Node.js or a browser reach for, and that do not exist here.
const HOST_GLOBALS: &[&str] = &[
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
fn explain_missing_modules(error: &mut ScriptError, tools: &[ToolBinding]) {
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

/// `const time = time.now()`: a script that declares a variable named like a plugin's
/// namespace hides the namespace in the whole block, and Boa says only "time is not defined".
/// The error then says why and how to name the variable. True when it did.
fn explain_shadowed_namespace(error: &mut ScriptError, code: &str, tools: &[ToolBinding]) -> bool {
    let Some(name) = error
        .message
        .strip_prefix("ReferenceError: ")
        .and_then(|rest| rest.strip_suffix(" is not defined"))
    else {
        return false;
    };
    let members = crate::names::namespace_members(tools, name);
    if members.is_empty() || !crate::names::declares(code, name) {
        return false;
    }
    // The example calls what the failing line called, when it called one of the group.
    let called = error
        .source_line
        .as_deref()
        .map(member_calls)
        .unwrap_or_default()
        .into_iter()
        .map(|(namespace, method)| format!("{namespace}.{method}"))
        .find(|call| members.contains(&call.as_str()));
    let example = called.as_deref().unwrap_or(members[0]);
    error.hint = Some(format!(
        "`{name}` is the namespace of the {name} tools ({}), and this script declares a \
         variable also named `{name}`, which hides them everywhere in its block. Give the \
         variable another name, e.g. `const result = {example}({{ … }});`.",
        members.join(", ")
    ));
    true
}

/// Member chains tried when explaining a TypeError, and the characters of a string quoted.
const MAX_CHAINS_EXPLAINED: usize = 8;
const QUOTED_STRING_CHARS: usize = 80;
const FIELDS_NAMED: usize = 12;

/// `config.database.port` failing with "cannot convert 'null' or 'undefined' to object": Boa
/// does not say which link was missing or why. The failing line's member chains are looked
/// up in the script's global scope (top-level `const`s of a plain script live there) to find
/// the first link that is `undefined` or `null`, and the error says what its parent is: a
/// string (and how it starts), an array, or an object with other fields. Only identifiers and
/// property reads are evaluated, after the script ended; a wrapped (async) script's locals
/// are out of reach and explained by nothing.
fn explain_missing_field(error: &mut ScriptError, context: &mut Context) {
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
fn member_chains(line: &str) -> Vec<String> {
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

/// The first `chars` characters of `text` as a JSON string, then `…` when there is more.
fn quoted_start(text: &str, chars: usize) -> String {
    let start: String = text.chars().take(chars).collect();
    let more = if start.len() < text.len() { "…" } else { "" };
    format!("{}{more}", Value::String(start))
}

/// The 1-based character column where `name` stands as a whole word in `text`.
fn word_column(text: &str, name: &str) -> Option<u32> {
    text.match_indices(name)
        .find(|(at, _)| {
            let before = text[..*at].chars().next_back();
            let after = text[at + name.len()..].chars().next();
            !before.is_some_and(crate::names::is_identifier_char)
                && !after.is_some_and(crate::names::is_identifier_char)
        })
        .map(|(at, _)| text[..at].chars().count() as u32 + 1)
}

/// What `name` holds, said so that reading `field` of it was a mistake the model can fix.
fn describe_value(name: &str, field: &str, value: &JsValue, context: &mut Context) -> String {
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
fn explain_unknown_member(error: &mut ScriptError, tools: &[ToolBinding]) {
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
const MEMBERS_NAMED: usize = 12;

/// The hint for `namespace.method(` that is not a function: the function spelled otherwise
/// (`customersList` for `customers_list`), else the namespace's functions, the likeliest first
/// when there are many.
fn unknown_member_hint(namespace: &str, method: &str, methods: &[&str]) -> String {
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
fn member_calls(line: &str) -> Vec<(String, String)> {
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

fn with_engine<T>(f: impl FnOnce(&mut EngineState) -> T) -> JsResult<T> {
    ENGINE.with(|engine| {
        let mut engine = engine.borrow_mut();
        match engine.as_mut() {
            Some(state) => Ok(f(state)),
            None => Err(JsNativeError::error()
                .with_message("the sandbox is not running a script")
                .into()),
        }
    })
}

fn bind_and_run(
    context: &mut Context,
    request: &ExecuteRequest,
    code: &str,
    tools_bound: bool,
) -> Result<Value, ScriptError> {
    let nesting = source_nesting(code);
    if nesting > MAX_SOURCE_NESTING {
        return Err(ScriptError {
            kind: ScriptErrorKind::Syntax,
            message: format!(
                "SyntaxError: code is nested {nesting} levels deep; the limit is {MAX_SOURCE_NESTING}"
            ),
            line: None,
            column: None,
            source_line: None,
            hint: None,
        });
    }
    bind_input(context, request.input.as_ref())
        .map_err(|error| runtime_error(&error, context, code, 0, false))?;
    if !tools_bound {
        bind_tools(context, &request.tools)
            .map_err(|error| runtime_error(&error, context, code, 0, false))?;
    }
    let fixed;
    let (script, line_offset, code) = match parse_script(context, code) {
        Ok((script, line_offset)) => (script, line_offset, code),
        Err(error) => {
            fixed = strip_pasted_parameters(code, &request.tools).ok_or_else(|| error.clone())?;
            let (script, line_offset) = parse_script(context, &fixed).map_err(|_| error)?;
            (script, line_offset, fixed.as_str())
        }
    };
    let fail = |error: &JsError, context: &mut Context| {
        runtime_error(error, context, code, line_offset, false)
    };
    let value = script
        .evaluate(context)
        .map_err(|error| fail(&error, context))?;
    context.run_jobs().map_err(|error| fail(&error, context))?;
    let promise = value
        .as_object()
        .and_then(|object| JsPromise::from_object(object.clone()).ok());
    let Some(promise) = promise else {
        return to_json(&value, context).map_err(|error| fail(&error, context));
    };
    match promise.state() {
        PromiseState::Fulfilled(value) => {
            to_json(&value, context).map_err(|error| fail(&error, context))
        }
        PromiseState::Rejected(reason) => Err(fail(&JsError::from_opaque(reason), context)),
        PromiseState::Pending => Err(ScriptError {
            kind: ScriptErrorKind::Runtime,
            message: "the script awaited something that never settled".to_owned(),
            line: None,
            column: None,
            source_line: None,
            hint: None,
        }),
    }
}

/// Parses the model's code. A plain script keeps JavaScript's own completion value (the last
/// expression, even inside `if` or `try`). Code with top-level `await` or `return` is not a
/// script; it runs as the body of an async function instead, with its trailing expression
/// turned into a `return`. The second value is how many lines the wrapper adds before the code.
fn parse_script(context: &mut Context, code: &str) -> Result<(Script, u32), ScriptError> {
    let plain = Source::from_bytes(code.as_bytes()).with_path(Path::new("script"));
    match Script::parse(plain, None, context) {
        Ok(script) => Ok((script, 0)),
        Err(script_error) => {
            let body = with_last_expression_returned(code);
            let wrapped = format!("(async () => {{\n{body}\n}})()");
            let source = Source::from_bytes(wrapped.as_bytes()).with_path(Path::new("script"));
            match Script::parse(source, None, context) {
                Ok(script) => Ok((script, 1)),
                Err(wrapped_error) => {
                    // The parser that got further found the real mistake: a plain parse stops
                    // at the first top-level `await`, which the wrapper allows, while the
                    // wrapper's parse goes on to, say, an `await` in a callback lines later.
                    let plain = runtime_error(&script_error, context, code, 0, true);
                    let wrapped = runtime_error(&wrapped_error, context, code, 1, true);
                    let reach = |error: &ScriptError| (error.line, error.column);
                    let mut error = if reach(&wrapped) > reach(&plain) {
                        wrapped
                    } else {
                        plain
                    };
                    error.kind = ScriptErrorKind::Syntax;
                    Err(error)
                }
            }
        }
    }
}

/// `fs.write(input: {...})`: the declaration's parameter name pasted into a call. The call
/// without it, when the code names a tool that way; `None` otherwise.
fn strip_pasted_parameters(code: &str, tools: &[ToolBinding]) -> Option<String> {
    let mut names: Vec<String> = tools
        .iter()
        .flat_map(|tool| {
            tool.member
                .iter()
                .chain(&tool.function)
                .chain(&tool.aliases)
                .cloned()
        })
        .collect();
    // Longer names first, so `fs.list` is not cut short by a `list` alias.
    names.sort_by_key(|name| std::cmp::Reverse(name.len()));
    let mut fixed = code.to_owned();
    for name in names {
        let mut from = 0;
        while let Some(found) = fixed[from..].find(&format!("{name}(")) {
            let call = from + found;
            let open = call + name.len() + 1;
            let preceded_by_word = fixed[..call]
                .chars()
                .next_back()
                .is_some_and(crate::names::is_identifier_char);
            let rest = &fixed[open..];
            let spaces = rest.len() - rest.trim_start().len();
            let after = &rest[spaces..];
            let parameter = ["input?:", "input:"]
                .into_iter()
                .find(|parameter| after.starts_with(parameter));
            match parameter {
                Some(parameter) if !preceded_by_word => {
                    fixed.replace_range(open..open + spaces + parameter.len(), "");
                }
                _ => {}
            }
            from = open;
        }
    }
    (fixed != code).then_some(fixed)
}

fn bind_input(context: &mut Context, input: Option<&Value>) -> JsResult<()> {
    let input = match input {
        Some(value) => from_json(value, context)?,
        None => JsValue::undefined(),
    };
    context.register_global_property(js_string!("input"), input, Attribute::all())
}

fn bind_tools(context: &mut Context, bindings: &[ToolBinding]) -> JsResult<()> {
    let tools = boa_engine::object::ObjectInitializer::new(context).build();
    let mut namespaces: std::collections::BTreeMap<
        String,
        Vec<(String, boa_engine::object::builtins::JsFunction)>,
    > = std::collections::BTreeMap::new();
    for binding in bindings {
        let function = FunctionObjectBuilder::new(
            context.realm(),
            NativeFunction::from_copy_closure_with_captures(
                |_this, arguments, tool_id: &std::rc::Rc<str>, context| {
                    let tool = tool_id.to_string();
                    let input = match arguments.first() {
                        Some(value) if !value.is_undefined() => to_json(value, context)?,
                        _ => Value::Object(Map::new()),
                    };
                    count_tool_calls(1)?;
                    let reply = host_request(HostRequest::CallTool { tool, input })?;
                    let list_field = list_field_of(&reply);
                    let value = reply_to_js(reply, context)?;
                    match (list_field, value.as_object()) {
                        (Some(field), Some(object)) => {
                            let prototype = list_prototype(&field, context)?;
                            object.set_prototype(Some(prototype));
                            Ok(value)
                        }
                        _ => Ok(value),
                    }
                },
                std::rc::Rc::<str>::from(binding.id.as_str()),
            ),
        )
        .name(JsString::from(
            binding.function.as_deref().unwrap_or("tool"),
        ))
        .length(1)
        .build();
        tools.set(
            JsString::from(binding.id.as_str()),
            function.clone(),
            false,
            context,
        )?;
        for name in binding.function.iter().chain(&binding.aliases) {
            context.register_global_property(
                JsString::from(name.as_str()),
                function.clone(),
                Attribute::all(),
            )?;
        }
        if let Some((namespace, method)) = binding.namespace_and_method() {
            namespaces
                .entry(namespace.to_owned())
                .or_default()
                .push((method.to_owned(), function));
        }
    }
    context.register_global_property(js_string!("tools"), tools, Attribute::all())?;
    // One object per plugin: `fs.list({...})` is `fsList({...})`.
    for (namespace, methods) in namespaces {
        let object = boa_engine::object::ObjectInitializer::new(context).build();
        for (method, function) in methods {
            object.set(JsString::from(method.as_str()), function, false, context)?;
        }
        context.register_global_property(
            JsString::from(namespace.as_str()),
            object,
            Attribute::all(),
        )?;
    }
    Ok(())
}

/// Turns a trailing expression statement into `return (…);`, so a script's last expression is
/// its value even though it runs as the body of an async function. The expression's start is
/// found by trying the nearest statement boundaries (spans of calls do not cover the callee).
fn with_last_expression_returned(code: &str) -> String {
    const MAX_BOUNDARIES_TRIED: usize = 64;
    let trimmed_end = code.trim_end().trim_end_matches(';').len();
    let tail_is_expression = |start: usize| -> bool {
        let tail = &code[start..trimmed_end];
        if tail.trim().is_empty() {
            return false;
        }
        let mut parser = Parser::new(Source::from_bytes(tail.as_bytes()));
        match parser.parse_function_body(&mut Interner::default(), false, true) {
            Ok(body) => matches!(
                body.statements(),
                [StatementListItem::Statement(statement)]
                    if matches!(statement.as_ref(), Statement::Expression(_))
            ),
            Err(_) => false,
        }
    };
    let mut candidates: Vec<usize> = std::iter::once(0)
        .chain(
            code[..trimmed_end]
                .char_indices()
                .filter(|(_, character)| matches!(character, ';' | '\n' | '}'))
                .map(|(index, character)| index + character.len_utf8()),
        )
        .collect();
    candidates.reverse();
    let start = candidates
        .into_iter()
        .take(MAX_BOUNDARIES_TRIED)
        .filter(|start| tail_is_expression(*start))
        .min();
    let Some(start) = start else {
        return code.to_owned();
    };
    let tail = &code[start..trimmed_end];
    let expression_start = start + (tail.len() - tail.trim_start().len());
    let rewritten = format!(
        "{}return ({});",
        &code[..expression_start],
        code[expression_start..trimmed_end].trim_end()
    );
    let mut check = Parser::new(Source::from_bytes(rewritten.as_bytes()));
    match check.parse_function_body(&mut Interner::default(), false, true) {
        Ok(_) => rewritten,
        Err(_) => code.to_owned(),
    }
}

fn normalize_newlines(code: &str) -> String {
    code.replace("\r\n", "\n").replace('\r', "\n")
}

fn host_request(request: HostRequest) -> JsResult<HostReply> {
    // The link is taken out for the call so no borrow is held while the host works.
    let mut link = ENGINE.with(|engine| {
        engine
            .borrow_mut()
            .as_mut()
            .map(|state| std::mem::replace(&mut state.link, Box::new(DetachedLink)))
    });
    let Some(active) = link.as_mut() else {
        return Err(JsNativeError::error()
            .with_message("the sandbox is not running a script")
            .into());
    };
    let clock = RUN_INPUTS.with(|inputs| std::mem::take(&mut inputs.borrow_mut().live));
    let reply = active.request(request, clock);
    ENGINE.with(|engine| {
        if let (Some(state), Some(link)) = (engine.borrow_mut().as_mut(), link) {
            state.link = link;
        }
    });
    Ok(reply)
}

/// Stands in for the real link while a request is in flight.
struct DetachedLink;

impl HostLink for DetachedLink {
    fn request(&mut self, _request: HostRequest, _clock: Vec<i64>) -> HostReply {
        HostReply::Error {
            message: "the sandbox link is busy".to_owned(),
        }
    }
    fn notify(&mut self, _message: ToHost) {}
}

fn reply_to_js(reply: HostReply, context: &mut Context) -> JsResult<JsValue> {
    match reply {
        HostReply::Value { value } => from_json(&value, context),
        HostReply::Error { message } => Err(JsNativeError::error().with_message(message).into()),
    }
}

fn count_tool_calls(calls: u32) -> JsResult<()> {
    let over = with_engine(|state| {
        state.tool_calls = state.tool_calls.saturating_add(calls);
        (state.tool_calls > state.limits.max_tool_calls).then_some(state.limits.max_tool_calls)
    })?;
    match over {
        Some(limit) => Err(JsNativeError::range()
            .with_message(format!(
                "tool call limit reached: at most {limit} calls per execution"
            ))
            .into()),
        None => Ok(()),
    }
}

fn text_of(value: Option<&JsValue>, context: &mut Context) -> JsResult<String> {
    match value {
        None => Ok(String::new()),
        Some(value) if value.is_string() => Ok(value
            .as_string()
            .map(|text| text.to_std_string_escaped())
            .unwrap_or_default()),
        Some(value) if value.is_undefined() => Ok("undefined".to_owned()),
        Some(value) => Ok(to_json(value, context)?.to_string()),
    }
}

/// Spends output budget on `text`; returns what may still be sent.
fn spend_output(text: String) -> JsResult<Option<String>> {
    with_engine(|state| {
        if state.output_cut {
            return None;
        }
        let length = text.chars().count();
        let left = state
            .limits
            .max_output_chars
            .saturating_sub(state.output_used);
        if length <= left {
            state.output_used += length;
            return Some(text);
        }
        state.output_cut = true;
        state.output_used = state.limits.max_output_chars;
        let kept: String = text.chars().take(left).collect();
        Some(format!(
            "{kept}\n[output truncated: the limit is {} characters per execution]",
            state.limits.max_output_chars
        ))
    })
}

fn notify(message: ToHost) -> JsResult<()> {
    with_engine(|state| state.link.notify(message))
}

fn output(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = text_of(arguments.first(), context)?;
    if let Some(text) = spend_output(text)? {
        notify(ToHost::Output { text })?;
    }
    Ok(JsValue::undefined())
}

fn log(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let mut parts = Vec::with_capacity(arguments.len());
    for argument in arguments {
        parts.push(text_of(Some(argument), context)?);
    }
    if let Some(text) = spend_output(parts.join(" "))? {
        notify(ToHost::Log { text })?;
    }
    Ok(JsValue::undefined())
}

/// `done()` ends the turn; `done(value)` ends it with `value` as the answer, as
/// `complete(value)` does (models write both).
fn done(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let given = arguments.first();
    let nothing = given.is_some_and(JsValue::is_null_or_undefined);
    let completion = match given {
        // `done(latest)` with a `latest` that stayed null: the answer the program meant has
        // no value. Given as the word, it is held back as any answer saying `undefined` is.
        Some(value) if nothing => Some(serde_json::json!({
            "response": if value.is_null() { "null" } else { "undefined" }
        })),
        Some(value) => Some(completion_of(to_json(value, context)?, "done")?),
        // `done()` alone ends the turn after what was shown.
        None => None,
    };
    with_engine(|state| {
        state.done = true;
        // Not after the program showed its answer with output(), as in `done(output(text))`.
        if completion.is_some() && !(nothing && state.output_used > 0) {
            state.complete = completion;
        }
    })?;
    Ok(JsValue::undefined())
}

fn complete(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let value = match arguments.first() {
        Some(value) if !value.is_undefined() => to_json(value, context)?,
        _ => Value::Object(Map::new()),
    };
    let value = completion_of(value, "complete")?;
    with_engine(|state| {
        state.done = true;
        state.complete = Some(value);
    })?;
    Ok(JsValue::undefined())
}

/// The `{response, data?, followUp?}` object for what a script passed to `done` or
/// `complete`: a string or number is the response itself.
fn completion_of(value: Value, function: &str) -> JsResult<Value> {
    match value {
        Value::String(response) => Ok(serde_json::json!({ "response": response })),
        Value::Number(_) | Value::Bool(_) => {
            Ok(serde_json::json!({ "response": value.to_string() }))
        }
        Value::Object(_) => Ok(value),
        Value::Null => Ok(Value::Object(Map::new())),
        Value::Array(_) => Err(JsNativeError::typ()
            .with_message(format!(
                "{function}() takes the answer as a string, or {{response, data?, followUp?}}"
            ))
            .into()),
    }
}

fn store(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let key = key_argument(arguments.first(), "store")?;
    let value = match arguments.get(1) {
        Some(value) if !value.is_undefined() => to_json(value, context)?,
        _ => Value::Null,
    };
    with_engine(|state| state.store.insert(key, value))?;
    Ok(JsValue::undefined())
}

fn recall(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let key = key_argument(arguments.first(), "recall")?;
    match with_engine(|state| state.store.get(&key).cloned())? {
        Some(value) => from_json(&value, context),
        None => Ok(JsValue::undefined()),
    }
}

fn key_argument(value: Option<&JsValue>, function: &str) -> JsResult<String> {
    value
        .and_then(JsValue::as_string)
        .map(|key| key.to_std_string_escaped())
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message(format!("{function}() needs a string key"))
                .into()
        })
}

fn discover_tools(
    _this: &JsValue,
    _arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let tools = with_engine(|state| state.tools.clone())?;
    let list: Vec<Value> = tools
        .iter()
        .map(|tool| {
            let mut entry = serde_json::json!({
                "name": tool.function,
                "id": tool.id,
                "call": tool.call_name(),
                "description": tool.description,
            });
            if !tool.aliases.is_empty() {
                entry["aliases"] = serde_json::json!(tool.aliases);
            }
            entry
        })
        .collect();
    from_json(&Value::Array(list), context)
}

fn tool_schema(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let tool = key_argument(arguments.first(), "toolSchema")?;
    reply_to_js(host_request(HostRequest::ToolSchema { tool })?, context)
}

/// `describeTool(id)`: the tool's declaration, as the system prompt shows it.
fn describe_tool(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let tool = key_argument(arguments.first(), "describeTool")?;
    reply_to_js(host_request(HostRequest::ToolSchema { tool })?, context)
}

/// Most tools `searchTools` answers with.
const SEARCH_RESULTS: usize = 10;

/// `searchTools(query)`: the tools whose id, names or description share the most words with
/// the query, best first, as `{id, call, description}`.
fn search_tools(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let query = text_of(arguments.first(), context)?;
    let tools = with_engine(|state| state.tools.clone())?;
    let results: Vec<Value> = crate::names::rank_tools(&tools, &query)
        .into_iter()
        .take(SEARCH_RESULTS)
        .map(|tool| {
            serde_json::json!({
                "id": tool.id,
                "call": tool.call_name(),
                "description": tool.description.lines().next().unwrap_or_default(),
            })
        })
        .collect();
    from_json(&Value::Array(results), context)
}

fn parallel(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let calls = match arguments.first() {
        Some(value) => to_json(value, context)?,
        None => Value::Array(Vec::new()),
    };
    let calls: Vec<crate::protocol::ParallelCall> =
        serde_json::from_value(calls).map_err(|_| {
            JsNativeError::typ().with_message("parallel() takes an array of {tool, input}")
        })?;
    count_tool_calls(u32::try_from(calls.len()).unwrap_or(u32::MAX))?;
    reply_to_js(host_request(HostRequest::Parallel { calls })?, context)
}

fn llm(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let prompt = text_of(arguments.first(), context)?;
    reply_to_js(
        host_request(HostRequest::Llm {
            prompt,
            json: false,
        })?,
        context,
    )
}

fn llm_json(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let prompt = text_of(arguments.first(), context)?;
    reply_to_js(
        host_request(HostRequest::Llm { prompt, json: true })?,
        context,
    )
}

/// The field of a tool result that is its one list: `todos` of `{todos: [...]}`, `entries`
/// of `{entries: [...], truncated: false}`. Models iterate such results as the list itself.
fn list_field_of(reply: &HostReply) -> Option<String> {
    let HostReply::Value {
        value: Value::Object(map),
    } = reply
    else {
        return None;
    };
    let mut lists = map.iter().filter(|(_, value)| value.is_array());
    match (lists.next(), lists.next()) {
        (Some((field, _)), None) => Some(field.clone()),
        _ => None,
    }
}

/// Array methods a result with one list field answers for that list.
const LIST_METHODS: &str = "at, concat, entries, every, filter, find, findIndex, findLast, \
    findLastIndex, flat, flatMap, forEach, includes, indexOf, join, keys, lastIndexOf, map, \
    reduce, reduceRight, slice, some, toReversed, toSorted, values";

/// The prototype that makes a result with the list field `field` iterable, with `length` and
/// the array methods of that list. The result's own fields come first, so `entries` of
/// `{entries: [...]}` is still the field. Built once per script and field.
fn list_prototype(field: &str, context: &mut Context) -> JsResult<JsObject> {
    if let Some(prototype) = with_engine(|state| state.list_prototypes.get(field).cloned())? {
        return Ok(prototype);
    }
    let key = serde_json::to_string(field).unwrap_or_default();
    let source = format!(
        "(() => {{\n\
           const key = {key};\n\
           const prototype = {{}};\n\
           for (const name of \"{LIST_METHODS}\".split(\", \")) {{\n\
             const method = Array.prototype[name];\n\
             if (typeof method !== \"function\") continue;\n\
             Object.defineProperty(prototype, name, {{ value: function (...args) {{ return method.apply(this[key], args); }}, writable: true, configurable: true }});\n\
           }}\n\
           Object.defineProperty(prototype, \"length\", {{ get() {{ return this[key].length; }}, configurable: true }});\n\
           Object.defineProperty(prototype, Symbol.iterator, {{ value: function () {{ return this[key][Symbol.iterator](); }}, writable: true, configurable: true }});\n\
           return prototype;\n\
         }})()"
    );
    let prototype = context
        .eval(Source::from_bytes(source.as_bytes()))?
        .as_object()
        .ok_or_else(|| JsNativeError::error().with_message("the list prototype is no object"))?;
    with_engine(|state| {
        state
            .list_prototypes
            .insert(field.to_owned(), prototype.clone())
    })?;
    Ok(prototype)
}

/// `require("fs")` is the `fs` namespace: models write Node's `const fs = require("fs")`
/// before calling `fs.list(...)`. `node:`, `./` and `.js` around the name are ignored. Any
/// other module does not exist, and the error says what to use instead.
fn require(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let requested = text_of(arguments.first(), context)?;
    let name = requested.trim();
    let name = name.strip_prefix("node:").unwrap_or(name);
    let name = name.strip_prefix("./").unwrap_or(name);
    let name = name.strip_suffix(".js").unwrap_or(name);
    let is_namespace = with_engine(|state| {
        state.tools.iter().any(|tool| {
            tool.namespace_and_method()
                .is_some_and(|(ns, _)| ns == name)
        })
    })?;
    if is_namespace {
        return context.global_object().get(JsString::from(name), context);
    }
    Err(JsNativeError::reference()
        .with_message(format!("{NO_MODULE}{requested:?}"))
        .into())
}

/// How the error of `require` for a module that does not exist starts.
const NO_MODULE: &str = "there is no module ";

/// JSON → JavaScript value. Objects start from the realm's shared root shape, so building the
/// same kind of object again follows cached shape transitions; Boa's own `from_json` gives
/// every object a unique shape, which costs twice as much per tool result.
fn from_json(value: &Value, context: &mut Context) -> JsResult<JsValue> {
    from_json_at(value, context, 0)
}

fn from_json_at(value: &Value, context: &mut Context, depth: usize) -> JsResult<JsValue> {
    if depth > MAX_VALUE_DEPTH {
        return Err(JsNativeError::range()
            .with_message(format!(
                "value is nested deeper than {MAX_VALUE_DEPTH} levels"
            ))
            .into());
    }
    Ok(match value {
        Value::Null => JsValue::null(),
        Value::Bool(boolean) => JsValue::from(*boolean),
        Value::Number(number) => match number.as_i64().map(i32::try_from) {
            Some(Ok(small)) => JsValue::from(small),
            _ => JsValue::from(number.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(text) => JsValue::from(JsString::from(text.as_str())),
        Value::Array(items) => {
            let items = items
                .iter()
                .map(|item| from_json_at(item, context, depth + 1))
                .collect::<JsResult<Vec<_>>>()?;
            JsArray::from_iter(items, context).into()
        }
        Value::Object(map) => {
            let object = ObjectInitializer::with_native_data(OrdinaryObject, context).build();
            for (key, item) in map {
                let item = from_json_at(item, context, depth + 1)?;
                object.insert_property(
                    JsString::from(key.as_str()),
                    PropertyDescriptor::builder()
                        .value(item)
                        .writable(true)
                        .enumerable(true)
                        .configurable(true),
                );
            }
            object.into()
        }
    })
}

/// JavaScript value → JSON, depth-limited so hostile values cannot overflow the native stack.
fn to_json(value: &JsValue, context: &mut Context) -> JsResult<Value> {
    to_json_at(value, context, 0).map(|value| value.unwrap_or(Value::Null))
}

fn to_json_at(value: &JsValue, context: &mut Context, depth: usize) -> JsResult<Option<Value>> {
    if depth > MAX_VALUE_DEPTH {
        return Err(JsNativeError::range()
            .with_message(format!(
                "value is nested deeper than {MAX_VALUE_DEPTH} levels (or refers to itself)"
            ))
            .into());
    }
    if value.is_null() {
        return Ok(Some(Value::Null));
    }
    if value.is_undefined() || value.is_symbol() {
        return Ok(None);
    }
    if let Some(boolean) = value.as_boolean() {
        return Ok(Some(Value::Bool(boolean)));
    }
    if let Some(text) = value.as_string() {
        return Ok(Some(Value::String(text.to_std_string_escaped())));
    }
    if let Some(number) = value.as_number() {
        let json = if number.fract() == 0.0 && number.abs() < 9.0e15 {
            Value::from(number as i64)
        } else {
            serde_json::Number::from_f64(number).map_or(Value::Null, Value::Number)
        };
        return Ok(Some(json));
    }
    if value.is_bigint() {
        return Ok(Some(Value::String(
            value.to_string(context)?.to_std_string_escaped(),
        )));
    }
    let Some(object) = value.as_object() else {
        return Ok(None);
    };
    if object.is_callable() {
        return Ok(None);
    }
    if object.is_array() {
        let array = JsArray::from_object(object.clone())?;
        let length = array.length(context)?;
        let mut items = Vec::with_capacity(usize::try_from(length.min(1 << 20)).unwrap_or(0));
        for index in 0..length {
            let item = array.get(index, context)?;
            items.push(to_json_at(&item, context, depth + 1)?.unwrap_or(Value::Null));
        }
        return Ok(Some(Value::Array(items)));
    }
    let to_json_method = object.get(js_string!("toJSON"), context)?;
    if to_json_method.as_callable().is_some() {
        let converted = to_json_method
            .as_callable()
            .map(|method| method.call(value, &[], context))
            .transpose()?
            .unwrap_or_default();
        return to_json_at(&converted, context, depth + 1);
    }
    let mut map = Map::new();
    // Own string keys in property order. Enumerability is not checked: the objects scripts
    // build are plain objects, and checking costs a JS array per object on every tool call.
    for key in object.own_property_keys(context)? {
        let name = match &key {
            PropertyKey::String(name) => name.to_std_string_escaped(),
            PropertyKey::Index(index) => index.get().to_string(),
            PropertyKey::Symbol(_) => continue,
        };
        let item = object.get(key, context)?;
        if let Some(item) = to_json_at(&item, context, depth + 1)? {
            map.insert(name, item);
        }
    }
    Ok(Some(Value::Object(map)))
}

/// A Boa error as the model should read it, with line and column in the model's own code.
/// `parsing`: the error is the parser's, whose message ends in the position; otherwise only
/// the backtrace says where, as a message's `line 6` may be a position in data (`JSON.parse`).
fn runtime_error(
    error: &JsError,
    context: &mut Context,
    code: &str,
    line_offset: u32,
    parsing: bool,
) -> ScriptError {
    let rendered = error.to_string();
    let message = match error.try_native(context) {
        Ok(native) => {
            let kind = native.kind.to_string();
            let message = native.message();
            if message.is_empty() {
                kind
            } else {
                format!("{kind}: {message}")
            }
        }
        Err(_) => {
            let value = error.to_opaque(context);
            match to_json(&value, context) {
                Ok(Value::String(text)) => format!("Uncaught {text}"),
                Ok(other) => format!("Uncaught {other}"),
                Err(_) => rendered.lines().next().unwrap_or_default().to_owned(),
            }
        }
    };
    let position = find_position(&rendered, parsing);
    // A wrapper puts `line_offset` lines before the model's code.
    let (mut line, mut column) = match position {
        Some((line, column)) if line > line_offset => (Some(line - line_offset), Some(column)),
        _ => (None, None),
    };
    // A SyntaxError while running comes from parsing data (`JSON.parse`), not from the
    // program: say so, or the model rewrites a line of its code that is fine. Boa's backtrace
    // can name the next call in a loop instead, so the one line that parses JSON is the place.
    let mut hint = None;
    if !parsing && message.starts_with("SyntaxError") && code.contains("JSON.parse") {
        let named = line
            .and_then(|line| code.lines().nth(line as usize - 1))
            .is_some_and(|text| text.contains("JSON.parse"));
        let parses: Vec<(usize, usize)> = code
            .lines()
            .enumerate()
            .filter_map(|(index, text)| text.find("JSON.parse").map(|at| (index, at)))
            .collect();
        if let [(index, at)] = parses.as_slice()
            && !named
        {
            line = Some(*index as u32 + 1);
            column = Some(*at as u32 + 1);
        }
        if named || parses.len() == 1 || line.is_none() {
            hint = Some(
                "JSON.parse was given something that is not JSON text (the error says what). \
                 Parse text the way it is written; if it reports a failure, deal with that \
                 first."
                    .to_owned(),
            );
        }
    }
    // `ReferenceError: lines is not defined`: Boa's backtrace can name an earlier line of a
    // loop's head. The name is known, so a line that does not use it is not the place; the
    // first line that does is.
    if !parsing
        && let Some(name) = message
            .strip_prefix("ReferenceError: ")
            .and_then(|rest| rest.strip_suffix(" is not defined"))
    {
        // Only a named line is corrected: with none, the message stands as Boa gave it.
        let named = line.and_then(|line| code.lines().nth(line as usize - 1));
        if named.is_some_and(|text| word_column(text, name).is_none())
            && let Some((index, at)) = code
                .lines()
                .enumerate()
                .find_map(|(index, text)| Some((index, word_column(text, name)?)))
        {
            line = Some(index as u32 + 1);
            column = Some(at);
        }
    }
    let source_line = line.and_then(|line| code.lines().nth(line as usize - 1).map(str::to_owned));
    let mut message = message.lines().next().unwrap_or_default().to_owned();
    // Parse errors end in Boa's own ` at line L, col C`; the position is reported separately.
    // Other messages keep theirs (a host error can quote serde's `at line 1 column 1`).
    if let Some(index) = message.rfind(" at line ")
        && is_boa_position(&message[index + " at line ".len()..])
    {
        message.truncate(index);
    }
    ScriptError {
        kind: ScriptErrorKind::Runtime,
        message,
        line,
        column,
        source_line,
        hint,
    }
}

/// `L, col C` and nothing after it.
fn is_boa_position(rest: &str) -> bool {
    rest.split_once(", col ").is_some_and(|(line, column)| {
        !line.is_empty()
            && !column.is_empty()
            && line.bytes().all(|byte| byte.is_ascii_digit())
            && column.bytes().all(|byte| byte.is_ascii_digit())
    })
}

/// The first `line:column` Boa reports, from `script:L:C` in a backtrace or, when `parsing`,
/// `line L, col C` in a parse error.
fn find_position(rendered: &str, parsing: bool) -> Option<(u32, u32)> {
    if let Some(index) = rendered.find("script:") {
        let rest = &rendered[index + "script:".len()..];
        let mut numbers = rest
            .split(|c: char| !c.is_ascii_digit())
            .filter(|part| !part.is_empty())
            .take(2)
            .map(str::parse::<u32>);
        if let (Some(Ok(line)), Some(Ok(column))) = (numbers.next(), numbers.next()) {
            return Some((line, column));
        }
    }
    if !parsing {
        return None;
    }
    let index = rendered.find("line ")?;
    let mut numbers = rendered[index..]
        .split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .take(2)
        .map(str::parse::<u32>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(line)), Some(Ok(column))) => Some((line, column)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Only Boa's own position is cut from a message: a host error that quotes serde's
    /// `at line 1 column 1` and the text after it (`llmJson()`'s) keeps them.
    #[test]
    fn only_boas_position_ends_a_message() {
        assert!(is_boa_position("3, col 5"));
        assert!(!is_boa_position("1 column 1): Sure! Here is the JSON"));
        assert!(!is_boa_position("3, col 5 and more"));
        assert!(!is_boa_position(", col 5"));
    }

    #[test]
    fn the_last_expression_becomes_the_return_value() {
        assert_eq!(
            with_last_expression_returned("const a = await f();\na + 1"),
            "const a = await f();\nreturn (a + 1);"
        );
        assert_eq!(with_last_expression_returned("return 5"), "return 5");
        assert_eq!(
            with_last_expression_returned("const x = await 1;"),
            "const x = await 1;"
        );
        assert_eq!(
            with_last_expression_returned("const t = await f()\nfoo.bar(t.iso);"),
            "const t = await f()\nreturn (foo.bar(t.iso));"
        );
        assert_eq!(
            with_last_expression_returned("const t = await f();\nfoo(\n  t,\n  2\n)"),
            "const t = await f();\nreturn (foo(\n  t,\n  2\n));"
        );
    }

    #[test]
    fn nesting_is_measured() {
        assert_eq!(source_nesting("f([1, {a: (2)}])"), 4);
        assert_eq!(source_nesting(&"[".repeat(5000)), 5000);
    }

    #[test]
    fn json_round_trips_through_javascript() {
        let mut context = Context::default();
        let value = serde_json::json!({
            "b": 1, "a": [1.5, -2, null, true, "é😀"], "0": "index key",
            "__proto__": {"x": 1}, "big": 4_000_000_000_i64, "nested": {"c": {}}
        });
        let js = from_json(&value, &mut context).unwrap();
        assert_eq!(to_json(&js, &mut context).unwrap(), value);
        // `__proto__` from JSON is a plain key, as with JSON.parse; the prototype is Object's.
        context
            .register_global_property(js_string!("v"), js, Attribute::all())
            .unwrap();
        let checks = "Object.getPrototypeOf(v) === Object.prototype && v.__proto__.x === 1 \
            && Object.keys(v).join() === '0,__proto__,a,b,big,nested' && v.a[1] === -2";
        let checked = context.eval(Source::from_bytes(checks)).unwrap();
        assert_eq!(checked.as_boolean(), Some(true));

        let mut deep = Value::Null;
        for _ in 0..=MAX_VALUE_DEPTH + 1 {
            deep = serde_json::json!([deep]);
        }
        assert!(from_json(&deep, &mut context).is_err());
    }
}

#[cfg(test)]
mod explained_errors {
    use super::*;

    fn error_of(code: &str) -> String {
        let prepared = prepare_context(
            EngineOptions {
                loop_iteration_limit: None,
            },
            Some(&[]),
        )
        .unwrap();
        let mut context = prepared.context;
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
        let prepared = prepare_context(
            EngineOptions {
                loop_iteration_limit: None,
            },
            Some(&[]),
        );
        let mut context = prepared.unwrap().context;
        let value = context
            .eval(Source::from_bytes(
                "JSON.parse('{\"a\":[1,2]}', (k, v) => k === 'a' ? v.length : v).a",
            ))
            .unwrap();
        assert_eq!(value.as_number(), Some(2.0));
    }

    #[test]
    fn an_undefined_name_is_placed_on_a_line_that_uses_it() {
        let code = "const report = read().length;\nlet total = 0;\nfor (const line of lines) {\n  total += 1;\n}\ntotal";
        let prepared = prepare_context(
            EngineOptions {
                loop_iteration_limit: None,
            },
            Some(&[]),
        );
        let mut context = prepared.unwrap().context;
        context
            .eval(Source::from_bytes("function read() { return 'x'; }"))
            .unwrap();
        let script = Script::parse(
            Source::from_bytes(code.as_bytes()).with_path(Path::new("script")),
            None,
            &mut context,
        );
        let error = script.unwrap().evaluate(&mut context).unwrap_err();
        // Boa names line 1, column 23 (after `read()`); the fix names the loop's head.
        let error = runtime_error(&error, &mut context, code, 0, false);
        assert_eq!(error.message, "ReferenceError: lines is not defined");
        assert_eq!((error.line, error.column), (Some(3), Some(20)));
        assert_eq!(
            error.source_line.as_deref(),
            Some("for (const line of lines) {")
        );
    }

    #[test]
    fn member_chains_are_plain_identifier_paths() {
        assert_eq!(
            member_chains("const port = config.database.port + fs.read({ path }).content;"),
            ["config.database.port", "fs.read"]
        );
        assert_eq!(member_chains("x().y.z; a[0].b; 1.5"), Vec::<String>::new());
    }
}
