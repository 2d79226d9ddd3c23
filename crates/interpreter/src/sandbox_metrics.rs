//! The sandbox's metrics: their names, and their `# HELP` lines for the exporter.

/// Sandbox worker processes alive (idle or running a script).
pub(crate) const SANDBOX_WORKERS: &str = "agentic_sandbox_workers";
/// Scripts running in the sandbox.
pub(crate) const SANDBOX_RUNNING: &str = "agentic_sandbox_scripts_running";
/// Scripts stopped at a limit, by `limit` (`time`, `memory`, `stack`, `crash`).
pub(crate) const SANDBOX_KILLS: &str = "agentic_sandbox_kills_total";

/// Describes the sandbox's metrics for the exporter's `# HELP` lines.
pub(crate) fn describe_metrics() {
    metrics::describe_gauge!(SANDBOX_WORKERS, "Sandbox worker processes alive");
    metrics::describe_gauge!(SANDBOX_RUNNING, "Scripts running in the sandbox");
    metrics::describe_counter!(SANDBOX_KILLS, "Scripts stopped at a limit, by limit");
}

/// Counts a worker that died under a script, by the limit its death reason names.
pub(crate) fn count_kill(reason: &str) {
    let limit = if reason.contains("memory limit") {
        "memory"
    } else if reason.contains("overflowed the stack") {
        "stack"
    } else {
        "crash"
    };
    metrics::counter!(SANDBOX_KILLS, "limit" => limit).increment(1);
}
