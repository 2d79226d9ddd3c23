//! The JavaScript side: a Boa context with the sandbox functions, running one script per
//! context. It runs inside a worker (a separate process, or a thread for the in-process
//! backend) and reaches the host only through a [`HostLink`].

use std::cell::RefCell;

use boa_engine::builtins::promise::PromiseState;
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::object::builtins::JsPromise;
use boa_engine::property::Attribute;
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction,
    js_string,
};
use serde_json::{Map, Value};

use crate::protocol::{
    CodePath, ExecuteRequest, ExecutionOutcome, HostReply, HostRequest, ScriptError,
    ScriptErrorKind, ScriptLimits, Shape, ToHost, ToolBinding,
};
pub(crate) use absent::NO_VALUE;
pub(crate) use formats::parse_toml;
pub(crate) use functions::NO_MODULE;
pub(crate) use source::word_column;
pub(crate) use typed::ALWAYS_READABLE;
pub(crate) use values::{quoted_start, texts_in};

mod absent;
pub(crate) mod carried;
mod caught;
mod compared;
mod determinism;
mod dropped;
mod errors;
mod formats;
mod functions;
mod guess;
mod numbers;
mod pieces;
mod primitive;
mod silent;
mod source;
mod typed;
mod values;

use determinism::*;
use errors::*;
use functions::*;
use source::*;
use typed::typed_result;
use values::*;

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
    "TOML",
    "YAML",
    "CSV",
];

/// Options of the engine that are not per script.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EngineOptions {
    /// Stops runaway loops where nothing can kill the worker (the in-process backend).
    pub loop_iteration_limit: Option<u64>,
    /// Who explains a failed script to whoever wrote it.
    pub explain: &'static dyn Explain,
}

/// The engine's one hook for explanations. The engine says what JavaScript says; whoever
/// runs it may add what to do instead (code mode plugs in its explanations for models). It
/// runs inside the worker, with the script's own context.
pub(crate) trait Explain: Sync + std::fmt::Debug {
    /// Adjusts a fresh context's globals before any script runs, e.g. a built-in whose own
    /// error says too little.
    fn install(&self, context: &mut Context) -> JsResult<()>;
    /// Adds to the error of a script that failed. Its context is the script's, with the
    /// script over and no tool reachable.
    /// `code` is the program as it ran.
    fn explain(
        &self,
        error: &mut ScriptError,
        context: &mut Context,
        tools: &[ToolBinding],
        code: &str,
    );
}

/// A context with the sandbox functions registered, waiting for its script. It may already
/// have tool functions bound: those of the previous script, which the next iteration of the
/// same prompt usually needs again.
pub(crate) struct PreparedContext {
    context: Context,
    bound_tools: Option<Vec<ToolBinding>>,
    explain: &'static dyn Explain,
}

impl PreparedContext {
    /// The context itself, for the unit tests' helpers (`crate::testing`).
    #[cfg(test)]
    pub(crate) fn into_context(self) -> Context {
        self.context
    }
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
    silent::install(&mut context)?;
    pieces::install(&mut context)?;
    numbers::install(&mut context)?;
    numbers::watch_is_nan(&mut context)?;
    formats::install(&mut context)?;
    caught::install(&mut context)?;
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
    options.explain.install(&mut context)?;
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
        explain: options.explain,
    })
}

