"""An MCP server over stdio that prints a banner to stdout, which belongs to the protocol:
a client reads the banner as a malformed message."""

from mcp.server.fastmcp import FastMCP

print("Weather server v1.2 ready", flush=True)

server = FastMCP("noisy", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


if __name__ == "__main__":
    server.run("stdio")
