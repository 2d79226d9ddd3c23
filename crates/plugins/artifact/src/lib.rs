//! The artifact plugin: `artifact.store`, `artifact.list` and `artifact.get` keep data (a
//! CSV text, a large JSON array, a report) out of the model's context. Storing answers with
//! the artifact's id and size, never its data; a later call, or code in a later prompt, reads
//! it back by id. Artifacts are kept per user in a table this plugin owns (`artifacts`,
//! created by its migration from `setup()`), in the same database as conversations.
//!
//! In code mode the tools are also `storeArtifact`, `listArtifacts` and `getArtifact`.
//! Config (`[artifact]`): `maxBytes`, the largest artifact (default 10 MiB).
#![forbid(unsafe_code)]

use std::sync::{Arc, OnceLock};

use agentic_conversation::CreateTables;
use agentic_conversation::migration::{id_key, timestamp, user_id};
use agentic_conversation::sea_orm_migration::MigrationTrait;
use agentic_conversation::{Store, register_migrations};
use agentic_core::{
    Plugin, PluginRegistration, PrepareContext, SetupContext, ToolContext, ToolError, define_tool,
};
use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use schemars::JsonSchema;
use sea_orm::sea_query::{ColumnDef, Index, Table};
use sea_orm::{
    ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

agentic_core::inventory::submit! {
    PluginRegistration { id: "artifact", create: create_plugin }
}

/// The plugin, as the runtime creates it; the `agentic` crate links it by feature.
pub fn create_plugin() -> Arc<dyn Plugin> {
    Arc::new(ArtifactPlugin::default())
}

/// The default of `maxBytes`: 10 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Longest `type` label, in characters.
pub const MAX_TYPE_CHARS: usize = 64;
/// Longest description, in characters; `artifact.list` shows every one of them.
pub const MAX_DESCRIPTION_CHARS: usize = 500;
/// Artifacts `artifact.list` returns when the call gives no `limit`.
pub const DEFAULT_LIST_LIMIT: u32 = 50;
/// The largest `limit` `artifact.list` takes.
pub const MAX_LIST_LIMIT: u32 = 500;

/// The `artifact` config section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ArtifactConfig {
    /// The largest artifact, in bytes of its data (a string's UTF-8 bytes, or the compact
    /// JSON text of any other value).
    pub max_bytes: u64,
}

impl Default for ArtifactConfig {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

#[derive(Debug, Default)]
pub struct ArtifactPlugin {
    config: OnceLock<ArtifactConfig>,
}

/// What `artifact.store` and `artifact.list` answer for each artifact: everything but the data.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactInfo {
    pub id: String,
    /// A label for what the data is, e.g. `json`, `csv` or `text`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Bytes of the data.
    pub size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(serialize_with = "agentic_core::tool::rfc3339_millis")]
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreInput {
    /// The data to keep: any JSON value (a string, an object, an array, ...) but null.
    pub data: Value,
    /// A short label for what the data is, e.g. `json`, `csv` or `text`; `text` for a
    /// string and `json` for anything else when absent. Kept in lower case.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// What the data is, for finding it again later, e.g. `Sales by day, March 2026`.
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// Only artifacts with this type, e.g. `csv`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// How many to list, newest first: 50 when absent.
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_LIST_LIMIT))]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListOutput {
    /// Newest first.
    pub artifacts: Vec<ArtifactInfo>,
    /// How many artifacts match, listed or not.
    pub total: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetInput {
    /// The id `artifact.store` or `artifact.list` gave.
    pub id: String,
}

/// An artifact with its data.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Artifact {
    #[serde(flatten)]
    pub info: ArtifactInfo,
    pub data: Value,
}

/// What a store call keeps, checked: the data's stored text, its size, its type and its
/// description. Refuses null data, data over `max_bytes` and bad labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedArtifact {
    pub data_json: String,
    pub size: u64,
    pub kind: String,
    pub description: Option<String>,
}

