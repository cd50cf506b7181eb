"""``KEY=VALUE`` overrides of :class:`~scheduler_core.types.SchedulerConfig` for the CLIs.

Each value is parsed by the type of the field's default, so a field the engine adds later is
settable without touching this module: booleans take ``true/false/1/0/yes/no``, tuples take
comma-separated items, the placement mapping takes ``training=pack,serving=spread``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from scheduler_core.types import SchedulerConfig, WorkloadClass

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class OverrideError(ValueError):
    """A ``KEY=VALUE`` that names no setting or whose value does not parse."""


def _parse(name: str, default: object, raw: str) -> object:
    if isinstance(default, bool):
        lowered = raw.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise OverrideError(f"setting {name}: expected true or false, got {raw!r}")
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise OverrideError(f"setting {name}: expected an integer, got {raw!r}") from None
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError:
            raise OverrideError(f"setting {name}: expected a number, got {raw!r}") from None
    if isinstance(default, str):
        return raw
    if isinstance(default, tuple):
        items = [item.strip() for item in raw.split(",") if item.strip()]
        if default and isinstance(default[0], float):
            try:
                parsed = tuple(float(item) for item in items)
            except ValueError:
                raise OverrideError(f"setting {name}: expected comma-separated numbers, got {raw!r}") from None
            if len(parsed) != len(default):
                raise OverrideError(f"setting {name}: expected {len(default)} numbers, got {len(parsed)}")
            return parsed
        return tuple(items)
    if isinstance(default, Mapping):
        mapping: dict[WorkloadClass, str] = dict(default)
        for item in raw.split(","):
            key, sep, value = item.partition("=")
            try:
                workload = WorkloadClass(key.strip())
            except ValueError:
                choices = ", ".join(w.value for w in WorkloadClass)
                raise OverrideError(f"setting {name}: expected WORKLOAD=PLUGIN with WORKLOAD in {choices}, got {item!r}") from None
            if not sep or not value.strip():
                raise OverrideError(f"setting {name}: expected WORKLOAD=PLUGIN, got {item!r}")
            mapping[workload] = value.strip()
        return mapping
    raise OverrideError(f"setting {name} of type {type(default).__name__} cannot be set from the command line")


def config_with(overrides: Iterable[str], base: SchedulerConfig | None = None) -> SchedulerConfig:
    """``base`` (default: the engine's defaults) with each ``KEY=VALUE`` applied in order."""
    config = base if base is not None else SchedulerConfig()
    fields = {f.name for f in dataclasses.fields(SchedulerConfig)}
    changes: dict[str, object] = {}
    for override in overrides:
        name, sep, raw = override.partition("=")
        name = name.strip()
        if not sep:
            raise OverrideError(f"expected KEY=VALUE, got {override!r}")
        if name not in fields:
            raise OverrideError(f"unknown setting {name!r}; settings are {', '.join(sorted(fields))}")
        changes[name] = _parse(name, getattr(config, name), raw)
    return dataclasses.replace(config, **changes) if changes else config  # type: ignore[arg-type]
