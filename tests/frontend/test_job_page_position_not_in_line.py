"""A job waiting for a dependency is not in line ("until then it is not in the queue"), yet the
job page said its queue position bare ("Queue position 8"), as if eighth in line; a held job's
already said "after every job in line". Now both say where the rank puts them, and `qm
explain`/`qm status` say the same words."""

from __future__ import annotations

import pytest

from controlplane.models import Job
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db


def _position(client, job: Job) -> list[str]:
    pages = [client.get(f"/jobs/{job.pk}/").content.decode(),
             client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"]]
    return [page.split('<dd id="queue-position">', 1)[1].split("</dd>", 1)[0] for page in pages]


def test_a_job_waiting_for_a_dependency_is_ranked_after_every_job_in_line(client_for, submit_as) -> None:
    first = submit_as("alice", name="preprocess", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    then = submit_as("alice", name="train", gpus=8, dependencies=({"job": first.pk},))
    run_cycle("test")
    then.refresh_from_db()
    assert then.pending_code == "WaitingForDependency" and then.queue_position is not None

    assert _position(client_for("alice"), then) == [
        f"{then.queue_position}, after every job in line (a job waiting for a dependency is not in line)"] * 2
