"""An admin's PATCH or DELETE racing another write of the same record (two PostgreSQL
connections, real row locks: tests/controlplane/lock_waits.py).

Found by the concurrency audit (4 Dec): the API read the record unlocked, validated, then saved
the whole row. A PATCH of a quota deleted meanwhile answered 200 and inserted it again (and
once, under a third request, 409 "The database refused the change: duplicate key value
violates unique constraint \"controlplane_quota_pkey\""); of two admins changing two fields of
one quota at once, both were told 200 and one change was gone; a node's PATCH wrote back the
state the control loop had changed meanwhile; two deletions at once each recorded one. Now the
write locks the row first and reads it afresh under the lock (AdminWritableViewSet._lock_record).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from controlplane.choices import EventKind, NodeState
from controlplane.models import Event, Node, Quota, Team
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, build_fleet, client_for
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread

J = "/api/v1"


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Fleet:
    return build_fleet()


def _patch(fleet: Fleet, path: str, body: dict[str, Any]) -> Any:
    return client_for(fleet, "admin").patch(f"{J}/{path}", body, format="json")


@pytest.mark.parametrize("kind", ["quota", "team", "node"])
def test_a_change_to_a_record_deleted_meanwhile_is_a_404_and_does_not_bring_it_back(
        committed_fleet: Fleet, kind: str) -> None:
    fleet = committed_fleet
    record: Any
    if kind == "quota":
        record, path, body = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100), "quotas", {"nominal_gpus": 3}
    elif kind == "team":
        record, path, body = f.make_team("gone", default_priority_class=fleet.research), "teams", {"description": "x"}
    else:
        record, path, body = fleet.nodes[5], "nodes", {"cpus": 64}
    model = type(record)
    with transaction.atomic():  # the deletion, committed while the change waits for the row
        model.objects.select_for_update().get(pk=record.pk)
        changing, changed = in_thread(lambda: _patch(fleet, f"{path}/{record.pk}/", body))
        assert blocked_on_a_lock()
        model.objects.filter(pk=record.pk).delete()
    changing.join(20)

    answer = changed["result"]
    assert answer.status_code == 404, answer.json()
    assert answer.json()["detail"].startswith(f"No {model._meta.verbose_name} {record.pk}"), answer.json()
    assert not model.objects.filter(pk=record.pk).exists()


def test_two_admins_changing_two_fields_of_one_quota_at_once_keep_both_changes(committed_fleet: Fleet) -> None:
    fleet = committed_fleet
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    with transaction.atomic():  # a third writer holds the row while both changes arrive
        Quota.objects.select_for_update().get(pk=quota.pk)
        first, first_out = in_thread(lambda: _patch(fleet, f"quotas/{quota.pk}/", {"nominal_gpus": 12}))
        assert blocked_on_a_lock()
        second, second_out = in_thread(lambda: _patch(fleet, f"quotas/{quota.pk}/", {"borrowing_limit": 4}))
        assert blocked_on_a_lock(at_least=2)
    first.join(20)
    second.join(20)

    assert first_out["result"].status_code == second_out["result"].status_code == 200
    quota.refresh_from_db()
    assert (quota.nominal_gpus, quota.borrowing_limit) == (12, 4)
    # Each change's event tells what it changed from the row as the other left it.
    assert Event.objects.filter(kind=EventKind.QUOTA_CHANGED, reason="QuotaChanged").count() == 2


def test_a_node_change_keeps_the_state_the_control_loop_wrote_meanwhile(committed_fleet: Fleet) -> None:
    fleet = committed_fleet
    node = fleet.nodes[0]
    with transaction.atomic():  # reconcile quarantining the node while the change waits
        Node.objects.select_for_update().get(pk=node.pk)
        changing, changed = in_thread(lambda: _patch(fleet, f"nodes/{node.pk}/", {"cpus": 64}))
        assert blocked_on_a_lock()
        Node.objects.filter(pk=node.pk).update(state=NodeState.QUARANTINED, agent_lease_expires_at=None)
    changing.join(20)

    assert changed["result"].status_code == 200, changed["result"].json()
    assert changed["result"].json()["state"] == NodeState.QUARANTINED
    node.refresh_from_db()
    assert (node.state, node.cpus, node.agent_lease_expires_at) == (NodeState.QUARANTINED, 64, None)


def test_two_deletions_of_one_quota_at_once_delete_it_once_and_record_it_once(committed_fleet: Fleet) -> None:
    fleet = committed_fleet
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    admin = client_for(fleet, "admin")
    with transaction.atomic():  # a writer holds the row while both deletions arrive
        Quota.objects.select_for_update().get(pk=quota.pk)
        first, first_out = in_thread(lambda: admin.delete(f"{J}/quotas/{quota.pk}/"))
        assert blocked_on_a_lock()
        second, second_out = in_thread(lambda: client_for(fleet, "admin").delete(f"{J}/quotas/{quota.pk}/"))
        assert blocked_on_a_lock(at_least=2)
    first.join(20)
    second.join(20)

    assert sorted([first_out["result"].status_code, second_out["result"].status_code]) == [204, 404]
    assert not Quota.objects.filter(pk=quota.pk).exists()
    assert Event.objects.filter(kind=EventKind.QUOTA_CHANGED, reason="QuotaDeleted").count() == 1
    assert Team.objects.filter(pk=fleet.ml.pk).exists()