/// The checks of `artifact.store`, apart from the database so they are easy to test.
pub fn check_store_input(input: &StoreInput, max_bytes: u64) -> Result<CheckedArtifact, ToolError> {
    if input.data.is_null() {
        return Err(ToolError::failed(
            "data is null; pass the value to keep (a string, number, boolean, object or array)",
        ));
    }
    let data_json = serde_json::to_string(&input.data)
        .map_err(|error| ToolError::failed(format!("data could not be stored: {error}")))?;
    let size = match &input.data {
        Value::String(text) => text.len(),
        _ => data_json.len(),
    };
    let size = u64::try_from(size).unwrap_or(u64::MAX);
    if size > max_bytes {
        return Err(ToolError::failed(format!(
            "data is {size} bytes, over the limit of {max_bytes} bytes for one artifact \
             (config artifact.maxBytes); store it in smaller parts"
        )));
    }
    let kind = match &input.kind {
        Some(kind) => label(kind)?,
        None if input.data.is_string() => "text".to_owned(),
        None => "json".to_owned(),
    };
    let description = match input.description.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) if text.chars().count() > MAX_DESCRIPTION_CHARS => {
            return Err(ToolError::failed(format!(
                "description is {} characters; the most is {MAX_DESCRIPTION_CHARS}",
                text.chars().count()
            )));
        }
        Some(text) => Some(text.to_owned()),
    };
    Ok(CheckedArtifact {
        data_json,
        size,
        kind,
        description,
    })
}

/// A `type` label as stored and compared: trimmed, lower case, 1 to 64 characters.
pub fn label(kind: &str) -> Result<String, ToolError> {
    let kind = kind.trim().to_lowercase();
    if kind.is_empty() {
        return Err(ToolError::failed(
            "type must not be empty; leave it out instead",
        ));
    }
    if kind.chars().count() > MAX_TYPE_CHARS {
        return Err(ToolError::failed(format!(
            "type \"{kind}\" is longer than {MAX_TYPE_CHARS} characters; use a short label such as json, csv or text"
        )));
    }
    Ok(kind)
}

mod entity {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "artifacts")]
    pub(crate) struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub user_id: String,
        pub artifact_type: String,
        #[sea_orm(column_type = "Text", nullable)]
        pub description: Option<String>,
        pub size: i64,
        /// The data as JSON text (a string is stored as its JSON string literal).
        #[sea_orm(column_type = "Text")]
        pub data: String,
        pub created_at: DateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub(crate) enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

fn migration() -> Arc<dyn MigrationTrait> {
    Arc::new(
        CreateTables::new("0001_artifacts")
            .table(
                Table::create()
                    .table("artifacts")
                    .col(id_key())
                    .col(user_id())
                    .col(ColumnDef::new("artifact_type").string_len(64).not_null())
                    .col(ColumnDef::new("description").text())
                    .col(ColumnDef::new("size").big_integer().not_null())
                    .col(ColumnDef::new("data").text().not_null())
                    .col(timestamp("created_at")),
            )
            // `artifact.list` reads a user's artifacts newest first.
            .index(
                Index::create()
                    .name("artifacts_user_created")
                    .table("artifacts")
                    .col("user_id")
                    .col("created_at"),
            ),
    )
}

/// The metadata columns, in the order [`info_from_row`] reads them: lists never load data.
type InfoRow = (String, String, Option<String>, i64, DateTime<Utc>);

fn info_from_row((id, kind, description, size, created_at): InfoRow) -> ArtifactInfo {
    ArtifactInfo {
        id,
        kind,
        size: u64::try_from(size).unwrap_or_default(),
        description,
        created_at,
    }
}

fn store(context: &ToolContext) -> Result<Store, ToolError> {
    agentic_conversation::tool_database(&context.services, "artifacts need")
}

fn internal(error: impl std::fmt::Display) -> ToolError {
    ToolError::failed(format!("the artifact store failed: {error}"))
}

