"""The admin says a time as the pages and `qm` do, with its zone: a team's "usage as of" read
"Dec. 5, 2026, 7:35 p.m.", without "UTC", beside pages that all say "2026-12-05 19:35:00 UTC"
(h50's walk through the demo, 5 Dec)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from controlplane.models import Team

pytestmark = pytest.mark.django_db


def test_a_teams_usage_as_of_reads_as_the_pages_say_a_time(fleet, browser) -> None:
    Team.objects.filter(pk=fleet.ml.pk).update(usage_as_of=datetime(2026, 12, 5, 19, 35, tzinfo=timezone.utc))

    html = browser.get(f"/admin/controlplane/team/{fleet.ml.pk}/change/").content.decode()

    assert "2026-12-05 19:35:00 UTC" in html
    assert "p.m." not in html and "Dec. 5" not in html
