"""The time windows the pages offer, and how a request names one (`?window=24h`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone


@dataclass(frozen=True)
class Window:
    key: str
    label: str
    span: timedelta

    def bounds(self, now: datetime | None = None) -> tuple[datetime, datetime]:
        end = now or timezone.now()
        return end - self.span, end

    @property
    def hours(self) -> float:
        return self.span.total_seconds() / 3600


WINDOWS: tuple[Window, ...] = (
    Window("1h", "last hour", timedelta(hours=1)),
    Window("6h", "last 6 hours", timedelta(hours=6)),
    Window("24h", "last 24 hours", timedelta(hours=24)),
    Window("7d", "last 7 days", timedelta(days=7)),
    Window("30d", "last 30 days", timedelta(days=30)),
)
BY_KEY = {w.key: w for w in WINDOWS}
DEFAULT = BY_KEY["24h"]


def window_from(raw: str | None, default: Window = DEFAULT) -> Window:
    """The window a query string names; an unknown or missing name gives the default, so a
    hand-edited URL still renders a page instead of an error."""
    return BY_KEY.get((raw or "").strip(), default)
