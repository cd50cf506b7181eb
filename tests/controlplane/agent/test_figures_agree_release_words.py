"""A gang member's exit says how many GPUs it frees in words that count.

Before, the job's history read "…the member on gpu-b is gone (exit code 0); its 8 GPU(s) are
free", unlike every other event, which says "8 GPUs" and "1 GPU"."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node


@pytest.mark.parametrize(("on_b", "words"), [(8, "its 8 GPUs are free"), (1, "its 1 GPU is free")],
                         ids=["eight", "one"])
def test_a_member_exit_counts_the_gpus_it_frees(fleet: LoopFleet, on_b: int, words: str) -> None:
    a, _ = register_node("gpu-a")
    b, token_b = register_node("gpu-b")
    allocation = bind(make_job(fleet, gpus=8 + on_b), {a: range(8), b: range(on_b)})
    response = agent_client(token_b).post(
        "/api/v1/agent/nodes/gpu-b/report",
        {"reports": [{"kind": "exited", "generation": allocation.generation, "at": timezone.now().isoformat(),
                      "exit_code": 0}]},
        format="json")
    assert response.status_code == 200, response.content

    event = Event.objects.get(kind=EventKind.ALLOCATION_RELEASED, allocation=allocation, node=b)
    assert event.message.endswith(words), event.message
    assert "GPU(s)" not in event.message
