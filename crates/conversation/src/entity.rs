//! The tables, as sea-orm entities. The migrations in [`crate::migration`] create them.

/// One conversation: whose it is, what it is called, the state carried between its prompts,
/// and which prompt holds it right now.
pub mod conversation {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "conversations")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub user_id: String,
        pub title: String,
        /// Set once the title came from something better than the first input.
        pub title_fixed: bool,
        /// The summary that stands in history for the archived prompts.
        #[sea_orm(column_type = "Text", nullable)]
        pub summary: Option<String>,
        pub state: Json,
        /// The prompt that runs or waits for approval; at most one per conversation.
        pub active_prompt_id: Option<String>,
        pub created_at: DateTimeUtc,
        pub updated_at: DateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// One prompt. `output` holds the timeline once the prompt rests (completed, failed,
/// interrupted, waiting for approval); while it runs, each output is journaled in
/// [`prompt_output`] instead, so that appending one costs the same at the 10,000th as at the
/// first.
pub mod prompt {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "prompts")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub conversation_id: String,
        pub user_id: String,
        /// Order within the conversation, from 0.
        pub position: i64,
        pub mode: String,
        pub model: String,
        pub state: String,
        pub visible: bool,
        #[sea_orm(column_type = "Text", nullable)]
        pub input: Option<String>,
        pub output: Json,
        pub usage: Json,
        #[sea_orm(column_type = "Text", nullable)]
        pub error: Option<String>,
        /// Compressed into the conversation's summary; kept, never sent to the model again.
        pub archived: bool,
        /// The process that runs (or last ran) the prompt; see [`super::instance`].
        pub instance_id: Option<String>,
        pub created_at: DateTimeUtc,
        pub updated_at: DateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// The journal of a running prompt's outputs, one row per timeline position.
pub mod prompt_output {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "prompt_outputs")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub prompt_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub position: i64,
        pub output: Json,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// What a mode journals to resume a prompt elsewhere (code mode: its scripts' seeds, clock
/// readings and `llm()` answers), in the order written. Kept while the prompt can go on.
pub mod prompt_journal {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "prompt_journal")]
    pub struct Model {
        #[sea_orm(primary_key)]
        pub id: i64,
        pub prompt_id: String,
        pub entry: String,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// Decisions answered with 202 and not yet taken: an approval, a rejection or a cancel of a
/// prompt, kept until the server that owns the prompt (or takes it over) has applied it, so a
/// decision survives the death of the server it was sent to. At most one per waiting call.
pub mod prompt_decision {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "prompt_decisions")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub prompt_id: String,
        pub user_id: String,
        /// The call decided; empty for a cancel, which is about the whole prompt.
        pub tool_call_id: String,
        /// The [`crate::Action`], as JSON: the verdict's own, or `{"type": "cancel"}`.
        pub verdict: String,
        pub created_at: DateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// The processes using the database. A prompt left `running` by an instance that is gone
/// (its process no longer exists on this host, or it stopped renewing its lease) is
/// interrupted; one of a live instance is left alone, so that `agentic serve` and a CLI can
/// share a database, and so can several servers on one PostgreSQL.
pub mod instance {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "instances")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub host: String,
        pub pid: i64,
        pub started_at: DateTimeUtc,
        pub last_seen: DateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// Scopes people granted with a decision: a tool approved for the rest of a prompt, or for a
/// conversation until it expires (see `agentic_core::scope`). Revoked ones are kept, marked.
pub mod approval_scope {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "approval_scopes")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub user_id: String,
        /// `prompt` or `conversation`.
        pub reach: String,
        /// A tool id or pattern.
        pub tool: String,
        pub conversation_id: Option<String>,
        pub prompt_id: String,
        pub tool_call_id: String,
        pub created_at: DateTimeUtc,
        pub expires_at: Option<DateTimeUtc>,
        pub revoked_at: Option<DateTimeUtc>,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}
