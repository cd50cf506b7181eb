"""A quota read through the API says what its team holds of that GPU type now and how much of
it is borrowed beyond the nominal, with the team's cohort: what a researcher asks before
submitting ("how much can my team still start?") and what `qm quotas` prints. Before, the API
gave only the configured numbers."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_member_reads_its_teams_quota_with_what_it_holds_and_borrows(fleet) -> None:
    now = timezone.now()
    for node in fleet.nodes[0:3]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(node, 8)], now)

    r = client_for(fleet, "owner").get(f"{J}/quotas/")

    assert r.status_code == 200
    [ml] = [q for q in r.json()["results"] if q["team"] == "ml"]
    assert (ml["gpu_type"], ml["nominal_gpus"], ml["held_gpus"], ml["borrowed_gpus"], ml["cohort"]) == \
        ("H100-80GB", 16, 24, 8, "all")


def test_a_team_within_its_quota_borrows_nothing(fleet) -> None:
    now = timezone.now()
    hold(running_job(fleet.vision, gpus=8, started_at=now), [(fleet.nodes[1], 8)], now)
    results = client_for(fleet, "admin").get(f"{J}/quotas/").json()["results"]
    figures = {q["team"]: (q["held_gpus"], q["borrowed_gpus"]) for q in results}
    assert figures == {"ml": (0, 0), "vision": (8, 0)}


def test_the_quota_list_counts_holdings_in_the_same_queries_however_many_quotas(fleet) -> None:
    admin = client_for(fleet, "admin")
    admin.get(f"{J}/quotas/")
    with CaptureQueriesContext(connection) as two:
        admin.get(f"{J}/quotas/")
    from tests.controlplane import factories as f
    f.make_quota(fleet.ml, fleet.a100, 8)
    f.make_quota(fleet.vision, fleet.a100, 8)
    with CaptureQueriesContext(connection) as four:
        assert len(admin.get(f"{J}/quotas/").json()["results"]) == 4
    assert len(four) == len(two)


def test_a_changed_quota_answers_with_its_holdings(fleet) -> None:
    now = timezone.now()
    hold(running_job(fleet.ml, gpus=8, started_at=now), [(fleet.nodes[1], 8)], now)
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)
    r = client_for(fleet, "admin").patch(f"{J}/quotas/{quota.pk}/", {"nominal_gpus": 4}, format="json")
    assert r.status_code == 200
    assert (r.json()["held_gpus"], r.json()["borrowed_gpus"]) == (8, 4)


def test_a_quota_says_what_its_team_lends_now_as_the_teams_page_does(fleet) -> None:
    # ml holds 24 on a nominal 16 (borrows 8); vision, idle, lends them. Before, the API had no
    # lent figure while /teams/ and the admin's quota list showed it.
    now = timezone.now()
    for node in fleet.nodes[0:3]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(node, 8)], now)
    results = client_for(fleet, "admin").get(f"{J}/quotas/").json()["results"]
    lent = {q["team"]: q["lent_gpus"] for q in results}
    assert lent == {"ml": 0.0, "vision": 8.0}
    from controlplane.services import quotas
    assert {(q["team"], q["lent_gpus"]) for q in results} == {
        (team, round(quotas.lent_now().get((tid, fleet.h100.pk), 0.0), 1))
        for team, tid in (("ml", fleet.ml.pk), ("vision", fleet.vision.pk))}
