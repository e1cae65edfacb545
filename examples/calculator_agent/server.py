"""A calculator MCP server: exact integer arithmetic, which a small model cannot do in its head.

Served over stdio by default, as the agent file starts it. ``--transport streamable-http --port
PORT`` serves it at ``http://127.0.0.1:PORT/mcp`` instead, ``--transport sse`` at ``.../sse``.
"""

from __future__ import annotations

import argparse

from mcp.server.fastmcp import FastMCP

server = FastMCP("calculator", log_level="WARNING")


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
        raise ValueError("division by zero")
    return a / b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transport", choices=("stdio", "streamable-http", "sse"), default="stdio")
    parser.add_argument("--port", type=int, default=8931, help="the port of an HTTP transport")
    options = parser.parse_args()
    server.settings.host, server.settings.port = "127.0.0.1", options.port
    server.run(options.transport)


if __name__ == "__main__":
    main()
