"""What every tool is: a name, a description and a JSON schema of its arguments, called with
keyword arguments and answering text (:class:`Tool`), and the helpers both kinds share."""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import dataclasses
import inspect
import json
import keyword
import typing
from collections.abc import Callable
from typing import Any

from aworld_train.errors import AgentError


class Tool(abc.ABC):
    """One tool the agent may call.

    :ivar name: the name the model calls it by.
    :ivar description: what it does, for the model.
    :ivar parameters: the JSON schema of its arguments (``{"type": "object", ...}``).
    """

    name: str
    description: str
    parameters: dict[str, Any]

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI-style function schema that chat templates and TRL take."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    @abc.abstractmethod
    def call(self, **arguments: Any) -> str:
        """Run the tool. An error of the tool itself comes back as ``"Error: ..."`` text, as an
        MCP server reports it, so that the model sees it; a server that cannot be reached raises
        :class:`AgentError`."""

    async def acall(self, **arguments: Any) -> str:
        """:meth:`call` for code that runs an event loop; it does not block the loop."""
        return await asyncio.to_thread(lambda: self.call(**arguments))

    def as_function(self) -> Callable[..., str]:
        """A plain function with this tool's signature and a Google-style docstring, for
        libraries that build the schema themselves from a callable (TRL's ``tools=``)."""
        properties = self.parameters.get("properties") or {}
        required = set(self.parameters.get("required") or [])
        # An MCP description may carry its own Args section; one section, built here, is kept.
        summary, documented = docstring_parts(self.description)
        params, notes = [], []
        for name, prop in properties.items():
            self._check_python_name(name)
            annotation = _annotation_for(prop)
            default = inspect.Parameter.empty if name in required else prop.get("default")
            if default is None and annotation is not typing.Any:
                annotation = typing.Optional[annotation]  # noqa: UP045 (a runtime type object)
            params.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=default,
                    annotation=annotation,
                )
            )
            notes.append(f"    {name}: {prop.get('description') or documented.get(name) or name}")
        # Required arguments first, as Python demands.
        params.sort(key=lambda p: p.default is not inspect.Parameter.empty)
        tool = self

        def function(*args: Any, **kwargs: Any) -> str:
            bound = function.__signature__.bind(*args, **kwargs)  # type: ignore[attr-defined]
            return tool.call(**bound.arguments)

        function.__name__ = function.__qualname__ = self.name
        signature = inspect.Signature(params, return_annotation=str)
        function.__signature__ = signature  # type: ignore[attr-defined]
        function.__annotations__ = {p.name: p.annotation for p in params} | {"return": str}
        function.__doc__ = (summary or self.name) + (
            "\n\nArgs:\n" + "\n".join(notes) if notes else ""
        )
        return function

    def _check_python_name(self, argument: str) -> None:
        """Refuse an argument that a Python function cannot take by its name.

        :raises AgentError: naming the tool (and its server), the argument and the fix.
        """
        if argument.isidentifier() and not keyword.iskeyword(argument):
            return
        why = "a Python keyword" if keyword.iskeyword(argument) else "not a Python name"
        raise AgentError(
            f"{self.origin()} takes an argument '{argument}', which is {why}, and this engine "
            "passes tool arguments as Python keyword arguments: leave the tool out by listing "
            "the tools the agent uses in its `tools`, or call it from a Python tool whose "
            "arguments are plain names"
        )

    def origin(self) -> str:
        """``tool 'x'``, or ``tool 'x' of MCP server 'y'``, for messages."""
        return f"tool '{self.name}'"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """A docstring's summary (its text before the first section, on one line) and each
    argument's description, as ``docstring_parser`` reads them: Google ``Args:``, Sphinx
    ``:param x:``, NumPy ``Parameters`` or Epydoc ``@param x:``."""
    import docstring_parser

    try:
        parsed = docstring_parser.parse(doc)
    except docstring_parser.ParseError:  # a malformed section: the text still describes the tool
        return _one_line(doc), {}
    summary = " ".join(part for part in (parsed.short_description, parsed.long_description) if part)
    arguments = {
        param.arg_name: _one_line(param.description or "")
        for param in parsed.params
        if param.args[0] == "param"
    }
    return _one_line(summary), arguments


def _one_line(text: str) -> str:
    return " ".join(text.split())


_ANNOTATIONS = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _annotation_for(prop: dict[str, Any]) -> Any:
    """The Python annotation of one argument's JSON schema, for :meth:`Tool.as_function`."""
    options = [option for option in prop.get("anyOf") or [] if option.get("type") != "null"]
    if options:
        kinds = tuple(_annotation_for(option) for option in options)
        return typing.Union[kinds] if len(kinds) > 1 else kinds[0]  # type: ignore[misc]
    values = prop.get("enum") or []
    if values and all(isinstance(value, (str, int, float, bool)) for value in values):
        return typing.Literal[tuple(values)]  # type: ignore[misc]
    kind = prop.get("type")
    if isinstance(kind, list):
        options = [_ANNOTATIONS[k] for k in kind if k in _ANNOTATIONS]
        return typing.Union[tuple(options)] if options else typing.Any  # type: ignore[misc]
    items = prop.get("items")
    if kind == "array" and isinstance(items, dict) and items.get("type") in _ANNOTATIONS:
        element: Any = _ANNOTATIONS[items["type"]]
        return list[element]  # type: ignore[valid-type]
    return _ANNOTATIONS.get(kind, typing.Any) if isinstance(kind, str) else typing.Any


def as_text(result: Any) -> str:
    """A tool's result as the text the model sees: strings as they are, anything else as JSON."""
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        result = dataclasses.asdict(result)
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


def run_sync(make: Callable[[], Any]) -> Any:
    """Run the coroutine ``make()`` to completion from synchronous code, in a worker thread
    when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(awaited(make))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(awaited(make))).result()


async def awaited(make: Callable[[], Any]) -> Any:
    """Await ``make()``: a coroutine made inside the loop that runs it."""
    return await make()
