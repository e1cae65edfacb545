"""The per-version disk cache engines keep what they read from their library's code in: a
missing, invalid or unreadable file is made again, a key of its own gets a file of its own, and
a cache folder that cannot be written never fails a check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aworld_train.cache import cache_file, cached

KEY = ["library 1.0", "engine 0.1"]


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


class Maker:
    """Makes a JSON text and counts how often it was asked to."""

    def __init__(self, text: str = '{"keys": ["a", "b"]}') -> None:
        self.text = text
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return self.text


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_a_missing_file_is_made_once_then_read(cache_home: Path) -> None:
    make = Maker()

    assert cached("keys.json", make, is_json, key=KEY) == make.text
    assert cached("keys.json", make, is_json, key=KEY) == make.text

    assert make.calls == 1
    path = cache_file("keys.json", KEY)
    assert path.parent == cache_home / "aworld-train"
    assert path.name.endswith("-keys.json")
    assert path.read_text(encoding="utf-8") == make.text
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no partial file left behind


def test_another_key_gets_a_file_of_its_own() -> None:
    old, new = Maker('{"version": 1}'), Maker('{"version": 2}')

    assert cached("keys.json", old, key=["library 1.0"]) == old.text
    assert cached("keys.json", new, key=["library 2.0"]) == new.text
    assert cached("keys.json", old, key=["library 1.0"]) == old.text

    assert (old.calls, new.calls) == (1, 1)
    assert cache_file("keys.json", ["library 1.0"]) != cache_file("keys.json", ["library 2.0"])


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b'{"keys": ["a", ', id="cut short"),
        pytest.param(b"", id="empty"),
        pytest.param(b"\xff\xfe\x00not text", id="not UTF-8"),
    ],
)
def test_an_invalid_or_corrupt_file_is_made_again(content: bytes) -> None:
    make = Maker()
    path = cache_file("keys.json", KEY)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)

    assert cached("keys.json", make, is_json, key=KEY) == make.text

    assert make.calls == 1
    assert path.read_text(encoding="utf-8") == make.text


def test_a_folder_where_the_file_should_be_is_made_around() -> None:
    make = Maker()
    cache_file("keys.json", KEY).mkdir(parents=True)

    assert cached("keys.json", make, is_json, key=KEY) == make.text
    assert cached("keys.json", make, is_json, key=KEY) == make.text
    assert make.calls == 2


def test_a_cache_folder_that_cannot_be_written_does_not_fail(cache_home: Path) -> None:
    # A file where the cache folder should be: no folder can be made under it, whoever runs.
    cache_home.parent.mkdir(parents=True, exist_ok=True)
    cache_home.write_text("not a folder")
    make = Maker()

    assert cached("keys.json", make, is_json, key=KEY) == make.text
    assert cached("keys.json", make, is_json, key=KEY) == make.text

    assert make.calls == 2
    assert cache_home.read_text() == "not a folder"


def test_the_home_cache_is_used_without_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    assert cache_file("keys.json", KEY).parent == tmp_path / "home" / ".cache" / "aworld-train"
