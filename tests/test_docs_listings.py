"""The guides show the repository's files and the tool's output as they are: a code block
introduced by "this is [`path`]" holds that file (its comment lines aside), and what a console
block shows `aworld-train eval` and `show` printing is what they print for those figures."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOWN = re.compile(
    r"this is\s+\[`(?P<path>[^`]+)`\]\([^)]*\):\s*\n\n```\w*\n(?P<body>.*?)```", re.DOTALL
)


def _listings() -> list[tuple[str, str, str]]:
    found = []
    for guide in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        text = guide.read_text(encoding="utf-8")
        found += [(guide.name, match["path"], match["body"]) for match in SHOWN.finditer(text)]
    return found


def test_the_guides_show_files() -> None:
    assert _listings(), "no guide shows a file: the pattern no longer matches the guides"


@pytest.mark.parametrize(("guide", "path", "body"), _listings())
def test_a_shown_file_is_the_file(guide: str, path: str, body: str) -> None:
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    assert body.splitlines() == [line for line in lines if not line.startswith("#")], (
        f"{guide} shows {path} as it no longer is"
    )


# --- what the commands print --------------------------------------------------------------
#
# A guide's console blocks show `aworld-train eval` and `show` as they ran. Scores, timings
# and paths are the run's own; the shape is the tool's: the figures of each listing are read
# back, given to the code that prints them, and what it prints must be the listing again (a
# `...` line stands for lines the guide leaves out). A row, column or line the tool adds,
# drops or words otherwise fails here.

CONSOLE = re.compile(r"```console\n(.*?)```", re.DOTALL)
ELIDED = "..."


def _printed(command: str) -> list[tuple[str, str, list[str]]]:
    """Each `$ aworld-train <command>` of the guides' console blocks, with what it printed."""
    found = []
    for guide in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        for block in CONSOLE.findall(guide.read_text(encoding="utf-8")):
            sessions = re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]
            for session in sessions:
                line, *output = session.rstrip("\n").split("\n")
                if line.startswith(f"aworld-train {command} "):
                    found.append((guide.name, line.split("#")[0].strip(), output))
    return found


def _same_paths(lines: list[str]) -> list[str]:
    """Lines with every path up to a run's folder cut to ``runs/`` (the guide's run lived in
    another folder than the test's)."""
    return [re.sub(r"\S*/runs/", "runs/", line) for line in lines]


def _shows(shown: list[str], printed: list[str]) -> None:
    """``shown`` is ``printed``, or, with ``...`` lines, each part between them is a run of
    ``printed``'s lines, in order."""
    shown, printed = _same_paths(shown), _same_paths(printed)
    if ELIDED not in shown:
        assert shown == printed
        return
    parts = "\n".join(shown).split(ELIDED)
    rest = "\n".join(printed)
    for part in (part.strip("\n") for part in parts):
        assert part in rest, f"the tool no longer prints:\n{part}\n\nit prints:\n{rest}"
        rest = rest[rest.index(part) + len(part) :]


def test_the_guides_show_what_eval_and_show_print() -> None:
    assert {command for command in ("eval", "show") if _printed(command)} == {"eval", "show"}


def _table_results(output: list[str]) -> list[Any]:
    """The results an eval table shows, read back from it."""
    from aworld_train.evaluation import EvalResult

    title = re.fullmatch(r"eval on (\S+) \((\d+) rows, (\d+) completions? each\)", output[0])
    assert title, f"not an eval table's title: {output[0]!r}"
    rows = [
        [cell.strip() for cell in re.split(r"[┃│]", line)[1:-1]]
        for line in output
        if line[:1] in "┃│"
    ]
    models = [name for name in rows[0][1:] if name != "difference"]
    results = []
    for column, model in enumerate(models, start=1):
        cells = {row[0]: row[column] for row in rows[1:]}
        pass_at_k = next(
            (float(value) for label, value in cells.items() if label.startswith("pass@")), None
        )
        results.append(
            EvalResult(
                model=model,
                dataset=title[1],
                rows=int(title[2]),
                samples=int(title[3]),
                mean_reward=float(cells["mean reward"]),
                pass_at_k=pass_at_k,
                rewards={
                    label.removeprefix("reward "): float(value)
                    for label, value in cells.items()
                    if label.startswith("reward ")
                },
                seconds=float(cells["seconds"]),
                backend=cells.get("generated by", ""),
            )
        )
    return results


