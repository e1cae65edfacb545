"""The GAIA example's tools as a local MCP server: a small fact table about landmarks and an
exact calculator. Its questions take two or three calls: look two facts up, then compute.

Served over stdio, as the agent in ``main.py`` starts it. Stands in for the hosted GAIA
environment AWorld's own example connects to, so the example runs offline.
"""

from __future__ import annotations

import ast
import operator

try:  # mcp 2
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1 calls it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer
    from mcp.server.fastmcp.exceptions import ToolError

server = MCPServer("gaia_tools", log_level="WARNING")

# Opening (or completion) years and heights in metres.
LANDMARKS: dict[str, dict[str, str | int]] = {
    "eiffel tower": {"city": "Paris", "completed": 1889, "height_m": 330},
    "statue of liberty": {"city": "New York", "completed": 1886, "height_m": 93},
    "big ben": {"city": "London", "completed": 1859, "height_m": 96},
    "sydney opera house": {"city": "Sydney", "completed": 1973, "height_m": 65},
    "golden gate bridge": {"city": "San Francisco", "completed": 1937, "height_m": 227},
    "burj khalifa": {"city": "Dubai", "completed": 2010, "height_m": 828},
}

OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}


@server.tool()
def look_up(landmark: str) -> dict[str, str | int]:
    """Facts about a landmark: its city, the year it was completed and its height in metres.

    Args:
        landmark: the landmark's name, e.g. "Eiffel Tower".
    """
    facts = LANDMARKS.get(" ".join(landmark.lower().split()))
    if facts is None:
        # A ToolError's message reaches the model (mcp 2 hides that of any other exception).
        raise ToolError(f"no facts about {landmark!r}; known: {', '.join(sorted(LANDMARKS))}")
    return facts


@server.tool()
def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression exactly: numbers, + - * / and parentheses.

    Args:
        expression: e.g. "(828 - 330) / 2".
    """
    try:
        return _evaluate(ast.parse(expression, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError) as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


def _evaluate(node: ast.AST) -> float:
    # Only numbers and the four operations: an expression is never run as Python.
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"not arithmetic: {ast.unparse(node)}")


if __name__ == "__main__":
    server.run("stdio")
