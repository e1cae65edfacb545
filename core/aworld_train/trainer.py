"""``AgentTrainer``: the one entry point, for Python users and the CLI alike.

The constructor runs the check pipeline (:data:`aworld_train.checks.CHECKS`) in the directory
that becomes the run's (:mod:`aworld_train.run.directory` keeps its life: checks, start, end);
``train()`` trains.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train import plugins
from aworld_train.checks import CHECKS, CheckResult, check_job
from aworld_train.errors import AWorldTrainError, CheckCrash, Interrupted, TrainingCrash
from aworld_train.job.spec import Job, resolve_job

if TYPE_CHECKING:
    from aworld_train.checks._pipeline import EngineHooks
    from aworld_train.evaluation import EvalResult


class TrainerStateError(AWorldTrainError, ValueError):
    """A trainer asked to train when it cannot (as AWorld Train's ``AgentTrainer`` says it)."""


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
    :param train_engine_name: the engine; ``None`` picks the only installed one, else ``verl``
        (:data:`~aworld_train.plugins.AWORLD_TRAIN_DEFAULT_ENGINE`).
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

    The arguments make one :class:`~aworld_train.job.spec.Job` (``reward_func`` its ``reward``,
    ``train_engine_name`` its ``engine``), which ``job`` holds, its engine the one picked;
    :meth:`from_job` takes a job as the CLI reads it.

    After the checks, ``checks`` holds the check table, ``context`` the run context,
    ``hand_off`` what the hooks handed on, ``settings`` the engine's effective settings (a list
    of ``Setting``, or ``None`` when the engine reports none) and ``run_dir`` the run's
    directory.

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
        # AWorld Train's argument names meet the job's here, and nowhere else.
        job = Job(
            engine=train_engine_name,
            agent=agent,
            train_dataset=train_dataset,
            test_dataset=test_dataset,
            reward=reward_func,
            columns=columns,
            config=config,
            run_path=run_path if run_path is not None else "runs",
            overrides=tuple(overrides),
            base_dir=base_dir,
        )
        with _as_value_errors():
            self._check(job, resume, check_only, show_progress, on_check)

    @classmethod
    def from_job(
        cls,
        job: Job,
        *,
        resume: str | Path | None = None,
        check_only: bool = False,
        show_progress: bool | None = None,
        on_check: Callable[[CheckResult], None] | None = None,
    ) -> AgentTrainer:
        """A trainer for ``job`` (as :func:`~aworld_train.job.spec.load_job` reads a job file with
        the CLI's flags, resolved; or one to resolve), its checks run as the constructor runs
        them."""
        trainer = cls.__new__(cls)
        trainer._check(job, resume, check_only, show_progress, on_check)
        return trainer

    def _check(
        self,
        job: Job,
        resume: str | Path | None,
        check_only: bool,
        show_progress: bool | None,
        on_check: Callable[[CheckResult], None] | None,
    ) -> None:
        """Run the check pipeline for ``job``, in the run's directory unless ``check_only``."""
        from aworld_train.run.directory import RunDirectory
        from aworld_train.run.redaction import install_secret_filter, remember_secrets
        from aworld_train.run.resume import resolve_resume

        # Before anything can print a secret: an error line, a log record.
        remember_secrets({"agent": job.agent, "config": job.config, "reward": job.reward})
        install_secret_filter()
        self.manager: Any = None  # the plugin manager, once the checks loaded the engine
        with _in_one_line(self._check_crash):
            job = resolve_job(job)
            remember_secrets({"config": job.written_config[0] if job.written_config else None})
            self.train_engine_name = plugins.default_engine(job.engine)
            self.engine_info = plugins.find_engine(self.train_engine_name)
        #: The job as the user gave it, resolved (:func:`~aworld_train.job.spec.resolve_job`),
        #: with the engine it trains on.
        self.job = dataclasses.replace(job, engine=self.train_engine_name)
        self.check_only = check_only
        self.initialized = False
        self.checks: list[CheckResult] = []
        self._on_check = on_check
        self.run_path = Path(self.job.run_path)
        self._progress = not check_only if show_progress is None else show_progress
        with _in_one_line(self._check_crash), _signals_interrupt("checks"):
            resume_from = (
                resolve_resume(resume, self.run_path, self.train_engine_name)
                if resume is not None
                else None
            )
            self.run_dir = RunDirectory.for_checks(
                self.run_path, self.train_engine_name, check_only
            )
            with self.run_dir.checking():
                self._run_checks(resume_from)
        self.initialized = True

    def _run_checks(self, resume_from: Path | None) -> None:
        """Run the check pipeline in the run directory and keep what it found; unless
        ``check_only``, start the run there."""
        checks = check_job(
            self.job,
            self.engine_info,
            self.run_dir,
            check_only=self.check_only,
            resume_from=resume_from,
            progress=self._progress,
            record=self._record,
            checks=CHECKS,
            # where a crash was raised is told by the plugins' packages
            loaded=self._loaded,
        )
        self.context, self.metrics = checks.context, checks.context.metrics
        self.hand_off, self.settings = checks.hand_off, checks.settings
        # check refuses what train would: a node rank the job has no room for.
        self.run_dir.require_nodes(self.context.config.resources.nnodes)
        if not self.check_only:
            self.run_dir.start(
                checks.rerunnable_job(),
                engine=self.train_engine_name,
                versions=checks.versions(),
                **checks.settings_fields(),
                resumed_from=str(resume_from) if resume_from else None,
                resume_support=checks.resume_support,
            )

    def train(self) -> dict[str, Any]:
        """Train on the engine; returns the final metrics.

        The run directory becomes ``running`` (a resumed run is named in the manifest of the
        run it continues) and is printed beside the progress, and logged, as training starts.

        :raises TrainerStateError: (a ``ValueError`` too, as AWorld Train raises it) when the
            trainer is not initialised or has already trained (each run gets a directory of
            its own).
        :raises JobError: when it was made with ``check_only=True``.
        :raises RunDirectoryError: when the run this one resumes got another continuation
            since this trainer was built.
        :raises AWorldTrainError: as the engine raised it, for a mistake it names.
        :raises TrainingCrash: for any other exception inside the engine: one line naming it,
            where it was raised and the run's ``error.log`` holding its traceback; the
            exception is its ``__cause__``. The run ends ``failed`` either way.

        Every error's ``str()`` is the one line the CLI prints after ``error:``; every one but
        a ``TrainingCrash`` is a ``ValueError`` too, as AWorld Train's refusals are.
        """
        with _as_value_errors():
            return self._train()

    def _train(self) -> dict[str, Any]:
        from aworld_train.errors import JobError

        if self.check_only:
            raise JobError(
                "this trainer was made with check_only=True: it ran the checks only; "
                "create AgentTrainer(...) without check_only to train"
            )
        if not self.initialized:  # as AWorld Train's API raises it
            raise TrainerStateError(f"Train engine {self.train_engine_name} is not initialized")
        if self.run_dir.status != "checked":  # a run directory is never reused
            raise TrainerStateError(
                f"run {self.run_dir.path} already ended ({self.run_dir.status}); "
                "create a new AgentTrainer to train again, or resume this run"
            )
        with _in_one_line(None):
            self.run_dir.begin()
        self._announce()
        hand_off = self.hand_off
        try:
            with _signals_interrupt("training"):
                self.metrics.start(None)
                result = self.manager.hook.train(
                    agent=hand_off.agent,
                    dataset=hand_off.dataset,
                    reward=hand_off.reward,
                    engine_config=hand_off.config,
                    ctx=self.context,
                )
        except BaseException as exc:
            self._close(exc)
            crash = self._crash(exc)
            if crash is None:
                if isinstance(exc, AWorldTrainError):
                    _fold(exc)
                raise
            raise crash from exc
        final = dict(result) if isinstance(result, dict) else self.metrics.last()
        self._close(None, final)
        return final

    def evaluate(
        self,
        model: str = "final",
        dataset: str = "test",
        *,
        limit: int | None = None,
        samples: int = 1,
    ) -> EvalResult:
        """Score a model of this run on a dataset with the job's reward, as ``aworld-train
        eval`` does, and write ``<run>/eval/<model>-<dataset>.json`` and ``.samples.jsonl``.

        :param model: ``final`` (the run's ``model/``), ``base`` (the job's model) or a folder.
        :param dataset: ``test``, ``train`` or a dataset file.
        :param limit: score only the first ``limit`` rows.
        :param samples: 1: one greedy completion per row; K: K sampled ones and pass@K.
        :raises AWorldTrainError: for bad input (no final model yet, no such dataset, ...), a
            ``ValueError`` too, as AWorld Train's ``inference`` raises it.
        """
        from aworld_train.errors import JobError
        from aworld_train.evaluation import evaluate

        with _as_value_errors():  # as AWorld Train's inference() refuses
            if self.check_only:
                raise JobError(
                    "this trainer was made with check_only=True: it has no run to evaluate"
                )
            return evaluate(
                self.run_dir.path,
                model=model,
                dataset=dataset,
                limit=limit,
                samples=samples,
                progress=True,
            )

    #: AWorld Train's name for :meth:`evaluate`.
    inference = evaluate

    @staticmethod
    def register_processor(train_engine_name: str, train_type: type) -> None:
        """Register a ``TrainerProcessor`` subclass as the engine ``train_engine_name``.

        :raises PluginError: (a ``ValueError`` too, as AWorld Train raises it) when the name is
            taken or ``train_type`` is not a ``TrainerProcessor`` subclass."""
        with _as_value_errors():
            plugins.register_processor(train_engine_name, train_type)

    @staticmethod
    def unregister_processor(train_engine_name: str) -> None:
        """Remove an engine added with :meth:`register_processor` (no error when absent)."""
        with _as_value_errors():
            plugins.unregister_processor(train_engine_name)

    def _loaded(self, hooks: EngineHooks) -> None:
        self.manager = hooks.manager

    def _record(self, check: CheckResult) -> None:
        self.checks.append(check)
        if self._on_check is not None:
            self._on_check(check)

    def _crash(self, error: BaseException) -> TrainingCrash | None:
        """The one-line error for an exception the engine did not mean (a bug, a library's
        failure), or ``None`` for one that already says what is wrong (an
        ``AWorldTrainError``) or stops the run (a ``KeyboardInterrupt``)."""
        from aworld_train.run.failure import crash_line, raised_at

        if isinstance(error, (AWorldTrainError, KeyboardInterrupt)):
            return None
        who = plugins.raised_by_label(self.manager, self.engine_info, error)
        where = raised_at(error, plugins.plugin_packages(self.manager))
        log = self.run_dir.error_log
        return TrainingCrash(crash_line(who, "train", error, where, log if log.is_file() else None))

    def _check_crash(self, error: Exception) -> AWorldTrainError:
        """The one line for an exception that ended the checks without saying what is wrong:
        a hook's names the plugin and the hook (as ``check`` prints it), anything else what it
        was and where it was raised."""
        from aworld_train.errors import CheckCrash
        from aworld_train.run.failure import check_crash_line, raised_at

        own = plugins.plugin_packages(self.manager) if self.manager is not None else {}
        return CheckCrash(check_crash_line(error, raised_at(error, own)))

    def _announce(self) -> None:
        """Say where the run is as training starts: beside the progress, and in the log."""
        import logging
        import sys

        logging.getLogger("aworld_train").info("run directory: %s", self.run_dir.path)
        if self._progress:
            print(f"training in {self.run_dir.path}", file=sys.stdout, flush=True)

    def _close(self, error: BaseException | None, final: dict[str, Any] | None = None) -> None:
        """End the run: the progress display stops, the run directory records how it ended."""
        self.metrics.stop()
        self.run_dir.close(error, final or self.metrics.last())


