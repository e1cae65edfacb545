"""Agent tools: Python functions described from their signatures, and real MCP servers (the
example's calculator) over stdio and streamable HTTP through the ``mcp`` library."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import pickle
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Optional

import pytest
from aworld_train import AgentTrainer
from aworld_train.agent import AgentSpec, load_agent
from aworld_train.errors import AgentError
from aworld_train.tools import (
    MCPTool,
    ToolSet,
    close_sessions,
    function_schema,
    mcp_servers,
    resolve_tools,
)

pytest.importorskip("mcp", reason="needs the mcp extra: pip install aworld-train[mcp]")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "calculator_agent"
STDIO = {"calculator": {"command": "python", "args": ["server.py"]}}
SERVERS = Path(__file__).resolve().parent / "mcp_servers"


def calculator_agent(**fields: Any) -> AgentSpec:
    return AgentSpec(name="calc", mcp_config={"mcpServers": STDIO}, **fields)


# --- Python tools ---------------------------------------------------------------------------


def convert(
    amount: float,
    unit: Literal["km", "mi"],
    digits: int = 2,
    note: Optional[str] = None,  # noqa: UP045
    tags: list[str] | None = None,
) -> str:
    """Convert a distance.

    Longer explanation on a second line.

    Args:
        amount: how far, in
            the given unit.
        unit: the unit of ``amount``.
        digits: decimals to keep.

    Returns:
        The distance in the other unit.
    """
    factor = 1.609344 if unit == "mi" else 1 / 1.609344
    return f"{round(amount * factor, digits)}"


def lookup(key: str, table: dict[str, int], strict: bool = True) -> int:
    """Look a key up.

    :param key: the key.
    :param table: the table to search.
    :returns: the value.
    """
    return table[key]


def test_python_tool_schema_from_signature_hints_and_google_docstring() -> None:
    description, parameters = function_schema(convert)
    assert description == "Convert a distance. Longer explanation on a second line."
    assert parameters == {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "description": "how far, in the given unit."},
            "unit": {
                "enum": ["km", "mi"],
                "type": "string",
                "description": "the unit of ``amount``.",
            },
            "digits": {"type": "integer", "description": "decimals to keep.", "default": 2},
            "note": {"type": ["string", "null"], "default": None},
            "tags": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
            },
        },
        "required": ["amount", "unit"],
    }


def test_python_tool_schema_from_a_sphinx_docstring() -> None:
    description, parameters = function_schema(lookup)
    assert description == "Look a key up."
    assert parameters["properties"]["key"] == {"type": "string", "description": "the key."}
    assert parameters["properties"]["table"] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "description": "the table to search.",
    }
    assert parameters["properties"]["strict"] == {"type": "boolean", "default": True}
    assert parameters["required"] == ["key", "table"]


class Shape(enum.Enum):
    SQUARE = "square"
    CIRCLE = "circle"


@dataclasses.dataclass
class Size:
    """A width and a height."""

    width: float
    height: float = 1.0


@dataclasses.dataclass
class Tree:
    label: str
    children: list[Tree]


class Opaque:
    """A class no JSON schema describes."""


def draw(shapes: list[Shape], size: Size, tree: Tree, canvas: Opaque) -> str:
    """Draw shapes.

    Parameters
    ----------
    shapes : list of Shape
        what to draw.
    size
        how big.
    """
    return ""


def test_python_tool_schema_of_enums_classes_and_a_numpy_docstring() -> None:
    description, parameters = function_schema(draw)
    assert description == "Draw shapes."
    properties = parameters["properties"]
    # Self-contained: no "$ref" into "$defs" that a chat template would not carry; no titles.
    assert "$defs" not in str(parameters) and "title" not in str(parameters)
    assert properties["shapes"] == {
        "type": "array",
        "description": "what to draw.",
        "items": {"type": "string", "enum": ["square", "circle"]},
    }
    assert properties["size"] == {
        "type": "object",
        "description": "how big.",
        "required": ["width"],
        "properties": {"width": {"type": "number"}, "height": {"type": "number", "default": 1.0}},
    }
    # A recursive type is described one level deep; a class without a schema takes anything.
    assert properties["tree"]["properties"]["children"] == {"type": "array", "items": {}}
    assert properties["canvas"] == {}
    assert parameters["required"] == ["shapes", "size", "tree", "canvas"]


def test_python_tools_from_references_and_callables(tmp_path: Path) -> None:
    (tmp_path / "my_tools.py").write_text(
        "def shout(text: str) -> str:\n"
        "    '''Upper-case the text.\n\n    Args:\n        text: what to shout.\n    '''\n"
        "    return text.upper()\n\n"
        "def fail(x: int) -> int:\n    '''Always fails.'''\n    raise RuntimeError('no luck')\n"
    )
    spec = AgentSpec(tools=["my_tools.py:shout", "my_tools.py:fail", convert])
    tools = resolve_tools(spec, base_dir=tmp_path)
    assert tools.names == ["shout", "fail", "convert"]
    assert tools.schemas()[0] == {
        "type": "function",
        "function": {
            "name": "shout",
            "description": "Upper-case the text.",
            "parameters": {
                "type": "object",
                "required": ["text"],
                "properties": {"text": {"type": "string", "description": "what to shout."}},
            },
        },
    }
    assert tools.call("shout", '{"text": "hi"}') == "HI"
    assert tools.call("convert", {"amount": 10, "unit": "mi", "digits": 1}) == "16.1"
    # The model sees its own mistakes and the tool's errors as text.
    assert tools.call("fail", {"x": 1}) == "Error: RuntimeError: no luck"
    assert tools.call("shout", {"txt": "hi"}).startswith("Error: TypeError")
    assert tools.call("shout", "{not json").startswith(
        "Error: arguments of 'shout' are not valid JSON"
    )
    assert tools.call("shuot", {}).startswith("Error: unknown tool 'shuot' (did you mean 'shout'?)")
    # A file tool pickles as its absolute reference and is imported afresh elsewhere.
    copy = pickle.loads(pickle.dumps(tools))
    assert copy.tools[0].reference == f"{tmp_path / 'my_tools.py'}:shout"
    assert copy.call("shout", {"text": "ok"}) == "OK"


def test_async_python_tools_and_async_callers() -> None:
    async def echo(text: str) -> str:
        """Say it back."""
        await asyncio.sleep(0)
        return text

    tools = resolve_tools(AgentSpec(tools=[echo, convert]))
    assert tools.call("echo", {"text": "sync"}) == "sync"

    async def from_a_loop() -> list[str]:
        return await asyncio.gather(
            tools.acall("echo", {"text": "async"}),
            tools.acall("convert", '{"amount": 1, "unit": "km", "digits": 3}'),
            tools.acall("nope", {}),
        )

    echoed, converted, unknown = asyncio.run(from_a_loop())
    assert (echoed, converted) == ("async", "0.621")
    assert unknown.startswith("Error: unknown tool 'nope'")


def test_bad_python_tools_are_named() -> None:
    def positional(x: int, /) -> int:
        return x

    with pytest.raises(AgentError, match="tool 'positional': argument 'x' is positional-only"):
        resolve_tools(AgentSpec(tools=[positional]))
    with pytest.raises(AgentError, match="agent tool 'json:nothing_here'.*not found in json"):
        resolve_tools(AgentSpec(tools=["json:nothing_here"]))
    with pytest.raises(
        AgentError,
        match="'multiply' is not a module:function reference, and the agent has no MCP servers",
    ):
        resolve_tools(AgentSpec(tools=["multiply"]))


def test_as_function_carries_the_schema_for_libraries_that_read_callables() -> None:
    tools = resolve_tools(AgentSpec(tools=[convert]))
    function = tools.get("convert").as_function()
    assert function.__name__ == "convert"
    assert list(function.__signature__.parameters) == ["amount", "unit", "digits", "note", "tags"]
    assert "Args:\n    amount: how far, in the given unit." in function.__doc__
    assert function(5, unit="km", digits=3) == "3.107"
    transformers = pytest.importorskip("transformers")
    schema = transformers.utils.get_json_schema(function)
    assert schema["function"]["parameters"]["required"] == ["amount", "unit"]
    assert schema["function"]["parameters"]["properties"]["unit"]["enum"] == ["km", "mi"]


# --- MCP over stdio ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stdio_tools() -> Iterator[ToolSet]:
    tools = resolve_tools(calculator_agent(), base_dir=EXAMPLE)
    yield tools
    tools.close()


def test_stdio_server_lists_its_tools_with_their_schemas(stdio_tools: ToolSet) -> None:
    assert stdio_tools.names == ["add", "multiply", "divide"]
    assert [server.name for server in stdio_tools.servers] == ["calculator"]
    multiply = stdio_tools.get("calculator__multiply")  # AWorld's qualified name works too
    assert multiply.name == "multiply"
    assert multiply.description.startswith("Multiply two integers exactly.")
    assert multiply.parameters["required"] == ["a", "b"]
    assert multiply.parameters["properties"]["a"]["type"] == "integer"


def test_stdio_tool_calls_return_the_servers_answers(stdio_tools: ToolSet) -> None:
    assert stdio_tools.call("multiply", '{"a": 1234, "b": 5678}') == str(1234 * 5678)
    assert stdio_tools.get("add").call(a=-7, b=3) == "-4"
    assert stdio_tools.call("divide", {"a": 1, "b": 0}).startswith("Error:")
    assert "division by zero" in stdio_tools.call("divide", {"a": 1, "b": 0})

    async def concurrently() -> list[str]:
        multiply = stdio_tools.get("multiply")
        return await asyncio.gather(*(multiply.acall(a=n, b=n) for n in range(12)))

    assert asyncio.run(concurrently()) == [str(n * n) for n in range(12)]
    # From another process: the tool set pickles and opens its own session there.
    copy = pickle.loads(pickle.dumps(stdio_tools))
    assert copy.call("add", {"a": 2, "b": 2}) == "4"


def test_closed_sessions_reopen_on_the_next_call(stdio_tools: ToolSet) -> None:
    assert stdio_tools.call("add", {"a": 1, "b": 1}) == "2"
    close_sessions()
    assert stdio_tools.call("add", {"a": 1, "b": 2}) == "3"


@pytest.mark.slow
def test_a_server_that_dies_fails_that_call_and_the_next_call_starts_it_again() -> None:
    spec = AgentSpec(
        mcp_config={
            "mcpServers": {
                "fragile": {
                    "command": "python",
                    "args": [str(Path(__file__).parent / "mcp_servers" / "fragile.py")],
                }
            }
        }
    )
    server = mcp_servers(spec)[0]  # its tools are known: no listing, one server start less
    tools = ToolSet(
        [MCPTool(server, name, "", {"type": "object"}) for name in ("pid", "crash")], [server]
    )
    try:
        first = tools.call("pid")
        with pytest.raises(
            AgentError, match="tool 'crash' of MCP server 'fragile' .* exited with status 1"
        ):
            tools.call("crash")
        assert tools.call("pid") not in ("", first)  # a new server process answers
    finally:
        tools.close()


def test_named_mcp_tools_restrict_their_server(stdio_tools: ToolSet) -> None:
    spec = calculator_agent(tools=["multiply", "calculator__add"], mcp_servers=["calculator"])
    tools = resolve_tools(spec, base_dir=EXAMPLE)
    assert tools.names == ["multiply", "add"]  # in the order the agent names them


@pytest.mark.slow
def test_an_unknown_tool_name_fails_with_a_suggestion() -> None:
    with pytest.raises(AgentError) as error:
        resolve_tools(calculator_agent(tools=["multipy"]), base_dir=EXAMPLE)
    message = str(error.value)
    assert "agent tool 'multipy'" in message and "(did you mean 'multiply'?)" in message
    assert "(they have: add, multiply, divide)" in message and "\n" not in message
    with pytest.raises(
        AgentError,
        match=r"agent tool 'calculator__multipy': MCP server 'calculator' "
        r"has no tool 'multipy' \(did you mean 'multiply'\?\)",
    ):
        resolve_tools(calculator_agent(tools=["calculator__multipy"]), base_dir=EXAMPLE)


def test_a_server_that_fails_to_start_is_named_with_its_last_output(tmp_path: Path) -> None:
    spec = AgentSpec(
        mcp_config={"mcpServers": {"calc": {"command": "python", "args": ["missing.py"]}}}
    )
    with pytest.raises(AgentError) as error:
        resolve_tools(spec, base_dir=tmp_path)
    message = str(error.value)
    assert message.startswith("MCP server 'calc' (stdio: ")
    assert (
        "missing.py" in message and "No such file or directory" in message and "\n" not in message
    )
    spec = AgentSpec(mcp_config={"mcpServers": {"calc": {"command": "no-such-mcp-server"}}})
    with pytest.raises(
        AgentError, match="MCP server 'calc' .* could not be started: .*no-such-mcp"
    ):
        resolve_tools(spec)


def servers_agent(name: str, *args: str, **entry: Any) -> AgentSpec:
    """An agent of one stdio server from tests/mcp_servers, started with ``args``."""
    server = {"command": "python", "args": [str(SERVERS / f"{name}.py"), *args], **entry}
    return AgentSpec(mcp_config={"mcpServers": {name: server}})


def test_a_server_that_exits_at_start_gives_its_status_and_last_stderr_line(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(AgentError) as error:
        resolve_tools(servers_agent("exits_at_start"))
    message = str(error.value)
    assert message.startswith("MCP server 'exits_at_start' (stdio: python ")
    assert message.endswith(
        "exited with status 3; its last stderr line: fatal: WEATHER_API_KEY is not set"
    )
    assert "\n" not in message
    assert capfd.readouterr().err == ""  # the server's stderr never reaches the terminal


def test_a_server_killed_by_a_signal_says_which(tmp_path: Path) -> None:
    (tmp_path / "killed.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    spec = AgentSpec(
        mcp_config={"mcpServers": {"killed": {"command": "python", "args": ["killed.py"]}}}
    )
    with pytest.raises(AgentError, match=r"MCP server 'killed' .* was killed by signal SIGKILL$"):
        resolve_tools(spec, base_dir=tmp_path)


def test_a_server_writing_to_stdout_is_refused_in_one_line(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(AgentError) as error:
        resolve_tools(servers_agent("stdout_noise"))
    message = str(error.value)
    assert "(stdio: python " in message and "\n" not in message
    assert message.endswith(
        "wrote to stdout what is not an MCP message: 'Weather server v1.2 "
        "ready'; a stdio server keeps stdout for MCP messages: make it log "
        "to stderr"
    )
    assert "Traceback" not in capfd.readouterr().err  # not the mcp client's traceback


@pytest.mark.slow
def test_a_server_that_exits_mid_call_gives_its_status_and_the_next_call_restarts_it() -> None:
    tools = resolve_tools(servers_agent("dies_mid_call"))
    try:
        assert tools.call("ping") == "pong"
        with pytest.raises(AgentError) as error:
            tools.call("die")
        assert str(error.value).startswith("tool 'die' of MCP server 'dies_mid_call' (stdio: ")
        assert str(error.value).endswith(
            "exited with status 4; its last stderr line: out of memory while answering"
        )
        assert tools.call("ping") == "pong"
    finally:
        tools.close()


@pytest.mark.slow
def test_arguments_that_are_not_python_names_pass_as_they_stand_but_not_as_functions() -> None:
    tools = resolve_tools(servers_agent("odd_arguments"))
    try:
        # Called by the core (and VeRL) with a mapping, a keyword as a name is no problem...
        assert tools.call("route", {"from": "A", "to": "B"}) == "route [('from', 'A'), ('to', 'B')]"
        assert tools.call("search", '{"query": "q", "max-results": 2}') == (
            "search [('max-results', 2), ('query', 'q')]"
        )
        # ...but a Python function cannot take it: refused in one line, never renamed.
        with pytest.raises(AgentError) as error:
            tools.as_functions()
        assert str(error.value).startswith(
            "tool 'search' of MCP server 'odd_arguments' takes an argument 'max-results', which "
            "is not a Python name, and this engine passes tool arguments as Python keyword "
            "arguments: leave the tool out by listing the tools the agent uses in its `tools`"
        )
        with pytest.raises(
            AgentError,
            match="tool 'route' of MCP server 'odd_arguments' takes an "
            "argument 'from', which is a Python keyword",
        ):
            tools.get("route").as_function()
    finally:
        tools.close()
    # The fix the message gives: name the tools the agent uses.
    only_plain = servers_agent("odd_arguments")
    only_plain.tools = ["plain"]
    tools = resolve_tools(only_plain)
    try:
        [plain] = tools.as_functions()
        assert plain(text="hi") == "plain [('text', 'hi')]"
    finally:
        tools.close()


def test_secrets_in_a_servers_url_and_arguments_never_reach_its_error() -> None:
    url = f"http://alice:pw-hunter22@127.0.0.1:{free_port()}/mcp?api_key=sk-query-9731&x=1"
    spec = AgentSpec(mcp_config={"mcpServers": {"remote": {"type": "streamable-http", "url": url}}})
    with pytest.raises(AgentError) as error:
        resolve_tools(spec)
    message = str(error.value)
    assert message.startswith("MCP server 'remote' (streamable-http: http://***@127.0.0.1:")
    assert "/mcp?api_key=***&x=1) is unreachable" in message
    assert "pw-hunter22" not in message and "sk-query-9731" not in message
    spec = servers_agent("exits_at_start", "--api-key", "sk-arg-5521")
    with pytest.raises(AgentError) as error:
        resolve_tools(spec)
    assert "--api-key ***" in str(error.value) and "sk-arg-5521" not in str(error.value)


def test_a_silent_server_times_out(tmp_path: Path) -> None:
    (tmp_path / "silent.py").write_text("import time\ntime.sleep(60)\n")
    spec = AgentSpec(
        mcp_config={
            "mcpServers": {"silent": {"command": "python", "args": ["silent.py"], "timeout": 1}}
        }
    )
    started = time.monotonic()
    with pytest.raises(AgentError, match="MCP server 'silent' .* did not answer within 1 s"):
        resolve_tools(spec, base_dir=tmp_path)
    assert time.monotonic() - started < 15


def test_server_configuration_mistakes_are_named() -> None:
    config = {"mcpServers": {"calculator": STDIO["calculator"]}}
    with pytest.raises(
        AgentError,
        match=r"uses MCP server 'calculater', which mcp_config does not "
        r"define \(did you mean 'calculator'\?\)",
    ):
        resolve_tools(AgentSpec(mcp_config=config, mcp_servers=["calculater"]))
    with pytest.raises(AgentError, match="unsupported type 'websocket'"):
        resolve_tools(AgentSpec(mcp_config={"mcpServers": {"w": {"type": "websocket"}}}))
    with pytest.raises(AgentError, match="MCP server 'h': type 'streamable-http' needs an http"):
        resolve_tools(AgentSpec(mcp_config={"mcpServers": {"h": {"type": "streamable-http"}}}))
    # A disabled server is skipped, as AWorld does.
    off = {"mcpServers": {"calculator": {**STDIO["calculator"], "disabled": True}}}
    assert len(resolve_tools(AgentSpec(mcp_config=off))) == 0


def test_a_missing_mcp_package_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(
        AgentError, match=r"need the 'mcp' package: pip install 'aworld-train\[mcp\]'"
    ):
        resolve_tools(calculator_agent(), base_dir=EXAMPLE)


# --- MCP over HTTP: streamable HTTP and SSE ---------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module", params=["streamable-http", "sse"])
def remote_server(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The example's calculator served over HTTP on a free loopback port, as an mcpServers
    entry; stopped after the module's tests."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLE / "server.py"),
            "--transport",
            request.param,
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited: {process.stderr.read().decode()[-500:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not listen within 60 s") from None
                time.sleep(0.1)
        path = "mcp" if request.param == "streamable-http" else "sse"
        yield {"type": request.param, "url": f"http://127.0.0.1:{port}/{path}"}
    finally:
        close_sessions()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_http_servers_list_and_call_tools(remote_server: dict[str, str]) -> None:
    spec = AgentSpec(mcp_config={"mcpServers": {"remote": remote_server}}, mcp_servers=["remote"])
    tools = resolve_tools(spec)
    assert tools.names == ["add", "multiply", "divide"]
    assert tools.servers[0].transport == remote_server["type"]
    assert tools.call("multiply", {"a": 4321, "b": 8765}) == str(4321 * 8765)
    assert tools.get("remote__add").call(a=40, b=2) == "42"
    tools.close()


def test_an_unreachable_http_server_fails_fast_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    spec = AgentSpec(
        mcp_config={
            "mcpServers": {"remote": {"type": "streamable-http", "url": url, "timeout": 10}}
        }
    )
    started = time.monotonic()
    with pytest.raises(AgentError) as error:
        resolve_tools(spec)
    assert str(error.value).startswith(
        f"MCP server 'remote' (streamable-http: {url}) is unreachable"
    )
    assert "\n" not in str(error.value)
    assert time.monotonic() - started < 10


# --- Through the trainer ----------------------------------------------------------------------


def test_check_resolves_the_tools_before_the_engines_agent_check(
    recording_engine: Any, toy_job: dict[str, Any]
) -> None:
    toy_job.update(
        train_engine_name="recording",
        base_dir=EXAMPLE,
        check_only=True,
        agent=EXAMPLE / "agent.yaml",
    )
    trainer = AgentTrainer(**toy_job)
    steps = [(c.module, c.by) for c in trainer.checks]
    tools = steps.index(("tools", "core"))
    assert steps[:2] == [("config", "core"), ("agent", "core")]
    assert all(by == "core" for _, by in steps[:tools])  # before any engine check
    assert (
        "3 tools (add, multiply, divide) from MCP server 'calculator'"
        in trainer.checks[tools].detail
    )
    assert trainer.context.tools.names == ["add", "multiply", "divide"]


def test_check_fails_on_an_unreachable_server_naming_it(
    recording_engine: Any, toy_job: dict[str, Any]
) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    server = {"type": "streamable-http", "url": url}
    toy_job.update(
        train_engine_name="recording",
        check_only=True,
        agent={"name": "calc", "mcp_config": {"mcpServers": {"calculator": server}}},
    )
    expected = rf"MCP server 'calculator' \(streamable-http: {url}\) is unreachable"
    with pytest.raises(AgentError, match=expected):
        AgentTrainer(**toy_job)
    # The core's tool check fails before the engine's agent check runs.
    assert not [call for call in recording_engine.calls if call[0] == "check_agent"]


def test_agents_without_tools_get_an_empty_tool_set(
    recording_engine: Any, toy_job: dict[str, Any]
) -> None:
    toy_job.update(train_engine_name="recording", check_only=True)
    trainer = AgentTrainer(**toy_job)
    assert len(trainer.context.tools) == 0
    assert "tools" not in [c.module for c in trainer.checks]


def test_the_example_agent_file_loads() -> None:
    spec = load_agent("agent.yaml", base_dir=EXAMPLE)
    assert spec.mcp_servers == ["calculator"] and spec.max_turns >= 2
