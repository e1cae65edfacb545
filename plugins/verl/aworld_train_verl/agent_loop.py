"""The agent loop VeRL's rollout runs for an agent with tools: several turns against the policy.

VeRL's ``AgentLoopWorker`` builds one :class:`ToolAgentLoop` per rollout from the run
directory's ``agent_loop.yaml`` (rows whose ``agent_name`` is ``aworld_train_agent``). Each
episode:

1. renders the row's chat messages with the agent's tool schemas through the chat template;
2. asks the policy for a turn with ``server_manager.generate`` and keeps the token ids and
   log-probs it returns exactly as they are (response mask 1);
3. reads the tool calls in the decoded turn, ``<tool_call>{"name": ..., "arguments": {...}}
   </tool_call>`` as Qwen and Hermes chat templates write them, and runs each with the agent's
   tool set (the MCP servers are real, one session per server per worker process);
4. appends the results as ``tool`` messages, tokenised by VeRL's continuous-token builder with
   the chat template (response mask 0), and goes back to 2.

An episode ends with a turn that calls no tool, after ``max_turns`` turns, or when the response
reaches ``rollout.response_length`` tokens. A tool whose server fails or that does not answer in
time ends it too, as a failure (so does a chat template that cannot render the tool results):
``agent_failure`` in the episode's extra fields says why, and the run's reward module scores
the episode 0 and counts it in ``agent_failed``. The step carries on.

AWorld agents run through :mod:`aworld_train_verl.aworld_loop` instead; both build their
episodes with :class:`~aworld_train_verl.trajectory.Trajectory`.

This module imports VeRL at the top: only VeRL's workers import it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput
from verl.utils.profiler import simple_timer

from aworld_train.engine import DEFAULT_TIMEOUT, MCPTool, ToolSet

from aworld_train_verl.trajectory import Trajectory, assistant_message, describe_failure, parse_tool_calls

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=None)
def load_tools(path: str) -> ToolSet:
    """The pickled tool set at ``path``, loaded once per worker process (its secrets from the
    environment, see :mod:`aworld_train_verl.vault`)."""
    from aworld_train_verl.vault import loads

    with open(path, "rb") as handle:
        return as_tools(loads(handle.read()), path)


def as_tools(tools: Any, path: str) -> ToolSet:
    """``tools``, checked to be the tool set the file at ``path`` should hold."""
    if not isinstance(tools, ToolSet):
        raise TypeError(f"{path} holds a {type(tools).__name__}, not an aworld_train ToolSet")
    return tools


def call_timeout(tools: ToolSet, name: str) -> float:
    """How long one call of ``name`` may take: its MCP server's timeout, or the default."""
    try:
        tool = tools.get(name)
    except Exception:  # noqa: BLE001 - an unknown name is answered with an error text at once
        return DEFAULT_TIMEOUT
    return tool.server.timeout if isinstance(tool, MCPTool) else DEFAULT_TIMEOUT


class ToolAgentLoop(AgentLoopBase):
    """The user's agent, multi-turn with its tools, as a VeRL agent loop.

    :param tools_file: the pickled :class:`~aworld_train.engine.ToolSet` of the agent.
    :param max_turns: the most model turns of one episode.
    """

    def __init__(self, *args: Any, tools_file: str, max_turns: int, **kwargs: Any) -> None:
        kwargs.pop("tools", None)  # VeRL's own tool registry, which this loop does not use
        super().__init__(*args, **kwargs)
        self.tools = load_tools(tools_file)
        self.schemas = self.tools.schemas()
        self.max_turns = int(max_turns)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        messages = [dict(message) for message in kwargs["raw_prompt"]]
        episode = await Trajectory.start(self, messages, self.schemas, sampling_params)
        while episode.turns < self.max_turns:
            output = await episode.generate()
            if episode.full or episode.turns >= self.max_turns:
                break
            content, calls = parse_tool_calls(self.tokenizer.decode(output.token_ids, skip_special_tokens=False))
            if not calls:
                break
            previous = [*messages, assistant_message(content, calls)]
            try:
                with simple_timer("tool_calls", episode.metrics):
                    results = await asyncio.gather(*(self._call(call) for call in calls))
                updated = previous + [
                    {"role": "tool", "name": call["name"], "content": result} for call, result in zip(calls, results)
                ]
                await episode.add_context(previous, updated)
            except Exception as error:  # noqa: BLE001 - a tool, its server or the chat template fails
                episode.failure = describe_failure(error)
                break
            episode.tool_calls += len(calls)
            messages = updated
            if episode.full:
                break
        if episode.failure is not None:
            logger.warning("agent episode failed after %d turn(s): %s", episode.turns, episode.failure)
        return episode.output()

    async def _call(self, call: dict[str, Any]) -> str:
        """One tool call's result text; raises when the tool's server fails or times out."""
        if "error" in call:
            return f"Error: {call['error']}"
        timeout = call_timeout(self.tools, call["name"])
        try:
            return await asyncio.wait_for(self.tools.acall(call["name"], call["arguments"]), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"tool '{call['name']}' did not answer within {timeout:g} s") from None
