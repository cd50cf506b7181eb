"""A text query parameter (`?name=`, `?team=`, `?reason=`, a hooks list's `?user=`) is read by the
one rule for text (services/plain_text.py) a body's text field is read by: a NUL, an escape, a
bidirectional control or a new line is a 400 naming the parameter, in the body's words.

Found 7 Dec: a NUL was refused in Django's words ("Null characters are not allowed."), not the
rule's; an escape or a right-to-left override in `?name=`, `?name_exact=` or `?reason=` was
looked for and listed nothing (a 200, as if no job had that name), and in a record's name
(`?team=`, `?node=`) was echoed back inside "no team named '…'" to whoever prints the answer.
A value longer than the column it is compared with holds (a 10,000-character `?name=`) was a 200
listing nothing: it is a 400 naming the parameter and its limit, never a 500."""

from __future__ import annotations

import django_filters as filters
import pytest
from rest_framework.test import APIClient

from controlplane import filtersets
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db

#: Each filterset of the API's lists, and one list that reads it.
LISTS = {
    filtersets.JobFilterSet: "jobs/", filtersets.JobHistoryFilterSet: "jobs/history.csv",
    filtersets.TeamFilterSet: "teams/", filtersets.ProjectFilterSet: "projects/",
    filtersets.CohortFilterSet: "cohorts/", filtersets.QuotaFilterSet: "quotas/",
    filtersets.PriorityClassFilterSet: "priority-classes/", filtersets.GpuTypeFilterSet: "gpu-types/",
    filtersets.PriceRateFilterSet: "price-rates/", filtersets.NodeFilterSet: "nodes/",
    filtersets.EventFilterSet: "events/", filtersets.MaintenanceWindowFilterSet: "maintenance-windows/",
}
TEXT_PARAMETERS = [(path, name) for filterset, path in LISTS.items()
                   for name, one in filterset.base_filters.items()
                   if isinstance(one, filters.CharFilter) and not isinstance(one, filters.UUIDFilter)]


def test_every_filterset_is_here_and_every_text_filter_is_read_by_the_rule() -> None:
    everyone = {cls for cls in vars(filtersets).values()
                if isinstance(cls, type) and issubclass(cls, filtersets.ListFilterSet) and cls is not filtersets.ListFilterSet}
    assert everyone == set(LISTS)
    plain = [f"{path}?{name}" for path, name in TEXT_PARAMETERS
             if not isinstance(next(f for c, p in LISTS.items() if p == path for n, f in c.base_filters.items()
                                    if n == name), filtersets.TextFilter)]
    assert not plain, plain
    assert len(TEXT_PARAMETERS) > 20


@pytest.mark.parametrize(("path", "name"), TEXT_PARAMETERS, ids=[f"{p}?{n}" for p, n in TEXT_PARAMETERS])
@pytest.mark.parametrize(("text", "said"), [
    ("a\x00b", "contains a control character (U+0000, a NUL) at position 2"),
    ("red\x1b[31m", "contains a control character (U+001B, an escape) at position 4"),
    ("ab\u202ecd", "contains a bidirectional control (U+202E) at position 3"),
    ("two\nlines", "contains a control character (U+000A, a new line) at position 4: it is one line of text"),
    ("  x\x07", "contains a control character (U+0007) at position 4"),
], ids=["nul", "escape", "rlo", "new-line", "bell-after-spaces"])
def test_a_text_parameter_with_a_hiding_character_is_a_400_naming_it_in_a_bodys_words(
        admin: APIClient, fleet: Fleet, path: str, name: str, text: str, said: str) -> None:
    r = admin.get(f"/api/v1/{path}", {name: text})

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert r.json()["errors"] == {name: [said]}, r.json()


#: The longest value each text parameter takes: the length of the column it is compared with
#: (a job's name 128, a team's, project's, class's, cohort's or GPU type's name 64, a node's name
#: 128, its pool, leaf switch and spine 64, a username 150, an event's reason 64).
LONGEST = {
    "name": 128, "name_exact": 128, "team": 64, "project": 64, "priority_class": 64, "user": 150,
    "ran_on": 128, "node": 128, "cohort": 64, "gpu_type": 64, "pool": 64, "leaf_switch": 64, "spine": 64,
    "reason": 64,
}
SHORTER_NAMES = {("teams/", "name"): 64, ("projects/", "name"): 64, ("cohorts/", "name"): 64,
                 ("priority-classes/", "name"): 64, ("gpu-types/", "name"): 64}


