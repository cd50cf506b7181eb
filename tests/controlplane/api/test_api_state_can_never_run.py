"""The `state` filter's "Can never run" (`unschedulable`, the jobs page's checkbox, `qm list -t
unschedulable`) lists the jobs that can never run as asked. Found walking the demo (7 Dec): the
engine never moves a job to the `unschedulable` state; a job it finds can never run stays
`pending`, with `pending_resolvable` false and its reason (`CanNeverRun`: "Can never run under
its quota: ..."). So the filter matched no job at all, and a researcher who ticked "Can never run"
on the jobs page read "0 jobs" above the very job the list showed as Pending · CanNeverRun."""

from __future__ import annotations

import pytest

from controlplane.choices import JobState
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_can_never_run_lists_the_waiting_jobs_the_engine_found_can_never_run(fleet, admin) -> None:
    f.make_job(fleet.ml, name="never", pending_code="CanNeverRun", pending_resolvable=False)
    f.make_job(fleet.ml, name="waits", pending_code="QuotaExceeded")
    f.make_job(fleet.ml, name="runs", state=JobState.RUNNING)
    f.make_job(fleet.ml, name="gave-up", state=JobState.CANCELLED, pending_code="CanNeverRun",
               pending_resolvable=False)

    def names(*states: str) -> list[str]:
        answer = admin.get(f"{J}/jobs/", {"state": list(states)})
        assert answer.status_code == 200, answer.content
        return sorted(j["name"] for j in answer.json()["results"])

    assert names("unschedulable") == ["never"]
    assert names("unschedulable", "running") == ["never", "runs"]
    # It still waits: the pending filter lists it as it always did.
    assert names("pending") == ["never", "waits"]
    assert names("cancelled") == ["gave-up"]


def test_the_jobs_page_can_never_run_box_lists_them(fleet, client) -> None:
    never = f.make_job(fleet.ml, name="never", pending_code="CanNeverRun", pending_resolvable=False)
    f.make_job(fleet.ml, name="waits", pending_code="QuotaExceeded")
    client.force_login(fleet.users["admin"])

    page = client.get("/jobs/", {"state": "unschedulable"})

    assert page.status_code == 200
    assert [job.pk for job in page.context["jobs"]] == [never.pk]
