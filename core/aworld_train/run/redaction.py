"""One redaction rule for everything AWorld Train writes or prints.

A value is secret when its key names one (``api_key``, ``hub_token``, ``password``,
``Authorization``; every value under ``headers`` and ``env``), when it is the user part of a URL
(``https://user:pass@host``) or a secret-named query parameter (``?api_key=...``), or when it
follows a secret-named flag in an argument list (``["--api-key", "sk-1"]``, ``"--token=hf_1"``).

:func:`redact` copies a structure with those values replaced by ``***``. :func:`remember_secrets`
keeps the values the same rules find, so that :func:`redact_text` also hides them where no key
gives them away: error lines, log records, manifest strings. :class:`SecretFilter` applies
:func:`redact_text` to log records.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

REDACTED = "***"
MIN_SECRET_LENGTH = 4  # a shorter remembered value would blank ordinary words in every line

# Words that name a secret wherever they stand in a key.
_SECRET_WORDS = {
    "apikey",
    "accesskey",
    "privatekey",
    "secretkey",
    "password",
    "passwd",
    "passphrase",
    "secret",
    "secrets",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "cookie",
    "cookies",
}
# Words that name a secret when they end a key: ``x-api-key`` and ``db_pass`` do, while
# ``keys``, ``max_tokens`` and the metric ``pass@1`` do not.
_LAST_WORDS = {"key", "token", "pass", "header", "headers"}
_SECRET_PAIRS = {("api", "key"), ("private", "key"), ("access", "key")}  # access_key_id
# "<word>_token" is a tokenizer's token or a count, not a credential, after these words.
_NOT_CREDENTIAL_TOKENS = {
    "pad",
    "eos",
    "bos",
    "unk",
    "sep",
    "cls",
    "mask",
    "start",
    "end",
    "stop",
    "image",
    "video",
    "audio",
    "special",
    "max",
    "min",
    "num",
}
# Every value of these mappings is secret: an MCP server's env holds its keys.
_ENV_KEYS = {"env", "envs", "environment", "env_vars", "environment_variables"}
_ENV_SECRET = re.compile(r"(?:^|_)(?:API_KEY|ACCESS_KEY|SECRET_KEY|TOKEN|SECRET)$|PASSWORD|PASSWD")

_URL_USER = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/?#]+)@")
# A value ends where a URL's query value does, or at punctuation that closes the URL in prose.
_QUERY = re.compile(r"(?P<lead>[?&;](?P<name>[^=&#\s?]+)=)(?P<value>[^&#\s)'\"<>,;]+)")
_FLAG_VALUE = re.compile(
    r"(?P<lead>(?<![\w-])--?(?P<name>[A-Za-z][\w.-]*)=)(?P<value>[^\s&\"',;]+)"
)
_FLAG = re.compile(r"--?(?P<name>[A-Za-z][\w.-]*)")
_PLACEHOLDER = re.compile(r"\$\{\w+\}")  # "${OPENAI_API_KEY}" names a secret, it is not one

_remembered: set[str] = set()
_lock = threading.Lock()


def is_secret_key(key: str) -> bool:
    """Whether a key names a secret, judged by its words in snake_case, kebab-case or camelCase.

    :param key: a mapping key, a flag without its dashes, or a query parameter's name.
    """
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", key))
    words = [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]
    if not words:
        return False
    if "_".join(words) in _ENV_KEYS or _SECRET_WORDS.intersection(words):
        return True
    if _SECRET_PAIRS.intersection(zip(words, words[1:])):
        return True
    if words[-1] == "token" and len(words) > 1 and words[-2] in _NOT_CREDENTIAL_TOKENS:
        return False
    return words[-1] in _LAST_WORDS


def redact(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists, tuples as lists, strings, dataclasses as dicts) with
    every secret the rules find, remembered or in a secret-named environment variable,
    replaced by ``***``. The input is left alone; other values (bytes, numbers) are kept.

    :param value: what is about to be written or printed (a job, a manifest, a line).
    """
    known = _longest_first(_known() | _secrets_in(value))
    return _walk(value, set(), lambda text: _replace(text, known))


def redact_text(text: str) -> str:
    """``text`` with URL credentials, secret query parameters and ``--flag=value`` secrets,
    and every remembered or environment secret, replaced by ``***``.

    :param text: free text: an error line, a log message, a manifest string.
    """
    return _replace(_scrub(text, set()), _longest_first(_known()))


