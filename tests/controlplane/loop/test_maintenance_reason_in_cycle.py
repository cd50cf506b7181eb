"""A job that only a maintenance window keeps waiting is told, on its page and by `qm explain`
(the API's explain), the engine's sentence as it is, its times said in UTC: every node it would
use counted and named, and which of them the window takes out of service. An operator review
(7 Dec) found a 32-GPU gang needing four whole nodes told "It would fit now on 1 node (h100-11)
…": only the node under the window was counted."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from controlplane.api.serializers.sentences import utc_second
from controlplane.api.views.jobs import explanation
from controlplane.services import cycle, maintenance
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, make_job, register_node


def test_a_gang_held_off_by_a_window_on_one_of_its_nodes_is_told_every_node_it_needs(fleet: LoopFleet) -> None:
    for name in ("gpu-a", "gpu-b", "gpu-c", "gpu-d"):
        register_node(name)
    root = f.make_user("root", superuser=True)
    window = maintenance.create(root, nodes=["gpu-d"], start_at=timezone.now().replace(microsecond=0) + timedelta(minutes=30),
                                duration_s=3600, reason="firmware")
    gang = make_job(fleet, gpus=32, gpus_per_node=8, runtime_limit_s=3 * 3600, name="gang")

    cycle.run_cycle("worker-1")

    gang.refresh_from_db()
    assert gang.pending_code == "MaintenanceWindow", gang.pending_message
    start, end = utc_second(window.start_at), utc_second(window.end_at)
    said = explanation(gang)["reason"]
    assert said.startswith(
        f"It would fit now on 4 nodes (gpu-a, gpu-b, gpu-c, gpu-d), but maintenance window {window.pk} "
        f"(firmware) takes gpu-d out of service from {start} to {end}, and its runtime limit of 3 h "
        f"would end it at "), said
