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

# Every tool the server lists, called with no arguments.
call_every_tool() {
  local listed
  listed="$("$agentic" mcp list --json || true)"
  python3 -c '
import json, sys
try:
    servers = json.loads(sys.argv[1])
except ValueError:
    servers = []
for server in servers:
    for tool in server["tools"]:
        print(tool["id"])
' "$listed" | while read -r id; do
    "$agentic" invoke "$id" '{}' 2> >(tee -a "$dir/invoke.err" >&2) || true
  done
}

# `agentic mcp login`, with curl as the browser.
login() {
  "$agentic" mcp login test --no-browser >"$dir/login.out" &
  local pid=$! address=""
  for _ in $(seq 1 200); do
    address="$(grep -m1 '^http' "$dir/login.out" || true)"
    [ -n "$address" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$address" ] && curl -s -L -o /dev/null "$address" || true
  wait "$pid"
}

case "${MCP_CONFORMANCE_SCENARIO:-}" in
  auth/*)
    # OAuth as a person does it: `agentic mcp login` prints the authorization address and
    # waits for the redirect; curl plays the browser (the suite's authorization server
    # approves at once). The suite's client ID metadata document and, when the scenario
    # gives one, its pre-registered client go in the server's `oauth` table, and the
    # tokens in this run's own directory.
    python3 - "$dir/agentic.toml" <<'PY'
import json, os, sys
context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
oauth = {}
# As the suite's own client does: a client ID metadata document, except where the
# scenario checks registration with a new authorization server.
if os.environ.get("MCP_CONFORMANCE_SCENARIO") != "auth/authorization-server-migration":
    oauth["clientMetadataUrl"] = "https://conformance-test.local/client-metadata.json"
if context.get("client_id"):
    oauth["clientId"] = context["client_id"]
if context.get("client_secret"):
    oauth["clientSecret"] = context["client_secret"]
with open(sys.argv[1], "a") as config:
    config.write("[mcp.servers.test.oauth]\n")
    for key, value in oauth.items():
        config.write(f"{key} = {json.dumps(value)}\n")
    config.write(f"[mcp]\ncredentialsDir = {json.dumps(os.path.dirname(sys.argv[1]) + '/credentials')}\n")
PY
    login
    call_every_tool
    # Told that the server needs authorization again (its authorization server changed, or
    # a call needs more scope), a person logs in again and retries.
    state="$("$agentic" mcp list --json 2>/dev/null || true)"
    touch "$dir/invoke.err"
    if [[ "$state" == *"agentic mcp login"* || "$(cat "$dir/invoke.err")" == *"agentic mcp login"* ]]; then
      login
      call_every_tool
    fi
    ;;
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
