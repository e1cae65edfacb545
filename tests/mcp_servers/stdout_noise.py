"""An MCP server over stdio that prints a banner to stdout, which belongs to the protocol:
a client reads the banner as a malformed message."""

try:
    from mcp.server.mcpserver import MCPServer  # mcp 2
except ImportError:  # mcp 1 calls it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer

print("Weather server v1.2 ready", flush=True)

server = MCPServer("noisy", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


if __name__ == "__main__":
    server.run("stdio")
