"""Errors the engine raises. Both mean the caller handed it something it cannot decide on;
neither is retryable without fixing the input."""

from __future__ import annotations


class SnapshotError(ValueError):
    """The snapshot contradicts itself (a GPU held twice, a placement on an unknown node...).

    The message names the object, what was expected and what came."""


class ConfigError(ValueError):
    """The scheduler configuration names an unknown plugin or carries an invalid value."""
