"""An MCP server whose tools take arguments that are not Python identifiers as they stand
(``from``, ``max-results``), as real servers written in other languages do. Built on the
low-level server API, since FastMCP (MCPServer in mcp 2) derives argument names from Python
parameters. mcp 1 registers the low-level handlers with decorators, mcp 2 through the
constructor: :func:`build_server` does either."""

from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = {
    "search": {"query": {"type": "string"}, "max-results": {"type": "integer"}},
    "route": {"from": {"type": "string"}, "to": {"type": "string"}},
    "plain": {"text": {"type": "string"}},
}


async def list_tools() -> list[types.Tool]:
    # inputSchema, the wire's name, is the field's name in mcp 1 and its alias in mcp 2.
    return [
        types.Tool(
            name=name,
            description=f"The {name} tool.",
            inputSchema={"type": "object", "properties": props, "required": list(props)},
        )
        for name, props in TOOLS.items()
    ]


async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=f"{name} {sorted(arguments.items())}")]


def build_server() -> Server:
    """The server, its two handlers registered as the installed ``mcp`` expects."""
    if hasattr(Server, "call_tool"):  # mcp 1: decorators
        server = Server("odd")
        server.list_tools()(list_tools)
        server.call_tool()(call_tool)
        return server

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await list_tools())

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=await call_tool(params.name, params.arguments or {}))

    return Server("odd", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def main() -> None:
    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
