"""Reading a run's growing JSONL files a piece at a time.

A training process appends to ``metrics.jsonl`` and ``samples.jsonl`` while the view reads them,
so every read starts at the byte after the last whole line read before and stops at the last
newline: a half-written line waits for its end. What was read is kept in compact arrays, so that
a run of 100,000 steps costs a few tens of megabytes and a reopened page reads nothing twice.
"""

from __future__ import annotations

import bisect
import json
import math
import os
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard

from aworld_train.job.files import open_regular

# A curve served for drawing holds at most this many points; longer ones keep, per bucket of
# steps, the lowest and the highest value, so that no spike disappears.
MAX_POINTS = 2000
# Files are read this much at a time, so that memory does not grow with the file.
CHUNK_BYTES = 4 << 20
# A metrics file larger than this, not read yet, is first answered with a preview: a line
# every so often, read in milliseconds, while the whole file is read for the next answer.
PREVIEW_BYTES = 8 << 20
# The end of a file read for a run's last values.
_TAIL_BYTES = 64 << 10


class JsonlTail:
    """The whole lines appended to ``path`` since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._identity: tuple[int, int] | None = None

    def restarted(self) -> bool:
        """Whether the file was replaced or cut shorter since the last read: what was read
        before no longer holds, and reading starts again from its beginning."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return False
        identity = (stat.st_dev, stat.st_ino)
        restarted = self._identity is not None and (
            identity != self._identity or stat.st_size < self.offset
        )
        self._identity = identity
        if restarted:
            self.offset = 0
        return restarted

    def unread(self) -> int:
        """How many bytes are there to read."""
        try:
            return max(0, os.stat(self.path).st_size - self.offset)
        except OSError:
            return 0

    def chunks(self) -> Iterator[list[tuple[int, bytes]]]:
        """The new whole lines, a chunk at a time, each with the byte offset it starts at."""
        try:
            handle = open_regular(self.path)
        except OSError:
            return
        with handle:
            handle.seek(self.offset)
            while data := handle.read(CHUNK_BYTES):
                end = data.rfind(b"\n") + 1
                if end == 0:
                    if len(data) < CHUNK_BYTES:
                        return  # a half line: it waits for its end
                    data += handle.readline()  # a line longer than a chunk
                    end = data.rfind(b"\n") + 1
                    if end == 0:
                        return
                handle.seek(self.offset + end)
                yield _lines(data[:end], self.offset)
                self.offset += end

    def preview(self, count: int) -> list[bytes]:
        """About ``count`` whole lines spread evenly over the unread part of the file."""
        size = self.offset + self.unread()
        lines = []
        with open_regular(self.path) as handle:
            for i in range(count):
                handle.seek(self.offset + (size - self.offset) * i // count)
                if i:
                    handle.readline()  # the rest of the line the seek landed in
                line = handle.readline()
                if line.endswith(b"\n"):
                    lines.append(line)
        return lines


def _lines(data: bytes, offset: int) -> list[tuple[int, bytes]]:
    lines, start = [], 0
    while start < len(data):
        stop = data.index(b"\n", start)
        if stop > start:
            lines.append((offset + start, data[start:stop]))
        start = stop + 1
    return lines


def parse_objects(lines: list[bytes]) -> list[dict[str, Any] | None]:
    """Each line as a JSON object, ``None`` for one that is not. One ``json.loads`` of them all
    is several times faster than one per line; a bad line sends them one at a time."""
    try:
        parsed = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        parsed = [_parse_one(line) for line in lines]
    return [item if isinstance(item, dict) else None for item in parsed]


def _parse_one(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def last_records(path: Path) -> list[dict[str, Any]]:
    """The records at the end of a JSONL file (its last 64 KiB), in order, without reading the
    rest: what a list of runs shows of each."""
    try:
        with open_regular(path) as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _TAIL_BYTES))
            data = handle.read()
    except OSError:
        return []
    lines = data.split(b"\n")[1 if size > _TAIL_BYTES else 0 : -1]  # whole lines only
    return [record for record in parse_objects(lines) if record is not None]


