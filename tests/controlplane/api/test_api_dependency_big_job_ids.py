"""A job's id is a bigint (every list filter and GET jobs/{id}/ take ids up to 2**63 - 1), but a
dependency's `job` was bounded as a 32-bit integer: `-d afterok:2147483648` said "Ensure this
value is less than or equal to 2147483647." (found trying a job id that does not exist), and a
job whose id had passed 2**31 - 1 could not be waited on at all."""

from __future__ import annotations

import pytest

from controlplane.models import Job, JobDependency
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"


def test_an_id_past_two_to_the_31_is_no_job_you_can_see(fleet, alice) -> None:
    r = alice.post(JOBS, {"name": "eval", "gpus": 1, "dependencies": "afterok:2147483648"}, format="json")

    assert r.status_code == 400, r.content
    assert r.json()["errors"] == {"dependencies.0.job": ["no job 2147483648 you can see"]}
    assert not Job.objects.exists()


def test_an_id_beyond_any_bigint_is_refused_on_the_item(fleet, alice) -> None:
    r = alice.post(JOBS, {"name": "eval", "gpus": 1, "dependencies": [{"job": 2**63}]}, format="json")

    assert r.status_code == 400, r.content
    assert list(r.json()["errors"]) == ["dependencies.0.job"]


def test_a_job_with_a_bigint_id_can_be_waited_on_at_submit_and_by_a_change(fleet, alice) -> None:
    upstream = f.make_job(fleet.ml, id=2**31 + 7, name="preprocess")

    r = alice.post(JOBS, {"name": "eval", "gpus": 1, "dependencies": f"afterok:{upstream.pk}"}, format="json")

    assert r.status_code == 201, r.content
    assert [d["job"] for d in r.json()["dependencies"]] == [upstream.pk]
    other = alice.post(JOBS, {"name": "later", "gpus": 1}, format="json").json()["id"]
    changed = alice.patch(f"{JOBS}{other}/", {"dependencies": f"afterany:{upstream.pk}"}, format="json")
    assert changed.status_code == 200, changed.content
    assert set(JobDependency.objects.values_list("upstream_id", flat=True)) == {upstream.pk}
