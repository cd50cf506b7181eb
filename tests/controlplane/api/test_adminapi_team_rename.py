"""A team that has jobs keeps its name, through the API and the admin UI; one with none yet is
renamed, and the rename recorded.

Found by a fleet admin's review (6 Dec): `PATCH teams/{ml}/ {"name": "ml-research"}` answered
200 for a team with jobs. Its rows point at it by id, so showback and the CSVs read the new name
for all of its history; but the fleet's samples name it (`pending_by_team_priority`,
`dominant_share_by_team`): the teams page drew "ml" and "ml-research" as two lines, the old one
in no team's colour, the overview's queue depth for ml-research lost every cycle before the
rename, and every script submitting with `qm submit --team ml` was refused from then on. Slurm
accounts and Kueue queues keep their names alike (as a GPU type in use keeps its own,
test_adminapi_gpu_type_rename.py).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Team
from controlplane.services import accounting, showback
from controlplane.services.access import Access
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, minutes, node

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_team_with_jobs_keeps_its_name(fleet, admin) -> None:
    f.make_job(fleet.ml, state=JobState.SUCCEEDED)
    f.make_job(fleet.ml)

    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"name": "ml-research"}, format="json")

    assert r.status_code == 400, r.json()
    assert r.json()["errors"]["name"] == [
        "team ml has 2 jobs, and the fleet's charts and submitters (qm submit --team ml) name it: renamed, its "
        "charts would split in two and those submits be refused. A team keeps its name once it has jobs; to show "
        "another name, put it in the description"]
    assert Team.objects.get(pk=fleet.ml.pk).name == "ml"
    assert not Event.objects.filter(reason="TeamChanged").exists()
    # its other fields change as before
    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"description": "ML research (was: ml)"}, format="json")
    assert r.status_code == 200, r.json()


def test_a_team_without_jobs_is_renamed_and_the_rename_recorded(fleet, admin) -> None:
    team = f.make_team("m1")  # the typo
    f.make_quota(team, fleet.h100, 4)

    r = admin.patch(f"{J}/teams/{team.pk}/", {"name": "ml-vision"}, format="json")

    assert r.status_code == 200, r.json()
    [event] = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="TeamChanged", team=team)
    assert event.message == "Team m1 changed: name m1 → ml-vision"
    assert admin.get(f"{J}/quotas/?team=ml-vision").json()["count"] == 1


def test_the_admin_form_refuses_it_on_the_name(fleet) -> None:
    f.make_job(fleet.vision)
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")
    path = f"/admin/controlplane/team/{fleet.vision.pk}/change/"
    form = f.opened_admin_form(browser, path)
    form["name"] = "sight"

    r = browser.post(path, form)

    assert r.status_code == 200  # the form again, with the error
    errors = r.context["adminform"].form.errors
    assert errors["name"][0].startswith("team vision has 1 job,"), errors
    assert Team.objects.get(pk=fleet.vision.pk).name == "vision"


def test_a_renamed_teams_idle_history_reads_its_new_name_alone() -> None:
    """What a team with no jobs may have: idle reserved quota rows, by id; showback and its CSV
    name the team as it is named now, for all of it."""
    gpu = h100()
    node(gpu)
    team = f.make_team("m1")
    f.make_quota(team, gpu, 8)
    for t in range(1, 13):
        accounting.roll_up(T0 + timedelta(seconds=15 * t))
    team.name = "ml-vision"
    team.full_clean()
    team.save()
    for t in range(13, 17):
        accounting.roll_up(T0 + timedelta(seconds=15 * t))

    now = T0 + minutes(4)
    report = showback.showback(showback.Window(T0, now, "4m"), "team",
                               Access(is_admin=False, is_finance=True, team_ids=frozenset()), now)
    csv = showback.showback_csv(report)
    assert [e.name for e in report.entries if e.name != showback.IDLE] == ["ml-vision"]
    assert "ml-vision" in csv and "m1" not in csv
