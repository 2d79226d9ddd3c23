//! Scopes in the database: granted with a decision, checked by every call that needs
//! approval (on any server of a shared PostgreSQL), listed and revoked by their user.

use std::sync::Arc;

use agentic_core::Verdict;
use agentic_core::scope::{Reach, Scope, ScopeGrant, ScopeSlot, ScopeStore, grants_of};
use async_trait::async_trait;
use chrono::Utc;
use sea_orm::{ActiveValue::Set, ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder};

use super::{ConversationError, ConversationService};
use crate::entity::approval_scope;
use crate::store::Store;

/// [`ScopeStore`] over the conversation store.
pub(crate) struct StoredScopes(pub(crate) Store);

fn reach_word(reach: Reach) -> &'static str {
    match reach {
        Reach::Prompt => "prompt",
        Reach::Conversation => "conversation",
    }
}

fn grant_of(row: approval_scope::Model) -> ScopeGrant {
    ScopeGrant {
        id: row.id,
        user_id: row.user_id,
        reach: if row.reach == "prompt" {
            Reach::Prompt
        } else {
            Reach::Conversation
        },
        tool: row.tool,
        conversation_id: row.conversation_id,
        prompt_id: row.prompt_id,
        tool_call_id: row.tool_call_id,
        created_at: row.created_at,
        expires_at: row.expires_at,
        revoked_at: row.revoked_at,
    }
}

#[async_trait]
impl ScopeStore for StoredScopes {
    async fn grant(&self, grants: Vec<ScopeGrant>) -> anyhow::Result<()> {
        if grants.is_empty() {
            return Ok(());
        }
        let rows: Vec<approval_scope::ActiveModel> = grants
            .into_iter()
            .map(|grant| approval_scope::ActiveModel {
                id: Set(grant.id),
                user_id: Set(grant.user_id),
                reach: Set(reach_word(grant.reach).to_owned()),
                tool: Set(grant.tool),
                conversation_id: Set(grant.conversation_id),
                prompt_id: Set(grant.prompt_id),
                tool_call_id: Set(grant.tool_call_id),
                created_at: Set(grant.created_at),
                expires_at: Set(grant.expires_at),
                revoked_at: Set(grant.revoked_at),
            })
            .collect();
        self.0
            .write_with(move |transaction| {
                let rows = rows.clone();
                Box::pin(async move {
                    approval_scope::Entity::insert_many(rows)
                        .exec_without_returning(transaction)
                        .await?;
                    Ok(())
                })
            })
            .await
    }

    async fn covering(
        &self,
        user_id: &str,
        conversation_id: Option<&str>,
        prompt_id: &str,
        tool: &str,
    ) -> anyhow::Result<Option<ScopeGrant>> {
        let now = Utc::now();
        let mut query = approval_scope::Entity::find()
            .filter(approval_scope::Column::UserId.eq(user_id))
            .filter(approval_scope::Column::RevokedAt.is_null());
        let place = Condition::any().add(approval_scope::Column::PromptId.eq(prompt_id));
        let place = match conversation_id {
            Some(conversation_id) => {
                place.add(approval_scope::Column::ConversationId.eq(conversation_id))
            }
            None => place,
        };
        query = query.filter(place);
        let rows = query.all(self.0.connection()).await?;
        Ok(rows
            .into_iter()
            .map(grant_of)
            .find(|grant| grant.covers(user_id, conversation_id, prompt_id, tool, now)))
    }

    async fn list(
        &self,
        user_id: &str,
        conversation_id: Option<&str>,
    ) -> anyhow::Result<Vec<ScopeGrant>> {
        // The query narrows; which grants a list shows is `ScopeGrant::listed`'s to say.
        let mut query = approval_scope::Entity::find()
            .filter(approval_scope::Column::UserId.eq(user_id))
            .filter(approval_scope::Column::RevokedAt.is_null());
        if let Some(conversation_id) = conversation_id {
            query = query.filter(approval_scope::Column::ConversationId.eq(conversation_id));
        }
        let rows = query
            .order_by_asc(approval_scope::Column::CreatedAt)
            .all(self.0.connection())
            .await?;
        let now = Utc::now();
        Ok(rows
            .into_iter()
            .map(grant_of)
            .filter(|grant| grant.listed(user_id, conversation_id, now))
            .collect())
    }

