#!/usr/bin/env bash
# The client under test for the MCP conformance suite (`cargo xtask conformance`): the real
# `agentic` binary, with the suite's test server as its only MCP server, doing what each
# scenario asks of a client. The suite passes the server's URL as the last argument, the
# scenario in MCP_CONFORMANCE_SCENARIO and its data in MCP_CONFORMANCE_CONTEXT.
set -euo pipefail
url="${!#}"
agentic="${AGENTIC_BIN:-agentic}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cat >"$dir/agentic.toml" <<TOML
database = "sqlite://$dir/agentic.db"
[mcp.servers.test]
url = "$url"
startupTimeoutMs = 20000
TOML
export AGENTIC_CONFIG="$dir/agentic.toml"

invoke() { "$agentic" invoke "test.$1" "${2:-{\}}"; }

# Tool calls the scenario names in its context, with their arguments.
context_calls() {
  python3 -c '
import json, os, sys
for call in json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}").get("toolCalls", []):
    print(call["name"] + "\t" + json.dumps(call.get("arguments", {})))
'
}

case "${MCP_CONFORMANCE_SCENARIO:-}" in
  tools_call | tools-call)
    invoke add_numbers '{"a": 5, "b": 3}'
    ;;
  json-schema-2020-12-preservation)
    # The tool's input schema as agentic holds it, sent back: keywords must survive.
    schema="$("$agentic" tool-schema test.json_schema_2020_12_tool)"
    invoke json_schema_echo "$(python3 -c 'import json, sys; print(json.dumps({"schema": json.load(sys.stdin)["input"]}))' <<<"$schema")"
    ;;
  http-invalid-tool-headers)
    invoke valid_tool '{"region": "us-west1"}'
    ;;
  sep-2322-client-request-state)
    invoke test_mrtr_echo_state
    invoke test_mrtr_unrelated
    invoke test_mrtr_no_state
    invoke test_mrtr_no_result_type
    ;;
  *)
    calls="$(context_calls)"
    if [ -n "$calls" ]; then
      while IFS=$'\t' read -r name arguments; do
        invoke "$name" "$arguments"
      done <<<"$calls"
    else
      # Connect and list the tools.
      "$agentic" mcp list --json
    fi
    ;;
esac
