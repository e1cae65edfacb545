"""Each config key's rule, declared once on the dataclass field that holds the key.

A field made with :func:`key` carries a :class:`KeyRule` (its kind, its range, how an error line
words the range). :func:`checked` builds a strict pydantic model from a dataclass's rules the
first time it is needed (pydantic stays out of the import) and checks values against it; the
first bad one fails as one line naming the key, with a did-you-mean for a misspelt name.
"""

# The pydantic types are built at run time from the rules, so the type checker sees them as
# values: it checks the rest of the module.
# mypy: disable-error-code="valid-type"

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal

from aworld_train.errors import ConfigError, did_you_mean

Kind = Literal["integer", "number", "flag", "text", "choice", "choices", "names"]


@dataclass(frozen=True)
class KeyRule:
    """What one config key takes.

    :ivar kind: ``integer`` (strict: ``3.0``, ``"3"`` and ``true`` are not integers),
        ``number`` (finite; ints and strings that read as numbers are taken, as PyYAML reads
        ``1e-3`` as a string), ``flag`` (true or false), ``text`` (a string), ``choice`` (one of
        ``names``), ``choices`` (a list of ``names``, one name alone, or ``none``), ``names`` (a
        non-empty string, or a non-empty list of them).
    :ivar description: how an error line words what the key takes ("an integer >= 1").
    :ivar bounds: pydantic's constraints: ``gt``, ``ge``, ``lt``, ``le`` for numbers,
        ``pattern`` for text.
    :ivar names: the names a ``choice`` or ``choices`` key takes; for ``text``, the usual
        names a misspelt value is compared with.
    """

    kind: Kind
    description: str
    bounds: Mapping[str, Any] = field(default_factory=dict)
    names: tuple[str, ...] = ()


def rule(kind: Kind, description: str = "", names: tuple[str, ...] = (), **bounds: Any) -> KeyRule:
    """A :class:`KeyRule`, its description worded from the kind and bounds when not given."""
    return KeyRule(kind, description or _describe(kind, bounds, names), bounds, names)


def config_key(
    default: Any, kind: Kind, description: str = "", names: tuple[str, ...] = (), **bounds: Any
) -> Any:
    """A dataclass field holding a config key: its default and its :class:`KeyRule`."""
    return field(default=default, metadata={"rule": rule(kind, description, names, **bounds)})


def rules_of(cls: type) -> dict[str, KeyRule]:
    """The rules of a dataclass's config keys, by key, in field order."""
    return {f.name: f.metadata["rule"] for f in fields(cls) if "rule" in f.metadata}


def _describe(kind: Kind, bounds: Mapping[str, Any], names: tuple[str, ...]) -> str:
    if kind == "flag":
        return "true or false"
    if kind == "choice":
        return "one of " + ", ".join(names)
    if kind == "choices":
        return "none, or a list of " + ", ".join(names)
    noun = "an integer" if kind == "integer" else "a finite number"
    if "ge" in bounds and "le" in bounds:
        return f"{noun} from {bounds['ge']} to {bounds['le']}"
    signs = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    limits = [f"{signs[name]} {value}" for name, value in bounds.items() if name in signs]
    if kind not in ("integer", "number") or len(limits) != 1:
        raise ValueError(f"describe a {kind} key with bounds {dict(bounds)} in words")
    return f"{noun} {limits[0]}"


def describe_value(value: Any) -> str:
    """``int 7``, ``str 'yes'``, ``list [1, 2, ...]``: a value for an error line, kept short."""
    return f"{type(value).__name__} {reprlib.repr(value)}"


def first_non_finite(value: Any) -> float | None:
    """The first NaN or infinity anywhere in ``value`` (mappings, lists and tuples walked), or
    ``None``: what every engine refuses in its own section, whatever the field's type."""
    if isinstance(value, float):
        return None if math.isfinite(value) else value
    items = value.values() if isinstance(value, Mapping) else value
    if isinstance(value, (Mapping, list, tuple)):
        return next((bad for item in items if (bad := first_non_finite(item)) is not None), None)
    return None