@pytest.mark.parametrize(
    ("guide", "command", "output"),
    [found for found in _printed("eval") if found[2][0].startswith("eval on")],
)
def test_an_eval_table_is_what_eval_prints(guide: str, command: str, output: list[str]) -> None:
    from aworld_train.cli._eval import _print_table
    from aworld_train.evaluation import result_stem

    results = _table_results(output)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        _print_table(results)
    table = printed.getvalue().rstrip("\n").split("\n")
    assert output[: len(table)] == table, f"{guide}: {command}"
    samples = [
        f"samples: {'/'.join(['runs', 'RUN', 'eval', result_stem(result)])}.samples.jsonl"
        for result in results
    ]
    assert [
        re.sub(r"\S*/runs/[^/]+/", "runs/RUN/", line) for line in output[len(table) :]
    ] == samples, f"{guide}: {command}"


@pytest.mark.parametrize(
    ("guide", "command", "output"), [found for found in _printed("eval") if "--json" in found[1]]
)
def test_an_eval_json_is_what_eval_prints(guide: str, command: str, output: list[str]) -> None:
    from aworld_train.evaluation import EvalResult, difference

    summary = json.loads(output[0])
    if "--compare" not in command:
        assert EvalResult(**summary).summary() == summary, f"{guide}: {command}"
        return
    base, final = (EvalResult(**summary[name]) for name in summary if name != "difference")
    assert {
        "base": base.summary(),
        final.model: final.summary(),
        "difference": difference(base, final),
    } == summary, f"{guide}: {command}"


def _run_from_show(run: Path, output: list[str]) -> None:
    """A run directory holding what a `show` listing shows: the manifest's status, times,
    engine, final metrics and plots, the eval results and the last samples."""
    manifest: dict[str, Any] = {"status": "completed", "plots": []}
    samples: list[dict[str, Any]] = []
    total = 0
    (run / "eval").mkdir(parents=True)
    for line in output:
        if line.startswith("engine:"):
            manifest["engine"] = line.split(":", 1)[1].strip()
        elif status := re.fullmatch(r"status:\s+(\w+) \(started (\S+), ended (\S+)\)", line):
            manifest.update(status=status[1], started_at=status[2], ended_at=status[3])
        elif line.startswith("final metrics: "):
            pairs = (
                pair.rsplit(" ", 1) for pair in line.removeprefix("final metrics: ").split(", ")
            )
            manifest["final_metrics"] = {key: float(value) for key, value in pairs}
        elif line.startswith("plot:"):
            manifest["plots"].append(Path(line.split(":", 1)[1].strip()).name)
        elif evaluated := re.fullmatch(
            r"  (\S+\.json): (\S+) on (\S+): (\d+) rows, "
            r"mean reward ([^,]+)(.*)",
            line,
        ):
            figures = dict(pair.split(" ") for pair in evaluated[6].split(", ")[1:])
            passes = [
                (int(key[5:]), float(value))
                for key, value in figures.items()
                if key.startswith("pass@")
            ]
            (run / "eval" / evaluated[1]).write_text(
                json.dumps(
                    {
                        "model": evaluated[2],
                        "dataset": evaluated[3],
                        "rows": int(evaluated[4]),
                        "mean_reward": float(evaluated[5]),
                        "rewards": {
                            key: float(value)
                            for key, value in figures.items()
                            if not key.startswith("pass@")
                        },
                        "pass_at_k": passes[0][1] if passes else None,
                        "samples": passes[0][0] if passes else 1,
                    }
                )
            )
        elif last := re.fullmatch(r"last rollout samples \(\d+ of (\d+)\):", line):
            total = int(last[1])
        elif sample := re.fullmatch(r"  step (\d+), reward (\S+): ('.*') -> ('.*')", line):
            samples.append(
                {
                    "step": int(sample[1]),
                    "reward": float(sample[2]),
                    "prompt": ast.literal_eval(sample[3]),
                    "completion": ast.literal_eval(sample[4]),
                }
            )
    earlier = [{"step": 0, "reward": 0.0, "prompt": "", "completion": ""}] * (total - len(samples))
    (run / "samples.jsonl").write_text(
        "".join(json.dumps(sample) + "\n" for sample in earlier + samples)
    )
    (run / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(("guide", "command", "output"), _printed("show"))
def test_a_show_listing_is_what_show_prints(
    guide: str, command: str, output: list[str], tmp_path: Path
) -> None:
    from aworld_train.cli._eval import show_command
    from click.testing import CliRunner

    run = tmp_path / "runs" / Path(command.split()[2]).name
    _run_from_show(run, output)
    printed = CliRunner().invoke(show_command, [str(run)])
    assert printed.exit_code == 0, printed.output
    _shows(output, printed.output.rstrip("\n").split("\n"))
