"""The jobs list keeps up without a reload: its live update (`/ui/jobs.json` with `after`, the
newest job id the page had seen) re-reads the list under the page's filters, sort and page,
and brings its count, its rows' ages, and the jobs submitted since: rows for the top of the
first page newest first, else a notice of how many and where (services/job_pages.news_in_place).

Found walking the product as a researcher (6 Dec): a job submitted from qm or the API never
appeared until a reload, and the count and the "N s ago" froze; only the state cells moved."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import parse_qs

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.models import Job

pytestmark = pytest.mark.django_db


def _live(html: str) -> tuple[str, dict[str, list[str]]]:
    """The page's live URL and its extra parameters (the rows shown, the newest id seen)."""
    url = re.search(r'data-live-url="([^"]*)"', html)
    extra = re.search(r'data-live-extra="([^"]*)"', html)
    assert url is not None and extra is not None
    return url.group(1).replace("&amp;", "&"), parse_qs(extra.group(1).replace("&amp;", "&"))


def _poll(client, url: str, extra: dict[str, list[str]]) -> dict:
    query = "&".join(f"{k}={v[0]}" for k, v in extra.items())
    response = client.get(url + ("&" if "?" in url else "?") + query)
    assert response.status_code == 200, response.content[:300]
    return response.json()


def test_a_job_submitted_meanwhile_comes_in_at_the_top_with_the_count(client_for, submit_as) -> None:
    old = submit_as("alice", name="old")
    client = client_for("alice")
    url, extra = _live(client.get("/jobs/").content.decode())
    assert extra["ids"] == [str(old.pk)]

    new = submit_as("alice", name="from-the-cli")
    submit_as("bob", name="another-team")  # not alice's to see
    body = _poll(client, url, extra)

    (row,) = body["rows"]
    assert f'<tr data-job="{new.pk}">' in row and "from-the-cli" in row
    assert f'data-live="job-age-{new.pk}"' in row
    assert body["html"]["jobs-count"].strip() == "2 jobs"
    assert body["html"]["jobs-new"] == ""
    assert body["after"] == new.pk  # the next poll asks after it: bob's job is no news to alice
    assert body["said"] == f"New in this list: job {new.pk} from-the-cli."
    assert body["text"][f"job-age-{old.pk}"].endswith(" ago")

    again = _poll(client, url, {"ids": [f"{new.pk},{old.pk}"], "after": [str(body["after"])]})
    assert again["rows"] == [] and again["said"] == ""  # told once


def test_the_ages_advance(client_for, submit_as) -> None:
    job = submit_as("alice", name="aging")
    Job.objects.filter(pk=job.pk).update(submitted_at=job.submitted_at - timedelta(hours=3))
    body = client_for("alice").get(f"/ui/jobs.json?ids={job.pk}").json()
    assert body["text"] == {f"job-age-{job.pk}": "3.0 h ago"}


def test_only_jobs_matching_the_filters_come_in(client_for, submit_as) -> None:
    client = client_for("alice")
    url, extra = _live(client.get("/jobs/?name=sweep").content.decode())
    assert "name=sweep" in url

    submit_as("alice", name="other")
    matching = submit_as("alice", name="sweep")
    body = _poll(client, url, extra)

    assert [re.search(r'data-job="(\d+)"', row).group(1) for row in body["rows"]] == [str(matching.pk)]
    assert body["html"]["jobs-count"].strip() == "1 job"


def test_another_sort_says_how_many_and_moves_no_row(client_for, submit_as) -> None:
    submit_as("alice", name="b")
    client = client_for("alice")
    url, extra = _live(client.get("/jobs/?ordering=name").content.decode())

    submit_as("alice", name="a")
    submit_as("alice", name="c")
    body = _poll(client, url, extra)

    assert body["rows"] == []
    notice = body["html"]["jobs-new"]
    assert "2 new jobs in this list since it was read, in their places among its rows" in notice
    assert 'href="?ordering=name&amp;page=1">show them</a>' in notice
    assert body["said"].startswith("2 new jobs in this list")
    assert body["after"] == int(extra["after"][0])  # told until shown
    assert body["html"]["jobs-count"].strip() == "3 jobs"


def test_a_later_page_newest_first_links_to_the_first(client_for, submit_as) -> None:
    for i in range(51):
        submit_as("alice", name=f"j{i}", gpus=1)
    client = client_for("alice")
    url, extra = _live(client.get("/jobs/?page=2").content.decode())
    assert "page=2" in url

    submit_as("alice", name="newest", gpus=1)
    body = _poll(client, url, extra)

    assert body["rows"] == []
    assert "1 new job in this list since it was read, on its first page" in body["html"]["jobs-new"]
    assert 'href="?">show it</a>' in body["html"]["jobs-new"]
    assert body["html"]["jobs-count"].strip() == "52 jobs, page 2 of 2"


def test_the_list_poll_reads_in_a_fixed_number_of_queries(client_for, submit_as) -> None:
    client = client_for("alice")
    url, extra = _live(client.get("/jobs/").content.decode())

    def queries(news: int) -> int:
        for i in range(news):
            submit_as("alice", name=f"n{i}")
        with CaptureQueriesContext(connection) as captured:
            _poll(client, url, extra)
        return len(captured)

    assert queries(1) == queries(5)


@pytest.mark.parametrize("after", ["soon", "-1", str(2**63), "\u0661"])
def test_an_after_that_is_no_id_is_refused(client_for, after) -> None:
    """2^63 is a whole number, which "not a whole number" said it was not: it is no job id."""
    response = client_for("alice").get("/ui/jobs.json", {"ids": "", "after": after})
    assert response.status_code == 400
    assert response.json()["errors"] == {"after": ["not a job id (a whole number from 0 to 2^63 - 1)"]}


@pytest.mark.parametrize("ids", ["soon", "1,-2", str(2**63), f"1,{10**23}", "\u0661"])
def test_ids_that_are_no_job_ids_are_refused(client_for, ids) -> None:
    """An id past the table's bigint was a 500 (the database's overflow), not a 400."""
    response = client_for("alice").get("/ui/jobs.json", {"ids": ids})
    assert response.status_code == 400
    assert response.json()["errors"] == {"ids": ["not job ids (whole numbers from 0 to 2^63 - 1)"]}
    assert client_for("alice").get("/ui/jobs.json", {"ids": f"1,{2**63 - 1}"}).status_code == 200


def test_an_empty_list_polls_too(client_for, demo) -> None:
    html = client_for("alice").get("/jobs/").content.decode()
    url, extra = _live(html)
    assert url.startswith("/ui/jobs.json") and extra["after"]
    assert "data-live-rows-empty" in html
