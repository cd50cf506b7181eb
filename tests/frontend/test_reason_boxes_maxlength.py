"""The hold and requeue reason boxes (a job's page, an array's summary) take at most what the API
takes: their `maxlength` is the API's bound (HOLD_REASON_MAX_LENGTH, which the API's reason field
and services/hold_text.reason_problem use), rendered by the server. They had none: a 300-character
reason was typed in full, then refused as "at most 200 characters (300 given)"."""

from __future__ import annotations

import re

import pytest

from controlplane.models.jobs import HOLD_REASON_MAX_LENGTH
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db


def _maxlength(html: str, input_id: str) -> str | None:
    found = re.search(rf'<input [^>]*id="{input_id}"[^>]*>', html)
    assert found is not None, input_id
    length = re.search(r'maxlength="(\d+)"', found.group(0))
    return length.group(1) if length else None


def test_every_reason_box_takes_at_most_what_the_api_takes(client_for, submit_as) -> None:
    running = submit_as("alice", name="runs", gpus=1)
    run_cycle("test")
    array = submit_as("alice", name="sweep", gpus=1, array="0-1")
    client = client_for("alice")
    bound = str(HOLD_REASON_MAX_LENGTH)

    running.refresh_from_db()
    page = client.get(f"/jobs/{array.pk}/").content.decode()  # a task that waits: Hold
    assert _maxlength(page, "hold-reason-input") == bound
    live = client.get(f"/ui/jobs/{array.pk}.json").json()["html"]["job-status"]
    assert _maxlength(live, "hold-reason-input") == bound
    ran = client.get(f"/jobs/{running.pk}/").content.decode()
    assert running.state == "running" and _maxlength(ran, "requeue-reason-input") == bound
    summary = client.get(f"/jobs/?array_id={array.array_id}").content.decode()
    assert _maxlength(summary, "array-hold-reason") == bound
