"""An MCP server over stdio whose ``die`` tool logs a line to stderr and exits with status 4
mid-call, without answering."""

import os
import sys

try:
    from mcp.server.mcpserver import MCPServer  # mcp 2
except ImportError:  # mcp 1 calls it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("dying", log_level="WARNING")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


@server.tool()
def die() -> str:
    """Exit at once, without answering."""
    print("out of memory while answering", file=sys.stderr, flush=True)
    os._exit(4)


if __name__ == "__main__":
    server.run("stdio")
