"""Tools: an agent's Python functions and MCP servers, resolved into one :class:`ToolSet`.

An agent names its tools in two places (see :class:`~aworld_train.agent.AgentSpec`):

- ``tools``: Python tools as ``package.module:function`` or ``path/to/file.py:function``
  references or callables; and, optionally, names of MCP tools (``multiply`` or AWorld's
  qualified ``calculator__multiply``). Naming MCP tools restricts their server to the named
  ones; a server none of whose tools is named offers all of them.
- ``mcp_config`` in AWorld's format, ``{"mcpServers": {name: server}}``, where a server is
  ``{"command": ..., "args": [...], "env": {...}, "cwd": ...}`` (stdio, the default),
  ``{"type": "streamable-http", "url": ..., "headers": {...}}`` (``http`` and ``streamable_http``
  are accepted too) or ``{"type": "sse", "url": ...}``;
  ``"timeout"`` (seconds) bounds starting or reaching it and each call, ``"disabled": true``
  skips it, and ``${VAR}`` in strings is replaced from the environment. ``mcp_servers`` lists the
  servers the agent uses; when it is empty, every server of ``mcp_config`` is used.

A stdio server whose ``command`` is ``python`` or ``python3`` runs with the interpreter that runs
aworld-train (so it sees the same packages; ``PYTHONPATH`` is passed on), and every stdio server
starts in ``base_dir`` (the job file's folder), or in ``cwd`` relative to it. Like the ``mcp``
client, a server gets only a minimal environment (``PATH``, ``HOME``, ...) plus its ``env``.

:func:`resolve_tools` imports the Python tools, builds an OpenAI-style function schema for each
from its signature, type hints (through pydantic) and docstring (through ``docstring_parser``),
connects to every MCP server through the ``mcp`` library, lists its tools, and fails with a
one-line :class:`~aworld_train.errors.AgentError` naming the server or tool that is wrong
(listing opens a session and closes it). A stdio
server's stderr goes to a temporary file, never to the terminal; a server that fails says so
with its exit status and its last stderr line, and one that writes to stdout what is not an MCP
message is refused (stdout carries the protocol). Every message is redacted
(:func:`aworld_train.run.redaction.redact_text`): a URL's credentials never reach the terminal.

Every tool is then called the same way, ``tool.call(**arguments) -> str``, from synchronous
code in any thread (``await tool.acall(...)`` from async code). MCP calls share one session per
server per process, opened on first use on a background event loop and closed at exit or by
:meth:`ToolSet.close`; a call that fails because its server died raises, and the next call opens
a new session. A tool set pickles, so another process (a Ray worker) can call the same tools.
``mcp`` is imported only when MCP servers are configured (``pip install aworld-train[mcp]``);
mcp 1 (1.10 or later) and mcp 2 both work.

Argument names are passed as they stand: an MCP tool may take ``from`` or ``max-results``.
:meth:`Tool.as_function`, for libraries that call tools as Python functions (TRL), refuses such
a tool in one line rather than renaming its arguments, since a model trained on other names than
the server's would call the server wrongly once deployed.

The package's modules: :mod:`~aworld_train.tools._tool` (what every tool is),
:mod:`~aworld_train.tools._python_tools` (Python functions and their schemas),
:mod:`~aworld_train.tools._mcp_config` (the agent's MCP servers),
:mod:`~aworld_train.tools._mcp_client` (connecting to one), :mod:`~aworld_train.tools._mcp_sessions`
(calling MCP tools through open sessions) and :mod:`~aworld_train.tools.toolset` (the tool set
that joins them).
"""

from aworld_train.tools._mcp_config import DEFAULT_TIMEOUT, QUALIFIER, MCPServer, mcp_servers
from aworld_train.tools._mcp_sessions import MCPTool, close_sessions
from aworld_train.tools._python_tools import PythonTool, function_schema
from aworld_train.tools._tool import Tool
from aworld_train.tools.toolset import ToolSet, resolve_tools

__all__ = [
    "DEFAULT_TIMEOUT",
    "QUALIFIER",
    "MCPServer",
    "MCPTool",
    "PythonTool",
    "Tool",
    "ToolSet",
    "close_sessions",
    "function_schema",
    "mcp_servers",
    "resolve_tools",
]
