//! The server over stdio and over streamable HTTP.

use super::*;

/// Serves MCP on this process's stdin and stdout until the client closes them.
pub async fn serve_stdio(service: ConversationService, user_id: &str) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let running = AgenticServer::new(service, user_id)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| anyhow::anyhow!("the MCP client did not start a session: {error}"))?;
    running.waiting().await?;
    Ok(())
}

/// `/mcp` as a streamable HTTP endpoint serving `server`. `loopback_only` keeps rmcp's check
/// that the `Host` header names this machine (against DNS rebinding), for a server that
/// listens on loopback. Open streams end when `stopping` is cancelled.
pub fn http_router<S: Clone + Send + Sync + 'static>(
    server: AgenticServer,
    loopback_only: bool,
    stopping: tokio_util::sync::CancellationToken,
) -> axum::Router<S> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(stopping);
    if !loopback_only {
        config = config.disable_allowed_hosts();
    }
    let endpoint = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new()
        .nest_service("/mcp", endpoint)
        .layer(axum::middleware::from_fn(session_closed))
}

/// A client's `DELETE` of its session is answered 200, as the spec's HTTP semantics ask; the
/// SDK answers 202, which a strict client takes for "still being processed".
pub(super) async fn session_closed(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let deleting = request.method() == http::Method::DELETE;
    let mut response = next.run(request).await;
    if deleting && response.status() == http::StatusCode::ACCEPTED {
        *response.status_mut() = http::StatusCode::OK;
    }
    response
}

/// `agentic mcp serve --http`: MCP over streamable HTTP at `/mcp` on a loopback address, for
/// one user, without the API (like stdio, anyone who can reach the port acts as that user;
/// `agentic serve` puts `/mcp` behind the API's authentication). Runs until `stopping`.
pub async fn serve_http(
    service: ConversationService,
    user_id: &str,
    listener: tokio::net::TcpListener,
    stopping: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    let address = listener.local_addr()?;
    anyhow::ensure!(
        address.ip().is_loopback(),
        "agentic mcp serve --http listens on loopback only ({address} is not); `agentic serve` \
         serves /mcp behind the API's authentication on any address"
    );
    let router: axum::Router =
        http_router(AgenticServer::new(service, user_id), true, stopping.clone());
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { stopping.cancelled().await })
        .await?;
    Ok(())
}
