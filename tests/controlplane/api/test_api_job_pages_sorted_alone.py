"""A page of the jobs list (the API's and the jobs page) is sorted on the jobs table alone, its
rows then read with their team, project, submitter, class, place and holder for the page only
(services/job_pages.py). Read in one query, PostgreSQL joined every job of the list to those
six tables before sorting them whenever the order was not an index's: 300-520 ms for a page of
50 of 107,000 jobs by gpus, name, started_at or finished_at, 84-140 ms now
(bench/scale_audit.py --side-by-side)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1"
RELATED = ('"controlplane_team"', '"controlplane_project"', '"auth_user"', '"controlplane_pendingplace"')


def _sorted_reads(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return [q["sql"] for q in queries.captured_queries
            if 'FROM "controlplane_job"' in q["sql"] and "ORDER BY" in q["sql"] and "LIMIT" in q["sql"]]


@pytest.mark.parametrize("ordering", ["-gpus", "name", "-started_at", "priority", "-elapsed"])
def test_a_page_of_jobs_is_sorted_without_their_related_rows(fleet, ordering) -> None:
    for i, gpus in enumerate([3, 8, 1, 5, 2, 7]):
        f.make_job(fleet.ml if i % 2 else fleet.vision, gpus=gpus, name=f"j{i}")
    admin = client_for(fleet, "admin")

    sorted_reads = _sorted_reads(admin, f"{J}/jobs/?ordering={ordering}&limit=4")

    assert len(sorted_reads) == 1
    assert not [table for table in RELATED if table in sorted_reads[0]], sorted_reads[0]


def test_the_page_holds_the_jobs_in_their_order_with_their_related_rows(fleet) -> None:
    for i, gpus in enumerate([3, 8, 1, 5, 2, 7]):
        f.make_job(fleet.ml if i % 2 else fleet.vision, gpus=gpus, name=f"j{i}")
    admin = client_for(fleet, "admin")

    first = admin.get(f"{J}/jobs/?ordering=-gpus&limit=4").json()
    second = admin.get(f"{J}/jobs/?ordering=-gpus&limit=4&offset=4").json()

    assert [(j["name"], j["gpus"], j["team"]) for j in first["results"]] == [
        ("j1", 8, "ml"), ("j5", 7, "ml"), ("j3", 5, "ml"), ("j0", 3, "vision")]
    assert [j["name"] for j in second["results"]] == ["j4", "j2"]
    assert first["count"] == 6


def test_the_jobs_page_sorts_its_ids_alone_too(fleet) -> None:
    for i, gpus in enumerate([3, 8, 1]):
        f.make_job(fleet.ml, gpus=gpus, name=f"j{i}")
    admin = client_for(fleet, "admin")
    admin.force_login(fleet.users["admin"])  # the page signs in by session

    sorted_reads = _sorted_reads(admin, "/jobs/?ordering=-gpus")

    assert len(sorted_reads) == 1
    assert not [table for table in RELATED if table in sorted_reads[0]], sorted_reads[0]
    assert [job.name for job in admin.get("/jobs/?ordering=-gpus").context["jobs"]] == ["j1", "j0", "j2"]
