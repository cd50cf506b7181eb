"""The job page says how a job ended as the events and `qm status` say it: a signal death with
the signal's name, "Failed at … with exit code 137 (SIGKILL)"; any other code as it is."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Job

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("code,said", [(137, "with exit code 137 (SIGKILL)"), (3, "with exit code 3.")])
def test_the_job_page_names_the_signal_of_a_signal_death(client_for: Any, submit_as: Any, code: int, said: str) -> None:
    job = submit_as("alice", name="oom", gpus=1)
    Job.objects.filter(pk=job.pk).update(state=JobState.FAILED, exit_code=code, finished_at=timezone.now())

    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    assert said in html
