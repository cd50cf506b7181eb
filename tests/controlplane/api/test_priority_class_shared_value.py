"""Two priority classes with one value: allowed, and said.

Found by a fleet admin's review (6 Dec): `PATCH priority-classes/{research}/ {"value": 1000}`
(production's value, meant 1001) answered 200 and said nothing; from then on no research job
preempted a production job nor the reverse, and their waiting jobs were no longer ordered by
class (scheduler_core/preemption.py preempts only a strictly lower value; the queue orders by
value plus waiting). Kubernetes and Slurm allow equal priorities, and classes that differ only
in runtime limits or grace are a real use, so it is not refused: every answer about the class
names the classes it shares its value with and says what that does."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_value_shared_with_another_class_is_taken_and_said(fleet, admin) -> None:
    r = admin.patch(f"{J}/priority-classes/{fleet.research.pk}/", {"value": 1000}, format="json")

    assert r.status_code == 200, r.json()
    assert r.json()["same_value_as"] == ["production"]
    assert r.json()["warnings"] == [
        "Priority class research has the same value (1000) as production: no job of either preempts another's for "
        "priority (a team reclaiming lent quota still may), and their waiting jobs are ordered by fair share and how "
        "long they have waited, not by class. Give it another value if it should rank above or below."]
    listed = {c["name"]: c["same_value_as"] for c in admin.get(f"{J}/priority-classes/").json()["results"]}
    assert listed["production"] == ["research"]


def test_a_new_class_with_a_taken_value_is_created_and_said(fleet, admin) -> None:
    r = admin.post(f"{J}/priority-classes/", {"name": "research-long", "value": 100}, format="json")

    assert r.status_code == 201, r.json()
    assert r.json()["same_value_as"] == ["research"] and len(r.json()["warnings"]) == 1


def test_a_value_of_its_own_says_nothing(fleet, admin) -> None:
    r = admin.patch(f"{J}/priority-classes/{fleet.research.pk}/", {"value": 999}, format="json")

    assert r.status_code == 200 and r.json()["same_value_as"] == [] and r.json()["warnings"] == []


def test_the_list_reads_the_values_once_however_many_classes(fleet, admin) -> None:
    with CaptureQueriesContext(connection) as few:
        admin.get(f"{J}/priority-classes/")
    for n in range(10):
        f.make_priority_class(f"tier-{n}", 10 * n)
    with CaptureQueriesContext(connection) as many:
        r = admin.get(f"{J}/priority-classes/")
    assert r.json()["count"] == 12
    assert len(many) == len(few)
