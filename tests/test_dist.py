"""The distributions as users install them: `make dist` builds a wheel and an sdist of the
core and of each engine from a copy of this working tree; the core's wheel and the toy
engine's wheel go into a fresh virtual environment (dependencies from the usual index), where
`aworld-train engines --check` and `aworld-train check` run; every wheel's metadata is read
back as an installer reads it. Building needs no torch: every distribution is pure Python."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib.metadata import PathDistribution
from pathlib import Path

import aworld_train
import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
VERSION = aworld_train.__version__
# Libraries that pull torch: the core needs none of them (the engines do).
HEAVY = {"torch", "transformers", "trl", "ms-swift", "verl", "vllm", "accelerate"}
# Distributions of the engines and of the test engine installed beside the core.
TOY = "tests/distributions/toy"
ENGINES = ("trl", "swift", "verl", "tinker")
# Safety net against a hung download or build, not a measured time.
LIMIT_S = 900


@dataclass(frozen=True)
class Expected:
    """What one distribution's wheel must declare."""

    name: str
    project: str  # its folder, relative to the repository root
    package: str  # its import package's folder, relative to the repository root
    entry_points: dict[tuple[str, str], str]  # (group, name) -> object reference
    extras: frozenset[str]
    library: str | None  # the engine library it drives


EXPECTED = [
    Expected(
        "aworld-train",
        ".",
        "core/aworld_train",
        {("console_scripts", "aworld-train"): "aworld_train.cli:main"},
        frozenset({"aworld", "mcp", "trl", "swift", "verl", "tinker", "testing"}),
        None,
    ),
    Expected(
        "aworld-train-trl",
        "plugins/trl",
        "plugins/trl/aworld_train_trl",
        {("aworld_train.engines", "trl"): "aworld_train_trl.engine"},
        frozenset({"vllm", "lora", "test"}),
        "trl",
    ),
    Expected(
        "aworld-train-swift",
        "plugins/swift",
        "plugins/swift/aworld_train_swift",
        {("aworld_train.engines", "swift"): "aworld_train_swift.engine"},
        frozenset({"test"}),
        "ms-swift",
    ),
    Expected(
        "aworld-train-verl",
        "plugins/verl",
        "plugins/verl/aworld_train_verl",
        {("aworld_train.engines", "verl"): "aworld_train_verl.engine"},
        frozenset({"aworld", "test"}),
        "verl",
    ),
    Expected(
        "aworld-train-tinker",
        "plugins/tinker",
        "plugins/tinker/aworld_train_tinker",
        {("aworld_train.engines", "tinker"): "aworld_train_tinker.engine"},
        frozenset({"merge", "test"}),
        "tinker",
    ),
]


def clean_env() -> dict[str, str]:
    """This process's environment without what would leak into the child builds and the
    fresh venv: a parent make's jobserver, this venv, the plugin selection variables."""
    drop = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}
    return {
        k: v for k, v in os.environ.items() if k not in drop and not k.startswith("AWORLD_TRAIN_")
    }


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a command to the end and fail the test with its output when it fails."""
    result = subprocess.run(
        command, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=LIMIT_S
    )
    assert result.returncode == 0, (
        f"{shlex.join(command)} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    return result


def wheel_file(name: str) -> str:
    return f"{name.replace('-', '_')}-{VERSION}-py3-none-any.whl"


def sdist_file(name: str) -> str:
    return f"{name.replace('-', '_')}-{VERSION}.tar.gz"


def readme_pip_lines() -> list[list[str]]:
    """The `pip install` lines of the README's Install section, as argument lists."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## Install", 1)[1]
    section = section.split("\n## ", 1)[0]
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.DOTALL):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words[:2] == ["pip", "install"]:
                lines.append(words)
    return lines


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This working tree as a fresh clone of it would be (git's tracked and not-ignored
    files, edits included), with `make dist` run in it: the builds write into the copy, never
    into the tree others are using. The toy engine is built beside the five distributions."""
    tree = tmp_path_factory.mktemp("source")
    listed = run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO
    ).stdout.split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():  # a tracked file deleted in the working tree is gone
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tree / name)
    projects = " ".join([".", *(f"plugins/{engine}" for engine in ENGINES), TOY])
    run(["make", "dist", f"VENVS={REPO / '.venvs'}", f"DIST_PROJECTS={projects}"], cwd=tree)
    return tree


@pytest.fixture(scope="module")
def venv(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the core's and the toy engine's wheels, installed
    with the README's line from `dist/` (the toy engine in place of TRL, which needs torch)."""
    folder = tmp_path_factory.mktemp("user") / "venv"
    run([sys.executable, "-m", "venv", str(folder)], cwd=source)
    (line,) = [words for words in readme_pip_lines() if any(w.startswith("dist/") for w in words)]
    engine_wheel = f"dist/{wheel_file('aworld-train-trl')}"
    assert engine_wheel in line, f"the README's dist/ line installs TRL's wheel: {line}"
    words = [f"dist/{wheel_file('aworld-train-toy')}" if w == engine_wheel else w for w in line]
    run([str(folder / "bin" / words[0]), *words[1:]], cwd=source)
    return folder


