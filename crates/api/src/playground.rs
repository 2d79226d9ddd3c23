//! The web playground at `/`: the files `crates/api/web` builds (see its `build.mjs`),
//! compiled into the binary, so nothing is fetched at run time. Public like `/api/docs`: the
//! page asks for the user id and token itself and sends them with every API call.

use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;

/// One of the page's files, with its `ETag`, computed once.
struct Asset {
    body: &'static [u8],
    content_type: &'static str,
    tag: LazyLock<String>,
}

const INDEX_BYTES: &[u8] = include_bytes!("../web/dist/index.html");
const SCRIPT_BYTES: &[u8] = include_bytes!("../web/dist/app.js");
const STYLE_BYTES: &[u8] = include_bytes!("../web/dist/app.css");

static INDEX: Asset = Asset {
    body: INDEX_BYTES,
    content_type: "text/html; charset=utf-8",
    tag: LazyLock::new(|| etag(INDEX_BYTES)),
};
static SCRIPT: Asset = Asset {
    body: SCRIPT_BYTES,
    content_type: "text/javascript; charset=utf-8",
    tag: LazyLock::new(|| etag(SCRIPT_BYTES)),
};
static STYLE: Asset = Asset {
    body: STYLE_BYTES,
    content_type: "text/css; charset=utf-8",
    tag: LazyLock::new(|| etag(STYLE_BYTES)),
};

/// Only the page's own files run and load; the model's markdown cannot pull in anything else.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
                      img-src 'self' blob: data:; connect-src 'self'; object-src 'none'; \
                      base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/",
            get(|headers: HeaderMap| async move { serve(&headers, &INDEX) }),
        )
        .route(
            "/assets/app.js",
            get(|headers: HeaderMap| async move { serve(&headers, &SCRIPT) }),
        )
        .route(
            "/assets/app.css",
            get(|headers: HeaderMap| async move { serve(&headers, &STYLE) }),
        )
        // Gzipped for clients that take it (a third of the size); only these routes, never the
        // event stream, which must not wait in a compressor's buffer.
        .layer(tower_http::compression::CompressionLayer::new().gzip(true))
}

/// Whether `path` is one of the playground's files (public, like the API's docs).
pub(crate) fn is_playground(path: &str) -> bool {
    path == "/" || path == "/assets/app.js" || path == "/assets/app.css"
}

/// One file, revalidated on every load (an `ETag` of its content), so a new binary's page is
/// never mixed with an old one's cached script.
fn serve(headers: &HeaderMap, asset: &'static Asset) -> Response {
    let tag: &str = &asset.tag;
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.split(',').any(|candidate| candidate.trim() == tag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, asset.content_type)], asset.body).into_response()
    };
    let set = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(tag) {
        set.insert(header::ETAG, value);
    }
    set.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    set.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    set.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    set.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

fn etag(body: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(body);
    let hex: String = digest[..12]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("\"{hex}\"")
}
