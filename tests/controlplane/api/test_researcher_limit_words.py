"""A runtime limit beyond the class's maximum was refused in seconds only ("720000 s is beyond the
maximum of priority class 'research' (604800 s)"), while the submit form asks for hours and
`qm --time` takes 8d: a researcher had to divide by 3600 to see by how much. The refusal now
says both in hours too, and still names runtime_limit_s."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.models import Job
from tests.controlplane.fleet_fixture import Fleet


@pytest.mark.django_db
def test_a_limit_beyond_the_class_maximum_is_said_in_hours_too(fleet: Fleet, alice: APIClient) -> None:
    response = alice.post("/api/v1/jobs/", {"name": "long", "gpus": 1, "runtime_limit_s": 720000}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"]["runtime_limit_s"] == [
        "720000 s (200.0 h) is beyond the maximum of priority class 'research' (604800 s), which is 168.0 h"]
    assert not Job.objects.exists()
