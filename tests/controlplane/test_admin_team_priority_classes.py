"""An admin chooses a team's priority classes on its page (Team.priority_classes: the classes its
members may submit in, none ticked: every class). The change is a config.changed event as the
team's other settings are, and a default class the team may not use is refused on the field."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import EventKind
from controlplane.models import Event
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_an_admin_ticks_a_teams_classes_and_the_change_is_recorded(fleet, browser) -> None:
    path = f"/admin/controlplane/team/{fleet.ml.pk}/change/"
    page = browser.get(path)
    assert 'type="checkbox" name="priority_classes"' in page.content.decode()
    form = f.opened_admin_form(browser, path)

    r = browser.post(path, {**form, "priority_classes": [fleet.research.pk]})

    assert r.status_code == 302, r.context["errors"] if r.context else r.content[:500]
    assert list(fleet.ml.priority_classes.values_list("name", flat=True)) == ["research"]
    event = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="TeamChanged").latest("id")
    assert event.message == "Team ml changed: priority classes any → research"
    assert event.actor == "user:boss"
    assert event.data["after"]["priority_classes"] == ["research"] and event.data["before"]["priority_classes"] == []


def test_a_default_class_the_team_may_not_use_is_refused_on_the_field(fleet, browser) -> None:
    path = f"/admin/controlplane/team/{fleet.ml.pk}/change/"
    form = f.opened_admin_form(browser, path)

    r = browser.post(path, {**form, "priority_classes": [fleet.production.pk]})

    assert r.status_code == 200
    assert r.context["adminform"].form.errors == {"default_priority_class": [
        "the team's default class research is not among the classes it may use (production): choose one of "
        "those, or tick research too"]}
    assert not fleet.ml.priority_classes.exists()
    assert not Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="TeamChanged").exists()


def test_the_class_boxes_are_not_told_to_hold_down_control(fleet, browser) -> None:
    """The classes are ticked one by one: Django's hint for a multiple-select list ("Hold down
    Control, or Command on a Mac, to select more than one") would tell the admin to do something
    the checkboxes do not need."""
    page = browser.get(f"/admin/controlplane/team/{fleet.ml.pk}/change/").content.decode()

    assert 'type="checkbox" name="priority_classes"' in page
    assert "Hold down" not in page
    assert "none chosen: every class" in page
