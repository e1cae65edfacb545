"""``AgentTrainer``: the one entry point, for Python users and the CLI alike.

The constructor resolves the four modules (agent, dataset, reward, config) with the generic
layer, then runs the engine's check hooks in order; ``train()`` trains.
"""

from __future__ import annotations

import logging
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aworld_train import __version__, plugins
from aworld_train.errors import Interrupted

logger = logging.getLogger("aworld_train")

# Engine sections a job may carry even when that engine is not installed here, so that one job
# file trains on any engine.
KNOWN_ENGINES = ("trl", "swift", "verl")


@dataclass
class CheckResult:
    """One row of the check table."""

    module: str
    by: str  # "core" or the engine's name
    detail: str
    seconds: float


class AgentTrainer:
    """Train an agent on the engine of your choice.

    :param agent: an AWorld ``Agent``, an agent YAML/JSON file, a mapping or
        ``package.module:factory``.
    :param config: a mapping or a YAML/JSON path: common keys plus an engine section.
    :param reward_func: a callable, ``file.py:function``, ``package.module:function``, a
        built-in name, or a list of these (``{name: ..., weight: ...}`` for weights).
    :param train_dataset: a ``.jsonl``/``.json``/``.csv``/``.parquet`` path, a
        ``datasets.Dataset`` or a list of dicts.
    :param test_dataset: the same forms, or ``None``.
    :param run_path: the folder that receives run directories (default ``runs``).
    :param train_engine_name: the engine; ``None`` picks the only installed one, else ``verl``.
    :param columns: ``{canonical: your_column}`` renames for both datasets.
    :param overrides: ``key.sub=value`` config overrides.
    :param resume: a run directory (or its name under ``run_path``) to continue.
    :param check_only: run the checks in a temporary directory; ``train()`` is refused.
    :param base_dir: the folder relative paths are resolved from (the job file's folder).
    :raises AWorldTrainError: for every mistake in the job, naming where it is.
    """

    def __init__(
        self,
        agent: Any = None,
        config: Any = None,
        reward_func: Any = None,
        train_dataset: Any = None,
        test_dataset: Any = None,
        run_path: str | Path | None = None,
        train_engine_name: str | None = None,
        *,
        columns: dict[str, str] | None = None,
        overrides: list[str] | tuple[str, ...] = (),
        resume: str | Path | None = None,
        check_only: bool = False,
        base_dir: Path | None = None,
        show_progress: bool = False,
        on_check: Callable[[CheckResult], None] | None = None,
    ) -> None:
        from aworld_train.agent import load_agent
        from aworld_train.config import load_config
        from aworld_train.context import RunContext
        from aworld_train.dataset import load_dataset
        from aworld_train.metrics import MetricsReporter
        from aworld_train.reward import check_reward_on_row, resolve_reward
        from aworld_train.rundir import RunDirectory, resolve_resume
        from aworld_train.tools import ToolSet, resolve_tools

        self.train_engine_name = plugins.default_engine(train_engine_name)
        self.engine_info = plugins.find_engine(self.train_engine_name)
        self.check_only = check_only
        self.initialized = False
        self.checks: list[CheckResult] = []
        self._on_check = on_check
        self.run_path = Path(run_path if run_path is not None else "runs")
        resume_from = resolve_resume(resume, self.run_path) if resume is not None else None

        if check_only:
            self._scratch = tempfile.TemporaryDirectory(prefix="aworld-train-check-")
            self.run_dir = RunDirectory(Path(self._scratch.name))
        else:
            self.run_dir = RunDirectory.create(self.run_path, self.train_engine_name)
        try:
            self.manager = plugins.create_manager(self.train_engine_name, self.run_dir.path)
            engine_names = tuple({i.name for i in plugins.list_engines()} | set(KNOWN_ENGINES))
            train_config = self._step("config", "core", lambda: load_config(
                config, overrides, engine_names, base_dir), _describe_config)
            spec = self._step("agent", "core", lambda: load_agent(agent, base_dir), _describe_agent)
            # The config's model wins over the agent's; a folder beside the job is made absolute
            # in both, since engines read either.
            spec.model = _local_model(train_config.model or spec.model, base_dir)
            if train_config.model:
                train_config.model = spec.model
            self.metrics = MetricsReporter(
                None if check_only else self.run_dir.metrics_path,
                on_log=self._report_metrics,
                show_progress=show_progress,
            )
            self.context = RunContext(
                engine=self.train_engine_name,
                run_dir=self.run_dir.path,
                config=train_config,
                metrics=self.metrics,
                check_only=check_only,
                resume_from=resume_from,
            )
            if not check_only:
                self.run_dir.write_job({
                    "engine": self.train_engine_name,
                    "agent": spec.to_dict(),
                    "train_dataset": _describe_source(train_dataset),
                    "test_dataset": _describe_source(test_dataset),
                    "reward": _describe_source(reward_func),
                    "columns": columns,
                    "config": train_config.to_dict(),
                    "resume": str(resume_from) if resume_from else None,
                })
                self.run_dir.start(
                    engine=self.train_engine_name,
                    versions=self._versions(),
                    resumed_from=str(resume_from) if resume_from else None,
                )
            hook = self.manager.hook
            ctx = self.context
            ctx.results["tools"] = ToolSet()
            if spec.uses_tools:
                ctx.results["tools"] = self._step("tools", "core", lambda: resolve_tools(
                    spec, base_dir), _describe_tools)
            self._engine_step("agent", lambda: hook.check_agent(agent=spec, ctx=ctx), spec)

            train = self._step("dataset", "core", lambda: load_dataset(
                train_dataset, columns, base_dir, "train_dataset"), _describe_dataset)
            test = None
            if test_dataset is not None:
                test = self._step("test dataset", "core", lambda: load_dataset(
                    test_dataset, columns, base_dir, "test_dataset"), _describe_dataset)
            self.train_dataset, self.test_dataset = train, test
            self._engine_step("dataset", lambda: hook.check_dataset(
                train_dataset=train, test_dataset=test, ctx=ctx), train)

            reward = self._step("reward", "core", lambda: resolve_reward(reward_func, base_dir),
                                _describe_reward)
            sample = check_reward_on_row(reward, train[0], 0)
            self.checks[-1].detail += f"; sample row 0 scored {sample.score:.3g}"
            self._engine_step("reward", lambda: hook.check_reward(reward=reward, ctx=ctx), reward)
            self._engine_step("config", lambda: hook.check_config(config=train_config, ctx=ctx),
                              train_config)
        except BaseException as exc:
            self._close(exc)
            raise
        self.initialized = True
        if check_only:
            self._close(None)

    def train(self) -> dict[str, Any]:
        """Train on the engine; returns the final metrics.

        :raises ValueError: when the trainer is not initialised (or was made check-only), or
            has already trained: each run gets a directory of its own.
        """
        if not self.initialized or self.check_only:
            raise ValueError(f"Train engine {self.train_engine_name} is not initialized")
        ended = self.run_dir.manifest.get("status")
        if ended != "running":  # a run directory is never reused
            raise ValueError(f"run {self.run_dir.path} already ended ({ended}); create a new "
                             "AgentTrainer to train again, or resume this run")
        self.metrics.start(None)
        previous = _install_interrupt_handlers()
        try:
            result = self.manager.hook.train(ctx=self.context)
        except BaseException as exc:
            self._close(exc)
            raise
        finally:
            _restore_handlers(previous)
        final = dict(result) if isinstance(result, dict) else self.metrics.last()
        self._close(None, final)
        return final

    @staticmethod
    def register_processor(train_engine_name: str, train_type: type) -> None:
        """Register a ``TrainerProcessor`` subclass as the engine ``train_engine_name``."""
        plugins.register_processor(train_engine_name, train_type)

    @staticmethod
    def unregister_processor(train_engine_name: str) -> None:
        """Remove an engine added with :meth:`register_processor`."""
        plugins.unregister_processor(train_engine_name)

    def _step(self, module: str, by: str, run: Callable[[], Any],
              describe: Callable[[Any], str]) -> Any:
        started = time.perf_counter()
        value = run()
        self._record(CheckResult(module, by, describe(value), time.perf_counter() - started))
        return value

    def _engine_step(self, key: str, run: Callable[[], Any], core_form: Any) -> None:
        started = time.perf_counter()
        result = run()
        detail = "kept the core's form" if result is None else f"converted ({type(result).__name__})"
        self.context.results[key] = core_form if result is None else result
        self._record(CheckResult(key, self.train_engine_name, detail, time.perf_counter() - started))

    def _record(self, check: CheckResult) -> None:
        self.checks.append(check)
        if self._on_check is not None:
            self._on_check(check)

    def _report_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.manager.hook.report_metrics(step=step, metrics=metrics, ctx=self.context)

    def _versions(self) -> dict[str, str]:
        versions = {"aworld-train": __version__,
                    self.engine_info.distribution: self.engine_info.version}
        versions.update(self.manager.hook.engine_versions() or {})
        return versions

    def _close(self, error: BaseException | None, final: dict[str, Any] | None = None) -> None:
        """Mark the run completed, failed or interrupted, and draw its curves."""
        if hasattr(self, "metrics"):
            self.metrics.stop()
        if self.check_only:
            self._scratch.cleanup()
            return
        if not self.run_dir.manifest:
            self.run_dir.start(engine=self.train_engine_name)
        if error is None:
            status = "completed"
        elif isinstance(error, (Interrupted, KeyboardInterrupt)):
            status = "interrupted"
        else:
            status = "failed"
        fields: dict[str, Any] = {"final_metrics": final or (self.metrics.last() if hasattr(self, "metrics") else {})}
        if error is not None:
            fields["error"] = f"{type(error).__name__}: {error}"
        from aworld_train.plots import plot_run

        try:
            fields["plots"] = [p.name for p in plot_run(self.run_dir.path)]
        except Exception as exc:  # a plot never decides how a run ended
            logger.warning("could not draw the curves: %s", exc)
        self.run_dir.finish(status, **fields)


