// A real MCP client (the official TypeScript SDK, pinned in package.json) driving
// `agentic mcp serve`: SDK 1.x (`@modelcontextprotocol/sdk`, protocol 2025-11-25) by default,
// SDK 2.x (`@modelcontextprotocol/client`, pinned to 2026-07-28) with `--modern`.
//
// Usage: node ts_client.mjs [--modern] stdio <agentic binary> [agentic arguments...]
//        node ts_client.mjs [--modern] http <url of /mcp>
// Prints one JSON object with what it saw; the Rust test checks it.
const argv = process.argv.slice(2);
const modern = argv[0] === "--modern";
const [transportName, ...rest] = modern ? argv.slice(1) : argv;
const sdk = modern
  ? await import("@modelcontextprotocol/client")
  : {
      ...(await import("@modelcontextprotocol/sdk/client/index.js")),
      ...(await import("@modelcontextprotocol/sdk/client/streamableHttp.js")),
      ...(await import("@modelcontextprotocol/sdk/types.js")),
    };
const { StdioClientTransport } = modern
  ? await import("@modelcontextprotocol/client/stdio")
  : await import("@modelcontextprotocol/sdk/client/stdio.js");
const { Client, StreamableHTTPClientTransport } = sdk;
// 2.x pins the 2026-07-28 era: connect fails loudly unless the server offers it.
const MODERN = "2026-07-28";
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
const written = modern ? "from-ts-modern.txt" : "from-ts.txt";
const client = new Client(
  { name: "agentic-ts-test", version: "1.0.0" },
  {
    capabilities: { elicitation: {} },
    ...(modern ? { versionNegotiation: { mode: { pin: MODERN } } } : {}),
  },
);
// An elicitation request at 2025-11-25; at 2026-07-28 the SDK answers the server's
// "input required" result with this same handler and retries the call.
const elicit = async (request) => {
  seen.asked.push(request.params.message);
  return { action: "accept", content: { approve: true } };
};
client.setRequestHandler(modern ? "elicitation/create" : sdk.ElicitRequestSchema, elicit);
// Long calls (a 10 MB result) must not meet the SDK's 60 s default.
const options = { timeout: 300_000 };
// 1.x takes a result schema before the options; 2.x does not.
const call = (params) =>
  modern ? client.callTool(params, options) : client.callTool(params, undefined, options);
const texts = (result) =>
  result.content.map((block) => (block.type === "text" ? block.text : "")).join("");

await client.connect(transport);
// 1.x offers one version in `initialize`; the server took it, or connect failed.
seen.protocol = modern ? client.getNegotiatedProtocolVersion() : sdk.LATEST_PROTOCOL_VERSION;
seen.server = client.getServerVersion()?.name;
const tools = await client.listTools(undefined, options);
seen.tools = tools.tools.map((tool) => tool.name).sort();
const now = await call(
  { name: "time.now", arguments: { timezone: "Asia/Tokyo" } },
);
seen.now = { isError: Boolean(now.isError), structured: now.structuredContent };
// This SDK checks structured results against the tool's output schema: artifact.get's `data`
// is any JSON value.
const stored = await call(
  { name: "artifact.store", arguments: { data: { n: 1 }, description: "from TypeScript" } },
);
const artifact = await call(
  { name: "artifact.get", arguments: { id: stored.structuredContent?.id ?? "" } },
);
seen.artifact = { isError: Boolean(artifact.isError), data: artifact.structuredContent?.data };
const big = await call(
  {
    name: "agentic.execute",
    arguments: { code: "'x'.repeat(input.size)", input: { size: 10_000_000 } },
  },
);
seen.big = {
  isError: Boolean(big.isError),
  length: typeof big.structuredContent?.value === "string" ? big.structuredContent.value.length : -1,
  text: big.isError ? texts(big).slice(0, 300) : "",
};
const approved = await call(
  {
    name: "agentic.execute",
    arguments: {
      code: `fs.write({ path: '${written}', content: 'approved' }); 'written'`,
    },
  },
);
seen.approved = {
  isError: Boolean(approved.isError),
  structured: approved.structuredContent,
  text: texts(approved),
};
await client.close();
console.log(JSON.stringify(seen));
