//! OAuth for streamable HTTP servers (the MCP authorization spec, through rmcp's `auth`).
//!
//! `agentic mcp login <server>` runs the authorization-code flow once, as a person would:
//! the server's 401 challenge names its authorization server; agentic registers itself there
//! (a pre-registered client from `[mcp.servers.<name>.oauth]`, a client ID metadata document,
//! or dynamic registration, in the spec's order), prints the authorization URL (and opens a
//! browser), and waits on a loopback port for the redirect. The tokens are kept in a file of
//! the server's own (`<data dir>/agentic/mcp-credentials/<server>.json`, mode 0600, bound to
//! the server's URL), and every later connection sends them, refreshing them when they expire.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationRequest,
    CredentialStore, OAuthClientConfig, OAuthState, StoredCredentials, WWWAuthenticateParams,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde::{Deserialize, Serialize};
use sse_stream::Sse;

use crate::config::{OAuthConfig, expand};

/// How long `login` waits for the browser to come back.
const CALLBACK_WAIT: Duration = Duration::from_secs(300);

/// The name agentic registers under.
const CLIENT_NAME: &str = "agentic";

/// The directory of the credential files: `[mcp] credentialsDir`, else
/// `<data dir>/agentic/mcp-credentials`.
pub fn credentials_dir(configured: Option<&str>) -> anyhow::Result<PathBuf> {
    match configured {
        Some(dir) => Ok(PathBuf::from(expand(dir)?)),
        None => {
            let database = agentic_conversation::store::default_database_path()?;
            Ok(database
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
                .join("mcp-credentials"))
        }
    }
}

/// A server's credential file: its name made safe for a file name.
pub fn credentials_file(dir: &Path, server: &str) -> PathBuf {
    let name: String = server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!("{name}.json"))
}

/// The file as written: the credentials and the URL they were given for.
#[derive(Serialize, Deserialize)]
struct Saved {
    url: String,
    credentials: StoredCredentials,
}

/// rmcp's credential store on a file of our own. Credentials for another URL (the config
/// changed) are not handed out.
struct FileCredentials {
    path: PathBuf,
    url: String,
}

fn store_error(error: impl std::fmt::Display) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
}

#[async_trait]
impl CredentialStore for FileCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let text = match tokio::fs::read_to_string(&self.path).await {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(store_error(error)),
        };
        let saved: Saved = serde_json::from_str(&text).map_err(store_error)?;
        Ok((saved.url == self.url).then_some(saved.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let saved = Saved {
            url: self.url.clone(),
            credentials,
        };
        let text = serde_json::to_string_pretty(&saved).map_err(store_error)?;
        write_private(&self.path, text.as_bytes())
            .await
            .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match tokio::fs::remove_file(&self.path).await {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(store_error(error)),
        }
    }
}

/// Writes a file only its owner can read, in a directory only its owner can enter, replacing
/// it whole (a temporary file renamed over it).
async fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let path = path.to_path_buf();
    let bytes = bytes.to_vec();
    tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let temporary = path.with_extension("json.tmp");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            options.mode(0o600);
        }
        let mut file = options.open(&temporary)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)
    })
    .await
    .map_err(std::io::Error::other)?
}

async fn manager(url: &str, file: &Path) -> anyhow::Result<AuthorizationManager> {
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    manager.set_credential_store(FileCredentials {
        path: file.to_path_buf(),
        url: url.to_owned(),
    });
    Ok(manager)
}

/// The HTTP client for a server whose tokens `login` kept, or `None` when there are none (or
/// they were for another URL or authorization server).
pub(crate) async fn authorized_client(
    url: &str,
    file: &Path,
    oauth: Option<&OAuthConfig>,
) -> anyhow::Result<Option<AuthClient<rmcp_reqwest::Client>>> {
    if !file.exists() {
        return Ok(None);
    }
    let mut manager = manager(url, file).await?;
    let found = manager
        .initialize_from_store()
        .await
        .map_err(|error| anyhow::anyhow!("its stored OAuth credentials: {error}"))?;
    if !found {
        return Ok(None);
    }
    // A confidential client refreshes its tokens with its secret.
    if let Some((id, secret)) =
        oauth.and_then(|oauth| oauth.client_id.as_ref().zip(oauth.client_secret.as_ref()))
    {
        manager
            .configure_client(
                OAuthClientConfig::new(expand(id)?, "http://127.0.0.1/callback")
                    .with_client_secret(expand(secret)?),
            )
            .map_err(|error| anyhow::anyhow!("{error}"))?;
    }
    Ok(Some(AuthClient::new(rmcp_reqwest::Client::new(), manager)))
}

