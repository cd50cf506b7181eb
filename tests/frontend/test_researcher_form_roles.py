"""The jobs page's submit form and a heterogeneous gang, without a browser: the role row the
form clones offers exactly the fields the API takes for a role (none it would refuse as unknown,
none of its left out), with the fleet's GPU types; and for each of those fields the form's live
check names a bad value under the same key (`roles.1.count`) with the same words as the API's
400, so the form can show it next to that role's field."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from controlplane.api.serializers import GangRoleSerializer
from controlplane.models import GpuType, Job

pytestmark = pytest.mark.django_db

LEARNER = {"name": "learner", "count": 1, "gpus_per_member": 8}


def role_template(page: str) -> str:
    found = re.search(r'<template id="role-row-template">(.*?)</template>', page, flags=re.S)
    assert found is not None, "the jobs page has no role row template"
    return found.group(1)


def test_the_role_row_offers_the_apis_role_fields_and_the_fleets_gpu_types(client_for) -> None:
    row = role_template(client_for("alice").get("/jobs/").content.decode())

    offered = re.findall(r'data-role-field="([a-z_]+)"', row)
    # gpu_type is the API's shorthand for a one-type gpu_types: the form's list says both.
    accepted = set(GangRoleSerializer().fields) - {"gpu_type"}
    assert sorted(offered) == sorted(accepted)
    assert re.findall(r'<option value="([^"]+)"', row) == list(GpuType.objects.order_by("name")
                                                               .values_list("name", flat=True))
    # Each field has its error slot, named as the API names the field.
    assert sorted(re.findall(r'data-role-error="([a-z_]+)"', row)) == sorted(accepted)


def test_finance_has_no_submit_form_and_so_no_role_row(client_for) -> None:
    assert '<template id="role-row-template">' not in client_for("finn").get("/jobs/").content.decode()


BAD_ROLES = [
    pytest.param({"name": "", "count": 4, "gpus_per_member": 1}, "roles.1.name", id="blank-name"),
    pytest.param({"name": "rollout", "count": 0, "gpus_per_member": 1}, "roles.1.count", id="no-members"),
    pytest.param({"name": "rollout", "gpus_per_member": 1}, "roles.1.count", id="members-left-out"),
    pytest.param({"name": "rollout", "count": 4, "gpus_per_member": 0}, "roles.1.gpus_per_member", id="no-gpus"),
    pytest.param({"name": "rollout", "count": 4, "gpus_per_member": "two"}, "roles.1.gpus_per_member",
                 id="gpus-not-a-number"),
    pytest.param({"name": "rollout", "count": 4, "gpus_per_member": 1, "min_gpu_memory_gb": -1},
                 "roles.1.min_gpu_memory_gb", id="negative-memory"),
    pytest.param({"name": "rollout", "count": 4, "gpus_per_member": 1, "cpus_per_gpu": -2},
                 "roles.1.cpus_per_gpu", id="negative-cpus"),
    pytest.param({"name": "rollout", "count": 4, "gpus_per_member": 1, "memory_gb_per_gpu": "lots"},
                 "roles.1.memory_gb_per_gpu", id="memory-not-a-number"),
]


@pytest.mark.parametrize("second, field", BAD_ROLES)
def test_the_live_check_names_a_bad_role_field_in_the_apis_words(client_for, second: dict[str, Any], field: str) -> None:
    body = {"name": "gang", "gpus": 12, "roles": [LEARNER, second]}
    client = client_for("alice")

    verdict = client.post("/ui/jobs/check.json", data=json.dumps(body), content_type="application/json")
    refused = client.post("/api/v1/jobs/", data=json.dumps(body), content_type="application/json")

    assert verdict.status_code == 200 and refused.status_code == 400
    assert verdict.json()["runs"] is False
    assert list(verdict.json()["errors"]) == [field]
    assert verdict.json()["errors"][field] == refused.json()["errors"][field]
    assert field in verdict.json()["detail"]
    assert not Job.objects.exists()


def test_the_live_check_names_two_roles_of_one_name_on_roles_as_the_api_does(client_for) -> None:
    body = {"name": "gang", "gpus": 9, "roles": [LEARNER, {"name": "learner", "count": 1, "gpus_per_member": 1}]}
    client = client_for("alice")

    verdict = client.post("/ui/jobs/check.json", data=json.dumps(body), content_type="application/json").json()
    refused = client.post("/api/v1/jobs/", data=json.dumps(body), content_type="application/json").json()

    assert verdict["errors"]["roles"] == refused["errors"]["roles"]
    assert "'learner' given twice" in verdict["errors"]["roles"][0]
