"""An MCP server over stdio whose ``crash`` tool kills it mid-call, to test that a dead server's
session is replaced."""

import os

try:
    from mcp.server.mcpserver import MCPServer  # mcp 2
except ImportError:  # mcp 1 calls it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("fragile", log_level="WARNING")


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def crash() -> str:
    """Exit at once, without answering."""
    os._exit(1)


if __name__ == "__main__":
    server.run("stdio")
