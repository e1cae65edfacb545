"""Finding, loading and validating engines and extension plugins.

Listing reads distribution metadata only and imports no engine. Running loads the selected
engine and the extension plugins into one pluggy ``PluginManager`` and validates every hook
implementation against the specs. A plugin that fails to load is reported by distribution and
the others stay usable.

Environment:

- ``AWORLD_TRAIN_LOAD_PLUGINS``: comma-separated distribution names to load (empty: none).
- ``AWORLD_TRAIN_DISABLE_PLUGINS``: comma-separated distribution names never to load.
- ``AWORLD_TRAIN_TRACE_PLUGINS=1``: print every hook call, its implementations and result.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pluggy

from aworld_train.plugins import hookspecs
from aworld_train.errors import PluginError, did_you_mean
from aworld_train.job.declaration import SettingsDeclaration

ENGINE_GROUP = "aworld_train.engines"
PLUGIN_GROUP = "aworld_train.plugins"
REGISTERED = "(registered in-process)"
PLUGIN_PREFIX = "plugin:"  # an extension plugin's name in the plugin manager

logger = logging.getLogger("aworld_train")

# Engines added with AgentTrainer.register_processor: name -> TrainerProcessor subclass.
_registered: dict[str, type] = {}


@dataclass
class EngineInfo:
    """One engine as listing finds it.

    :ivar status: ``ok``, ``conflict: ...``, ``broken: ...`` (after an import check) or
        ``disabled``.
    """

    name: str
    distribution: str
    version: str
    status: str = "ok"
    entry_point: metadata.EntryPoint | None = None
    target: Any = None  # a registered processor class

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def label(self) -> str:
        """``engine 'x' (aworld-train-x 0.1.0)``: how messages name the engine."""
        if self.entry_point is None:
            return f"engine '{self.name}' (registered in-process)"
        return f"engine '{self.name}' ({self.distribution} {self.version})"

    def as_dict(self) -> dict[str, str]:
        value = self.entry_point.value if self.entry_point is not None else _qualname(self.target)
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "status": self.status,
            "object": value,
        }


def register_processor(name: str, processor: type) -> None:
    """Add an in-process engine. :raises PluginError: when the name is taken."""
    from aworld_train.plugins.processor import TrainerProcessor

    if not (isinstance(processor, type) and issubclass(processor, TrainerProcessor)):
        raise PluginError(f"processor for engine '{name}' must be a TrainerProcessor subclass")
    if name in _registered or any(info.name == name for info in _entry_point_engines()):
        raise PluginError(f"engine '{name}' is already registered")
    _registered[name] = processor


def unregister_processor(name: str) -> None:
    """Remove an in-process engine (no error when absent)."""
    _registered.pop(name, None)


def installed_versions(*names: str) -> dict[str, str]:
    """The installed version of each named distribution, skipping those not installed; what an
    engine's ``engine_versions`` hook returns. Reads metadata only."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def list_engines() -> list[EngineInfo]:
    """Every engine, from metadata and the in-process registry; imports no engine."""
    engines = _entry_point_engines()
    providers: dict[str, list[str]] = {}
    for info in engines:
        providers.setdefault(info.name, []).append(info.distribution)
    for info in engines:
        if len(providers[info.name]) > 1:
            info.status = (
                f"conflict: engine '{info.name}' is provided by "
                f"{' and '.join(providers[info.name])}"
            )
    engines += [EngineInfo(name, REGISTERED, "-", target=cls) for name, cls in _registered.items()]
    return sorted(engines, key=lambda info: info.name)


def find_engine(name: str) -> EngineInfo:
    """The usable engine called ``name``.

    :raises PluginError: for an unknown name (listing the installed ones) or a conflict.
    """
    engines = list_engines()
    matches = [info for info in engines if info.name == name]
    if not matches:
        names = sorted({info.name for info in engines})
        installed = ", ".join(names) if names else "none (pip install aworld-train-trl, ...)"
        near = did_you_mean(name, names)
        # Engines may live in separate virtual environments: an engine that is not installed
        # here may be installed elsewhere, as its distribution aworld-train-<name>.
        hint = (
            ""
            if near
            else f"; install it with pip install aworld-train-{name} "
            "(engines may live in separate virtual environments: run aworld-train from the one "
            "that has it)"
        )
        raise PluginError(f"unknown engine '{name}'{near}; installed: {installed}{hint}")
    if not matches[0].ok:
        raise PluginError(f"engine '{name}' cannot be used: {matches[0].status}")
    return matches[0]


