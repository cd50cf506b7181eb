"""A list filtered by a choice of its own column (jobs and the history by state, nodes by state,
events by kind) is read without DISTINCT. django-filter adds one to every multiple-choice
filter, for filters across a to-many join; on a column of the row itself no row can match
twice, and the DISTINCT made PostgreSQL de-duplicate every matching row, whole (its JSON too),
before the page's LIMIT and again for its COUNT: the events of one kind answered in 410 ms with
100,000 of them (bench/scale_audit.py)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.mark.parametrize("url", [
    f"{J}/jobs/?state=pending&state=running",
    f"{J}/nodes/?state=ready",
    f"{J}/events/?kind=job.finished&kind=job.submitted",
    "/history/?state=failed",
])
def test_a_list_filtered_by_a_choice_of_its_own_column_reads_no_distinct(fleet, url) -> None:
    admin = client_for(fleet, "admin")
    if url.startswith("/history/"):
        admin.force_login(fleet.users["admin"])  # the page signs in by session

    with CaptureQueriesContext(connection) as queries:
        assert admin.get(url).status_code == 200

    # (the history's cost query reads DISTINCT job ids of its own: job_costs)
    assert [q["sql"][:120] for q in queries.captured_queries if 'SELECT DISTINCT "controlplane_' in q["sql"]] == []
