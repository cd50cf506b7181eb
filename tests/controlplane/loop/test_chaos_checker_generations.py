"""The chaos drill's checker judges each GPU's owners by the generation each held it under.

CI (stop 22) failed the drill on a sequence the product handles safely: a gang's member on b
exited, a new job took b's GPUs, then a went silent and the gang was fenced to a generation
newer than the new job's. The checker compared the new owner with the gang's current, bumped,
generation. It must still catch a real reuse: a new owner bound under an older generation than
the one the earlier owner held the GPU under.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.models import Allocation, Node, SchedulerLease
from controlplane.services import agent_protocol, reconcile
from tests.controlplane.loop.chaos_cluster import InvariantChecker
from tests.controlplane.loop_fixtures import bind, build_loop_fleet, make_job, register_node

pytestmark = pytest.mark.django_db(transaction=True)


def poll_once() -> list[str]:
    checker = InvariantChecker(cluster=None, job_ids=set)  # type: ignore[arg-type]  # poll reads only the database
    checker.poll()
    return checker.violations


def draw_next(generation: int) -> None:
    """Set the lease's generation counter so the next bind draws `generation`."""
    with transaction.atomic():
        reconcile.lock_scheduler_lease()
        SchedulerLease.objects.update(generation_counter=generation - 1)


def gang_fenced_after_its_member_left_b(*, newcomer_drawn_from: int | None = None) -> tuple[Allocation, int, Allocation]:
    """(the gang, the generation its member on b held b's GPUs under, the new owner there).

    With `newcomer_drawn_from`, the new owner is bound under that generation: the broken
    counter a real reuse before fencing would need."""
    fleet = build_loop_fleet()
    a, _ = register_node("gpu-a")
    b, _ = register_node("gpu-b")
    draw_next(100)
    gang = bind(make_job(fleet, gpus=4, gpus_per_node=2, name="gang"), {a: [0, 1], b: [0, 1]},
                at=timezone.now() - timedelta(minutes=10))
    agent_protocol._member_gone(gang.pk, gang.generation, b, exit_code=0, at=timezone.now(), actor="agent:b")
    if newcomer_drawn_from is not None:
        draw_next(newcomer_drawn_from)
    newcomer = bind(make_job(fleet, gpus=2, name="newcomer"), {b: [0, 1]})
    draw_next(200)  # the fence draws from above every generation so far, as it always does
    Node.objects.filter(pk=a.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))
    reconcile.expire_node(a.pk, now=timezone.now())
    held_under = gang.generation
    gang.refresh_from_db()
    return gang, held_under, newcomer


def test_a_gang_fenced_after_its_member_left_a_node_is_no_reuse_before_fencing() -> None:
    gang, _, newcomer = gang_fenced_after_its_member_left_b()
    assert gang.generation > newcomer.generation  # the sequence CI met

    assert poll_once() == []


def test_a_new_owner_under_an_older_generation_than_its_predecessor_held_is_caught() -> None:
    _, held_under, newcomer = gang_fenced_after_its_member_left_b(newcomer_drawn_from=50)

    violations = poll_once()

    assert violations[0].endswith(f"allocation {newcomer.pk} has generation 50, not above the generation "
                                  f"{held_under} its earlier owner held it under")
