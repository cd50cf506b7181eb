"""A quota's borrowing limit saved on the admin's quota page while its team leaves its cohort
(two PostgreSQL connections, real row locks), as through the API
(tests/controlplane/api/test_adminapi_quota_limit_race_cohort_move.py): the page locks the
team's row before the quota's, so the save waits for the move and is judged in no cohort."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from controlplane.models import Quota, Team
from controlplane.services import cohorts
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, build_fleet
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Fleet:
    fleet = build_fleet()
    f.make_user("boss", superuser=True)
    return fleet


def _boss() -> Client:
    client = Client()
    assert client.login(username="boss", password="boss")
    return client


@pytest.mark.parametrize("page", ["change", "add"])
def test_a_borrowing_limit_saved_while_the_team_leaves_its_cohort_is_refused_on_the_field(
        committed_fleet: Fleet, page: str) -> None:
    fleet = committed_fleet
    boss = _boss()
    if page == "change":
        quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
        path = f"/admin/controlplane/quota/{quota.pk}/change/"
        form = {**f.opened_admin_form(boss, path), "borrowing_limit": 8}
    else:
        path = "/admin/controlplane/quota/add/"
        form = {"team": fleet.ml.pk, "gpu_type": fleet.a100.pk, "nominal_gpus": 4, "borrowing_limit": 8,
                "lending_limit": ""}
    with transaction.atomic():  # the team's move, as its page or the API makes it
        team = Team.objects.select_for_update(no_key=True).get(pk=fleet.ml.pk)
        before = cohorts.cohort_of(team.pk)
        team.cohort = None
        team.save(update_fields=["cohort"])
        cohorts.record_team_move(team, before, "user:carol")
        saving, saved = in_thread(lambda: boss.post(path, form))
        assert blocked_on_a_lock(timeout=5), f"the save did not wait for the team's move: {saved}"
    saving.join(20)

    answer = saved["result"]
    assert answer.status_code == 200, answer  # the page again, with the refusal on the field
    assert "is in no cohort" in str(answer.context["adminform"].form.errors["borrowing_limit"])
    assert not Quota.objects.filter(team=fleet.ml, borrowing_limit__isnull=False).exists()
