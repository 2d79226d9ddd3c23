//! Taking over the prompts of servers that stopped, and keeping this one's lease alive.

use super::*;

impl ConversationService {
    /// From now on (under `agentic serve`), this service takes over the running prompts of
    /// servers on the same database that died, in modes that can resume: tool calls that were
    /// running there get an error result saying so (they are not run again), and the round in
    /// flight is asked again, here. Checked every 2 s.
    pub fn take_over_prompts(&self) {
        if self
            .inner
            .takeover
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        tokio::spawn(take_over_loop(Arc::downgrade(&self.inner)));
    }

    /// Resumes prompts this service took over, each in its own task.
    async fn resume_taken(&self) -> anyhow::Result<()> {
        let taken = self
            .inner
            .store
            .take_over(&resumable(&self.inner.runtime))
            .await?;
        for stored in taken {
            let prompt_id = stored.prompt.id.clone();
            if self.cancel_taken_over(&stored).await? {
                tracing::warn!(prompt = %prompt_id, "cancelled a prompt taken over from a stopped server, as asked");
                continue;
            }
            tracing::warn!(prompt = %prompt_id, "taking over a prompt whose server stopped");
            // The executor sorts out the calls that were running there: a call that may have
            // taken effect is not run again unless its tool is idempotent, and the model
            // reads why.
            let handle = self.executor_for(&stored).await?;
            let service = self.clone();
            let conversation_id = stored.conversation_id.clone();
            tokio::spawn(async move {
                let result = service.inner.runtime.prompts().run(&handle).await;
                if let Err(error) = settle(&service.inner, &conversation_id, &handle, result).await
                {
                    tracing::warn!(prompt = %prompt_id, %error, "a prompt taken over failed");
                }
            });
        }
        Ok(())
    }
}

/// Which prompts can wait for approval across a restart: those of modes that say so.
pub(super) fn resumable(runtime: &Runtime) -> impl Fn(&Prompt) -> bool + Send + Sync + use<> {
    let services = runtime.services().clone();
    move |prompt: &Prompt| {
        services
            .modes
            .get(&prompt.mode)
            .is_ok_and(|mode| mode.resumes_after_restart())
    }
}

/// A service renews its lease, and sweeps prompts of instances that are gone, four times
/// per lease.
pub(super) async fn keep_alive(inner: std::sync::Weak<Inner>) {
    let every = match inner.upgrade() {
        Some(inner) => inner.store.lease() / 4,
        None => return,
    };
    let mut ticks = tokio::time::interval(every);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        if let Err(error) = inner.store.heartbeat().await {
            tracing::warn!(error = %format!("{error:#}"), "could not renew the instance lease");
        }
        // Prompts this server can take over are taken before the sweep would interrupt them.
        if inner.takeover.load(std::sync::atomic::Ordering::SeqCst) {
            let service = ConversationService {
                inner: inner.clone(),
            };
            if let Err(error) = service.resume_taken().await {
                tracing::warn!(error = %format!("{error:#}"), "could not take over prompts of stopped servers");
            }
        }
        if !inner.takeover.load(std::sync::atomic::Ordering::SeqCst) {
            let service = ConversationService {
                inner: inner.clone(),
            };
            if let Err(error) = service.sweep_decisions(false).await {
                tracing::warn!(error = %format!("{error:#}"), "could not apply stored decisions");
            }
        }
        match inner.store.recover(&resumable(&inner.runtime)).await {
            Ok(recovery) => publish_cancelled(&inner, recovery),
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "could not sweep prompts of stopped instances");
            }
        }
    }
}

/// Tells subscribers of the prompts a sweep ended as cancelled.
pub(super) fn publish_cancelled(inner: &Inner, recovery: crate::store::Recovery) {
    for (user_id, _, event) in recovery.cancelled {
        inner.runtime.services().events.publish(&user_id, event);
    }
}

/// How often a server looks for prompts of servers that died (see `take_over_prompts`).
const TAKE_OVER_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

async fn take_over_loop(inner: std::sync::Weak<Inner>) {
    let mut ticks = tokio::time::interval(TAKE_OVER_EVERY);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let service = ConversationService { inner };
        if let Err(error) = service.resume_taken().await {
            tracing::warn!(error = %format!("{error:#}"), "could not take over prompts of stopped servers");
        }
        if let Err(error) = service.sweep_decisions(true).await {
            tracing::warn!(error = %format!("{error:#}"), "could not apply stored decisions");
        }
    }
}
