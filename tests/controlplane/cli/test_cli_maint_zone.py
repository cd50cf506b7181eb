"""`qm maint add/edit` sends every time with its zone, as UTC with `Z`: the API refuses a time
without one (maintenance-windows/, as price-rates/), and the command reads a time typed without
an offset as UTC (its help says so), so what it sends is never naive."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import pytest

from controlplane.cli import maintenance

NOW = datetime(2026, 12, 2, 8, 40, 17, tzinfo=UTC)


def _body(**given: str) -> dict[str, object]:
    args = argparse.Namespace(nodes=None, pool=None, start=None, duration=None, end=None, reason=None)
    for name, value in given.items():
        setattr(args, name, value)
    return maintenance._maint_body(args, NOW)


@pytest.mark.parametrize(("typed", "sent"), [
    ("2026-12-02T22:00", "2026-12-02T22:00:00Z"),  # no offset: UTC, as the help says
    ("2026-12-02T17:00-05:00", "2026-12-02T22:00:00Z"),  # an offset: that instant, in UTC
    ("2026-12-03", "2026-12-03T00:00:00Z"),
    ("10:30", "2026-12-02T10:30:00Z"),
    ("+2h", "2026-12-02T10:40:17Z"),
    ("now", "2026-12-02T08:40:17Z"),
])
def test_every_time_is_sent_as_utc_with_z(typed: str, sent: str) -> None:
    body = _body(start=typed, end=typed)
    assert body["start_at"] == sent and body["end_at"] == sent
