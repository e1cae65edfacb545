"""The agent's tools as TRL takes them: callables that carry the tool's own schema, so that the
model is shown each tool exactly as its MCP server (or the Python tool's signature) describes it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aworld_train.engine import ToolSet


class SchemaTool(dict):  # type: ignore[type-arg]
    """One tool for ``GRPOTrainer(tools=...)``: the tool's OpenAI-style schema, callable.

    TRL calls a tool by its ``__name__`` with the model's arguments as keywords, and hands its
    tools to ``apply_chat_template`` and ``parse_response``, which take a dict as the schema it
    is and rebuild one only from a function's signature (transformers' ``get_json_schema``, which
    drops ``default``, ``minimum``, ``format``, ... and rewrites descriptions). Being both, the
    tool renders as the server advertises it, as on VeRL, and still runs when the model calls it.
    """

    def __init__(self, tool: Any) -> None:
        """:param tool: one tool of a :class:`ToolSet` (its ``name``, ``schema`` and ``call``)."""
        super().__init__(tool.schema)
        self.__name__ = self.__qualname__ = tool.name
        self._tool = tool

    def __call__(self, **arguments: Any) -> str:
        return self._tool.call(**arguments)

    def __repr__(self) -> str:
        return f"<SchemaTool {self.__name__}>"


def trl_tools(tools: ToolSet | None) -> list[SchemaTool]:
    """The tools of ``tools`` as GRPOTrainer takes them (empty without tools)."""
    return [SchemaTool(tool) for tool in tools or []]
