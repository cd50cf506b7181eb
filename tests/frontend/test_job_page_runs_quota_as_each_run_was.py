"""The job page's Runs Quota column says what each run was, as `qm runs` does: `own→borrowed`
and from when for a run bound within its team's quota that came to count as borrowed while it
ran (the quota lowered under it: the scheduler's job.borrowing event), `borrowed` for one bound
so, `own` for one within quota. Until 7 Dec it showed the run's flag alone, so the first read
`borrowed` as if it had been bound so."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event, Quota
from controlplane.services import cycle
from frontend.templatetags.qm import utc
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, build_fleet
from tests.controlplane.job_runs_story import bind_at

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(db: Any) -> Fleet:
    return build_fleet()


def _quota_cell(html: str) -> str:
    """Run 1's Quota cell as it reads, its tags (a line break among them) read as spaces."""
    row = re.search(r'<tr id="run-1".*?</tr>', html, re.S)
    assert row is not None, html
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", cells[-2])).strip()


def test_the_quota_column_says_own_then_borrowed_and_from_when(fleet: Fleet) -> None:
    now = timezone.now()
    older = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="older", gpus=8, runtime_limit_s=4 * 3600)
    newer = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="newer", gpus=8, runtime_limit_s=4 * 3600)
    lent = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="lent", gpus=2)
    bind_at(older, [(fleet.nodes[1], range(8), "")], at=now - timedelta(minutes=30))
    marked = bind_at(newer, [(fleet.nodes[2], range(8), "")], at=now - timedelta(minutes=10))
    bind_at(lent, [(fleet.nodes[3], [0, 1], "")], at=now - timedelta(minutes=5), borrowed=True)
    Quota.objects.filter(team=fleet.ml, gpu_type=fleet.h100).update(nominal_gpus=8)
    cycle.run_cycle("worker-1")
    event = Event.objects.get(kind=EventKind.JOB_BORROWING, allocation_id=marked.pk)
    client = Client()
    client.force_login(fleet.users["owner"])

    cells = {job.name: _quota_cell(client.get(f"/jobs/{job.pk}/").content.decode()) for job in (older, newer, lent)}
    live = _quota_cell(client.get(f"/ui/jobs/{newer.pk}.json").json()["html"]["job-runs"])

    assert cells["newer"] == live == f"own→borrowed from {utc(event.created_at).removesuffix(' UTC')}", cells
    assert (cells["older"], cells["lent"]) == ("own", "borrowed")
