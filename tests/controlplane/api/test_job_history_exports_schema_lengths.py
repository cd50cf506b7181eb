"""The history exports' schema (`jobs/history.csv`, `jobs/history.xlsx`, whose parameters are
written out in api/job_history.py, not read from a list view's filters) says each text
parameter's `maxLength`, the length the server takes before it refuses the value: until 7 Dec
it said none, while a 129-character `?name=` was a 400 there as on `jobs/`."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db

EXPORTS = ("/api/v1/jobs/history.csv", "/api/v1/jobs/history.xlsx")
LENGTH_REFUSED = re.compile(r"^is (\d+) characters long: at most (\d+) are taken")


def _length_refused(response, name: str) -> int | None:
    """The length the server said it takes at most for `name`, if it refused that parameter's length."""
    if response.status_code != 400:
        return None
    said = [LENGTH_REFUSED.match(message) for message in response.json()["errors"].get(name, [])]
    return next((int(match.group(2)) for match in said if match), None)


@pytest.mark.parametrize("path", EXPORTS)
def test_every_text_parameter_of_a_history_export_says_the_length_the_server_takes(admin, path) -> None:
    parameters = admin.get("/api/schema/", {"format": "json"}).json()["paths"][path]["get"]["parameters"]
    said = {parameter["name"]: parameter["schema"].get("maxLength") for parameter in parameters}

    # What the server takes, asked of it: a value far too long for any column of every parameter.
    taken = {name: _length_refused(admin.get(path, {name: "x" * 5_000}), name) for name in said}
    text = {name: longest for name, longest in taken.items() if longest is not None}

    assert text == {"name": 128, "name_exact": 128, "team": 64, "project": 64, "user": 150,
                    "priority_class": 64, "node": 128, "ran_on": 128}
    assert said == {name: text.get(name) for name in said}  # and no other parameter says a length
    for name, longest in text.items():
        assert _length_refused(admin.get(path, {name: "x" * longest}), name) is None, name
        assert _length_refused(admin.get(path, {name: "x" * (longest + 1)}), name) == longest, name