async fn store_artifact(
    context: ToolContext,
    input: StoreInput,
    max_bytes: u64,
) -> Result<ArtifactInfo, ToolError> {
    let checked = check_store_input(&input, max_bytes)?;
    let store = store(&context)?;
    let model = entity::Model {
        id: uuid::Uuid::new_v4().to_string(),
        user_id: context.user_id.clone(),
        artifact_type: checked.kind,
        description: checked.description,
        size: i64::try_from(checked.size).unwrap_or(i64::MAX),
        data: checked.data_json,
        // PostgreSQL keeps microseconds: what store answers is then what list and get read.
        created_at: Utc::now().trunc_subsecs(6),
    };
    let info = info_from_row((
        model.id.clone(),
        model.artifact_type.clone(),
        model.description.clone(),
        model.size,
        model.created_at,
    ));
    let model = Arc::new(model);
    store
        .write_with(move |transaction| {
            let model = model.clone();
            Box::pin(async move {
                let model = model.as_ref().clone();
                let active = entity::ActiveModel {
                    id: Set(model.id),
                    user_id: Set(model.user_id),
                    artifact_type: Set(model.artifact_type),
                    description: Set(model.description),
                    size: Set(model.size),
                    data: Set(model.data),
                    created_at: Set(model.created_at),
                };
                entity::Entity::insert(active)
                    .exec_without_returning(transaction)
                    .await?;
                Ok(())
            })
        })
        .await
        .map_err(internal)?;
    Ok(info)
}

async fn list_artifacts(context: ToolContext, input: ListInput) -> Result<ListOutput, ToolError> {
    let store = store(&context)?;
    let mut query =
        entity::Entity::find().filter(entity::Column::UserId.eq(context.user_id.as_str()));
    if let Some(kind) = &input.kind {
        query = query.filter(entity::Column::ArtifactType.eq(label(kind)?));
    }
    let total = query
        .clone()
        .count(store.connection())
        .await
        .map_err(internal)?;
    let rows: Vec<InfoRow> = query
        .select_only()
        .columns([
            entity::Column::Id,
            entity::Column::ArtifactType,
            entity::Column::Description,
            entity::Column::Size,
            entity::Column::CreatedAt,
        ])
        .order_by_desc(entity::Column::CreatedAt)
        .order_by_desc(entity::Column::Id)
        .limit(u64::from(input.limit.unwrap_or(DEFAULT_LIST_LIMIT)))
        .into_tuple()
        .all(store.connection())
        .await
        .map_err(internal)?;
    Ok(ListOutput {
        artifacts: rows.into_iter().map(info_from_row).collect(),
        total,
    })
}

