"""The job as a run's ``job.yaml`` keeps it: re-runnable from any folder
(:func:`rerunnable_job`), its in-memory inputs described (:func:`describe_source`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aworld_train.job.references import absolute_reference, resolve_path
from aworld_train.job.spec import Job


def rerunnable_job(job: Job, agent_spec: Any, config: dict[str, Any]) -> dict[str, Any]:
    """The job as ``job.yaml`` keeps it, so that ``aworld-train train runs/<run>/job.yaml``
    re-runs it from any folder: its paths absolute (the job is resolved:
    :func:`~aworld_train.job.spec.resolve_job`), the agent and the config written out whole (a ``module:factory`` agent stays a reference,
    since what a factory returns cannot be written down), and in-memory inputs described.

    :param agent_spec: what the core made of the job's agent.
    :param config: the validated config as plain data (its model folder already absolute).
    """
    saved = {
        "engine": job.engine,
        "agent": _saved_agent(job.agent, agent_spec, job.base_dir),
        "train_dataset": describe_source(job.train_dataset),
        "test_dataset": describe_source(job.test_dataset),
        "reward": _saved_reward(job.reward),
        "columns": job.columns,
        "config": config,
        "run_path": job.run_path,
    }
    return {key: value for key, value in saved.items() if value is not None}


def _saved_agent(agent: Any, spec: Any, base_dir: Path | None) -> Any:
    if agent is None:
        return None
    if isinstance(agent, (str, Path)) and Path(agent).suffix not in (".yaml", ".yml", ".json"):
        return str(agent)  # a module:factory
    data = spec.to_dict()
    data["tools"] = [
        absolute_reference(tool, base_dir) if isinstance(tool, str) else describe_source(tool)
        for tool in data.get("tools", [])
    ]
    if "mcp_config" in data:
        data["mcp_config"] = _pinned_servers(data["mcp_config"], base_dir)
    return {key: value for key, value in data.items() if value != []}


def _pinned_servers(mcp_config: dict[str, Any], base_dir: Path | None) -> dict[str, Any]:
    """``mcp_config`` with each stdio server's working folder made absolute: a server command
    such as ``python server.py`` runs where the job's folder was, not beside the saved job."""

    servers = mcp_config.get("mcpServers")
    if not isinstance(servers, dict):
        return mcp_config
    pinned = {}
    for name, entry in servers.items():
        if isinstance(entry, dict) and "command" in entry:
            entry = {**entry, "cwd": str(resolve_path(str(entry.get("cwd") or "."), base_dir))}
        pinned[name] = entry
    return {**mcp_config, "mcpServers": pinned}


def _saved_reward(reward: Any) -> Any:
    """Each reward of a list or a ``{name, weight}`` mapping as plain data."""
    if isinstance(reward, list):
        return [_saved_reward(item) for item in reward]
    if isinstance(reward, dict) and "name" in reward:
        return {**reward, "name": describe_source(reward["name"])}
    return describe_source(reward)


def describe_source(source: Any) -> Any:
    """An input as plain data for ``job.yaml``: small values as they are, the rest described."""
    if source is None or isinstance(source, (str, int, float, dict)):
        return source
    if isinstance(source, Path):
        return str(source)
    if isinstance(source, list):
        if all(isinstance(item, (str, dict)) for item in source) and len(source) <= 20:
            return source
        return f"<{len(source)} rows in memory>"
    if callable(source):
        return f"{getattr(source, '__module__', '?')}:{getattr(source, '__qualname__', '?')}"
    return f"<{type(source).__name__}>"


def job_reruns(job_file: Path) -> bool:
    """Whether a saved ``job.yaml`` holds every input as something a new process can load:
    :func:`describe_source` writes in-memory inputs as ``<...>``, functions of a script as
    ``__main__:name`` and callable objects as ``module:?``."""
    import yaml

    try:
        job = yaml.safe_load(job_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return False
    if not isinstance(job, dict):
        return False
    inputs = [job.get(key) for key in ("agent", "train_dataset", "test_dataset", "reward")]
    return not any(_lived_in_memory(value) for value in inputs)


def _lived_in_memory(value: Any) -> bool:
    if isinstance(value, list):
        return any(_lived_in_memory(item) for item in value)
    if isinstance(value, dict):
        return _lived_in_memory(value.get("name"))
    return isinstance(value, str) and (
        value.startswith(("<", "__main__:")) or ":<" in value or value.endswith(":?")
    )
