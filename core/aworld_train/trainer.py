"""``AgentTrainer``: the one entry point, for Python users and the CLI alike.

The constructor resolves the four modules (agent, dataset, reward, config) with the generic
layer, then runs the engine's check hooks in order; ``train()`` trains.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train import __version__, plugins
from aworld_train.errors import AWorldTrainError, Interrupted

if TYPE_CHECKING:
    import datasets

    from aworld_train.agent import AgentSpec
    from aworld_train.config import ConfigLayout, TrainConfig
    from aworld_train.context import Given
    from aworld_train.reward import RewardSpec
    from aworld_train.tools import ToolSet

logger = logging.getLogger("aworld_train")


@dataclass
class CheckResult:
    """One row of the check table."""

    module: str
    by: str  # "core" or the engine's name
    detail: str
    seconds: float


@dataclass
class HandOff:
    """What the hooks hand on to each other: each check's result, or the core's form where the
    engine's hook returned ``None``. The later hooks receive these as named arguments."""

    tools: ToolSet
    agent: Any = None
    dataset: Any = None
    reward: Any = None
    config: Any = None


@dataclass
class _Job:
    """The job as the user gave it; ``None`` where they gave nothing."""

    agent: Any
    config: Any
    reward_func: Any
    train_dataset: Any
    test_dataset: Any
    columns: dict[str, str] | None
    overrides: list[str] | tuple[str, ...]
    base_dir: Path | None