/// A path or a name with an extension (`data.json`, `orders/1.json`), which artifact ids (UUIDs)
/// never are.
fn looks_like_a_file(id: &str) -> bool {
    id.contains('/')
        || id.rsplit_once('.').is_some_and(|(stem, extension)| {
            !stem.is_empty()
                && (1..=5).contains(&extension.len())
                && extension.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

async fn get_artifact(context: ToolContext, input: GetInput) -> Result<Artifact, ToolError> {
    let store = store(&context)?;
    let id = input.id.trim();
    let model = entity::Entity::find_by_id(id.to_owned())
        .filter(entity::Column::UserId.eq(context.user_id.as_str()))
        .one(store.connection())
        .await
        .map_err(internal)?
        .ok_or_else(|| {
            let mut message = format!(
                "no artifact with id \"{id}\"; artifact.list shows your artifacts and their ids"
            );
            // Small models take `artifact.get({id: "orders/1.json"})` for reading a file.
            if looks_like_a_file(id) {
                message.push_str(&format!(
                    ". \"{id}\" looks like a file: artifacts are data that artifact.store kept, \
                     and files are read with the file tools, e.g. fs.read({{ path: \"{id}\" }})"
                ));
            }
            ToolError::failed(message)
        })?;
    let data: Value = serde_json::from_str(&model.data).map_err(internal)?;
    Ok(Artifact {
        info: info_from_row((
            model.id,
            model.artifact_type,
            model.description,
            model.size,
            model.created_at,
        )),
        data,
    })
}

#[async_trait]
impl Plugin for ArtifactPlugin {
    fn id(&self) -> &str {
        "artifact"
    }

    fn everyday(&self) -> bool {
        true
    }

    fn config_schema(&self) -> Value {
        agentic_core::schema_of::<ArtifactConfig>()
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        let config: ArtifactConfig = if context.config.section("artifact").is_null() {
            ArtifactConfig::default()
        } else {
            context.config.plugin("artifact")?
        };
        anyhow::ensure!(
            config.max_bytes > 0,
            "artifact.maxBytes must be at least 1, not {}",
            config.max_bytes
        );
        let _ = self.config.set(config);
        register_migrations(context, "artifact", vec![migration()]);
        Ok(())
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let max_bytes = self.config.get().copied().unwrap_or_default().max_bytes;
        context.add_tool(
            define_tool(
                "artifact.store",
                "Keep data (text, CSV, JSON, a large result) for later without putting it in the \
                 conversation; answers with its id and size, never the data",
                move |cx, input: StoreInput| store_artifact(cx, input, max_bytes),
            )
            .alias("storeArtifact")
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "artifact.list",
                "The user's artifacts, newest first: id, type, size and description, not the data",
                |cx, input: ListInput| list_artifacts(cx, input),
            )
            .alias("listArtifacts")
            .read_only()
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "artifact.get",
                "One of the user's artifacts by id: its data and metadata",
                |cx, input: GetInput| get_artifact(cx, input),
            )
            .alias("getArtifact")
            .read_only()
            .into_arc(),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(data: Value, kind: Option<&str>, description: Option<&str>) -> StoreInput {
        StoreInput {
            data,
            kind: kind.map(str::to_owned),
            description: description.map(str::to_owned),
        }
    }

    #[test]
    fn the_type_defaults_to_what_the_data_is() {
        let text = check_store_input(&input("a,b\n1,2".into(), None, None), 100).unwrap();
        assert_eq!(text.kind, "text");
        let array = check_store_input(&input(serde_json::json!([1, 2]), None, None), 100);
        assert_eq!(array.unwrap().kind, "json");
        let given = check_store_input(&input("a,b".into(), Some(" CSV "), Some("  ")), 100);
        let given = given.unwrap();
        assert_eq!((given.kind.as_str(), given.description), ("csv", None));
    }

    #[test]
    fn a_string_counts_its_bytes_and_other_values_their_json() {
        // "é" is two bytes; its JSON text would be four with the quotes.
        let text = check_store_input(&input("é".into(), None, None), 100).unwrap();
        assert_eq!((text.size, text.data_json.as_str()), (2, "\"é\""));
        let object = check_store_input(&input(serde_json::json!({"a": 1}), None, None), 100);
        assert_eq!(object.unwrap().size, 7);
    }

    #[test]
    fn the_size_cap_counts_the_data_and_says_what_to_do() {
        let at_cap = check_store_input(&input("x".repeat(10).into(), None, None), 10);
        assert_eq!(at_cap.unwrap().size, 10);
        let over = check_store_input(&input("x".repeat(11).into(), None, None), 10).unwrap_err();
        assert_eq!(
            over.to_string(),
            "data is 11 bytes, over the limit of 10 bytes for one artifact \
             (config artifact.maxBytes); store it in smaller parts"
        );
    }

    #[test]
    fn bad_labels_null_data_and_long_descriptions_are_refused() {
        let null = check_store_input(&input(Value::Null, None, None), 100).unwrap_err();
        assert!(null.to_string().starts_with("data is null"), "{null}");
        let empty = check_store_input(&input(1.into(), Some(" "), None), 100).unwrap_err();
        assert!(
            empty.to_string().starts_with("type must not be empty"),
            "{empty}"
        );
        let long_type = "t".repeat(MAX_TYPE_CHARS + 1);
        let long = check_store_input(&input(1.into(), Some(&long_type), None), 100).unwrap_err();
        assert!(
            long.to_string().contains("longer than 64 characters"),
            "{long}"
        );
        let description = "d".repeat(MAX_DESCRIPTION_CHARS + 1);
        let wordy = check_store_input(&input(1.into(), None, Some(&description)), 100);
        assert_eq!(
            wordy.unwrap_err().to_string(),
            "description is 501 characters; the most is 500"
        );
    }
}