def test_make_dist_builds_a_wheel_and_an_sdist_of_every_distribution(source: Path) -> None:
    names = [e.name for e in EXPECTED] + ["aworld-train-toy"]
    assert sorted(p.name for p in (source / "dist").iterdir()) == sorted(
        [wheel_file(n) for n in names] + [sdist_file(n) for n in names]
    )


def test_the_installed_wheels_come_from_the_venv_not_the_source(venv: Path) -> None:
    code = (
        "import aworld_train, aworld_train_toy\n"
        "print(aworld_train.__version__)\n"
        "print(aworld_train.__file__)\nprint(aworld_train_toy.__file__)\n"
    )
    version, *files = run(
        [str(venv / "bin" / "python"), "-c", code], cwd=venv.parent
    ).stdout.split()
    assert version == VERSION
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert all(Path(f).is_relative_to(site) for f in files), files
    assert not list(site.glob("__editable__*")), "an editable install"


def test_the_installed_engine_is_listed_and_loads(venv: Path) -> None:
    listed = json.loads(
        run(
            [str(venv / "bin" / "aworld-train"), "engines", "--check", "--json"], cwd=venv.parent
        ).stdout
    )
    assert sorted((e["name"], e["distribution"], e["version"], e["status"]) for e in listed) == [
        ("toy", "aworld-train-toy", VERSION, "ok"),
        ("twin", "aworld-train-toy", VERSION, "ok"),
    ]


def test_check_passes_on_a_toy_job_in_the_venv(venv: Path) -> None:
    job = venv.parent / "job"
    job.mkdir()
    (job / "train.jsonl").write_text(
        "".join(
            json.dumps({"prompt": f"What is {a} + {a}?", "ground_truth": str(2 * a)}) + "\n"
            for a in (1, 2, 3)
        ),
        encoding="utf-8",
    )
    (job / "job.yaml").write_text(
        "engine: toy\n"
        "agent: {name: adder, system_prompt: Answer with the number.}\n"
        "train_dataset: train.jsonl\n"
        "reward: exact_match\n"
        "config: {max_steps: 2, batch_size: 2}\n",
        encoding="utf-8",
    )
    result = run([str(venv / "bin" / "aworld-train"), "check", "job.yaml"], cwd=job)
    assert "all checks passed" in result.stdout


def test_the_readme_source_install_line_names_installable_projects(
    source: Path, venv: Path
) -> None:
    (line,) = [words for words in readme_pip_lines() if "." in words]
    # Without dependencies: the engines' own libraries pull torch. pip still builds each
    # project's metadata, so a path that is not a project fails here.
    result = run([str(venv / "bin" / line[0]), *line[1:], "--dry-run", "--no-deps"], cwd=source)
    would = re.search(r"Would install (.*)", result.stdout)
    assert would, result.stdout
    assert sorted(would.group(1).split()) == [
        f"aworld-train-{VERSION}",
        f"aworld-train-trl-{VERSION}",
    ]


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e.name)
def test_wheel_metadata(source: Path, expected: Expected) -> None:
    wheel = source / "dist" / wheel_file(expected.name)
    info = f"{expected.name.replace('-', '_')}-{VERSION}.dist-info/"
    dist = PathDistribution(zipfile.Path(wheel, info))
    meta = dist.metadata
    assert (meta["Name"], meta["Version"]) == (expected.name, VERSION)
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["License-Expression"] == "MIT"
    project = source / expected.project
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert archive.read(f"{info}licenses/LICENSE") == (source / "LICENSE").read_bytes()
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload().strip() == (project / "README.md").read_text("utf-8").strip()

    assert {(ep.group, ep.name): ep.value for ep in dist.entry_points} == expected.entry_points

    # Every module of the package, subpackages included, is in the wheel.
    package = source / expected.package
    modules = {f"{package.name}/{p.relative_to(package).as_posix()}" for p in package.rglob("*.py")}
    assert modules and modules <= names, sorted(modules - names)

    requires = [Requirement(text) for text in dist.requires or []]
    base = {r.name: r for r in requires if r.marker is None}
    extras = {r.name: r for r in requires if r.marker is not None}
    assert set(meta.get_all("Provides-Extra") or []) == expected.extras
    if expected.library is None:  # the core: no torch, and its extras name the engines
        assert not HEAVY & set(base), "the core needs no torch nor an engine's library"
        for engine in ENGINES:
            pin = extras[f"aworld-train-{engine}"]
            assert pin.marker.evaluate({"extra": engine})
            assert VERSION in pin.specifier and "0.2.0" not in pin.specifier
    else:  # an engine: the core's SDK of this series and the engine's own library
        assert VERSION in base["aworld-train"].specifier
        assert "0.2.0" not in base["aworld-train"].specifier
        assert expected.library in base
        assert not {n for n in base if n.startswith("aworld-train-")}, "no engine needs another"
