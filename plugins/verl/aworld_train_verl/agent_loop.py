"""The agent loops VeRL's rollout runs: the user's agent through the core's agent runtime.

VeRL's ``AgentLoopWorker`` builds one loop per rollout from the run directory's
``agent_loop.yaml`` (rows whose ``agent_name`` is ``aworld_train_agent``). Every loop here runs
one episode of the agent with :class:`~aworld_train.engine.AgentRuntime`, which points the agent
at a loopback OpenAI-compatible endpoint and records the exact tokens; this module keeps only the
VeRL glue:

- the runtime's generate function is ``server_manager.generate``, with the rollout's sampling
  settings and one request id per episode (so that the server keeps the episode's prefix);
- the episode's limits are the loop's ``max_turns``, ``rollout.response_length`` tokens and
  :data:`EPISODE_TIMEOUT` seconds;
- the row the agent gets is the dataset row: ``prompt`` (chat messages), ``ground_truth``,
  ``data_source``, ``extra_info`` and every other column;
- the episode becomes VeRL's ``AgentLoopOutput``; its extra fields carry what the run's reward
  module reads (:mod:`aworld_train_verl.reward`): ``agent_answer`` (scored in place of the
  decoded response), ``agent_extra`` (the fields the agent returned with it), ``agent_failure``
  (a failed episode scores 0 and counts in ``agent_failed``) and ``tool_calls``.

The loops: :class:`ToolAgentLoop` for an agent given by its prompt and tools (the core's own chat
loop, calling the pickled tool set), :class:`PythonAgentLoop` for a Python ``run(row, llm)``, and
:class:`~aworld_train_verl.aworld_loop.AWorldAgentLoop` for an AWorld ``Agent``.

This module imports VeRL at the top: only VeRL's workers import it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any
from uuid import uuid4

from aworld_train.engine import AgentSpec, ToolSet
from aworld_train.engine.runtime import (
    AgentRuntime,
    ChatRenderer,
    EpisodeResult,
    Generated,
    Limits,
    model_name,
)
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput
from verl.utils.profiler import simple_timer

from aworld_train_verl.vault import loads

#: Seconds one episode may run, from the agent's start to its answer.
EPISODE_TIMEOUT = 600.0

#: The dataset fields VeRL adds for its own loops, which are no column of the user's row.
VERL_FIELDS = frozenset(
    {"raw_prompt", "reward_model", "index", "tools_kwargs", "interaction_kwargs", "uid"}
)


class RuntimeAgentLoop(AgentLoopBase):
    """A VeRL agent loop that runs one episode of :attr:`spec` with the core's agent runtime.

    :param max_turns: the most model turns of one episode.
    :ivar spec: the agent, set by the subclass.
    :ivar agent_tools: the tools the core's own chat loop calls (the spec form only).
    """

    spec: AgentSpec
    agent_tools: ToolSet | None = None

    def __init__(self, *args: Any, max_turns: int, **kwargs: Any) -> None:
        kwargs.pop("tools", None)  # VeRL's own tool registry: the agent's tools run in the runtime
        super().__init__(*args, **kwargs)
        self.max_turns = int(max_turns)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        metrics: dict[str, Any] = {}
        extra_fields: dict[str, Any] = {}
        runtime = AgentRuntime(
            self.spec,
            self.agent_tools,
            renderer(self.tokenizer),
            self._generate(sampling_params, metrics, extra_fields),
            Limits(
                max_turns=self.max_turns,
                max_tokens=int(self.rollout_config.response_length),
                timeout=EPISODE_TIMEOUT,
                # an agent loop's output is one sequence: an agent that rewrites it is refused
                one_sequence="verl",
            ),
            model=model_name(str(self.config.actor_rollout_ref.model.path)),
        )
        result = await runtime.episode(agent_row(kwargs))
        return loop_output(result, bool(sampling_params.get("logprobs")), metrics, extra_fields)

    def _generate(
        self, sampling_params: dict[str, Any], metrics: dict[str, Any], extra_fields: dict[str, Any]
    ) -> Any:
        """The episode's generate function: VeRL's server manager, one request id per episode;
        it times the calls into ``metrics`` and keeps the server's first extra fields."""
        request_id = uuid4().hex

        async def generate(prompt_ids: list[int], max_tokens: int) -> Generated:
            with simple_timer("generate_sequences", metrics):
                output = await self.server_manager.generate(
                    request_id=request_id,
                    prompt_ids=prompt_ids,
                    sampling_params={**sampling_params, "max_tokens": max_tokens},
                )
            if not extra_fields:
                extra_fields.update(output.extra_fields or {})
            # vLLM answers log-probs only when the rollout asks for them; unused otherwise.
            return Generated(
                list(output.token_ids), list(output.log_probs or [0.0] * len(output.token_ids))
            )

        return generate


@functools.lru_cache(maxsize=4)
def renderer(tokenizer: Any) -> ChatRenderer:
    """The chat template's renderer, built once per tokenizer (it renders a probe conversation)."""
    return ChatRenderer(tokenizer)