/// Whether `login` kept tokens for this URL in `file`.
pub fn has_credentials(url: &str, file: &Path) -> bool {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|text| serde_json::from_str::<Saved>(&text).ok())
        .is_some_and(|saved| saved.url == url && saved.credentials.token_response.is_some())
}

/// The file where a connection keeps the server's last "insufficient scope" challenge, for
/// the next `login` to ask for more.
pub fn challenge_file(credentials: &Path) -> PathBuf {
    credentials.with_extension("challenge")
}

/// rmcp's OAuth client, keeping a 403 `insufficient_scope` challenge where `login` finds it:
/// a call that needs more scope fails, and the next `agentic mcp login` asks for what the
/// server named beside what was granted (step-up authorization).
#[derive(Clone)]
pub(crate) struct StepUp {
    inner: AuthClient<rmcp_reqwest::Client>,
    challenge: PathBuf,
}

impl StepUp {
    pub(crate) fn new(inner: AuthClient<rmcp_reqwest::Client>, credentials: &Path) -> Self {
        Self {
            inner,
            challenge: challenge_file(credentials),
        }
    }

    fn keep<T, E: std::error::Error + Send + Sync + 'static>(
        &self,
        result: Result<T, StreamableHttpError<E>>,
    ) -> Result<T, StreamableHttpError<E>> {
        if let Err(StreamableHttpError::InsufficientScope(challenge)) = &result
            && let Err(error) = std::fs::write(&self.challenge, &challenge.www_authenticate_header)
        {
            tracing::warn!(target: "agentic::mcp", error = %error, "could not keep the server's scope challenge");
        }
        result
    }
}

type StepUpError = <AuthClient<rmcp_reqwest::Client> as StreamableHttpClient>::Error;

impl StreamableHttpClient for StepUp {
    type Error = StepUpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.keep(result)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.keep(result)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.keep(result)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.keep(result)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.keep(result)
    }
}

/// What `login` needs to know of the server.
#[derive(Debug)]
pub struct Login<'a> {
    pub url: &'a str,
    pub oauth: Option<&'a OAuthConfig>,
    /// The server's `WWW-Authenticate` challenge, when connecting got one.
    pub challenge: Option<String>,
    pub credentials: PathBuf,
}

