"""A calculator MCP server: exact integer arithmetic, which a small model cannot do in its head.

Served over stdio by default, as the agent file starts it. ``--transport streamable-http --port
PORT`` serves it at ``http://127.0.0.1:PORT/mcp`` instead, ``--transport sse`` at ``.../sse``.
"""

from __future__ import annotations

import argparse

try:  # mcp 2
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1 calls it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer
    from mcp.server.fastmcp.exceptions import ToolError

server = MCPServer("calculator", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first addend.
        b: the second addend.
    """
    return a + b


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiply two integers exactly.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return a * b


@server.tool()
def divide(a: int, b: int) -> float:
    """Divide a by b.

    Args:
        a: the dividend.
        b: the divisor, not zero.
    """
    if b == 0:
        # A ToolError's message reaches the model (mcp 2 hides that of any other exception).
        raise ToolError("division by zero")
    return a / b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transport", choices=("stdio", "streamable-http", "sse"), default="stdio")
    parser.add_argument("--port", type=int, default=8931, help="the port of an HTTP transport")
    options = parser.parse_args()
    if options.transport == "stdio":
        server.run("stdio")
    elif hasattr(server.settings, "port"):  # mcp 1 reads the address from the server's settings
        server.settings.host, server.settings.port = "127.0.0.1", options.port
        server.run(options.transport)
    else:  # mcp 2 takes it as arguments of run
        server.run(options.transport, host="127.0.0.1", port=options.port)


if __name__ == "__main__":
    main()
