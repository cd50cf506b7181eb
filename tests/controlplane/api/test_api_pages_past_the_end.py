"""Every paginated list answers an offset past its end with honest links, and refuses one no
storage can represent.

Until 5 Dec `GET jobs/239/runs/?offset=99999999999999999999` answered 200 with
`"previous": ".../runs/?limit=50&offset=999999950"` (the offset silently capped at a billion,
then stepped back one page), and `jobs/?offset=5000` of a list of three said `previous:
?offset=4950`: links to pages that are not there. Now an offset past the end is an empty page
whose `previous` is the list's last real page (`offset` = count − limit, as `qm list` says it),
and one beyond 2⁶³−1 (PostgreSQL's bigint, the bound of every id) is a 400 naming `offset`.
One place: controlplane/api/pagination.py, used by every list."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from tests.controlplane import factories as f
from tests.controlplane.job_runs_story import preempted_then_succeeded

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"
BIGINT = 2**63 - 1


def _query(link: str | None) -> dict[str, list[str]] | None:
    return None if link is None else parse_qs(urlsplit(link).query)


def _jobs(fleet: Any, n: int) -> None:
    for i in range(n):
        f.make_job(fleet.ml, submitter=fleet.users["owner"], name=f"past-end-{i}", gpus=1)


@pytest.mark.parametrize("offset", ["10", "5000", str(BIGINT)])
def test_an_offset_past_the_end_links_back_to_the_last_real_page(fleet, alice, offset) -> None:
    _jobs(fleet, 3)

    r = alice.get(J, {"limit": 2, "offset": offset})

    assert r.status_code == 200, r.content[:300]
    body = r.json()
    assert (body["count"], body["results"], body["next"]) == (3, [], None)
    assert _query(body["previous"]) == {"limit": ["2"], "offset": ["1"]}
    # and that page is real: the last two jobs
    last = alice.get(body["previous"]).json()
    assert len(last["results"]) == 2 and last["next"] is None


def test_past_the_end_of_a_short_list_the_previous_page_is_the_first(fleet, alice) -> None:
    _jobs(fleet, 3)
    body = alice.get(J, {"offset": 7}).json()
    # 3 jobs, 50 a page: the last real page is the first (no offset at all, as DRF links it)
    assert body["results"] == [] and _query(body["previous"]) == {"limit": ["50"]}
    empty = alice.get(J, {"offset": 7, "name": "nothing-named-so"}).json()
    assert empty["count"] == 0 and _query(empty["previous"]) == {"limit": ["50"], "name": ["nothing-named-so"]}


def test_an_offset_inside_the_list_keeps_its_links(fleet, alice) -> None:
    _jobs(fleet, 5)
    body = alice.get(J, {"limit": 2, "offset": 3}).json()
    assert len(body["results"]) == 2 and body["next"] is None
    assert _query(body["previous"]) == {"limit": ["2"], "offset": ["1"]}
    body = alice.get(J, {"limit": 2, "offset": 1}).json()
    assert _query(body["previous"]) == {"limit": ["2"]} and _query(body["next"]) == {"limit": ["2"], "offset": ["3"]}


@pytest.mark.parametrize("offset", [str(BIGINT + 1), "99999999999999999999", "9" * 5000])
def test_an_offset_beyond_a_bigint_is_refused_naming_it(fleet, alice, offset) -> None:
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="train", gpus=2)
    preempted_then_succeeded(job, fleet.nodes[1], fleet.nodes[2], now=timezone.now())
    for path in (J, f"{J}{job.pk}/runs/", f"{J}{job.pk}/events/", "/api/v1/events/"):
        r = alice.get(path, {"offset": offset})
        assert r.status_code == 400, (path, r.content[:300])
        (said,) = r.json()["errors"]["offset"]
        assert said == (f"'{offset[:40]}' is beyond the largest offset, 9223372036854775807 (2⁶³−1): "
                        "give a whole number from 0 to 9223372036854775807."), said


def test_a_jobs_runs_past_the_end_link_back_to_its_last_run(fleet, alice) -> None:
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="train", gpus=2)
    preempted_then_succeeded(job, fleet.nodes[1], fleet.nodes[2], now=timezone.now())

    body = alice.get(f"{J}{job.pk}/runs/", {"offset": "99999999999", "limit": 1}).json()

    assert (body["count"], body["results"], body["next"]) == (2, [], None)
    assert _query(body["previous"]) == {"limit": ["1"], "offset": ["1"]}
    assert [x["run"] for x in alice.get(body["previous"]).json()["results"]] == [2]


def test_the_schema_says_the_bounds_of_offset(fleet, alice) -> None:
    schema = alice.get("/api/schema/", {"format": "json"}).json()
    (offset,) = [p for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"] if p["name"] == "offset"]
    assert (offset["schema"]["minimum"], offset["schema"]["maximum"]) == (0, BIGINT)
