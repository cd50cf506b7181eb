"""The schema fuzz (tests/controlplane/api/schema_fuzz.py) on jobs, job arrays and events. A bounded
number of generated requests per operation, an operation on one record drawing the ids of records
that exist too, each sent as each of the four roles: no server error and no response the schema
does not describe."""

from __future__ import annotations

import pytest

from tests.controlplane.api.schema_fuzz import fuzz_part, keep_test_connection  # noqa: F401 (fixture)

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_generated_requests_find_no_server_error_and_no_schema_violation_jobs(fleet, keep_test_connection, settings) -> None:  # noqa: F811
    assert fuzz_part("jobs", fleet, settings) >= 20