def _install_interrupt_handlers() -> dict[int, Any]:
    """Turn SIGINT and SIGTERM into :class:`Interrupted` so the run is marked interrupted."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def interrupt(signum: int, frame: Any) -> None:
        raise Interrupted(f"training interrupted by {signal.Signals(signum).name}")

    return {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}


def _restore_handlers(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def _local_model(model: str | None, base_dir: Path | None) -> str | None:
    """A model folder named relative to the job's folder, made absolute; a hub id or a path
    that is not there is kept as given."""
    if model and base_dir is not None and not Path(model).is_absolute():
        candidate = base_dir / model
        if candidate.is_dir():
            return str(candidate.resolve())
    return model


def _describe_source(source: Any) -> Any:
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


def _describe_config(config: Any) -> str:
    keys = ", ".join(f"{k} {v}" for k, v in config.to_dict().items()
                     if k not in ("resources",) and not isinstance(v, dict))
    sections = [name for name in config.sections]
    return keys + (f"; sections: {', '.join(sections)}" if sections else "")


def _describe_agent(spec: Any) -> str:
    parts = [f"'{spec.name}'", f"model {spec.model or '(from config)'}"]
    if spec.system_prompt:
        parts.append("system prompt")
    if spec.uses_tools:
        parts.append(f"{len(spec.tools)} tools, {len(spec.mcp_servers)} MCP servers")
    return ", ".join(parts)


def _describe_tools(tools: Any) -> str:
    servers = ", ".join(f"MCP server '{server.name}'" for server in tools.servers)
    return f"{len(tools)} tools ({', '.join(tools.names) or 'none'})" + (
        f" from {servers}" if servers else "")


def _describe_dataset(dataset: Any) -> str:
    form = "chat messages" if isinstance(dataset[0]["prompt"], list) else "text"
    return f"{len(dataset)} rows, prompts as {form}, columns: {', '.join(dataset.column_names)}"


def _describe_reward(spec: Any) -> str:
    return ", ".join(f"{f.name} x{f.weight:g}" for f in spec.functions)
