"""An MCP server (official Python SDK) whose `wait` tool writes "started" to the file `marker`
names, runs until the client cancels it, and then writes "cancelled" there: the mcp plugin's
tests see from that file that the call reached the server, and that dropping it sent
`notifications/cancelled`. Run: python3 cancel_probe.py (MCP on stdio)."""

import asyncio
import pathlib

import anyio
import mcp.server.stdio
import mcp_types as types
from mcp.server.lowlevel import Server

WAIT = types.Tool(
    name="wait",
    description="Waits a minute, unless cancelled; then writes the marker file.",
    input_schema={
        "type": "object",
        "properties": {"marker": {"type": "string", "description": "file to write when cancelled"}},
        "required": ["marker"],
    },
)


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[WAIT])


async def call_tool(ctx, params):
    marker = pathlib.Path(params.arguments["marker"])
    marker.write_text("started")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        marker.write_text("cancelled")
        raise
    return types.CallToolResult(content=[types.TextContent(type="text", text="not cancelled")])


async def main():
    server = Server("cancel-probe", on_list_tools=list_tools, on_call_tool=call_tool)
    async with mcp.server.stdio.stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main())
