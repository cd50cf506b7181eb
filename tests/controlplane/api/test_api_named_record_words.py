"""A name that is no record is refused in words, naming what there is when those names are no
secret. Found on the demo (2 Dec): `PATCH teams/1/ {"cohort": "nope"}` answered "Object with
name=nope does not exist.", DRF's words, on `cohort`; now "no cohort named 'nope': cohorts are
all". A team's name is not listed (a member may not know the other teams)."""

from __future__ import annotations

import pytest

from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_an_unknown_cohort_class_or_gpu_type_is_refused_with_the_names_there_are(fleet, admin) -> None:
    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"cohort": "nope"}, format="json")
    assert r.status_code == 400 and r.json()["errors"] == {"cohort": ["no cohort named 'nope': cohorts are all"]}

    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"default_priority_class": "urgent"}, format="json")
    assert r.json()["errors"] == {"default_priority_class": [
        "no priority class named 'urgent': priority classes are production, research"]}

    r = admin.patch(f"{J}/nodes/{fleet.nodes[1].pk}/", {"gpu_type": "B200"}, format="json")
    assert r.json()["errors"] == {"gpu_type": ["no GPU type named 'B200': GPU types are A100-40GB, H100-80GB"]}


def test_a_team_is_not_listed_and_a_wrong_type_keeps_its_words(fleet, admin) -> None:
    f.make_team("secret-team")

    r = admin.post(f"{J}/quotas/", {"team": "nope", "gpu_type": "H100-80GB", "nominal_gpus": 1}, format="json")
    assert r.status_code == 400 and r.json()["errors"]["team"] == ["no team named 'nope'"]

    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"cohort": ["all"]}, format="json")
    assert r.status_code == 400 and "cohort" in r.json()["errors"]
    assert "no cohort named" not in r.json()["errors"]["cohort"][0]
