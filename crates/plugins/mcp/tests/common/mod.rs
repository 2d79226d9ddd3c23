//! What the tests and the bench share: the reference server-everything.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

/// The reference server-everything, installed by `npm ci --prefix tests/servers`.
pub(crate) const EVERYTHING: &str = "tests/servers/node_modules/.bin/mcp-server-everything";

/// server-everything in its streamable HTTP mode on a free loopback port, once it listens:
/// the process (killed when dropped) and its endpoint's URL.
pub(crate) async fn everything_over_http() -> (tokio::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = tokio::process::Command::new(EVERYTHING)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let start = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "server-everything did not listen"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (child, format!("http://127.0.0.1:{port}/mcp"))
}
