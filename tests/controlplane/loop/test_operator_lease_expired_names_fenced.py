"""A node whose lease ran out says, in its own event, which jobs were fenced off it.

Found on the operator's night drill: a 16-GPU gang on opsa-000 and opsa-001 was fenced when
their agent was killed. The nodes' events (`GET events/?node=opsa-000`, the node's page) said
"suspect → quarantined … its allocations are fenced" but not which: the gang's fence and requeue
events name both nodes in their words, yet carry no `node` (one event, two nodes), so neither
node's history showed them, and a human reading it later could not tell what ran there. The
`LeaseExpired` event now names each fenced job and generation, in its words and its data."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import EventKind, Role
from controlplane.models import Allocation, Event, Node
from controlplane.services import reconcile
from tests.controlplane import factories
from tests.controlplane.loop_fixtures import LoopFleet, bind, make_job, register_node

pytestmark = pytest.mark.django_db


def test_operator_the_lease_expired_event_names_the_gang_and_the_job_fenced_off_the_node(fleet: LoopFleet) -> None:
    a, _ = register_node("gpu-01")
    b, _ = register_node("gpu-02")
    gang = bind(make_job(fleet, gpus=16, name="gang"), {a: list(range(8)), b: list(range(8))})
    other = make_job(fleet, gpus=8, name="other")
    single = bind(other, {Node.objects.get(pk=register_node("gpu-03")[0].pk): list(range(8))})
    now = timezone.now()
    Node.objects.filter(pk=a.pk).update(agent_lease_expires_at=now - timedelta(seconds=5))

    reconcile.expire_node(a.pk, now=now)

    event = Event.objects.get(node=a, kind=EventKind.NODE_STATE, reason="LeaseExpired")
    new = Allocation.objects.get(pk=gang.pk).generation
    assert f"fenced job {gang.job_id} (generation {gang.generation} → {new}, also on gpu-02)" in event.message
    assert event.data["fenced"] == [{"job": gang.job_id, "generation": gang.generation, "new_generation": new}]
    assert f"job {single.job_id} " not in event.message  # it ran on gpu-03, which still answers
    admin = APIClient()
    admin.credentials(HTTP_AUTHORIZATION=f"Token {factories.token_for(factories.make_user('root', role=Role.ADMIN))}")
    listed = admin.get("/api/v1/events/?node=gpu-01&kind=node.state").json()["results"]
    assert any(f"fenced job {gang.job_id}" in e["message"] for e in listed)


def test_operator_a_node_with_nothing_on_it_says_nothing_was_fenced(fleet: LoopFleet) -> None:
    a, _ = register_node("gpu-01")
    now = timezone.now()
    Node.objects.filter(pk=a.pk).update(agent_lease_expires_at=now - timedelta(seconds=5))

    reconcile.expire_node(a.pk, now=now)

    event = Event.objects.get(node=a, kind=EventKind.NODE_STATE, reason="LeaseExpired")
    assert "nothing ran on it" in event.message and event.data["fenced"] == []


def test_operator_both_nodes_of_a_gang_expiring_in_one_pass_each_name_it(fleet: LoopFleet) -> None:
    """Killing the one agent of two simulated nodes lapses both leases, in one reconcile pass or
    a second apart: the first node fences the gang, and the second must not say "nothing ran on
    it"."""
    a, _ = register_node("gpu-01")
    b, _ = register_node("gpu-02")
    gang = bind(make_job(fleet, gpus=16, name="gang"), {a: list(range(8)), b: list(range(8))})
    now = timezone.now()
    Node.objects.filter(pk__in=[a.pk, b.pk]).update(agent_lease_expires_at=now - timedelta(seconds=5))

    reconcile.expire_node(a.pk, now=now)
    reconcile.expire_node(b.pk, now=now + timedelta(seconds=1.5))

    second = Event.objects.get(node=b, kind=EventKind.NODE_STATE, reason="LeaseExpired")
    new = Allocation.objects.get(pk=gang.pk).generation
    assert f"fenced job {gang.job_id} (generation {gang.generation} → {new}, also on gpu-01)" in second.message
    assert second.data["fenced"] == [{"job": gang.job_id, "generation": gang.generation, "new_generation": new}]