class AgentTrainer:
    """Train an agent on the engine of your choice.

    :param agent: an AWorld ``Agent``, an agent YAML/JSON file, a mapping or
        ``package.module:factory``.
    :param config: a mapping or a YAML/JSON path: common keys plus an engine section.
    :param reward_func: a callable, ``file.py[:function]`` (the function may be left out when
        the file defines one), ``package.module:function``, a built-in name, or a list of these
        (``{name: ..., weight: ...}`` for weights).
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
    :param show_progress: show training progress (a bar on a terminal, else a line every few
        percent); by default on, except in a check-only run.
    :param on_check: told each row of the check table as it is decided.

    An agent, dataset or reward left ``None`` is not loaded: the engine's hooks receive
    ``None`` and decide whether they need it.

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
        show_progress: bool | None = None,
        on_check: Callable[[CheckResult], None] | None = None,
    ) -> None:
        from aworld_train.redaction import install_secret_filter, remember_secrets

        # Before anything can print a secret: an error line, a log record.
        remember_secrets({"agent": agent, "config": config, "reward": reward_func})
        install_secret_filter()
        self.train_engine_name = plugins.default_engine(train_engine_name)
        self.engine_info = plugins.find_engine(self.train_engine_name)
        self.check_only = check_only
        self.initialized = False
        self.checks: list[CheckResult] = []
        self._on_check = on_check
        self._failed_reporters: set[str] = set()
        self.run_path = Path(run_path if run_path is not None else "runs")
        given = _Job(agent, config, reward_func, train_dataset, test_dataset, columns,
                     overrides, base_dir)
        with _signals_interrupt("checks"):
            self._check_in_run_directory(
                given, resume, not check_only if show_progress is None else show_progress)
        self.initialized = True

    def train(self) -> dict[str, Any]:
        """Train on the engine; returns the final metrics.

        :raises ValueError: when the trainer is not initialised, or has already trained: each
            run gets a directory of its own.
        :raises JobError: when the trainer was made with ``check_only=True``.
        """
        from aworld_train.errors import JobError

        if self.check_only:
            raise JobError("this trainer was made with check_only=True: it ran the checks only; "
                           "create AgentTrainer(...) without check_only to train")
        if not self.initialized:  # as AWorld Train's API raises it
            raise ValueError(f"Train engine {self.train_engine_name} is not initialized")
        ended = self.run_dir.manifest.get("status")
        if ended != "running":  # a run directory is never reused
            raise ValueError(f"run {self.run_dir.path} already ended ({ended}); create a new "
                             "AgentTrainer to train again, or resume this run")
        try:
            with _signals_interrupt("training"):
                self.metrics.start(None)
                hand_off = self.hand_off
                result = self.manager.hook.train(
                    agent=hand_off.agent, dataset=hand_off.dataset, reward=hand_off.reward,
                    config=hand_off.config, ctx=self.context)
        except BaseException as exc:
            self._close(exc)
            raise
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

    # --- The checks, in the order the hooks are called -----------------------------------------

    def _check_in_run_directory(self, given: _Job, resume: str | Path | None,
                                progress: bool) -> None:
        """Run every check, then start the run.

        The checks run in the run's own directory, since engines write converted inputs there
        and keep their absolute paths: it could not be renamed afterwards. It becomes a run
        when its manifest is written, once every check passed, and is removed when a check
        fails or is interrupted, so a failed ``train`` or ``--resume`` leaves nothing. A
        check-only run uses a temporary directory, always removed.
        """
        from aworld_train.rundir import RunDirectory, check_run_path, resolve_resume

        resume_from = resolve_resume(resume, self.run_path) if resume is not None else None
        check_run_path(self.run_path)
        if self.check_only:
            self.run_dir = RunDirectory.scratch()
        else:
            self.run_dir = RunDirectory.create(self.run_path, self.train_engine_name)
        try:
            spec = self._check(given, resume_from, progress)
            if not self.check_only:
                self._start_run(given, spec, resume_from)
        except BaseException:
            self.run_dir.discard()
            raise
        if self.check_only:
            self.run_dir.discard()

    def _check(self, given: _Job, resume_from: Path | None, progress: bool) -> AgentSpec:
        """Run every check; returns the agent as the core resolved it."""
        from aworld_train.agent import load_agent
        from aworld_train.config import load_config
        from aworld_train.context import RunContext
        from aworld_train.metrics import MetricsReporter
        from aworld_train.redaction import remember_secrets
        from aworld_train.rundir import read_metrics

        self.manager = plugins.create_manager(self.train_engine_name, self.run_dir.path)
        layout = self._config_layout()
        engine_names = tuple(set(plugins.installed_engine_names()) | set(plugins.KNOWN_ENGINES))
        train_config = self._step("config", "core", lambda: load_config(
            given.config, given.overrides, engine_names, given.base_dir,
            engine=self.train_engine_name, layout=layout), _describe_config)
        spec = self._step("agent", "core", lambda: load_agent(given.agent, given.base_dir),
                          _describe_agent)
        remember_secrets({"agent": spec.to_dict(), "config": train_config.to_dict()})
        self._check_model(spec, train_config, layout, given)
        self.metrics = MetricsReporter(
            None if self.check_only else self.run_dir.metrics_path,
            on_log=self._report_metrics,
            show_progress=progress,
            inherited=read_metrics(resume_from) if resume_from else None,
        )
        self.context = RunContext(
            engine=self.train_engine_name,
            run_dir=self.run_dir.path,
            config=train_config,
            metrics=self.metrics,
            check_only=self.check_only,
            resume_from=resume_from,
            given=_as_given(given),
        )
        self._check_agent(spec, train_config, given.base_dir)
        train = self._check_datasets(given, spec, train_config)
        self._check_reward(given, train, train_config)
        hand_off = self.hand_off
        self._engine_step("config", lambda: self.manager.hook.check_config(
            config=train_config, agent=hand_off.agent, dataset=hand_off.dataset,
            reward=hand_off.reward, ctx=self.context), train_config)
        return spec

    def _config_layout(self) -> ConfigLayout | None:
        """The engine's answer to ``config_layout``. :raises PluginError: for an answer that is
        neither a ``ConfigLayout`` nor ``None`` (a bug in the engine)."""
        from aworld_train.config import ConfigLayout
        from aworld_train.errors import PluginError

        layout = self._call_engine("config_layout", self.manager.hook.config_layout)
        if layout is not None and not isinstance(layout, ConfigLayout):
            raise PluginError(f"{self.engine_info.label} config_layout returned "
                              f"{type(layout).__name__}, not a ConfigLayout or None")
        return layout

    def _check_model(self, spec: AgentSpec, config: TrainConfig, layout: ConfigLayout | None,
                     given: _Job) -> None:
        """Check the one model of the job without running code from its folder, and give it to
        both places engines read (``config.model``, ``spec.model``) in its checked form (a local
        folder made absolute). The engine's own model key leaves its section, so the engine
        maps ``config.model`` onto it and trains the model checked here."""
        from aworld_train.model import preflight_model

        model = self._step("model", "core", lambda: preflight_model(
            self._one_model(spec, config, layout, given), given.base_dir,
            config.trust_remote_code), _describe_model)
        spec.model = model
        config.model = model

    def _one_model(self, spec: AgentSpec, config: TrainConfig, layout: ConfigLayout | None,
                   given: _Job) -> str | None:
        """The model the common ``model``, the agent and the engine's model key name (``None``
        when none does), taking the key out of the engine's section. ``-o model=...`` replaces
        the model the job names: the command line says which model to train this time.

        An AWorld ``Agent``'s ``llm_model_name`` is the name it calls its LLM server by, which
        AWorld Train itself sets aside when it trains: it is the policy only when nothing else
        names one, and never disagrees.

        :raises ConfigError: when two of them name different models, naming both places.
        """
        from aworld_train.config import describe_value, pop_section_key
        from aworld_train.errors import ConfigError

        named = [("config key 'model'", config.model)]
        if spec.source is None:  # an agent file or mapping: its ``model`` is the policy
            named.append((f"agent '{spec.name}' model", spec.model))
        section = config.sections.get(self.train_engine_name)
        if layout is not None and layout.model_key and section is not None:
            place = f"config key '{self.train_engine_name}.{layout.model_key}'"
            _, value = pop_section_key(section, layout.model_key)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{place} must be a model folder or hub id (a string), got "
                                  f"{describe_value(value)}")
            named.append((place, value))
        if config.model and any(item.partition("=")[0].strip() == "model"
                                for item in given.overrides):
            return config.model
        named = [(place, value) for place, value in named if value]
        if not named and spec.source is not None and spec.model:
            named = [(f"AWorld agent '{spec.name}' llm_model_name", spec.model)]
        for place, value in named[1:]:
            first_place, first = named[0]
            if _model_identity(value, given.base_dir) != _model_identity(first, given.base_dir):
                raise ConfigError(f"{first_place} names {first} but {place} names {value}: "
                                  "name the model once")
        return named[0][1] if named else None

    def _check_agent(self, spec: AgentSpec, config: TrainConfig, base_dir: Path | None) -> None:
        from aworld_train.tools import ToolSet, resolve_tools

        tools = ToolSet()
        if spec.uses_tools:
            tools = self._step("tools", "core", lambda: resolve_tools(spec, base_dir),
                               _describe_tools)
        self.hand_off = HandOff(tools=tools)
        self.context.tools = self.context.results["tools"] = tools
        self._engine_step("agent", lambda: self.manager.hook.check_agent(
            agent=spec, config=config, tools=tools, ctx=self.context), spec)

    def _check_datasets(self, given: _Job, spec: AgentSpec,
                        config: TrainConfig) -> datasets.Dataset | None:
        """Load and check both datasets; returns the training one (``None`` when not given)."""
        train = self._load_dataset("dataset", given.train_dataset, given, "train_dataset")
        test = self._load_dataset("test dataset", given.test_dataset, given, "test_dataset")
        self.train_dataset, self.test_dataset = train, test
        if spec.model and Path(spec.model).is_dir() and train is not None:
            self._check_lengths(spec, config, {"train_dataset": train, "test_dataset": test})
        self._engine_step("dataset", lambda: self.manager.hook.check_dataset(
            train_dataset=train, test_dataset=test, agent=self.hand_off.agent, config=config,
            ctx=self.context), train)
        return train

    def _load_dataset(self, module: str, source: Any, given: _Job,
                      role: str) -> datasets.Dataset | None:
        from aworld_train.dataset import load_dataset

        if source is None:
            if role == "train_dataset":
                self._record(CheckResult(module, "core", "none given", 0.0))
            return None
        return self._step(module, "core", lambda: load_dataset(
            source, given.columns, given.base_dir, role), _describe_dataset)

    def _check_lengths(self, spec: AgentSpec, config: TrainConfig,
                       datasets: dict[str, Any]) -> None:
        """The longest prompts, rendered as the model sees them, plus the completion fit the
        model's context."""
        from aworld_train.model import check_lengths

        present = {role: dataset for role, dataset in datasets.items() if dataset is not None}
        self._step("lengths", "core", lambda: check_lengths(
            spec.model, present, spec.system_prompt, self.context.tools.schemas(),
            config.max_completion_length or spec.llm_max_tokens, spec.max_turns,
            config.trust_remote_code), _describe_lengths)

    def _check_reward(self, given: _Job, train: datasets.Dataset | None,
                      config: TrainConfig) -> None:
        from aworld_train.reward import check_reward_on_row, resolve_reward

        def resolve_and_score() -> tuple[RewardSpec, Any]:
            reward = resolve_reward(given.reward_func, given.base_dir)
            sample = None
            if train is not None:  # in a child process, with a time limit: the user's code
                sample = check_reward_on_row(reward, train[0], 0, timeout=config.reward_timeout)
            return reward, sample

        reward = None
        if given.reward_func is None:
            self._record(CheckResult("reward", "core", "none given", 0.0))
        else:
            reward, _ = self._step("reward", "core", resolve_and_score, _describe_reward)
        hand_off = self.hand_off
        self._engine_step("reward", lambda: self.manager.hook.check_reward(
            reward=reward, agent=hand_off.agent, dataset=hand_off.dataset, config=config,
            ctx=self.context), reward)

    def _step(self, module: str, by: str, run: Callable[[], Any],
              describe: Callable[[Any], str]) -> Any:
        started = time.perf_counter()
        value = run()
        self._record(CheckResult(module, by, describe(value), time.perf_counter() - started))
        return value

    def _engine_step(self, key: str, run: Callable[[], Any], core_form: Any) -> None:
        """Call the engine's ``check_<key>`` hook and keep its result (or the core's form)."""
        started = time.perf_counter()
        result = self._call_engine(f"check_{key}", run)
        kept = result is None
        detail = "kept the core's form" if kept else f"converted ({type(result).__name__})"
        value = core_form if kept else result
        setattr(self.hand_off, key, value)
        self.context.results[key] = value
        seconds = time.perf_counter() - started
        self._record(CheckResult(key, self.train_engine_name, detail, seconds))

    def _call_engine(self, hook: str, run: Callable[[], Any]) -> Any:
        """Call an engine hook; anything it raises besides an ``AWorldTrainError`` is a bug in
        the engine, told in one line naming it (the traceback stays on the exception)."""
        try:
            return run()
        except AWorldTrainError:
            raise
        except Exception as exc:
            raise plugins.hook_failure(self.manager, self.engine_info, hook, exc) from exc

    def _record(self, check: CheckResult) -> None:
        self.checks.append(check)
        if self._on_check is not None:
            self._on_check(check)

    # --- The run ---------------------------------------------------------------------------------

    def _start_run(self, given: _Job, spec: AgentSpec, resume_from: Path | None) -> None:
        """Write ``job.yaml`` and the manifest: from here on the directory is a run."""
        from aworld_train.rundir import rerunnable_job

        self.run_dir.write_job(rerunnable_job(
            engine=self.train_engine_name,
            agent=given.agent,
            agent_spec=spec,
            train_dataset=given.train_dataset,
            test_dataset=given.test_dataset,
            reward=given.reward_func,
            columns=given.columns,
            config=self.context.config.to_dict(),
            run_path=self.run_path,
            base_dir=given.base_dir,
        ))
        self.run_dir.start(
            engine=self.train_engine_name,
            versions=self._versions(),
            resumed_from=str(resume_from) if resume_from else None,
        )

    def _report_metrics(self, step: int, metrics: dict[str, float]) -> None:
        plugins.report_metrics(self.manager, self.train_engine_name, self._failed_reporters,
                               step=step, metrics=metrics, ctx=self.context)

    def _versions(self) -> dict[str, str]:
        versions = {"aworld-train": __version__,
                    self.engine_info.distribution: self.engine_info.version}
        versions.update(self._call_engine("engine_versions", self.manager.hook.engine_versions)
                        or {})
        return versions

    def _close(self, error: BaseException | None, final: dict[str, Any] | None = None) -> None:
        """Mark the run completed, failed or interrupted, and draw its curves."""
        from aworld_train.plots import plot_run
        from aworld_train.redaction import redact_text

        self.metrics.stop()
        fields: dict[str, Any] = {"final_metrics": final or self.metrics.last()}
        status = "completed"
        if error is not None:
            status = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
            fields["error"] = redact_text(f"{type(error).__name__}: {error}")
        try:
            fields["plots"] = [p.name for p in plot_run(self.run_dir.path)]
        except Exception as exc:  # a plot never decides how a run ended
            logger.warning("could not draw the curves: %s", exc)
        self.run_dir.finish(status, **fields)


