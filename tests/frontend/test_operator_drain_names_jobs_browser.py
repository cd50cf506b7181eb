"""In Chromium, on the Nodes page: an admin drains a node that runs a job and the page says what
the drain left running there and until when (the API's `detail`), where it said "h100-03: drain
done." whatever ran there."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.choices import NodeState
from controlplane.models import Node
from controlplane.services import reconcile, transitions
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_drain_on_the_nodes_page_names_the_job_it_leaves_running(session: Any) -> None:  # noqa: F811
    admin = session("admin")
    node = Node.objects.get(name="h100-03")
    job = submit(user("alice"), SubmitRequest(name="finetune", gpus=2, gpu_types=("H100-80GB",))).job
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=node.pk, gpu_indices=[0, 1])], lease=lease,
                             borrowed=False, at=timezone.now(), actor="test")
    admin.open("/nodes/")
    row = admin.page.locator('tr[data-node="h100-03"]')

    admin.act(row.locator("[data-node-action=drain]"))

    said = admin.page.locator("#action-result")
    expect(said).to_contain_text("h100-03: ready → draining: no new work goes there; 1 job runs there until it ends")
    expect(said).to_contain_text(f"job {job.pk} finetune (2 GPUs here; its runtime limit ends ")
    expect(said).to_contain_text("it becomes cordoned once the last has ended.")
    expect(row.locator(".node-state .badge")).to_have_text("Draining")
    assert Node.objects.get(pk=node.pk).state == NodeState.DRAINING
