"""Python functions as tools: imported from a reference, described by a JSON schema that
pydantic builds from their type hints, with the argument descriptions of their docstring."""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aworld_train.errors import AgentError
from aworld_train.tools._tool import Tool, as_text, docstring_parts, run_sync


class PythonTool(Tool):
    """A Python function as a tool; its schema comes from its signature and docstring.

    :ivar function: the callable.
    :ivar reference: the ``module:function`` or ``/abs/path/file.py:function`` it was imported
        from, or ``None``; a tool with a reference is pickled as that reference, so that another
        process (a Ray worker) imports it afresh.
    """

    def __init__(
        self, function: Callable[..., Any], reference: str | None = None, name: str | None = None
    ) -> None:
        self.function = function
        self.reference = reference
        self.name = name or getattr(function, "__name__", None) or type(function).__name__
        self.description, self.parameters = function_schema(function, self.name)

    def call(self, **arguments: Any) -> str:
        try:
            result = self.function(**arguments)
            if inspect.isawaitable(result):
                result = run_sync(lambda: result)
        except Exception as exc:  # reported to the model, as an MCP server would
            return f"Error: {type(exc).__name__}: {exc}"
        return as_text(result)

    async def acall(self, **arguments: Any) -> str:
        if not inspect.iscoroutinefunction(self.function):
            return await super().acall(**arguments)
        try:
            result = await self.function(**arguments)
        except Exception as exc:  # reported to the model, as an MCP server would
            return f"Error: {type(exc).__name__}: {exc}"
        return as_text(result)

    def __reduce__(self) -> tuple[Any, ...]:
        if self.reference is None:
            return (PythonTool, (self.function, None, self.name))
        return (python_tool_from_reference, (self.reference, self.name))


def python_tool_from_reference(
    reference: str, name: str | None = None, base_dir: Path | None = None
) -> PythonTool:
    """Import the tool ``module:function`` or ``path/to/file.py:function``.

    :raises AgentError: for a reference that does not import or is not callable.
    """
    from aworld_train.job.references import import_object, resolve_path, split_reference

    target, attribute = split_reference(reference)
    function = import_object(reference, AgentError, "agent tool", base_dir)
    if not callable(function):
        raise AgentError(f"agent tool '{reference}' is not callable")
    if target.endswith(".py"):  # importable again from any process on this machine
        reference = f"{resolve_path(target, base_dir)}:{attribute}"
    return PythonTool(function, reference, name)


def function_schema(function: Callable[..., Any], name: str = "") -> tuple[str, dict[str, Any]]:
    """The description and JSON schema of a function's arguments, from its signature, type hints
    (:func:`type_schema`) and docstring (its summary; Google ``Args:``, Sphinx ``:param x:`` or
    NumPy entries describe the arguments).

    :raises AgentError: for a function whose arguments cannot be passed by name.
    """
    name = name or getattr(function, "__name__", "tool")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise AgentError(f"tool '{name}': cannot read its signature: {exc}") from None
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as exc:  # annotations are the user's code
        raise AgentError(f"tool '{name}': cannot resolve its type hints: {exc}") from None
    summary, arg_docs = docstring_parts(inspect.getdoc(function) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise AgentError(
                f"tool '{name}': argument '{param.name}' is positional-only; a model "
                "passes arguments by name"
            )
        prop = type_schema(hints.get(param.name, Any))
        if param.name in arg_docs:
            prop["description"] = arg_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif _is_json_value(param.default):
            prop["default"] = param.default
        properties[param.name] = prop
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return summary, parameters


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON schema of one type hint, as pydantic describes it, made self-contained (its
    ``$defs`` inlined) and plain for a model to read: without pydantic's titles, ``"type"``
    first, a union of plain types as a list of types (``{"type": ["string", "null"]}``). A type
    pydantic cannot describe is ``{}`` (any value)."""
    from pydantic import PydanticUserError, TypeAdapter

    try:
        schema = TypeAdapter(hint).json_schema()
    except PydanticUserError:  # a class pydantic does not know: the model may pass anything
        return {}
    return _tidy(schema, schema.pop("$defs", {}), frozenset())


# Keywords whose value is data, not a schema: left as they are.
_DATA_KEYWORDS = ("default", "enum", "const", "examples")
# Keywords whose value maps names to schemas.
_SCHEMA_MAPS = ("properties", "patternProperties")


def _tidy(schema: Any, defs: dict[str, Any], inlining: frozenset[str]) -> Any:
    """``schema`` as :func:`type_schema` gives it, its references replaced by ``defs``' entries
    (``inlining``: the entries being inlined around it, met again only in a recursive type)."""
    if isinstance(schema, list):
        return [_tidy(item, defs, inlining) for item in schema]
    if not isinstance(schema, dict):
        return schema
    reference = schema.get("$ref", "")
    if reference.startswith("#/$defs/"):
        name = reference.removeprefix("#/$defs/")
        if name in inlining:  # a recursive type is described one level deep
            return {}
        rest = {key: value for key, value in schema.items() if key != "$ref"}
        return _tidy({**defs[name], **rest}, defs, inlining | {name})
    tidy: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _SCHEMA_MAPS:
            tidy[key] = {name: _tidy(item, defs, inlining) for name, item in value.items()}
        else:
            tidy[key] = value if key in _DATA_KEYWORDS else _tidy(value, defs, inlining)
    options = tidy.get("anyOf") or []
    if options and all(
        set(option) == {"type"} and isinstance(option["type"], str) for option in options
    ):
        del tidy["anyOf"]
        tidy["type"] = [option["type"] for option in options]
    # "type" first, as people write schemas (and chat templates show them) to read them.
    return {"type": tidy.pop("type"), **tidy} if "type" in tidy else tidy


def _is_json_value(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
