"""A project with jobs stays its team's: `PATCH projects/{id}/ {"team": …}` is a 400 on `team`
naming the jobs and what to do instead; a project without jobs moves.

Found on the finance walk (5 Dec), on the demo: `PATCH projects/2/ {"team": "language"}` moved
vision's project segmentation to language, with vision's running jobs in it: each of those
jobs was then vision's in a project of language (the job says team vision, its project
language/segmentation), and finance reading the project found its past cost under
vision/segmentation and its future under language/segmentation, one project id in two teams."""

from __future__ import annotations

import pytest

from controlplane.models import Project
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_project_with_jobs_keeps_its_team(fleet, admin) -> None:
    f.make_job(fleet.ml, project=fleet.llm)
    f.make_job(fleet.ml, project=fleet.llm)

    r = admin.patch(f"{J}/projects/{fleet.llm.pk}/", {"team": "vision"}, format="json")

    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {"team": [
        "project llm has 2 jobs of team ml, and they stay ml's: to run vision's work under this name, "
        "create a project llm in team vision"]}
    assert Project.objects.get(pk=fleet.llm.pk).team == fleet.ml
    # its name and description still change
    assert admin.patch(f"{J}/projects/{fleet.llm.pk}/", {"description": "LLM"}, format="json").status_code == 200


def test_a_project_without_jobs_moves(fleet, admin) -> None:
    r = admin.patch(f"{J}/projects/{fleet.llm.pk}/", {"team": "vision"}, format="json")

    assert r.status_code == 200, r.json()
    assert Project.objects.get(pk=fleet.llm.pk).team == fleet.vision
