"""An MCP server over stdio that fails before it speaks: it logs to stderr and exits with
status 3, as a server missing its configuration does."""

import sys

print("starting the weather server", file=sys.stderr)
print("fatal: WEATHER_API_KEY is not set", file=sys.stderr)
sys.exit(3)
