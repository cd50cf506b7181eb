"""A job's name is one line of visible text: control characters (escape sequences, new lines,
tabs) and bidirectional overrides are refused with a 400 naming `name`.

Found by hand: a job named "evil\\x1b[31mRED\\x1b[0m\\nline2" was accepted, and `qm list`
wrote the escape sequences to the terminal of whoever listed it (admins list every team's jobs)
and broke the table over two lines."""

from __future__ import annotations

import pytest

from controlplane.api import serializers as s
from controlplane.models import Job

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["evil\x1b[31mRED", "two\nlines", "tab\there", "c\rr", "del\x7f", "c1\x9b31m",
                                  "abc\u202edcba", "iso\u2066late"])
@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/job-arrays/"])
def test_a_name_with_control_characters_is_a_400_naming_it(fleet, alice, name, path) -> None:
    body = {"name": name, "gpus": 1, **({"array": "0-1"} if "arrays" in path else {})}

    r = alice.post(path, body, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["name"] and "control characters" in r.json()["detail"]
    assert not Job.objects.exists()
    assert s.plain_submit_request(body, s.JobArraySubmitSerializer if "arrays" in path else s.JobSubmitSerializer) is None


@pytest.mark.parametrize("name", ["ünïcödé-训练", "emoji 👩‍👩‍👧 family", "spaces are fine", "a/b:c=d"])
def test_visible_unicode_names_are_accepted(fleet, alice, name) -> None:
    r = alice.post("/api/v1/jobs/", {"name": name, "gpus": 1}, format="json")

    assert r.status_code == 201, r.json()
    assert r.json()["name"] == name
