"""Extension points of the cycle, one small Protocol each (see :mod:`.protocols`), and the
plugins that implement them. A policy is a :class:`~scheduler_core.types.SchedulerConfig`
naming plugins; :func:`.registry.build_plugins` turns the names into instances."""

from __future__ import annotations
