"""A quota lowered, or a team moved, under what the team holds: the API's answer says what that
does, as the admin's page does.

Found on the demo: `PATCH quotas/2/ {"nominal_gpus": 0}` while vision ran 4 A100 GPUs, then
`{"borrowing_limit": 0}`, answered 200 with `"warnings": []`: nothing said that the team now held
4 GPUs above its nominal and beyond its borrowing limit, that its running jobs keep them, or that
a team owed its guarantee reclaims them by preemption. The admin's quota page says all of it on
the same change (services/quotas.held_above_nominal; test_admin_quota_lowered.py), and so does
its team page on a cohort move (held_above_nominal_after_move); an admin scripting quotas through
the API or `qm` was told nothing. A read of the quota says nothing of it: borrowing in a cohort
is the normal state, and `held_gpus` / `borrowed_gpus` give the figures."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.models import Quota
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.fixture
def ml_runs_16(fleet) -> Quota:  # type: ignore[no-untyped-def]
    """ml (nominal 16 H100, cohort all) runs two 8-GPU jobs."""
    now = timezone.now()
    for n in fleet.nodes[1:3]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(n, 8)], now)
    return fleet.ml.quotas.get(gpu_type=fleet.h100)


def test_lowering_a_quota_below_what_the_team_holds_is_said_in_the_answer(fleet, admin, ml_runs_16) -> None:
    r = admin.patch(f"{J}/quotas/{ml_runs_16.pk}/", {"nominal_gpus": 6}, format="json")

    assert r.status_code == 200, r.json()
    assert (r.json()["held_gpus"], r.json()["borrowed_gpus"]) == (16, 10)
    [said] = [w for w in r.json()["warnings"] if "holds" in w]
    assert said.startswith("Team ml holds 16 H100-80GB GPUs now, 10 above its new nominal 6.")
    assert "lowering a quota stops nothing" in said
    assert "In cohort all the 10 above nominal count as borrowed (its jobs started last)" in said


def test_a_borrowing_limit_lowered_under_what_is_borrowed_is_said(fleet, admin, ml_runs_16) -> None:
    admin.patch(f"{J}/quotas/{ml_runs_16.pk}/", {"nominal_gpus": 6}, format="json")

    r = admin.patch(f"{J}/quotas/{ml_runs_16.pk}/", {"borrowing_limit": 4}, format="json")

    assert r.status_code == 200, r.json()
    [said] = [w for w in r.json()["warnings"] if "holds" in w]
    assert said.startswith("Team ml holds 16 H100-80GB GPUs now, 10 above its nominal 6, 6 beyond its "
                           "borrowing limit 4.")
    assert "it starts no more H100-80GB work while over its quota and borrowing limit" in said


@pytest.mark.parametrize("change", [{"nominal_gpus": 16}, {"nominal_gpus": 24}, {"lending_limit": 8}])
def test_nothing_said_when_the_change_leaves_the_team_within_its_quota_or_moves_neither(
        fleet, admin, ml_runs_16, change) -> None:
    if "lending_limit" in change:  # ml above nominal already; a lending limit changes nothing of that
        Quota.objects.filter(pk=ml_runs_16.pk).update(nominal_gpus=10)

    r = admin.patch(f"{J}/quotas/{ml_runs_16.pk}/", change, format="json")

    assert r.status_code == 200, r.json()
    assert not [w for w in r.json()["warnings"] if "holds" in w], r.json()


def test_a_read_says_nothing_of_borrowing_only_the_answer_to_the_change(fleet, admin, ml_runs_16) -> None:
    admin.patch(f"{J}/quotas/{ml_runs_16.pk}/", {"nominal_gpus": 6}, format="json")

    read = admin.get(f"{J}/quotas/{ml_runs_16.pk}/").json()

    assert read["borrowed_gpus"] == 10 and read["warnings"] == [], read


def test_a_new_quota_under_what_the_team_holds_is_said(fleet, admin) -> None:
    now = timezone.now()
    Quota.objects.filter(team=fleet.ml, gpu_type=fleet.h100).delete()
    hold(running_job(fleet.ml, gpus=8, started_at=now), [(fleet.nodes[1], 8)], now)

    r = admin.post(f"{J}/quotas/", {"team": "ml", "gpu_type": "H100-80GB", "nominal_gpus": 2}, format="json")

    assert r.status_code == 201, r.json()
    assert [w for w in r.json()["warnings"] if w.startswith("Team ml holds 8 H100-80GB GPUs now, 6 above its new "
                                                             "nominal 2.")], r.json()


def test_moving_a_team_that_holds_above_its_nominal_is_said_in_the_answer(fleet, admin, ml_runs_16) -> None:
    Quota.objects.filter(pk=ml_runs_16.pk).update(nominal_gpus=6)
    f.make_cohort("other")

    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"cohort": "other"}, format="json")

    assert r.status_code == 200, r.json()
    [said] = r.json()["warnings"]
    assert said.startswith("Team ml holds 16 H100-80GB GPUs, 10 above its nominal 6. Its running jobs keep them "
                           "(moving a team stops nothing).")
    assert "The teams of cohort all (vision) may reclaim them by preemption only while cohort other holds" in said
    assert "In cohort other no other team has H100-80GB quota to lend" in said


def test_a_team_change_that_moves_no_cohort_says_nothing(fleet, admin, ml_runs_16) -> None:
    Quota.objects.filter(pk=ml_runs_16.pk).update(nominal_gpus=6)

    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"description": "moved nowhere"}, format="json")

    assert r.status_code == 200 and r.json()["warnings"] == [], r.json()
    assert admin.get(f"{J}/teams/{fleet.ml.pk}/").json()["warnings"] == []


def test_a_quota_moved_to_another_team_answers_with_that_teams_holdings(fleet, admin) -> None:
    now = timezone.now()
    quota = f.make_quota(fleet.vision, fleet.a100, 4)
    hold(running_job(fleet.ml, gpus=8, started_at=now), [(fleet.nodes[4], 8)], now)

    r = admin.patch(f"{J}/quotas/{quota.pk}/", {"team": "ml"}, format="json")

    assert r.status_code == 200, r.json()
    assert (r.json()["team"], r.json()["held_gpus"], r.json()["borrowed_gpus"]) == ("ml", 8, 4)
    [said] = [w for w in r.json()["warnings"] if "holds" in w]
    assert said.startswith("Team ml holds 8 A100-40GB GPUs now, 4 above its nominal 4.")
