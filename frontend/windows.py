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


def window_choice(raw: str | None, default: Window = DEFAULT) -> tuple[Window, str]:
    """The window a page's query string names, and what is wrong with it ("" for nothing): a
    name the page does not offer is said, as showback says a window it cannot read, and the
    default shown (the overview, teams and node pages showed the default unsaid for
    `?window=bogus` until 5 Dec). Missing or empty: the default, nothing said."""
    text = (raw or "").strip()
    # In any case, as showback and the API read a window (`24H` was refused here until 7 Dec).
    if not text or text.lower() in BY_KEY:
        return BY_KEY.get(text.lower(), default), ""
    offered = ", ".join(w.key for w in WINDOWS)
    return default, (f"window: '{text[:40]}' is not a window this page shows: use one of {offered}; "
                     f"showing the {default.label}.")
