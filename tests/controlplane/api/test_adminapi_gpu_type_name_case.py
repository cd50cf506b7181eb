"""A GPU type's name is unique whatever its case: "h100-80gb" beside "H100-80GB" is refused on
`name`, naming the type there is, in the API and on the admin's page (GpuType.clean), and the
database refuses it too (a unique index on lower(name)).

Found on the admin's walk of the demo (7 Dec): "h100-80gb" was created beside "H100-80GB".
Jobs name their GPU types exactly (a submit's `gpu_types` is matched case-sensitively), so two
types a letter's case apart were a typo hazard: a submit named the wrong one and waited on it."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from controlplane.models import Event, GpuType

pytestmark = pytest.mark.django_db
J = "/api/v1"
TAKEN = ("GPU type H100-80GB (id {pk}) has this name but for its case: jobs name their GPU types exactly, so "
         "two names a letter's case apart would be mistaken for each other; use H100-80GB, or give another name")


@pytest.mark.parametrize("name", ["h100-80gb", "H100-80gb"])
def test_a_name_differing_only_in_case_is_a_400_naming_the_type_there_is(fleet, admin, name) -> None:
    r = admin.post(f"{J}/gpu-types/", {"name": name, "memory_gb": 80}, format="json")

    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {"name": [TAKEN.format(pk=fleet.h100.pk)]}, r.json()
    assert list(GpuType.objects.filter(name__iexact="h100-80gb").values_list("name", flat=True)) == ["H100-80GB"]
    assert not Event.objects.filter(reason="GpuTypeCreated").exists()


def test_a_rename_onto_another_types_name_in_another_case_is_refused(fleet, admin) -> None:
    spare = GpuType.objects.create(name="L4", memory_gb=24)

    r = admin.patch(f"{J}/gpu-types/{spare.pk}/", {"name": "h100-80GB"}, format="json")

    assert r.status_code == 400 and r.json()["errors"] == {"name": [TAKEN.format(pk=fleet.h100.pk)]}, r.json()
    assert GpuType.objects.get(pk=spare.pk).name == "L4"


def test_a_type_keeps_its_own_name_and_may_change_its_case_when_unused(fleet, admin) -> None:
    spare = GpuType.objects.create(name="l4", memory_gb=24)

    same = admin.patch(f"{J}/gpu-types/{fleet.h100.pk}/", {"name": "H100-80GB", "memory_gb": 80}, format="json")
    recased = admin.patch(f"{J}/gpu-types/{spare.pk}/", {"name": "L4"}, format="json")

    assert same.status_code == 200, same.json()
    assert recased.status_code == 200 and recased.json()["name"] == "L4", recased.json()


def test_the_admin_page_refuses_it_on_the_name_in_the_same_words(fleet, browser) -> None:
    r = browser.post("/admin/controlplane/gputype/add/", {"name": "h100-80gb", "memory_gb": 80,
                                                          "relative_throughput": 1})

    assert r.status_code == 200, "the form was accepted"
    assert dict(r.context["adminform"].form.errors) == {"name": [TAKEN.format(pk=fleet.h100.pk)]}
    assert not GpuType.objects.filter(name="h100-80gb").exists()


def test_the_database_refuses_it_too(fleet) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuType.objects.create(name="h100-80gb", memory_gb=80)


def test_a_submit_names_its_type_exactly(fleet, alice) -> None:
    r = alice.post(f"{J}/jobs/", {"name": "x", "gpus": 1, "gpu_type": "h100-80gb"}, format="json")

    assert r.status_code == 400, r.content
    assert "unknown GPU type 'h100-80gb'; known types: " in r.json()["errors"]["gpu_type"][0]
    assert "H100-80GB" in r.json()["errors"]["gpu_type"][0]
