"""``check`` runs the user's own agent once, before any model is loaded.

An AWorld agent or a Python agent is code: whether it imports, takes the row, calls its model
and returns an answer the reward can score shows only when it runs. :func:`check_agent_once`
runs one episode on the first row in a forked child (the agent may hang, exit or crash the
process; an AWorld agent, whose library's threads do not survive a fork, runs in this process
under the episode's time limit), through the same runtime training uses, with a stand-in for the policy: every request
is answered with :data:`STANDIN_REPLY`, and the policy's chat template renders what the agent
sends. Then the reward scores the agent's answer, in the same child.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aworld_train.errors import AgentError

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec
    from aworld_train.reward import RewardSpec

#: What the stand-in policy answers every request with.
STANDIN_REPLY = "OK"

#: Seconds the checked episode may take, the agent's start included.
CHECK_TIMEOUT = 60.0


@dataclass
class CheckedEpisode:
    """What the checked episode showed: the model calls and the answer's score."""

    turns: int
    answer: str
    score: float | None
    segments: int = 1


def check_agent_once(
    spec: AgentSpec,
    row: dict[str, Any],
    tokenizer: Any,
    reward: RewardSpec | None,
    *,
    where: str,
    timeout: float | None = None,
    one_sequence: str = "",
    segment_engines: tuple[str, ...] = (),
) -> CheckedEpisode:
    """Run ``spec`` on ``row`` against the stand-in policy and score its answer.

    :param where: how errors name the row, e.g. ``"train.jsonl row 0"``.
    :param timeout: seconds the episode may take (default :data:`CHECK_TIMEOUT`).
    :param one_sequence: the engine's name when it trains an episode as one token sequence only
        (:attr:`~aworld_train.runtime._episode.Limits.one_sequence`).
    :param segment_engines: the installed engines that train each segment.
    :raises AgentError: naming the agent, the row and the cause, when the agent fails to run,
        raises, hangs, never calls its model, returns something that is not an answer, or
        returns an answer the reward cannot score.
    """
    from aworld_train.isolation import call_isolated

    timeout = CHECK_TIMEOUT if timeout is None else timeout
    what = f"agent '{spec.name}' on {where}"
    if spec.form == "aworld":
        # AWorld's own threads (its logger, its sandbox) do not survive a fork: an AWorld agent
        # runs in this process, where the episode's time limit still stops a hung one.
        checked = _episode(spec, row, tokenizer, reward, timeout, one_sequence, segment_engines)
    else:
        checked = call_isolated(
            lambda: _episode(spec, row, tokenizer, reward, timeout, one_sequence, segment_engines),
            timeout=timeout + 10,
            what=what,
            error=AgentError,
        )
    if isinstance(checked, str):
        raise AgentError(f"{what}: {checked}")
    return checked


def _episode(
    spec: AgentSpec,
    row: dict[str, Any],
    tokenizer: Any,
    reward: RewardSpec | None,
    timeout: float,
    one_sequence: str,
    segment_engines: tuple[str, ...],
) -> CheckedEpisode | str:
    """The episode, then the reward; the failure's text, if any."""
    from aworld_train.runtime import _rollout as rollout
    from aworld_train.runtime._episode import Generated, Limits
    from aworld_train.runtime._rollout import AgentRuntime
    from aworld_train.runtime._trajectory import ChatRenderer

    if spec.form != "aworld":
        rollout.forget_loops()  # in a forked child: the parent's loop threads were not forked
    renderer = ChatRenderer(tokenizer)
    reply = list(tokenizer(STANDIN_REPLY, add_special_tokens=False)["input_ids"])
    if renderer.eos_token_id is not None:
        reply.append(renderer.eos_token_id)

    async def standin(prompt_ids: list[int], max_tokens: int) -> Generated:
        return Generated(reply, [0.0] * len(reply))

    # The failure is check's one error line: the runtime does not log it as well.
    runtime = AgentRuntime(
        spec,
        None,
        renderer,
        standin,
        Limits(spec.max_turns, 1 << 20, timeout, one_sequence, segment_engines),
        log_failure=False,
    )
    result = runtime.run([row])[0]
    if result.failure is not None:
        return result.failure
    score = None
    if reward is not None:
        info = dict(row.get("extra_info") or {}, **result.extra)
        try:
            score = reward.score(
                str(row.get("data_source") or ""),
                result.answer,
                str(row.get("ground_truth")),
                info,
                row=0,
            ).score
        except Exception as error:  # noqa: BLE001 - told as the agent's answer's problem
            return f"the reward cannot score the agent's answer {result.answer!r}: {error}"
    return CheckedEpisode(
        turns=result.turns, answer=result.answer, score=score, segments=len(result.segments)
    )
