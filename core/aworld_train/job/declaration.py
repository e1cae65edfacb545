"""An engine's settings, declared once: for each common key, the engine's own key or keys, the
converters between the two forms and the engine's default.

An engine exposes its :class:`SettingsDeclaration` as the attribute ``SETTINGS`` of its
entry-point object. From it the SDK derives what each engine used to write by hand: carrying a
common key onto the engine's key (:meth:`SettingsDeclaration.carry`), the refusal of a section
key that says otherwise (:class:`~aworld_train.job.common_keys.CommonKeys`), the effective-settings
row with where its value came from (:meth:`SettingsDeclaration.row` where the engine's value is
the job's or the section's, :meth:`SettingsDeclaration.read` where it is read back from the
engine's final config, :func:`source_of` for both), the
common name of a key of the engine's section that another engine's job carries
(:meth:`SettingsDeclaration.common_name`) and the engine's table in ``docs/settings.md``
(:meth:`SettingsDeclaration.markdown`), the keys it takes as the job gives them
(:meth:`SettingsDeclaration.plain_arguments`) and the refusal of those it cannot apply
(:meth:`SettingsDeclaration.refuse`). The core asks the installed engines for their
declarations (:func:`installed_declarations`); it names none itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aworld_train.errors import ConfigError
from aworld_train.job.common_keys import CommonKeys
from aworld_train.job.settings import Setting

#: A default the engine does not state here: the engine's own config classes hold it.
UNSTATED = "(the engine's own default)"


def source_of(job_value: Any, section: Mapping[str, Any], keys: str | Iterable[str]) -> str:
    """Where a setting's value comes from, the one rule of every engine: the job's common key
    when set (``job``: ``job_value`` is not ``None``), else one of the engine's own ``keys`` in
    its section (``section``: the key, or a key under it where the engine's keys nest, with a
    value other than ``None``), else the engine's default (``default``)."""
    if job_value is not None:
        return "job"
    wanted = (keys,) if isinstance(keys, str) else tuple(keys)
    given = {key for key, value in section.items() if value is not None}
    found = any(
        own and (own in given or any(key.startswith(f"{own}.") for key in given)) for own in wanted
    )
    return "section" if found else "default"


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class EngineKey:
    """One common key as the engine's own.

    :ivar name: the common key (``kl_coef``).
    :ivar keys: the engine's keys for it; the first is the one the settings table shows, the
        others are the engine's other keys for the same setting (TRL's ``fp16`` beside ``bf16``),
        so that a key of the engine's section is named by its common key. Dotted for an engine
        whose config nests (``trainer.test_freq``). Empty: the engine applies the setting itself.
    :ivar to_engine: the common value as the engine's (``token-mean`` -> ``dapo``); it may raise
        ``ConfigError`` for a value the engine cannot honour. ``None``: the same value.
    :ivar to_common: the engine's value as the common one, ``None`` where it has no common name.
    :ivar default: the engine's default for its first key, or :data:`UNSTATED`.
    :ivar plain: the engine takes the job's value as it is under each of its keys, with no code
        of its own (:meth:`SettingsDeclaration.plain_arguments`).
    :ivar refused: why the engine cannot apply the key, which a job then may not set
        (:meth:`SettingsDeclaration.refuse`); ``""``: it applies it.
    """

    name: str
    keys: tuple[str, ...] = ()
    to_engine: Callable[[Any], Any] | None = None
    to_common: Callable[[Any], Any] | None = None
    default: Any = UNSTATED
    plain: bool = False
    refused: str = ""

    @classmethod
    def same(cls, *names: str, plain: bool = False) -> tuple[EngineKey, ...]:
        """Common keys the engine takes under the same name (``plain`` as :attr:`plain`)."""
        return tuple(cls(name, (name,), plain=plain) for name in names)

    @property
    def key(self) -> str:
        """The key the settings table shows (``""`` where the engine has none)."""
        return self.keys[0] if self.keys else ""

    def engine_value(self, value: Any) -> Any:
        return (self.to_engine or _same)(value)

    def common_value(self, value: Any) -> Any:
        return (self.to_common or _same)(value)


