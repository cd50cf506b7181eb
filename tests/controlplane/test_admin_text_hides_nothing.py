"""The admin's text boxes take text by the API's one rule for it (services/plain_text.py): no
control character, line separator or bidirectional override, said on the field with its code
point and place; a name (a GPU type's) is one line, a description may hold new lines as the
API's may. Nothing is saved. Until 7 Dec the API refused them but the admin's forms saved a team's
description holding an escape sequence, or a GPU type named with U+202E (which shows
"H100-80GB" reversed in every table that prints it)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import GpuType, PriorityClass, Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _change(browser: Any, path: str, **changes: Any) -> Any:
    return browser.post(path, f.opened_admin_form(browser, path) | changes)


def _field_errors(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, "the form was accepted"
    return {name: list(errors) for name, errors in response.context["adminform"].form.errors.items()}


def test_a_team_description_with_an_escape_is_refused_on_its_field(fleet, browser) -> None:  # noqa: ANN001
    before = Team.objects.get(pk=fleet.ml.pk).description
    r = _change(browser, f"/admin/controlplane/team/{fleet.ml.pk}/change/", description="LLM \x1b[31mteam")

    assert _field_errors(r) == {"description": ["contains a control character (U+001B, an escape) at position 5"]}
    assert Team.objects.get(pk=fleet.ml.pk).description == before


def test_a_gpu_type_name_with_a_bidi_override_is_refused_on_its_field(fleet, browser) -> None:  # noqa: ANN001
    r = _change(browser, "/admin/controlplane/gputype/add/", name="\u202eBG08-002B", memory_gb=80)

    errors = _field_errors(r)
    assert list(errors) == ["name"] and "U+202E" in errors["name"][0] and "position 1" in errors["name"][0]
    assert not GpuType.objects.filter(memory_gb=80, name__contains="\u202e").exists()


def test_a_priority_class_description_may_hold_lines_as_the_apis_may(fleet, browser) -> None:  # noqa: ANN001
    r = _change(browser, f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/",
                description="Research runs.\nPreemptible by production.")

    assert r.status_code == 302
    assert PriorityClass.objects.get(pk=fleet.research.pk).description == "Research runs.\nPreemptible by production."


def test_a_project_added_on_its_teams_page_is_refused_a_description_with_a_bell(fleet, browser) -> None:  # noqa: ANN001
    path = f"/admin/controlplane/team/{fleet.ml.pk}/change/"
    form = f.opened_admin_form(browser, path)
    prefix = next(k.removesuffix("-TOTAL_FORMS") for k in form if k.endswith("-TOTAL_FORMS") and "project" in k)
    index = int(form[f"{prefix}-TOTAL_FORMS"])
    form.update({f"{prefix}-TOTAL_FORMS": str(index + 1), f"{prefix}-{index}-name": "ring",
                 f"{prefix}-{index}-description": "ding\x07"})

    r = browser.post(path, form)

    assert r.status_code == 200, "the form was accepted"
    assert "contains a control character (U+0007) at position 5" in r.content.decode()
    assert not fleet.ml.projects.filter(name="ring").exists()
