"""Deleting a priority class a team is limited to never widens what the team may submit in.

Found by a fleet admin's review (6 Dec): team t-one was allowed the class `dup` only
(`Team.priority_classes`); `DELETE priority-classes/{dup}/` answered 200 and removed the class
from the team's list (the many-to-many rows go with the class), leaving the list empty, which
means *every class*: the team's members could then submit in `production` (never preempted,
preempting everything below), the escalation the list exists to prevent (docs/api.md, *Priority
classes are an admin's to give*). Neither the answer nor the audit trail said so: the team's
event named only its default class, and its "after" still listed `dup`. A team that keeps other
classes lost `dup` with no event at all.

Now the deletion is refused (409 in the API, protected on the admin's confirmation page) while
it is the last class a team may use, naming the team and what to do; a team that keeps other
classes is told and recorded with its list before and after.
"""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane.models import Event, PriorityClass, Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_the_last_class_a_team_may_use_is_not_deleted(fleet, admin) -> None:
    only = f.make_priority_class("dup", 500)
    fleet.ml.priority_classes.set([only])

    r = admin.delete(f"{J}/priority-classes/{only.pk}/")

    assert r.status_code == 409, r.content
    detail = r.json()["detail"]
    assert "Team ml may submit only in dup" in detail, detail
    assert "every class" in detail and "priority_classes" in detail, detail
    assert PriorityClass.objects.filter(pk=only.pk).exists()
    assert list(Team.objects.get(name="ml").priority_classes.values_list("name", flat=True)) == ["dup"]
    assert not Event.objects.filter(actor="user:root").exists()  # nothing written


def test_a_team_keeping_other_classes_is_told_and_recorded(fleet, admin) -> None:
    batch = f.make_priority_class("batch", 10)
    fleet.ml.priority_classes.set([batch, fleet.research])

    r = admin.delete(f"{J}/priority-classes/{batch.pk}/")

    assert r.status_code == 200, r.content
    assert r.json()["consequences"] == ["Team ml may no longer submit in batch; it keeps research"]
    assert list(Team.objects.get(name="ml").priority_classes.values_list("name", flat=True)) == ["research"]
    [event] = Event.objects.filter(reason="TeamChanged", team=fleet.ml)
    assert event.data["before"]["priority_classes"] == ["batch", "research"]
    assert event.data["after"]["priority_classes"] == ["research"]
    assert "priority classes batch, research → research (class batch deleted)" in event.message, event.message


def test_a_default_class_deleted_is_recorded_with_the_list_as_it_becomes(fleet, admin) -> None:
    batch = f.make_priority_class("batch", 10)
    fleet.ml.priority_classes.set([batch, fleet.research])
    fleet.ml.default_priority_class = batch
    fleet.ml.save()

    r = admin.delete(f"{J}/priority-classes/{batch.pk}/")

    assert r.status_code == 200, r.content
    [event] = Event.objects.filter(reason="TeamChanged", team=fleet.ml)
    assert event.data["after"]["default_priority_class"] is None
    assert event.data["after"]["priority_classes"] == ["research"], event.data  # it said ["batch", "research"]


def test_the_admin_refuses_it_on_the_confirmation_page(fleet) -> None:
    only = f.make_priority_class("dup", 500)
    fleet.ml.priority_classes.set([only])
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")

    page = " ".join(browser.get(f"/admin/controlplane/priorityclass/{only.pk}/delete/").content.decode().split())
    assert "Team ml may submit only in dup" in page, page
    r = browser.post(f"/admin/controlplane/priorityclass/{only.pk}/delete/", {"post": "yes"})

    assert PriorityClass.objects.filter(pk=only.pk).exists(), r.status_code
    bulk = browser.post("/admin/controlplane/priorityclass/",
                        {"action": "delete_selected", "_selected_action": [only.pk], "post": "yes"})
    assert bulk.status_code in (200, 302)
    assert PriorityClass.objects.filter(pk=only.pk).exists()
    assert not Event.objects.filter(actor="user:boss").exists()
