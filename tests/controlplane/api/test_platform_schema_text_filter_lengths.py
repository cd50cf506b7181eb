"""The schema says how long each text filter may be (`maxLength`): the length the server takes
before it refuses the value (filtersets.TextFilter, the column it is compared with), so a client
generated from the schema knows `?name=` of a job takes 128 characters and a team's 64."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def _parameter(schema: dict, path: str, name: str) -> dict:
    return next(p for p in schema["paths"][path]["get"]["parameters"] if p["name"] == name)


@pytest.mark.parametrize(("path", "name", "longest"), [
    ("/api/v1/jobs/", "name", 128), ("/api/v1/jobs/", "team", 64), ("/api/v1/jobs/", "user", 150),
    ("/api/v1/jobs/", "ran_on", 128), ("/api/v1/nodes/", "pool", 64), ("/api/v1/events/", "reason", 64),
    ("/api/v1/maintenance-windows/", "node", 128),
])
def test_a_text_filter_says_its_longest_value_in_the_schema(admin, path: str, name: str, longest: int) -> None:
    schema = admin.get("/api/schema/", {"format": "json"}).json()

    assert _parameter(schema, path, name)["schema"] == {"type": "string", "maxLength": longest}
    assert admin.get(path, {name: "x" * (longest + 1)}).status_code == 400
