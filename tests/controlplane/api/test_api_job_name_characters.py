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


@pytest.mark.parametrize(("name", "said"), [
    ("evil\x1b[31mRED", "a control character (U+001B, an escape) at position 5"),
    ("two\nlines", "a control character (U+000A, a new line) at position 4: it is one line of text"),
    ("tab\there", "a control character (U+0009, a tab) at position 4: it is one line of text"),
    ("c\rr", "a control character (U+000D, a carriage return) at position 2"),
    ("del\x7f", "a control character (U+007F) at position 4"),
    ("c1\x9b31m", "a control character (U+009B) at position 3"),
    ("abc\u202edcba", "a bidirectional control (U+202E) at position 4"),
    ("iso\u2066late", "a bidirectional control (U+2066) at position 4"),
])
@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/job-arrays/"])
def test_a_name_with_control_characters_is_a_400_naming_it(fleet, alice, name, said, path) -> None:
    body = {"name": name, "gpus": 1, **({"array": "0-1"} if "arrays" in path else {})}

    r = alice.post(path, body, format="json")

    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {"name": [f"contains {said}"]}, r.json()
    assert not Job.objects.exists()
    assert s.plain_submit_request(body, s.JobArraySubmitSerializer if "arrays" in path else s.JobSubmitSerializer) is None


@pytest.mark.parametrize("name", ["ünïcödé-训练", "emoji 👩‍👩‍👧 family", "spaces are fine", "a/b:c=d"])
def test_visible_unicode_names_are_accepted(fleet, alice, name) -> None:
    r = alice.post("/api/v1/jobs/", {"name": name, "gpus": 1}, format="json")

    assert r.status_code == 201, r.json()
    assert r.json()["name"] == name


# Found by the API audit (4 Dec): Unicode's own line breaks passed the check ("a\u2028b" was
# accepted as a one-line name), and so did a name of nothing but format characters: a job named
# "\u200b" (a zero-width space) was listed with a blank name everywhere.
@pytest.mark.parametrize("name", ["line\u2028separator", "paragraph\u2029separator"])
@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/job-arrays/"])
def test_a_name_with_a_unicode_line_break_is_a_400_naming_it(fleet, alice, name, path) -> None:
    body = {"name": name, "gpus": 1, **({"array": "0-1"} if "arrays" in path else {})}

    r = alice.post(path, body, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["name"] and "separator (U+202" in r.json()["detail"]
    assert not Job.objects.exists()
    assert s.plain_submit_request(body, s.JobArraySubmitSerializer if "arrays" in path else s.JobSubmitSerializer) is None


@pytest.mark.parametrize("name", ["\u200b", "\u200b\u200b\u200b", "\ufeff", "\u00ad", "\u2060", "\u200b \u200d"],
                         ids=["zero-width space", "three of them", "byte order mark", "soft hyphen", "word joiner",
                              "zero-width space, space and joiner"])
def test_a_name_of_nothing_visible_is_a_400_naming_it(fleet, alice, name) -> None:
    body = {"name": name, "gpus": 1}

    r = alice.post("/api/v1/jobs/", body, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["name"]
    assert "at least one visible character" in r.json()["errors"]["name"][0]
    assert not Job.objects.exists()
    assert s.plain_submit_request(body, s.JobSubmitSerializer) is None


def test_a_rename_to_nothing_visible_is_refused_and_the_name_kept(fleet, alice) -> None:
    made = alice.post("/api/v1/jobs/", {"name": "train", "gpus": 1, "hold": True}, format="json")
    assert made.status_code == 201, made.json()

    r = alice.patch(f"/api/v1/jobs/{made.json()['id']}/", {"name": "\u200b"}, format="json")

    assert r.status_code == 400 and list(r.json()["errors"]) == ["name"], r.json()
    assert Job.objects.get(pk=made.json()["id"]).name == "train"


@pytest.mark.parametrize("name", ["soft\u00adhyphen", "zero\u200bwidth", "\u200bleading"])
def test_format_characters_beside_visible_ones_are_kept(fleet, alice, name) -> None:
    r = alice.post("/api/v1/jobs/", {"name": name, "gpus": 1}, format="json")

    assert r.status_code == 201, r.json()
    assert r.json()["name"] == name
