"""The official Python MCP SDK's high-level client at protocol 2026-07-28 (stateless: each
request carries its version and capabilities; approvals come back as "input required")
driving `agentic mcp serve`.

Usage: modern_client.py stdio <result size> <agentic binary> [agentic arguments...]
       modern_client.py http <result size> <url of /mcp>
Prints one JSON object with what it saw; the Rust test checks it.
"""
import asyncio
import json
import os
import sys

from mcp import StdioServerParameters, types
from mcp.client.client import Client


def texts(result):
    return "".join(getattr(block, "text", "") for block in result.content)


async def main():
    transport, size, *rest = sys.argv[1:]
    if transport == "stdio":
        binary, *arguments = rest
        server = StdioServerParameters(
            command=binary, args=[*arguments, "mcp", "serve"], env=dict(os.environ)
        )
    else:
        server = rest[0]
    seen = {"asked": []}

    async def answer(context, params):
        seen["asked"].append(params.message)
        if "dry run" in params.message and "plan-b.txt" in params.message:
            # A plan: of its three writes, the first and the last.
            return types.ElicitResult(action="accept", content={"approve": True, "only": "1 3"})
        return types.ElicitResult(action="accept", content={"approve": True})

    async with Client(
        server, mode="2026-07-28", elicitation_callback=answer, read_timeout_seconds=300
    ) as client:
        seen["protocol"] = client.session.protocol_version
        tools = await client.list_tools()
        seen["tools"] = sorted(tool.name for tool in tools.tools)
        now = await client.call_tool("time.now", {"timezone": "Asia/Tokyo"})
        seen["now"] = {"isError": bool(now.is_error), "structured": now.structured_content}
        written = await client.call_tool(
            "fs.write", {"path": "modern-direct.txt", "content": "direct"}
        )
        seen["direct"] = {"isError": bool(written.is_error), "text": texts(written)}
        executed = await client.call_tool(
            "agentic.execute",
            {
                "code": "fs.write({ path: 'modern-script.txt', content: 'script' }); 'written'",
            },
        )
        seen["execute"] = {
            "isError": bool(executed.is_error),
            "structured": executed.structured_content,
            "text": texts(executed),
        }
        planned = await client.call_tool(
            "agentic.execute",
            {
                "code": (
                    "const done = [];\n"
                    "for (const name of ['plan-a.txt', 'plan-b.txt', 'plan-c.txt']) {\n"
                    "  try { fs.write({ path: name, content: name }); done.push(name); }\n"
                    "  catch (error) { done.push(name + ': ' + error.message); }\n"
                    "}\n"
                    "done"
                ),
            },
        )
        seen["plan"] = {
            "isError": bool(planned.is_error),
            "structured": planned.structured_content,
            "text": texts(planned),
        }
        big = await client.call_tool(
            "agentic.execute", {"code": "'y'.repeat(input.n)", "input": {"n": int(size)}}
        )
        value = (big.structured_content or {}).get("value")
        seen["big"] = {
            "isError": bool(big.is_error),
            "length": len(value) if isinstance(value, str) else -1,
            "text": texts(big)[:300],
        }
        if "everything.get-sum" in seen["tools"]:
            # The declaration names the function a script calls; calling it works.
            found = await client.call_tool("agentic.search_tools", {"query": "get sum"})
            tool = next(
                tool
                for tool in found.structured_content["tools"]
                if tool["id"] == "everything.get-sum"
            )
            seen["sumDeclaration"] = tool["declaration"]
            name = tool["call"]
            summed = await client.call_tool(
                "agentic.execute", {"code": f"{name}({{ a: 40, b: 2 }})"}
            )
            seen["sum"] = {
                "isError": bool(summed.is_error),
                "structured": summed.structured_content,
                "text": texts(summed)[:300],
            }
        if "files.read_text_file" in seen["tools"]:
            found = await client.call_tool("agentic.search_tools", {"query": "read text file"})
            seen["readTextFile"] = next(
                tool["call"]
                for tool in found.structured_content["tools"]
                if tool["id"] == "files.read_text_file"
            )
    print(json.dumps(seen))


asyncio.run(main())