class MetricColumns:
    """A run's ``metrics.jsonl`` as one column per metric: the steps, the values and the number
    of the record each came from (the cursor a live page asks from)."""

    def __init__(self, path: Path) -> None:
        self.tail = JsonlTail(path)
        self.records = 0
        self.columns: dict[str, tuple[array, array, array]] = {}
        self.previewed = False

    def needs_preview(self) -> bool:
        """Whether the file is too large, and not read yet, to be answered whole at once: the
        first question gets a preview, the next the whole."""
        return not self.previewed and self.tail.offset == 0 and self.tail.unread() > PREVIEW_BYTES

    def preview(self) -> dict[str, dict[str, Any]]:
        """Every metric's curve from :data:`MAX_POINTS` lines spread over the file."""
        self.previewed = True
        columns: dict[str, tuple[list[int], list[float]]] = {}
        for record in parse_objects(self.tail.preview(MAX_POINTS)):
            for step, key, value in _values(record):
                column = columns.setdefault(key, ([], []))
                column[0].append(step)
                column[1].append(value)
        return {
            key: {"steps": steps, "values": values, "total": None}
            for key, (steps, values) in sorted(columns.items())
        }

    def refresh(self) -> None:
        if self.tail.restarted():
            self.records, self.columns = 0, {}
        for chunk in self.tail.chunks():
            for record in parse_objects([line for _, line in chunk]):
                if record is None or not _is_step(record.get("step")):
                    continue  # as read_metrics: not a record the reporter wrote
                for step, key, value in _values(record):
                    column = self.columns.get(key)
                    if column is None:
                        column = self.columns[key] = (array("q"), array("d"), array("q"))
                    column[0].append(step)
                    column[1].append(value)
                    column[2].append(self.records)
                self.records += 1

    def since(self, after: int) -> dict[str, dict[str, Any]]:
        """Every metric's points from record ``after`` on, each curve at most
        :data:`MAX_POINTS` points (``total`` says how many it has)."""
        curves = {}
        for key, (steps, values, records) in sorted(self.columns.items()):
            start = bisect.bisect_left(records, after)
            if start < len(steps):
                curves[key] = downsample(steps[start:], values[start:])
        return curves


def _values(record: dict[str, Any] | None) -> Iterator[tuple[int, str, float]]:
    """A metrics record's (step, metric, value) triples."""
    step = record.get("step") if record is not None else None
    if record is None or not _is_step(step):
        return
    for key, value in record.items():
        if key not in ("step", "time") and _is_number(value):
            yield step, key, float(value)


def downsample(steps: array, values: array) -> dict[str, Any]:
    """The curve as the page draws it: every point, or for a long curve the lowest and the
    highest of each of :data:`MAX_POINTS` / 2 buckets, in step order."""
    total = len(steps)
    if total <= MAX_POINTS:
        return {"steps": steps.tolist(), "values": values.tolist(), "total": total}
    buckets = MAX_POINTS // 2
    kept: list[int] = []
    for bucket in range(buckets):
        start, stop = bucket * total // buckets, (bucket + 1) * total // buckets
        chunk = values[start:stop]
        low = start + chunk.index(min(chunk))
        high = start + chunk.index(max(chunk))
        kept += sorted({low, high})
    return {
        "steps": [steps[i] for i in kept],
        "values": [values[i] for i in kept],
        "total": total,
    }


def _is_step(value: Any) -> TypeGuard[int]:
    # Steps are kept in 64-bit arrays: a larger number is no step a reporter wrote.
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class SampleIndex:
    """A run's ``samples.jsonl`` as where each sample starts, its step and its reward; the
    samples themselves are read from the file when shown."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tail = JsonlTail(path)
        self.offsets = array("q")
        self.steps = array("q")
        self.rewards = array("d")

    def refresh(self) -> None:
        if self.tail.restarted():
            self.offsets, self.steps, self.rewards = array("q"), array("q"), array("d")
        for chunk in self.tail.chunks():
            parsed = parse_objects([line for _, line in chunk])
            for (offset, _), sample in zip(chunk, parsed):
                if sample is None:
                    continue
                step, reward = sample.get("step"), sample.get("reward")
                self.offsets.append(offset)
                self.steps.append(step if _is_step(step) else -1)
                self.rewards.append(float(reward) if _is_number(reward) else math.nan)

    def __len__(self) -> int:
        return len(self.offsets)

    def sample(self, index: int) -> dict[str, Any] | None:
        """Sample ``index`` as written, ``None`` when there is no such sample."""
        if not 0 <= index < len(self.offsets):
            return None
        return self.read_at([index])[0]

    def read_at(self, indexes: list[int]) -> list[dict[str, Any]]:
        if not indexes:
            return []
        with open_regular(self.path) as handle:
            found = []
            for index in indexes:
                handle.seek(self.offsets[index])
                found.append(json.loads(handle.readline()))
        return found

    def search(
        self,
        step: int | None = None,
        min_reward: float | None = None,
        text: str = "",
        limit: int = 100,
    ) -> tuple[list[int], int]:
        """The indexes of the last ``limit`` samples (newest first) of step ``step``, with a
        reward of at least ``min_reward`` and ``text`` in their prompt or completion (any
        case), and how many match in all."""
        needle = text.casefold()
        found: list[int] = []
        matches = 0
        for index in range(len(self.offsets) - 1, -1, -1):
            if step is not None and self.steps[index] != step:
                continue
            if min_reward is not None and not self.rewards[index] >= min_reward:
                continue
            if needle and needle not in _sample_text(self.read_at([index])[0]):
                continue
            matches += 1
            if len(found) < limit:
                found.append(index)
        return found, matches


def _sample_text(sample: dict[str, Any]) -> str:
    """What a text search looks in: the prompt and the completion."""
    return json.dumps(
        [sample.get("prompt"), sample.get("completion")], ensure_ascii=False
    ).casefold()