def checked(
    name: str,
    rules: Mapping[str, KeyRule],
    values: dict[str, Any],
    where: str,
    prefix: str,
    sources: dict[str, str],
    hint: Callable[[str, Any], str] | None = None,
) -> dict[str, Any]:
    """``values`` (keys of ``rules``, none ``None``) checked and converted by their rules.

    :param name: the rules' model name, under which its pydantic model is kept.
    :param where: the config's file, or ``config``, for keys not given by ``-o``.
    :param prefix: the keys' section in an error line (``lora.``).
    :param sources: the ``-o`` item each dotted key came from.
    :param hint: what to add to the error line of a key whose value has no did-you-mean.
    :raises ConfigError: the first failure, as one line naming the key and what it takes.
    """
    from pydantic import ValidationError

    try:
        model = _model(name, rules).model_validate(values)
    except ValidationError as exc:
        bad = str(exc.errors()[0]["loc"][0])
        value = values[bad]
        origin = sources.get(prefix + bad, None if where == "config" else where)
        raise ConfigError(
            (f"{origin}: " if origin else "")
            + f"config '{prefix}{bad}' must be {rules[bad].description}, "
            f"got {describe_value(value)}{_names_hint(rules[bad], value) or (hint or _no_hint)(bad, value)}"
        ) from None
    return {item: getattr(model, item) for item in values}


def _no_hint(key: str, value: Any) -> str:
    return ""


def _names_hint(rule: KeyRule, value: Any) -> str:
    """A did-you-mean for the first name in ``value`` that ``rule`` does not take."""
    given = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    wrong = [name for name in given if isinstance(name, str) and name not in rule.names]
    return did_you_mean(wrong[0].lower(), rule.names) if rule.names and wrong else ""


_MODELS: dict[str, Any] = {}


def _model(name: str, rules: Mapping[str, KeyRule]) -> Any:
    """The strict pydantic model of ``rules``, built once per name. Its defaults are never
    read: only the values given are checked, and the dataclasses hold the defaults."""
    if name not in _MODELS:
        from pydantic import ConfigDict, Field, create_model

        _MODELS[name] = create_model(  # type: ignore[call-overload]
            name,
            __config__=ConfigDict(strict=True, extra="forbid"),
            **{
                item: (_pydantic_type(rule), Field(None, description=rule.description))
                for item, rule in rules.items()
            },
        )
    return _MODELS[name]


def _pydantic_type(rule: KeyRule) -> Any:
    from pydantic import BeforeValidator, Field, StrictBool, StrictInt, StrictStr

    bounds, names = Field(**rule.bounds), rule.names
    if rule.kind == "integer":
        return Annotated[StrictInt, bounds]
    if rule.kind == "number":
        return Annotated[
            float, BeforeValidator(_read_number), Field(strict=True, allow_inf_nan=False), bounds
        ]
    if rule.kind == "flag":
        return StrictBool
    if rule.kind == "text":
        return Annotated[StrictStr, bounds]
    if rule.kind == "choice":
        return Literal[names]
    if rule.kind == "choices":
        return Annotated[tuple[Literal[names], ...], BeforeValidator(_choices)]
    name = Annotated[StrictStr, Field(pattern=r"\S")]
    return name | Annotated[tuple[name, ...], Field(min_length=1), BeforeValidator(_as_tuple)]


def _read_number(value: Any) -> Any:
    # PyYAML reads "1e-3" (no dot) as a string; a string that is not a number is refused.
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _choices(value: Any) -> Any:
    """A ``choices`` key as a tuple: one name is one choice, ``none`` none; repeats dropped."""
    if value == "none":
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(dict.fromkeys(value)) if all(isinstance(v, str) for v in value) else value
    return value


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