/// The names a program may call without declaring them, tools aside: the language's global
/// functions and constructors (`parseInt`, `Date`) and the sandbox's own (`done`, `log`), as
/// a fresh engine with `explain`'s explanations has them. Read once per process.
pub(crate) fn global_functions(explain: &'static dyn Explain) -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let options = EngineOptions {
            loop_iteration_limit: None,
            explain,
        };
        let Ok(PreparedContext { mut context, .. }) = prepare_context(options, Some(&[])) else {
            return Vec::new();
        };
        let global = context.global_object();
        let Ok(keys) = global.own_property_keys(&mut context) else {
            return Vec::new();
        };
        let mut names = Vec::new();
        for key in keys {
            let boa_engine::property::PropertyKey::String(name) = &key else {
                continue;
            };
            // An explanation's getter (`process`) throws: no function.
            let callable = global
                .get(key.clone(), &mut context)
                .is_ok_and(|value| value.is_callable());
            if callable && name.to_std_string_escaped() != caught::HOOK {
                names.push(name.to_std_string_escaped());
            }
        }
        names.sort();
        names
    })
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
        explain,
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
            literals: absent::literal_text(&request.code),
            received_words: Vec::new(),
            guesses_read: false,
            searches: silent::Searches::default(),
            pieces: pieces::Pieces::default(),
            not_a_number: None,
            conversions: numbers::Conversions::default(),
            caught: Vec::new(),
            comparisons: Vec::new(),
            code: String::new(),
            line_offset: 0,
        });
    });
    let code = normalize_newlines(&request.code);
    let (path, result) = match bind_and_run(&mut context, &request, &code, tools_bound) {
        Ok(value) => (CodePath::Plain, Ok(value)),
        Err(error) => (CodePath::Plain, Err(error)),
    };
    let state = ENGINE.with(|engine| engine.borrow_mut().take());
    // With the engine state gone, reading the program's variables can reach no tool.
    let state = state.map(|mut state| {
        carried::collect(&mut context, &code, &mut state.store);
        state
    });
    // With the engine state gone, nothing evaluated here can reach a tool.
    let result = result.map_err(|mut error| {
        explain.explain(&mut error, &mut context, &request.tools, &code);
        error
    });
    let misread = state.as_ref().is_some_and(silent::misread);
    let searched_in_vain = state.as_ref().is_some_and(silent::in_vain);
    let (done, complete, store, guesses_read) = state
        .map(|state| (state.done, state.complete, state.store, state.guesses_read))
        .unwrap_or((false, None, request.store, false));
    let clock = RUN_INPUTS.with(|inputs| std::mem::take(&mut inputs.borrow_mut().live));
    ExecutionOutcome {
        path,
        result,
        done,
        complete,
        store,
        clock,
        guesses_read,
        misread,
        searched_in_vain,
    }
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
    /// The text of the program's own string literals (see [`absent`]).
    literals: String,
    /// Markers of a missing value (`undefined`, …) that tool results held as data.
    received_words: Vec<&'static str>,
    /// The program read inside a dry run's placeholder (see [`guess`]).
    guesses_read: bool,
    /// The texts the program's string searches looked for (see [`silent`]).
    searches: silent::Searches,
    /// Splits of tool texts with empty pieces at their ends (see [`pieces`]).
    pieces: pieces::Pieces,
    /// The first conversion of text that gave `NaN` (see [`numbers`]).
    not_a_number: Option<numbers::NotANumber>,
    /// How the conversions of text to numbers went ([`numbers::unread`]).
    conversions: numbers::Conversions,
    /// The mistakes the program's `catch` blocks caught ([`caught`]).
    caught: Vec<caught::Caught>,
    /// The program's comparisons of a field with a string ([`compared`]).
    comparisons: Vec<compared::Comparison>,
    /// The program as it runs, and how many lines its wrapper put before it.
    code: String,
    line_offset: u32,
}

thread_local! {
    /// The state of the script running on this thread. Native functions are plain function
    /// pointers, so they find their state here.
    static ENGINE: RefCell<Option<EngineState>> = const { RefCell::new(None) };
    /// What the script reads that is not its code: the clock and `Math.random()`.
    static RUN_INPUTS: RefCell<RunInputs> = RefCell::new(RunInputs::default());
}

/// Notes what a tool's result holds for the checks that look at received data: the words of
/// a missing value that are data ([`absent`]) and the texts whose pieces are counted
/// ([`pieces`]). The result is walked once.
fn received(value: &Value) {
    let found = texts_in(value);
    if found.is_empty() {
        return;
    }
    let _ = with_engine(|state| {
        absent::received(state, &found);
        pieces::received(state, &found);
    });
}

