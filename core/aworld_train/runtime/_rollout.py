"""Episodes of the user's agent, answered by the policy: what an engine's rollout calls.

:class:`AgentRuntime` runs one episode per row. Each episode gets a URL of its own on the
loopback endpoint (:mod:`aworld_train.runtime._endpoint`), the agent runs against it in the
agents' event loop (:func:`agents_loop`), and every model call is answered through the engine's
generate function and recorded (:class:`~aworld_train.runtime._episode.Episode`). An agent that
raises, times out, never calls the model or returns something that is not an answer ends its
episode as a failure: :attr:`EpisodeResult.failure` says why, the reward scores it 0, the engine
counts it in ``agent_failed``, and the step goes on.

Engines that run an event loop of their own (VeRL's agent-loop workers) await
:meth:`AgentRuntime.episode`; engines that call a rollout synchronously (TRL's ``rollout_func``,
ms-swift's scheduler) call :meth:`AgentRuntime.run`, which serves the episodes from a loop in a
background thread. :class:`BatchedGenerate` turns a batch generator (TRL's model, a vLLM
engine) into a generate function that answers concurrent episodes together.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from aworld_train.runtime.agents import LLM, run_agent
from aworld_train.runtime._endpoint import shared_endpoint
from aworld_train.runtime._episode import Episode, Generate, Generated, Limits, describe_failure
from aworld_train.runtime._trajectory import ChatRenderer, Trajectory

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec
    from aworld_train.tools import ToolSet

logger = logging.getLogger(__name__)


# The most tokens one character is looked for across (a UTF-8 character is at most 4 bytes; a
# tokenizer may split one further).
_CHARACTER_TOKENS = 8


def token_texts(renderer: ChatRenderer, ids: list[int], mask: list[int]) -> list[str]:
    """Each token's text, such that together they read as the whole text: a character that
    byte-level tokens split is shown whole with the token that completes it (the tokens
    before it show nothing), rather than as a replacement character on each. A character is
    never looked for across a change of ``mask`` (the model's tokens, then the context's)."""
    texts: list[str] = []
    start = 0
    for end in range(1, len(ids) + 1):
        text = renderer.decode(ids[start:end])
        if (
            text.endswith("\ufffd")
            and end < len(ids)
            and mask[end] == mask[end - 1]
            and end - start < _CHARACTER_TOKENS
        ):
            texts.append("")
            continue
        texts.append(text)
        start = end
    return texts


@dataclass
class EpisodeResult:
    """One episode as an engine trains on it.

    :ivar trajectory: the tokens, cut to the episode's token budget: the last segment's, when
        the agent rewrote its conversation.
    :ivar segments: every segment of the episode, in order, each cut to the budget (one unless
        the agent rewrote its conversation); an engine trains each as a row, with the
        episode's reward.
    :ivar answer: the agent's final answer, which the reward scores ("" after a failure).
    :ivar extra: extra fields the agent returned with its answer.
    :ivar failure: why the episode failed, or ``None``.
    :ivar turns: the model turns taken.
    :ivar tool_messages: the tool results the agent sent back.
    :ivar messages: the conversation after the prompt: the model's turns (tool calls parsed)
        and what the agent sent between them (the last segment's, after its prompt).
    :ivar rewrite: how the agent first rewrote its conversation, or ``None``.
    """

    trajectory: Trajectory
    answer: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    failure: str | None = None
    turns: int = 0
    tool_messages: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    segments: list[Trajectory] = field(default_factory=list)
    rewrite: str | None = None

    def __post_init__(self) -> None:
        self.segments = self.segments or [self.trajectory]

    def record(self, renderer: ChatRenderer) -> dict[str, Any]:
        """The episode token by token, as ``samples.jsonl`` keeps it (a sample's ``episode``,
        which ``aworld-train view`` shows): the prompt as the model saw it, the conversation
        after it, and each response token's text with its mask (1: the model's, trained on;
        0: context) and the log-prob it was sampled with."""
        trajectory = self.trajectory
        return {
            "prompt_text": renderer.decode(trajectory.prompt_ids),
            "messages": self.messages,
            "tokens": token_texts(renderer, trajectory.response_ids, trajectory.mask),
            "mask": list(trajectory.mask),
            "logprobs": [round(float(logprob), 4) for logprob in trajectory.logprobs],
            "segments": len(self.segments),
        }


class AgentRuntime:
    """Runs the user's agent, one episode per row, with the policy as its model.

    :param spec: the agent.
    :param tools: the agent's tools (the spec form calls them; other forms bring their own).
    :param renderer: the policy's chat template.
    :param generate: the engine's generate function.
    :param limits: each episode's limits.
    :param model: the name the agent calls the policy by; each episode's is this name with the
        episode's id (``name@id``), so that a client shared by every episode reaches its own.
    :param log_failure: whether the run's first failed episode is logged (a caller that reports
        the failure itself, as ``check`` does, passes ``False``).
    """

    def __init__(
        self,
        spec: AgentSpec,
        tools: ToolSet | None,
        renderer: ChatRenderer,
        generate: Generate,
        limits: Limits,
        model: str = "policy",
        log_failure: bool = True,
    ) -> None:
        self.spec = spec
        self.tools = tools
        self.renderer = renderer
        self.generate = generate
        self.limits = limits
        self.model = model
        self.running = 0  # episodes started and not finished, for BatchedGenerate
        self._logged_failure = not log_failure

    async def episode(self, row: dict[str, Any]) -> EpisodeResult:
        """Run the agent once on ``row``, in the calling event loop."""
        # The episode's own model name: a client shared by every episode reaches it by name.
        model = f"{self.model}@{uuid4().hex[:12]}"
        episode = Episode(self.renderer, self.generate, self.limits, model)
        endpoint = await shared_endpoint()
        self.running += 1
        answer = None
        try:
            with endpoint.serve(episode) as base_url:
                llm = LLM(base_url=base_url, model=model)
                running = asyncio.run_coroutine_threadsafe(
                    run_agent(self.spec, row, llm, self.tools), agents_loop()
                )
                try:
                    answer = await asyncio.wait_for(
                        asyncio.wrap_future(running), self.limits.timeout
                    )
                except asyncio.TimeoutError:
                    running.cancel()
                    episode.fail(f"the agent did not finish within {self.limits.timeout:g} s")
                except Exception as error:  # noqa: BLE001 - the user's agent fails in any way
                    episode.fail(describe_failure(error))
        finally:
            self.running -= 1
        return self._result(episode, row, answer)

    def run(self, rows: list[dict[str, Any]]) -> list[EpisodeResult]:
        """Run one episode per row, all at once, from a synchronous caller."""

        async def all_rows() -> list[EpisodeResult]:
            return list(await asyncio.gather(*(self.episode(row) for row in rows)))

        with heap_frozen():
            return asyncio.run_coroutine_threadsafe(all_rows(), serving_loop()).result()

    def _result(self, episode: Episode, row: dict[str, Any], answer: Any) -> EpisodeResult:
        if episode.trajectory is None:
            episode.fail("the agent finished without calling its model")
            from aworld_train.runtime.agents import prompt_messages

            trajectory = Trajectory(
                self.renderer.prompt_ids(
                    prompt_messages(row["prompt"], self.spec.system_prompt), None
                )
            )
            segments = [trajectory]
        else:
            segments = [segment.cut(self.limits.max_tokens) for segment in episode.segments]
        for segment in segments:
            if not segment.response_ids and self.renderer.eos_token_id is not None:
                # Trainers need a response token: the end token, which the model did not write.
                segment.add_context([self.renderer.eos_token_id])
        if episode.failure is not None and not self._logged_failure:
            self._logged_failure = True  # once per run: one broken agent fails every episode
            logger.warning(
                "agent '%s' failed an episode after %d turn(s): %s (scored 0)",
                self.spec.name,
                episode.turns,
                episode.failure,
            )
        failed = episode.failure is not None
        return EpisodeResult(
            trajectory=segments[-1],
            segments=segments,
            rewrite=episode.rewrite,
            answer="" if failed or answer is None else answer.text,
            extra={} if failed or answer is None else answer.extra,
            failure=episode.failure,
            turns=episode.turns,
            tool_messages=episode.tool_messages,
            messages=episode.messages[episode.prompt_messages :],
        )


class BatchedGenerate:
    """A generate function that answers concurrent episodes with one batch call.

    Requests wait until every running episode has asked, or no request has come for ``window``
    seconds (episodes busy with a tool), or ``max_wait`` seconds have passed since the first;
    then ``generate_batch`` runs in a worker thread, so that the event loop keeps serving agents
    meanwhile. The wait restarts at each request because on a loaded machine a step's first
    requests can arrive further apart than ``window``, and a batch cut there costs a whole
    second generation.

    :param generate_batch: ``(prompts, max_tokens) -> one Generated per prompt``; each result
        may be longer than the prompt's own budget and is cut to it.
    :ivar runtime: the runtime whose running episodes a batch waits for (set by the engine).
    """

    def __init__(
        self,
        generate_batch: Callable[[list[list[int]], int], list[Generated]],
        window: float = 0.05,
        max_wait: float = 0.5,
    ) -> None:
        self.generate_batch = generate_batch
        self.window = window
        self.max_wait = max_wait
        self._first = 0.0  # when the first request of the pending batch came
        self.runtime: AgentRuntime | None = None
        self._pending: list[tuple[list[int], int, asyncio.Future[Generated]]] = []
        self._flush: asyncio.TimerHandle | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generate")

    async def __call__(self, prompt_ids: list[int], max_tokens: int) -> Generated:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Generated] = loop.create_future()
        self._pending.append((prompt_ids, max_tokens, future))
        expected = self.runtime.running if self.runtime is not None else 1
        if len(self._pending) >= expected:
            self._start(loop)
        else:
            if self._flush is None:
                self._first = loop.time()
            else:
                self._flush.cancel()
            wait = min(self.window, self._first + self.max_wait - loop.time())
            self._flush = loop.call_later(max(0.0, wait), self._start, loop)
        return await future

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        batch, self._pending = self._pending, []
        if batch:
            loop.create_task(self._answer(batch))

    async def _answer(self, batch: list[tuple[list[int], int, asyncio.Future[Generated]]]) -> None:
        prompts = [prompt for prompt, _, _ in batch]
        budget = max(tokens for _, tokens, _ in batch)
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self._executor, self.generate_batch, prompts, budget
            )
        except Exception as error:  # noqa: BLE001 - each waiting episode fails with it
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        for (_, tokens, future), result in zip(batch, results):
            if not future.done():
                future.set_result(Generated(result.token_ids[:tokens], result.logprobs[:tokens]))


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """Keep the objects alive when a rollout starts (modules, the model, the trainer) out of the
    garbage collector's full collections while it runs. A step's requests allocate enough
    objects for a full collection every step or two, and in a trainer's process one scans half
    a million objects or more: ~150 ms of CPU each (~1 ms per episode of a step of 128), 3-30
    ms with them frozen. They are unfrozen when the rollout ends, so nothing is kept longer
    than it would be (a model an evaluation drops is freed as before); a process that froze
    objects itself is left as it is."""
    import gc

    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


_LOOPS: dict[str, asyncio.AbstractEventLoop] = {}
_LOOPS_LOCK = threading.Lock()


def _loop_thread(name: str) -> asyncio.AbstractEventLoop:
    with _LOOPS_LOCK:
        if name not in _LOOPS:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name=name, daemon=True).start()
            _LOOPS[name] = loop
        return _LOOPS[name]


def forget_loops() -> None:
    """Start new loop threads on next use: for a forked child, where the parent's loops exist
    but their threads do not."""
    _LOOPS.clear()


def agents_loop() -> asyncio.AbstractEventLoop:
    """The event loop, in a daemon thread, where this process runs every agent.

    Not the endpoint's loop: AWorld calls blocking code while an agent runs, and the endpoint
    must keep answering the agents' requests. One loop, not a thread per agent: AWorld keeps
    per-thread state, and runs in several threads at once hang; in one loop they run
    concurrently, as AWorld runs a batch of tasks. Sync Python agents run in its thread pool.
    """
    return _loop_thread("aworld-train-agents")


def serving_loop() -> asyncio.AbstractEventLoop:
    """The event loop, in a daemon thread, that serves the endpoint for synchronous callers."""
    return _loop_thread("aworld-train-endpoint")


def model_name(model: str) -> str:
    """The name the agent calls the policy by: a folder's name, or the hub id."""
    return Path(model).name or model
