"""The engine SDK, ``aworld_train.engine``: the one module an engine imports."""

from __future__ import annotations

import json

from helpers import run_python

import aworld_train.engine

HEAVY = ("torch", "transformers", "datasets", "ray", "verl", "swift", "trl", "aworld")


def test_importing_the_sdk_imports_nothing_heavy() -> None:
    # A finder placed first sees every import attempt, also of libraries this environment
    # lacks (the core's has no torch): an attempt is what makes listing engines slow elsewhere.
    code = (
        "import json, sys\n"
        f"HEAVY = {HEAVY!r}\n"
        "tried = []\n"
        "class Recorder:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in HEAVY:\n"
        "            tried.append(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Recorder())\n"
        "import aworld_train.engine\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)\n"
        "print(json.dumps({'tried': sorted(set(tried)), 'loaded': loaded}))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found == {"tried": [], "loaded": []}


def test_every_name_in_all_resolves() -> None:
    names = aworld_train.engine.__all__
    assert len(names) == len(set(names)), "a name listed twice"
    missing = [name for name in names if not hasattr(aworld_train.engine, name)]
    assert not missing
    assert aworld_train.engine.__doc__ and "hookimpl" in aworld_train.engine.__doc__