def longest(path: str, name: str) -> int:
    return SHORTER_NAMES.get((path, name), LONGEST[name])


@pytest.mark.parametrize(("path", "name"), TEXT_PARAMETERS, ids=[f"{p}?{n}" for p, n in TEXT_PARAMETERS])
def test_a_text_parameter_longer_than_its_column_is_a_400_naming_it_and_the_limit(
        admin: APIClient, fleet: Fleet, path: str, name: str) -> None:
    """No row can hold a longer value, so none can match it: refused before the database reads
    it (a 10,000-character `?name=` was searched for in every job's name, a 200 listing nothing)."""
    limit = longest(path, name)

    for given in (limit + 1, 10_000):
        r = admin.get(f"/api/v1/{path}", {name: "x" * given})

        assert r.status_code == 400, (r.status_code, r.content[:300])
        (said,) = r.json()["errors"][name]
        assert said.startswith(f"is {given} characters long: at most {limit} are taken (no "), said
        assert said.endswith(" is longer)"), said


@pytest.mark.parametrize(("path", "name"), TEXT_PARAMETERS, ids=[f"{p}?{n}" for p, n in TEXT_PARAMETERS])
def test_a_text_parameter_as_long_as_its_column_is_read(admin: APIClient, fleet: Fleet, path: str, name: str) -> None:
    r = admin.get(f"/api/v1/{path}", {name: " " + "x" * longest(path, name) + " "})  # the spaces are trimmed

    assert r.status_code in (200, 400), r.status_code
    if r.status_code == 400:  # a record's name: "no team named 'xxx…'", the name cut short
        assert "characters long" not in str(r.json()["errors"][name]), r.json()


def test_the_length_is_said_with_the_column(admin: APIClient, fleet: Fleet) -> None:
    jobs = admin.get("/api/v1/jobs/", {"name": "x" * 129, "user": "u" * 151})
    events = admin.get("/api/v1/events/", {"reason": "r" * 65})

    assert jobs.status_code == events.status_code == 400
    assert jobs.json()["errors"] == {
        "name": ["is 129 characters long: at most 128 are taken (no job's name is longer)"],
        "user": ["is 151 characters long: at most 150 are taken (no user's username is longer)"],
    }
    assert events.json()["errors"] == {"reason": ["is 65 characters long: at most 64 are taken (no event's reason is longer)"]}


def test_a_name_filter_still_finds_by_plain_text(alice: APIClient, fleet: Fleet) -> None:
    made = alice.post("/api/v1/jobs/", {"team": "ml", "name": "résumé-train", "gpus": 1, "hold": True}, format="json")
    assert made.status_code == 201, made.json()

    r = alice.get("/api/v1/jobs/", {"name": " résumé ", "team": "ml"})

    assert r.status_code == 200, r.json()
    assert [job["id"] for job in r.json()["results"]] == [made.json()["id"]]


@pytest.mark.parametrize(("user", "said"), [
    ("alice\x1b[2J", "contains a control character (U+001B, an escape) at position 6"),
    ("\u2066alice", "contains a bidirectional control (U+2066) at position 1"),
], ids=["escape", "isolate"])
def test_the_hooks_user_parameter_is_read_by_the_rule(admin: APIClient, fleet: Fleet, user: str, said: str) -> None:
    r = admin.get("/api/v1/notification-hooks/", {"user": user})

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert r.json()["errors"] == {"user": [said]}, r.json()


def test_the_hooks_user_parameter_is_no_longer_than_a_username(admin: APIClient, fleet: Fleet) -> None:
    r = admin.get("/api/v1/notification-hooks/", {"user": "u" * 151})

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert r.json()["errors"] == {"user": ["is 151 characters long: at most 150 are taken (no user's username is longer)"]}


@pytest.mark.parametrize(("body", "field", "said"), [
    ({"team": "ml\x1b[31m", "gpu_type": "H100-80GB", "nominal_gpus": 8}, "team",
     "contains a control character (U+001B, an escape) at position 3"),
    ({"team": "ml", "gpu_type": "H100\u202e-80GB", "nominal_gpus": 8}, "gpu_type",
     "contains a bidirectional control (U+202E) at position 5"),
], ids=["team-escape", "gpu-type-rlo"])
def test_a_record_named_in_a_body_is_read_by_the_same_rule(admin: APIClient, fleet: Fleet, body: dict[str, object],
                                                           field: str, said: str) -> None:
    r = admin.post("/api/v1/quotas/", body, format="json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert r.json()["errors"][field] == [said], r.json()