def installed_engine_names() -> list[str]:
    """The names of the installed engines, sorted; imports no engine."""
    return sorted({info.name for info in list_engines()})


def segment_engines() -> list[str]:
    """The installed engines that train an episode the agent cut into segments (their
    ``trains_segments`` answers ``True``); imports each engine's entry-point module, which is
    light, and skips one that fails to import."""
    names = []
    for info in list_engines():
        try:
            engine = load_engine(info) if info.ok else None
        except PluginError:
            continue
        try:
            trains = getattr(engine, "trains_segments", None)
            if callable(trains) and trains() is True:
                names.append(info.name)
        except Exception:  # noqa: BLE001 - a broken answer is not an engine that trains them
            continue
    return names


def default_engine(requested: str | None) -> str:
    """The engine to use: ``requested``, else the only one installed, else ``verl`` when
    installed, else an error listing what is installed."""
    if requested:
        return requested
    names = installed_engine_names()
    if len(names) == 1:
        return names[0]
    if "verl" in names:
        return "verl"
    listed = ", ".join(names) if names else "none"
    raise PluginError(
        f"no engine named: pass --engine or set 'engine' in the job (installed: {listed})"
    )


def load_engine(info: EngineInfo) -> Any:
    """Import the engine's object. :raises PluginError: naming the distribution and the cause."""
    if info.entry_point is None:
        return info.target
    try:
        return info.entry_point.load()
    except Exception as exc:  # a broken plugin: report it, never crash the CLI
        raise PluginError(
            f"engine '{info.name}' from {info.distribution} {info.version} failed to import: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def create_manager(engine: str, run_dir: Path | None) -> pluggy.PluginManager:
    """A plugin manager holding the engine ``engine`` and every loadable extension plugin.

    A ``TrainerProcessor`` engine is instantiated with ``run_dir`` as its ``run_path``.

    :raises PluginError: when the engine cannot be loaded or breaks the hook contract.
    """
    from aworld_train.plugins.processor import ProcessorPlugin, TrainerProcessor

    info = find_engine(engine)
    target = load_engine(info)
    if isinstance(target, type) and issubclass(target, TrainerProcessor):
        if target.__abstractmethods__:  # instantiating it would raise a bare TypeError
            missing = ", ".join(sorted(target.__abstractmethods__))
            raise PluginError(
                f"engine '{info.name}' from {info.distribution}: "
                f"{_qualname(target)} does not implement {missing}"
            )
        target = ProcessorPlugin(target(str(run_dir) if run_dir is not None else ""))
    manager = _new_manager()
    _register_engine(manager, target, info)
    for entry_point in _selected(metadata.entry_points(group=PLUGIN_GROUP)):
        where = f"plugin '{entry_point.name}' from {_dist_label(entry_point)}"
        try:
            plugin = entry_point.load()
            _register(manager, plugin, PLUGIN_PREFIX + entry_point.name, where)
            _refuse_engine_answers(manager, plugin, where)
        except Exception as exc:  # a broken extension is skipped; the engine still runs
            logger.warning("skipping %s: %s", where, _one_line(exc))
    if os.environ.get("AWORLD_TRAIN_TRACE_PLUGINS", "") not in ("", "0"):
        _trace(manager)
    return manager


def check_engine(info: EngineInfo) -> EngineInfo:
    """Import one engine and validate its hooks; the result's status says ``ok`` or why not."""
    from aworld_train.plugins.processor import TrainerProcessor

    if not info.ok:
        return info
    try:
        target = load_engine(info)
        if isinstance(target, type) and issubclass(target, TrainerProcessor):
            # Its hooks are the adapter's; what can break is an unimplemented method.
            if target.__abstractmethods__:
                missing = ", ".join(sorted(target.__abstractmethods__))
                raise PluginError(f"{_qualname(target)} does not implement {missing}")
        else:
            _register_engine(_new_manager(), target, info)
    except PluginError as exc:
        info.status = f"broken: {_one_line(exc)}"
    return info


def hook_failure(
    manager: pluggy.PluginManager, info: EngineInfo, hook: str, exc: Exception
) -> PluginError:
    """The one line for a hook that raised something other than an ``AWorldTrainError``: a
    bug in a plugin, not the user's mistake, so it names the plugin that raised (the engine,
    or an extension plugin wrapping its hook), its distribution and the hook. ``--debug``
    shows the traceback."""
    who = raised_by_label(manager, info, exc)
    return PluginError(f"{who} {hook} raised {type(exc).__name__}: {_one_line(exc)}")


def raised_by_label(manager: pluggy.PluginManager, info: EngineInfo, exc: BaseException) -> str:
    """How messages name the plugin whose code raised ``exc``: the engine's label, or
    ``plugin 'x' (dist version)`` for an extension plugin wrapping its hook."""
    name = _raised_by(manager, exc)
    if name is None or name == info.name:
        return info.label
    extension = name.removeprefix(PLUGIN_PREFIX)
    found = metadata.entry_points(group=PLUGIN_GROUP, name=extension)
    where = _dist_label(next(iter(found))) if found else "?"
    return f"plugin '{extension}' ({where})"


def plugin_packages(manager: pluggy.PluginManager) -> dict[str, str]:
    """The top-level package of each plugin's code (the engine's and the extensions'), mapped
    to the plugin's name; the core's own package belongs to none."""
    from aworld_train.plugins.processor import ProcessorPlugin

    owners: dict[str, str] = {}
    for name, plugin in manager.list_name_plugin():
        code = plugin.processor if isinstance(plugin, ProcessorPlugin) else plugin
        module = code.__name__ if isinstance(code, types.ModuleType) else type(code).__module__
        owners[module.partition(".")[0]] = name
    owners.pop(__name__.partition(".")[0], None)
    return owners


def _raised_by(manager: pluggy.PluginManager, exc: BaseException) -> str | None:
    """The plugin whose code raised ``exc``: the one owning the deepest frame of its traceback
    (by top-level package; the core's own frames belong to none)."""
    owners = plugin_packages(manager)
    culprit = None
    frame = exc.__traceback__
    while frame is not None:
        package = str(frame.tb_frame.f_globals.get("__name__", "")).partition(".")[0]
        culprit = owners.get(package, culprit)
        frame = frame.tb_next
    return culprit


def report_metrics(
    manager: pluggy.PluginManager, engine: str, failed: set[str], **kwargs: Any
) -> None:
    """Call each ``report_metrics`` implementation on its own, so that an extension plugin
    that fails is logged, naming it, and never ends the run; the engine's own raises.

    :param failed: the plugins that failed before: they are warned about once, then logged at
        debug level, so a broken plugin does not flood the terminal.
    :param kwargs: the hook's arguments (``step``, ``metrics``, ``ctx``).
    """
    plugins = dict(manager.list_name_plugin())
    owners = dict.fromkeys(impl.plugin_name for impl in manager.hook.report_metrics.get_hookimpls())
    for owner in owners:
        # Through pluggy, so that tracing sees the call and the plugin's wrappers wrap it.
        call = manager.subset_hook_caller(
            "report_metrics", remove_plugins=[p for n, p in plugins.items() if n != owner]
        )
        if owner == engine:
            call(**kwargs)
            continue
        try:
            call(**kwargs)
        except Exception as exc:  # a tracker's failure is not the run's
            name = owner.removeprefix(PLUGIN_PREFIX)
            level = logging.DEBUG if name in failed else logging.WARNING
            failed.add(name)
            logger.log(
                level,
                "plugin '%s' failed in report_metrics at step %s (the run goes on): %s: %s",
                name,
                kwargs.get("step"),
                type(exc).__name__,
                _one_line(exc),
            )


def _new_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    return manager


def _register_engine(manager: pluggy.PluginManager, engine: Any, info: EngineInfo) -> None:
    """Register an engine and require a ``train`` implementation of its own: without one, a
    run would "train" nothing and report success."""
    where = f"engine '{info.name}' from {info.distribution}"
    _register(manager, engine, info.name, where)
    if not any(impl.plugin is engine for impl in manager.hook.train.get_hookimpls()):
        manager.unregister(engine)
        raise PluginError(f"{where} implements no train hook")


def _register(manager: pluggy.PluginManager, plugin: Any, name: str, where: str) -> None:
    """Register ``plugin`` and validate its hooks against the specs, or leave it out."""
    try:
        manager.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"{where} does not match the hook specs: {_one_line(exc)}") from exc
    except ValueError as exc:  # pluggy: the same plugin object registered twice
        raise PluginError(f"{where}: {exc}") from exc
    try:
        manager.check_pending()  # an implementation of a hook that has no spec
    except pluggy.PluginValidationError as exc:
        manager.unregister(plugin)
        raise PluginError(f"{where} does not match the hook specs: {_one_line(exc)}") from exc


