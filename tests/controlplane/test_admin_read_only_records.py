"""Jobs, allocations, events and the scheduler lease are shown in the admin UI, not edited
there: their states change through the services (submit, cancel, the control loop, the
agents), which keep the lease fencing and the audit trail.

Found in the demo: a job set from running to pending in /admin/ made every scheduling cycle
fail ("job '224' is both pending and running"), and deleting a running job there would have
cascaded to its allocation and freed GPUs its processes still use."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, SchedulerLease
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _running(fleet: Any) -> tuple[Job, Allocation]:
    now = timezone.now()
    job = f.make_job(fleet.ml, gpus=2, state=JobState.RUNNING, started_at=now)
    allocation = Allocation.objects.create(job=job, generation=1, epoch=1, created_at=now, started_at=now)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=fleet.nodes[1], gpu_index=i)
                                      for i in range(2))
    return job, allocation


def test_a_job_is_shown_but_its_state_cannot_be_edited_or_the_job_deleted(fleet, browser) -> None:
    job, allocation = _running(fleet)

    page = browser.get(f"/admin/controlplane/job/{job.pk}/change/")
    assert page.status_code == 200 and job.name in page.content.decode()
    browser.post(f"/admin/controlplane/job/{job.pk}/change/", {"state": JobState.PENDING, "gpus": 2})
    browser.post(f"/admin/controlplane/job/{job.pk}/delete/", {"post": "yes"})
    browser.post("/admin/controlplane/job/", {"action": "delete_selected", "_selected_action": [job.pk], "post": "yes"})

    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    assert Allocation.objects.filter(pk=allocation.pk).exists()
    assert browser.get("/admin/controlplane/job/add/").status_code == 403


@pytest.mark.parametrize("model", ["allocation", "event", "schedulerlease"])
def test_allocations_events_and_the_lease_are_read_only(fleet, browser, model) -> None:
    _, allocation = _running(fleet)
    event = Event.objects.create(kind=EventKind.JOB_STARTED, actor="agent:h100-1", reason="Started", message="x",
                                 created_at=timezone.now())
    lease = SchedulerLease.objects.create(epoch=3)
    obj = {"allocation": allocation, "event": event, "schedulerlease": lease}[model]

    assert browser.get(f"/admin/controlplane/{model}/{obj.pk}/change/").status_code == 200
    assert browser.get(f"/admin/controlplane/{model}/add/").status_code == 403
    browser.post(f"/admin/controlplane/{model}/{obj.pk}/delete/", {"post": "yes"})

    assert type(obj).objects.filter(pk=obj.pk).exists()
    page = browser.get(f"/admin/controlplane/{model}/{obj.pk}/change/").content.decode()
    assert 'name="_save"' not in page


def test_a_nodes_state_moves_by_the_admins_actions_with_their_events_not_by_editing(fleet, browser) -> None:
    from controlplane.models import Node

    node = fleet.nodes[2]
    page = browser.get(f"/admin/controlplane/node/{node.pk}/change/")
    form = page.context["adminform"].form
    assert "state" not in form.fields  # shown, not editable
    data = {name: ("" if form[name].value() is None else form[name].value()) for name in form.fields}
    data = {k: v for k, v in data.items() if v is not False}
    r = browser.post(f"/admin/controlplane/node/{node.pk}/change/", {**data, "state": "down"})
    assert r.status_code == 302 and Node.objects.get(pk=node.pk).state == "ready"

    r = browser.post("/admin/controlplane/node/", {"action": "cordon", "_selected_action": [node.pk]})

    assert r.status_code == 302 and Node.objects.get(pk=node.pk).state == "cordoned"
    event = Event.objects.get(kind=EventKind.NODE_STATE, node=node)
    assert event.actor == "user:boss" and event.data["to"] == "cordoned"
    browser.post("/admin/controlplane/node/", {"action": "uncordon", "_selected_action": [node.pk]})
    assert Node.objects.get(pk=node.pk).state == "ready"
