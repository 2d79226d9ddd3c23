//! What a test needs that a machine may lack (a PostgreSQL server, a browser, the MCP
//! reference servers). A test without it is skipped with a note on stderr, except where
//! `.ci/run` requires it by setting `AGENTIC_REQUIRE_<NAME>=1`: there a missing one fails the
//! test, so CI never passes by skipping.

/// Something tests use that is installed apart from the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// A PostgreSQL server at `AGENTIC_TEST_POSTGRES_URL`.
    Postgres,
    /// Chromium, its WebDriver and the playground's npm packages.
    Browser,
    /// The npm MCP reference servers, mcp-server-time and the Python MCP SDK.
    McpServers,
}

impl Requirement {
    /// The variable `.ci/run` sets to `1` to require it.
    pub fn variable(self) -> &'static str {
        match self {
            Requirement::Postgres => "AGENTIC_REQUIRE_POSTGRES",
            Requirement::Browser => "AGENTIC_REQUIRE_BROWSER",
            Requirement::McpServers => "AGENTIC_REQUIRE_MCP_SERVERS",
        }
    }

    /// Whether this run must have it.
    pub fn is_required(self) -> bool {
        std::env::var(self.variable()).is_ok_and(|value| value == "1")
    }

    /// `what` is missing (say how to install it): fails the test when this run requires it,
    /// else notes on stderr that the test skips it.
    #[track_caller]
    pub fn missing(self, what: &str) {
        assert!(
            !self.is_required(),
            "{}=1 (as .ci/run sets it) but {what}",
            self.variable()
        );
        eprintln!("skipped: {what}");
    }
}
