"""The words for a time given without a time zone, in one place: showback's window
(showback._instant), a price rate's effective_from and a maintenance window's start_at and
end_at (ZonedDateTimeField, api/serializers/fields.py) refuse such a time rather than read it
as UTC, and say so alike, with what to send instead."""

from __future__ import annotations

from datetime import datetime


def no_zone_said(text: str, moment: datetime) -> str:
    """Why `text` (read as the naive `moment`) is refused, and the instant to send for UTC."""
    stamp = f"{moment:%Y-%m-%dT%H:%M:%S}"
    return f"'{text}' has no time zone; add Z or an offset, e.g. {stamp}Z or {stamp}+00:00 for UTC"