def remember_secrets(value: Any) -> None:
    """Remember the secrets in ``value`` (any structure :func:`redact` reads) and those of the
    ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET`` and ``*PASSWORD*`` environment variables, so that
    :func:`redact_text` hides them anywhere. Values shorter than 4 characters are not kept.

    :param value: the job as given (agent, config, overrides, MCP servers), before any of it
        can reach an error line or a log.
    """
    found = _secrets_in(value) | _env_secrets()
    with _lock:
        _remembered.update(s for s in found if len(s) >= MIN_SECRET_LENGTH)


class SecretFilter(logging.Filter):
    """Redacts a log record's message, arguments and traceback before any handler sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the format
            message = f"{record.msg} {record.args!r}"
        record.msg, record.args = redact_text(message), ()
        if record.exc_info:  # formatted here, so no handler formats the raw exception
            formatted = record.exc_text or logging.Formatter().formatException(record.exc_info)
            record.exc_text, record.exc_info = formatted, None
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return True


def install_secret_filter(logger: logging.Logger | None = None) -> None:
    """Add a :class:`SecretFilter` to ``logger`` and its handlers, once; by default to the
    ``aworld_train`` logger, the root logger, their handlers and logging's last-resort
    handler. Call it again after adding a handler.

    :param logger: the one logger to cover; ``None`` for the defaults above.
    """
    loggers = [logger] if logger else [logging.getLogger("aworld_train"), logging.getLogger()]
    targets: list[logging.Filterer] = [t for lg in loggers for t in (lg, *lg.handlers)]
    if logger is None and logging.lastResort is not None:
        targets.append(logging.lastResort)
    for target in targets:
        if not any(isinstance(f, SecretFilter) for f in target.filters):
            target.addFilter(SecretFilter())


def _walk(value: Any, found: set[str], finish: Callable[[str], str]) -> Any:
    """A copy of ``value`` with its secrets hidden, each added to ``found``; every other
    string goes through ``finish``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {
            key: _hide(item, found) if is_secret_key(str(key)) else _walk(item, found, finish)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [
            _hide(item, found) if _follows_secret_flag(value, index) else _walk(item, found, finish)
            for index, item in enumerate(value)
        ]
    if isinstance(value, str):
        return finish(_scrub(value, found))
    return value


def _follows_secret_flag(items: list[Any] | tuple[Any, ...], index: int) -> bool:
    """Whether ``items[index]`` is the value of a secret-named flag before it (``--token x``)."""
    item = items[index]
    if index == 0 or not isinstance(item, str) or item.startswith("-"):
        return False
    flag = _FLAG.fullmatch(str(items[index - 1]))
    return flag is not None and is_secret_key(flag["name"])


def _hide(value: Any, found: set[str]) -> Any:
    """``value`` with every leaf replaced, keeping names (a header's, an env variable's)."""
    if isinstance(value, dict):
        return {key: _hide(item, found) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_hide(item, found) for item in value]
    if value is None or isinstance(value, bool) or value == "":
        return value
    if isinstance(value, str) and _PLACEHOLDER.fullmatch(value):
        return value
    found.add(str(value))
    return REDACTED


def _scrub(text: str, found: set[str]) -> str:
    """``text`` with URL credentials and secret query or flag values replaced, each added to
    ``found``."""

    def user(match: re.Match[str]) -> str:
        found.add(match["user"].partition(":")[2] or match["user"])
        return f"{match['scheme']}{REDACTED}@"

    def named(match: re.Match[str]) -> str:
        if not is_secret_key(unquote(match["name"])) or _PLACEHOLDER.fullmatch(match["value"]):
            return match[0]
        found.update({match["value"], unquote(match["value"])})
        return match["lead"] + REDACTED

    return _FLAG_VALUE.sub(named, _QUERY.sub(named, _URL_USER.sub(user, text)))


def _secrets_in(value: Any) -> set[str]:
    found: set[str] = set()
    _walk(value, found, lambda text: text)
    return {s for s in found if len(s) >= MIN_SECRET_LENGTH}


def _env_secrets() -> set[str]:
    return {
        value
        for name, value in os.environ.items()
        if _ENV_SECRET.search(name.upper()) and len(value) >= MIN_SECRET_LENGTH
    }


def _known() -> set[str]:
    with _lock:
        return _remembered | _env_secrets()


def _longest_first(secrets: set[str]) -> list[str]:
    # A secret that contains another is replaced whole, not as "***" plus its tail.
    return sorted(secrets, key=len, reverse=True)


def _replace(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text
