"""An MCP server whose tools take arguments that are not Python identifiers as they stand
(``from``, ``max-results``), as real servers written in other languages do. Built on the
low-level server API, since FastMCP derives argument names from Python parameters."""

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

server = Server("odd")

TOOLS = {
    "search": {"query": {"type": "string"}, "max-results": {"type": "integer"}},
    "route": {"from": {"type": "string"}, "to": {"type": "string"}},
    "plain": {"text": {"type": "string"}},
}


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [types.Tool(name=name, description=f"The {name} tool.",
                       inputSchema={"type": "object", "properties": props,
                                    "required": list(props)})
            for name, props in TOOLS.items()]


@server.call_tool()
async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=f"{name} {sorted(arguments.items())}")]


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
