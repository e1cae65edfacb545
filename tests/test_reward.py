"""The reward module: every input form, the signature check and the sample-row run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aworld_train.errors import RewardError
from aworld_train.reward import RewardSpec, resolve_reward
from aworld_train.checks._reward import check_reward_on_row
from aworld_train.reward._builtin import exact_match

ROW = {"prompt": "2+2?", "ground_truth": "4", "data_source": "math", "extra_info": {"index": 0}}

REWARD_FILE = """
def score(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if solution_str.strip() == ground_truth else 0.0


def detailed(data_source, solution_str, ground_truth, extra_info=None):
    return {"score": 0.5, "format_ok": 1.0, "note": "not a number"}


def two_args(solution_str, ground_truth):
    return 1.0


def raising(data_source, solution_str, ground_truth, extra_info=None):
    raise ZeroDivisionError("planted")


def words(data_source, solution_str, ground_truth, extra_info=None):
    return "yes"


def nothing(data_source, solution_str, ground_truth, extra_info=None):
    return None


def not_finite(data_source, solution_str, ground_truth, extra_info=None):
    return float("nan")


def no_score(data_source, solution_str, ground_truth, extra_info=None):
    return {"accuracy": 1.0}


def flexible(*args, **kwargs):
    return 0.25


def sleeping(data_source, solution_str, ground_truth, extra_info=None):
    import time
    time.sleep(60)
    return 1.0


def exiting(data_source, solution_str, ground_truth, extra_info=None):
    import sys
    sys.exit(3)


def ending(data_source, solution_str, ground_truth, extra_info=None):
    import os
    os._exit(0)


def crashing(data_source, solution_str, ground_truth, extra_info=None):
    import faulthandler, os, signal
    faulthandler.disable()  # pytest's handler would print the child's stack
    os.kill(os.getpid(), signal.SIGSEGV)


def counted(data_source, solution_str, ground_truth, extra_info=None):
    import pathlib
    with pathlib.Path(__file__).with_name("calls.txt").open("a") as calls:
        calls.write("called\\n")
    return 1.0


NOT_CALLABLE = 3
"""


@pytest.fixture
def reward_dir(tmp_path: Path) -> Path:
    (tmp_path / "my_rewards.py").write_text(REWARD_FILE)
    return tmp_path


def score_of(spec: RewardSpec, solution: str = "4") -> float:
    return spec(data_source="math", solution_str=solution, ground_truth="4", extra_info=None)


def test_callable() -> None:
    def mine(
        data_source: str,
        solution_str: str,
        ground_truth: str,
        extra_info: dict[str, Any] | None = None,
    ) -> float:
        return float(len(solution_str))

    spec = resolve_reward(mine)
    assert [(f.name, f.weight) for f in spec.functions] == [("mine", 1.0)]
    assert spec.functions[0].ref is None, "a local function cannot be imported by name"
    assert score_of(spec, "abc") == 3.0
    module_level = resolve_reward(exact_match)
    assert module_level.functions[0].ref == "aworld_train.reward._builtin:exact_match"


def test_file_and_function_relative_to_base_dir(reward_dir: Path) -> None:
    spec = resolve_reward("my_rewards.py:score", base_dir=reward_dir)
    function = spec.functions[0]
    assert function.name == "score"
    assert function.ref == f"{(reward_dir / 'my_rewards.py').resolve()}:score"
    assert score_of(spec, "4") == 1.0 and score_of(spec, "5") == 0.0


def test_module_and_function(reward_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(reward_dir))
    spec = resolve_reward("my_rewards:score")
    assert spec.functions[0].ref == "my_rewards:score"
    assert score_of(spec) == 1.0


def test_builtin_names() -> None:
    spec = resolve_reward("answer_match")
    assert spec.functions[0].ref == "aworld_train.reward._builtin:answer_match"
    assert score_of(spec, "<answer>4</answer>") == 1.0
    assert score_of(resolve_reward("exact_match"), " 4 ") == 1.0


def test_weighted_list(reward_dir: Path) -> None:
    spec = resolve_reward(
        [
            {"name": "exact_match", "weight": 2},
            {"name": "my_rewards.py:detailed", "weight": 0.5},
            "answer_match",
        ],
        base_dir=reward_dir,
    )
    assert [(f.name, f.weight) for f in spec.functions] == [
        ("exact_match", 2.0),
        ("detailed", 0.5),
        ("answer_match", 1.0),
    ]
    result = spec.score("math", "4", "4")
    assert result.score == pytest.approx(2 * 1.0 + 0.5 * 0.5 + 0.0)
    assert result.metrics == {
        "rewards/exact_match": 1.0,
        "rewards/detailed": 0.5,
        "format_ok": 1.0,
        "rewards/answer_match": 0.0,
    }


def test_dict_result_carries_score_and_metrics(reward_dir: Path) -> None:
    spec = resolve_reward("my_rewards.py:detailed", base_dir=reward_dir)
    result = check_reward_on_row(spec, ROW)
    assert result.score == 0.5
    assert result.metrics == {"format_ok": 1.0, "rewards/detailed": 0.5}


def test_sample_row_uses_the_ground_truth_as_completion(reward_dir: Path) -> None:
    spec = resolve_reward("my_rewards.py:score", base_dir=reward_dir)
    assert check_reward_on_row(spec, ROW).score == 1.0


def test_variadic_signature_is_accepted(reward_dir: Path) -> None:
    spec = resolve_reward("my_rewards.py:flexible", base_dir=reward_dir)
    assert score_of(spec) == 0.25


def test_numpy_scalars_are_numbers() -> None:
    import numpy

    for value in (numpy.float32(0.5), numpy.int64(1), numpy.float64(0.25)):
        spec = resolve_reward(
            lambda data_source, solution_str, ground_truth, extra_info=None, value=value: {
                "score": value,
                "length": numpy.int64(3),
            }
        )
        result = check_reward_on_row(spec, ROW)
        assert result.score == float(value)
        assert result.metrics["length"] == 3.0


def test_spec_passes_through() -> None:
    spec = resolve_reward("exact_match")
    assert resolve_reward(spec) is spec


def test_reward_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(RewardError, match=r"reward file not found: .*nope\.py"):
        resolve_reward("nope.py:score", base_dir=tmp_path)


def test_reward_function_not_found(reward_dir: Path) -> None:
    with pytest.raises(
        RewardError,
        match=r"reward 'my_rewards\.py:scor': 'scor' not found in "
        r"my_rewards\.py",
    ):
        resolve_reward("my_rewards.py:scor", base_dir=reward_dir)


def test_reward_module_not_found() -> None:
    with pytest.raises(RewardError, match="cannot import module 'no_such_reward_module'"):
        resolve_reward("no_such_reward_module:score")


def test_reward_file_that_raises_on_import(tmp_path: Path) -> None:
    (tmp_path / "bad_import.py").write_text("import no_such_dependency_xyz\n")
    with pytest.raises(RewardError, match=r"bad_import\.py raised ModuleNotFoundError on import"):
        resolve_reward("bad_import.py:score", base_dir=tmp_path)


def test_reward_reference_without_function(reward_dir: Path) -> None:
    with pytest.raises(RewardError, match="must look like path/to/file.py:name"):
        resolve_reward("my_rewards.py:", base_dir=reward_dir)


def test_reward_that_is_not_callable(reward_dir: Path) -> None:
    with pytest.raises(RewardError, match="'NOT_CALLABLE' is not callable"):
        resolve_reward("my_rewards.py:NOT_CALLABLE", base_dir=reward_dir)


def test_reward_with_the_wrong_signature(reward_dir: Path) -> None:
    with pytest.raises(RewardError) as raised:
        resolve_reward("my_rewards.py:two_args", base_dir=reward_dir)
    message = str(raised.value)
    assert "my_rewards.py:two_args' has signature (solution_str, ground_truth)" in message
    assert "expected reward(data_source, solution_str, ground_truth, extra_info=None)" in message


def test_reward_that_raises_on_the_sample_row(reward_dir: Path) -> None:
    spec = resolve_reward("my_rewards.py:raising", base_dir=reward_dir)
    with pytest.raises(
        RewardError,
        match=r"my_rewards\.py:raising' on row 3 raised "
        "ZeroDivisionError: planted",
    ):
        check_reward_on_row(spec, ROW, 3)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("words", "returned str 'yes'; expected a finite number or a dict with a numeric 'score'"),
        ("nothing", r"returned None; a reward scores every completion with a number \(return 0.0 "),
        ("not_finite", "returned float nan; expected a finite number"),
        ("no_score", "returned a dict without a finite numeric 'score'"),
    ],
)
def test_reward_that_returns_a_non_number(reward_dir: Path, name: str, message: str) -> None:
    spec = resolve_reward(f"my_rewards.py:{name}", base_dir=reward_dir)
    with pytest.raises(RewardError, match=f"on row 0 {message}"):
        check_reward_on_row(spec, ROW)


def test_unknown_builtin_suggests_one() -> None:
    with pytest.raises(RewardError) as raised:
        resolve_reward("exact_mach")
    assert "reward 'exact_mach' (did you mean 'exact_match'?) is not a built-in" in str(
        raised.value
    )


@pytest.mark.parametrize(
    ("reward", "message"),
    [
        (None, "no reward given"),
        ([], "no reward given"),
        ({"name": "exact_match", "weight": "high"}, "weight must be a finite number, got 'high'"),
        (
            {"name": "exact_match", "weight": float("nan")},
            "weight must be a finite number, got nan",
        ),
        ({"name": "exact_match", "weight": float("-inf")}, "must be a finite number, got -inf"),
        ({"weight": 1}, "must be {name: <reward>, weight: <number>}"),
        ({"name": "exact_match", "scale": 2}, "must be {name: <reward>, weight: <number>}"),
        (42, "reward 42 is not a built-in"),
    ],
)
def test_malformed_reward_entries(reward: Any, message: str) -> None:
    with pytest.raises(RewardError) as raised:
        resolve_reward(reward)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("sleeping", "did not return within 0.5 s (set config reward_timeout to allow more)"),
        ("exiting", "called sys.exit(3)"),
        ("ending", "ended the process (exit 0) without returning"),
        ("crashing", "was killed by signal SIGSEGV"),
    ],
)
def test_a_reward_that_stalls_or_ends_its_process_is_one_line(
    reward_dir: Path, name: str, message: str
) -> None:
    spec = resolve_reward(f"my_rewards.py:{name}", base_dir=reward_dir)
    with pytest.raises(RewardError) as raised:
        check_reward_on_row(spec, ROW, 0, timeout=0.5)
    ref = f"{(reward_dir / 'my_rewards.py').resolve()}:{name}"
    assert str(raised.value) == f"reward '{ref}' on row 0 {message}"


def test_each_function_scores_the_sample_row_once(reward_dir: Path) -> None:
    spec = resolve_reward(
        ["my_rewards.py:counted", {"name": "my_rewards.py:counted", "weight": 2}],
        base_dir=reward_dir,
    )
    result = check_reward_on_row(spec, ROW, 0, timeout=5)
    assert result.score == 3.0
    assert (reward_dir / "calls.txt").read_text() == "called\ncalled\n"


def test_a_lambda_reward_is_checked_in_its_process() -> None:
    spec = resolve_reward(
        [
            lambda data_source, solution_str, ground_truth, extra_info=None: 0.5,
            lambda data_source, solution_str, ground_truth, extra_info=None: "x",
        ]
    )
    with pytest.raises(RewardError, match=r"^reward '<lambda>' on row 2 returned str 'x'"):
        check_reward_on_row(spec, ROW, 2)
    assert check_reward_on_row(RewardSpec(spec.functions[:1]), ROW).score == 0.5


def test_a_reward_file_imports_modules_beside_it(tmp_path: Path) -> None:
    (tmp_path / "answers.py").write_text("def normalise(text):\n    return text.strip()\n")
    (tmp_path / "lazy_helper.py").write_text("BONUS = 0.5\n")
    (tmp_path / "scoring.py").write_text(
        "from answers import normalise\n\n"
        "def score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    import lazy_helper  # imported at the first call, after the file was loaded\n"
        "    return float(normalise(solution_str) == ground_truth) + lazy_helper.BONUS\n"
    )
    spec = resolve_reward("scoring.py:score", base_dir=tmp_path)
    assert check_reward_on_row(spec, ROW).score == 1.5
    assert score_of(spec, " 4 ") == 1.5
    import sys

    assert sys.path[-1] == str(tmp_path.resolve()), "kept, after the libraries"
    assert str(tmp_path.resolve()) not in sys.path[:-1]


def test_a_reward_file_that_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    with pytest.raises(RewardError, match=r"^reward file .*loop\.py is a symlink loop"):
        resolve_reward("loop.py:score", base_dir=tmp_path)
    (tmp_path / "folder.py").mkdir()
    with pytest.raises(RewardError, match=r"^reward file .*folder\.py is a directory"):
        resolve_reward("folder.py:score", base_dir=tmp_path)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("import sys\nsys.exit(3)\n", "called sys.exit(3) on import"),
        ("raise SystemExit\n", "called sys.exit() on import"),
        ("raise KeyboardInterrupt\n", "raised KeyboardInterrupt on import"),
    ],
)
def test_a_reward_file_that_ends_its_import(tmp_path: Path, code: str, message: str) -> None:
    (tmp_path / "quits.py").write_text(code)
    with pytest.raises(RewardError) as raised:
        resolve_reward("quits.py:score", base_dir=tmp_path)
    assert str(raised.value) == f"reward file {(tmp_path / 'quits.py').resolve()} {message}"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("import os\nos._exit(0)\n", "ended the process (exit 0) without returning"),
        (
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            "was killed by signal SIGKILL",
        ),
        ("import time\ntime.sleep(60)\n", "did not return within 0.5 s"),
    ],
)
def test_a_reward_file_that_ends_or_stalls_the_process_on_import(
    tmp_path: Path, code: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tried in a child process first: here it would end or stall check without a word.
    from aworld_train.job import references

    monkeypatch.setattr(references, "IMPORT_SECONDS", 0.5)
    (tmp_path / "hostile.py").write_text(code + "def score(**kwargs):\n    return 1.0\n")
    with pytest.raises(RewardError) as raised:
        resolve_reward("hostile.py:score", base_dir=tmp_path)
    path = (tmp_path / "hostile.py").resolve()
    assert str(raised.value) == f"reward file {path}, on import, {message}"


GAIA_REWARD_FILE = """
import re

from aworld_train.reward._builtin import exact_match  # imported, not defined here: not a candidate

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _squash(text):
    return " ".join(text.split())


def normalise(text):
    return _squash(text).lower().rstrip(".")


def question_scorer(model_answer, ground_truth):
    return normalise(model_answer) == normalise(ground_truth)


def gaia_reward_func(data_source, solution_str, ground_truth, extra_info=None):
    found = ANSWER.search(solution_str)
    if found is None:
        return 0.0
    return 1.0 if question_scorer(found.group(1), ground_truth) else 0.0
"""


def test_a_bare_reward_file_with_one_reward_function(tmp_path: Path) -> None:
    """A reward file named without :function is accepted when it defines one reward function;
    functions it imports, helpers of other signatures and private ones do not count."""
    (tmp_path / "reward").mkdir()
    (tmp_path / "reward" / "gaia_reward_function.py").write_text(GAIA_REWARD_FILE)
    spec = resolve_reward("reward/gaia_reward_function.py", base_dir=tmp_path)
    function = spec.functions[0]
    path = (tmp_path / "reward" / "gaia_reward_function.py").resolve()
    assert (function.name, function.ref) == ("gaia_reward_func", f"{path}:gaia_reward_func")
    assert score_of(spec, "Thinking... <answer> 4. </answer>") == 1.0
    assert score_of(spec, "4") == 0.0, "no <answer> tags"
    assert check_reward_on_row(spec, ROW).score == 0.0, "run in a child process, untagged"
    weighted = resolve_reward([{"name": str(path), "weight": 2}])
    assert weighted.score("gaia", "<answer>4</answer>", "4").score == 2.0


def test_a_bare_reward_file_with_several_reward_functions(reward_dir: Path) -> None:
    """A bare reward file with several reward functions: one line listing them."""
    (reward_dir / "reward.py").write_text(
        "def score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n\n"
        "def helper(text):\n    return text\n\n"
        "def bonus(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.5\n"
    )
    with pytest.raises(RewardError) as raised:
        resolve_reward("reward.py", base_dir=reward_dir)
    assert str(raised.value) == (
        "reward file reward.py defines score and bonus: name one, e.g. reward.py:score"
    )
    with pytest.raises(
        RewardError,
        match=r"defines score, detailed, raising, words, nothing, "
        r"not_finite, no_score, flexible, sleeping, .* and counted",
    ):
        resolve_reward("my_rewards.py", base_dir=reward_dir)
    assert resolve_reward("reward.py:bonus", base_dir=reward_dir).functions[0].name == "bonus"


def test_a_bare_reward_file_without_a_reward_function(tmp_path: Path) -> None:
    """A bare reward file with no reward function: one line naming what it does define."""
    (tmp_path / "helpers.py").write_text(
        "from aworld_train.reward._builtin import answer_match\n\n"
        "def question_scorer(model_answer, ground_truth):\n    return 1.0\n"
    )
    with pytest.raises(RewardError) as raised:
        resolve_reward("helpers.py", base_dir=tmp_path)
    assert str(raised.value) == (
        "reward file helpers.py defines no function reward(data_source, solution_str, "
        "ground_truth, extra_info=None) (it defines question_scorer(model_answer, ground_truth)); "
        "define one, or name one as helpers.py:function"
    )
    (tmp_path / "empty.py").write_text("")
    with pytest.raises(
        RewardError,
        match=r"^reward file empty\.py defines no function reward\(.*\); "
        r"define one, or name one as empty\.py:function$",
    ):
        resolve_reward("empty.py", base_dir=tmp_path)
    with pytest.raises(RewardError, match=r"^reward file not found: .*missing\.py$"):
        resolve_reward("missing.py", base_dir=tmp_path)


def test_a_bare_reward_file_stays_one_in_the_saved_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The saved job.yaml names a bare reward file by its absolute path, so a re-run from
    another folder finds it and still picks its one reward function."""
    from aworld_train.job.saved import rerunnable_job
    from aworld_train.job.spec import Job, resolve_job

    (tmp_path / "job" / "reward").mkdir(parents=True)
    (tmp_path / "job" / "reward" / "gaia_reward_function.py").write_text(GAIA_REWARD_FILE)
    saved = rerunnable_job(
        resolve_job(
            Job(
                engine="trl",
                reward="reward/gaia_reward_function.py",
                run_path=tmp_path / "run",
                base_dir=tmp_path / "job",
            )
        ),
        None,
        config={},
    )
    path = (tmp_path / "job" / "reward" / "gaia_reward_function.py").resolve()
    assert saved["reward"] == str(path)
    monkeypatch.chdir(tmp_path)
    assert resolve_reward(saved["reward"]).functions[0].ref == f"{path}:gaia_reward_func"