@dataclass(frozen=True)
class SettingsDeclaration:
    """An engine's settings: one :class:`EngineKey` per common key it maps.

    :ivar label: the engine's name as prose writes it (``TRL``), for messages and the docs.
    :ivar keys: the common keys the engine maps, in the order its docs table lists them.
    :ivar config_keys: the top-level keys of the engine's own config file, where a whole one can
        be a job's ``config:``; on another engine such a key is named as the engine's.
    """

    label: str
    keys: tuple[EngineKey, ...]
    config_keys: frozenset[str] = frozenset()

    def __getitem__(self, name: str) -> EngineKey:
        found = next((key for key in self.keys if key.name == name), None)
        if found is None:
            raise KeyError(name)
        return found

    def own_keys(self, name: str) -> tuple[str, ...]:
        """The engine's keys for the common key ``name`` (none where it maps none)."""
        return next((key.keys for key in self.keys if key.name == name), ())

    @property
    def dotted(self) -> bool:
        """Whether the engine's keys nest (a section is then named by its leaf keys)."""
        return any("." in own for key in self.keys for own in key.keys)

    def common_name(self, key: str) -> str | None:
        """The common name that carries the engine's own ``key`` (``fp16`` -> ``precision``), or
        ``None``. A dotted key inside a declared one is carried by the same name (VeRL's
        ``...mixed_precision.reduce_dtype`` by ``precision``)."""
        return next(
            (
                declared.name
                for declared in self.keys
                if any(key == own or key.startswith(f"{own}.") for own in declared.keys)
            ),
            None,
        )

    def source(self, name: str, job_value: Any, section: Mapping[str, Any]) -> str:
        """Where the common key ``name``'s value comes from (:func:`source_of`): the job's
        ``job_value``, else any of the engine's keys for it in ``section``, else the default."""
        return source_of(job_value, section, self.own_keys(name))

    def read(
        self,
        name: str,
        job_value: Any,
        section: Mapping[str, Any],
        value_of: Callable[[str], Any],
    ) -> Setting:
        """The effective-settings row of the common key ``name`` read back from the engine's
        final config: the value of its first key (``value_of(key)``) and that value as the
        common one, with :meth:`source`; for a common key the engine has no key for, its
        declared default.

        :param job_value: the job's value of the common key (``None``: unset).
        :param section: the engine's section as the job gives it.
        """
        declared = self[name]
        source = self.source(name, job_value, section)
        if not declared.key:  # the engine applies it itself: its declared default, if any
            value = None if declared.default is UNSTATED else declared.default
            return Setting(name, value, "", None, source)
        own = value_of(declared.key)
        return Setting(name, declared.common_value(own), declared.key, own, source)

    def carry(
        self,
        common: CommonKeys,
        name: str,
        value: Any,
        to_engine: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Set the engine's first key for the common key ``name`` from its ``value`` (converted),
        after refusing a section key that says otherwise; returns the engine's value.

        :param to_engine: the conversion where it depends on the rest of the job (TRL's
            scheduler on the warmup), instead of the declared one."""
        declared = self[name]
        engine_value = to_engine(value) if to_engine else declared.engine_value(value)
        return common.carry(name, value, declared.key, engine_value)

    def row(
        self,
        common: CommonKeys,
        name: str,
        value: Any,
        defaults: Mapping[str, Any] = {},
        to_engine: Callable[[Any], Any] | None = None,
    ) -> Setting:
        """The effective-settings row of the common key ``name``: the job's ``value`` carried
        onto the engine's key, else the section's value, else the engine's default.

        :param common: the section's keys, and the engine's keys set so far.
        :param defaults: the engine's defaults by its own key, where its config classes hold
            them (else the declared default).
        :param to_engine: as :meth:`carry` takes it.
        """
        declared = self[name]
        key = declared.key
        source = source_of(value, common.section, key)
        if source == "job":
            engine_value = self.carry(common, name, value, to_engine)
            return Setting(name, value, key, engine_value, source)
        own = common.section[key] if source == "section" else defaults.get(key, declared.default)
        return Setting(name, declared.common_value(own), key, own, source)

    def arguments(self, config: Any) -> dict[str, Any]:
        """The engine's first key of each common key it has one for, set to the job's value
        (``config``'s attribute of the common name) converted, else to the declared default;
        left out where neither is (the engine's own default applies)."""
        arguments = {}
        for declared in self.keys:
            value = getattr(config, declared.name, None)
            if declared.key and value is not None:
                arguments[declared.key] = declared.engine_value(value)
            elif declared.key and declared.default is not UNSTATED:
                arguments[declared.key] = declared.default
        return arguments

    def plain_arguments(self, config: Any) -> dict[str, Any]:
        """Each key of each :attr:`~EngineKey.plain` common key the job sets (``config``'s
        attribute of the common name), set to the job's value; unset ones are left out."""
        arguments: dict[str, Any] = {}
        for declared in self.keys:
            value = getattr(config, declared.name, None) if declared.plain else None
            if value is not None:
                arguments.update(dict.fromkeys(declared.keys, value))
        return arguments

    def refuse(self, config: Any, engine: str) -> None:
        """Refuse a :attr:`~EngineKey.refused` common key the job sets (``config``'s
        attribute of the common name other than ``None``).

        :param engine: the engine's name, as the message says it (``tinker``).
        :raises ConfigError: naming the key, the engine and why.
        """
        for declared in self.keys:
            if declared.refused and getattr(config, declared.name, None) is not None:
                raise ConfigError(
                    f"config {declared.name}: the {engine} engine cannot apply it "
                    f"({declared.refused}); remove it"
                )

    def markdown(self) -> str:
        """The engine's table for ``docs/settings.md``: each common key, the engine's keys (the
        first is the one ``check`` shows) and its default where declared."""
        stated = any(declared.default is not UNSTATED for declared in self.keys)
        head = ["common key", "engine keys", *(["default"] if stated else [])]
        lines = [f"| {' | '.join(head)} |", f"|{' --- |' * len(head)}"]
        for declared in self.keys:
            own = ", ".join(f"`{key}`" for key in declared.keys) or "–"
            cells = [f"`{declared.name}`", "refused" if declared.refused else own]
            if stated:
                default = declared.default
                cells.append("–" if default is UNSTATED else f"`{default!r}`")
            lines.append(f"| {' | '.join(cells)} |")
        return "\n".join(lines)
