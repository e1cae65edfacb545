"""check_agent: the agent spec becomes swift's model, model type, template, system and sampling.

ms-swift needs a ``model_type`` and a ``template`` for every model. For a hub id or a folder
named after a model it knows, its registry gives both. For any other local folder the model
type comes from ``config.json``: the one swift type registered for its architecture, or, when
several are, the one named like the folder's own ``model_type``. The template is the model
type's only candidate; where a type has several (Qwen2's ChatML variants differ in their default
system prompt) the user picks one in ``swift: {template: ...}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import AgentError
from aworld_train.engine import policy_model

from aworld_train_swift.schema import validate_section

if TYPE_CHECKING:
    from aworld_train.engine import AgentSpec, ToolSet, TrainConfig


@dataclass
class SwiftAgent:
    """What ms-swift needs of the agent.

    :ivar model: a local model folder (absolute) or a hub id.
    :ivar model_type: swift's model type.
    :ivar template: swift's chat template name.
    :ivar local: whether ``model`` is a local folder (a hub id would be downloaded by swift).
    :ivar system: the default system prompt swift's template adds, ``""`` for none (where the
        model's chat template adds none), or ``None`` for the template's own.
    :ivar temperature: GRPO sampling temperature, or ``None`` for swift's default.
    :ivar top_p: GRPO nucleus sampling threshold, or ``None``.
    :ivar max_tokens: the most tokens one completion may have, or ``None``.
    :ivar runtime: the agent when its episodes run through the agent runtime (an AWorld or
        Python agent, or a spec agent with tools): GRPO then trains on each episode's tokens
        (:mod:`aworld_train_swift.rollout`).
    :ivar tools: the agent's tools, which the runtime calls for a spec agent.
    """

    model: str
    model_type: str
    template: str
    local: bool
    system: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    runtime: AgentSpec | None = None
    tools: ToolSet | None = None


def agent_to_swift(
    agent: AgentSpec, config: TrainConfig, tools: ToolSet | None = None
) -> SwiftAgent:
    """Resolve the agent's model into what swift needs, reading files only (no hub).

    The config's ``model`` and the agent's are the same (the core checked that they agree); ``swift.model_type`` and
    ``swift.template`` in the config take precedence over what is inferred.

    An AWorld or Python agent, and a spec agent with tools, run their episodes through the agent
    runtime, which GRPO trains on.

    :param tools: the agent's resolved tools (empty without tools).
    :raises AgentError: for a missing model, one whose type or template cannot be inferred, or a
        feature this engine does not train (an agent's episodes with SFT or DPO, tools with one
        turn, several turns without tools).
    """
    runtime = agent.runs_itself or agent.uses_tools
    if runtime and config.algorithm != "grpo":
        what = "uses tools" if agent.form == "spec" else f"is {agent.form} code"
        raise AgentError(
            f"agent '{agent.name}' {what}, which the swift engine trains with GRPO only (each "
            f"episode runs the agent): set algorithm: grpo, not {config.algorithm}"
        )
    agent.check_turns(
        "swift", calls_tools=agent.form == "spec" and agent.uses_tools, runs_episodes=runtime
    )
    model = policy_model(agent, config)
    # The section names the model type and template: a misspelt key must say so here.
    section = validate_section(config.engine_section(), config.algorithm)
    model, local, model_type, template = resolve_model(
        model, section.get("model_type"), section.get("template")
    )
    system = agent.system_prompt or None
    if system is None and local:
        system = no_default_system(model, template, config.trust_remote_code)
    if runtime and local and not has_chat_template(model, config.trust_remote_code):
        raise AgentError(
            f"agent '{agent.name}' calls its model with chat messages but model "
            f"{model} has no chat template to render them"
        )
    return SwiftAgent(
        model=model,
        model_type=model_type,
        template=template,
        local=local,
        system=system,
        temperature=agent.llm_temperature,
        top_p=agent.llm_top_p,
        max_tokens=agent.llm_max_tokens,
        runtime=agent if runtime else None,
        tools=tools if runtime and tools else None,
    )


def has_chat_template(model: str, trust_remote_code: bool) -> bool:
    """Whether the tokenizer of the local ``model`` has a chat template (the runtime renders
    every episode with it)."""
    from aworld_train.engine.runtime import load_tokenizer

    try:
        return bool(load_tokenizer(model, trust_remote_code).chat_template)
    except Exception:  # no tokenizer at all: none to render with
        return False


def resolve_model(
    model: str, model_type: str | None, template: str | None
) -> tuple[str, bool, str, str]:
    """Return the model (absolute folder or hub id), whether it is local, its swift model type
    and its template.

    :param model_type: ``swift.model_type``, validated; ``None`` to infer it.
    :param template: ``swift.template``, validated; ``None`` to infer it.
    :raises AgentError: naming the model and what to set.
    """
    from swift.model import MODEL_MAPPING
    from swift.model.model_meta import get_matched_model_meta, get_matched_model_types

    # The core has checked a local folder (config.json, weights, no code of its own unless
    # trusted) and made it absolute; anything else is a hub id.
    folder = Path(model)
    local = folder.is_dir()

    meta = MODEL_MAPPING[model_type] if model_type else get_matched_model_meta(model)
    if meta is None and local:
        hf_config = _read_config(folder)
        architectures = hf_config.get("architectures") or []
        candidates = get_matched_model_types(architectures)
        if len(candidates) > 1 and hf_config.get("model_type") in candidates:
            candidates = [hf_config["model_type"]]
        if len(candidates) != 1:
            found = f"ms-swift registers {candidates} for" if candidates else "ms-swift knows no"
            raise AgentError(
                f"model folder {folder}: {found} architecture {architectures[:1]}; set "
                "swift.model_type in the config"
            )
        meta = MODEL_MAPPING[candidates[0]]
    if meta is None:
        raise AgentError(
            f"model '{model}' is neither a local folder nor a model id ms-swift knows: set "
            "swift.model_type and swift.template in the config"
        )

    if template is None:
        if meta.template is not None:
            template = meta.template
        elif len(meta.candidate_templates) == 1:
            template = meta.candidate_templates[0]
        else:
            template = (
                _template_like_chat_template(folder, meta.candidate_templates) if local else None
            )
        if template is None:
            raise AgentError(
                f"model '{model}' (swift model type '{meta.model_type}') fits several templates "
                f"{meta.candidate_templates}, and none renders the model folder's own chat "
                "template (or it has none): set swift.template in the config to the one its "
                "model was trained with"
            )
    return model, local, str(meta.model_type), template


def _template_like_chat_template(folder: Path, candidates: list[str]) -> str | None:
    """The first of ``candidates`` (ms-swift's templates for the model type) that renders a
    conversation as the folder's own chat template does, or ``None``.

    Templates that render the same turns differ only in their default system prompt, which the
    engine leaves out where the chat template has none (:func:`no_default_system`): any of them
    trains on the prompts the chat template writes.
    """
    from aworld_train.engine.runtime import load_tokenizer
    from swift.template import TEMPLATE_MAPPING

    turns = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "A"},
    ]
    try:
        own = load_tokenizer(str(folder)).apply_chat_template(turns, tokenize=False)
    except Exception:  # no tokenizer or no chat template: nothing to compare with
        return None
    for name in candidates:
        meta = TEMPLATE_MAPPING.get(name)
        if meta is not None and _render(meta, turns) == own:
            return name
    return None


def _render(meta: Any, turns: list[dict[str, str]]) -> str | None:
    """``turns`` (system, user, assistant) as an ms-swift template meta writes them, for a
    template made of plain strings (one with token-id parts cannot be compared as text)."""
    parts = [*meta.prefix, *(meta.system_prefix or []), *meta.prompt, *meta.suffix]
    if not all(isinstance(part, str) for part in parts):
        return None
    system, user, answer = (turn["content"] for turn in turns)
    text = "".join(meta.system_prefix or meta.prefix).replace("{{SYSTEM}}", system)
    text += "".join(meta.prompt).replace("{{QUERY}}", user)
    return text + answer + "".join(meta.suffix)


def no_default_system(model: str, template: str, trust_remote_code: bool) -> str | None:
    """The system prompt swift needs for an agent without one so that it renders the prompt as
    the model's own chat template does (as the trl engine and ``aworld-train eval`` do).

    swift's template adds its registered default system prompt (``qwen``: "You are a helpful
    assistant.") when it is given none, where the model's chat template may add none, or
    another. When the chat template, given a user message alone, does not write the template's
    default, an empty system prompt makes swift write no system turn at all.

    :returns: ``""`` where swift would add a system prompt the chat template does not, else
        ``None`` (swift's default is the chat template's own, or swift adds none).
    """
    from aworld_train.engine.runtime import load_tokenizer
    from swift.template import TEMPLATE_MAPPING

    meta = TEMPLATE_MAPPING.get(template)
    default = getattr(meta, "default_system", None)
    if not default:
        return None
    try:
        tokenizer = load_tokenizer(model, trust_remote_code)
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": "x"}], tokenize=False, add_generation_prompt=True
        )
    except Exception:  # no tokenizer or chat template to compare with: swift's own default
        return None
    return None if default in rendered else ""


def _read_config(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise AgentError(f"model folder {folder}: cannot read config.json: {error}") from None