@contextlib.contextmanager
def _in_one_line(
    crash: Callable[[Exception], AWorldTrainError] | None,
) -> Iterator[None]:
    """Let only ``AWorldTrainError`` out of the block, each as the one line the CLI prints:
    an ``AWorldTrainError`` with its message folded into one line; any other ``Exception`` as
    ``crash(exc)`` (when given), chained to it so the traceback stays at hand, as ``--debug``
    shows it. A ``KeyboardInterrupt`` goes through as it is."""
    try:
        yield
    except AWorldTrainError as exc:
        _fold(exc)
        raise
    except Exception as exc:
        if crash is None:
            raise
        raise crash(exc) from exc


@contextlib.contextmanager
def _as_value_errors() -> Iterator[None]:
    """Raise each refusal as AWorld Train's ``AgentTrainer`` raises its own: as a ``ValueError``.

    Code written for AWorld Train catches ``ValueError`` around its calls. The project's errors
    are not ``ValueError``s elsewhere (an ``except ValueError`` around a library call must not
    hide a bad job), so here each is re-raised as a subclass of both its own type and
    ``ValueError``, with the same message, traceback and cause. A crash (an engine's or the
    checks' own bug) is not a refusal and goes through as it is."""
    try:
        yield
    except (TrainingCrash, CheckCrash):
        raise
    except AWorldTrainError as error:
        if isinstance(error, ValueError):
            raise
        refusal = Exception.__new__(_value_error_type(type(error)), *error.args)
        refusal.__dict__.update(error.__dict__)
        raise refusal.with_traceback(error.__traceback__) from error.__cause__


_VALUE_ERROR_TYPES: dict[type[AWorldTrainError], type[AWorldTrainError]] = {}


def _value_error_type(kind: type[AWorldTrainError]) -> type[AWorldTrainError]:
    """``kind`` as a ``ValueError`` too, named as ``kind`` is (one such type per ``kind``)."""
    if kind not in _VALUE_ERROR_TYPES:

        def __reduce__(self: BaseException) -> tuple[Any, ...]:
            # Pickled (to another process) as ``kind`` itself: this type is made here, at run time.
            return kind, self.args, self.__dict__ or None

        names = {"__module__": kind.__module__, "__qualname__": kind.__qualname__}
        body = {**names, "__doc__": kind.__doc__, "__reduce__": __reduce__}
        _VALUE_ERROR_TYPES[kind] = type(kind.__name__, (kind, ValueError), body)
    return _VALUE_ERROR_TYPES[kind]


def _fold(error: AWorldTrainError) -> None:
    """Make ``str(error)`` the CLI's line (whitespace folded, secrets hidden), keeping the
    error's type, traceback and cause."""
    from aworld_train.run.failure import one_line

    line = one_line(str(error))
    if line != str(error):
        error.args = (line,)


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
