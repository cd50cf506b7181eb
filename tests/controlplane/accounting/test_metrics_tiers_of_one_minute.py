"""/metrics gives the three tiers of one minute (operator review, 6 Dec).

`quartermaster_gpus_allocated` is the GPUs held now, `quartermaster_gpus_active` and
`quartermaster_gpus_productive` averages over the last rolled minute: a dashboard dividing one by
the other, or drawing the three, read more GPUs active than allocated whenever jobs ended since
that minute (here 7.2 active of 0 allocated), the tiers out of order. The allocated tier of that
same minute is exported beside them (`quartermaster_gpus_allocated_last_minute`), so
allocated >= active >= productive holds among the three."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.services import accounting
from tests.controlplane.accounting.builders import hold, report, running_job
from tests.controlplane.accounting.test_accounting_metrics import scrape
from tests.controlplane.fleet_fixture import Fleet

H100 = (("gpu_type", "H100-80GB"),)


@pytest.mark.django_db
def test_metrics_the_allocated_tier_of_the_minute_the_active_and_productive_tiers_average(
    fleet: Fleet, clients: dict[str, APIClient],
) -> None:
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(minutes=10)
    job = running_job(fleet.ml, gpus=8, started_at=start)
    ended = now - timedelta(seconds=5)
    allocation = hold(job, [(fleet.nodes[1], 8)], start, ended)  # released: nothing is held now
    report(allocation, fleet.nodes[1], start, ended, activity=0.9)
    accounting.catch_up(now)

    m = scrape(clients["admin"])

    active = m["quartermaster_gpus_active"][H100]
    productive = m["quartermaster_gpus_productive"][H100]
    assert m.get("quartermaster_gpus_allocated", {}).get(H100, 0) == 0 < productive <= active  # the premise: it ended
    allocated = m["quartermaster_gpus_allocated_last_minute"][H100]
    assert allocated >= active >= productive > 0
    assert active == pytest.approx(0.9 * allocated)
