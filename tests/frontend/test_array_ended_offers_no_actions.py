"""A job array whose tasks have all ended offers no Hold, Release or Cancel on its summary, as an
ended job's page offers no Cancel: they stayed, and answered "0 cancelled, 0 stopping" and
"0 held, 6 not waiting" (demo walk, 8 Dec). One task not ended keeps them."""

from __future__ import annotations

import pytest

from controlplane.models import Job
from controlplane.services.transitions import cancel_job

pytestmark = pytest.mark.django_db

BUTTONS = ('id="array-hold"', 'id="array-release"', 'id="array-cancel"')


def test_an_array_all_ended_offers_no_actions(client_for, submit_as) -> None:
    alice = client_for("alice")
    first = submit_as("alice", name="sweep", gpus=1, array="0-2")
    tasks = list(Job.objects.filter(array_id=first.array_id).order_by("array_index"))
    for task in tasks[:-1]:
        cancel_job(task, "test")

    one_left = alice.get("/jobs/", {"array_id": first.array_id}).content.decode()
    cancel_job(tasks[-1], "test")
    none_left = alice.get("/jobs/", {"array_id": first.array_id}).content.decode()

    assert all(button in one_left for button in BUTTONS)
    assert not any(button in none_left for button in BUTTONS)
    assert "Cancelled" in none_left and f"<code>{first.array_id}</code>" in none_left  # the summary stays
