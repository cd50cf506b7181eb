"""A runtime limit beyond the class's maximum was refused in seconds only ("720000 s is beyond the
maximum of priority class 'research' (604800 s)"), while the submit form asks for hours and
`qm --time` takes 8d: a researcher had to divide by 3600 to see by how much. The refusal now
says both in hours too, and still names runtime_limit_s. From two days on in days: `qm submit -t
99999d` (8639913600 s, beyond a PostgreSQL integer) was told "Ensure this value is less than or
equal to 2147483647.", and 30d "2592000 s (720.0 h) ... which is 168.0 h"."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.models import Job
from tests.controlplane.fleet_fixture import Fleet


@pytest.mark.django_db
def test_a_limit_beyond_the_class_maximum_is_said_in_days_too(fleet: Fleet, alice: APIClient) -> None:
    response = alice.post("/api/v1/jobs/", {"name": "long", "gpus": 1, "runtime_limit_s": 720000}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"]["runtime_limit_s"] == [
        "720000 s (8 d 8 h) is beyond the maximum of priority class 'research' (604800 s), which is 7 d"]
    assert not Job.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("seconds", "words"), [
    (99999 * 86400, "8639913600 s (99999 d)"), (2**31, "2147483648 s (24855 d 3 h 14 min 8 s)"),
    (30 * 3600, "108000 s (1 d 6 h)"), (2 * 86400, "172800 s (2 d)"),
])
def test_a_limit_beyond_any_integer_is_refused_by_the_class_maximum_in_one_unit_style(fleet: Fleet, alice: APIClient,
                                                                             seconds: int, words: str) -> None:
    fleet.research.max_runtime_limit_s = 86400
    fleet.research.save()
    response = alice.post("/api/v1/jobs/", {"name": "long", "gpus": 1, "runtime_limit_s": seconds}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {"runtime_limit_s": [
        f"{words} is beyond the maximum of priority class 'research' (86400 s), which is 1 d"]}
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_number_no_limit_is_near_is_refused_in_years(fleet: Fleet, alice: APIClient) -> None:
    response = alice.post("/api/v1/jobs/", {"name": "long", "gpus": 1, "runtime_limit_s": 10**13}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {"runtime_limit_s": [
        "more than any runtime limit (at most 31,709 years); each priority class allows at most its maximum runtime "
        "limit"]}


@pytest.mark.django_db
def test_a_waiting_jobs_change_is_refused_in_the_same_words(fleet: Fleet, alice: APIClient) -> None:
    job = alice.post("/api/v1/jobs/", {"name": "long", "gpus": 1}, format="json").json()
    response = alice.patch(f"/api/v1/jobs/{job['id']}/", {"runtime_limit_s": 99999 * 86400}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"]["runtime_limit_s"] == [
        "8639913600 s (99999 d) is beyond the maximum of priority class 'research' (604800 s), which is 7 d"]
    assert Job.objects.get().runtime_limit_s == 4 * 3600
