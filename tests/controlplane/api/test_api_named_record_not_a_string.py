"""A related record is named by a string: a number with a fraction, true/false, a list or an
object in its place is a 400 on the field saying so. They fell to DRF's own words: "Object with
name=1e-320 does not exist." (a Python class's lookup, where every other name that names nothing
says "no priority class named …"), "Invalid value.", or `true` looked up as a class named 'True'
(found by an exploratory run of odd values over every write body's fields)."""

from __future__ import annotations

import json

import pytest

from controlplane.models import Node, Quota, Team

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", [1e-320, 1.5, True, False, [], ["research"], {"name": "research"}],
                         ids=["tiny-float", "float", "true", "false", "empty-list", "list", "object"])
@pytest.mark.parametrize(("path", "body", "field", "model"), [
    ("teams/", {"name": "newteam"}, "default_priority_class", Team),
    ("teams/", {"name": "newteam"}, "cohort", Team),
    ("quotas/", {"gpu_type": "A100-40GB", "nominal_gpus": 4}, "team", Quota),
    ("nodes/", {"name": "n-new", "gpu_count": 8, "cpus": 64, "memory_gb": 512}, "gpu_type", Node),
], ids=["team-class", "team-cohort", "quota-team", "node-gpu-type"])
def test_a_name_that_is_no_string_is_a_400_saying_so(admin, path, body, field, model, value) -> None:
    before = model.objects.count()

    r = admin.post(f"/api/v1/{path}", data=json.dumps({**body, field: value}), content_type="application/json")

    assert r.status_code == 400, r.content[:300]
    assert [m for m in r.json()["errors"][field] if "a name is a string" in m], r.json()
    assert model.objects.count() == before


# A list of names given as an object: DRF's ManyRelatedField iterates any iterable, so
# `{"priority_classes": {"research": 1, "batch": 0}}` gave the team both classes, batch included
# where its 0 may have meant "not batch". An object is a 400 on the field, as a list field's is.
def test_a_list_of_names_given_as_an_object_is_refused_and_writes_nothing(admin) -> None:
    r = admin.post("/api/v1/teams/", {"name": "objects", "priority_classes": {"research": 1, "production": 0}},
                   format="json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert "a list" in r.json()["errors"]["priority_classes"][0], r.json()
    assert not Team.objects.filter(name="objects").exists()
