//! [`FnTool`]: a tool made from a typed async function, with [`define_tool`] and the builder
//! methods that say what it needs (approval, a preview, whether it only reads).

use super::*;

/// The schemas of a tool's input and output types, and the compiled input schema. Deriving and
/// compiling them for every tool of every prompt was most of a prompt's CPU time under load,
/// so they are made once per pair of types and shared.
struct TypeSchemas {
    input: Arc<Value>,
    /// `input` as offered to a model.
    offered: Arc<Value>,
    output: Arc<Value>,
    validator: InputValidator,
}

fn type_schemas<I: JsonSchema + 'static, O: JsonSchema + 'static>() -> Arc<TypeSchemas> {
    type Cache = Mutex<HashMap<(TypeId, TypeId), Arc<TypeSchemas>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (TypeId::of::<I>(), TypeId::of::<O>());
    let cache = CACHE.get_or_init(Cache::default);
    if let Some(found) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return found.clone();
    }
    let input = schema_of::<I>();
    let made = Arc::new(TypeSchemas {
        validator: InputValidator::compile(&input),
        offered: Arc::new(offered_schema(&input)),
        input: Arc::new(input),
        output: Arc::new(schema_of::<O>()),
    });
    cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(key)
        .or_insert(made)
        .clone()
}

type BoxedHandler = Arc<
    dyn Fn(ToolContext, Value) -> Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>
        + Send
        + Sync,
>;
type BoxedApproval = Arc<dyn Fn(&Value) -> Approval + Send + Sync>;
type BoxedPreview = Arc<
    dyn Fn(ToolContext, Value) -> Pin<Box<dyn Future<Output = Option<String>> + Send>>
        + Send
        + Sync,
>;

/// A tool made from a typed async function; see [`define_tool`].
#[derive(Clone)]
pub struct FnTool {
    id: String,
    description: String,
    schemas: Arc<TypeSchemas>,
    aliases: Vec<String>,
    handler: BoxedHandler,
    approval: BoxedApproval,
    /// Whether an approval rule was set.
    asks: bool,
    idempotent: bool,
    read_only: bool,
    preview: Option<BoxedPreview>,
}

impl std::fmt::Debug for FnTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Defines a tool from a typed handler. Input and output schemas are derived from `I` and `O`.
///
/// ```
/// use agentic_core::{define_tool, ToolError};
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Input { text: String }
/// let tool = define_tool("demo.shout", "Upper-cases text", |_cx, input: Input| async move {
///     Ok::<_, ToolError>(input.text.to_uppercase())
/// });
/// # let _ = tool;
/// ```
pub fn define_tool<I, O, F, Fut>(id: &str, description: &str, handler: F) -> FnTool
where
    I: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + JsonSchema + 'static,
    F: Fn(ToolContext, I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
{
    let tool_id = id.to_owned();
    let handler = Arc::new(handler);
    let boxed: BoxedHandler = Arc::new(move |context, input| {
        let tool_id = tool_id.clone();
        let handler = handler.clone();
        Box::pin(async move {
            let input: I =
                serde_json::from_value(input).map_err(|error| ToolError::InvalidInput {
                    tool: tool_id.clone(),
                    message: error.to_string(),
                })?;
            let output = handler(context, input).await?;
            serde_json::to_value(output)
                .map_err(|error| ToolError::failed(format!("unserialisable output: {error}")))
        })
    });
    FnTool {
        id: id.to_owned(),
        description: description.to_owned(),
        schemas: type_schemas::<I, O>(),
        aliases: Vec::new(),
        handler: boxed,
        approval: Arc::new(|_| Approval::NotRequired),
        asks: false,
        idempotent: false,
        read_only: false,
        preview: None,
    }
}

impl FnTool {
    /// Offers the tool under another name too; see [`Tool::aliases`].
    pub fn alias(mut self, name: &str) -> Self {
        self.aliases.push(name.to_owned());
        self
    }

    /// Every call needs approval, for this reason.
    pub fn require_approval(mut self, reason: &str) -> Self {
        let reason = reason.to_owned();
        self.approval = Arc::new(move |_| Approval::Required {
            reason: reason.clone(),
        });
        self.asks = true;
        self
    }

    /// Approval decided from the typed input: `Some(reason)` means it is needed.
    pub fn approval_when<I, F>(mut self, decide: F) -> Self
    where
        I: DeserializeOwned,
        F: Fn(&I) -> Option<String> + Send + Sync + 'static,
    {
        self.approval = Arc::new(
            move |input| match serde_json::from_value::<I>(input.clone()) {
                Ok(typed) => match decide(&typed) {
                    Some(reason) => Approval::Required { reason },
                    None => Approval::NotRequired,
                },
                // Input that does not decode fails validation before it could run anyway.
                Err(_) => Approval::NotRequired,
            },
        );
        self.asks = true;
        self
    }

    /// Calls may run again after a crash; see [`Tool::idempotent`].
    pub fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }

    /// Calls change nothing, so a dry run may run them; see [`Tool::read_only`].
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self.idempotent = true;
        self
    }

    /// What a call would change, from its typed input; see [`Tool::preview`].
    pub fn preview_with<I, F, Fut>(mut self, preview: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(ToolContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<String>> + Send + 'static,
    {
        let preview = Arc::new(preview);
        self.preview = Some(Arc::new(move |context, input| {
            let preview = preview.clone();
            Box::pin(async move {
                let input = serde_json::from_value::<I>(input).ok()?;
                preview(context, input).await
            })
        }));
        self
    }

    /// The tool as an `Arc<dyn Tool>`, as [`crate::PrepareContext::add_tool`] takes it.
    pub fn into_arc(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl From<FnTool> for Arc<dyn Tool> {
    fn from(tool: FnTool) -> Self {
        Arc::new(tool)
    }
}

#[async_trait]
impl Tool for FnTool {
    fn id(&self) -> &str {
        &self.id
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> &Value {
        &self.schemas.input
    }
    fn output_schema(&self) -> Option<&Value> {
        Some(&self.schemas.output)
    }
    fn input_validator(&self) -> Option<InputValidator> {
        Some(self.schemas.validator.clone())
    }
    fn shared_input_schema(&self) -> Arc<Value> {
        self.schemas.offered.clone()
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn approval(&self, input: &Value) -> Approval {
        (self.approval)(input)
    }
    fn may_need_approval(&self) -> bool {
        self.asks
    }
    fn idempotent(&self) -> bool {
        self.idempotent
    }
    fn read_only(&self) -> bool {
        self.read_only
    }
    async fn preview(&self, context: ToolContext, input: &Value) -> Option<String> {
        let preview = self.preview.as_ref()?;
        preview(context, input.clone()).await
    }
    async fn invoke(&self, context: ToolContext, input: Value) -> Result<Value, ToolError> {
        (self.handler)(context, input).await
    }
}
