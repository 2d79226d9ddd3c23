"""One BFCL task's functions as real tools: an MCP server (stdio) on the official Python SDK.

  python3 server.py --category multiple --id multiple_0 --run-dir DIR --turn 0

Every function of the task is a tool, its BFCL doc turned into a JSON Schema (BFCL's own
mapping of its types to OpenAPI's). Each call is appended to DIR/calls.jsonl under the name
BFCL gave the function, for `driver.py score`.

- AST categories: a call is recorded and answered with a fixed "success"; BFCL judges the
  calls, not what they return.
- Multi-turn: a call runs on BFCL's simulated APIs (file system, trading bot, …) made from
  the task's initial config, through BFCL's own executor. agentic starts this server again
  for every turn (`agentic prompt -c`), so at start it replays the calls of earlier turns on
  fresh instances, which is also what BFCL's checker does: the model sees the state the
  checker will judge.
"""

import argparse
import asyncio
import copy
import json
from pathlib import Path

import mcp.server.stdio
import mcp_types as types
from mcp.server.lowlevel import Server

import driver

# A multi-turn task's instances live in BFCL's executor under this model name; the checker
# uses its own names, so the two never share an instance.
LIVE_MODEL_NAME = "agentic_live"


def json_schema(parameters):
    """A BFCL parameter doc ({"type": "dict", "properties": …}) as a JSON Schema object."""
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

    def convert(schema):
        schema = dict(schema)
        kind = schema.get("type", "string")
        if kind == "float":
            schema["description"] = schema.get("description", "") + " This is a float type value."
        schema["type"] = GORILLA_TO_OPENAPI.get(kind, "string")
        if "properties" in schema:
            schema["properties"] = {key: convert(value) for key, value in schema["properties"].items()}
        if "items" in schema:
            schema["items"] = convert(schema["items"])
        return schema

    schema = convert(parameters)
    schema["type"] = "object"
    schema.setdefault("properties", {})
    return schema


def tool_name(name):
    """MCP tool names and code mode's functions have no dots: `math.factorial` is
    `math_factorial` (BFCL does the same for providers that refuse dots)."""
    return name.replace(".", "_")


class Task:
    def __init__(self, category, task_id, run_dir, turn):
        self.category = category
        self.entry = driver.load_entry(category, task_id)
        self.run_dir = Path(run_dir)
        self.turn = turn
        self.names = {tool_name(function["name"]): function["name"] for function in self.entry["function"]}
        self.tools = [
            types.Tool(
                name=tool_name(function["name"]),
                description=function.get("description", ""),
                input_schema=json_schema(function["parameters"]),
            )
            for function in self.entry["function"]
        ]
        if category in driver.MULTI_TURN_CATEGORIES:
            for call in driver.read_calls(run_dir):
                self.execute(call["name"], call["arguments"])

    def execute(self, name, arguments):
        """Runs one call on the simulated APIs; BFCL's executor keeps the instances."""
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

        results, _ = execute_multi_turn_func_call(
            func_call_list=[driver.call_string(name, arguments)],
            initial_config=copy.deepcopy(self.entry["initial_config"]),
            involved_classes=self.entry["involved_classes"],
            model_name=LIVE_MODEL_NAME,
            test_entry_id=self.entry["id"],
        )
        return results[0]

    def record(self, name, arguments):
        line = json.dumps({"turn": self.turn, "name": name, "arguments": arguments})
        with open(self.run_dir / "calls.jsonl", "a") as calls:
            calls.write(line + "\n")

    def call(self, tool, arguments):
        name = self.names.get(tool)
        if name is None:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"unknown tool {tool}")], is_error=True
            )
        self.record(name, arguments)
        if self.category in driver.AST_CATEGORIES:
            # Plain text, not an object: a code-mode program that puts the result in its
            # answer then shows a word, where an object's missing fields sent it round again.
            return types.CallToolResult(content=[types.TextContent(type="text", text="success")])
        text = self.execute(name, arguments)
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=value if isinstance(value, dict) else None,
        )


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--category", required=True, choices=driver.CATEGORIES)
    parser.add_argument("--id", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--turn", type=int, default=0)
    args = parser.parse_args()
    task = Task(args.category, args.id, args.run_dir, args.turn)

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=task.tools)

    async def call_tool(ctx, params):
        return task.call(params.name, dict(params.arguments or {}))

    server = Server("bfcl", on_list_tools=list_tools, on_call_tool=call_tool)
    async with mcp.server.stdio.stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main())
