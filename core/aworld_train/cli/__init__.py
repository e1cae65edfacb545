"""The ``aworld-train`` command: the same API Python users call, from a job file.

Every user mistake is printed as one line on stderr with exit code 2, an engine that fails
while it trains as one line with exit code 1; ``--debug`` shows the traceback too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from aworld_train.errors import AWorldTrainError, TrainingCrash
from aworld_train.quiet import apply_quiet_libraries
from aworld_train.launch.threads import apply_thread_policy
from aworld_train.run.redaction import redact_text

if TYPE_CHECKING:
    from aworld_train.job.spec import Job

EXIT_CRASH = 1  # the engine failed while it trained: not a mistake the checks could name
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    # Before anything imports torch, whose OpenMP runtime reads it once: idle threads sleep on
    # a CPU (several times faster on shared cores), unless the user chose otherwise.
    apply_thread_policy()
    # Before anything imports AWorld, which reads it once: its logs off the terminal and out
    # of the current folder.
    apply_quiet_libraries()
    args = sys.argv[1:] if argv is None else argv
    with _sigterm_as_sigint():
        try:
            cli.main(args=args, prog_name="aworld-train", standalone_mode=False)
        except click.exceptions.Abort as exc:  # click turns KeyboardInterrupt into Abort
            reason = exc.__cause__
            click.echo(
                f"interrupted: {reason}" if reason and str(reason) else "interrupted", err=True
            )
            sys.exit(EXIT_INTERRUPTED)
        except click.ClickException as exc:  # usage errors: one line too
            click.echo(f"error: {_one_line(exc.format_message())}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except AWorldTrainError as exc:
            if "--debug" in args:  # the traceback, secrets hidden as everywhere else
                click.echo(redact_text(traceback.format_exc()), err=True)
            click.echo(f"error: {_one_line(str(exc))}", err=True)
            sys.exit(EXIT_CRASH if isinstance(exc, TrainingCrash) else EXIT_BAD_INPUT)
        except KeyboardInterrupt:  # before click took over
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)


@contextlib.contextmanager
def _sigterm_as_sigint() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler, CI) ends the command as Ctrl-C does, whatever it is
    doing; the trainer names the signal in the phases it handles itself."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="aworld-train")
def cli() -> None:
    """Train agents with the RL or fine-tuning engine of your choice."""


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--check", is_flag=True, help="Import each engine and validate its hooks.")
@click.option("--debug", is_flag=True, hidden=True)
def engines(as_json: bool, check: bool, debug: bool) -> None:
    """List the installed engines (reads metadata only, unless --check)."""
    from aworld_train import plugins

    found = plugins.list_engines()
    if check:
        found = [plugins.check_engine(info) for info in found]
    rows = [info.as_dict() for info in found]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        _print_engines(rows)
    if check:
        _exit_if_unusable(found)


def _exit_if_unusable(found: list[Any]) -> None:
    """After ``engines --check``: exit 1, naming them, when an installed engine cannot be used
    (broken, or its name taken twice), so that CI can rely on the command."""
    unusable = sorted({info.name for info in found if not info.ok})
    if unusable:
        click.echo(
            f"error: {len(unusable)} installed engine(s) cannot be used: {', '.join(unusable)}",
            err=True,
        )
        sys.exit(EXIT_CRASH)


def _print_engines(rows: list[dict[str, str]]) -> None:
    """The engines as a plain table."""
    if not rows:
        click.echo(
            "no engines installed (pip install aworld-train-<engine>; docs/engines.md lists them)"
        )
        return
    # A plain table: listing must stay instant, so no rich import here.
    columns = ("name", "distribution", "version", "status")
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    click.echo("  ".join(c.upper().ljust(widths[c]) for c in columns).rstrip())
    for row in rows:
        click.echo("  ".join(row[c].ljust(widths[c]) for c in columns).rstrip())


def job_options(command: Any) -> Any:
    """The options `check` and `train` share."""
    options = [
        click.argument("job", required=False, type=click.Path(path_type=Path)),
        click.option("--engine", help="Engine name (overrides the job's)."),
        click.option(
            "-o",
            "--override",
            "overrides",
            multiple=True,
            metavar="KEY=VALUE",
            help="Config override with a dotted key, e.g. -o learning_rate=1e-5 or -o <engine>.<key>=<value>",
        ),
        click.option(
            "--agent",
            help="Agent: a YAML/JSON file, a mapping as JSON/YAML text "
            '(e.g. \'{"name": "a"}\') or module:factory.',
        ),
        click.option("--train-dataset", help="Training dataset path."),
        click.option("--test-dataset", help="Test dataset path."),
        click.option("--reward", help="Reward: file.py[:function], module:function or built-in."),
        click.option("--config", help="Config YAML/JSON path."),
        click.option("--debug", is_flag=True, help="Show tracebacks."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@cli.command()
@job_options
def check(
    job: Path | None, engine: str | None, overrides: tuple[str, ...], debug: bool, **fields: Any
) -> None:
    """Run every check of a job without training."""
    _run_checks(_load_job(job, engine, overrides, fields), check_only=True)
    click.echo("all checks passed")


@cli.command()
@job_options
@click.option("--run-path", help="Folder that receives run directories (default: the job's).")
@click.option("--resume", help="Run directory (or its name) of an interrupted run to continue.")
def train(
    job: Path | None,
    engine: str | None,
    overrides: tuple[str, ...],
    debug: bool,
    run_path: str | None,
    resume: str | None,
    **fields: Any,
) -> None:
    """Check a job, then train it."""
    trainer = _run_checks(
        _load_job(job, engine, overrides, fields, run_path), check_only=False, resume=resume
    )
    try:
        final = trainer.train()
    except KeyboardInterrupt:
        _print_run(trainer.run_dir.path)
        if resume is None:
            again = _resume_command(job, engine, overrides, fields, run_path, trainer.run_dir.path)
        else:  # the command named the run this one continues: this one's job, as show says
            from aworld_train.run.resume import resume_command

            again = resume_command(trainer.run_dir.path)
        click.echo(f"to continue this run: {again}", err=True)
        raise
    except BaseException:
        _print_run(trainer.run_dir.path)
        raise
    if _print_run(trainer.run_dir.path):
        click.echo(
            "final metrics: "
            + ", ".join(
                f"{k} {v:.4g}" for k, v in final.items() if isinstance(v, float) and "/" not in k
            )
        )


@cli.command("new-engine")
@click.argument("name")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
def new_engine(name: str, directory: Path | None) -> None:
    """Scaffold a third-party engine distribution."""
    from aworld_train.plugins.scaffold import scaffold_engine

    target = scaffold_engine(name, directory)
    install = shlex.join(["pip", "install", "-e", f"{target}[test]"])
    click.echo(
        f"created engine '{name}' in {target}; install it with its tests' dependencies: {install}"
    )


from aworld_train.cli._eval import eval_command, show_command  # noqa: E402 (commands' modules)
from aworld_train.cli._view import view_command  # noqa: E402

cli.add_command(eval_command)
cli.add_command(show_command)
cli.add_command(view_command)


def _load_job(
    job: Path | None,
    engine: str | None,
    overrides: tuple[str, ...],
    fields: dict[str, Any],
    run_path: str | None = None,
) -> Job:
    """The job file (if any) with the flags that replace its fields and the ``-o`` overrides,
    its engine the one picked when it names none."""
    from aworld_train.job.spec import load_job

    loaded = load_job(
        job,
        overrides,
        engine=engine,
        run_path=run_path,
        **dict(fields, agent=_agent_flag(fields.get("agent"))),
    )
    return loaded if loaded.engine else dataclasses.replace(loaded, engine=_picked_engine())


def _agent_flag(value: str | None) -> Any:
    """``--agent``'s value: a mapping written as JSON or YAML text (``{"name": "a"}``,
    ``name: a``) becomes the mapping; a file or a ``module:factory`` stays as written.

    :raises JobError: for mapping text that does not parse, or parses to something else.
    """
    import os

    from aworld_train.errors import JobError
    from aworld_train.job.files import load_yaml_text

    # A reference (module:factory, file.py:factory) has no ": " and opens no brace.
    if (
        value is None
        or os.path.exists(value)
        or not (value.lstrip().startswith("{") or ": " in value)
    ):
        return value
    mapping = load_yaml_text(value, "--agent", JobError)
    if not isinstance(mapping, dict):
        raise JobError(
            f'--agent: an inline agent must be a mapping such as \'{{"name": "a"}}\', '
            f"not {type(mapping).__name__}"
        )
    return mapping


def _picked_engine() -> str:
    """The engine of a job that names none, saying which was picked when there was a choice."""
    from aworld_train import plugins

    picked = plugins.default_engine(None)
    installed = plugins.installed_engine_names()
    if len(installed) > 1:
        click.echo(
            f"engine: {picked} (installed: {', '.join(installed)}; choose one with "
            "--engine or 'engine:' in the job)",
            err=True,
        )
    return picked


def _resume_command(
    job: Path | None,
    engine: str | None,
    overrides: tuple[str, ...],
    fields: dict[str, Any],
    run_path: str | None,
    run_dir: Path,
) -> str:
    """The command that continues ``run_dir``: the one that started it, with ``--resume``."""
    words = ["aworld-train", "train", *([str(job)] if job is not None else [])]
    if engine:
        words += ["--engine", engine]
    for override in overrides:
        words += ["-o", override]
    for name, value in fields.items():
        if value is not None:
            words += [f"--{name.replace('_', '-')}", str(value)]
    if run_path is not None:
        words += ["--run-path", run_path]
    return redact_text(shlex.join([*words, "--resume", str(run_dir)]))


def _run_checks(job: Job, check_only: bool, resume: str | None = None) -> Any:
    """Build the trainer, printing the check table (also when a check fails)."""
    from rich.markup import escape
    from rich.table import Table

    from aworld_train.trainer import AgentTrainer

    checks: list[Any] = []
    console = _table_console()
    try:
        trainer = AgentTrainer.from_job(
            job, check_only=check_only, resume=resume, on_check=checks.append
        )
    finally:
        if checks:  # a check that failed first leaves only its error line
            table = Table(title="checks", title_justify="left")
            for column in ("module", "checked by", "result", "time"):
                table.add_column(column, overflow="fold")
            for item in checks:
                table.add_row(
                    item.module, item.by, redact_text(item.detail), f"{item.seconds:.2f}s"
                )
            console.print(table)
    if trainer.settings is not None:
        engine = trainer.train_engine_name
        table = Table(title="effective settings", title_justify="left")
        for column in ("setting", "value", f"{engine} key", f"{engine} value", "from"):
            table.add_column(column, overflow="fold")
        for setting in trainer.settings:
            table.add_row(
                *map(
                    escape,
                    (
                        setting.name,
                        _setting_text(setting.value),
                        setting.engine_key or "-",
                        _setting_text(setting.engine_value),
                        setting.source,
                    ),
                )
            )
        console.print(table)
    return trainer


def _table_console() -> Any:
    """The console the tables print on: a terminal's width, where a cell too wide folds onto
    the next line; anything else (a log, CI) as wide as the tables need, so that nothing is cut
    (rich would take 80 columns)."""
    from rich.console import Console

    console = Console(soft_wrap=False)
    if not console.is_terminal:
        console = Console(soft_wrap=False, width=_UNBOUNDED_WIDTH)
    return console


_UNBOUNDED_WIDTH = 100_000


def _setting_text(value: Any) -> str:
    """A setting's value as the table shows it, secrets hidden: ``none`` for ``None``, a list
    or a mapping in one line."""
    if value is None:
        text = "none"
    elif isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, dict):
        text = ", ".join(f"{key} {_setting_text(item)}" for key, item in value.items())
    elif isinstance(value, (list, tuple)):
        text = ", ".join(_setting_text(item) for item in value) or "none"
    else:
        text = str(value)
    return redact_text(text)


def _one_line(text: str) -> str:
    """An error as the one line the CLI prints: whitespace folded, secrets hidden (what
    ``str()`` of an error ``AgentTrainer`` raised already is)."""
    from aworld_train.run.failure import one_line

    return one_line(text)


def _print_run(run_dir: Path) -> bool:
    """Print where the run is; whether this node holds it (a node above 0 prints node 0's as
    its last line, having no run, and no metrics, of its own)."""
    from aworld_train.run.directory import node_rank
    from aworld_train.run.files import METRICS_FILE
    from aworld_train.run.plots import CURVES

    if (rank := node_rank()) > 0:  # node 0 holds the run: its directory, metrics and model
        kept = f"; this node's output: {run_dir}" if run_dir.is_dir() else ""
        click.echo(f"node {rank}: the run directory is node 0's{kept}")
        return False
    click.echo(f"run directory: {run_dir}")
    click.echo(f"metrics:       {run_dir / METRICS_FILE}")
    for curve in CURVES:
        if (run_dir / curve.filename).is_file():
            click.echo(f"{curve.metric + ' curve:':<14} {run_dir / curve.filename}")
    return True
