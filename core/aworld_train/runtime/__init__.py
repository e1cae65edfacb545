"""The agent runtime: the user's agent, as it is, answered by the policy being trained.

An engine hands the runtime a generate function (prompt token ids and a token budget in, token
ids and log-probs out, from the engine's own generator) and gets back, per dataset row, the
episode's tokens with a mask (1 for the model's tokens, 0 for the environment's), the log-probs
and the agent's answer, which the reward scores. The modules:

- :mod:`~aworld_train.runtime._endpoint`: the loopback OpenAI-compatible endpoint, one URL per
  episode;
- :mod:`~aworld_train.runtime._requests` and :mod:`~aworld_train.runtime._replies`: what a
  ``chat/completions`` or Responses API request asks of its turn, and the turn in either API's
  form, plain or streamed;
- :mod:`~aworld_train.runtime._episode`: one episode's conversation, answered and recorded (one
  segment per rewrite of it);
- :mod:`~aworld_train.runtime._trajectory`: the token stream and the chat template's rendering;
- :mod:`~aworld_train.runtime.agents`: the three forms of agent (AWorld, Python, spec);
- :mod:`~aworld_train.runtime._rollout`: episodes for a batch of rows, batched generation.

Engines import it through :mod:`aworld_train.engine`. It imports nothing heavy: aiohttp when an
endpoint starts, AWorld when an AWorld agent runs.
"""

from __future__ import annotations

from aworld_train.runtime.agents import (
    LLM,
    Answer,
    aworld_pickler,
    last_user_text,
    prompt_messages,
)
from aworld_train.runtime._episode import Episode, Generate, Generated, Limits, describe_failure
from aworld_train.runtime._rollout import (
    AgentRuntime,
    BatchedGenerate,
    EpisodeResult,
    agents_loop,
    model_name,
)
from aworld_train.runtime._trajectory import (
    ChatRenderer,
    Trajectory,
    assistant_message,
    parse_tool_calls,
)

__all__ = [
    "LLM",
    "AgentRuntime",
    "Answer",
    "BatchedGenerate",
    "ChatRenderer",
    "Episode",
    "EpisodeResult",
    "Generate",
    "Generated",
    "Limits",
    "Trajectory",
    "agents_loop",
    "assistant_message",
    "aworld_pickler",
    "describe_failure",
    "last_user_text",
    "model_name",
    "parse_tool_calls",
    "prompt_messages",
]
