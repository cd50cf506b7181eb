"""Deleting a team or a node never takes history with it.

Found by QA: DELETE teams/<id>/ on a team with a guarantee but no jobs answered 204 and wiped
its idle-reserved quota rows from past monthly reports (the rollups cascaded with the team), and
its quota.changed events from the audit trail. Accounting rows now protect their team, and events
outlive the team or node they name."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event, GpuType, Node, Quota, QuotaRollup, Team
from controlplane.models.usage import RollupBucket

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _quiet_team(fleet: object) -> Team:
    """A team with a guarantee and no jobs: what finance still reports on."""
    return Team.objects.create(name="retiring")


def test_a_team_with_accounting_history_cannot_be_deleted(fleet, admin) -> None:
    team = _quiet_team(fleet)
    gpu_type = fleet.nodes[0].gpu_type
    start = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(days=40)
    QuotaRollup.objects.create(
        bucket=RollupBucket.HOUR, start=start,
        team=team, gpu_type=gpu_type, nominal_gpu_seconds=Decimal(8 * 3600), used_gpu_seconds=0,
        borrowed_gpu_seconds=0, lent_gpu_seconds=0, idle_gpu_seconds=Decimal(8 * 3600), idle_cost_usd=Decimal("20"),
    )

    r = admin.delete(f"{J}/teams/{team.pk}/")

    assert r.status_code == 409
    assert "accounting history" in r.json()["detail"] and "cannot be deleted" in r.json()["detail"]
    assert Team.objects.filter(pk=team.pk).exists() and QuotaRollup.objects.filter(team=team).count() == 1


def test_a_deleted_teams_audit_events_stay_in_the_trail(fleet, admin) -> None:
    team = _quiet_team(fleet)
    gpu_type = fleet.nodes[0].gpu_type
    r = admin.post(f"{J}/quotas/", {"team": team.name, "gpu_type": gpu_type.name, "nominal_gpus": 8}, format="json")
    assert r.status_code == 201, r.content
    assert admin.delete(f"{J}/quotas/{r.json()['id']}/").status_code == 204
    recorded = set(Event.objects.filter(kind=EventKind.QUOTA_CHANGED, team=team).values_list("pk", flat=True))
    assert len(recorded) == 2

    assert admin.delete(f"{J}/teams/{team.pk}/").status_code == 204

    kept = Event.objects.filter(pk__in=recorded)
    assert kept.count() == 2 and set(kept.values_list("team", flat=True)) == {None}
    assert all("retiring" in e.message for e in kept)
    assert not Quota.objects.filter(team_id=team.pk).exists()


def test_a_deleted_nodes_events_stay_in_the_trail(fleet, admin) -> None:
    node = Node.objects.create(name="spare-01", pool="h100", gpu_type=fleet.nodes[0].gpu_type, gpu_count=8,
                               cpus=64, memory_gb=512, leaf_switch="leaf-9", spine="spine-9")
    assert admin.post(f"{J}/nodes/{node.pk}/cordon/").status_code == 200

    assert admin.delete(f"{J}/nodes/{node.pk}/").status_code == 204

    event = Event.objects.get(reason="Cordoned", message__startswith="spare-01")
    assert event.node_id is None


def _quota_row(team: Team, gpu_type: GpuType, minute: int, idle_s: int) -> QuotaRollup:
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(days=1, minutes=-minute)
    return QuotaRollup.objects.create(
        bucket=RollupBucket.MINUTE, start=start, team=team, gpu_type=gpu_type, nominal_gpu_seconds=idle_s,
        used_gpu_seconds=0, borrowed_gpu_seconds=0, lent_gpu_seconds=0, idle_gpu_seconds=idle_s,
        idle_cost_usd=Decimal(idle_s) / 1000)


def test_a_gpu_type_with_only_empty_quota_rows_is_deleted(fleet, admin) -> None:
    """A quota on a type with no nodes wrote an empty row a minute until 6 Dec: the quota gone,
    those rows alone answered 409 "accounting history" for ever."""
    b200 = GpuType.objects.create(name="B200", memory_gb=192)
    for minute in range(30):
        _quota_row(fleet.ml, b200, minute, 0)

    r = admin.delete(f"{J}/gpu-types/{b200.pk}/")

    assert r.status_code == 204, r.content
    assert not GpuType.objects.filter(pk=b200.pk).exists() and not QuotaRollup.objects.filter(gpu_type_id=b200.pk)
    assert Event.objects.filter(reason="GpuTypeDeleted", message__startswith="GPU type B200 deleted").exists()


def test_a_gpu_type_with_real_quota_history_answers_409_and_keeps_every_row(fleet, admin) -> None:
    b200 = GpuType.objects.create(name="B200", memory_gb=192)
    for minute in range(30):
        _quota_row(fleet.ml, b200, minute, 0)
    _quota_row(fleet.ml, b200, 30, 480)

    r = admin.delete(f"{J}/gpu-types/{b200.pk}/")

    assert r.status_code == 409
    assert r.json()["detail"] == ("GPU type B200 has accounting history that finance's reports and the audit trail "
                                  "keep (1 showback and quota rollup row); it cannot be deleted. It stays for the "
                                  "reports: with no nodes and no quotas of this type, no job can run on it (a job "
                                  "asking for it alone is told it can never run).")
    assert QuotaRollup.objects.filter(gpu_type=b200).count() == 31
