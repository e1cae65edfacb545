"""Helpers for an engine's regression suite of its own library's configs (``real_configs/``: the
library's docs and example scripts as files, the model swapped for a local one), where
``aworld-train check`` must give the library's own verdict on each: accept what its code accepts,
refuse the rest with its reason.

In an engine's own tests (its ``conftest.py`` imports the :func:`long_model` fixture)::

    from aworld_train.testing.real_configs import (
        assert_a_dozen_configs, assert_same_verdict, verdict_of_check)

    @pytest.mark.parametrize("name", CONFIGS)
    def test_check_gives_the_librarys_own_verdict(name, long_model, tmp_path, capsys):
        own = librarys_verdict(name, long_model)            # None, or the library's reason
        check = verdict_of_check(capsys, write_job(tmp_path, long_model, name))
        assert_same_verdict("Mine", own, check, EXPECTED.get(name))

    def test_the_suite_holds_a_dozen_configs():
        assert_a_dozen_configs(CONFIGS, EXPECTED)
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

from aworld_train.testing.fixtures import run_cli


@pytest.fixture(scope="module")
def long_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with room for the configs' lengths (32,768 positions)."""
    from aworld_train.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("long-model"), max_positions=32768)


def verdict_of_check(capsys: pytest.CaptureFixture[str], job: Path, *options: str) -> str | None:
    """``aworld-train check JOB OPTIONS``: ``None`` when it passes, else its ``error:`` line (the
    end of its output where it wrote none)."""
    code, out, err = run_cli(capsys, "check", job, *options)
    if code == 0:
        return None
    return next(
        (line for line in err.splitlines() if line.startswith("error:")),
        err.strip()[-600:] or out[-600:],
    )


def assert_same_verdict(
    library: str,
    own: str | None,
    check: str | None,
    expected: str | None,
    *,
    any_case: bool = False,
) -> None:
    """Both verdicts accept, or both refuse; a refusal is expected (its reason and check's line
    both holding ``expected``, in any case where ``any_case``) exactly where ``expected`` is
    given. ``library`` names the library's verdict in the failure message."""
    both = f"{library}: {own}\ncheck: {check}"
    assert (own is None) == (check is None), both
    if expected is None:
        assert check is None, check
        return

    def said(verdict: str | None) -> str:
        return str(verdict).lower() if any_case else str(verdict)

    assert expected in said(own) and expected in said(check), both


def assert_a_dozen_configs(configs: Collection[str], expected: Mapping[str, str]) -> None:
    """The suite holds at least 12 configs, among them every one with an expected refusal."""
    assert len(configs) >= 12
    assert set(expected) <= set(configs)
