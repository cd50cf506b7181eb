"""A submit, or a change of a waiting job, naming a team, project or priority class that an
admin deletes at that moment (two PostgreSQL connections, real row locks: the deletion holds the
row when the job's insert or update comes to refer to it, and commits while it waits).

Found by the concurrency audit (4 Dec): the request's checks had seen the record, the database
then refused the job's foreign key, and the answer was a 409 quoting it ("The database refused
the change: insert or update on table \\"controlplane_job\\" violates foreign key constraint
\\"controlplane_job_team_id_…\\""), naming no field. Now the request is judged again and
refused on the field, in the words a request sent afterwards gets; nothing is written."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from controlplane.models import Event, Job, PriorityClass, Project, Team
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, build_fleet, client_for
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread

J = "/api/v1"


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Fleet:
    return build_fleet()


def _deleted_while(record: Any, request: Any) -> Any:
    """Run `request` on its own connection while `record`'s row is held for its deletion, which
    commits once the request waits for it; the request's answer."""
    model = type(record)
    with transaction.atomic():
        model.objects.select_for_update().get(pk=record.pk)
        running, out = in_thread(request)
        assert blocked_on_a_lock()
        model.objects.filter(pk=record.pk).delete()
    running.join(20)
    assert "error" not in out, out
    return out["result"]


@pytest.mark.parametrize("field", ["team", "project", "priority_class"])
def test_a_submit_naming_a_record_deleted_meanwhile_is_refused_on_that_field(committed_fleet: Fleet,
                                                                             field: str) -> None:
    fleet = committed_fleet
    body: dict[str, Any] = {"name": "late", "gpus": 1, "gpu_type": "H100-80GB"}
    record: Any
    if field == "team":
        record = f.make_team("sunset", default_priority_class=fleet.research)
        f.make_quota(record, fleet.h100, 8)
        body["team"], role = "sunset", "admin"
    elif field == "project":
        record, role = f.make_project(fleet.ml, "sunset"), "owner"
        body["project"] = "sunset"
    else:
        record, role = f.make_priority_class("sunset", 50), "owner"
        body["priority_class"] = "sunset"
    submitter = client_for(fleet, role)

    answer = _deleted_while(record, lambda: submitter.post(f"{J}/jobs/", body, format="json"))

    assert answer.status_code == 400, answer.json()
    assert list(answer.json()["errors"]) == [field], answer.json()
    sequential = submitter.post(f"{J}/jobs/", body, format="json")
    assert answer.json()["errors"] == sequential.json()["errors"]
    assert not Job.objects.filter(name="late").exists() and not Event.objects.filter(job__name="late").exists()


@pytest.mark.parametrize("field", ["project", "priority_class"])
def test_a_change_naming_a_record_deleted_meanwhile_is_refused_on_that_field(committed_fleet: Fleet,
                                                                             field: str) -> None:
    fleet = committed_fleet
    job = f.make_job(fleet.ml, fleet.research, gpus=1, submitter=fleet.users["owner"])
    record: Project | PriorityClass = (f.make_project(fleet.ml, "sunset") if field == "project"
                                       else f.make_priority_class("sunset", 50))
    alice = client_for(fleet, "owner")

    answer = _deleted_while(record, lambda: alice.patch(f"{J}/jobs/{job.pk}/", {field: "sunset"}, format="json"))

    assert answer.status_code == 400, answer.json()
    assert list(answer.json()["errors"]) == [field], answer.json()
    sequential = alice.patch(f"{J}/jobs/{job.pk}/", {field: "sunset"}, format="json")
    assert answer.json()["errors"] == sequential.json()["errors"]
    job.refresh_from_db()
    assert (job.project_id, job.priority_class_id) == (None, fleet.research.pk)
    assert Team.objects.filter(pk=fleet.ml.pk).exists()
