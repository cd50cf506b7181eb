"""A job waiting for a dependency is not in line ("until then it is not in the queue"), yet the
job page said its queue position bare ("Queue position 8"), as if eighth in line; then (until 6
Dec) "8, after every job in line (a job waiting for a dependency is not in line)", a rank among
jobs it cannot join until another job starts or ends. The engine gives it no position now: the
page says none, and until what it is not in line, in the engine's words; the jobs list shows no
`#N` for it but the same words, and `qm explain`/`qm status` say what the page says. A held job
keeps its rank after every job in line, said so."""

from __future__ import annotations

import re

import pytest

from controlplane.models import Job
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db


def _position(client, job: Job) -> list[str]:
    pages = [client.get(f"/jobs/{job.pk}/").content.decode(),
             client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"]]
    return [page.split('<dd id="queue-position">', 1)[1].split("</dd>", 1)[0] for page in pages]


def _state_cell(html: str, job_id: int) -> str:
    found = re.search(rf'data-live-html="job-state-{job_id}">(.*?)</td>', html, re.S)
    assert found is not None, html[:300]
    return found.group(1)


def test_a_job_waiting_for_a_dependency_has_no_queue_position_and_says_until_what(client_for, submit_as) -> None:
    first = submit_as("alice", name="preprocess", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    then = submit_as("alice", name="train", gpus=8, dependencies=({"job": first.pk},))
    held = submit_as("alice", name="later", gpus=8, hold=True)
    run_cycle("test")
    then.refresh_from_db()
    held.refresh_from_db()
    assert then.pending_code == "WaitingForDependency" and then.queue_position is None
    assert then.pending_would_start_if == f"job {first.pk} succeeds"
    client = client_for("alice")

    assert _position(client, then) == [f"none: not in line until job {first.pk} succeeds"] * 2
    # the held job is not counted behind it, nor is it itself ranked
    assert held.queue_position is not None
    assert _position(client, held) == [
        f"{held.queue_position}, after every job in line (a held job is not in line)"] * 2

    html = client.get("/jobs/?ordering=queue_position").content.decode()
    cell = _state_cell(html, then.pk)
    assert "<code>WaitingForDependency</code> until job " in cell and f"{first.pk} succeeds" in cell, cell
    assert not re.search(r"#[0-9]", cell), cell
    # the live update's state cells are the same template
    live = client.get(f"/ui/jobs.json?ordering=queue_position&ids={then.pk}").json()["html"][f"job-state-{then.pk}"]
    assert live == cell


def test_a_job_waiting_for_a_dependency_has_no_eta_until_it_is_met_said_so(client_for, submit_as) -> None:
    """Its ETA read "no estimate this cycle: the scheduler cannot promise a start for it yet",
    as if a cycle had failed to estimate it: it is given none because it is not in line until
    its dependency is met. The page says until what, as `qm explain` and `qm status` do."""
    first = submit_as("alice", name="preprocess", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    then = submit_as("alice", name="train", gpus=8, dependencies=({"job": first.pk},))
    run_cycle("test")
    client = client_for("alice")

    pages = [client.get(f"/jobs/{then.pk}/").content.decode(),
             client.get(f"/ui/jobs/{then.pk}.json").json()["html"]["job-status"]]

    etas = [page.split('<dd id="eta">', 1)[1].split("</dd>", 1)[0] for page in pages]
    assert etas == [f"none until job {first.pk} succeeds: it is not in line before then, so no start is "
                    "estimated"] * 2
