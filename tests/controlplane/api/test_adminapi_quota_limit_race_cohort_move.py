"""A quota's borrowing limit set while its team leaves its cohort (two PostgreSQL connections,
real row locks: tests/controlplane/lock_waits.py).

A team in no cohort keeps no limit on its quotas: one set on such a quota is refused on its field
(Quota._refuse_limits_without_cohort), and leaving a cohort clears them
(quotas.clear_limits_out_of_cohort). Found in review (7 Dec): the quota write judged the team's
cohort from an unlocked read, so a limit set while another admin's move out of the cohort was in
flight was judged against the cohort the team was leaving, and saved after the move's clearing
had found nothing to clear: both answered 200, and the team ended in no cohort with a borrowing
limit that never applies (`qm quotas` "none (no cohort)", the API the limit). Now a quota write
locks its team's row before its own, as a team's change does: one waits for the other, and the
second is judged against what the first did."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import transaction

from controlplane.models import Quota, Team
from controlplane.services import cohorts
from tests.controlplane.fleet_fixture import Fleet, build_fleet, client_for
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread

J = "/api/v1"


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Fleet:
    return build_fleet()


def _leaving_cohort_meanwhile(fleet: Fleet, write: Any) -> Any:
    """Run `write` (an API call) while ml's move out of its cohort holds ml's row, as the
    team's PATCH does; commit the move once the write waits for it (or has answered)."""
    with transaction.atomic():
        team = Team.objects.select_for_update(no_key=True).get(pk=fleet.ml.pk)
        before = cohorts.cohort_of(team.pk)
        team.cohort = None
        team.save(update_fields=["cohort"])
        cohorts.record_team_move(team, before, "user:carol")
        writing, written = in_thread(write)
        assert blocked_on_a_lock(timeout=5), f"the quota write did not wait for the team's move: {written}"
    writing.join(20)
    return written["result"]


def test_a_borrowing_limit_set_while_the_team_leaves_its_cohort_is_refused(committed_fleet: Fleet) -> None:
    fleet = committed_fleet
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)

    answer = _leaving_cohort_meanwhile(fleet, lambda: client_for(fleet, "admin").patch(
        f"{J}/quotas/{quota.pk}/", {"borrowing_limit": 8}, format="json"))

    assert answer.status_code == 400, answer.json()
    assert "is in no cohort" in answer.json()["errors"]["borrowing_limit"][0]
    quota.refresh_from_db()
    assert quota.borrowing_limit is None


def test_a_quota_created_with_a_limit_while_the_team_leaves_its_cohort_is_refused(committed_fleet: Fleet) -> None:
    fleet = committed_fleet

    answer = _leaving_cohort_meanwhile(fleet, lambda: client_for(fleet, "admin").post(
        f"{J}/quotas/", {"team": "ml", "gpu_type": "A100-40GB", "nominal_gpus": 4, "borrowing_limit": 8},
        format="json"))

    assert answer.status_code == 400, answer.json()
    assert "is in no cohort" in answer.json()["errors"]["borrowing_limit"][0]
    assert not Quota.objects.filter(team=fleet.ml, gpu_type=fleet.a100).exists()


def test_a_limit_that_waits_on_no_move_is_taken_as_before(committed_fleet: Fleet) -> None:
    fleet = committed_fleet
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)

    answer = client_for(fleet, "admin").patch(f"{J}/quotas/{quota.pk}/", {"borrowing_limit": 8}, format="json")

    assert answer.status_code == 200, answer.json()
    quota.refresh_from_db()
    assert quota.borrowing_limit == 8


@pytest.mark.parametrize("team", ["ml\u0000", "\udbd8ml", "m" * 200, ["ml"], 7])
def test_a_team_that_could_name_no_team_is_refused_on_the_field_not_a_500(committed_fleet: Fleet, team: Any) -> None:
    fleet = committed_fleet
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)

    answer = client_for(fleet, "admin").patch(f"{J}/quotas/{quota.pk}/", json.dumps({"team": team}),
                                              content_type="application/json")  # ASCII, surrogates escaped

    assert answer.status_code == 400, answer.content
    assert list(answer.json()["errors"]) == ["team"], answer.json()