def _refuse_engine_answers(manager: pluggy.PluginManager, plugin: Any, where: str) -> None:
    """Unregister an extension plugin that answers one of the engine's own hooks.

    The engine's hooks are ``firstresult``: pluggy calls the implementation registered last
    first, so an extension's plain implementation that returns a value would replace the
    engine's answer without a word. An extension changes an engine's answer by wrapping the
    hook (``@hookimpl(wrapper=True)``), which sees the engine's result.

    :raises PluginError: naming the plugin and the hooks, after unregistering it.
    """
    answering = sorted(
        caller.name
        for caller in manager.get_hookcallers(plugin) or []
        if caller.spec is not None
        and caller.spec.opts.get("firstresult")
        and any(
            impl.plugin is plugin and not (impl.wrapper or impl.hookwrapper)
            for impl in caller.get_hookimpls()
        )
    )
    if answering:
        manager.unregister(plugin)
        raise PluginError(
            f"{where} implements the engine's hook{'s' if len(answering) > 1 else ''} "
            f"{', '.join(answering)} without wrapping it, which would replace the engine's "
            "answer: make it a wrapper (@hookimpl(wrapper=True))"
        )


def _entry_point_engines() -> list[EngineInfo]:
    seen: set[tuple[str, str]] = set()
    engines = []
    for entry_point in _selected(metadata.entry_points(group=ENGINE_GROUP)):
        dist = entry_point.dist
        key = (entry_point.name, _normalise(dist.name) if dist else entry_point.value)
        if key in seen:  # one distribution found twice on sys.path
            continue
        seen.add(key)
        engines.append(
            EngineInfo(
                entry_point.name,
                dist.name if dist else "?",
                dist.version if dist else "?",
                entry_point=entry_point,
            )
        )
    return engines


