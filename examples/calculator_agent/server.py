"""A calculator MCP server: exact integer arithmetic, which a small model cannot do in its head.

Served over stdio by default, as the agent file starts it; ``--http PORT`` serves streamable HTTP
on 127.0.0.1 instead (``http://127.0.0.1:PORT/mcp``).
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
    parser.add_argument("--http", type=int, metavar="PORT",
                        help="serve streamable HTTP on 127.0.0.1:PORT instead of stdio")
    options = parser.parse_args()
    if options.http is None:
        server.run("stdio")
    else:
        server.settings.host, server.settings.port = "127.0.0.1", options.http
        server.run("streamable-http")


if __name__ == "__main__":
    main()
