"""The agent loop VeRL's rollout runs for an AWorld agent: the user's ``Agent``, unmodified,
through AWorld's ``Runners``, with the policy being trained as its model.

VeRL's ``AgentLoopWorker`` builds one :class:`AWorldAgentLoop` per rollout from the run
directory's ``agent_loop.yaml``. Each episode:

1. unpickles a fresh copy of the agent (``agent.pkl`` in the run directory; AWorld agents keep
   state between runs) and points its LLM at this worker's loopback endpoint
   (:mod:`aworld_train_verl.chat_endpoint`), under a path of the episode's own;
2. runs it with ``Runners.run`` on the row's last user message, in an event loop of its own
   (:func:`agents_loop`) while the worker's loop serves the agent's requests;
3. answers each chat request with one ``server_manager.generate`` call and records it in a
   :class:`~aworld_train_verl.trajectory.Trajectory`: the first request's messages and tools are
   the prompt; each later request must repeat the conversation so far, and the messages it adds
   (the tool results AWorld's own tool runtime produced) are appended with mask 0; the model's
   tokens are appended exactly as generated, with mask 1, and returned as an OpenAI chat
   completion, with the tool calls read as the chat template writes them.

After ``max_turns`` model turns, or once the response reaches ``rollout.response_length``
tokens, further requests get an empty answer with ``finish_reason: "length"`` and the agent
stops. An agent that raises, reports a failed task, rewrites the conversation it already sent,
or does not finish within :data:`EPISODE_TIMEOUT` seconds ends its episode as a failure:
``agent_failure`` says why, the run's reward module scores it 0 and counts it in
``agent_failed``, and the step carries on.

This module imports VeRL at the top: only VeRL's workers import it. AWorld is imported when the
agent is unpickled.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput

from aworld_train_verl.chat_endpoint import shared_endpoint
from aworld_train_verl.trajectory import Trajectory, assistant_message, describe_failure, parse_tool_calls
from aworld_train_verl.vault import loads

logger = logging.getLogger(__name__)

#: Seconds one episode may run, from the agent's start to its answer.
EPISODE_TIMEOUT = 600.0

#: The API key the agent sends to the loopback endpoint (its own key never leaves the driver).
LOOPBACK_API_KEY = "aworld-train-loopback"


@functools.lru_cache(maxsize=None)
def _agent_bytes(path: str) -> bytes:
    return Path(path).read_bytes()


def load_agent_copy(path: str, base_url: str | None = None) -> Any:
    """A fresh copy of the pickled AWorld agent at ``path``, its LLM pointed at ``base_url``."""
    agent = loads(_agent_bytes(path))
    # AWorld keeps an agent's memory by its id: copies running at once need ids of their own.
    agent._id = f"{agent.name()}---uuid{uuid4().hex[:6]}uuid"
    if base_url is not None:
        llm = agent.conf.llm_config
        llm.llm_provider = "openai"
        llm.llm_base_url = base_url
        llm.llm_api_key = LOOPBACK_API_KEY
        llm.llm_stream_call = False
        agent._llm = None  # AWorld builds its client lazily from llm_config: rebuild it
    return agent


async def run_agent(agent: Any, question: str) -> Any:
    """Run ``agent`` on ``question`` through AWorld's Runners; AWorld's task response.

    Each run gets a session of its own: AWorld's default session id is a timestamp to the
    second, and episodes that share one share their memory."""
    from aworld.runner import Runners

    return await Runners.run(input=question, agent=agent, session_id=f"aworld-train-{uuid4().hex}")


_AGENTS_LOOP: asyncio.AbstractEventLoop | None = None
_AGENTS_LOOP_LOCK = threading.Lock()


def agents_loop() -> asyncio.AbstractEventLoop:
    """The event loop, in a daemon thread, where this process runs every AWorld agent.

    Not the worker's loop: AWorld calls blocking code while an agent runs, and the worker's loop
    must keep answering the agents' chat requests. One loop, not a thread per agent: AWorld keeps
    per-thread state, and runs in several threads at once hang; in one loop they run
    concurrently, as AWorld runs a batch of tasks.
    """
    global _AGENTS_LOOP
    with _AGENTS_LOOP_LOCK:
        if _AGENTS_LOOP is None:
            _AGENTS_LOOP = asyncio.new_event_loop()
            threading.Thread(target=_AGENTS_LOOP.run_forever, name="aworld-agents", daemon=True).start()
        return _AGENTS_LOOP


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """The task an AWorld agent gets: the row's last user message (its system prompt is the
    agent's own)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return text_of(message.get("content"))
    raise ValueError("the row's prompt has no user message")


def text_of(content: Any) -> str:
    """A message's content as text: OpenAI clients send a string or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def chat_message(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI request message in the form the trajectory keeps (and the chat template
    renders): text content, an assistant's tool calls as :func:`assistant_message` writes them
    (arguments as objects, no ids), so that a repeated turn compares equal to the one answered."""
    role, content = message.get("role"), text_of(message.get("content"))
    if role != "assistant":
        return {"role": role, "content": content}
    calls = [{"name": call["function"]["name"], "arguments": _arguments(call["function"].get("arguments"))}
             for call in message.get("tool_calls") or []]
    return assistant_message(content.strip(), calls)


