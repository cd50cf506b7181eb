"""A priority class's runtime limits are lengths a job may run: 0 is none. A job always has a
runtime limit above 0 (models/jobs.Job, job_runtime_limit_positive), and a submit that names
none takes its class's default, so a default of 0 made every such submit of the class a 409
"The database refused the change: CHECK constraint failed: job_runtime_limit_positive", and a
maximum of 0 refused every limit. Found in the demo: research's default set to 0 on the admin's
page was taken ("changed successfully"), and alice's next `qm submit` got that 409.

Now 0 is refused on its field, on the admin's page and in the API, and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import PriorityClass
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db


def _change(browser: Any, path: str, **changes: Any) -> Any:
    return browser.post(path, f.opened_admin_form(browser, path) | changes)


@pytest.mark.parametrize("field", ["default_runtime_limit_s", "max_runtime_limit_s"])
def test_a_runtime_limit_of_zero_is_refused_on_its_field_on_the_admin_page(fleet, browser, field) -> None:
    path = f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/"

    r = _change(browser, path, **({"default_runtime_limit_s": 0} | {field: 0}))

    assert r.status_code == 200, "the form was accepted"
    errors = r.context["adminform"].form.errors
    assert "0 s lets no job run" in " ".join(errors.get(field, [])), errors
    research = PriorityClass.objects.get(pk=fleet.research.pk)
    assert (research.default_runtime_limit_s, research.max_runtime_limit_s) == (4 * 3600, 7 * 86400)
    assert not f.trail().exists()


def test_a_runtime_limit_of_zero_is_a_400_naming_the_field_in_the_api(fleet) -> None:
    admin = client_for(fleet, "admin")

    r = admin.patch(f"/api/v1/priority-classes/{fleet.research.pk}/", {"default_runtime_limit_s": 0}, format="json")

    assert r.status_code == 400, r.content
    assert "0 s lets no job run" in r.json()["errors"]["default_runtime_limit_s"][0]
    assert PriorityClass.objects.get(pk=fleet.research.pk).default_runtime_limit_s == 4 * 3600


def test_a_submit_naming_no_runtime_limit_takes_the_class_default(fleet) -> None:
    alice = client_for(fleet, "owner")
    admin = client_for(fleet, "admin")
    assert admin.patch(f"/api/v1/priority-classes/{fleet.research.pk}/", {"default_runtime_limit_s": 60},
                       format="json").status_code == 200

    r = alice.post("/api/v1/jobs/", {"name": "t", "team": "ml", "priority_class": "research", "gpus": 1,
                                     "gpu_type": "H100-80GB", "command": "true"}, format="json")

    assert r.status_code == 201, r.content
    assert r.json()["runtime_limit_s"] == 60
