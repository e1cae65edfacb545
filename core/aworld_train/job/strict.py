"""Strict checking of an engine section's values against the types of the engine's own
dataclass (TRL's ``GRPOConfig``, ms-swift's ``RLHFArguments``, VeRL's ``RolloutConfig``, ...).

A job file's values are taken as written: no ``"1"`` for 1, no ``true`` for 1, no NaN or
infinity, an int where a float is declared; an enum field takes its values as the job writes
them (strings), and a field typed with a class no job file can hold takes only an instance of
it. Every engine refuses a bad value with the same line: ``<where>: expected <type in words>,
got <value as YAML writes it>``. pydantic is imported only when a value is checked.
"""

from __future__ import annotations

import enum
import functools
import math
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from aworld_train.job._rules import first_non_finite
from aworld_train.errors import ConfigError

_RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


def check_value(
    hint: Any,
    value: Any,
    where: str,
    *,
    because: str = "",
    bounds: Mapping[str, float] | None = None,
    readings: Iterable[Any] = (),
) -> Any:
    """``value`` as a field typed ``hint`` holds it, checked strictly.

    :param where: what the error names first (``config trl.beta``, ``config key 'swift.x'``).
    :param because: where the type comes from, shown after it (``as VeRL's
        RolloutConfig.n declares``).
    :param bounds: pydantic's range keywords for the field (``{"ge": 1}``).
    :param readings: other values ``value`` may be read as, tried in turn when it does not fit
        (ms-swift's command line reads the text ``1e-4`` as a number).
    :raises ConfigError: for NaN or an infinity anywhere in the value, a value out of
        ``bounds``, or one of another type.
    """
    from pydantic import ValidationError

    bad = first_non_finite(value)
    if bad is not None:
        raise ConfigError(f"{where}: {yaml_repr(bad)} is not a finite number")
    key = tuple(sorted((bounds or {}).items()))
    try:
        adapter = _adapter(hint, key)
    except TypeError:  # a hint that cannot be hashed is built each time
        adapter = _adapter.__wrapped__(hint, key)
    try:
        return adapter.validate_python(value)
    except ValidationError as error:
        problems = error.errors()
        if bounds and all(problem["type"] in _RANGE_ERRORS for problem in problems):
            rule = problems[0]["msg"].removeprefix("Input ")
            raise ConfigError(f"{where}: {value!r} is out of range: it {rule}") from None
    for reading in readings:
        try:
            return adapter.validate_python(reading)
        except ValidationError:
            continue
    shown = f" ({because})" if because else ""
    raise ConfigError(f"{where}: expected {describe_type(hint)}{shown}, got {yaml_repr(value)}")


def fits(hint: Any, value: Any) -> bool:
    """Whether ``value`` passes :func:`check_value` for ``hint``."""
    try:
        check_value(hint, value, "")
    except ConfigError:
        return False
    return True


@functools.cache
def _adapter(hint: Any, bounds: tuple[tuple[str, float], ...]) -> Any:
    from typing import Annotated

    from pydantic import ConfigDict, Field, TypeAdapter

    written = written_type(hint)
    limits: dict[str, Any] = dict(bounds)
    annotated: Any = Annotated[written, Field(**limits)] if bounds else written
    config = ConfigDict(strict=True, allow_inf_nan=False, arbitrary_types_allowed=True)
    return TypeAdapter(annotated, config=config)


def written_type(hint: Any) -> Any:
    """``hint`` with each enum replaced by the values a job writes for it: strict mode takes
    only enum members, and ``debug: [underflow_overflow]`` holds strings."""
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return Literal[tuple(member.value for member in hint)]
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if not arguments or origin in (Literal, typing.Annotated) or origin is None:
        return hint
    written = tuple(written_type(argument) for argument in arguments)
    if origin in (typing.Union, types.UnionType):
        return typing.Union[written]
    return origin[written if len(written) > 1 else written[0]]


def union_members(hint: Any) -> tuple[Any, ...]:
    """The members of a union (``int | None`` -> ``(int, NoneType)``), or ``(hint,)``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def describe_type(hint: Any) -> str:
    """A type as a job author reads it: ``int | None`` -> ``an integer or null``."""
    members = union_members(hint)
    if len(members) > 1:
        return " or ".join(dict.fromkeys(describe_type(m) for m in members))
    origin = typing.get_origin(hint) or hint
    if origin is Literal:
        return " or ".join(yaml_repr(v) for v in typing.get_args(hint))
    arguments = typing.get_args(hint)
    if origin in (list, tuple):
        item = arguments[0] if arguments else Any
        if item is str:
            return "a list of strings"
        return "a list" if item in (Any, Ellipsis) else f"a list, each {describe_type(item)}"
    if origin is dict and arguments and arguments[-1] is not Any:
        return f"a mapping, each value {describe_type(arguments[-1])}"
    names = {
        type(None): "null",
        bool: "true or false",
        int: "an integer",
        float: "a number",
        str: "a string",
        dict: "a mapping",
        Any: "anything",
    }
    if origin in names:
        return names[origin]
    if isinstance(origin, type) and issubclass(origin, enum.Enum):
        return "one of " + ", ".join(str(member.value) for member in origin)
    return f"a {getattr(origin, '__name__', origin)} (not settable from a job file)"


def yaml_repr(value: Any) -> str:
    """A value as the job file spells it (``true``, ``null``, ``.nan``, ``'text'``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    return repr(value)


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """The resolved annotation of every field of the dataclass ``cls``."""
    return typing.get_type_hints(cls)
