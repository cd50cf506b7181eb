"""`qm cancel --array` cancels the whole array in one request (`POST job-arrays/{id}/cancel/`),
not one request per task: 1,000 tasks took 24 s on the demo before."""

from __future__ import annotations

import pytest
from django.core.signals import request_started

from controlplane.choices import JobState
from controlplane.models import Job

pytestmark = pytest.mark.slow


def test_cancel_array_of_many_tasks_is_one_request_and_says_the_lot(alice_qm, fleet, live_server) -> None:
    assert alice_qm("submit", "--name", "wide", "--gpus", "1", "--array", "0-299").code == 0
    array_id = str(Job.objects.filter(name="wide").first().array_id)

    requests: list[object] = []

    def count(**kwargs: object) -> None:
        requests.append(kwargs)

    request_started.connect(count)  # the live server answers in a thread of this process
    try:
        run = alice_qm("cancel", "--array", array_id)
    finally:
        request_started.disconnect(count)

    assert len(requests) == 1, len(requests)

    assert run.code == 0, run.err
    assert run.out == f"Array {array_id} (wide, 300 tasks): 300 cancelled, 0 stopping.\n"
    assert set(Job.objects.filter(array_id=array_id).values_list("state", flat=True)) == {JobState.CANCELLED}
    as_json = alice_qm("cancel", "--array", array_id, "--json")
    assert as_json.code == 0 and as_json.json()["states"] == {"cancelled": 300}