@contextlib.contextmanager
def _signals_interrupt(phase: str) -> Iterator[None]:
    """Raise :class:`Interrupted` on SIGINT and on SIGTERM while the block runs, so that a
    process stopped either way ends the same: a run marked interrupted, or checks that leave
    nothing behind. Signals reach only the main thread; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise Interrupted(f"{phase} interrupted by {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _model_identity(model: str, base_dir: Path | None) -> str:
    """A model as it is compared with another: the absolute folder it names, looked up where
    the model check looks (the job's folder, then the current one), else its text."""
    from aworld_train.references import resolve_path

    for root in (base_dir, None):
        folder = resolve_path(model, root)
        if os.path.isdir(folder):
            return str(folder)
    return model


def _as_given(job: _Job) -> Given:
    """The job's inputs as the user gave them, paths made absolute (``ctx.given``)."""
    from aworld_train.config import merge, parse_overrides, read_config
    from aworld_train.context import Given

    config = _absolute_path(job.config, job.base_dir)
    if job.overrides:
        config = merge(read_config(job.config, job.base_dir)[0], parse_overrides(job.overrides))
    return Given(
        agent=_absolute_path(job.agent, job.base_dir),
        train_dataset=_absolute_path(job.train_dataset, job.base_dir),
        test_dataset=_absolute_path(job.test_dataset, job.base_dir),
        reward=_absolute_reward(job.reward_func, job.base_dir),
        config=config,
    )


def _absolute_reward(reward: Any, base_dir: Path | None) -> Any:
    """A reward as given, each reference made absolute (in a list, in ``{name, weight}``)."""
    if isinstance(reward, list):
        return [_absolute_reward(item, base_dir) for item in reward]
    if isinstance(reward, dict) and "name" in reward:
        return {**reward, "name": _absolute_path(reward["name"], base_dir)}
    return _absolute_path(reward, base_dir)


def _absolute_path(value: Any, base_dir: Path | None) -> Any:
    """A path made an absolute string (relative to ``base_dir``), and the file of a
    ``file.py:name`` reference; anything else (a module reference, a built-in name, an
    object) as it is."""
    from aworld_train.references import resolve_path

    if not isinstance(value, (str, Path)):
        return value
    target, sep, name = str(value).rpartition(":")
    if sep and target.endswith(".py"):
        return f"{resolve_path(target, base_dir)}:{name}"
    path = resolve_path(value, base_dir)
    return str(path) if os.path.exists(path) else value


def _describe_config(config: TrainConfig) -> str:
    keys = ", ".join(f"{k} {v}" for k, v in config.to_dict().items()
                     if k not in ("resources",) and not isinstance(v, dict))
    sections = [name for name in config.sections]
    return keys + (f"; sections: {', '.join(sections)}" if sections else "")


def _describe_agent(spec: AgentSpec) -> str:
    parts = [f"'{spec.name}'", f"model {spec.model or '(from config)'}"]
    if spec.system_prompt:
        parts.append("system prompt")
    if spec.uses_tools:
        parts.append(f"{len(spec.tools)} tools, {len(spec.mcp_servers)} MCP servers")
    return ", ".join(parts)


def _describe_model(model: str | None) -> str:
    if model is None:
        return "none named"
    if Path(model).is_dir():
        return f"local folder {model}, checked without running code from it"
    return f"hub id {model} (not contacted during the checks)"


def _describe_lengths(_: None) -> str:
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        return "not compared: transformers is not installed here"
    return "the longest prompts plus the completion fit the model's context"


def _describe_tools(tools: Any) -> str:
    servers = ", ".join(f"MCP server '{server.name}'" for server in tools.servers)
    return f"{len(tools)} tools ({', '.join(tools.names) or 'none'})" + (
        f" from {servers}" if servers else "")


def _describe_dataset(dataset: datasets.Dataset) -> str:
    form = "chat messages" if isinstance(dataset[0]["prompt"], list) else "text"
    return f"{len(dataset)} rows, prompts as {form}, columns: {', '.join(dataset.column_names)}"


def _describe_reward(resolved: tuple[RewardSpec, Any]) -> str:
    reward, sample = resolved
    text = ", ".join(f"{f.name} x{f.weight:g}" for f in reward.functions)
    return text + (f"; sample row 0 scored {sample.score:.3g}" if sample is not None else "")
