"""What ``aworld-train eval`` evaluates: a run directory or a job file (:class:`EvalTarget`),
the model named by ``--model`` (:func:`resolve_model`), the rows of ``--dataset``
(:func:`load_rows`), and what to evaluate instead when a run left no final model
(:func:`eval_hint`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from aworld_train import plugins
from aworld_train.agent import AgentSpec, load_agent
from aworld_train.job.config import TrainConfig, load_config
from aworld_train.dataset.loading import load_dataset
from aworld_train.plugins import installed_declarations
from aworld_train.errors import DatasetError, JobError, RunDirectoryError
from aworld_train.evaluation._models import model_path
from aworld_train.job.spec import Job, load_job
from aworld_train.run.export import ExportNote, read_export_note
from aworld_train.run.manifest import read_manifest
from aworld_train.reward import RewardSpec, resolve_reward
from aworld_train.run.files import (
    CHECKPOINTS,
    EVAL_DIR,
    JOB_FILE,
    MANIFEST,
    MODEL_DIR,
    last_checkpoint,
)


#: Completion tokens when the job sets neither ``max_completion_length`` nor the agent's
#: ``llm_max_tokens``: TRL's and ms-swift's default ``max_completion_length``.
DEFAULT_MAX_NEW_TOKENS = 256


@dataclass
class EvalTarget:
    """A run directory or a job file, read for evaluation.

    :ivar path: the run directory or the job file, as given.
    :ivar run_dir: the run directory; ``None`` for a job file.
    :ivar job: the job (a run's ``job.yaml``).
    :ivar agent: the job's agent.
    :ivar config: the job's config.
    :ivar reward: the job's reward.
    :ivar out_dir: where results go: ``<run>/eval``, or ``eval/`` beside the job file.
    """

    path: Path
    run_dir: Path | None
    job: Job
    agent: AgentSpec
    config: TrainConfig
    reward: RewardSpec
    out_dir: Path

    @property
    def max_new_tokens(self) -> int:
        """The job's completion budget: ``max_completion_length``, else the agent's
        ``llm_max_tokens``, as the engines take it."""
        return (
            self.config.max_completion_length or self.agent.llm_max_tokens or DEFAULT_MAX_NEW_TOKENS
        )

    @property
    def base_model(self) -> str:
        """The job's starting model: the config's ``model``, else the agent's.

        :raises JobError: when the job names none.
        """
        model = self.config.model or self.agent.model
        if not model:
            raise JobError(
                f"{self.path}: the job names no model (config key 'model' or the "
                "agent's model): give --model PATH"
            )
        return model


def open_target(target: str | Path) -> EvalTarget:
    """Read a run directory (its ``job.yaml``) or a job file for evaluation.

    :raises JobError: for a path that is neither, or a job without a reward; the job's own
        errors (agent, config, reward) as the checks word them.
    """
    path = Path(target)
    if (path / MANIFEST).is_file() and (path / JOB_FILE).is_file():
        run_dir: Path | None = path.resolve()
        job = load_job(path / JOB_FILE)
        out_dir = path.resolve() / EVAL_DIR
    elif path.is_file() and path.suffix in (".yaml", ".yml", ".json"):
        run_dir = None
        job = load_job(path)
        out_dir = path.resolve().parent / EVAL_DIR  # the job file's folder
    else:
        raise JobError(
            f"{target} is neither a run directory (one holding {MANIFEST} and "
            f"{JOB_FILE}) nor a job file (.yaml, .yml or .json)"
        )
    agent = load_agent(job.agent, job.base_dir)
    if job.reward is None:
        raise JobError(f"{path}: the job names no reward; eval scores with the job's reward")
    return EvalTarget(
        path=path,
        run_dir=run_dir,
        job=job,
        agent=agent,
        config=_job_config(job),
        reward=resolve_reward(job.reward, job.base_dir, plugins.installed_engine_names()),
        out_dir=out_dir,
    )


def _job_config(job: Job) -> TrainConfig:
    names = tuple(plugins.installed_engine_names())
    declarations = installed_declarations()
    assert job.written_config is not None, "load_job resolves the job"
    written, where = job.written_config
    return load_config(
        written,
        job.overrides,
        names,
        job.base_dir,
        engine=job.engine,
        declarations=declarations,
        where=where,
    )


def resolve_model(target: EvalTarget, model: str | None) -> tuple[str, str]:
    """The name results are filed under and the model to load for ``--model``.

    :param model: ``final`` (a run's ``model/``; the default for a run), ``base`` (the job's
        starting model, a relative folder read from the job's folder as training reads it; the
        default for a job file), a model folder (relative to the current folder), a LoRA adapter
        folder (``adapter_config.json``, as a LoRA run's checkpoints and ``adapter/`` are: it is
        loaded onto the job's base model) or a hub id ``organisation/name``. Any model but
        ``final`` and ``base`` is filed as ``<folder name>@<6 hex digits of its absolute path>``,
        so two models never share a name.
    :raises RunDirectoryError: for ``final`` of a run that left no final model, naming what to
        evaluate instead.
    :raises JobError: for ``final`` of a job file.
    :raises ModelError: for a folder that is not there or is refused, in one line; nothing is
        sent to a hub for it.
    """
    if model is None:
        model = "final" if target.run_dir is not None else "base"
    trust = target.config.trust_remote_code
    if model == "base":
        return "base", model_path(target.base_model, target.job.base_dir, trust)
    if model != "final":
        path = model_path(model, None, trust, given=True)
        return f"{Path(path).name or 'model'}@{_digest(path)}", path
    if target.run_dir is None:
        raise JobError(
            f"{target.path} is a job file: it has a base model only; evaluate a run "
            "directory for its final model, or give --model PATH (with --compare, "
            "it is compared with base)"
        )
    final = target.run_dir / MODEL_DIR
    if not (final / "config.json").is_file():
        raise RunDirectoryError(_no_final_model(target.run_dir))
    return "final", str(final)


def load_rows(target: EvalTarget, dataset: str, limit: int | None) -> tuple[str, list[dict]]:
    """The name results are filed under and the rows of ``--dataset``: ``test``, ``train``, or
    a file's stem and 6 hex digits of its absolute path; ``-firstN`` added with ``limit`` N.

    :param dataset: ``test``, ``train`` or a dataset file, read as the job reads its datasets
        (its ``columns`` mapping included).
    :param limit: score only the first ``limit`` rows.
    :raises DatasetError: for a job without that dataset, or a dataset that does not load (a
        row without ``ground_truth`` among them), naming the file and row.
    """
    job = target.job
    if dataset in ("test", "train"):
        source = getattr(job, f"{dataset}_dataset")
        if source is None:
            raise DatasetError(
                f"{target.path}: the job has no {dataset}_dataset; evaluate on "
                f"--dataset {'train' if dataset == 'test' else 'test'} or "
                "--dataset PATH"
            )
        name, role, base_dir = dataset, f"{dataset}_dataset", job.base_dir
    else:
        name = f"{Path(dataset).stem}@{_digest(Path(dataset).resolve())}"
        role, source, base_dir = "--dataset", dataset, None
    loaded = load_dataset(source, job.columns, base_dir, role)
    if limit is not None:
        loaded = loaded.select(range(min(limit, len(loaded))))
        name = f"{name}-first{limit}"
    return name, loaded.to_list()


def _digest(path: str | Path) -> str:
    """6 hex digits of a path: what tells two folders of one name apart in a file name."""
    return hashlib.sha1(str(path).encode()).hexdigest()[:6]


def _no_final_model(run_dir: Path) -> str:
    """Why a run has no final model, and what to evaluate instead, in one sentence."""
    status = read_manifest(run_dir).get("status", "unknown")
    said = f"run {run_dir} ({status}) has no final model ({MODEL_DIR}/)"
    checkpoint, note = _last_checkpoint(run_dir)
    if checkpoint is not None:
        return f"{said}; its last checkpoint is {checkpoint}: evaluate it with --model {checkpoint}"
    if note is not None:
        return (
            f"{said}; its last checkpoint, {note.checkpoint}, does not load as it is: convert "
            f"it into {MODEL_DIR}/ with {note.command}, then evaluate the run"
        )
    return f"{said} and saved no checkpoint: only its base model can be evaluated (--model base)"


def _last_checkpoint(run_dir: Path) -> tuple[Path | None, ExportNote | None]:
    """A run's last checkpoint that eval loads (``checkpoint-N``), else the export note of the
    last one that needs converting (the engine wrote it: :mod:`aworld_train.run.export`), else
    neither."""
    checkpoint = last_checkpoint(run_dir / CHECKPOINTS)
    if checkpoint is not None:
        return checkpoint, None
    return None, read_export_note(run_dir)


def eval_hint(run_dir: Path) -> str:
    """The command that evaluates what a run left (``aworld-train show`` prints it)."""
    if (run_dir / MODEL_DIR / "config.json").is_file():
        return f"aworld-train eval {run_dir}"
    checkpoint, note = _last_checkpoint(run_dir)
    if checkpoint is not None:
        return f"aworld-train eval {run_dir} --model {checkpoint}"
    if note is not None:
        return (
            f"no {MODEL_DIR}/: {note.command} converts {note.checkpoint}, then aworld-train "
            f"eval {run_dir}"
        )
    return f"no {MODEL_DIR}/ nor checkpoint: aworld-train eval {run_dir} --model base"
