"""A real MCP client (the official Python SDK, `mcp` on PyPI) driving `agentic mcp serve`.

Usage: client.py stdio <agentic binary> [agentic arguments...]
       client.py http <url of /mcp> <user id>
Prints one JSON object with what it saw; the Rust test checks it.
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


def texts(result):
    return "".join(getattr(block, "text", "") for block in result.content)


async def main():
    transport, *rest = sys.argv[1:]
    if transport == "stdio":
        binary, *arguments = rest
        server = StdioServerParameters(
            command=binary, args=[*arguments, "mcp", "serve"], env=dict(os.environ)
        )
        async with stdio_client(server) as (read, write):
            seen = await use(read, write, elicitation=True)
    else:
        url, user = rest
        async with create_mcp_http_client(headers={"X-User-Id": user}) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                seen = await use(streams[0], streams[1], elicitation=False)
    print(json.dumps(seen))


async def use(read, write, elicitation):
    seen = {"asked": []}

    async def answer(context, params):
        # The first approval is declined, the next accepted.
        seen["asked"].append(params.message)
        if len(seen["asked"]) == 1:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"approve": True})

    callback = answer if elicitation else None
    if True:
        async with ClientSession(read, write, elicitation_callback=callback) as session:
            init = await session.initialize()
            seen["server"] = init.server_info.name
            seen["protocol"] = init.protocol_version
            tools = await session.list_tools()
            seen["tools"] = sorted(tool.name for tool in tools.tools)
            now = await session.call_tool("time.now", {"timezone": "Asia/Tokyo"})
            seen["now"] = {"isError": bool(now.is_error), "structured": now.structured_content}
            bad = await session.call_tool("time.now", {"timezone": 7})
            seen["bad"] = {"isError": bool(bad.is_error), "text": texts(bad)}
            executed = await session.call_tool(
                "agentic.execute",
                {
                    "code": "const t = time.now({ timezone: 'UTC' }); log('zone', t.timezone); input.a + input.b",
                    "input": {"a": 40, "b": 2},
                },
            )
            seen["execute"] = {
                "isError": bool(executed.is_error),
                "structured": executed.structured_content,
                "text": texts(executed),
            }
            found = await session.call_tool("agentic.search_tools", {"query": "time"})
            seen["search"] = found.structured_content
            progress = []

            async def on_progress(value, total, message):
                progress.append(message)

            prompted = await session.call_tool(
                "agentic.prompt",
                {"message": "What time is it?", "mode": "code"},
                progress_callback=on_progress,
            )
            if "everything.trigger-long-running-operation" in seen["tools"]:
                # An MCP server's progress, through agentic's client and back out of its server.
                relayed = []
                counts = []

                async def on_relayed(value, total, message):
                    relayed.append(message)
                    counts.append([value, total])

                await session.call_tool(
                    "everything.trigger-long-running-operation",
                    {"duration": 1, "steps": 3},
                    progress_callback=on_relayed,
                )
                seen["relayed"] = relayed
                seen["relayedCounts"] = counts
                # Its image, saved among the user's files, comes back as image content.
                image = await session.call_tool("everything.get-tiny-image", {})
                seen["image"] = [
                    {"type": block.type, "mimeType": getattr(block, "mime_type", None),
                     "bytes": len(getattr(block, "data", "") or "") * 3 // 4}
                    for block in image.content
                ]
            writes = []
            for _ in range(2):
                written = await session.call_tool(
                    "fs.write", {"path": "from-mcp.txt", "content": "hello"}
                )
                writes.append({"isError": bool(written.is_error), "text": texts(written)})
            seen["writes"] = writes
            seen["prompt"] = {
                "isError": bool(prompted.is_error),
                "structured": prompted.structured_content,
                "progress": progress,
            }
    return seen


asyncio.run(main())
