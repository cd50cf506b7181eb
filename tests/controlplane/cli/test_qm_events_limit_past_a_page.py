"""`qm events --limit 1500` was refused ("give a number of events from 1 to 1000"), exit 1: the
API's largest page was the flag's limit, though `qm list --limit` and `qm sprio --limit` read
page after page. It now reads pages (1,000 a request) until it has the latest N."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event

pytestmark = pytest.mark.slow


def test_the_latest_n_past_the_apis_page_are_read_page_by_page(qm, fleet) -> None:
    now = timezone.now()
    Event.objects.bulk_create(Event(kind=EventKind.NODE_STATE, actor="system", message=f"bulk-{i}",
                                    created_at=now - timedelta(minutes=20, seconds=-i)) for i in range(1100))
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    latest = qm("events", "--kind", "node.state", "--limit", "1050", "--json")
    table = qm("events", "--kind", "node.state", "--limit", "1050")

    assert latest.code == 0, latest.err
    assert [e["message"] for e in latest.json()] == [f"bulk-{i}" for i in range(50, 1100)]  # oldest first, none twice
    assert table.out.splitlines()[-1] == "The latest 1,050 of 1,100 events; --limit N or --all for more."
    refused = qm("events", "--limit", "0")
    assert refused.code == 2 and "argument --limit/-n: '0' is not a whole number of at least 1" in refused.err
