"""A GPU type named in the wrong case (`"gpu_type": "h100-80gb"` where H100-80GB exists) is
still refused, names being matched exactly, but the refusal says which type was meant: "did you
mean H100-80GB?", when exactly one known type matches it ignoring case (since migration 0050 no
two differ only by case). It listed the known types and left the reader to spot the one; a
submit, an array's, a role's and a change say it alike, and so qm and the submit form."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.django_db
J = "/api/v1"
SAID = "unknown GPU type 'h100-80gb'; known types: A100-40GB, H100-80GB; did you mean H100-80GB?"


@pytest.mark.parametrize(("path", "extra"), [(f"{J}/jobs/", {}), (f"{J}/job-arrays/", {"array": "0-1"})])
def test_a_submit_in_the_wrong_case_is_refused_naming_the_type_meant(fleet, alice, path, extra) -> None:
    r = alice.post(path, {"name": "x", "gpus": 1, "gpu_type": "h100-80gb", **extra}, format="json")

    assert r.status_code == 400, r.content
    assert r.json()["errors"] == {"gpu_type": [SAID]}
    assert r.json()["detail"] == f"Invalid request. gpu_type: {SAID}"  # a question, no full stop after it
    assert not Job.objects.exists()  # matched exactly still: nothing submitted


def test_a_role_and_a_change_say_it_too(fleet, alice) -> None:
    role = {"name": "learner", "count": 1, "gpus_per_member": 1, "gpu_types": ["a100-40GB"]}
    gang = alice.post(f"{J}/jobs/", {"name": "g", "gpus": 1, "roles": [role]}, format="json")
    job = alice.post(f"{J}/jobs/", {"name": "x", "gpus": 1}, format="json").json()["id"]
    change = alice.patch(f"{J}/jobs/{job}/", {"gpu_types": ["h100-80gb"]}, format="json")

    assert gang.status_code == 400 and "did you mean A100-40GB?" in str(gang.json()["errors"]), gang.json()
    assert change.status_code == 400 and change.json()["errors"] == {"gpu_types": [SAID]}, change.json()


def test_a_name_matching_no_type_in_any_case_is_offered_none_and_several_say_which(fleet, alice) -> None:
    r = alice.post(f"{J}/jobs/", {"name": "x", "gpus": 1, "gpu_types": ["B200", "h100-80gb"]}, format="json")

    assert r.json()["errors"] == {"gpu_types": [
        "unknown GPU type 'B200', 'h100-80gb'; known types: A100-40GB, H100-80GB; did you mean H100-80GB for "
        "'h100-80gb'?"]}, r.json()
    b200 = alice.post(f"{J}/jobs/", {"name": "x", "gpus": 1, "gpu_type": "B200"}, format="json").json()
    assert b200["errors"]["gpu_type"] == ["unknown GPU type 'B200'; known types: A100-40GB, H100-80GB"]
