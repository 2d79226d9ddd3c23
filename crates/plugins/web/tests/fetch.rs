//! `web.fetch` against a real HTTP server on 127.0.0.1 (with `allowPrivate`, as only tests
//! need), directly and from prompts in classic and code mode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_web as _;

use std::time::Duration;

use agentic_plugin_web::{WebConfig, fetch};
use agentic_testing::{TimelineCase, TimelineRunner};
use axum::Router;
use axum::http::header;
use axum::response::{Html, IntoResponse, Redirect};
use axum::routing::get;

const PAGE: &str = "<html><head><title>Forecast</title><style>p{color:red}</style></head>\
<body><h1>Oslo tomorrow</h1><p>Rain in the <b>morning</b>, sun after noon.</p>\
<script>var tracking = 1;</script></body></html>";

async fn server() -> String {
    let app = Router::new()
        .route("/page", get(|| async { Html(PAGE) }))
        .route(
            "/plain",
            get(|| async { ([(header::CONTENT_TYPE, "text/plain")], "just text") }),
        )
        .route("/moved", get(|| async { Redirect::temporary("/page") }))
        .route("/loop", get(|| async { Redirect::temporary("/loop") }))
        .route("/big", get(|| async { "x".repeat(50_000).into_response() }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

fn allowed() -> WebConfig {
    WebConfig {
        allow_private: true,
        ..WebConfig::default()
    }
}

#[tokio::test]
async fn html_becomes_readable_text_and_redirects_are_followed() {
    let base = server().await;
    let page = fetch(&allowed(), &format!("{base}/moved")).await.unwrap();
    assert_eq!(page.status, 200);
    assert_eq!(page.url, format!("{base}/page"));
    assert!(page.content_type.starts_with("text/html"));
    assert!(page.text.contains("Oslo tomorrow"), "{}", page.text);
    assert!(page.text.contains("Rain in the"), "{}", page.text);
    assert!(
        !page.text.contains("<p>") && !page.text.contains("tracking"),
        "{}",
        page.text
    );
    let plain = fetch(&allowed(), &format!("{base}/plain")).await.unwrap();
    assert_eq!(plain.text, "just text");
    assert!(!plain.truncated);
}

#[tokio::test]
async fn limits_hold_and_loopback_is_refused_without_the_allowance() {
    let base = server().await;
    let looping = fetch(&allowed(), &format!("{base}/loop"))
        .await
        .unwrap_err();
    assert!(
        looping.to_string().contains("more than 5 redirects"),
        "{looping}"
    );
    let small = WebConfig {
        max_bytes: 1_000,
        ..allowed()
    };
    let big = fetch(&small, &format!("{base}/big")).await.unwrap();
    assert!(big.truncated);
    assert_eq!(big.text.len(), 1_000);
    let hasty = WebConfig {
        timeout_ms: 300,
        ..allowed()
    };
    let slow = fetch(&hasty, &format!("{base}/slow")).await.unwrap_err();
    assert!(slow.to_string().contains("took longer"), "{slow}");
    let refused = fetch(&WebConfig::default(), &format!("{base}/page"))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("not allowed"), "{refused}");
}

fn case(mode: &str, base: &str) -> TimelineCase {
    let turns = if mode == "code" {
        serde_json::json!([{ "code": format!(
            "const page = webFetch({{ url: \"{base}/page\" }});\n\
             const line = page.text.split(\"\\n\").find((l) => l.includes(\"Rain\"));\n\
             output(`Status ${{page.status}}: ${{line.trim()}}`);\ndone();"
        ) }])
    } else {
        serde_json::json!([
            { "toolCalls": [{ "name": "web.fetch", "input": { "url": format!("{base}/page") } }] },
            { "text": "Rain in the morning, sun after noon." }
        ])
    };
    serde_json::from_value(serde_json::json!({
        "description": format!("web.fetch from {mode} mode"),
        "mode": mode,
        "input": "What is the weather in Oslo tomorrow?",
        "config": {
            "web": { "allowPrivate": true },
            "interpreter": { "sandbox": { "backend": "in-process" } }
        },
        "turns": turns
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_timelines_in_both_modes() {
    let base = server().await;
    let runner = TimelineRunner::new()
        .mask(r"http://127\.0\.0\.1:\d+", "http://[server]")
        .unwrap();
    for mode in ["classic", "code"] {
        let timeline = runner.run(&case(mode, &base)).await.unwrap();
        insta::assert_yaml_snapshot!(format!("fetch_{mode}"), timeline);
    }
}