def agent_row(fields: dict[str, Any]) -> dict[str, Any]:
    """The dataset row as the agent gets it, from the fields VeRL hands a loop: the prompt as
    chat messages, ``ground_truth``, and every column of the row."""
    row = {
        key: plain(value)
        for key, value in fields.items()
        if key not in VERL_FIELDS and not key.startswith("__")
    }
    row["prompt"] = [dict(message) for message in fields["raw_prompt"]]
    row["ground_truth"] = fields["reward_model"]["ground_truth"]
    return row


def plain(value: Any) -> Any:
    """A column's value without numpy types (parquet lists load as arrays), as the row had it."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else value


def loop_output(
    result: EpisodeResult, logprobs: bool, metrics: dict[str, Any], extra_fields: dict[str, Any]
) -> AgentLoopOutput:
    """The episode for VeRL; ``extra_fields`` gains what the reward module reads.

    :param logprobs: whether the rollout asked for log-probs (VeRL expects them of every
        episode then, or of none).
    """
    trajectory = result.trajectory
    extra_fields.update(
        {
            "turn_scores": [],
            "tool_rewards": [],
            "tool_calls": result.tool_messages,
            "agent_failure": result.failure,
            "agent_answer": result.answer,
            "agent_extra": result.extra,
        }
    )
    return AgentLoopOutput(
        prompt_ids=trajectory.prompt_ids,
        response_ids=trajectory.response_ids,
        response_mask=trajectory.mask,
        response_logprobs=trajectory.logprobs if logprobs else None,
        # VeRL counts the messages: the prompt, each model turn, each environment turn between.
        num_turns=max(2 * result.turns, 1),
        metrics=metrics,
        extra_fields=extra_fields,
    )


@functools.cache
def load_tools(path: str) -> ToolSet:
    """The pickled tool set at ``path``, loaded once per worker process (its secrets from the
    environment, see :mod:`aworld_train_verl.vault`)."""
    return as_tools(loads(Path(path).read_bytes()), path)


def as_tools(tools: Any, path: str) -> ToolSet:
    """``tools``, checked to be the tool set the file at ``path`` should hold."""
    if not isinstance(tools, ToolSet):
        raise TypeError(f"{path} holds a {type(tools).__name__}, not an aworld_train ToolSet")
    return tools


class ToolAgentLoop(RuntimeAgentLoop):
    """An agent given by its prompt and tools: the core's own chat loop, multi-turn, calling the
    agent's tool set (the MCP servers are real, one session per server per worker process).

    :param tools_file: the pickled :class:`~aworld_train.engine.ToolSet` of the agent.
    :param agent: the agent's name, for its failure lines.
    """

    def __init__(
        self, *args: Any, tools_file: str, max_turns: int, agent: str = "agent", **kwargs: Any
    ) -> None:
        super().__init__(*args, max_turns=max_turns, **kwargs)
        self.agent_tools = load_tools(tools_file)
        # The rows carry the system prompt already (the dataset writes it into each prompt).
        self.spec = AgentSpec(name=agent, max_turns=self.max_turns)


class PythonAgentLoop(RuntimeAgentLoop):
    """A Python agent ``run(row, llm)``, re-imported in the worker from its reference, or
    unpickled from ``agent_file`` when it was given as an object without one.

    :param agent_reference: ``/absolute/file.py:run`` or ``package.module:run``.
    :param agent_root: the folder to put on ``sys.path`` first to import a module reference.
    :param agent_file: the pickled function, for an agent without a reference.
    :param agent: the agent's name, for its failure lines.
    """

    def __init__(
        self,
        *args: Any,
        max_turns: int,
        agent_reference: str | None = None,
        agent_root: str | None = None,
        agent_file: str | None = None,
        agent: str = "agent",
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, max_turns=max_turns, **kwargs)
        run = (
            import_agent(agent_reference, agent_root)
            if agent_reference is not None
            else load_pickled_agent(str(agent_file))
        )
        self.spec = AgentSpec(name=agent, run=run, max_turns=self.max_turns)


@functools.cache
def import_agent(reference: str, root: str | None = None) -> Any:
    """The function ``/absolute/file.py:name`` or ``package.module:name`` names, imported once per
    worker process. A file's folder goes on ``sys.path`` (last), so that it imports the modules
    beside it as it did when the job was checked."""
    target, name = reference.rsplit(":", 1)
    if not target.endswith(".py"):
        if root is not None and root not in sys.path:
            sys.path.insert(0, root)  # first, as in the process that checked the job
        return getattr(importlib.import_module(target), name)
    module_name = f"aworld_train_agent_{abs(hash(target))}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, target)
        if spec is None or spec.loader is None:
            raise ImportError(f"agent file {target} cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # before it runs, as an import would: pickle looks it up
        if str(Path(target).parent) not in sys.path:
            sys.path.append(str(Path(target).parent))
        spec.loader.exec_module(module)
    return getattr(sys.modules[module_name], name)


@functools.cache
def load_pickled_agent(path: str) -> Any:
    """The pickled Python agent at ``path``, loaded once per worker process."""
    return loads(Path(path).read_bytes())
