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
time ends it too, as a failure (so does a chat template that cannot render the tool results): ``agent_failure`` in the episode's extra fields says why, and the run's
reward module scores the episode 0 and counts it in ``agent_failed``. The step carries on.

This module imports VeRL at the top: only VeRL's workers import it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput
from verl.utils.profiler import simple_timer

from aworld_train.tools import DEFAULT_TIMEOUT, MCPTool, ToolSet

logger = logging.getLogger(__name__)

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


@functools.lru_cache(maxsize=None)
def load_tools(path: str) -> ToolSet:
    """The pickled tool set at ``path``, loaded once per worker process."""
    import cloudpickle

    with open(path, "rb") as handle:
        tools = cloudpickle.load(handle)
    if not isinstance(tools, ToolSet):
        raise TypeError(f"{path} holds a {type(tools).__name__}, not an aworld_train ToolSet")
    return tools


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The text before the first tool call, and each call as ``{"name", "arguments"}``.

    A call that is not a JSON object with a string ``name`` is kept with ``"error"`` saying why,
    so that the model is told, as it would be of any other mistake in its call.
    """
    matches = list(TOOL_CALL.finditer(text))
    content = text[: matches[0].start()] if matches else text
    calls = []
    for match in matches:
        try:
            call = json.loads(match.group(1))
        except json.JSONDecodeError as error:
            calls.append({"name": "", "arguments": {}, "error": f"the tool call is not valid JSON: {error.msg}"})
            continue
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            calls.append({"name": "", "arguments": {}, "error": 'a tool call needs {"name": ..., "arguments": {...}}'})
            continue
        arguments = call.get("arguments")
        calls.append({"name": call["name"], "arguments": {} if arguments is None else arguments})
    return content.strip(), calls


def call_timeout(tools: ToolSet, name: str) -> float:
    """How long one call of ``name`` may take: its MCP server's timeout, or the default."""
    try:
        tool = tools.get(name)
    except Exception:  # noqa: BLE001 - an unknown name is answered with an error text at once
        return DEFAULT_TIMEOUT
    return tool.server.timeout if isinstance(tool, MCPTool) else DEFAULT_TIMEOUT


class ToolAgentLoop(AgentLoopBase):
    """The user's agent, multi-turn with its tools, as a VeRL agent loop.

    :param tools_file: the pickled :class:`~aworld_train.tools.ToolSet` of the agent.
    :param max_turns: the most model turns of one episode.
    """

    def __init__(self, *args: Any, tools_file: str, max_turns: int, **kwargs: Any) -> None:
        kwargs.pop("tools", None)  # VeRL's own tool registry, which this loop does not use
        super().__init__(*args, **kwargs)
        self.tools = load_tools(tools_file)
        self.schemas = self.tools.schemas()
        self.max_turns = int(max_turns)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        messages = [dict(message) for message in kwargs["raw_prompt"]]
        prompt_ids = await self.ct_build_initial_tokens(messages, tools=self.schemas)
        runtime_ids = list(prompt_ids)
        response_mask: list[int] = []
        response_logprobs: list[float] | None = None
        request_id = uuid4().hex
        metrics: dict[str, Any] = {}
        extra_fields: dict[str, Any] = {}
        turns = tool_rounds = tool_calls = 0
        failure: str | None = None

        while turns < self.max_turns:
            with simple_timer("generate_sequences", metrics):
                output = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=runtime_ids, sampling_params=sampling_params
                )
            turns += 1
            if not extra_fields:
                extra_fields.update(output.extra_fields or {})
            if response_logprobs is None and output.log_probs:
                response_logprobs = [0.0] * len(response_mask)
            merged, response_mask, response_logprobs = await self.ct_merge_assistant_token(
                runtime_ids,
                output.token_ids,
                response_mask,
                response_logprobs,
                assistant_logprobs=output.log_probs if response_logprobs is not None else None,
            )
            runtime_ids = merged.token_ids
            if len(response_mask) >= self.response_length or turns >= self.max_turns:
                break
            content, calls = parse_tool_calls(self.tokenizer.decode(output.token_ids, skip_special_tokens=False))
            if not calls:
                break
            previous = [*messages, self._assistant_message(content, calls)]
            try:
                with simple_timer("tool_calls", metrics):
                    results = await asyncio.gather(*(self._call(call) for call in calls))
                updated = previous + [
                    {"role": "tool", "name": call["name"], "content": result} for call, result in zip(calls, results)
                ]
                merged, response_mask, response_logprobs = await self.ct_merge_context_msg(
                    previous, updated, runtime_ids, response_mask, response_logprobs, tools=self.schemas
                )
            except Exception as error:  # noqa: BLE001 - a tool, its server or the chat template fails
                failure = _describe_failure(error)
                break
            tool_rounds += 1
            tool_calls += len(calls)
            runtime_ids, messages = merged.token_ids, updated
            if len(response_mask) >= self.response_length:
                break

        if failure is not None:
            logger.warning("agent episode failed after %d turn(s): %s", turns, failure)
        response_ids = runtime_ids[len(runtime_ids) - len(response_mask) :]
        extra_fields.update({
            "turn_scores": [],
            "tool_rewards": [],
            "tool_calls": tool_calls,
            "agent_failure": failure,
        })
        return AgentLoopOutput(
            prompt_ids=runtime_ids[: len(runtime_ids) - len(response_mask)],
            response_ids=response_ids[: self.response_length],
            response_mask=response_mask[: self.response_length],
            response_logprobs=response_logprobs[: self.response_length] if response_logprobs is not None else None,
            num_turns=1 + turns + tool_rounds,
            metrics=metrics,
            extra_fields=extra_fields,
        )

    async def _call(self, call: dict[str, Any]) -> str:
        """One tool call's result text; raises when the tool's server fails or times out."""
        if "error" in call:
            return f"Error: {call['error']}"
        timeout = call_timeout(self.tools, call["name"])
        try:
            return await asyncio.wait_for(self.tools.acall(call["name"], call["arguments"]), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"tool '{call['name']}' did not answer within {timeout:g} s") from None

    @staticmethod
    def _assistant_message(content: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": content,
            "tool_calls": [
                {"type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}
                for call in calls
            ],
        }


def _describe_failure(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split()) or 'no message'}"
