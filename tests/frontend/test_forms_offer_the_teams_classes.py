"""The submit form and a job's Change form offer the priority classes the job's team may submit
in (Team.priority_classes; none chosen: every class; admins: every class), each option naming
the teams it is for. They offered every class: a member of vision (research, batch,
best-effort) was shown "production (1000; up to 30.0 days)", which the submit, the check and
PATCH always refuse ("team 'vision' may submit in research, batch, best-effort, not
'production'"). A job whose team was denied its class since keeps it, so its Change form
still offers it."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from controlplane.models import Membership, PriorityClass, Team

pytestmark = pytest.mark.django_db


def _options(html: str, form_id: str) -> dict[str, str]:
    """The priority class options of the form `form_id`: value → its data-teams ("" if none)."""
    form = re.search(rf'<form id="{form_id}".*?</form>', html, flags=re.S)
    assert form is not None, html
    select = re.search(r'<select name="priority_class"[^>]*>(.*?)</select>', form.group(0), flags=re.S)
    assert select is not None, form.group(0)
    return {value: teams for value, teams in
            re.findall(r'<option value="([^"]*)"(?: data-teams="([^"]*)")?', select.group(1)) if value}


def test_the_submit_form_offers_only_the_classes_the_members_team_may_use(client_for) -> None:
    assert set(Team.objects.get(name="vision").priority_classes.values_list("name", flat=True)) == {
        "research", "batch", "best-effort"}

    offered = _options(client_for("alice").get("/jobs/").content.decode(), "submit-job")

    assert set(offered) == {"research", "batch", "best-effort"}
    assert all(teams == "vision" for teams in offered.values()), offered


def test_a_member_of_two_teams_is_offered_each_class_with_the_teams_it_is_for(client_for) -> None:
    serving = Team.objects.get(name="serving")
    assert not serving.priority_classes.exists()  # none chosen: every class
    Membership.objects.create(user=get_user_model().objects.get(username="alice"), team=serving)

    offered = _options(client_for("alice").get("/jobs/").content.decode(), "submit-job")

    assert set(offered) == set(PriorityClass.objects.values_list("name", flat=True))
    assert offered["production"] == "serving"
    assert offered["research"].split() == ["serving", "vision"]


def test_an_admin_is_offered_every_class(client_for) -> None:
    offered = _options(client_for("admin").get("/jobs/").content.decode(), "submit-job")
    assert set(offered) == set(PriorityClass.objects.values_list("name", flat=True))


def test_the_change_form_offers_the_teams_classes_and_the_one_the_job_keeps(client_for, submit_as) -> None:
    job = submit_as("alice", name="held", gpus=1, hold=True)
    client = client_for("alice")

    offered = _options(client.get(f"/jobs/{job.pk}/").content.decode(), "change-job")
    assert set(offered) == {"research", "batch", "best-effort"}

    # denied since: the job keeps its class, and may keep it through a change
    vision = Team.objects.get(name="vision")
    vision.priority_classes.remove(PriorityClass.objects.get(name="research"))
    offered = _options(client.get(f"/jobs/{job.pk}/").content.decode(), "change-job")
    assert set(offered) == {"research", "batch", "best-effort"}
    # the form sends only what changed: its class left as shown, the job keeps it
    answer = client.patch(f"/api/v1/jobs/{job.pk}/", {"name": "kept"}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    job.refresh_from_db()
    assert job.priority_class.name == "research"
    answer = client.patch(f"/api/v1/jobs/{job.pk}/", {"priority_class": "production"},
                          content_type="application/json")
    assert answer.status_code == 400 and "priority_class" in answer.json()["errors"]
