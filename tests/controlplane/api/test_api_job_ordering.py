"""`GET jobs/?ordering=`: the jobs list sorted by what a researcher asks (the queue's order, the
biggest first), where it was newest first only; a field it does not sort by is a 400."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


@pytest.fixture
def jobs(fleet):
    eta = timezone.now() + timedelta(hours=1)
    third = f.make_job(fleet.ml, name="third", gpus=2, queue_position=3, eta=eta)
    first = f.make_job(fleet.ml, name="first", gpus=8, queue_position=1)
    second = f.make_job(fleet.ml, name="second", gpus=4, queue_position=2, priority_class=fleet.production)
    running = f.make_job(fleet.ml, name="running", gpus=16, state=JobState.RUNNING)
    return {"third": third, "first": first, "second": second, "running": running}


def names(response) -> list[str]:
    assert response.status_code == 200, response.json()
    return [job["name"] for job in response.json()["results"]]


def test_ordering_by_queue_position_puts_jobs_without_one_last_both_ways(alice, jobs) -> None:
    assert names(alice.get(J, {"ordering": "queue_position"})) == ["first", "second", "third", "running"]
    assert names(alice.get(J, {"ordering": "-queue_position"})) == ["third", "second", "first", "running"]


def test_ordering_under_a_state_filter_and_by_several_fields(alice, jobs) -> None:
    # `state` makes the query DISTINCT: PostgreSQL must still take the ORDER BY of a joined column.
    pending = {"state": ["pending", "running"], "ordering": "queue_position"}
    assert names(alice.get(J, pending)) == ["first", "second", "third", "running"]
    assert names(alice.get(J, {"ordering": "-gpus"})) == ["running", "first", "second", "third"]
    assert names(alice.get(J, {"ordering": "-priority,gpus"}))[:1] == ["second"]
    assert names(alice.get(J)) == ["running", "second", "first", "third"]  # default: newest first


def test_ordering_pages_do_not_overlap(alice, fleet) -> None:
    for i in range(7):
        f.make_job(fleet.ml, name=f"same-{i}", gpus=1)

    seen = [name for offset in (0, 3, 6) for name in names(alice.get(J, {"ordering": "gpus", "limit": 3,
                                                                          "offset": offset}))]
    assert sorted(seen) == sorted(f"same-{i}" for i in range(7))


@pytest.mark.parametrize("value", ["bogus", "-", "gpus,bogus", "team__name"])
def test_a_field_it_does_not_sort_by_is_a_400_naming_ordering(alice, jobs, value) -> None:
    r = alice.get(J, {"ordering": value})

    assert r.status_code == 400 and list(r.json()["errors"]) == ["ordering"]
