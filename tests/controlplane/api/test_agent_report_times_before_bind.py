"""An agent's clock is not trusted before the bind of the run it reports on.

Nothing of a run happens before its allocation was bound, but a report's times are the agent's
clock's: one set back (a node booted without a real-time clock reads 1970) or a hostile agent
said a usage sample began in 1970. Until 5 Dec that sample was stored as given: the job's GPU
was taken as used for 56 years, and the next accounting run cut it into ~500,000 hourly node
activity rows (17 s instead of 0.4 s for one sample, found by the agent API's hostile-input
sweep); a 'started' report of that clock made the allocation's start 1970, so its runtime limit
had long passed. Now a report's instants are taken no earlier than the bind (`created_at`).
Real HTTP requests against PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import Allocation, UsageSample
from controlplane.services import cycle
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    agent_client,
    build_loop_fleet,
    make_job,
    register_node,
)

pytestmark = pytest.mark.django_db

EPOCH = "1970-01-01T00:00:00+00:00"


@pytest.fixture(autouse=True)
def _bootstrap_secret(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


def test_a_sample_and_a_start_from_before_the_bind_are_taken_from_the_bind(db: Any) -> None:
    fleet = build_loop_fleet()
    _, token = register_node("gpu-0")
    job = make_job(fleet, name="j", gpus=1)
    assert cycle.run_cycle("worker-1").binds == 1
    allocation = Allocation.objects.get(job=job)
    now = timezone.now().isoformat()

    response = agent_client(token).post("/api/v1/agent/nodes/gpu-0/report", {"reports": [
        {"kind": "started", "generation": allocation.generation, "at": EPOCH},
        {"kind": "sample", "generation": allocation.generation, "started_at": EPOCH, "at": now, "gpu_activity": 1.0},
        # wholly before the bind: nothing to account
        {"kind": "sample", "generation": allocation.generation, "started_at": EPOCH,
         "at": "1970-01-01T00:00:10+00:00", "gpu_activity": 1.0},
    ]}, format="json")

    assert response.status_code == 200, response.content
    allocation.refresh_from_db()
    assert allocation.started_at == allocation.created_at
    assert list(UsageSample.objects.values_list("started_at", flat=True)) == [allocation.created_at]