/// Runs the authorization-code flow: `show` gets the authorization URL to open; the redirect
/// comes back to a loopback port. Answers with the file the tokens are kept in.
pub async fn login(login: Login<'_>, show: impl FnOnce(&str)) -> anyhow::Result<PathBuf> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let redirect_uri = format!(
        "http://127.0.0.1:{}/callback",
        listener.local_addr()?.port()
    );
    let mut request = AuthorizationRequest::new(&redirect_uri).with_client_name(CLIENT_NAME);
    if let Some(oauth) = login.oauth {
        if let Some(client_id) = &oauth.client_id {
            request = request.with_preregistered_client(expand(client_id)?);
        }
        if let Some(secret) = &oauth.client_secret {
            request = request.with_client_secret(expand(secret)?);
        }
        if let Some(url) = &oauth.client_metadata_url {
            request = request.with_client_metadata_url(expand(url)?);
        }
        if !oauth.scopes.is_empty() {
            request = request.with_scopes(oauth.scopes.iter().cloned());
        }
    }
    // A call that met "insufficient scope" left the server's challenge: this login asks for
    // the scopes it names beside those granted before (step-up), and answers that challenge.
    let store = FileCredentials {
        path: login.credentials.clone(),
        url: login.url.to_owned(),
    };
    let step_up = std::fs::read_to_string(challenge_file(&login.credentials)).ok();
    let challenge = step_up.clone().or(login.challenge);
    if let Some(header) = &step_up {
        let granted = store
            .load()
            .await
            .ok()
            .flatten()
            .map(|stored| stored.granted_scopes)
            .unwrap_or_default();
        let base = rmcp_reqwest::Url::parse(login.url)?;
        let wanted = WWWAuthenticateParams::parse(header, &base).scope;
        let mut scopes: Vec<String> = granted;
        for scope in wanted.iter().flat_map(|scope| scope.split_whitespace()) {
            if !scopes.iter().any(|granted| granted == scope) {
                scopes.push(scope.to_owned());
            }
        }
        if !scopes.is_empty() {
            request = request.with_scopes(scopes);
        }
    }
    if let Some(challenge) = challenge {
        request = request.with_challenge(challenge);
    }
    // A new login replaces what was kept.
    store
        .clear()
        .await
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    let mut state = OAuthState::Unauthorized(manager(login.url, &login.credentials).await?);
    state
        .start_authorization(request)
        .await
        .map_err(|error| anyhow::anyhow!("starting the authorization failed: {error}"))?;
    let authorization_url = state
        .get_authorization_url()
        .await
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    show(&authorization_url);
    let callback = tokio::time::timeout(CALLBACK_WAIT, redirect(listener))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "the browser did not come back within {} minutes",
                CALLBACK_WAIT.as_secs() / 60
            )
        })??;
    state
        .handle_callback_with_issuer(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        )
        .await
        .map_err(|error| anyhow::anyhow!("the authorization server refused the code: {error}"))?;
    let _ = std::fs::remove_file(challenge_file(&login.credentials));
    Ok(login.credentials)
}

/// Waits for the browser's redirect to `/callback` and answers it with a page saying so.
async fn redirect(listener: tokio::net::TcpListener) -> anyhow::Result<AuthorizationCallback> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    loop {
        let (mut stream, _) = listener.accept().await?;
        let mut buffer = vec![0u8; 16 * 1024];
        let mut read = 0;
        // The request line and headers; a redirect has no body.
        while read < buffer.len() && !buffer[..read].windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buffer[read..]).await? {
                0 => break,
                n => read += n,
            }
        }
        let head = String::from_utf8_lossy(&buffer[..read]);
        let target = head
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("GET "))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or("");
        if !target.starts_with("/callback") {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let parsed = AuthorizationCallback::from_redirect_url(&format!("http://127.0.0.1{target}"));
        let (status, page) = match &parsed {
            Ok(_) => (
                "200 OK",
                "agentic is authorized. You can close this page.".to_owned(),
            ),
            Err(error) => (
                "400 Bad Request",
                format!("The authorization failed: {error}"),
            ),
        };
        let body = format!(
            "<!doctype html><meta charset=utf-8><title>agentic</title><p>{}</p>",
            page.replace('&', "&amp;").replace('<', "&lt;")
        );
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .await;
        return parsed.map_err(|error| anyhow::anyhow!("the redirect: {error}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.to_owned(), None, vec!["read".to_owned()], Some(1))
    }

    #[tokio::test]
    async fn credentials_are_private_and_bound_to_their_url() {
        let dir = std::env::temp_dir().join(format!("agentic-oauth-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = credentials_file(&dir, "tracker/../x");
        assert_eq!(file.file_name().unwrap(), "tracker____x.json");
        let store = FileCredentials {
            path: file.clone(),
            url: "https://tracker.example/mcp".to_owned(),
        };
        assert!(store.load().await.unwrap().is_none());
        store.save(credentials("agentic-1")).await.unwrap();
        let loaded = store.load().await.unwrap().unwrap();
        assert_eq!(loaded.client_id, "agentic-1");
        assert_eq!(loaded.granted_scopes, ["read"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        // The server's URL changed in the config: these tokens are not for it.
        let moved = FileCredentials {
            path: file.clone(),
            url: "https://elsewhere.example/mcp".to_owned(),
        };
        assert!(moved.load().await.unwrap().is_none());
        store.clear().await.unwrap();
        assert!(!file.exists());
        store.clear().await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