def _selected(entry_points: Any) -> list[metadata.EntryPoint]:
    """The entry points whose distribution the environment allows."""
    load = os.environ.get("AWORLD_TRAIN_LOAD_PLUGINS")
    allowed = None if load is None else {_normalise(n) for n in load.split(",") if n.strip()}
    blocked = {
        _normalise(n)
        for n in os.environ.get("AWORLD_TRAIN_DISABLE_PLUGINS", "").split(",")
        if n.strip()
    }
    chosen = []
    for entry_point in entry_points:
        dist = _normalise(entry_point.dist.name) if entry_point.dist else ""
        if (allowed is None or dist in allowed) and dist not in blocked:
            chosen.append(entry_point)
    return chosen


def _trace(manager: pluggy.PluginManager) -> None:
    from aworld_train.run.redaction import redact_text

    def show(line: str) -> None:  # an agent's repr holds its API key
        print(redact_text(f"[aworld-train trace] {line}"), file=sys.stderr)

    def before(hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        impls = ", ".join(impl.plugin_name for impl in hook_impls)
        args = ", ".join(f"{k}={_short(v)}" for k, v in kwargs.items())
        show(f"{hook_name}({args}) -> [{impls}]")

    def after(
        outcome: Any, hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> None:
        exception = outcome.exception
        result = (
            f"raised {exception!r}" if exception else f"returned {_short(outcome.get_result())}"
        )
        show(f"{hook_name} {result}")

    manager.add_hookcall_monitoring(before, after)


def _dist_label(entry_point: metadata.EntryPoint) -> str:
    dist = entry_point.dist
    return f"{dist.name} {dist.version}" if dist else entry_point.value


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _short(value: Any, limit: int = 120) -> str:
    text = " ".join(repr(value).split())  # one trace line per call, even for a Dataset
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"


def installed_declarations() -> dict[str, SettingsDeclaration]:
    """The settings each installed engine declares (``SETTINGS`` of its entry-point object), by
    engine name; imports each engine's entry-point module, which is light, and skips one that
    fails to import or declares none."""
    declarations = {}
    for info in list_engines():
        try:
            engine = load_engine(info) if info.ok else None
        except PluginError:
            continue
        declared = getattr(engine, "SETTINGS", None)
        if isinstance(declared, SettingsDeclaration):
            declarations[info.name] = declared
    return declarations
