// A real MCP client (the official TypeScript SDK, pinned in package.json) driving
// `agentic mcp serve`.
//
// Usage: node ts_client.mjs stdio <agentic binary> [agentic arguments...]
//        node ts_client.mjs http <url of /mcp>
// Prints one JSON object with what it saw; the Rust test checks it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

const [transportName, ...rest] = process.argv.slice(2);
const transport =
  transportName === "stdio"
    ? new StdioClientTransport({
        command: rest[0],
        args: [...rest.slice(1), "mcp", "serve"],
        env: process.env,
        stderr: "inherit",
      })
    : new StreamableHTTPClientTransport(new URL(rest[0]));

const seen = { asked: [] };
const client = new Client(
  { name: "agentic-ts-test", version: "1.0.0" },
  { capabilities: { elicitation: {} } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  seen.asked.push(request.params.message);
  return { action: "accept", content: { approve: true } };
});
// Long calls (a 10 MB result) must not meet the SDK's 60 s default.
const options = { timeout: 300_000 };
const texts = (result) =>
  result.content.map((block) => (block.type === "text" ? block.text : "")).join("");

await client.connect(transport);
// This SDK offers one version in `initialize`; the server took it, or connect failed.
seen.protocol = LATEST_PROTOCOL_VERSION;
seen.server = client.getServerVersion()?.name;
const tools = await client.listTools(undefined, options);
seen.tools = tools.tools.map((tool) => tool.name).sort();
const now = await client.callTool(
  { name: "time.now", arguments: { timezone: "Asia/Tokyo" } },
  undefined,
  options,
);
seen.now = { isError: Boolean(now.isError), structured: now.structuredContent };
// This SDK checks structured results against the tool's output schema: artifact.get's `data`
// is any JSON value.
const stored = await client.callTool(
  { name: "artifact.store", arguments: { data: { n: 1 }, description: "from TypeScript" } },
  undefined,
  options,
);
const artifact = await client.callTool(
  { name: "artifact.get", arguments: { id: stored.structuredContent?.id ?? "" } },
  undefined,
  options,
);
seen.artifact = { isError: Boolean(artifact.isError), data: artifact.structuredContent?.data };
const big = await client.callTool(
  {
    name: "agentic.execute",
    arguments: { code: "'x'.repeat(input.size)", input: { size: 10_000_000 } },
  },
  undefined,
  options,
);
seen.big = {
  isError: Boolean(big.isError),
  length: typeof big.structuredContent?.value === "string" ? big.structuredContent.value.length : -1,
  text: big.isError ? texts(big).slice(0, 300) : "",
};
const approved = await client.callTool(
  {
    name: "agentic.execute",
    arguments: {
      code: "fs.write({ path: 'from-ts.txt', content: 'approved' }); 'written'",
    },
  },
  undefined,
  options,
);
seen.approved = {
  isError: Boolean(approved.isError),
  structured: approved.structuredContent,
  text: texts(approved),
};
await client.close();
console.log(JSON.stringify(seen));
