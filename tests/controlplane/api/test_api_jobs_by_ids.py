"""`GET jobs/?id=48,53`: those jobs only, the ones the reader may read; how `qm cancel 48 53
99999` reads every job it names in one request before cancelling any. An id that is not a whole
number from 1 up is a 400 naming `id`."""

from __future__ import annotations

import pytest

from controlplane.choices import JobState
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_the_ids_given_list_those_jobs_of_any_state_the_reader_may_read(fleet, alice) -> None:
    waiting = f.make_job(fleet.ml, name="w")
    ended = f.make_job(fleet.ml, name="e", state=JobState.FAILED)
    f.make_job(fleet.ml, name="other")
    theirs = f.make_job(fleet.vision, name="t")

    r = alice.get(f"{J}/jobs/", {"id": f"{waiting.pk},{ended.pk},{theirs.pk},{theirs.pk + 1000}"})

    assert r.status_code == 200, r.content
    assert sorted(job["id"] for job in r.json()["results"]) == [waiting.pk, ended.pk]


@pytest.mark.parametrize("value", ["1.5", "abc", "0", "4,,5", str(2**63)])
def test_an_id_that_is_no_id_is_a_400_naming_it(fleet, alice, value) -> None:
    r = alice.get(f"{J}/jobs/", {"id": value})

    assert r.status_code == 400, r.content
    assert list(r.json()["errors"]) == ["id"]
