"""Sentences as the API and the pages say them: the engine's `t=<Unix seconds>` (engine_times)
and a stored instant to the nearest second (utc_second), in UTC; and a stored sentence as its
reader is told it (said: those times, and other teams' jobs by their team only; SaidField, a
field of such a sentence)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from rest_framework import serializers

from controlplane.services import job_mentions

# The engine counts time in seconds, which in the control plane are Unix seconds; its sentences
# say them as `t=1795989660`. Ten digits or more (from September 2001 on) is a wall time; fewer
# is a simulator's offset from its origin, left as it is. The pages say them the same way.
_ENGINE_TIME = re.compile(r"\bt=([0-9]{10,})(?:\.[0-9]+)?\b")


def _utc(match: re.Match[str]) -> str:
    try:
        return datetime.fromtimestamp(int(match.group(1)), tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):
        return match.group(0)


def utc_second(at: datetime) -> str:
    """A stored time in a sentence, to the nearest second as the pages say it
    (`frontend.templatetags.qm.utc`): cut to the second below, `qm explain` said 23:22:05 where
    the job's page said 23:22:06."""
    return (at + timedelta(microseconds=500_000)).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def engine_times(text: str) -> str:
    """The engine's sentence with each `t=<Unix seconds>` said as a UTC time."""
    return _ENGINE_TIME.sub(_utc, text) if "t=" in text else text


def said(text: str) -> str:
    """A stored sentence (an engine reason, an event's message, a run's notice) as the reader
    of this request is told it: its engine times in UTC and the jobs of teams the reader may
    not read by their team only (`controlplane.services.job_mentions`)."""
    return engine_times(job_mentions.say(text))


class SaidField(serializers.CharField):
    """A stored sentence in an answer, as its reader is told it (`said`)."""

    def to_representation(self, value: Any) -> str:
        return said(str(value))
