"""An instant given as text, read by one rule and refused in one set of words: showback's
window (showback._instant), a price rate's effective_from and a maintenance window's start_at
and end_at (ZonedDateTimeField, api/serializers/fields.py), and every time query filter of the
API (`?after=`, `?submitted_after=`, …: filtersets.InstantField). A time without a time zone is
refused rather than read as UTC, and said alike, with what to send instead; so is text that is
no time at all (`?after=yesterday` answered Django's bare "Enter a valid date/time.", naming no
form, until 7 Dec) and a time no calendar has."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django.utils.dateparse import parse_datetime

#: The form every refusal shows: an RFC 3339 instant with its zone.
EXAMPLE = "2026-12-01T00:00:00Z"

#: An offset whose '+' a URL's query string turned into a space ("…T06:00:00 05:00"): `curl
#: '…?after=2026-11-30T06:00:00+05:00'` sends the '+' unencoded.
_SPACED_OFFSET = re.compile(r"(T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) (\d{2}:?\d{2})$")


class InstantRefused(ValueError):
    """Why a text is not an instant, in words to show as they are."""


def no_zone_said(text: str, moment: datetime) -> str:
    """Why `text` (read as the naive `moment`) is refused, and the instant to send for UTC."""
    stamp = f"{moment:%Y-%m-%dT%H:%M:%S}"
    return f"'{text}' has no time zone; add Z or an offset, e.g. {stamp}Z or {stamp}+00:00 for UTC"


def not_a_time_said(text: str, *, naive_is_utc: bool = False) -> str:
    """Why `text` that is no ISO 8601 time at all is refused, and the form to send."""
    shown = text.strip()[:40]
    if naive_is_utc:  # a page's field, labelled UTC: the zone may be left out
        return f"'{shown}' is not a time: give a date and time in UTC, e.g. {EXAMPLE[:16]}, or with its zone, {EXAMPLE}"
    return f"'{shown}' is not a time: give an RFC 3339 instant with its time zone, e.g. {EXAMPLE} or 2026-12-01T00:00:00-05:00"


def impossible_instant_said(value: str, exc: ValueError) -> str:
    """Why a time written as ISO 8601 is none: "'2026-13-01T00:00:00Z' is no time: month must
    be in 1..12", or its offset beyond a day."""
    shown = value.strip()[:40]
    if "offset" in str(exc):
        return (f"'{shown}' is no time: its UTC offset must lie between -23:59 and +23:59 "
                f"(e.g. {EXAMPLE} or 2026-12-01T00:00:00-05:00)")
    return f"'{shown}' is no time: {exc} (e.g. {EXAMPLE})"


def instant_from_text(text: str, *, naive_is_utc: bool = False) -> datetime:
    """`text` as an instant in UTC, or InstantRefused saying why not. `naive_is_utc`: a time
    without a zone is read as UTC (the pages' forms, whose fields say UTC and whose browser
    inputs carry no zone); everywhere else it is refused."""
    cleaned = _SPACED_OFFSET.sub(r"\1+\2", text.strip())
    try:
        moment = parse_datetime(cleaned)
    except ValueError as exc:
        # The shape of an ISO 8601 time with a value no calendar has (month 13, hour 99) or an
        # offset of a day or more: Django raises rather than answering None.
        raise InstantRefused(impossible_instant_said(text, exc)) from exc
    if moment is None:
        raise InstantRefused(not_a_time_said(text, naive_is_utc=naive_is_utc))
    if moment.tzinfo is None:
        if not naive_is_utc:
            raise InstantRefused(no_zone_said(text, moment))
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        # in UTC (PostgreSQL takes offsets up to ±15:59 only) it leaves the calendar
        raise InstantRefused(f"'{text.strip()[:40]}' is outside the years 1 to 9999 in UTC") from None