def _arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return arguments
    return {} if arguments is None else arguments


def completion(content: str, calls: list[dict[str, Any]], finish_reason: str, *, model: str,
               prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """An OpenAI chat-completion response body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{uuid4().hex[:24]}", "type": "function",
             "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}
            for call in calls
        ]
    return {
        "id": f"chatcmpl-{uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


class AWorldAgentLoop(AgentLoopBase):
    """An AWorld agent as a VeRL agent loop.

    :param agent_file: the pickled AWorld ``Agent``.
    :param max_turns: the most model turns of one episode.
    """

    def __init__(self, *args: Any, agent_file: str, max_turns: int, **kwargs: Any) -> None:
        kwargs.pop("tools", None)  # VeRL's own tool registry: AWorld runs the agent's tools
        super().__init__(*args, **kwargs)
        # AWorld writes log files under $AWORLD_LOG_PATH (default ./logs): keep them in the run.
        os.environ.setdefault("AWORLD_LOG_PATH", str(Path(agent_file).parent / "aworld_logs"))
        self.agent_file = agent_file
        self.max_turns = int(max_turns)
        self.episode: Trajectory | None = None
        self.messages: list[dict[str, Any]] = []  # the conversation the trajectory holds
        self.ended = False
        self.sampling_params: dict[str, Any] = {}
        self._one_turn_at_a_time = asyncio.Lock()

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        self.sampling_params = sampling_params
        prompt = [dict(message) for message in kwargs["raw_prompt"]]
        failure = None
        endpoint = await shared_endpoint()
        with endpoint.serve(self.chat) as base_url:
            try:
                agent = load_agent_copy(self.agent_file, base_url)
                # Cancelling the wrapped future (on timeout) cancels the agent's run as well.
                running = asyncio.run_coroutine_threadsafe(run_agent(agent, last_user_text(prompt)), agents_loop())
                response = await asyncio.wait_for(asyncio.wrap_future(running), EPISODE_TIMEOUT)
            except asyncio.TimeoutError:
                failure = f"the agent did not finish within {EPISODE_TIMEOUT:g} s"
            except Exception as error:  # noqa: BLE001 - the user's agent fails in any way
                failure = describe_failure(error)
            else:
                if response is None or not getattr(response, "success", True):
                    failure = f"the agent's task failed: {getattr(response, 'msg', None) or 'no message'}"
        if self.episode is None:  # the agent stopped before it called its model: no response
            self.episode = await Trajectory.start(self, prompt, None, sampling_params)
            failure = failure or "the agent finished without calling its model"
        episode = self.episode
        episode.failure = episode.failure or failure
        if episode.failure is not None:
            logger.warning("AWorld agent episode failed after %d turn(s): %s", episode.turns, episode.failure)
        return episode.output()

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one chat request of the agent with the policy, recording its tokens.

        Requests are answered one at a time, in the order they came: the episode is one token
        sequence. A request that fails (the policy's server, the chat template) ends the
        episode as a failure, so that a retried request cannot append its messages twice.
        """
        async with self._one_turn_at_a_time:
            try:
                return await self._answer(request)
            except Exception as error:
                if self.episode is not None and self.episode.failure is None:
                    self.episode.failure = describe_failure(error)
                self.ended = True
                raise

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        messages = [chat_message(message) for message in request["messages"]]
        if self.episode is None:
            self.episode = await Trajectory.start(self, messages, request.get("tools") or None, self.sampling_params)
        elif self.ended:
            return self._completion("", [], "length")
        elif messages[: len(self.messages)] != self.messages:
            self.episode.failure = (
                "the agent rewrote the conversation it had sent, so the episode is not one token "
                "sequence (keep the agent's memory whole while training)"
            )
            self.ended = True
            return self._completion("", [], "length")
        else:
            added = messages[len(self.messages):]
            await self.episode.add_context(self.messages, messages)
            self.episode.tool_calls += sum(message["role"] == "tool" for message in added)

        output = await self.episode.generate()
        text = self.tokenizer.decode(output.token_ids, skip_special_tokens=False)
        content, calls = parse_tool_calls(text)
        if any("error" in call for call in calls):  # a malformed call: the agent sees the text
            content, calls = text, []
        content = self._without_special_tokens(content)
        self.ended = self.episode.full or self.episode.turns >= self.max_turns
        self.messages = [*messages, assistant_message(content, calls)]
        finish = "length" if self.episode.full else ("tool_calls" if calls else "stop")
        return self._completion(content, calls, finish, completion_tokens=len(output.token_ids))

    def _completion(self, content: str, calls: list[dict[str, Any]], finish: str, completion_tokens: int = 0) -> dict:
        episode = self.episode
        prompt_tokens = len(episode.runtime_ids) - completion_tokens if episode is not None else 0
        return completion(content, calls, finish, model=Path(self.config.actor_rollout_ref.model.path).name,
                          prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    def _without_special_tokens(self, text: str) -> str:
        for token in self.tokenizer.all_special_tokens:
            text = text.replace(token, "")
        return text.strip()
