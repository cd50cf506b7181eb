"""The jobs list gives a held job no place in the queue: its state cell says it is held and
shows no `#N`, as `qm list` says `held` in POS. Before, a held job read "held Held #2" beside the
jobs in line, though a held job is out of the queue until released (its page says "after every
job in line (a held job is not in line)")."""

from __future__ import annotations

import re

import pytest

from controlplane.choices import JobHold
from controlplane.models import Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _state_cell(html: str, job_id: int) -> str:
    found = re.search(rf'data-live-html="job-state-{job_id}">(.*?)</td>', html, re.S)
    assert found is not None, html[:300]
    return found.group(1)


def test_a_held_job_shows_no_queue_position(client_for) -> None:
    vision = Team.objects.get(name="vision")
    in_line = f.make_job(vision, name="in-line", pending_code="QuotaExceeded", queue_position=1)
    held = f.make_job(vision, name="held", pending_code="Held", queue_position=2, hold=JobHold.USER)
    client = client_for("alice")

    html = client.get("/jobs/?ordering=queue_position").content.decode()
    assert "#1" in _state_cell(html, in_line.pk)
    cell = _state_cell(html, held.pk)
    assert ">held</span>" in cell and "#2" not in cell, cell

    # the live update's state cells are the same template
    body = client.get(f"/ui/jobs.json?ordering=queue_position&ids={in_line.pk},{held.pk}").json()
    assert "#2" not in body["html"][f"job-state-{held.pk}"]
    assert "#1" in body["html"][f"job-state-{in_line.pk}"]
