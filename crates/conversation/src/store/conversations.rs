//! Conversations: made, listed with their usage, renamed and deleted.

use super::*;

impl Store {
    pub async fn create_conversation(
        &self,
        user_id: &str,
        title: &str,
    ) -> anyhow::Result<Conversation> {
        let now = Utc::now();
        let model = conversation::Model {
            id: uuid::Uuid::new_v4().to_string(),
            user_id: user_id.to_owned(),
            title: title.to_owned(),
            title_fixed: false,
            summary: None,
            state: Value::Object(serde_json::Map::new()),
            active_prompt_id: None,
            created_at: now,
            updated_at: now,
        };
        self.write(Write::CreateConversation(model.clone())).await?;
        Ok(conversation_from_model(model))
    }

    /// The user's conversation with this id; another user's is `None`. Its `usage` is left
    /// empty: this runs at every prompt's start, and the prompts that sum to it are read where
    /// it is shown.
    pub async fn conversation(
        &self,
        user_id: &str,
        id: &str,
    ) -> anyhow::Result<Option<Conversation>> {
        Ok(conversation::Entity::find_by_id(id.to_owned())
            .filter(conversation::Column::UserId.eq(user_id))
            .one(&self.db)
            .await?
            .map(conversation_from_model))
    }

    /// The user's conversations, most recently updated first, each with its usage.
    pub async fn conversations(&self, user_id: &str) -> anyhow::Result<Vec<Conversation>> {
        let mut conversations: Vec<Conversation> = conversation::Entity::find()
            .filter(conversation::Column::UserId.eq(user_id))
            .order_by_desc(conversation::Column::UpdatedAt)
            .all(&self.db)
            .await?
            .into_iter()
            .map(conversation_from_model)
            .collect();
        let mut usage = self.usage_by_conversation(user_id).await?;
        for conversation in &mut conversations {
            if let Some(usage) = usage.remove(&conversation.id) {
                conversation.usage = usage;
            }
        }
        Ok(conversations)
    }

    /// The summed usage of the user's prompts by conversation.
    async fn usage_by_conversation(
        &self,
        user_id: &str,
    ) -> anyhow::Result<HashMap<String, PromptUsage>> {
        let query = prompt::Entity::find()
            .select_only()
            .column(prompt::Column::ConversationId)
            .column(prompt::Column::Usage)
            .filter(prompt::Column::UserId.eq(user_id));
        let rows: Vec<(String, Value)> = query.into_tuple().all(&self.db).await?;
        let mut sums: HashMap<String, PromptUsage> = HashMap::new();
        for (conversation, usage) in rows {
            // A row whose usage does not read (an older shape) counts as none.
            let usage: PromptUsage = serde_json::from_value(usage).unwrap_or_default();
            sums.entry(conversation).or_default().add(&usage);
        }
        Ok(sums)
    }

    /// Deletes a conversation with its prompts; `false` when the user has none with this id.
    pub async fn delete_conversation(&self, user_id: &str, id: &str) -> anyhow::Result<bool> {
        let written = self
            .write(Write::DeleteConversation {
                user_id: user_id.to_owned(),
                id: id.to_owned(),
            })
            .await?;
        Ok(matches!(written, Written::Count(deleted) if deleted > 0))
    }

    pub async fn set_title(&self, id: &str, title: &str, fixed: bool) -> anyhow::Result<()> {
        self.write(Write::SetTitle {
            id: id.to_owned(),
            title: title.to_owned(),
            fixed,
        })
        .await?;
        Ok(())
    }

    /// A claim token for this process: `claim:<instance>:<8 hex>` (51 characters, within the
    /// column's 64), so that recovery can tell whose it is.
    pub fn claim_token(&self) -> String {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        format!(
            "claim:{}:{}",
            self.instance_id().unwrap_or("none"),
            &nonce[..8]
        )
    }

    /// Makes `prompt_id` the conversation's active prompt. Fails with the active prompt's id
    /// when another one holds it. Safe across processes: one conditional update decides.
    pub async fn claim(
        &self,
        conversation_id: &str,
        prompt_id: &str,
    ) -> anyhow::Result<Result<(), String>> {
        match self
            .write(Write::Claim {
                conversation_id: conversation_id.to_owned(),
                holder: prompt_id.to_owned(),
            })
            .await?
        {
            Written::Claim(claim) => Ok(claim),
            other => bail!("unexpected answer to a claim: {other:?}"),
        }
    }

    /// Ends a prompt's hold on its conversation and records the state it leaves behind.
    pub async fn release(
        &self,
        conversation_id: &str,
        prompt_id: &str,
        state: Option<serde_json::Map<String, Value>>,
    ) -> anyhow::Result<()> {
        self.write(Write::Release {
            conversation_id: conversation_id.to_owned(),
            holder: prompt_id.to_owned(),
            state: state.map(Value::Object),
        })
        .await?;
        Ok(())
    }
}

fn conversation_from_model(model: conversation::Model) -> Conversation {
    Conversation {
        id: model.id,
        user_id: model.user_id,
        title: model.title,
        summary: model.summary,
        active_prompt_id: model.active_prompt_id,
        created_at: model.created_at,
        updated_at: model.updated_at,
        usage: PromptUsage::default(),
        title_fixed: model.title_fixed,
        state: match model.state {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        },
    }
}
