"""The admin's scheduler lease says how long the last cycle took as a duration an operator reads,
"114 ms", on its list and its page. Found on the demo (7 Dec): both read "Last cycle ms
114.18800200044643", the float as stored."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.models import SchedulerLease

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("stored", "said"), [(114.18800200044643, "114 ms"), (0.6123, "0.6 ms"), (None, "–")])
def test_the_lease_says_its_last_cycles_time_in_milliseconds(fleet, browser, stored, said) -> None:  # type: ignore[no-untyped-def]
    lease = SchedulerLease.objects.create(holder="vm:1", epoch=2, last_cycle_at=timezone.now() if stored else None,
                                          last_cycle_ms=stored, cycles=1045)
    listing = browser.get("/admin/controlplane/schedulerlease/").content.decode()
    page = browser.get(f"/admin/controlplane/schedulerlease/{lease.pk}/change/").content.decode()
    for html in (listing, page):
        assert "Last cycle took" in html
        assert f">{said}<" in html.replace('<td class="field-last_cycle_took">', ">").replace(
            '<div class="readonly">', ">")
        assert "Last cycle ms" not in html and "114.188" not in html