    async fn revoke(&self, user_id: &str, id: &str) -> anyhow::Result<Option<ScopeGrant>> {
        let Some(row) = approval_scope::Entity::find_by_id(id.to_owned())
            .filter(approval_scope::Column::UserId.eq(user_id))
            .one(self.0.connection())
            .await?
        else {
            return Ok(None);
        };
        if row.revoked_at.is_none() {
            let id = id.to_owned();
            self.0
                .write_with(move |transaction| {
                    let id = id.clone();
                    Box::pin(async move {
                        approval_scope::Entity::update_many()
                            .col_expr(
                                approval_scope::Column::RevokedAt,
                                sea_orm::sea_query::Expr::value(Utc::now()),
                            )
                            .filter(approval_scope::Column::Id.eq(id))
                            .filter(approval_scope::Column::RevokedAt.is_null())
                            .exec(transaction)
                            .await?;
                        Ok(())
                    })
                })
                .await?;
        }
        let row = approval_scope::Entity::find_by_id(id.to_owned())
            .one(self.0.connection())
            .await?;
        Ok(row.map(grant_of))
    }
}

/// Makes `store` where `runtime`'s scopes are kept.
pub(crate) fn attach(services: &agentic_core::Services, store: &Store) {
    if let Some(slot) = services.extensions.get::<ScopeSlot>() {
        slot.attach(Arc::new(StoredScopes(store.clone())));
    }
}

impl ConversationService {
    fn scopes_store(&self) -> Arc<dyn ScopeStore> {
        match self.inner.runtime.services().extensions.get::<ScopeSlot>() {
            Some(slot) => slot.store(),
            None => Arc::new(StoredScopes(self.inner.store.clone())),
        }
    }

    /// [`decide`](Self::decide) with a scope: the approval reaches the tool's later calls too
    /// (the rest of the prompt, or the conversation until it expires). The scopes are kept
    /// before the decision is applied.
    pub async fn decide_with_scope(
        &self,
        user_id: &str,
        prompt_id: &str,
        tool_call_id: &str,
        verdict: Verdict,
        scope: Option<Scope>,
    ) -> Result<agentic_core::Prompt, ConversationError> {
        self.submit_decision_with_scope(user_id, prompt_id, tool_call_id, verdict, scope)
            .await?;
        match self.apply_decisions(prompt_id).await? {
            Some(prompt) => Ok(prompt),
            None => Ok(self.prompt(user_id, prompt_id).await?.prompt),
        }
    }

    /// [`submit_decision`](Self::submit_decision) with a scope, checked before anything is
    /// stored: a scope that cannot be made refuses the decision.
    pub async fn submit_decision_with_scope(
        &self,
        user_id: &str,
        prompt_id: &str,
        tool_call_id: &str,
        verdict: Verdict,
        scope: Option<Scope>,
    ) -> Result<crate::Decision, ConversationError> {
        let Some(scope) = scope else {
            return self
                .submit_decision(user_id, prompt_id, tool_call_id, verdict)
                .await;
        };
        let stored = self.prompt(user_id, prompt_id).await?;
        let services = self.inner.runtime.services();
        let grants = grants_of(
            &stored.prompt,
            Some(&stored.conversation_id),
            tool_call_id,
            &verdict,
            &scope,
            Utc::now(),
            services.modes.plan_tool(&stored.prompt.mode),
        )
        .map_err(|error| ConversationError::BadScope(error.to_string()))?;
        let decision = self
            .submit_decision(user_id, prompt_id, tool_call_id, verdict)
            .await?;
        self.scopes_store().grant(grants).await?;
        Ok(decision)
    }

    /// The user's scopes in force, of one conversation or of all.
    pub async fn scopes(
        &self,
        user_id: &str,
        conversation_id: Option<&str>,
    ) -> Result<Vec<ScopeGrant>, ConversationError> {
        if let Some(conversation_id) = conversation_id {
            // Another user's conversation is not found, as everywhere.
            self.get(user_id, conversation_id).await?;
        }
        Ok(self.scopes_store().list(user_id, conversation_id).await?)
    }

    /// Revokes the user's scope `id`: calls it would approve are asked about again.
    pub async fn revoke_scope(
        &self,
        user_id: &str,
        id: &str,
    ) -> Result<ScopeGrant, ConversationError> {
        self.scopes_store()
            .revoke(user_id, id)
            .await?
            .ok_or_else(|| ConversationError::ScopeNotFound(id.to_owned()))
    }
}