/// What a wrapped built-in does with its own result ([`wrap_builtin`]): given the built-in's
/// name, `this`, the arguments and the result, it returns the result (or another) or throws.
type Observe = fn(&'static str, &JsValue, &[JsValue], JsValue, &mut Context) -> JsResult<JsValue>;

/// Puts in place of `owner[name]`, a built-in function, one that calls it and hands its result
/// to `observe`: how the sandbox watches `split`, the string searches, the number parsers and
/// `isNaN` without changing what they return. The wrapper keeps the built-in's name and
/// `length`. `None` (and nothing changed) when `owner` has no such function.
fn wrap_builtin(
    context: &mut Context,
    owner: &JsObject,
    name: &'static str,
    observe: Observe,
) -> JsResult<Option<JsObject>> {
    let Some(original) = owner.get(JsString::from(name), context)?.as_callable() else {
        return Ok(None);
    };
    let length = original
        .get(js_string!("length"), context)?
        .as_number()
        .unwrap_or(1.0) as usize;
    let wrapped: JsObject = FunctionObjectBuilder::new(
        context.realm(),
        NativeFunction::from_copy_closure_with_captures(
            move |this, arguments, original: &JsObject, context| {
                let result = original.call(this, arguments, context)?;
                observe(name, this, arguments, result, context)
            },
            original,
        ),
    )
    .name(JsString::from(name))
    .length(length)
    .build()
    .into();
    owner.set(JsString::from(name), wrapped.clone(), true, context)?;
    Ok(Some(wrapped))
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
    if let Some(error) = own_namespace(code, &request.tools) {
        return Err(error);
    }
    bind_input(context, request.input.as_ref())
        .map_err(|error| runtime_error(&error, context, code, 0, false))?;
    carried::bind(context, &request.store);
    if !tools_bound {
        bind_tools(context, &request.tools)
            .map_err(|error| runtime_error(&error, context, code, 0, false))?;
    }
    let fixed;
    let (script, line_offset, code) = match parse_noted(context, code) {
        Ok((script, line_offset)) => (script, line_offset, code),
        Err(error) => {
            fixed = strip_pasted_parameters(code, &request.tools).ok_or_else(|| error.clone())?;
            let (script, line_offset) = parse_noted(context, &fixed).map_err(|_| error)?;
            (script, line_offset, fixed.as_str())
        }
    };
    with_engine(|state| {
        state.code = code.to_owned();
        state.line_offset = line_offset;
    })
    .map_err(|error| runtime_error(&error, context, code, line_offset, false))?;
    let tree = syntax_tree(code, line_offset);
    if let Some(error) = tree
        .as_ref()
        .and_then(|tree| repeated_key(tree, code).or_else(|| dropped::dropped_argument(tree, code)))
    {
        return Err(error);
    }
    if let Some(tree) = &tree {
        let found = compared::comparisons(tree);
        with_engine(|state| state.comparisons = found)
            .map_err(|error| runtime_error(&error, context, code, line_offset, false))?;
    }
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

/// Parses `code` with its `catch` blocks noting what they catch (`caught`), or as written
/// when the noted form does not parse; errors are those of `code` as written.
fn parse_noted(
    context: &mut Context,
    code: &str,
) -> Result<(boa_engine::Script, u32), ScriptError> {
    if let Some(noted) = caught::with_catches_noted(code)
        && let Ok(parsed) = parse_script(context, &noted)
    {
        return Ok(parsed);
    }
    parse_script(context, code)
}

/// Binds the global `input` when the request gives one (`interpreter.run-code`). Code mode
/// gives none, so that `fs.search(input)`, the declarations' parameter name written as a
/// value, is a `ReferenceError` at its line rather than a call with `undefined`.
fn bind_input(context: &mut Context, input: Option<&Value>) -> JsResult<()> {
    let Some(value) = input else {
        return Ok(());
    };
    let input = from_json(value, context)?;
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
                    let (name, shape) = with_engine(|state| {
                        state
                            .tools
                            .iter()
                            .find(|binding| binding.id.as_str() == &**tool_id)
                            .map(|binding| (binding.call_name(), binding.result.clone()))
                    })?
                    .unwrap_or_else(|| (tool.clone(), Shape::Any));
                    absent::check_input(&name, &input)?;
                    caught::check_input(&name, &input)?;
                    count_tool_calls(1)?;
                    let reply = host_request(HostRequest::CallTool { tool, input })?;
                    if let HostReply::Value { value } = &reply {
                        received(value);
                    }
                    let list_field = list_field_of(&reply);
                    let guessed = matches!(reply, HostReply::Guess { .. });
                    let value = reply_to_js(reply, context)?;
                    if let (Some(field), Some(object)) = (list_field, value.as_object()) {
                        let prototype = list_prototype(&field, context)?;
                        object.set_prototype(Some(prototype));
                    }
                    let value = typed_result(value, &shape, &name, context)?;
                    if guessed {
                        return guess::watched(value, context);
                    }
                    Ok(value)
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
        HostReply::Value { value } | HostReply::Guess { value } => from_json(&value, context),
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

#[cfg(test)]
mod tests {
    use super::*;
    use boa_engine::{Script, Source};
    use std::path::Path;

    #[test]
    fn an_undefined_name_is_placed_on_a_line_that_uses_it() {
        let code = "const report = read().length;\nlet total = 0;\nfor (const line of lines) {\n  total += 1;\n}\ntotal";
        let mut context = crate::testing::context();
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

    /// Top-level variables carry over to the next program when they fit; one too big to
    /// carry is left behind without being converted, and a small one beside it still goes.
    #[test]
    fn a_variable_too_big_to_carry_is_left_and_the_rest_carried() {
        let outcome = crate::testing::run(
            "const big = []; for (let i = 0; i < 100000; i++) { big.push({ id: i }); }\n\
             const small = { a: 1, skipped: undefined };\n\
             let words = ['x'.repeat(100)];\n\
             done(big.length);",
            serde_json::json!({}),
        );
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
        let carried = &outcome.store[carried::CARRIED_KEY];
        assert!(carried.get("big").is_none(), "{carried}");
        assert_eq!(carried["small"], serde_json::json!({ "a": 1 }));
        assert_eq!(carried["words"][0].as_str().map(str::len), Some(100));
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
            && Object.keys(v).join() === '0,b,a,__proto__,big,nested' && v.a[1] === -2";
        let checked = context.eval(Source::from_bytes(checks)).unwrap();
        assert_eq!(checked.as_boolean(), Some(true));

        let mut deep = Value::Null;
        for _ in 0..=MAX_VALUE_DEPTH + 1 {
            deep = serde_json::json!([deep]);
        }
        assert!(from_json(&deep, &mut context).is_err());
    }
}
